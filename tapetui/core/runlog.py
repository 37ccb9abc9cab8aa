"""Run logs: the events of one replay, appended as they happen, read incrementally.

A run log lives beside its tape as ``<name>.run.jsonl`` and holds the latest run of
that session (or the runs that joined it: a test session's, runs that overlapped; :mod:`tapetui.core.runstart`):
a run starts by atomically replacing it with a ``start`` event, then
appends one line per event (``hit``, ``miss``, ``drift``, ``live``, ``record``, ``stale``,
``fingerprint``, ``unused``, and ``note``/``phase``, which are not calls) and an ``end`` event
carrying the stats. :data:`EventKind` is the vocabulary; a reader puts an ``invalid`` event where a line is malformed.
"""

from __future__ import annotations

import os
import stat
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

import orjson

from tapetui.core.canon import dumps
from tapetui.core.changes import json_text
from tapetui.core.errors import TapeError
from tapetui.core.files import file_kind
from tapetui.core.runstart import Run, new_run_id, open_run, run_group
from tapetui.core.tapefile import _CHUNK, MAX_LINE, Appender

__all__ = [
    "CALL_EVENTS",
    "EVENT_KINDS",
    "EXECUTED_EVENTS",
    "EventKind",
    "RunLog",
    "RunLogReader",
    "RunLogWarning",
    "RunSummary",
    "STATUS_PRECEDENCE",
    "StepStatus",
    "add_status",
    "describe_counts",
    "end_counts",
    "event_kind",
    "event_problem",
    "read_run_log",
    "status_counts",
    "step_status",
]

# Every kind of run-log event: what a run writes (start ... end), and "invalid", which a reader puts in
# place of a malformed line. A kind outside these (from a newer tapetui) is kept and ignored by readers.
EventKind = Literal[
    "start",  # the run began: mode, tape, started, golden_sha256
    # a recorded result was served (step: the recorded step; source: "candidate" from an earlier fill; tolerated,
    # recorded_key and args: served in place of a drift, as [compare.rules] and [diff] ignore excused every
    # difference of args, the call's arguments redacted and canonical, which check judges again by value)
    "hit",
    "miss",  # the call is not on the tape (nearest, changes, reason)
    "drift",  # the tape has this tool at this step with other arguments (recorded_key, changes; excused)
    "live",  # a tool ran live: a `live` policy, or a fill's miss
    "record",  # a tool ran live and was recorded (record mode)
    "stale",  # the recorded entry expired (expires_at, policy)
    "fingerprint",  # the tool's contract changed (recorded, live, allowed, explanation)
    # a tool or the model run live on replay (live=, --tape-live, tapes.toml's live) returned other than the
    # recording at its place: step, changes (its result's, or its response's, paths)
    "behaviour",
    "unused",  # a recorded step the run never consumed (at close)
    "note",  # Tape.note: kind, value (redacted), after (the step of the last call before it), phase; not a call
    "phase",  # Tape.phase: name, after; not a call
    "end",  # the run ended: stats, and error when it ended in one
    "invalid",  # a reader's stand-in for a malformed line (line, problem)
]
EVENT_KINDS: Final[frozenset[str]] = frozenset(get_args(EventKind))
# the kinds that are one call the agent made at this run's step (seq): it executed, whatever was served
EXECUTED_EVENTS: Final[frozenset[str]] = frozenset({"hit", "drift", "miss", "live", "record"})
# the kinds that are about one call at this run's step (seq)
CALL_EVENTS: Final[frozenset[str]] = EXECUTED_EVENTS | {"fingerprint", "stale"}


class RunLogWarning(UserWarning):
    """A run log could not be written (a read-only checkout, a full disk, a folder in its place).

    The replay goes on without it: a replay never needs its log, and never runs a tool because of it.
    ``Tape.stats()["run_log"]`` says ``"failed: PATH: reason"``. Turn it into an error with
    ``warnings.simplefilter("error", RunLogWarning)``, or off with ``Tape(..., run_log=False)``.
    """


