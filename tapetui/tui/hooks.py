"""Comparison hooks in the app: which ones a person allowed (J), the question J asks, and the import it does.

tapes.toml's ``[compare]`` may name a similarity or a judge hook: a function of the project's own, imported
from its folder. The app imports none until a person allows it (J, after a question naming the module, as R
asks before it imports the registry): opening a folder never runs a user's code. Allowed hooks are kept by
the (similarity, judge) hooks a session's settings name, for the rest of the sitting.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Protocol

from tapetui.core.comparators import Hooks
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.textsafe import safe_text
from tapetui.review.sessions import Session
from tapetui.tui.host import WorkerHost
from tapetui.tui.model import hooks_text, needed_hooks

__all__ = ["HookKey", "HookPermissions"]

HookKey = tuple[str | None, str | None]
"""The (similarity, judge) hooks a session's settings name: what J allows."""


class Host(WorkerHost, Protocol):
    """What the hook permissions need of the app."""

    config: Config

    def confirm(self, title: str, body: str, then: Callable[[], None]) -> None: ...

    def hooks_imported(self) -> None: ...


class HookPermissions:
    """The comparison hooks a person allowed in this sitting, and the hooks built for the configuration in use."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.allowed: set[HookKey] = set()
        self._built: dict[HookKey, Hooks] = {}  # of the configuration in use

    def config_changed(self) -> None:
        """tapes.toml changed: the hooks built for the old settings go; the allowed modules stay allowed."""
        self._built.clear()

    def for_session(self, s: Session) -> tuple[Hooks | None, str | None]:
        """The comparison hooks to run for ``s`` (None until a person allowed them with J), and else what the
        detail pane says about the hooks its settings name (None when they name none)."""
        config = self.host.config
        settings = config.compare_for(s.name)
        if not settings.rules.needs_hooks():
            return None, None
        key = (settings.similarity_hook, settings.judge_hook)
        if key in self.allowed:
            hooks = self._built.get(key)
            if hooks is None:
                hooks = self._built[key] = Hooks.lazy(settings, config.root)
            return hooks, None
        needed = needed_hooks(settings)
        if not needed:
            return None, None
        return None, f"comparison hooks not run: press J to import {hooks_text(needed)}"

    def offered(self, s: Session | None) -> bool:
        """Whether J imports something for ``s``: its settings name hooks not allowed yet (the footer shows J)."""
        return s is not None and self.for_session(s)[1] is not None

    def ask(self, s: Session | None) -> None:
        """J: import the comparison hooks tapes.toml names for ``s``, after asking, and compare it again with them."""
        if s is None:
            return
        config = self.host.config
        settings = config.compare_for(s.name)
        needed = needed_hooks(settings)
        key = (settings.similarity_hook, settings.judge_hook)
        if not needed or key in self.allowed:
            self.host.notify(
                "No comparison hooks to import for this session."
                if not needed
                else "Its comparison hooks are imported already.",
                markup=False,
            )
            return
        body = (
            f"Comparing {s.name} under tapes.toml's [compare] rules calls a function of your own:\n"
            + "\n".join(f"  compare.{k} = {spec}" for k, spec in needed)
            + f"\n\ntapetui will import {hooks_text(needed)} from {config.root} to do it: "
            "the module's code runs in this app."
        )
        self.host.confirm("Import the comparison hooks?", body, partial(self._start, config, s.name, key, needed))

    def explain(self, s: Session | None) -> None:
        """J where there is nothing to import: say why, instead of doing nothing."""
        if s is None:
            self.host.notify("J imports the comparison hooks of the session under the cursor: move to a session.")
            return
        settings = self.host.config.compare_for(s.name)
        self.host.notify(
            safe_text(
                f"Its comparison hooks are imported already: {s.name} is compared with them."
                if needed_hooks(settings)
                else f"No comparison hooks for {s.name}: tapes.toml names no similarity or judge hook its rules use."
            ),
            markup=False,
        )

    def _start(self, config: Config, name: str, key: HookKey, needed: list[tuple[str, str]]) -> None:
        self.host.run_worker(
            partial(self._import, config, name, key, needed),
            name="_import_hooks",
            group="hooks",
            description="importing comparison hooks",
            exclusive=True,
            thread=True,
        )

    def _import(self, config: Config, name: str, key: HookKey, needed: list[tuple[str, str]]) -> None:
        """In a worker thread: import the hooks now, so that a module that cannot be imported is said here, once."""
        hooks = Hooks.lazy(config.compare_for(name), config.root)
        try:
            for k, _ in needed:
                getattr(hooks, k)
        except TapeError as e:  # ConfigError: names tapes.toml, the key and why; no traceback
            self.host.call_from_thread(self.host.show_error, e)
            return
        self.host.call_from_thread(self._imported, config, key, hooks, needed)

    def _imported(self, config: Config, key: HookKey, hooks: Hooks, needed: list[tuple[str, str]]) -> None:
        self.allowed.add(key)
        if config is self.host.config:
            self._built[key] = hooks
        self.host.notify(
            safe_text(f"Imported {hooks_text(needed)}; comparing with the hooks from now on."), markup=False
        )
        self.host.hooks_imported()
