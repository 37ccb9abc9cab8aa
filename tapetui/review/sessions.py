"""What a front knows of a session: its latest run, its steps, a recorded error, and the filter that picks it.

The app and the command line read sessions through this module (a front never reads tape bytes itself):
``select(config, "status:drift")`` is both the app's ``/`` filter and ``tapetui accept --all --filter``.
Status names and their glyphs are said once, here.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import threading
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import orjson

from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import open_regular
from tapetui.core.index import CallRecord, TapeIndex, TurnRecord
from tapetui.core.runlog import STATUS_PRECEDENCE as STATUS_PRECEDENCE
from tapetui.core.runlog import RunLogReader, RunSummary, read_run_log
from tapetui.core.store import candidate_path, iter_goldens, refuse_links_out, runlog_path, samples_of, session_name
from tapetui.core.tapefile import read_index
from tapetui.core.turns import TURN
from tapetui.review.comparison import Comparison, HooksArg
from tapetui.review.diffs import diff
from tapetui.review.findings import golden_sha256

# a step's status in the tree ("" not replayed yet), and a session's "pending" (its candidate waits for review)
StatusName = Literal["hit", "drift", "miss", "stale", "unused", "contract", "error", "pending", ""]

GLYPH: Final[Mapping[str, str]] = {
    "hit": "✓",
    "drift": "≠",
    "miss": "?",
    "stale": "⌛",
    "unused": "∅",
    "contract": "⚡",
    "error": "✗",
    "pending": "●",  # a session's candidate waits for review
    "running": "»",  # a session's replay is running (not ▶: the tree's mark of a closed node)
    "marked": "▣",  # a session is chosen for a batch action
    "rerun": "⟲",  # the last run played another version of the golden: run it again
    "unreadable": "⚠",  # the tape cannot be read (the detail pane says why)
    "turn": "◆",  # a model turn among the steps (its status glyph before it, as a tool call's)
    "": "·",  # not replayed yet
}


# what the filter understands after status:  (error: a tape that cannot be read, or one that recorded an error)
FILTER_STATUSES: Final[tuple[StatusName, ...]] = ("drift", "contract", "miss", "stale", "unused", "pending", "error")

ERROR_SCAN_MAX: Final = 5000  # a step list marks recorded errors only for tapes up to this many calls


def _stamp(path: Path) -> tuple[int, int]:
    """What tells that a file changed: its mtime and size."""
    st = path.stat()
    return st.st_mtime_ns, st.st_size


# ---- the latest run ------------------------------------------------------------------------------
@dataclass
class StepSummary(RunSummary):
    """The latest run's summary as the app keeps it: a :class:`~tapetui.core.runlog.RunSummary` (one status a
    step, by STATUS_PRECEDENCE, so per-step counts add up to the steps the run touched), and for an
    ``outdated`` summary the run's own, kept for when the golden is its golden again (an undo)."""

    run: StepSummary | None = field(default=None, repr=False)

    def reset(self) -> None:
        fresh = StepSummary()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

    @classmethod
    def of(cls, events: list[dict[str, Any]]) -> StepSummary:
        s = cls()
        for ev in events:
            s.add(ev)
        return s


def current(golden: Path, summary: StepSummary) -> StepSummary:
    """``summary``, or an empty one marked ``outdated`` when its run played against an earlier golden.

    After an accept the old run's drift is history: a front then shows "last run predates the golden"
    (as ``tapetui check`` does), not the drift just accepted. An outdated summary keeps the run's own, which
    comes back when the golden is the run's golden again (an undo). Runs that do not name their golden are
    taken as they are (file times cannot tell: a fresh clone resets them). Hashes the golden: file IO.
    """
    base = summary.run if summary.outdated and summary.run is not None else summary
    if base.golden_sha256 is None or base.outdated or base.running:
        return summary
    if base.golden_sha256 == golden_sha256(golden):
        return base  # its golden again (an undo restored it): the run's own summary, not "predates"
    if summary.outdated:
        return summary
    fresh = StepSummary()
    fresh.golden_sha256, fresh.outdated, fresh.ended, fresh.run = base.golden_sha256, True, True, base
    return fresh


