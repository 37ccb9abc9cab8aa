"""The detail pane: a session's summary or a step's arguments, result and diffs."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.rule import Rule
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static
from textual.worker import get_current_worker

from tapetui.core.changes import Change, format_changes, json_text, shown_redactor
from tapetui.core.config import Config
from tapetui.core.index import CallRecord
from tapetui.core.redact import REDACTED
from tapetui.core.runlog import describe_counts
from tapetui.core.textsafe import safe_json_text, safe_text
from tapetui.core.turns import change_line
from tapetui.review import RowLevel, Verdict
from tapetui.review.sessions import Session
from tapetui.tui.detailmodel import SessionDetail, StepDetail, TurnDetail
from tapetui.tui.model import Row, comparison_rows, step_rows
from tapetui.tui.widgets import diff_view
from tapetui.tui.widgets.diff_view import DiffResult, size_text

SHOWN_CHARS = 2_000  # of a full argument or result value; a bigger one is cut (its diff is bounded apart)
PENDING_NOTE_AFTER = 0.15  # seconds a diff may take before a line says it is being computed


def json_block(value: Any) -> RenderableType:
    raw = json_text(value, indent=True, sort_keys=True).encode()  # any depth: cut at SHOWN_DEPTH, marked
    if len(raw) <= SHOWN_CHARS:
        return Syntax(
            safe_json_text(raw.decode()), "json", theme="ansi_dark", word_wrap=True, background_color="default"
        )
    # highlighting and wrapping a megabyte would hold the screen for seconds: the start is enough here
    head = safe_json_text(raw[:SHOWN_CHARS].decode(errors="ignore"))  # a cut character is dropped, not shown
    return Group(
        Syntax(head, "json", theme="ansi_dark", word_wrap=True, background_color="default"),
        Text(f"… (the first {SHOWN_CHARS:,} bytes of {size_text(len(raw))} are shown)", "italic dim"),
    )


def text_block(text: str, style: str = "") -> Text:
    """A text from a tape (a message, a prompt) shown literally, its lines kept, redacted as every value shown is
    (tapetui.core.changes); a long one is cut as :func:`json_block` cuts a value."""
    text = shown_redactor().redact_text(text)
    if len(text) <= SHOWN_CHARS:
        return Text(safe_text(text), style)
    out = Text(safe_text(text[:SHOWN_CHARS]), style)
    out.append(f"\n… (the first {SHOWN_CHARS:,} of {len(text):,} characters are shown)", "italic dim")
    return out


def lines_text(lines: list[str], style: str = "", *, mono: bool = False) -> Text:
    return Text("\n".join(safe_text(line, newlines=False) for line in lines), mono_style(style, mono))


def mono_style(style: str, mono: bool) -> str:
    """``style`` as a terminal without colour (NO_COLOR) shows it: what asks for attention (red, yellow,
    magenta) bold at full contrast, since a monochrome terminal turns those colours into dark greys; a pass
    (green), an excuse (cyan) or a dim line plain."""
    if not mono or not style:
        return style
    return "" if style in ("green", "cyan", "dim") else "bold"


ROW_STYLES: dict[RowLevel, str] = {
    "pass": "green",
    "fail": "red",
    "capability": "bold red",
    "excused": "cyan",
    "differs": "",
}
"""How each level of a comparison's row is drawn: a verdict that passed, one that failed, a difference a
rule excused (its text names the comparator: ``— within tolerance ±0.01``), a plain difference."""


def rows_text(rows: Sequence[Row], differs: str = "", *, mono: bool = False) -> Text:
    """Rows of a comparison, one a line, styled by level (``differs`` for a plain difference); a new
    capability stands out in bold. The text is literal: markup in a value from a tape is shown as written."""
    out = Text()
    for i, (line, level) in enumerate(rows):
        if i:
            out.append("\n")
        style = differs if level == "differs" else ROW_STYLES[level]
        out.append(safe_text(line, newlines=False), mono_style(style, mono))
    return out


def verdict_rows(verdicts: Sequence[Verdict]) -> list[Row]:
    return [(v.line(), "pass" if v.passed else "fail") for v in verdicts]


def _error_text(err: dict[str, Any]) -> str:
    """A recorded error as a line: ``Type: message``, redacted as every value shown is (tapetui.core.changes)."""
    return shown_redactor().redact_text(f"{err.get('type')}: {err.get('message')}")


def kv_table(rows: list[tuple[str, Any]]) -> Table:
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold cyan", no_wrap=True)
    t.add_column()
    for k, v in rows:
        # both cells are Text: a str cell would be parsed as markup (label keys come from the tape)
        t.add_row(
            Text(safe_text(str(k), newlines=False)),
            v if isinstance(v, Text) else Text(safe_text(str(v), newlines=False)),
        )
    return t


def no_tapes_text(cfg: Config) -> str:
    """What an empty (or wrong) folder shows: where tapetui looked, and what to do next."""
    if cfg.path is not None:
        looked = f"tapes.toml: {cfg.path} (its [tapes] dir is the folder above)"
    else:
        here = Path.cwd().resolve()
        top = next((d for d in (here, *here.parents) if (d / ".git").exists()), None)
        looked = (
            f"looked for tapes.toml in {here}"
            + (f" and the folders above it up to {top}" if top and top != here else " and the folders above it")
            + ": none found"
        )
    return (
        f"No tapes found in {cfg.tapes_dir}\n({looked})\n\n"
        "What to do next:\n"
        "• record a session: pytest --tape-mode=record\n"
        '  (or Tape(path, mode="record") in code)\n'
        "• open the folder that holds the tapes: tapetui DIR\n"
        "  (or set [tapes] dir in tapes.toml)\n"
        "• try the samples: python -m tapetui.sample_agent\n"
        "  regenerate sample_tapes, then tapetui sample_tapes\n\n"
        "Tapes that appear here show up by themselves. q quits."
    )


class DetailView(VerticalScroll):
    """Shows whatever is selected in the tree. Holds the current diff for the diff keys."""

    DEFAULT_CSS = """
    DetailView { width: 1fr; padding: 0 1; }
    DetailView > Static { width: 1fr; }
    """

    @property
    def mono(self) -> bool:
        """The app runs without colour (NO_COLOR): findings bold instead of red (see :func:`mono_style`)."""
        return self.is_attached and bool(getattr(self.app, "no_color", False))

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        # Three parts, each redrawn only when it changes: a diff arriving from its worker (or t) does
        # not lay out and draw again the arguments and result below it.
        self.body = Static(Text("Select a session or a step.", "dim"), id="detail-body")  # head and what changed
        self.diff_body = Static(id="detail-diffs")
        self.rest_body = Static(id="detail-rest")  # full arguments and result
        self.diffs: list[tuple[str, DiffResult]] = []  # computed diffs, in a worker (see _compute_diffs)
        self.computing = False  # diffs of what is shown are being computed
        self._wanted: list[tuple[str, Any, Any]] = []  # (title, old, new) of the diffs to compute
        self._gen = 0  # what is shown; a diff computed for an older one is dropped
        self._step_shown = False  # a step's detail: its diff is the point, so a short pane scrolls to it
        self.subject: tuple[Any, ...] = ()  # what is shown: ("session", golden) or ("step", golden, seq)
        self.suggested_rule: str | None = None  # a rule that would excuse the first difference of the subject
        self._slow_note = False  # the "computing" line is on screen
        self.unified = False
        self._head: list[RenderableType] = []
        self._tail: list[RenderableType] = []  # what changed: shown right under the head
        self._rest: list[RenderableType] = []  # full arguments and result, after the diffs

    def compose(self):  # type: ignore[no-untyped-def]
        yield self.body
        yield self.diff_body
        yield self.rest_body

    def on_mount(self) -> None:
        self.diff_body.display = self.rest_body.display = False

    # ---- "more below": on a short pane (80×24) the part that matters may be below the fold ----------------
    MORE = "more below: Tab, then ↓ or PgDn"
    MORE_FOCUSED = "more below: ↓ or PgDn · shift+Tab: the tree"

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        self._say_more()

    def on_resize(self) -> None:
        self.call_after_refresh(self._say_more)

    def on_focus(self) -> None:
        self.call_after_refresh(self._say_more)

    def on_blur(self) -> None:
        self.call_after_refresh(self._say_more)

    def _say_more(self) -> None:
        """The pane's lower border says how to scroll while something is below the fold (and, with a diff, ])."""
        below = self.max_scroll_y > 0 and self.scroll_y < self.max_scroll_y
        how = self.MORE_FOCUSED if self.has_focus else self.MORE  # after Tab the keys are the pane's already
        more = (how + (" · ] next change" if self.diffs else "")) if below else ""
        if str(self.border_subtitle or "") != more:
            self.border_subtitle = more

    def show(self, *parts: RenderableType, rest: list[RenderableType] | None = None) -> None:
        self._gen += 1
        self.subject = ()
        self.suggested_rule = None
        self.diffs = []
        self._wanted = []
        self.computing = False
        self._slow_note = False
        self._head = list(parts)
        self._tail = []
        self._rest = list(rest or [])
        self.body.update(Group(*parts))
        self._update_part(self.diff_body, [])
        self._update_part(self.rest_body, self._rest)
        self.scroll_home(animate=False)
        self.call_after_refresh(self._say_more)

    @staticmethod
    def _update_part(part: Static, renderables: list[RenderableType]) -> None:
        part.display = bool(renderables)
        part.update(Group(*renderables) if renderables else "")

    def show_error(self, message: str) -> None:
        self.show(Text("⚠ " + safe_text(message), "bold red"))

    # ---- a folder ---------------------------------------------------------------
    def show_folder(self, name: str, sessions: list[Session]) -> None:
        loaded = [s for s in sessions if s.loaded]

        def count(pred: Callable[[Session], object]) -> str:
            return f"{sum(1 for s in sessions if pred(s)):,}"

        rows: list[tuple[str, Any]] = [
            ("folder", name),
            ("sessions", f"{len(sessions):,}"),
            ("to review", count(lambda s: s.needs_review)),
            ("pending", count(lambda s: s.pending)),
            ("with drift", count(lambda s: s.summary.drift)),
            ("with misses", count(lambda s: s.summary.misses)),
            ("with stale", count(lambda s: s.summary.stale)),
            ("unreadable", count(lambda s: s.error)),
        ]
        if len(loaded) < len(sessions):
            rows.append(("run logs", f"{len(loaded):,} of {len(sessions):,} read so far"))
        self.show(kv_table(rows), Text("\nenter opens the folder · n goes to the next item to review", "dim"))

    # ---- a session --------------------------------------------------------------
    def show_session(self, d: SessionDetail) -> None:
        """A session's detail, as read in a worker (:func:`tapetui.tui.detailmodel.session_detail`)."""
        self._step_shown = False  # an overview: its own rows come first, whatever the pane's height
        s, header, cmp, notes, verdicts = d.session, d.header, d.comparison, d.notes, d.verdicts
        sm = s.summary
        steps: Any = d.steps
        if d.turns:
            calls = d.steps - d.turns
            steps = f"{d.steps}  ({calls} call{'s' * (calls != 1)}, {d.turns} model turn{'s' * (d.turns != 1)})"
        rows: list[tuple[str, Any]] = [("session", s.name), ("tape", s.golden.name), ("steps", steps)]
        if header:
            for k, v in sorted((header.get("labels") or {}).items()):  # values from the tape: redacted as shown
                value = REDACTED if shown_redactor().is_secret_key(str(k)) else shown_redactor().redact_text(str(v))
                rows.append((f"label {k}", value))
            rows.append(("created", header.get("created_at", "")))
        run = (
            _run_counts(sm) + (" — running" if sm.running else "")
            if (sm.ended or sm.running)
            else "no run yet (p starts one)"
        )
        if sm.mode == "record" and (sm.ended or sm.running):
            run = (
                f"a recording of {sm.live} call(s), not a replay"
                + (" — running" if sm.running else "")
                + ": what it recorded is compared as the candidate; p replays"
            )
        if sm.outdated:
            run = "predates the golden (it ran against another version of it): press p to run the replay again"
        rows.append(("last run", run))
        rows.append(("candidate", "pending review (a accept · r reject · enter to see steps)" if s.pending else "none"))
        older = s.older_candidates()
        if older:
            rows.append(
                ("older candidates", f"{len(older)} displaced by newer recordings, kept in {older[0].parent.name}/")
            )
        parts: list[RenderableType] = [kv_table(rows)]
        if d.hooks_note:
            parts.append(Text(safe_text(d.hooks_note), "yellow"))
        if notes or verdicts:
            failed = bool(notes) or any(not v.passed for v in verdicts)
            parts.append(Rule("run log", style="red" if failed else "green"))
            if verdicts:
                parts.append(rows_text(verdict_rows(verdicts), mono=self.mono))
            if notes:
                parts.append(lines_text(notes, "red", mono=self.mono))
        self.show(*parts)
        self.subject = ("session", s.golden)
        self.suggested_rule = d.suggestion
        if cmp is not None:
            shown = comparison_rows(cmp) if d.rows is None else d.rows
            self._tail = [
                Rule("candidate vs golden", style="magenta"),
                rows_text(shown, mono=self.mono) if shown else Text("no differences"),
            ]
            for sd in cmp.changed_steps:
                if sd.old is not None and sd.new is not None and sd.kind == "changed":
                    if sd.arg_changes:
                        self._wanted.append((f"step {sd.seq} {sd.tool} · arguments", sd.old.args, sd.new.args))
                    if sd.result_changes:
                        self._wanted.append((f"step {sd.seq} {sd.tool} · result", _res(sd.old), _res(sd.new)))
            self._render_diffs()
            self._start_diffs()

    # ---- a step -----------------------------------------------------------------
    def show_step(self, d: StepDetail) -> None:
        """A step's detail, as read in a worker (:func:`tapetui.tui.detailmodel.step_detail`)."""
        self._step_shown = True
        s, rec, sd, drift = d.session, d.record, d.diff, d.drift
        status = s.summary.status.get(rec.seq, "")
        rows: list[tuple[str, Any]] = [
            (
                "step",
                f"{rec.seq}  {rec.tool}"
                + (
                    f"  (model asked for {rec.requested_tool})"
                    if rec.requested_tool and rec.requested_tool != rec.tool
                    else ""
                ),
            ),
            ("status", status or "not replayed yet"),
            ("key", rec.key),
            ("fingerprint", rec.fingerprint),
            ("side effect", "yes — runs only when recorded or filled" if rec.side_effect else "no"),
            ("duration", f"{rec.ms:.3f} ms"),
            ("recorded", rec.recorded_at or "-"),
            ("expires", rec.expires_at or "never (not time-sensitive)"),
        ]
        if rec.error is not None:
            rows.append(
                (
                    "error",
                    Text(safe_text(_error_text(rec.error), newlines=False), "bold red"),
                )
            )
        parts: list[RenderableType] = [kv_table(rows)]
        if d.contract:
            parts += [Rule("contract changed", style="red"), lines_text(d.contract, "yellow", mono=self.mono)]
        if d.hooks_note:
            parts.append(Text(safe_text(d.hooks_note), "yellow"))
        rest: list[RenderableType] = [
            Rule("arguments"),
            json_block(rec.args),
            Rule("result" if rec.error is None else "error"),
            json_block(rec.result if rec.error is None else rec.error),
        ]
        self.show(*parts, rest=rest)
        self.subject = ("step", s.golden, rec.seq)
        self.suggested_rule = d.suggestion
        if sd is not None and sd.old is not None and sd.new is not None:
            self._tail = [
                Rule(Text(safe_text(f"candidate differs ({sd.kind})", newlines=False)), style="magenta"),
                rows_text(step_rows(sd) if d.rows is None else d.rows, "magenta", mono=self.mono),
            ]
            if sd.arg_changes:
                self._wanted.append(("arguments: recorded | candidate", sd.old.args, sd.new.args))
            if sd.result_changes:
                self._wanted.append(("result: recorded | candidate", _res(sd.old), _res(sd.new)))
        elif drift is not None and drift.get("event") == "drift":
            changes = [tuple(c) for c in drift.get("changes") or []]
            self._tail = [
                Rule("argument drift in the last run", style="red"),
                lines_text(format_changes(changes, prefix="args"), "red", mono=self.mono),
            ]
            self._wanted.append(("arguments: recorded | last run", drift.get("recorded_args"), drift.get("args")))
        self._render_diffs()
        self._start_diffs()

    # ---- a model turn -----------------------------------------------------------
    def show_turn(self, d: TurnDetail) -> None:
        """A model turn's detail, as read in a worker (:func:`tapetui.tui.detailmodel.turn_detail`): what it was
        (model, tokens, what it asked for), how the candidate's prompt or the last run's differs, side by side,
        then the conversation it sent and the response."""
        self._step_shown = True
        s, line = d.session, d.line
        self.show(kv_table(turn_rows(d, s.summary.status.get(d.seq, ""))), rest=conversation(line))
        self.subject = ("step", s.golden, d.seq)
        td, drift = d.diff, d.drift
        if td is not None:
            self._tail = [
                Rule("candidate differs (its model turn at this place)", style="magenta"),
                rows_text(d.rows or td.rows(), "magenta", mono=self.mono),
            ]
        elif drift is not None and drift.get("event") == "drift":
            changes = [Change(c[0], c[1], c[2]) for c in drift.get("changes") or [] if len(c) == 3]
            self._tail = [
                Rule("prompt drift in the last run", style="red"),
                lines_text([change_line(c) for c in changes], "red", mono=self.mono),
            ]
        if d.more:
            self._tail.append(Text(f"(side by side below: the first {len(d.wanted)}; {d.more} more differ)", "dim"))
        self._wanted = list(d.wanted)
        self._render_diffs()
        self._start_diffs()

    # ---- diffs ------------------------------------------------------------------
    def _start_diffs(self) -> None:
        """Compute the wanted diffs in a worker: a big value never holds the screen or the keys.
        A line says a diff is being computed once it takes longer than PENDING_NOTE_AFTER."""
        if not self._wanted:
            return
        self.computing = True
        gen = self._gen
        wanted = list(self._wanted)
        # run_worker with a description of its own: @work would describe the worker by the repr() of its
        # arguments, a megabyte value turned into text on the screen's thread at every step selected
        self.run_worker(
            lambda: self._compute_diffs(gen, wanted),
            thread=True,
            exclusive=True,
            group="diff",
            description=f"diff of {len(wanted)} value pair(s)",
        )
        self.set_timer(PENDING_NOTE_AFTER, lambda: self._note_slow(gen))

    def _note_slow(self, gen: int) -> None:
        if gen == self._gen and self.computing:
            self._slow_note = True
            self._render_diff_part()

    def _compute_diffs(self, gen: int, wanted: list[tuple[str, Any, Any]]) -> None:
        """In a thread worker (see _start_diffs)."""
        worker = get_current_worker()

        def stop() -> bool:  # another step was selected: this diff is no longer wanted
            return worker.is_cancelled or gen != self._gen

        out = []
        for title, old, new in wanted:
            if stop():
                return
            out.append((title, diff_view.build_diff(old, new, stop=stop)))
        if not stop():
            with contextlib.suppress(RuntimeError):  # the app closed meanwhile
                self.app.call_from_thread(self._diffs_ready, gen, out)

    def _diffs_ready(self, gen: int, diffs: list[tuple[str, DiffResult]]) -> None:
        if gen != self._gen:
            return
        self.diffs = diffs
        self.computing = False
        self._slow_note = False
        self._render_diff_part()
        self.call_after_refresh(self._reveal_first_change, gen)

    def _reveal_first_change(self, gen: int) -> None:
        """On a short pane (80×24) the step's fields fill it: scroll the first change into view, as ] would."""
        if gen != self._gen or not self.diffs or self.scroll_y > 0 or not self._step_shown:
            return
        blocks = self._change_offsets()
        if blocks and blocks[0][0] >= self.scrollable_content_region.height - 1:
            self.scroll_to(y=max(0, blocks[0][0] - 3), animate=False)

    def _render_diffs(self) -> None:
        self.body.update(Group(*self._head, *self._tail))
        self._render_diff_part()

    def _render_diff_part(self) -> None:
        parts: list[RenderableType] = []
        if self.computing and self._slow_note:
            parts.append(Text("computing the diff… (keys keep working)", "italic dim"))
        for title, d in self.diffs:
            # the title names the tool: literal Text (a str title is markup) with control characters escaped
            parts.append(
                Rule(
                    Text(
                        safe_text(title, newlines=False)
                        + ("  (unified)" if self.unified else "  (t: unified · ]/[ next/prev)")
                    ),
                    style="bold",
                )
            )
            parts.append(d.render(self.unified, mono=self.mono))
        self._update_part(self.diff_body, parts)
        self.call_after_refresh(self._say_more)

    def toggle_unified(self) -> None:
        self.unified = not self.unified
        self._render_diff_part()

    def jump_change(self, step: int) -> bool:
        """Scroll to the next (+1) or previous (-1) changed block; False when there is none."""
        if not self.diffs:
            return False
        blocks = self._change_offsets()
        if not blocks:
            return False
        self.scroll_to(
            y=_next_stop(blocks, round(self.scroll_y), self.scrollable_content_region.height, step), animate=False
        )
        return True

    def _change_offsets(self) -> list[tuple[int, int]]:
        # Lines above the first diff: where the diff part is laid out (else measured from the rendered
        # head), then rows within each diff.
        if self.diff_body.display and self.diff_body.virtual_region.height:
            y = self.diff_body.virtual_region.y
        else:
            width = max(self.size.width - 2, 20)
            console = Console(width=width, file=open("/dev/null", "w"), color_system=None)  # noqa: SIM115
            try:
                y = len(console.render_lines(Group(*self._head, *self._tail), pad=False))
            finally:
                console.file.close()
        out: list[tuple[int, int]] = []
        width = max(self.scrollable_content_region.width, 20)
        for _title, d in self.diffs:
            y += 1  # the rule
            blocks, height = d.offsets(width, self.unified)  # rows folded over several lines counted as such
            out += [(y + a, y + b) for a, b in blocks]
            y += height
        return out


