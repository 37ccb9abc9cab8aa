"""One thing ``check`` reports about a session: a :class:`Finding`, and what it can be about (:data:`FindingKind`).

Apart from :mod:`tapetui.review.findings` (the rules that make them) so that every module of rules — the tool
calls', the model turns' (:mod:`tapetui.review.turnfindings`) — makes the same value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from tapetui.core.changes import shown_redactor
from tapetui.review.comparison import RowLevel

__all__ = ["Finding", "FindingKind"]

FindingKind = Literal[
    "drift",  # a call's arguments changed (run log)
    "miss",  # a call not on the tape (run log)
    "fingerprint",  # a tool's contract changed (run log)
    "unused",  # recorded steps never called, or not reached
    "stale",  # an expired entry was replayed
    "stale_run",  # the run log is not of this golden: it predates it, is another golden's, was edited, or has none
    "pending",  # a candidate waits for review
    "candidate",  # one line of the candidate's comparison with the golden
    "error",  # the run ended in an error, or has no end
    "tools",  # the executed tool sequence changed
    "torn",  # the golden's last line is torn
    "key",  # a stored key is not the key of its arguments
    "journal",  # an interrupted change recover could not finish: review actions on the session are refused
    "capability",  # a tool the golden never used: a new capability to audit
    "tolerated",  # a replay call served from a recording whose differences a rule excuses (a warning)
    "note",  # a note (tape.note) differs from the golden's
    "samples",  # fewer repeated samples match than tapes.toml requires
    "prompt",  # a model request drifted from, or missed, its recorded turn (run log)
    "model_tools",  # the tools the model asked for changed (from its turns' responses)
    "cost",  # the run spent more tokens than its golden by more than [compare] tokens allows
    "behaviour",  # a tool or the model run live on replay returned other than its recording (a warning)
]
"""What a :class:`Finding` is about."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``check`` reports about a session."""

    kind: FindingKind
    text: str
    seq: int | None = None
    tool: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    warning: bool = False  # shown, but does not fail check
    level: RowLevel | None = None  # a line of a candidate's comparison: its row's level (a verdict's pass/fail)

    def __post_init__(self) -> None:
        # its text quotes what a run log or tape said (a miss's reason, a rule's text): redacted as it is shown,
        # as every value is (tapetui.core.changes); the values it formats are redacted already, and stay so
        object.__setattr__(self, "text", shown_redactor().redact_text(self.text))

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seq": self.seq,
            "tool": self.tool,
            "text": self.text,
            "warning": self.warning,
            **({"level": self.level} if self.level is not None else {}),
            **self.data,
        }
