"""The detail pane: a session's summary or a step's arguments, result and diffs."""

from __future__ import annotations

from typing import Any

import orjson
from rich.console import Group, RenderableType
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from tapetui.golden import Comparison, StepDiff
from tapetui.jsondiff import format_changes
from tapetui.tapefile import CallRecord
from tapetui.textsafe import safe_json_text, safe_text
from tapetui.tui.model import Session
from tapetui.tui.widgets.diff_view import DiffResult


def json_block(value: Any) -> Syntax:
    text = safe_json_text(orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS,
                                       default=repr).decode())
    return Syntax(text, "json", theme="ansi_dark", word_wrap=True, background_color="default")


def lines_text(lines: list[str], style: str = "") -> Text:
    return Text("\n".join(safe_text(line, newlines=False) for line in lines), style)


def kv_table(rows: list[tuple[str, Any]]) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold cyan", no_wrap=True)
    t.add_column()
    for k, v in rows:
        t.add_row(k, v if isinstance(v, Text) else Text(safe_text(str(v), newlines=False)))
    return t


class DetailView(VerticalScroll):
    """Shows whatever is selected in the tree. Holds the current diff for the diff keys."""

    DEFAULT_CSS = """
    DetailView { width: 1fr; padding: 0 1; }
    DetailView > Static { width: 1fr; }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.body = Static(Text("Select a session or a step.", "dim"), id="detail-body")
        self.diffs: list[tuple[str, DiffResult]] = []
        self.unified = False
        self._change_cursor = -1
        self._head: list[RenderableType] = []
        self._tail: list[RenderableType] = []  # what changed: shown right under the head
        self._rest: list[RenderableType] = []  # full arguments and result, after the diffs

    def compose(self):  # type: ignore[no-untyped-def]
        yield self.body

    def show(self, *parts: RenderableType, rest: list[RenderableType] | None = None) -> None:
        self.diffs = []
        self._change_cursor = -1
        self._head = list(parts)
        self._tail = []
        self._rest = list(rest or [])
        self.body.update(Group(*parts, *self._rest))
        self.scroll_home(animate=False)

    def show_error(self, message: str) -> None:
        self.show(Text("⚠ " + safe_text(message), "bold red"))

    # ---- a folder ---------------------------------------------------------------
    def show_folder(self, name: str, sessions: list[Session]) -> None:
        loaded = [s for s in sessions if s.loaded]
        count = (lambda pred: f"{sum(1 for s in sessions if pred(s)):,}")  # noqa: E731
        rows: list[tuple[str, Any]] = [
            ("folder", name), ("sessions", f"{len(sessions):,}"),
            ("to review", count(lambda s: s.needs_review)), ("pending", count(lambda s: s.pending)),
            ("with drift", count(lambda s: s.summary.drift)), ("with misses", count(lambda s: s.summary.misses)),
            ("with stale", count(lambda s: s.summary.stale)), ("unreadable", count(lambda s: s.error)),
        ]
        if len(loaded) < len(sessions):
            rows.append(("run logs", f"{len(loaded):,} of {len(sessions):,} read so far"))
        self.show(kv_table(rows), Text("\nenter opens the folder · n goes to the next item to review", "dim"))

    # ---- a session --------------------------------------------------------------
    def show_session(self, s: Session, header: dict[str, Any] | None, steps: int, cmp: Comparison | None,
                     notes: list[str]) -> None:
        sm = s.summary
        rows: list[tuple[str, Any]] = [("session", s.name), ("tape", s.golden.name), ("steps", steps)]
        if header:
            for k, v in sorted((header.get("labels") or {}).items()):
                rows.append((f"label {k}", v))
            rows.append(("created", header.get("created_at", "")))
        run = (f"{sm.hits} hits, {sm.misses} misses, {sm.drift} drift, {sm.stale} stale, {sm.unused} unused"
               + (" — running" if sm.running else "")) if (sm.ended or sm.running) else "no run yet (p starts one)"
        rows.append(("last run", run))
        rows.append(("candidate", "pending review (a accept · r reject · enter to see steps)" if s.pending else "none"))
        parts: list[RenderableType] = [kv_table(rows)]
        if notes:
            parts += [Rule("run log", style="red"), lines_text(notes, "red")]
        self.show(*parts)
        if cmp is not None:
            self._tail = [Rule("candidate vs golden", style="magenta"), lines_text(cmp.lines() or ["no differences"])]
            for sd in cmp.changed_steps:
                if sd.old is not None and sd.new is not None and sd.kind == "changed":
                    if sd.arg_changes:
                        self.diffs.append((f"step {sd.seq} {sd.tool} · arguments", DiffResult(sd.old.args, sd.new.args)))
                    if sd.result_changes:
                        self.diffs.append((f"step {sd.seq} {sd.tool} · result", DiffResult(_res(sd.old), _res(sd.new))))
            self._render_diffs()

    # ---- a step -----------------------------------------------------------------
    def show_step(self, s: Session, rec: CallRecord, sd: StepDiff | None, drift: dict[str, Any] | None,
                  contract: list[str]) -> None:
        status = s.summary.status.get(rec.seq, "")
        rows: list[tuple[str, Any]] = [
            ("step", f"{rec.seq}  {rec.tool}" + (f"  (model asked for {rec.requested_tool})"
                                                  if rec.requested_tool and rec.requested_tool != rec.tool else "")),
            ("status", status or "not replayed yet"),
            ("key", rec.key), ("fingerprint", rec.fingerprint),
            ("side effect", "yes — runs only when recorded or filled" if rec.side_effect else "no"),
            ("duration", f"{rec.ms:.3f} ms"), ("recorded", rec.recorded_at or "-"),
            ("expires", rec.expires_at or "never (not time-sensitive)"),
        ]
        if rec.error is not None:
            rows.append(("error", Text(safe_text(f"{rec.error.get('type')}: {rec.error.get('message')}",
                                                 newlines=False), "bold red")))
        parts: list[RenderableType] = [kv_table(rows)]
        if contract:
            parts += [Rule("contract changed", style="red"), lines_text(contract, "yellow")]
        rest: list[RenderableType] = [Rule("arguments"), json_block(rec.args),
                                      Rule("result" if rec.error is None else "error"),
                                      json_block(rec.result if rec.error is None else rec.error)]
        self.show(*parts, rest=rest)
        if sd is not None and sd.old is not None and sd.new is not None:
            self._tail = [Rule(f"candidate differs ({sd.kind})", style="magenta"),
                          lines_text(sd.lines(), "magenta")]
            if sd.arg_changes:
                self.diffs.append(("arguments: recorded | candidate", DiffResult(sd.old.args, sd.new.args)))
            if sd.result_changes:
                self.diffs.append(("result: recorded | candidate", DiffResult(_res(sd.old), _res(sd.new))))
        elif drift is not None and drift.get("event") == "drift":
            changes = [tuple(c) for c in drift.get("changes") or []]
            self._tail = [Rule("argument drift in the last run", style="red"),
                          lines_text(format_changes(changes, prefix="args"), "red")]  # type: ignore[arg-type]
            self.diffs.append(("arguments: recorded | last run",
                               DiffResult(drift.get("recorded_args"), drift.get("args"))))
        self._render_diffs()

    # ---- diffs ------------------------------------------------------------------
    def _render_diffs(self) -> None:
        parts = list(self._head) + list(self._tail)
        for title, d in self.diffs:
            parts.append(Rule(Text(title + ("  (unified)" if self.unified else "  (t: unified · ]/[ next/prev)")),
                              style="bold"))
            parts.append(d.render(self.unified))
        self.body.update(Group(*parts, *self._rest))

    def toggle_unified(self) -> None:
        self.unified = not self.unified
        self._render_diffs()

    def jump_change(self, step: int) -> bool:
        """Scroll to the next (+1) or previous (-1) changed block; False when there is none."""
        if not self.diffs:
            return False
        targets = self._change_offsets()
        if not targets:
            return False
        self._change_cursor = (self._change_cursor + step) % len(targets)
        self.scroll_to(y=targets[self._change_cursor], animate=False)
        return True

    def _change_offsets(self) -> list[int]:
        # Lines above the first diff: measured from the rendered body, then rows within each diff.
        width = max(self.size.width - 2, 20)
        from rich.console import Console

        console = Console(width=width, file=open("/dev/null", "w"), color_system=None)  # noqa: SIM115
        try:
            y = len(console.render_lines(Group(*self._head, *self._tail), pad=False))
        finally:
            console.file.close()
        out = []
        for _title, d in self.diffs:
            y += 1  # the rule
            if not self.unified:
                y += 1  # the header row
            out += [y + r for r in d.change_rows]
            y += len(d.unified if self.unified else d.rows)
        return out


def _res(rec: CallRecord) -> Any:
    return {"error": rec.error} if rec.error is not None else rec.result
