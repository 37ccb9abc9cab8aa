"""What the detail pane shows of a session or a step: read in a worker, handed to the pane as one value.

:func:`session_detail` and :func:`step_detail` do the reading (the tape, the comparison with a pending
candidate, the last run log) and the costly formatting (every change of a comparison), off the screen's
thread; :meth:`~tapetui.tui.widgets.detail.DetailView.show_session` and ``show_step`` only draw what they hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import tapetui.review as review
from tapetui.core.changes import MISSING
from tapetui.core.comparators import Hooks
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.index import CallRecord
from tapetui.core.turns import TURN
from tapetui.review import Comparison, StepDiff, Verdict
from tapetui.review.sessions import Session
from tapetui.review.turns import TurnDiff
from tapetui.tui.model import Row, comparison_rows, step_rows, suggested_rule
from tapetui.tui.widgets.session_tree import StepRef

__all__ = [
    "DetailInputs",
    "SessionDetail",
    "StepDetail",
    "TurnDetail",
    "prompt_diffs",
    "session_detail",
    "step_detail",
    "subject_of",
    "turn_detail",
]

MAX_PROMPT_DIFFS = 8  # side-by-side diffs of one turn (a message each); the rows above name every difference


@dataclass(frozen=True, slots=True)
class DetailInputs:
    """What a detail is compared under: the configuration, the comparison hooks a person allowed (None until J
    allowed them: none runs), and else what the pane says about the hooks the settings name (None: none)."""

    config: Config
    hooks: Hooks | None = None
    hooks_note: str | None = None


@dataclass(frozen=True, slots=True)
class SessionDetail:
    """A session's detail: its tape, its last run (what went wrong, its verdicts) and its pending candidate."""

    session: Session
    header: dict[str, Any] | None  # the tape's session line
    steps: int  # tool calls and model turns
    comparison: Comparison | None  # with the pending candidate, when there is one and a golden
    rows: list[Row] | None  # the comparison's rows (``comparison.rows()``, quick for megabyte strings)
    notes: list[str]  # what the last run log says went wrong
    verdicts: tuple[Verdict, ...]  # that run's verdict per dimension (none for a run about an earlier golden)
    hooks_note: str | None  # why comparison hooks did not run, and how to let them
    suggestion: str | None  # a rule that would excuse the first difference (offered when accepting)
    events: list[dict[str, Any]]  # the last run log, for the live pane
    turns: int = 0  # how many of the steps are model turns


@dataclass(frozen=True, slots=True)
class StepDetail:
    """A step's detail: its recorded call, how the pending candidate's step differs, the last run's drift."""

    session: Session
    record: CallRecord
    diff: StepDiff | None  # the candidate's step, when it differs
    drift: dict[str, Any] | None  # the last run's drift or fingerprint event of the step
    contract: list[str]  # how the tool's contract changed
    rows: list[Row] | None  # the step diff's rows (``diff.rows()``, quick for megabyte strings)
    hooks_note: str | None  # as for a session; only when the step differs (else hooks change nothing shown)
    suggestion: str | None


@dataclass(frozen=True, slots=True)
class TurnDetail:
    """A model turn's detail: its line as recorded, how the pending candidate's turn at its place differs, the
    last run's prompt drift of it, and the parts of the prompt to diff side by side."""

    session: Session
    turn: int  # its index among the tape's turns (0-based)
    line: dict[str, Any]  # the turn's line, decoded: request, response, usage...
    diff: TurnDiff | None  # the candidate's turn at the same place, when it differs
    drift: dict[str, Any] | None  # the last run's drift event of the turn's step
    rows: list[Row] | None  # the turn diff's rows
    wanted: list[tuple[str, Any, Any]]  # (title, recorded, other) of each side-by-side diff, message by message
    more: int  # differing parts left without a side-by-side diff (past MAX_PROMPT_DIFFS)

    @property
    def seq(self) -> int:
        seq = self.line.get("seq")
        return seq if type(seq) is int else 0


def subject_of(data: Any) -> tuple[Any, ...]:
    """What the detail pane shows for a row's data (its ``subject``): ("session", golden), ("step", golden, seq)."""
    if isinstance(data, Session):
        return ("session", data.golden)
    if isinstance(data, StepRef):
        return ("step", data.session.golden, data.seq)
    return ()


def session_detail(s: Session, inputs: DetailInputs) -> SessionDetail:
    """Read what the pane shows of ``s`` (in a worker: file IO, and every change of a comparison formatted).

    Raises:
        TapeError: the tape, candidate or run log cannot be read as what it is named.
    """
    config, hooks = inputs.config, inputs.hooks
    idx = s.index()
    cmp = s.comparison(config, hooks) if s.pending and s.golden.exists() else None
    events = s.run_events()
    notes: list[str] = []
    verdicts: tuple[Verdict, ...] = ()
    if s.summary.ended and s.summary.mode != "record":  # a recording replays nothing: no run verdicts
        # hooks: None unless allowed (the default "auto" would import what tapes.toml names)
        findings, verdicts = review.judge_run(idx, events, config, hooks=hooks)
        notes = [f.text for f in findings]
        if s.summary.outdated:
            verdicts = ()  # about an earlier golden: the row above says so
    return SessionDetail(
        session=s,
        header=idx.header,
        steps=len(idx) + len(idx.turns),
        comparison=cmp,
        rows=comparison_rows(cmp) if cmp is not None else None,
        notes=notes,
        verdicts=verdicts,
        hooks_note=inputs.hooks_note,
        suggestion=suggested_rule(cmp),
        events=events,
        turns=len(idx.turns),
    )


