"""The live run-log pane: one session's latest run, growing while its run log grows."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Log

from tapetui.core.changes import secret_path, short, shown_path, shown_redactor
from tapetui.core.runlog import RunSummary, describe_counts, end_counts
from tapetui.core.textsafe import safe_text

MAX_LINES = 5000  # lines the pane keeps; older ones scroll away


def event_line(ev: dict[str, Any], run: RunSummary | None = None) -> str:
    """One run-log event as a line of the pane (text from the run log is made safe for the terminal).

    ``run``: the run's summary up to this event, for the ``end`` line: its steps counted one status a step, as
    the tree counts them (an older run log's ``end`` stats count events)."""
    kind = str(ev.get("event"))
    seq = ev.get("seq")
    tool = ev.get("tool", "")
    extra = ""
    if kind == "drift":
        changes = [c for c in ev.get("changes") or [] if isinstance(c, list) and len(c) == 3]
        extra = "  " + "; ".join(_change(*c) for c in changes)[:200]
    elif kind == "miss":
        extra = f"  nearest step {ev.get('nearest')}" if ev.get("nearest") else "  not on tape"
    elif kind == "fingerprint":
        extra = f"  {ev.get('recorded')} → {ev.get('live')}"
    elif kind == "end":
        st = ev.get("stats")
        if isinstance(st, dict) and st.get("mode") == "record":
            extra = f"  a recording of {st.get('steps', 0)} call(s)"
        elif run is not None:
            extra = "  " + describe_counts(run.counts(), off_tape=run.off_tape, tolerated=run.tolerated)
        else:
            extra = "  " + end_counts(st if isinstance(st, dict) else {})
    elif kind == "start":
        extra = f"  mode {ev.get('mode')}"
    elif kind == "hit" and ev.get("tolerated"):
        extra = (
            "  tolerated: "
            + "; ".join(
                f"{t.get('path')} [REDACTED]" if secret_path(str(t.get("path"))) else f"{t.get('path')} {t.get('text')}"
                for t in ev["tolerated"]
                if isinstance(t, dict)
            )[:200]
        )
    elif kind == "phase":
        extra = f"  {ev.get('name')}"
    elif kind == "note":
        value = ev.get("value")
        shown = short(value, 200)  # redacted as every value shown is; a value cut by depth says so
        extra = f"  {ev.get('kind')}: {shown}"
    head = f"{kind:<11}" + (f" step {seq:<4} {tool}" if seq is not None else "")
    # what the run log says in words (a rule's text, a reason) redacted too, as every value shown is
    return safe_text(shown_redactor().redact_text(head + extra), newlines=False)


def _change(path: Any, old: Any, new: Any) -> str:
    """A drift event's change as the pane shows it: redacted as every value shown is (see tapetui.core.changes)."""
    shown = shown_path(str(path))
    if secret_path(str(path)):
        return f"{shown}: [REDACTED]"
    return f"{shown}: {short(old, 40, around=new if isinstance(new, str) else None)} → {short(new, 40)}"


class RunLogPane(Log):
    """The events of the selected session's latest run; new events are appended in batches.

    ``follow`` keeps the newest event in view (the app's F key).
    """

    # a long event (a note, a drift's changes) scrolls sideways with the keys when the pane has the focus, but
    # draws no scrollbar: on a short pane it covered the last event
    DEFAULT_CSS = """
    RunLogPane { scrollbar-size-horizontal: 0; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(max_lines=MAX_LINES, auto_scroll=False, **kw)
        self.follow = False
        self._run = RunSummary()  # the shown run so far: its end line counts steps as the tree does
        # a run group's runs shown (tapetui.core.runstart): each its own summary, by run id; what they join on
        self._runs: dict[str, RunSummary] = {}

    def on_mount(self) -> None:
        self.border_title = "live run log (p starts a replay · F follows)"

    def show_run(self, name: str, events: list[dict[str, Any]], problem: str | None = None) -> None:
        """Replace what the pane shows with session ``name``'s run (``problem``: why it could not be read)."""
        self.clear()
        self._run, self._runs = RunSummary(), {}
        said = f"  {problem}" if problem is not None else "" if events else "  no run yet (p starts one)"
        self.write_line(f"── {safe_text(name, newlines=False)} ──" + safe_text(said, newlines=False))
        self.write_lines([self._line(e) for e in events])

    def add_events(self, name: str, events: list[dict[str, Any]], reset: bool) -> None:
        """Events just appended to session ``name``'s run log; a new run (or a restarted log) starts afresh."""
        starts = [e for e in events if e.get("event") == "start"]
        # a new run starts afresh (a replaced file, or a start without a run id: the file's first); one joining the
        # runs shown (with its run's id) is shown beside them
        if reset or any(type(e.get("run")) is not str for e in starts):
            self.clear()
            self._run, self._runs = RunSummary(), {}
            self.write_line(f"── {safe_text(name, newlines=False)} ──")
        self.write_lines([self._line(e) for e in events])
        if self.follow:
            self.scroll_end(animate=False)

    def _line(self, ev: dict[str, Any]) -> str:
        rid = ev.get("run")
        if type(rid) is str:  # a run that joined others (or a run group's): its end line counts its own steps
            run = self._runs.setdefault(rid, RunSummary())
            run.add(ev)
            return event_line(ev, run)
        self._run.add(ev)
        return event_line(ev, self._run)

    def toggle_follow(self) -> bool:
        """Follow the newest event, or stop; returns whether it follows now."""
        self.follow = not self.follow
        self.auto_scroll = self.follow
        # Text, not str: a str border title is markup, and "[following]" would vanish as a tag
        self.border_title = Text("live run log" + ("  [following]" if self.follow else "  (F follows)"))
        if self.follow:
            self.scroll_end(animate=False)
        return self.follow