class RunLog:
    """Writer of one run's events. Each event is flushed to the file when it happens.

    When the log cannot be written (at the start or at any event), it says so once with a
    :class:`RunLogWarning`, keeps the reason in ``problem`` and writes nothing more.
    """

    def __init__(self, path: Path, start: dict[str, Any], clock: Callable[[], float] = time.time) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self._clock = clock
        self.problem: str | None = None
        self._out: Appender | None = None
        self._run: Run | None = None
        self._tag: dict[str, str] = {}
        # a run of a group (a test session: tapetui.core.runstart) joins its group's runs in the file, and a run that
        # starts while another runs there joins it, each of its events tagged with its run's id; any other run
        # replaces the file
        group = run_group()
        head = {"event": "start", "at": clock(), **start, **({"group": group, "run": new_run_id()} if group else {})}
        try:
            self._run = open_run(self.path, head)
        except OSError as e:
            self._fail(e)
        else:
            self._out = self._run.out
            rid = self._run.start.get("run")
            self._tag = {"run": rid} if type(rid) is str else {}
            if not self._run.guarded:
                warnings.warn(
                    f"tapetui: {self.path}: cannot tell whether another run of this tape is running (its lock files "
                    f".{self.path.name}.lock and .live must be regular files): this run replaced the run log, and a "
                    "run still running there is cut off from it",
                    RunLogWarning,
                    stacklevel=3,
                )

    def emit(self, event: EventKind, **fields: Any) -> None:
        try:
            self._out.append(  # type: ignore[union-attr]  # None only after _fail, which replaces emit
                dumps({"event": event, **fields, **self._tag, "at": self._clock()}, newline=True, default=repr)
            )
        except OSError as e:
            self._fail(e)

    def emit_many(self, events: list[dict[str, Any]]) -> None:
        """Several events (each with its ``event`` kind, an :data:`EventKind`) in one write, at one time."""
        if events:
            now = self._clock()
            try:
                self._out.append(  # type: ignore[union-attr]  # None only after _fail, which replaces this
                    b"".join(dumps({**e, **self._tag, "at": now}, newline=True, default=repr) for e in events)
                )
            except OSError as e:
                self._fail(e)

    def _fail(self, e: OSError) -> None:
        self.problem = f"{self.path}: {e.strerror or e}"
        self.close()
        self.emit = self.emit_many = _off  # type: ignore[method-assign] # nothing more is tried, or said
        warnings.warn(
            f"tapetui: cannot write the run log ({self.problem}); the replay goes on without it, "
            "so the app and `tapetui check` will not see this run",
            RunLogWarning,
            stacklevel=4,
        )

    def close(self) -> None:
        """No more events: the run no longer runs (a run starting now replaces the file)."""
        if self._run is not None:
            self._run.close()
            self._run = None
        self._out = None


def _off(*args: Any, **kwargs: Any) -> None:
    return None


def _run_of(ev: dict[str, Any]) -> str:
    """The id of the run an event is of: its ``run``, or "" for the one run without an id."""
    rid = ev.get("run")
    return rid if type(rid) is str else ""


def _changes(kind: str, name: str, value: Any) -> str | None:
    if type(value) is list and all(type(c) is list and len(c) == 3 and type(c[0]) is str for c in value):
        return None
    return f"{kind} event: 'changes' must be a list of [path, old, new], got {_shape(value)}"


def _explanation(kind: str, name: str, value: Any) -> str | None:
    if type(value) is list and all(type(x) is str for x in value):
        return None
    return f"{kind} event: 'explanation' must be a list of strings, got {_shape(value)}"


def _error(kind: str, name: str, value: Any) -> str | None:
    if kind != "end" or (
        type(value) is dict and type(value.get("type", "")) is str and type(value.get("message", "")) is str
    ):
        return None  # live and record events carry a flag named error
    return f"end event: 'error' must be an object with a string 'type' and 'message', got {_shape(value)}"


