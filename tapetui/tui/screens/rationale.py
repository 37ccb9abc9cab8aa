"""Modal that asks why a change is accepted, and optionally a rule for tapes.toml. An empty rationale is refused."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widgets import Button, Input, Label, Static

import tapetui.review as review
from tapetui.core.errors import ConfigError
from tapetui.core.textsafe import safe_text


@dataclass(frozen=True)
class Accepting:
    """What the modal returns: the rationale, and the rule to add to tapes.toml (None: no rule)."""

    why: str
    rule: review.RuleSpec | None = None


class RationaleScreen(ModalScreen[Accepting | None]):
    """Returns what to accept with, or None when cancelled.

    Args:
        what: what is accepted, in words.
        suggestion: a rule (``KIND:PATH[=VALUE]``) that would excuse the first difference: the rule box's
            placeholder, and completed with → once its first letters are typed.
        rules: offer the rule box (one session at a time: a rule is written for one session).
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    RationaleScreen { align: center middle; }
    RationaleScreen > Vertical { width: 80; height: auto; border: thick $accent; background: $surface; padding: 1 2; }
    RationaleScreen #what { margin-bottom: 1; }
    RationaleScreen #problem { color: $error; height: auto; }
    RationaleScreen Horizontal { height: auto; }
    RationaleScreen Button { margin-right: 2; }
    """

    def __init__(self, what: str, suggestion: str | None = None, *, rules: bool = True) -> None:
        super().__init__()
        self.what = what
        # the suggestion is made of a tape's path and tool name: shown escaped, and offered as a completion
        # only when escaping changed nothing (a completion of the escaped text would name another path)
        self.shown_suggestion = safe_text(suggestion, newlines=False) if suggestion else None
        self.suggestion = suggestion if suggestion and self.shown_suggestion == suggestion else None
        self.rules = rules

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text("Accept as the new golden", "bold"))
            yield Static(Text(safe_text(self.what)), id="what")
            yield Label("Why is this change right? (written to the changelog)")
            yield Input(placeholder="why this change is intended (the changelog keeps it, with what changed)", id="why")
            if self.rules:
                yield Static(
                    Text(
                        "Also add a rule for this session to tapes.toml (optional)\nKIND:PATH[=VALUE]"
                        + ("; type its first letters, → completes the suggestion" if self.suggestion else "")
                    ),
                    id="rule-label",
                )
                yield Input(
                    placeholder=self.shown_suggestion or "e.g. tolerance:result.price=0.01, ignore:result.debug",
                    suggester=SuggestFromList([self.suggestion]) if self.suggestion else None,
                    id="rule",
                )
            yield Static("", id="problem")
            with Horizontal():
                yield Button("Accept", variant="success", id="ok")
                yield Button("Cancel (esc)", id="cancel")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "cancel":
            self.dismiss(None)
        else:
            self._submit()

    def _problem(self, text: str) -> None:
        self.query_one("#problem", Static).update(Text(safe_text(text)))  # a rule's text is shown as typed

    def _submit(self) -> None:
        why = self.query_one("#why", Input).value.strip()
        if not why:
            self._problem("A rationale is required: the golden never changes without one.")
            return
        rule = None
        text = self.query_one("#rule", Input).value.strip() if self.rules else ""
        if text:
            try:
                rule = review.parse_rule_spec(text)
            except ConfigError as e:
                self._problem(str(e))
                return
        self.dismiss(Accepting(why, rule))

    def action_cancel(self) -> None:
        self.dismiss(None)
