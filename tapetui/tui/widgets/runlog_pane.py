"""The live run-log pane: one session's latest run, growing while its run log grows."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Log

from tapetui.core.changes import short
from tapetui.core.textsafe import safe_text

MAX_LINES = 5000  # lines the pane keeps; older ones scroll away


def event_line(ev: dict[str, Any]) -> str:
    """One run-log event as a line of the pane (text from the run log is made safe for the terminal)."""
    kind = str(ev.get("event"))
    seq = ev.get("seq")
    tool = ev.get("tool", "")
    extra = ""
    if kind == "drift":
        extra = "  " + "; ".join(f"{c[0]}: {c[1]!r} → {c[2]!r}" for c in ev.get("changes") or [])[:200]
    elif kind == "miss":
        extra = f"  nearest step {ev.get('nearest')}" if ev.get("nearest") else "  not on tape"
    elif kind == "fingerprint":
        extra = f"  {ev.get('recorded')} → {ev.get('live')}"
    elif kind == "end":
        st = ev.get("stats") or {}
        hits, misses = st.get("tape_hits", 0), st.get("tape_misses", 0)
        extra = (
            f"  {hits} hit{'s' * (hits != 1)}, {misses} miss{'es' * (misses != 1)}, "
            f"{st.get('drift_events', 0)} drift, {st.get('unused', 0)} unused"
        )
    elif kind == "start":
        extra = f"  mode {ev.get('mode')}"
    elif kind == "hit" and ev.get("tolerated"):
        extra = (
            "  tolerated: "
            + "; ".join(f"{t.get('path')} {t.get('text')}" for t in ev["tolerated"] if isinstance(t, dict))[:200]
        )
    elif kind == "phase":
        extra = f"  {ev.get('name')}"
    elif kind == "note":
        value = ev.get("value")
        shown = value[:200] if isinstance(value, str) else short(value, 200)  # a value cut by depth says so
        extra = f"  {ev.get('kind')}: {shown}"
    head = f"{kind:<11}" + (f" step {seq:<4} {tool}" if seq is not None else "")
    return safe_text(head + extra, newlines=False)


class RunLogPane(Log):
    """The events of the selected session's latest run; new events are appended in batches.

    ``follow`` keeps the newest event in view (the app's F key).
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(max_lines=MAX_LINES, auto_scroll=False, **kw)
        self.follow = False

    def on_mount(self) -> None:
        self.border_title = "live run log (p starts a replay · F follows)"

    def show_run(self, name: str, events: list[dict[str, Any]]) -> None:
        """Replace what the pane shows with session ``name``'s run."""
        self.clear()
        self.write_line(f"── {safe_text(name, newlines=False)} ──" + ("" if events else "  no run yet (p starts one)"))
        self.write_lines([event_line(e) for e in events])

    def add_events(self, name: str, events: list[dict[str, Any]], reset: bool) -> None:
        """Events just appended to session ``name``'s run log; a new run (or a restarted log) starts afresh."""
        if reset or any(e.get("event") == "start" for e in events):
            self.clear()
            self.write_line(f"── {safe_text(name, newlines=False)} ──")
        self.write_lines([event_line(e) for e in events])
        if self.follow:
            self.scroll_end(animate=False)

    def toggle_follow(self) -> bool:
        """Follow the newest event, or stop; returns whether it follows now."""
        self.follow = not self.follow
        self.auto_scroll = self.follow
        # Text, not str: a str border title is markup, and "[following]" would vanish as a tag
        self.border_title = Text("live run log" + ("  [following]" if self.follow else "  (F follows)"))
        if self.follow:
            self.scroll_end(animate=False)
        return self.follow