def _stats(kind: str, name: str, value: Any) -> str | None:
    return None if type(value) is dict else f"{kind} event: 'stats' must be an object, got {_shape(value)}"


def _label(kind: str, name: str, value: Any) -> str | None:
    """``kind`` and ``phase`` of a note event, ``name`` of a phase event: strings (other events may use the names)."""
    if (kind != "note" and kind != "phase") or type(value) is str:
        return None
    return f"{kind} event: '{name}' must be a string, got {_shape(value)}"


def _after(kind: str, name: str, value: Any) -> str | None:
    if (kind != "note" and kind != "phase") or (type(value) is int and value >= 0):
        return None
    return f"{kind} event: 'after' must be a step number (an integer >= 0), got {_shape(value)}"


def _excuses(kind: str, name: str, value: Any) -> str | None:
    """``tolerated`` of a hit, ``excused`` of a drift: the differences a rule excused."""
    if type(value) is list and all(
        type(e) is dict and all(type(e.get(k)) is str for k in ("path", "rule", "text")) for e in value
    ):
        return None
    return f"{kind} event: '{name}' must be a list of {{path, rule, text}} objects, got {_shape(value)}"


# what a note or phase event cannot do without: its label
_REQUIRED: dict[str, str] = {"note": "kind", "phase": "name"}


# The fields whose type the readers of events (check, the app, stats) rely on: a type, or a checker called
# when the value is not None and not of the type. Unknown fields are kept as they are.
_FIELDS: dict[str, Any] = {
    "seq": int,
    "step": int,
    "nearest": int,
    **dict.fromkeys(
        (
            "tool",
            "key",
            "recorded_key",
            "reason",
            "policy",
            "expires_at",
            "recorded",
            "live",
            "mode",
            "problem",
            "run",
            "group",
        ),
        str,
    ),
    "changes": _changes,
    "explanation": _explanation,
    "error": _error,
    "stats": _stats,
    **dict.fromkeys(("kind", "name", "phase"), _label),
    "after": _after,
    "tolerated": _excuses,
    "excused": _excuses,
}


def event_kind(ev: dict[str, Any]) -> EventKind | None:
    """The kind of an event, when it is one tapetui writes or reads (:data:`EVENT_KINDS`), else None: a
    kind from a newer tapetui, which readers keep and ignore."""
    kind = ev.get("event")
    return kind if kind in EVENT_KINDS else None  # a str in EVENT_KINDS is an EventKind


def event_problem(ev: Any) -> str | None:
    """What is wrong with a run-log event, or None when readers can use it as tapetui writes it.

    The fields readers rely on are checked for every kind; a kind outside :data:`EVENT_KINDS` is not a
    problem (a newer tapetui may write one: readers ignore it, see :func:`event_kind`)."""
    if type(ev) is not dict:
        return f"an event must be a JSON object, got {_shape(ev)}"
    kind = ev.get("event")
    if type(kind) is not str:
        return f"'event' must be a string, got {_shape(kind)}"
    get = _FIELDS.get
    for name, value in ev.items():  # one pass, a dict lookup per field: about half a microsecond an event
        expected = get(name)
        if expected is None or value is None or type(value) is expected:
            continue
        if expected is int or expected is str:
            return (
                f"{kind} event: '{name}' must be {'an integer' if expected is int else 'a string'}, got {_shape(value)}"
            )
        problem: str | None = expected(kind, name, value)
        if problem is not None:
            return problem
    label = _REQUIRED.get(kind)
    if label is not None and (type(ev.get(label)) is not str or not ev[label]):
        return f"{kind} event: '{label}' must be a non-empty string, got {_shape(ev.get(label))}"
    return None