# ---- a model turn, for the pane ------------------------------------------------------------------------
MAX_MESSAGES = 40  # messages of a request shown; a longer conversation keeps its first 2 and its latest ones
ROLE_STYLES = {"system": "bold magenta", "user": "bold cyan", "assistant": "bold green", "tool": "bold yellow"}


def turn_rows(d: TurnDetail, status: str) -> list[tuple[str, Any]]:
    """A model turn's fields: the key-value rows above its conversation."""
    line = d.line
    usage = _obj(line.get("usage")) or None
    response = _obj(line.get("response"))
    request = _obj(line.get("request"))
    asked = [
        str(p.get("name")) for p in response.get("parts") or [] if isinstance(p, dict) and p.get("type") == "tool_call"
    ]
    offered = [str(t) for t in request.get("tools") or []]
    rows: list[tuple[str, Any]] = [
        ("step", f"{d.seq}  model turn {d.turn + 1}"),
        ("status", status or "not replayed yet"),
        ("model", str(line.get("model"))),
        ("tokens", _usage_text(usage)),
        ("asked for", ", ".join(asked) if asked else ("-" if line.get("error") else "no tool (an answer)")),
        ("finish reason", str(response.get("finish_reason") or "-")),
        ("stream", _stream_text(line)),
        ("source", str(line.get("source") or "-")),
        ("tools offered", ", ".join(offered) or "none"),
    ]
    settings = request.get("settings")
    if settings:
        rows.append(("settings", json_text(settings)))
    if request.get("output_schema") is not None:
        rows.append(("output schema", "yes (below the conversation)"))
    ms = line.get("ms")
    rows += [
        ("key", str(line.get("key"))),
        ("duration", f"{ms:.3f} ms" if isinstance(ms, (int, float)) else "-"),
        ("recorded", str(line.get("recorded_at") or "-")),
    ]
    err = line.get("error")
    if isinstance(err, dict):
        rows.append(("error", Text(safe_text(_error_text(err), newlines=False), "bold red")))
    return rows


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _usage_text(usage: dict[str, Any] | None) -> str:
    if not usage:
        return "not recorded (the framework gave no usage)"
    total = sum(v for k in ("input", "output") if type(v := usage.get(k)) is int)
    parts = [f"{name} {usage[k]:,}" for k, name in _USAGE_NAMES if type(usage.get(k)) is int]
    return f"{total:,}  ({', '.join(parts)})" if parts else f"{total:,}"


