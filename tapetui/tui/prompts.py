"""What the review keys ask before they act: what ``a`` accepts, and the questions of ``r``, ``u`` and ``R``.

Each question is a (title, body) pair for :class:`~tapetui.tui.screens.confirm.ConfirmScreen`; what ``R`` and
``x`` say on a model turn instead of acting is :func:`turn_notice`.
"""

from __future__ import annotations

from tapetui.core.config import Config
from tapetui.core.index import CallRecord
from tapetui.review.history import HistoryRecord
from tapetui.review.sessions import Session
from tapetui.tui.widgets.session_tree import StepRef

__all__ = ["accept_what", "reject_question", "rerecord_question", "turn_notice", "undo_question"]


def accept_what(s: Session, step: StepRef | None) -> str:
    """What ``a`` accepts: one step of the candidate, or the whole candidate."""
    if step is not None and step.turn_row is not None:
        return f"{s.name}: the model turn at step {step.seq} ({step.turn_row.model}) from the candidate"
    if step is not None:
        return f"{s.name}: step {step.seq} ({step.tool}) from the candidate"
    return f"{s.name}: the whole candidate"


def reject_question(s: Session) -> tuple[str, str]:
    body = (
        f"The pending candidate of {s.name} will be discarded, with a changelog entry naming what it "
        f"changed. u (or tapetui undo {s.name}) brings it back."
    )
    return "Reject this candidate?", body


def undo_question(s: Session, target: HistoryRecord) -> tuple[str, str]:
    body = (
        f"The {target.action} of {s.name} (changelog entry {target.id}, {target.when}) will be reverted: "
        "the golden and candidate get back the bytes they had before it, with a changelog entry of its own."
    )
    return f"Undo the {target.action} of {s.name}?", body


def rerecord_question(config: Config, rec: CallRecord) -> tuple[str, str]:
    body = (
        f"Step {rec.seq} ({rec.tool}) will run live with its recorded arguments.\n"
        f"tapetui will import the registry {config.registry or '(none configured)'} "
        f"from {config.root} to do it."
    )
    if rec.side_effect:
        body += f"\n\n{rec.tool} HAS SIDE EFFECTS: it will really run."
    return "Re-record this step?", body


def turn_notice(s: Session, step: StepRef, action: str) -> str:
    """What ``R`` (``action`` "re-record") or ``x`` ("expire") says on a model turn: the app never calls a model
    (the agent does, with its own keys and prompts), so the agent is run again to record the turn anew."""
    model = step.turn_row.model if step.turn_row is not None else "the model"
    return (
        f"Step {step.seq} of {s.name} is a model turn ({model}): the app cannot {action} it, it never calls a "
        "model. Rerun the agent in record mode (--tape-mode=record: its turns and calls recorded anew, as a "
        "candidate) or in fill mode (--tape-mode=fill: what the tape has no answer for is recorded), then review "
        "the candidate here."
    )
