"""Run logs: the events of one replay, appended as they happen, read incrementally.

A run log lives beside its tape as ``<name>.run.jsonl`` and holds the latest run of
that session: a run starts by atomically replacing it with a ``start`` event, then
appends one line per event (``hit``, ``miss``, ``drift``, ``live``, ``stale``,
``fingerprint``, ``unused``) and an ``end`` event carrying the stats.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tapetui.tapefile import Appender, atomic_write, dump_line

__all__ = ["EVENT_KINDS", "RunLog", "RunLogReader", "RunSummary", "read_run_log"]

EVENT_KINDS = ("start", "hit", "miss", "drift", "live", "stale", "fingerprint", "unused", "error", "end")


class RunLog:
    """Writer of one run's events. Each event is flushed to the file when it happens."""

    def __init__(self, path: Path, start: dict[str, Any], clock: Callable[[], float] = time.time) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self._clock = clock
        atomic_write(self.path, dump_line({"event": "start", "at": clock(), **start}))
        self._out = Appender(self.path)

    def emit(self, event: str, **fields: Any) -> None:
        self._out.append(orjson.dumps({"event": event, **fields, "at": self._clock()},
                                      option=orjson.OPT_APPEND_NEWLINE, default=repr))

    def emit_many(self, events: list[dict[str, Any]]) -> None:
        if events:
            now = self._clock()
            self._out.append(b"".join(orjson.dumps({**e, "at": now}, option=orjson.OPT_APPEND_NEWLINE,
                                                   default=repr) for e in events))

    def close(self) -> None:
        self._out.close()


@dataclass
class RunLogReader:
    """Reads a growing run log from the last offset; restarts when the file is replaced.

    Complete lines only: a partial last line waits for its newline. A malformed
    complete line becomes an ``{"event": "invalid", "line": N, "problem": ...}`` event.
    """

    path: Path
    offset: int = 0
    line: int = 0
    inode: int | None = None
    _partial: bytes = field(default=b"", repr=False)

    def poll(self) -> tuple[bool, list[dict[str, Any]]]:
        """New events since the last poll, and whether the file was replaced (events restart)."""
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            reset = self.inode is not None
            self.offset, self.line, self.inode, self._partial = 0, 0, None, b""
            return reset, []
        try:
            st = os.fstat(fd)
            reset = False
            if st.st_ino != self.inode or st.st_size < self.offset:
                reset = self.inode is not None
                self.offset, self.line, self._partial = 0, 0, b""
                self.inode = st.st_ino
            size = st.st_size
            if size <= self.offset:
                return reset, []
            data = os.pread(fd, size - self.offset, self.offset)
        finally:
            os.close(fd)
        self.offset += len(data)
        data = self._partial + data
        end = data.rfind(b"\n") + 1
        self._partial = data[end:]
        events = []
        for raw in data[:end].split(b"\n")[:-1]:
            self.line += 1
            if not raw.strip():
                continue
            try:
                ev = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                ev = {"event": "invalid", "problem": f"invalid JSON: {e}"}
            if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
                ev = {"event": "invalid", "problem": "not an event object"}
            ev["line"] = self.line
            events.append(ev)
        return reset, events


def read_run_log(path: Path) -> list[dict[str, Any]]:
    """Every complete event of a run log (an empty list when there is none)."""
    return RunLogReader(Path(path)).poll()[1]


@dataclass
class RunSummary:
    """Counts of a run log and the status of each step it touched, kept up to date event by event."""

    hits: int = 0
    misses: int = 0
    drift: int = 0
    stale: int = 0
    unused: int = 0
    live: int = 0
    invalid: int = 0
    running: bool = False
    ended: bool = False
    status: dict[int, str] = field(default_factory=dict)  # recorded step → hit, drift, miss, stale, unused, contract
    drift_events: dict[int, dict[str, Any]] = field(default_factory=dict)

    def add(self, ev: dict[str, Any]) -> None:
        kind = ev.get("event")
        step = ev.get("step", ev.get("seq"))
        if kind == "start":
            self.reset()  # a new run replaces the old one
            self.running = True
        elif kind == "hit":
            self.hits += 1
            if isinstance(step, int):
                self.status.setdefault(step, "hit")
        elif kind == "miss":
            self.misses += 1
            if isinstance(ev.get("nearest"), int):
                self.status[ev["nearest"]] = "miss"
        elif kind == "drift":
            self.drift += 1
            if isinstance(step, int):
                self.status[step] = "drift"
                self.drift_events[step] = ev
        elif kind == "fingerprint" and not ev.get("allowed"):
            self.drift += 1
            if isinstance(step, int):
                self.status[step] = "contract"
                self.drift_events[step] = ev
        elif kind == "stale":
            self.stale += 1
            if isinstance(step, int):
                self.status[step] = "stale"
        elif kind == "unused":
            self.unused += 1
            if isinstance(step, int):
                self.status.setdefault(step, "unused")
        elif kind in ("live", "record"):
            self.live += 1
        elif kind == "invalid":
            self.invalid += 1
        elif kind == "end":
            self.running = False
            self.ended = True

    def reset(self) -> None:
        fresh = RunSummary()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

    @classmethod
    def of(cls, events: list[dict[str, Any]]) -> RunSummary:
        s = cls()
        for ev in events:
            s.add(ev)
        return s