def step_detail(ref: StepRef, inputs: DetailInputs) -> StepDetail:
    """Read what the pane shows of step ``ref`` (in a worker, as :func:`session_detail`).

    Raises:
        TapeError: the tape or the candidate cannot be read as what it is named.
    """
    s = ref.session
    rec = s.record(ref.index)
    sd = None
    if s.pending and s.golden.exists():
        cmp = s.comparison(inputs.config, inputs.hooks)
        sd = next((d for d in cmp.steps if d.old is not None and d.old.seq == ref.seq and d.differs), None)
    ev = s.summary.drift_events.get(ref.seq)
    contract = list(sd.fingerprint) if sd is not None and sd.fingerprint else []
    if ev is not None and ev.get("event") == "fingerprint":
        contract = [f"fingerprint {ev.get('recorded')} → {ev.get('live')}", *(ev.get("explanation") or [])]
    return StepDetail(
        session=s,
        record=rec,
        diff=sd,
        drift=ev,
        contract=contract,
        rows=step_rows(sd) if sd is not None else None,
        hooks_note=inputs.hooks_note if sd is not None else None,
        suggestion=suggested_rule(None, sd) if sd is not None else None,
    )


def turn_detail(ref: StepRef, inputs: DetailInputs) -> TurnDetail:
    """Read what the pane shows of model turn ``ref`` (in a worker, as :func:`step_detail`).

    Raises:
        TapeError: the tape or the candidate cannot be read, or the tape changed since the tree was built.
    """
    s, k = ref.session, ref.turn
    assert k is not None
    idx = s.index()
    if k >= len(idx.turns) or idx.turns[k].seq != ref.seq:
        raise TapeError(f"{idx.path}: the tape changed: step {ref.seq} is no longer its model turn {k + 1}")
    line = idx.turn(k)
    td = None
    if s.pending and s.golden.exists():
        cmp = s.comparison(inputs.config, inputs.hooks)
        td = next((d for d in cmp.turns.changed if d.turn == k + 1), None)
    ev = s.summary.drift_events.get(ref.seq)
    if ev is not None and ev.get("tool") != TURN:
        ev = None  # another run's step there was a tool call
    if td is not None:
        wanted = prompt_diffs(td)
    elif ev is not None and ev.get("event") == "drift":
        wanted = drift_diffs(ev)
    else:
        wanted = []
    return TurnDetail(
        session=s,
        turn=k,
        line=line,
        diff=td,
        drift=ev,
        rows=td.rows() if td is not None else None,
        wanted=wanted[:MAX_PROMPT_DIFFS],
        more=max(0, len(wanted) - MAX_PROMPT_DIFFS),
    )


_TOP = re.compile(r"messages\[\d+\]|[^.\[]+")  # what one side-by-side diff shows: a message, or a request field


def prompt_diffs(d: TurnDiff) -> list[tuple[str, Any, Any]]:
    """The parts of two turns' requests that differ, each as ``(title, recorded, candidate)`` for a side-by-side
    diff: the model's name, the instructions (the system prompt), each differing message, any other request field
    (settings, tools, output_schema), then the response. Text spanning lines is diffed line by line."""
    if d.old is None or d.new is None:
        return []
    old, new = _request(d.old), _request(d.new)
    groups: list[str] = []
    for c in (*d.request, *(c for c, _ in d.excused)):
        path = c.path.removeprefix("request.")
        m = _TOP.match(path)
        g = m.group() if m else path
        if g not in groups:
            groups.append(g)
    out: list[tuple[str, Any, Any]] = []
    for g in groups:
        if g == "model":
            out.append(("model: recorded | candidate", d.old.get("model"), d.new.get("model")))
        elif g == "instructions":
            out.append(
                (
                    "system prompt (instructions): recorded | candidate",
                    _lines(old.get(g, MISSING)),
                    _lines(new.get(g, MISSING)),
                )
            )
        elif g.startswith("messages["):
            i = int(g[9:-1])
            a, b = _nth(old.get("messages"), i), _nth(new.get("messages"), i)
            role = next((m.get("role") for m in (b, a) if isinstance(m, dict)), "?")
            out.append((f"message {i + 1} ({role}): recorded | candidate", _lines(a), _lines(b)))
        else:
            out.append((f"request {g}: recorded | candidate", _lines(old.get(g, MISSING)), _lines(new.get(g, MISSING))))
    if d.response:
        out.append(("response: recorded | candidate", _lines(d.old.get("response")), _lines(d.new.get("response"))))
    return out


def drift_diffs(ev: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """A run log's prompt drift (its ``changes``, path by path) as side-by-side diffs: recorded | last run."""
    out = []
    for c in ev.get("changes") or []:
        if isinstance(c, list) and len(c) == 3:
            out.append((f"{c[0]}: recorded | last run", _lines(c[1]), _lines(c[2])))
    return out


def _request(turn: dict[str, Any]) -> dict[str, Any]:
    r = turn.get("request")
    return r if isinstance(r, dict) else {}


def _nth(items: Any, i: int) -> Any:
    return items[i] if isinstance(items, list) and 0 <= i < len(items) else MISSING


def _lines(value: Any, depth: int = 0) -> Any:
    """``value`` with every text that spans lines as the list of its lines, so that a diff aligns them (down to
    a depth where no message's text is; deeper values are diffed as they are)."""
    if isinstance(value, str):
        return value.splitlines() if "\n" in value else value
    if depth > 32:
        return value
    if isinstance(value, dict):
        return {k: _lines(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_lines(v, depth + 1) for v in value]
    return value