def _shape(value: Any) -> str:
    """A malformed event's value as its problem quotes it: short, and redacted (a secret in clear is never shown)."""
    try:
        text = json_text(value)
    except TypeError:  # a value JSON has no form for even through repr
        text = type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class RunLogReader:
    """Reads a growing run log from the last offset; restarts when the file is replaced.

    Complete lines only: a partial last line waits for its newline. A malformed complete line
    (not JSON, not an event object, or a field of the wrong type, see :func:`event_problem`)
    becomes an ``{"event": "invalid", "line": N, "problem": ...}`` event. Reads in chunks:
    time linear in what was appended, memory for a chunk plus the longest complete line (a line
    longer than :data:`~tapetui.core.tapefile.MAX_LINE` is an invalid event, never held whole).

    Raises (from :meth:`poll`):
        TapeError: the run log is a FIFO, a folder or anything but a regular file, or unreadable.
    """

    path: Path
    offset: int = 0
    line: int = 0
    inode: int | None = None
    _partial: bytes = field(default=b"", repr=False)
    _long_from: int = field(default=-1, repr=False)  # where a line longer than a chunk began (not held), or -1

    def poll(self) -> tuple[bool, list[dict[str, Any]]]:
        """New events since the last poll, and whether the file was replaced (events restart)."""
        try:  # O_NONBLOCK: a FIFO named like a run log must not block the open
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            reset = self.inode is not None
            self._restart(None)
            return reset, []
        except OSError as e:
            raise TapeError(f"{self.path}: cannot read run log: {e.strerror or e}") from None
        events: list[dict[str, Any]] = []
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise TapeError(
                    f"{self.path}: not a regular file ({file_kind(st.st_mode)}); a run log must be a plain file"
                )
            reset = False
            if st.st_ino != self.inode or st.st_size < self.offset:
                reset = self.inode is not None
                self._restart(st.st_ino)
            size = st.st_size
            while self.offset < size:
                at = self.offset
                data = os.pread(fd, min(size - at, _CHUNK), at)
                if not data:
                    break
                self.offset += len(data)
                self._take(fd, at, data, events)
        except OSError as e:
            raise TapeError(f"{self.path}: cannot read run log: {e.strerror or e}") from None
        finally:
            os.close(fd)
        return reset, events

    def _restart(self, inode: int | None) -> None:
        self.offset, self.line, self.inode, self._partial, self._long_from = 0, 0, inode, b"", -1

    def _take(self, fd: int, at: int, data: bytes, events: list[dict[str, Any]]) -> None:
        """Turn ``data`` (read at offset ``at``) and what was held before it into events."""
        if self._long_from >= 0:  # inside a line longer than a chunk: find its end, then read it whole
            nl = data.find(b"\n")
            if nl < 0:
                return
            start, length = self._long_from, at + nl + 1 - self._long_from
            self._long_from = -1
            if length > MAX_LINE:
                self.line += 1
                events.append(
                    {
                        "event": "invalid",
                        "line": self.line,
                        "problem": f"line is {length:,} bytes long, more than the {MAX_LINE:,} a run log line may have",
                    }
                )
            else:
                self._lines(os.pread(fd, length, start), events)
            data = data[nl + 1 :]
        buf = self._partial + data if self._partial else data
        end = buf.rfind(b"\n") + 1
        if end == 0:
            if len(buf) > _CHUNK:  # no newline in sight: note where the line began, stop holding it
                self._long_from, self._partial = self.offset - len(buf), b""
            else:
                self._partial = buf
            return
        self._partial = buf[end:]
        self._lines(buf[:end], events)

    def _lines(self, data: bytes, events: list[dict[str, Any]]) -> None:
        raws = data.split(b"\n")
        raws.pop()
        try:
            evs = list(map(orjson.loads, raws))  # a run log as tapetui writes it: every line decoded in one pass
        except orjson.JSONDecodeError:
            self._line_by_line(raws, events)
            return
        for i, problem in _problems(evs):
            evs[i] = {"event": "invalid", "problem": problem}
        line = self.line
        for ev in evs:
            line += 1
            ev["line"] = line
        self.line = line
        events += evs

    def _line_by_line(self, raws: list[bytes], events: list[dict[str, Any]]) -> None:
        for raw in raws:
            self.line += 1
            if not raw.strip():
                continue
            try:
                ev = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                ev = {"event": "invalid", "problem": f"invalid JSON: {e}"}
            else:
                problem = event_problem(ev)
                if problem is not None:
                    ev = {"event": "invalid", "problem": problem}
            ev["line"] = self.line
            events.append(ev)


