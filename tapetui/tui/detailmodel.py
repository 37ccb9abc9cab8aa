"""What the detail pane shows of a session or a step: read in a worker, handed to the pane as one value.

:func:`session_detail` and :func:`step_detail` do the reading (the tape, the comparison with a pending
candidate, the last run log) and the costly formatting (every change of a comparison), off the screen's
thread; :meth:`~tapetui.tui.widgets.detail.DetailView.show_session` and ``show_step`` only draw what they hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import tapetui.review as review
from tapetui.core.comparators import Hooks
from tapetui.core.config import Config
from tapetui.core.index import CallRecord
from tapetui.review import Comparison, StepDiff, Verdict
from tapetui.review.sessions import Session
from tapetui.tui.model import Row, comparison_rows, step_rows, suggested_rule
from tapetui.tui.widgets.session_tree import StepRef

__all__ = ["DetailInputs", "SessionDetail", "StepDetail", "session_detail", "step_detail", "subject_of"]


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
    steps: int
    comparison: Comparison | None  # with the pending candidate, when there is one and a golden
    rows: list[Row] | None  # the comparison's rows (``comparison.rows()``, quick for megabyte strings)
    notes: list[str]  # what the last run log says went wrong
    verdicts: tuple[Verdict, ...]  # that run's verdict per dimension (none for a run about an earlier golden)
    hooks_note: str | None  # why comparison hooks did not run, and how to let them
    suggestion: str | None  # a rule that would excuse the first difference (offered when accepting)
    events: list[dict[str, Any]]  # the last run log, for the live pane


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
        steps=len(idx),
        comparison=cmp,
        rows=comparison_rows(cmp) if cmp is not None else None,
        notes=notes,
        verdicts=verdicts,
        hooks_note=inputs.hooks_note,
        suggestion=suggested_rule(cmp),
        events=events,
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
