"""The registry of live tools: callables with a schema, a pinned version and a fingerprint."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from tapetui.core.config import ttl_problem
from tapetui.core.errors import TapeError
from tapetui.core.fingerprint import LATEST_FORM, ToolManifest, in_form, tool_manifest
from tapetui.core.redact import Redactor

__all__ = ["Tool", "ToolRegistry"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Tool:
    """A registered tool. The manifests (and so the fingerprints) are computed once, at registration.

    ``manifest`` is the form-2 manifest under the default redaction rules: secret-looking
    defaults and examples redacted, safe to write to a tape; ``fingerprint`` is its fingerprint.
    ``raw_manifest`` (form 1, values verbatim: never written anywhere) verifies tapes recorded
    in form 1; it is what :func:`tapetui.tool_fingerprint` hashes. See :mod:`tapetui.core.fingerprint`.
    """

    name: str
    fn: Callable[..., Any]
    schema: dict[str, Any]
    version: str
    side_effect: bool
    ttl: float | None
    manifest: ToolManifest
    raw_manifest: ToolManifest | None = None

    @property
    def fingerprint(self) -> str:
        return self.manifest.fingerprint

    def manifest_for(self, form: int = LATEST_FORM, redactor: Redactor | None = None) -> ToolManifest:
        """This tool's manifest in fingerprint form ``form``, form 2 redacted by ``redactor``'s rules.

        Raises:
            ValueError: a form this version does not know.
        """
        raw = self.raw_manifest or self.manifest
        if form == 1:
            return raw
        if form == LATEST_FORM and (redactor is None or redactor.is_default):
            return self.manifest
        return in_form(raw, form, redactor)

    def __call__(self, args: dict[str, Any]) -> Any:
        return self.fn(**args)


class ToolRegistry:
    """Tools an agent may call, by name."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(
        self,
        fn: Callable[..., Any],
        *,
        schema: dict[str, Any] | None = None,
        version: str = "0",
        side_effect: bool = False,
        name: str | None = None,
        ttl: float | None = None,
    ) -> Tool:
        """Register ``fn`` as a tool.

        Args:
            fn: the callable; it is called with the arguments as keywords.
            schema: the JSON schema the model sees for its arguments.
            version: the pinned version of the tool's contract.
            side_effect: whether calling it changes the world (it never runs in ``replay``).
            name: the tool name; the function's name by default.
            ttl: seconds a recorded result stays fresh (declares the tool time-sensitive).

        Raises:
            TapeError: a tool of that name is already registered, or ``ttl`` is not a finite,
                positive number of seconds of at most 100 years.
        """
        schema = schema if schema is not None else {}
        tool_name = name or fn.__name__
        if tool_name in self._tools:
            raise TapeError(f"tool {tool_name!r} is already registered")
        if ttl is not None:
            problem = ttl_problem(ttl)  # finite, positive, at most 100 years: checked here, not mid-recording
            if problem:
                raise TapeError(f"tool {tool_name!r}: {problem}")
            ttl = float(ttl)
        raw = tool_manifest(fn, schema, str(version), tool_name)
        tool = Tool(tool_name, fn, schema, str(version), bool(side_effect), ttl, in_form(raw, LATEST_FORM), raw)
        self._tools[tool_name] = tool
        return tool

    def tool(
        self,
        *,
        schema: dict[str, Any] | None = None,
        version: str = "0",
        side_effect: bool = False,
        name: str | None = None,
        ttl: float | None = None,
    ) -> Callable[[F], F]:
        """Decorator form of :meth:`register`; returns the function unchanged."""

        def deco(fn: F) -> F:
            self.register(fn, schema=schema, version=version, side_effect=side_effect, name=name, ttl=ttl)
            return fn

        return deco

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise TapeError(f"no tool {name!r} in the registry (registered: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