def _problems(evs: list[Any]) -> list[tuple[int, str]]:
    """``(position, problem)`` of each event :func:`event_problem` finds wrong, in order."""
    return [(i, p) for i, p in enumerate(map(event_problem, evs)) if p is not None]


def read_run_log(path: Path) -> list[dict[str, Any]]:
    """Every complete event of a run log (an empty list when there is none).

    Raises:
        TapeError: the run log is not a regular file (a FIFO, a folder...) or cannot be read.
    """
    return RunLogReader(Path(path)).poll()[1]


# ---- one status per step --------------------------------------------------------------------------
StepStatus = Literal["contract", "drift", "miss", "stale", "hit", "unused"]

# A step's status when a run said several things of it (stale, then missed, then unused): the first of
# these it was given. What asks most of the reviewer wins; each recorded step is counted once. The tree,
# the detail pane, the run log's ``end`` line, ``tapetui stats`` and ``Tape.stats()["statuses"]`` all
# count steps by this one rule.
STATUS_PRECEDENCE: tuple[StepStatus, ...] = ("contract", "drift", "miss", "stale", "hit", "unused")
_RANK: dict[str, int] = {name: i for i, name in enumerate(STATUS_PRECEDENCE)}


def step_status(kind: str, ev: Mapping[str, Any]) -> tuple[int | None, StepStatus | None]:
    """The recorded step an event of ``kind`` speaks of and the status it gives that step; ``(None, status)``
    for a miss near no recorded step (a call the tape never had); ``(None, None)`` for an event that gives none."""
    if kind == "miss":
        near = ev.get("nearest")
        return (near if type(near) is int else None), "miss"
    if kind == "fingerprint":
        kind = "contract" if not ev.get("allowed") else ""
    if kind not in _RANK:
        return None, None
    step = ev.get("step", ev.get("seq"))
    return (step if type(step) is int else None), kind  # type: ignore[return-value]


def add_status(status: dict[int, str], step: int, kind: str) -> None:
    """Give ``step`` the status ``kind`` unless it has one that comes first in :data:`STATUS_PRECEDENCE`."""
    old = status.get(step)
    if old is None or _RANK[kind] < _RANK.get(old, len(_RANK)):
        status[step] = kind


def status_counts(status: Mapping[int, str]) -> dict[str, int]:
    """Steps per status, in :data:`STATUS_PRECEDENCE` order (only the statuses some step has)."""
    out: dict[str, int] = dict.fromkeys(STATUS_PRECEDENCE, 0)
    for st in status.values():
        if st in out:
            out[st] += 1
    return {k: v for k, v in out.items() if v}


def describe_counts(by: Mapping[str, int], *, off_tape: int = 0, tolerated: int = 0) -> str:
    """Steps per status in words, as every front says them: ``3 hits, 1 miss, 0 drift, 0 stale, 1 unused``
    (``contract`` only when some step has it; ``off_tape``: misses near no recorded step, counted with the
    misses; ``tolerated``: how many of the hits were tolerated)."""
    hits, misses = by.get("hit", 0), by.get("miss", 0) + off_tape
    parts = [f"{hits} hit{'s' * (hits != 1)}" + (f" ({tolerated} tolerated)" if tolerated else "")]
    parts.append(f"{misses} miss{'es' * (misses != 1)}")
    parts += [f"{by.get(k, 0)} {k}" for k in ("drift", "contract", "stale", "unused") if k != "contract" or by.get(k)]
    return ", ".join(parts)