class RunLogs:
    """Incremental readers of the sessions' run logs: each byte is read once, however often it is polled.

    Not thread-safe: one thread polls at a time (the app's feed hands the readers from one to the other).
    """

    def __init__(self, tapes_dir: Path) -> None:
        self.tapes_dir = tapes_dir
        self._readers: dict[Path, RunLogReader] = {}
        self._refused: set[Path] = set()  # run logs that cannot be read (a link out, a FIFO): reported once

    def poll(self, golden: Path) -> tuple[bool, list[dict[str, Any]]]:
        """Events appended to the session's run log since the last poll, and whether the log restarted.

        A run log that cannot be read gives one ``invalid`` event naming why, then nothing until it can.
        """
        reader = self._readers.get(golden)
        if reader is None:
            reader = self._readers[golden] = RunLogReader(runlog_path(golden))
        try:
            refuse_links_out(self.tapes_dir, reader.path)
            polled = reader.poll()  # a FIFO or a folder named like a run log: a TapeError, never a hang
        except TapeError as e:
            if golden in self._refused:  # said once already
                return False, []
            self._refused.add(golden)
            return False, [{"event": "invalid", "problem": str(e)}]
        self._refused.discard(golden)
        return polled


def read_summary(golden: Path, tapes_dir: Path | None = None) -> StepSummary:
    """The session's latest run, its run log read whole, ``current`` applied."""
    logs = RunLogs(tapes_dir if tapes_dir is not None else golden.parent)
    return current(golden, StepSummary.of(logs.poll(golden)[1]))


# ---- a session ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StepRow:
    """One call of a tape as a list of steps shows it."""

    index: int  # call index in the tape
    seq: int
    tool: str
    ms: float
    error: bool  # the call recorded an error (looked for only in tapes up to ERROR_SCAN_MAX calls)


@dataclass(frozen=True, slots=True)
class TurnRow:
    """One model turn of a tape as a list of steps shows it (among the calls, by its step)."""

    turn: int  # its index among the tape's turns (``TapeIndex.turns``, 0-based)
    seq: int
    model: str
    tokens: int
    has_usage: bool  # the turn recorded usage (else ``tokens`` is 0 and says nothing)
    requested: tuple[str, ...]  # the tools its response asked for, in order
    error: bool  # the model call raised: the turn records an error instead of a response
    stream: bool

    @property
    def tool(self) -> str:
        return TURN

    @classmethod
    def of(cls, k: int, t: TurnRecord) -> TurnRow:
        return cls(k, t.seq, t.model, t.tokens, t.has_usage, t.requested, t.error, t.stream)


