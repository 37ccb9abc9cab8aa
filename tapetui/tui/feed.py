"""The app's feed: run-log summaries read once at start, then the tapes folder watched.

Two threads share the incremental run-log readers (each byte is read once) but never at the same time:
the watcher starts first and queues what changes; the summariser reads every run log, then once more
after the watcher is up (catching what was appended in between), and only then the watcher goes on.
Both hand what they find to the app as messages (``SummariesReady``, ``RunEvents``, ``FilesChanged``);
neither touches the app's state.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.app import App

from tapetui.core.config import Config
from tapetui.core.files import file_stamp
from tapetui.core.store import golden_of
from tapetui.review.sessions import RunLogs, StepSummary, current, has_candidate
from tapetui.tui.messages import ConfigFileChanged, FilesChanged, RunEvents, SummariesReady

BATCH = 500  # summaries per SummariesReady message


class Feed:
    """Background readers for an app: ``start()`` once it is drawn, ``stop()`` when it goes."""

    def __init__(self, app: App[Any], config: Config, goldens: Callable[[], list[Path]], *, watch: bool) -> None:
        """
        Args:
            app: where the messages go and whose workers run the threads.
            config: the project; its tapes folder is read and watched.
            goldens: the sessions the app lists now (called from the threads; must not block).
            watch: watch the folder after the first read (off for tests and benchmarks that drive it).
        """
        self.app = app
        self.config = config
        self.goldens = goldens
        self.watch = watch
        self.stopping = threading.Event()
        self.watching = threading.Event()  # the watcher is in place
        self.summarised = threading.Event()  # every run log has been read once
        self.run_logs = RunLogs(config.tapes_dir)

    def start(self) -> None:
        if self.watch:
            self.app.run_worker(self._watch, thread=True, exclusive=True, group="watch")
        self.app.run_worker(self._summarise, thread=True, exclusive=True, group="summaries")

    def stop(self) -> None:
        self.stopping.set()

    def _summarise(self) -> None:
        batch: dict[Path, tuple[StepSummary, bool]] = {}
        try:
            for g in list(self.goldens()):
                if self.stopping.is_set():
                    return
                summary = current(g, StepSummary.of(self.run_logs.poll(g)[1]))
                batch[g] = (summary, has_candidate(g))
                if len(batch) >= BATCH:
                    self.app.post_message(SummariesReady(batch))
                    batch = {}
            self.app.post_message(SummariesReady(batch))
            if not self.watch:
                return
            while not self.watching.wait(0.1):
                if self.stopping.is_set():
                    return
            self._post_run_events(list(self.goldens()))
        finally:
            self.summarised.set()

    def _watch(self) -> None:
        """Watch the folder; run-log appends become RunEvents, other changes FilesChanged."""
        # deferred: watchfiles loads a native extension; importing it here, in the worker thread, keeps it
        # off the first screen's path (and out of apps made with watch=False)
        from watchfiles import watch

        tapes_dir = self.config.tapes_dir
        toml = self.config.path
        seen = file_stamp(toml)
        for changes in watch(
            tapes_dir, stop_event=self.stopping, debounce=25, step=10, rust_timeout=200, yield_on_timeout=True
        ):
            self.watching.set()  # the first yield, even an empty one, proves the watch is in place
            # tapes.toml lives in the project folder, which is not watched (it holds .venv, .git...): a stat per
            # wake-up (at least every 200 ms) sees it replaced or edited
            now = file_stamp(toml)
            if now != seen and toml is not None:
                seen = now
                self.app.post_message(ConfigFileChanged(toml))
            if not changes:
                continue
            while not self.summarised.wait(0.1):
                if self.stopping.is_set():
                    return
            paths = frozenset(p for _, raw in changes if not _hidden(p := Path(raw), tapes_dir))
            if not paths:
                continue
            self._post_run_events([g for p in paths if p.name.endswith(".run.jsonl") and (g := golden_of(p))])
            self.app.post_message(FilesChanged(paths))

    def _post_run_events(self, goldens: list[Path]) -> None:
        """Read what was appended to these sessions' run logs; one message for all of them."""
        updates = []
        for g in goldens:
            reset, events = self.run_logs.poll(g)
            if events or reset:
                updates.append((g, events, reset))
        if updates:
            self.app.post_message(RunEvents(updates))


def _hidden(path: Path, tapes_dir: Path) -> bool:
    """A file under a hidden name inside the tapes folder (``.tapetui/``, an editor's swap file): never a tape."""
    try:
        rel = path.relative_to(tapes_dir)
    except ValueError:
        return False
    return any(part.startswith(".") for part in rel.parts)