def end_counts(stats: Mapping[str, Any]) -> str:
    """An ``end`` event's ``stats`` in words (:func:`describe_counts`): by its ``statuses`` (one status a step),
    or, in a run log of an older tapetui without them, by its event counters."""
    by = stats.get("statuses")
    if isinstance(by, dict):
        clean = {k: v for k, v in by.items() if isinstance(k, str) and type(v) is int}
        off = stats.get("off_tape", 0)
        return describe_counts(clean, off_tape=off if type(off) is int else 0)
    num = {k: v if type(v) is int else 0 for k, v in stats.items()}
    return describe_counts(
        {
            "hit": num.get("tape_hits", 0),
            "miss": num.get("tape_misses", 0),
            "drift": num.get("drift_events", 0),
            "stale": num.get("stale", 0),
            "unused": num.get("unused", 0),
        }
    )


@dataclass
class RunSummary:
    """Counts of a run log and the status of each step it touched, kept up to date event by event."""

    hits: int = 0
    tolerated: int = 0  # hits served in place of a drift (counted in hits too)
    misses: int = 0
    drift: int = 0
    stale: int = 0
    unused: int = 0
    live: int = 0
    invalid: int = 0
    running: bool = False
    ended: bool = False
    # recorded step → its one status (STATUS_PRECEDENCE: contract, drift, miss, stale, hit, unused)
    status: dict[int, str] = field(default_factory=dict)
    off_tape: int = 0  # misses that name no recorded step (calls the tape never had)
    mode: str | None = None  # the run's mode (its start event): "record" is a recording, not a replay
    drift_events: dict[int, dict[str, Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)  # "line N: what is wrong", for malformed events (first 100)
    golden_sha256: str | None = None  # the golden the run played against (its start event), when it says
    outdated: bool = False  # the run played against an earlier golden: its findings are history, not drift
    open_runs: set[str] = field(default_factory=set)  # runs started and not ended, by their ids ("": the one without)

    def add(self, ev: dict[str, Any]) -> None:
        problem = event_problem(ev)  # events from RunLogReader are checked already; others may be anything
        if problem is not None or ev.get("event") == "invalid":
            self.invalid += 1
            if len(self.problems) < 100:
                line = ev.get("line") if type(ev) is dict else None
                self.problems.append(
                    f"line {line if type(line) is int else '?'}: {problem or ev.get('problem') or 'invalid event'}"
                )
            return
        kind = event_kind(ev)
        at, status = step_status(kind or "", ev)
        if at is not None and status is not None:
            add_status(self.status, at, status)  # one status a step, by STATUS_PRECEDENCE
        if kind == "start":
            if type(ev.get("run")) is not str:
                self.reset()  # a new run replaces the old one; runs that joined (each with its id) add up
            self.running = True
            self.open_runs.add(_run_of(ev))
            self.mode = ev.get("mode") if isinstance(ev.get("mode"), str) else None
            sha = ev.get("golden_sha256")
            self.golden_sha256 = sha if isinstance(sha, str) else None
        elif kind == "hit":
            self.hits += 1
            if ev.get("tolerated"):
                self.tolerated += 1
        elif kind == "miss":
            self.misses += 1
            if at is None:
                self.off_tape += 1
        elif kind == "drift" or (kind == "fingerprint" and not ev.get("allowed")):
            self.drift += 1
            if at is not None:
                self.drift_events[at] = ev
        elif kind == "stale":
            self.stale += 1
        elif kind == "unused":
            self.unused += 1
        elif kind in ("live", "record"):
            self.live += 1
        elif kind == "end":
            self.open_runs.discard(_run_of(ev))  # runs that joined: running while any of them is
            self.running = bool(self.open_runs)
            self.ended = True

    def reset(self) -> None:
        fresh = RunSummary()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

    def counts(self) -> dict[str, int]:
        """Steps per status, in STATUS_PRECEDENCE order (only those with steps)."""
        return status_counts(self.status)

    @classmethod
    def of(cls, events: list[dict[str, Any]]) -> RunSummary:
        s = cls()
        for ev in events:
            s.add(ev)
        return s