@dataclass(eq=False)  # identity: two sessions are never equal by value
class Session:
    """A session as a front shows it: names, the latest run, a pending candidate, and caches of its tape."""

    golden: Path
    name: str
    tapes_dir: Path | None = field(default=None, repr=False)  # symlinks leading out of it are not followed
    summary: StepSummary = field(default_factory=lambda: StepSummary(), repr=False)
    pending: bool = False
    error: str | None = None
    loaded: bool = False  # summary and pending were read
    marked: bool = False  # chosen for a batch action (the app's space key)
    _idx: tuple[tuple[int, int], TapeIndex] | None = field(default=None, repr=False)
    # one read of the index at a time: the app's workers ask for it at once (a session's detail, its summary), and a
    # second scan of a big tape beside the first only takes the interpreter from the screen
    _idx_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _cand_tools: tuple[tuple[int, int], frozenset[str], frozenset[str]] | None = field(default=None, repr=False)
    _turn_pos: tuple[TapeIndex, list[int]] | None = field(default=None, repr=False)  # see _turn_positions
    _cmp: tuple[tuple[Any, ...], Comparison] | None = field(default=None, repr=False)
    recorded_error: bool | None = None  # a call of the tape recorded an error (None: not looked at yet)
    _err_stamp: tuple[int, int] | None = field(default=None, repr=False)

    def scan_recorded_error(self) -> bool:
        """Whether a call of the tape recorded an error; reads the tape (run it in a worker), again only
        when the file changed. A nested ``"error"`` key inside a result does not count."""
        idx = self.index()
        stamp = _stamp(idx.path)
        if self._err_stamp == stamp and self.recorded_error is not None:
            return self.recorded_error
        found = any(t.error for t in idx.turns)  # a model call that raised
        if not found:
            with os.fdopen(open_regular(idx.path), "rb") as fh:
                for i in range(len(idx)):
                    raw = idx.raw_line(i, fh)
                    if b'"error":{' in raw and isinstance(orjson.loads(raw).get("error"), dict):
                        found = True
                        break
        self.recorded_error, self._err_stamp = found, stamp
        return found

    def older_candidates(self) -> list[Path]:
        """Candidates a newer recording displaced into ``NAME.samples/`` (kept, never replaced silently)."""
        return samples_of(self.golden)

    def index(self) -> TapeIndex:
        """The golden's index (the candidate's while there is no golden), re-read only when the file
        changed (size or mtime).

        Raises:
            TapeError: the tape cannot be read; ``error`` says why until a read succeeds.
        """
        with self._idx_lock:
            return self._index()

    def _index(self) -> TapeIndex:
        path = self.golden if self.golden.exists() else candidate_path(self.golden)
        try:
            if self.tapes_dir is not None:
                refuse_links_out(self.tapes_dir, path)
            stamp = _stamp(path)
            if self._idx is not None and self._idx[0] == stamp:
                return self._idx[1]
            idx = read_index(path)
        except TapeError as e:
            self.error = str(e)
            raise
        except OSError as e:
            self.error = f"{path}: {e.strerror}"
            raise TapeError(self.error) from None
        self.error = None
        self._idx = (stamp, idx)
        return idx

    def tools(self) -> frozenset[str]:
        """Every tool the session calls: the golden's and, while one waits for review, its candidate's (a new
        tool is often only there). The candidate is read again only when it changed.

        Raises:
            TapeError: the golden cannot be read.
        """
        tools = frozenset(self.index().tools)
        cand = self._candidate_names()
        return tools if cand is None else tools | cand[0]

    def models(self) -> frozenset[str]:
        """Every model the session's turns name: the golden's and, while one waits for review, its candidate's.

        Raises:
            TapeError: the golden cannot be read.
        """
        models = frozenset(t.model for t in self.index().turns)
        cand = self._candidate_names()
        return models if cand is None else models | cand[1]

    def _candidate_names(self) -> tuple[frozenset[str], frozenset[str]] | None:
        """The pending candidate's tools and models (read again only when it changed); None without one, or
        when it cannot be read (check and the detail pane report that)."""
        cand = candidate_path(self.golden)
        if not self.golden.exists() or not cand.exists():
            return None
        try:
            if self.tapes_dir is not None:
                refuse_links_out(self.tapes_dir, cand)
            stamp = _stamp(cand)
            if self._cand_tools is None or self._cand_tools[0] != stamp:
                idx = read_index(cand)
                self._cand_tools = (stamp, frozenset(idx.tools), frozenset(t.model for t in idx.turns))
        except (TapeError, OSError):
            return None
        return self._cand_tools[1], self._cand_tools[2]

    def record(self, index: int) -> CallRecord:
        """Call ``index`` of the tape, decoded."""
        return self.index().record(index)

    def step_count(self) -> int:
        """How many steps the tape has: its tool calls and its model turns.

        Raises:
            TapeError: the tape cannot be read.
        """
        idx = self.index()
        return len(idx) + len(idx.turns)

    def steps(self, start: int = 0, stop: int | None = None) -> list[StepRow | TurnRow]:
        """Steps ``start…stop`` of the tape: its calls (each marked when it recorded an error) and its model
        turns, merged by step (``start`` and ``stop`` count both).

        Raises:
            TapeError: the tape cannot be read.
        """
        idx = self.index()
        if not idx.turns:  # only calls: a step is a call
            end = len(idx) if stop is None else min(stop, len(idx))
            errors = _error_lines(idx, start, end)
            return [StepRow(i, idx.seqs[i], idx.tools[i], idx.ms[i], i in errors) for i in range(start, end)]
        total = len(idx) + len(idx.turns)
        end = total if stop is None else min(stop, total)
        if start >= end:
            return []
        at = self._turn_positions(idx)
        first = bisect_left(at, start)  # the first turn at or after step position `start`
        lo, hi = start - first, end - bisect_left(at, end)  # the calls in the page
        errors = _error_lines(idx, lo, hi)
        out: list[StepRow | TurnRow] = []
        k, i = first, lo
        for pos in range(start, end):
            if k < len(at) and at[k] == pos:
                out.append(TurnRow.of(k, idx.turns[k]))
                k += 1
            else:
                out.append(StepRow(i, idx.seqs[i], idx.tools[i], idx.ms[i], i in errors))
                i += 1
        return out

    def _turn_positions(self, idx: TapeIndex) -> list[int]:
        """Where each model turn is among the steps: calls in file order with each turn before the first call
        of a later step (turns in file order too); computed once per index."""
        if self._turn_pos is not None and self._turn_pos[0] is idx:
            return self._turn_pos[1]
        seqs, n = idx.seqs, len(idx.seqs)
        out: list[int] = []
        i = 0
        for k, t in enumerate(idx.turns):
            while i < n and seqs[i] <= t.seq:
                i += 1
            out.append(i + k)
        self._turn_pos = (idx, out)
        return out

    def comparison(self, config: Config, hooks: HooksArg = None) -> Comparison:
        """The golden against its pending candidate, compared again only when either file changed
        (moving over the steps of a session would otherwise re-read both tapes at every key).

        ``hooks``: None by default: the app never imports a comparison hook until a person allows it."""
        cand = candidate_path(self.golden)
        try:
            stamp = (_stamp(self.golden), _stamp(cand))
        except OSError as e:
            raise TapeError(f"{e.filename}: {e.strerror}") from None
        key = (*stamp, id(hooks), id(config))
        if self._cmp is not None and self._cmp[0] == key:
            return self._cmp[1]
        cmp = diff(config, self.golden, cand, hooks=hooks).comparison  # the diff `tapetui diff` prints
        assert cmp is not None  # a tape compared with a tape
        self._cmp = (key, cmp)
        return cmp

    def run_events(self) -> list[dict[str, Any]]:
        """Every event of the session's run log (the latest run and what came before it in the file).

        Raises:
            TapeError: the run log is not a regular file or cannot be read, or is a symlink leading out of the tapes
                folder (never read).
        """
        log = runlog_path(self.golden)
        if self.tapes_dir is not None:
            refuse_links_out(self.tapes_dir, log)
        return read_run_log(log)

    def has_candidate(self) -> bool:
        """Whether a candidate waits for review (a stat, no read)."""
        return has_candidate(self.golden)

    @property
    def statuses(self) -> set[str]:
        s = self.summary
        steps = set(s.status.values())
        # a contract change is counted among a run's drift events, but it is its own status: `status:drift`
        # (and `accept --all --filter status:drift`) must never pick a session only for a changed contract
        flags = {
            "drift": "drift" in steps or (s.drift and not steps),
            "contract": "contract" in steps,
            "miss": s.misses,
            "stale": s.stale,
            "pending": self.pending,
            "error": self.error,
            "unused": s.unused,
        }
        return {name for name, on in flags.items() if on}

    @property
    def needs_review(self) -> bool:
        return bool(self.statuses - {"stale", "unused"}) or bool(self.error)


