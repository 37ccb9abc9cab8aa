"""What a run log says happened, read in one pass: the facts ``check`` judges (see :mod:`tapetui.review.findings`).

:func:`collect_run` reads a run's events (``docs/format.md`` describes them) into a :class:`RunFacts`; the
rules of :mod:`tapetui.review.findings` turn those facts into findings and one verdict per dimension.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tapetui.core.changes import Change
from tapetui.core.errors import TapeError
from tapetui.core.runlog import CALL_EVENTS, EXECUTED_EVENTS, event_problem
from tapetui.core.turns import TURN

__all__ = [
    "REPLAY_ERRORS",
    "ContractChange",
    "Drift",
    "EndError",
    "Miss",
    "Reported",
    "RunFacts",
    "Stale",
    "ToleratedHit",
    "collect_run",
]

REPLAY_ERRORS = ("TapeDrift", "ModelDrift", "TapeMiss", "ToolDriftError", "TapeStale")
"""The errors a replay raises itself (the run stopped at a call the tape could not answer)."""


@dataclass(frozen=True, slots=True)
class Drift:
    """A call whose arguments changed (a ``drift`` event): each changed argument path."""

    seq: Any
    tool: Any
    changes: tuple[Change, ...]
    recorded_key: Any
    key: Any


@dataclass(frozen=True, slots=True)
class Miss:
    """A call not on the tape (a ``miss`` event), with the nearest recorded call and how it differs."""

    seq: Any
    tool: Any
    key: Any
    reason: Any
    nearest: Any
    changes: tuple[Change, ...]


@dataclass(frozen=True, slots=True)
class ContractChange:
    """A tool whose contract changed (a ``fingerprint`` event tapes.toml does not allow)."""

    seq: Any
    tool: Any
    recorded: Any
    live: Any
    explanation: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class ToleratedHit:
    """A call served from a recording whose differences a rule excused (a ``hit`` event with ``tolerated``).

    ``tolerated``: the event's list as written; ``step``/``args``: the recording's step and the call's
    arguments (None in a run log an older tapetui wrote)."""

    seq: Any
    tool: Any
    tolerated: Any
    recorded_key: Any
    step: Any
    args: Any

    @property
    def items(self) -> list[dict[str, Any]]:
        return [t for t in self.tolerated if isinstance(t, dict)]


@dataclass(frozen=True, slots=True)
class Stale:
    """An expired entry that was replayed (a ``stale`` event)."""

    seq: Any
    tool: Any
    expires_at: Any
    policy: Any


@dataclass(frozen=True, slots=True)
class EndError:
    """An ``end`` event that carries an error (an error object is an error, even ``{}``)."""

    error: dict[str, Any]

    @property
    def type(self) -> Any:
        return self.error.get("type")

    @property
    def by_replay(self) -> bool:
        """The replay raised it (:data:`REPLAY_ERRORS`): the run stopped at a call the tape could not answer."""
        return self.type in REPLAY_ERRORS


Reported = Drift | Miss | ContractChange | ToleratedHit | Stale | EndError
"""A fact a finding of its own reports, in run order."""


@dataclass(frozen=True)
class RunFacts:
    """Everything a run log says, read once (:func:`collect_run`).

    ``executed``: the tools each executed call ran, in run order, and ``phases`` the phase each ran in
    (``phased``: the run wrote a phase line); ``reported``: the facts a finding reports, in run order;
    ``end``: the last ``end`` event, None when the run log has none (the replay was killed, or runs still).
    """

    events: int
    executed: tuple[str, ...] = ()
    phases: tuple[str | None, ...] = ()
    phased: bool = False
    reported: tuple[Reported, ...] = ()
    unused: tuple[dict[str, Any], ...] = ()
    notes: tuple[tuple[str, Any], ...] = ()
    end: dict[str, Any] | None = None
    last_seq: Any = None
    last_tool: Any = None
    kinds: frozenset[Any] = frozenset()  # every event kind the run log holds
    model_turns: bool = False  # an event about a model turn (the judge of turns reads the events then)

    @property
    def drifts(self) -> list[Drift]:
        return [r for r in self.reported if isinstance(r, Drift)]

    @property
    def misses(self) -> list[Miss]:
        return [r for r in self.reported if isinstance(r, Miss)]

    @property
    def contract_changes(self) -> list[ContractChange]:
        return [r for r in self.reported if isinstance(r, ContractChange)]

    @property
    def tolerated(self) -> list[ToleratedHit]:
        return [r for r in self.reported if isinstance(r, ToleratedHit)]

    @property
    def stale(self) -> list[Stale]:
        return [r for r in self.reported if isinstance(r, Stale)]

    @property
    def errors(self) -> list[EndError]:
        return [r for r in self.reported if isinstance(r, EndError)]

    @property
    def stopped_by(self) -> dict[str, Any] | None:
        """The error the run ended with (its last ``end`` event's), or None."""
        return self.end.get("error") if self.end is not None else None

    @property
    def judged(self) -> bool:
        """Whether the executed sequence is judged: not for a run that stopped, or has no end."""
        return self.end is not None and self.stopped_by is None


def _changes(ev: dict[str, Any]) -> tuple[Change, ...]:
    return tuple(Change(p, o, n) for p, o, n in ev.get("changes") or [])


def _reported(kind: Any, ev: dict[str, Any]) -> Reported | None:
    """The fact an event reports, or None."""
    seq, tool = ev.get("seq"), ev.get("tool")
    if kind == "drift":
        return Drift(seq, tool, _changes(ev), ev.get("recorded_key"), ev.get("key"))
    if kind == "miss":
        return Miss(seq, tool, ev.get("key"), ev.get("reason"), ev.get("nearest"), _changes(ev))
    if kind == "fingerprint" and not ev.get("allowed"):
        return ContractChange(seq, tool, ev.get("recorded"), ev.get("live"), tuple(ev.get("explanation") or ()))
    if kind == "hit" and ev.get("tolerated"):
        return ToleratedHit(seq, tool, ev["tolerated"], ev.get("recorded_key"), ev.get("step"), ev.get("args"))
    if kind == "stale":
        return Stale(seq, tool, ev.get("expires_at"), ev.get("policy"))
    if kind == "end" and ev.get("error") is not None:
        return EndError(ev["error"])
    return None


def _checked(ev: Any, n: int, checked: bool, where: str) -> dict[str, Any]:
    """The event, or a TapeError naming the run log and its line (or the event's number)."""
    problem = None if checked else event_problem(ev)
    if problem is None and ev.get("event") == "invalid":
        problem = str(ev.get("problem") or "invalid event")
    if problem is not None:
        line = ev.get("line") if type(ev) is dict else None
        raise TapeError(f"{where}:{line}: {problem}" if type(line) is int else f"{where}: event {n}: {problem}")
    out: dict[str, Any] = ev
    return out


def collect_run(events: Iterable[dict[str, Any]], *, checked: bool = False, where: str = "run log") -> RunFacts:
    """A run's facts, in one pass over its events (in run order).

    A fill's miss and the live call that answered it (same seq and tool) are one executed call.

    Args:
        checked: each event was checked already (:func:`~tapetui.core.runlog.event_problem`).
        where: the run log, as messages name it.

    Raises:
        TapeError: a malformed event, naming the run log and its line.
    """
    executed: list[str] = []
    phases: list[str | None] = []
    reported: list[Reported] = []
    unused: list[dict[str, Any]] = []
    notes: list[tuple[str, Any]] = []
    missed: set[tuple[Any, Any]] = set()  # (seq, tool) of each miss: a fill answers it live under the same seq
    phase: str | None = None
    end: dict[str, Any] | None = None
    last: tuple[Any, Any] = (None, None)
    n = plain_hits = model_turns = 0
    kinds: set[Any] = set()
    for n, raw in enumerate(events, 1):
        valid = checked and type(raw) is dict and raw.get("event") != "invalid"
        ev = raw if valid else _checked(raw, n, checked, where)
        kind, seq, tool = ev.get("event"), ev.get("seq"), ev.get("tool")
        if kind == "hit" and tool != TURN and "tolerated" not in ev:  # most of a replay: one executed call
            plain_hits += 1
            if type(tool) is str:
                executed.append(tool)
                phases.append(phase)
            if seq is not None:
                last = (seq, tool)
            continue
        kinds.add(kind)
        if tool == TURN:
            model_turns = 1
            if kind != "unused" and kind != "end":
                if kind in CALL_EVENTS and seq is not None:
                    last = (seq, tool)
                continue  # a model turn: judged by tapetui.review.turns, apart from the tool sequence
        executes = kind in EXECUTED_EVENTS or (kind == "fingerprint" and not ev.get("allowed"))
        if kind == "miss":
            missed.add((seq, tool))
        elif kind in ("live", "record") and (seq, tool) in missed:
            executes = False  # a fill's miss, then the live call that answered it: one call, not two
        if executes and isinstance(tool, str):
            executed.append(tool)
            phases.append(phase)
        if kind in CALL_EVENTS and seq is not None:
            last = (seq, tool)
        fact = _reported(kind, ev)
        if fact is not None:
            reported.append(fact)
        if kind == "unused":
            unused.append(ev)
        elif kind == "note":
            notes.append((str(ev.get("kind")), ev.get("value")))
        elif kind == "phase":
            phase = str(ev.get("name"))
        elif kind == "end":
            end = ev
    if plain_hits:
        kinds.add("hit")
    return RunFacts(
        events=n,
        executed=tuple(executed),
        phases=tuple(phases),
        phased=phase is not None,
        reported=tuple(reported),
        unused=tuple(unused),
        notes=tuple(notes),
        end=end,
        last_seq=last[0],
        last_tool=last[1],
        kinds=frozenset(kinds),
        model_turns=bool(model_turns),
    )
