"""Searchable list of every key."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

KEYS: list[tuple[str, str]] = [
    ("j / k / ↑ / ↓", "move in the tree"),
    ("enter", "open: expand a session, load more steps"),
    ("esc", "back: close the filter, collapse, leave a screen"),
    ("/", "filter: tool:NAME, status:drift|miss|stale|pending|error, or free text"),
    ("n / N", "next / previous session or step that needs review"),
    ("s", "skip: go to the next item that needs review"),
    ("space", "mark a session (A accepts every marked one)"),
    ("a", "accept the candidate (session) or one aligned step, with a rationale"),
    ("A", "accept every marked session, or every filtered one with a candidate, with one rationale"),
    ("r", "reject the session's candidate"),
    ("R", "re-record the step with the live tool (asks first)"),
    ("x", "expire the step's entry so the next fill re-records it"),
    ("X", "expire every time-sensitive entry of the session"),
    ("p", "start a replay of the session (tapes.toml replay_command) and watch it live"),
    ("F", "follow the newest run-log event"),
    ("t", "diff: side by side / unified"),
    ("] / [", "diff: next / previous change"),
    ("u", "undo the last accept, reject or expire of this sitting"),
    ("ctrl+p", "command palette"),
    ("?", "this help"),
    ("q", "quit"),
]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical { width: 90; height: 80%; border: thick $accent; background: $surface; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(placeholder="search keys…", id="help-search")
            with VerticalScroll():
                yield Static(self._table(""), id="help-table")

    def _table(self, query: str) -> Table:
        t = Table(box=None, expand=True)
        t.add_column("key", style="bold cyan", no_wrap=True)
        t.add_column("what it does")
        q = query.lower()
        for key, what in KEYS:
            if q in key.lower() or q in what.lower():
                t.add_row(Text(key), Text(what))
        return t

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#help-table", Static).update(self._table(event.value))

    def action_close(self) -> None:
        self.dismiss(None)