def _error_lines(idx: TapeIndex, start: int, end: int) -> set[int]:
    """Call indices in ``start…end`` whose line holds a recorded error (found without decoding lines)."""
    out: set[int] = set()
    if len(idx) > ERROR_SCAN_MAX:
        return out
    try:
        fd = open_regular(idx.path)  # a FIFO in its place since the scan: no marks, never a hang
    except TapeError:
        return out
    with open(fd, "rb") as fh:
        for i in range(start, end):
            fh.seek(idx.offsets[i])
            if b',"error":{' in fh.read(idx.lengths[i]):
                out.add(i)
    return out


def has_candidate(golden: Path) -> bool:
    """Whether a candidate of ``golden`` waits for review (a stat, no read)."""
    return candidate_path(golden).exists()


def goldens(config: Config) -> list[Path]:
    """Every session's golden under the tapes folder, sorted (see ``iter_goldens``)."""
    return list(iter_goldens(config.tapes_dir))


def session_of(config: Config, golden: Path) -> Session:
    """The session of ``golden``, named from the tapes folder; nothing is read yet."""
    return Session(golden, session_name(golden, config.tapes_dir), config.tapes_dir)


def read_session(config: Config, golden: Path) -> Session:
    """The session with its latest run read and whether a candidate is pending."""
    s = session_of(config, golden)
    s.summary = read_summary(golden, config.tapes_dir)
    s.pending, s.loaded = s.has_candidate(), True
    return s


