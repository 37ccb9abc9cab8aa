"""What the review keys ask before they act: what ``a`` accepts, and the questions of ``r``, ``u`` and ``R``.

Each question is a (title, body) pair for :class:`~tapetui.tui.screens.confirm.ConfirmScreen`.
"""

from __future__ import annotations

from tapetui.core.config import Config
from tapetui.core.index import CallRecord
from tapetui.review.history import HistoryRecord
from tapetui.review.sessions import Session
from tapetui.tui.widgets.session_tree import StepRef

__all__ = ["accept_what", "reject_question", "rerecord_question", "undo_question"]


def accept_what(s: Session, step: StepRef | None) -> str:
    """What ``a`` accepts: one step of the candidate, or the whole candidate."""
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