_USAGE_NAMES = (("input", "input"), ("output", "output"), ("cache_read", "cache read"), ("cache_write", "cache write"))


def _stream_text(line: dict[str, Any]) -> str:
    if line.get("stream") is not True:
        return "no"
    events = line.get("events")
    return f"yes ({len(events)} events recorded)" if isinstance(events, list) else "yes"


def conversation(line: dict[str, Any]) -> list[RenderableType]:
    """A model turn as the conversation it was: the system prompt (its instructions), each message of the request
    (user, assistant text and tool calls, tool results), then the model's response. Every text is literal."""
    request = _obj(line.get("request"))
    out: list[RenderableType] = []
    instructions = request.get("instructions")
    if instructions is not None:
        out.append(_role_rule("system", "instructions"))
        out += _parts(instructions) if isinstance(instructions, list) else [_content(instructions)]
    messages = _list(request.get("messages"))
    shown = list(enumerate(messages))
    if len(shown) > MAX_MESSAGES:
        left = len(shown) - MAX_MESSAGES
        shown = [*shown[:2], (-1, left), *shown[-(MAX_MESSAGES - 2) :]]
    for i, m in shown:
        if i < 0:
            out.append(Text(f"… {m:,} earlier messages (each shown at the turn that added it)", "italic dim"))
            continue
        role = str(m.get("role")) if isinstance(m, dict) else "?"
        out.append(_role_rule(role, f"message {i + 1}"))
        out += _parts(m.get("parts") if isinstance(m, dict) else m)
    if request.get("output_schema") is not None:
        out += [Rule(Text("output schema"), align="left", style="dim"), json_block(request.get("output_schema"))]
    err = line.get("error")
    if isinstance(err, dict):
        out.append(Rule(Text("response: the model call raised"), align="left", style="bold red"))
        out.append(Text(safe_text(_error_text(err)), "bold red"))
        return out
    response = _obj(line.get("response"))
    finish = response.get("finish_reason")
    out.append(_role_rule("response", f"finish reason {finish}" if finish else "the model's answer"))
    parts = _parts(response.get("parts"))
    out += parts or [Text("(no parts)", "dim")]
    return out