# ---- the filter --------------------------------------------------------------------------------
FilterKind = Literal["all", "status", "tool", "model", "text"]


@dataclass(frozen=True, slots=True)
class Filter:
    """A parsed filter: ``status:NAME``, ``tool:NAME``, ``model:NAME`` (a part of a model's name, or a pattern
    with ``*`` ``?`` ``[``), a part of a session's name, or nothing."""

    kind: FilterKind
    value: str  # lower-cased
    problem: str | None = None  # why nothing can match (an unknown status), for the person who typed it

    @property
    def scans_errors(self) -> bool:
        """Whether matching needs ``Session.scan_recorded_error`` to have run (``status:error``)."""
        return self.kind == "status" and self.value == "error"


class FilterError(TapeError):
    """A filter that cannot match anything as written (an unknown status)."""


def parse_filter(text: str | None) -> Filter:
    """``status:drift|contract|miss|stale|unused|pending|error``, ``tool:NAME``, ``model:NAME``, or any part of
    a name."""
    q = (text or "").strip().lower()
    if not q:
        return Filter("all", "")
    if q.startswith("status:"):
        want = q[7:].strip()
        if want not in FILTER_STATUSES:
            return Filter(
                "status",
                want,
                f"Unknown status {want!r}. Valid: "
                + ", ".join(f"status:{x}" for x in FILTER_STATUSES)
                + "; or tool:NAME, model:NAME, or any part of a session's name.",
            )
        return Filter("status", want)
    if q.startswith("tool:"):
        return Filter("tool", q[5:])
    if q.startswith("model:"):
        return Filter("model", q[6:].strip())
    return Filter("text", q)


def matches(filt: Filter | str, s: Session) -> bool:
    """Whether session ``s`` passes the filter. ``tool:`` and ``model:`` read the tape's index and its pending
    candidate's (cached); ``status:error`` counts a recorded error only once ``s.scan_recorded_error()`` has run.
    ``status:drift`` counts a model turn's prompt drift as a tool call's (both are steps of the run)."""
    f = parse_filter(filt) if isinstance(filt, str) else filt
    if f.kind == "all":
        return True
    if f.kind == "status":
        want = f.value
        return want in s.statuses or (want == "error" and bool(s.error or s.recorded_error))
    if f.kind == "tool":
        try:
            return f.value in {t.lower() for t in s.tools()}
        except TapeError:
            return False
    if f.kind == "model":
        try:
            return _model_matches(f.value, s.models())
        except TapeError:
            return False
    return f.value in s.name.lower()


def _model_matches(want: str, models: frozenset[str]) -> bool:
    """``model:gpt-4o`` matches ``openai:gpt-4o`` (a part of the name, any case); with ``*``, ``?`` or ``[`` the
    value is a pattern for the whole name (``model:openai:*``)."""
    names = [m.lower() for m in models]
    if any(c in want for c in "*?["):
        return any(fnmatch.fnmatchcase(m, want) for m in names)
    return any(want in m for m in names)


def select(config: Config, filt: Filter | str | None = None, *, pending_only: bool = False) -> list[Session]:
    """Every session of the tapes folder that the filter matches, read (``read_session``), in folder order.

    Args:
        config: the project; its tapes folder is walked.
        filt: a filter as the app's ``/`` takes it; None or "" matches every session.
        pending_only: only sessions whose candidate waits for review.

    Raises:
        FilterError: the filter names an unknown status.
    """
    f = filt if isinstance(filt, Filter) else parse_filter(filt)
    if f.problem is not None:
        raise FilterError(f.problem)
    out = []
    for g in goldens(config):
        s = read_session(config, g)
        if pending_only and not s.pending:
            continue
        if f.scans_errors:
            with contextlib.suppress(TapeError, OSError):  # unreadable: s.error says so; status:error matches it
                s.scan_recorded_error()
        if matches(f, s):
            out.append(s)
    return out
