"""The app's keys, in the order the footer shows them (what each does: ``screens/help.py``)."""

from __future__ import annotations

from textual.binding import Binding, BindingType

__all__ = ["KEYS"]

KEYS: list[BindingType] = [
    Binding("q", "quit", "Quit"),
    Binding("question_mark", "help", "Help"),
    Binding("slash", "filter", "Filter"),
    Binding("n", "next_review", "Next"),
    Binding("N", "prev_review", "Previous session to review", show=False),
    Binding("s", "skip", "Skip this session (n and N pass it by)", show=False),
    Binding("a", "accept", "Accept"),
    Binding("A", "accept_all", "Accept all marked", show=False),
    Binding("r", "reject", "Reject"),
    Binding("R", "rerecord", "Re-record"),
    Binding("x", "expire", "Expire"),
    Binding("X", "expire_all", "Expire all time-sensitive", show=False),
    Binding("p", "replay", "Replay"),
    Binding("J", "allow_hooks", "Run hooks"),  # shown only where tapes.toml names hooks for the session
    Binding("J", "no_hooks", "Run hooks", show=False),  # elsewhere J says why there is nothing to run
    Binding("F", "follow", "Follow"),
    Binding("t", "toggle_unified", "Unified or side-by-side diff", show=False),
    Binding("right_square_bracket", "next_change", "Next change", show=False),
    Binding("left_square_bracket", "prev_change", "Previous change", show=False),
    Binding("space", "mark", "Mark session", show=False),  # the tree binds space to it as well (its own wins)
    Binding("u", "undo", "Undo"),
    Binding("escape", "back", "Back", show=False),
]
