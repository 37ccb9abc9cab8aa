"""Searchable list of every key."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from tapetui.review.sessions import GLYPH

KEYS: list[tuple[str, str]] = [
    ("j / k / ↑ / ↓", "move in the tree"),
    ("enter", "open: expand a session, load more steps"),
    ("esc", "back: close and clear the filter, collapse, leave a screen"),
    ("/", "filter: tool:NAME, status:drift|contract|miss|stale|unused|pending|error, or part of a name"),
    ("n / N", "next / previous session or step that needs review"),
    ("s", "skip this session: n and N pass it by for the rest of this sitting"),
    ("space", "mark a session (A accepts every marked one)"),
    (
        "a",
        "accept the candidate (session) or one aligned step, with a rationale; optionally add a rule "
        "(KIND:PATH[=VALUE], e.g. tolerance:result.price=0.01) to tapes.toml for the session",
    ),
    ("A", "accept every marked session, or every filtered one with a candidate, with one rationale"),
    ("r", "reject the session's candidate (asks first; logged in the changelog, u brings it back)"),
    ("R", "re-record the step with the live tool (asks first)"),
    ("x", "expire the step's entry so the next fill re-records it"),
    ("X", "expire every time-sensitive entry of the session"),
    ("p", "start a replay of the session (tapes.toml replay_command) and watch it live"),
    (
        "J",
        "import the comparison hooks tapes.toml names for the session (judge, similarity; asks first) "
        "and compare with them: until then the app runs none",
    ),
    ("F", "follow the newest run-log event"),
    ("t", "diff: side by side / unified"),
    ("] / [", "diff: next / previous change"),
    ("u", "undo the newest accept, reject or expire of this session, from any sitting (asks first)"),
    ("/ model:NAME", "filter: sessions with a model turn of that model (part of its name, or a pattern: openai:*)"),
    ("ctrl+p", "command palette"),
    ("?", "this help"),
    ("q", "quit"),
]


# What the glyphs of the tree mean. Each step has one status: the first of contract, drift, miss, stale,
# hit, unused that the last run gave it; a session's counts add up to the steps the run touched.
LEGEND: list[tuple[str, str]] = [
    (GLYPH["hit"], "hit: replayed from the tape as recorded"),
    (GLYPH["drift"], "drift: called with other arguments than recorded"),
    (GLYPH["contract"], "contract: the tool's contract (fingerprint) changed since it was recorded"),
    (GLYPH["miss"], "miss: a call of the run is not on the tape; shown at the recorded step nearest to it"),
    (GLYPH["miss"] + "+N", "misses near no recorded step (calls the tape never had)"),
    (GLYPH["stale"], "stale: the recorded answer had expired"),
    (GLYPH["unused"], "unused: recorded, but the run did not call it"),
    (GLYPH["error"], "error: this step recorded an error (status:error finds such sessions)"),
    (GLYPH[""], "not replayed yet"),
    (
        GLYPH["turn"],
        "a model turn among the steps (after its status glyph): the model, its tokens (110 tok, or 110t in a "
        "narrow tree) and → the tools it asked for; enter shows the conversation and, with a candidate, its prompt "
        "diff side by side; model:NAME filters by model; the app never calls a model (R says how to re-record)",
    ),
    (GLYPH["pending"] + " pending", "a candidate waits for review: a accepts, r rejects"),
    (GLYPH["running"] + " running", "a replay is running now"),
    (GLYPH["rerun"] + " rerun", "the last run played another version of the golden (an accept or undo since): p"),
    (GLYPH["unreadable"], "the tape cannot be read: the detail pane says what is wrong"),
    ("▶ / ▼", "a closed / open folder or session (enter opens it)"),
    (GLYPH["marked"], "marked with space: A accepts every marked session"),
]

# short lines (the modal is 76 columns inside at 80×24), so that no glyph is ever wrapped away from its word:
# what a step was, then what a session is
GLANCE = "\n".join(
    "  ".join(pairs)
    for pairs in (
        [f"{GLYPH[k]} {k}" for k in ("hit", "drift", "contract", "miss", "stale", "unused")],
        [f"{GLYPH['error']} error", f"{GLYPH['']} not replayed", f"{GLYPH['pending']} pending"]
        + [f"{GLYPH['turn']} model turn"],
        [f"{GLYPH['running']} running", f"{GLYPH['rerun']} rerun", f"{GLYPH['unreadable']} unreadable"]
        + [f"{GLYPH['marked']} marked", "▶ ▼ closed/open"],
    )
)

# what each action does, for the command palette (ctrl+p): one line per key binding
COMMAND_HELP = {
    "accept": "Promote the candidate (or this step) to golden, with a rationale (and optionally a rule)",
    "accept_all": "Accept every marked or filtered session with one rationale",
    "reject": "Discard the session's candidate",
    "rerecord": "Run this step's tool live; the result becomes a pending change",
    "expire": "Mark this entry expired so the next fill re-records it",
    "expire_all": "Expire every time-sensitive entry of the session",
    "replay": "Run tapes.toml's replay_command for this session and watch it live",
    "allow_hooks": "Import this session's comparison hooks (asks first) and compare with them",
    "follow": "Follow the newest run-log event",
    "undo": "Undo the newest accept, reject or expire of the session under the cursor (tapetui undo SESSION)",
    "skip": "Skip this session: n and N pass it by for the rest of this sitting",
    "filter": "Filter sessions by tool, model, status or text",
    "next_review": "Go to the next item that needs review",
    "prev_review": "Go to the previous item that needs review",
    "help": "Show every key and what the status glyphs mean",
    "toggle_unified": "Show the diff side by side or unified",
    "next_change": "Scroll the diff to the next change",
    "prev_change": "Scroll the diff to the previous change",
    "mark": "Mark or unmark the session; A accepts every marked one",
}


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > Vertical {
        width: 90; max-width: 100%; height: 80%; max-height: 100%;
        border: thick $accent; background: $surface; padding: 0 1;
    }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Input(placeholder="search keys…", id="help-search")
            with VerticalScroll():
                yield Static(self._table(""), id="help-table")

    def _table(self, query: str) -> RenderableType:
        q = query.lower()
        if not q:  # the glyphs at a glance, above the keys (each has a row with more below)
            return Group(Text(GLANCE, "italic"), Text(""), self._rows(q))
        return self._rows(q)

    def _rows(self, q: str) -> RenderableType:
        keys = [(key, what) for key, what in KEYS if q in key.lower() or q in what.lower()]
        legend = [(glyph, what) for glyph, what in LEGEND if q in glyph.lower() or q in what.lower()]
        if not keys and not legend:
            return Text(f"no key matches {q!r} (esc closes, backspace widens the search)", "italic")
        t = Table(box=None, expand=True)
        t.add_column("key", style="bold cyan", no_wrap=True)
        t.add_column("what it does")
        for key, what in keys:
            t.add_row(Text(key), Text(what))
        if legend:
            if keys:
                t.add_row(Text(""), Text(""))
            t.add_row(
                Text("glyph", "bold"), Text("in the tree: a step's status (one each), a session's counts", "bold")
            )
            for glyph, what in legend:
                t.add_row(Text(glyph), Text(what))
        return t

    def on_input_changed(self, event: Input.Changed) -> None:
        self.query_one("#help-table", Static).update(self._table(event.value))

    def action_close(self) -> None:
        self.dismiss(None)