def _role_rule(role: str, what: str) -> Rule:
    title = Text(safe_text(role, newlines=False), ROLE_STYLES.get(role, "bold"))
    title.append(f"  {safe_text(what, newlines=False)}", "dim")
    return Rule(title, align="left", style="dim")


def _content(value: Any, style: str = "") -> RenderableType:
    return text_block(value, style) if isinstance(value, str) else json_block(value)


def _parts(parts: Any) -> list[RenderableType]:
    """The parts of a message or response: text as text, a tool call with its arguments, a tool's result."""
    if not isinstance(parts, list):
        return [json_block(parts)] if parts is not None else []
    out: list[RenderableType] = []
    for p in parts:
        kind = p.get("type") if isinstance(p, dict) else None
        if not isinstance(p, dict):
            out.append(json_block(p))
        elif kind == "text":
            out.append(_content(p.get("content")))
        elif kind == "tool_call":
            out.append(_call_head("→ calls ", p))
            out.append(json_block(p.get("arguments")))
        elif kind == "tool_call_response":
            out.append(_call_head("← result of ", p))
            out.append(_content(p.get("response")))
        elif kind == "reasoning":
            out.append(Text("reasoning", "italic dim"))
            out.append(_content(p.get("content"), "dim") if "content" in p else json_block(p))
        else:
            out.append(Text(safe_text(f"{kind} part", newlines=False), "dim"))
            out.append(json_block({k: v for k, v in p.items() if k != "type"}))
    return out


