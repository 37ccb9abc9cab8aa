"""Modal that asks why a change is accepted. An empty rationale is refused."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from tapetui.core.textsafe import safe_text


class RationaleScreen(ModalScreen[str | None]):
    """Returns the rationale, or None when cancelled."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    RationaleScreen { align: center middle; }
    RationaleScreen > Vertical { width: 80; height: auto; border: thick $accent; background: $surface; padding: 1 2; }
    RationaleScreen #what { margin-bottom: 1; }
    RationaleScreen #problem { color: $error; height: auto; }
    RationaleScreen Horizontal { height: auto; }
    """

    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(Text("Accept as the new golden", "bold"))
            yield Static(Text(safe_text(self.what)), id="what")
            yield Label("Why is this change right? (written to the changelog)")
            yield Input(placeholder="e.g. max_words lowered to 80 on purpose: shorter reports", id="why")
            yield Static("", id="problem")
            yield Button("Accept", variant="success", id="ok")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self._submit()

    def _submit(self) -> None:
        why = self.query_one("#why", Input).value.strip()
        if not why:
            self.query_one("#problem", Static).update("A rationale is required: the golden never changes without one.")
            return
        self.dismiss(why)

    def action_cancel(self) -> None:
        self.dismiss(None)