def _call_head(lead: str, p: dict[str, Any]) -> Text:
    t = Text(lead, "dim")
    t.append(safe_text(str(p.get("name")), newlines=False), "bold")
    if p.get("id") is not None:
        t.append(safe_text(f"  (id {p.get('id')})", newlines=False), "dim")
    return t


def _next_stop(blocks: list[tuple[int, int]], now: int, page: int, step: int) -> int:
    """Where ] (step 1) or [ (-1) scrolls to from line ``now``: the next (previous) changed block's start, or,
    inside a block taller than the pane (a coarsened diff is one block of folded lines), a page further in
    it; past the last block back to the first (and the reverse)."""
    page = max(1, page - 1)  # a line of the page before stays in view
    if step > 0:
        for start, end in blocks:
            if start > now:
                return start
            if now < end - page:  # within a block that goes on below the pane
                return min(now + page, end - page)
        return blocks[0][0]
    for start, end in reversed(blocks):
        if start < now:
            return max(start, now - page) if now < end + page else start
    return blocks[-1][0]


def _res(rec: CallRecord) -> Any:
    return {"error": rec.error} if rec.error is not None else rec.result


def _run_counts(sm: Any) -> str:
    """The last run's steps by status, one status a step as the tree counts them (so they add up to the
    steps the run touched), plus the calls the tape never had; a tolerated hit is a hit, said apart."""
    return describe_counts(sm.counts(), off_tape=sm.off_tape, tolerated=sm.tolerated)
