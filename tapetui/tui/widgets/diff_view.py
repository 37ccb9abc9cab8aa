"""Side-by-side (or unified) diff of two JSON values, changed parts highlighted inside lines."""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.style import Style
from rich.table import Table
from rich.text import Text

from tapetui.core.changes import MISSING, json_text
from tapetui.core.textsafe import safe_json_text
from tapetui.review.textdiff import diff_lines, diff_text

DIFF_SECONDS = 0.3  # time cap of one diff; past it what is left is shown coarser, and said so
CONTEXT = 8  # equal lines kept next to a change; more collapse into one "⋯ N equal lines" row
MAX_ROWS = 1000  # rows kept per diff (the screen renders all of them)
LINE_CHARS = 4000  # characters of a line shown; the rest is elided
EQUAL_CHARS = 120  # an equal stretch inside a changed line keeps this much next to each change
EDGE_CHARS = 60  # and this much at the start (the key's name) or the end of the line
CHANGED_CHARS = 2000  # a changed stretch keeps this much of its start (and a quarter of it of its end)
OLD_STYLE = "on #4b1818"
NEW_STYLE = "on #173d1f"
OLD_CHAR = "bold white on #a02525"
NEW_CHAR = "bold white on #1f7a35"


def pretty(value: Any) -> list[str]:
    """Indented, key-sorted JSON lines; control and bidi characters escaped."""
    if value is MISSING:
        return []
    text = json_text(value, indent=True, sort_keys=True)  # any depth: cut at SHOWN_DEPTH, marked
    if text.isascii() and "\x7f" not in text:  # nothing to escape (C1 and bidi are not ASCII): no regex pass
        return text.splitlines()
    return safe_json_text(text).splitlines()


LEVEL_WORDS = {
    "words": "words",
    "lines": "lines (no highlight inside lines past the time cap)",
    "blocks": "whole blocks",
}
_LEVEL_RANK = {"chars": 0, "words": 1, "lines": 2, "blocks": 3}


def size_text(n: int) -> str:
    """``n`` bytes for a person: 812 B, 12.3 kB, 1.0 MB."""
    if n < 1000:
        return f"{n} B"
    if n < 1_000_000:
        return f"{n / 1000:.1f} kB"
    return f"{n / 1_000_000:.1f} MB"


def _elided(n: int) -> Text:
    return Text(f"…{n:,} chars…", "italic dim")


def _piece(s: str, style: str, head: int, tail: int) -> Text:
    """``s`` styled; when longer than ``head + tail`` (plus a little), only its first ``head`` and
    last ``tail`` characters are kept around a note of how many were left out."""
    if len(s) <= head + tail + 20:
        return Text(s, style)
    return Text.assemble(Text(s[:head], style), _elided(len(s) - head - tail), Text(s[len(s) - tail :], style))


def _line(s: str, style: str = "") -> Text:
    """A whole line, shortened to LINE_CHARS."""
    if len(s) <= LINE_CHARS:
        return Text(s, style)
    return Text.assemble(Text(s[:LINE_CHARS], style), _elided(len(s) - LINE_CHARS))


def _inline(
    a: str, b: str, deadline: float | None = None, stop: Callable[[], bool] | None = None
) -> tuple[Text, Text, str]:
    """Both lines with what changed highlighted, long equal stretches elided; and how fine the
    alignment was (``chars``, ``words`` or ``blocks``)."""
    d = diff_text(a, b, deadline=deadline, stop=stop)
    left, right = Text(style=OLD_STYLE), Text(style=NEW_STYLE)
    last = len(d.opcodes) - 1
    whole = len(a) <= LINE_CHARS and len(b) <= LINE_CHARS  # a line of ordinary length is shown in full
    for k, (tag, i1, i2, j1, j2) in enumerate(d.opcodes):
        if tag == "equal":
            # an equal stretch keeps what is next to a change, and the start of the line (the key's name)
            head = LINE_CHARS if whole else EDGE_CHARS if k == 0 < last else EQUAL_CHARS
            tail = LINE_CHARS if whole else EDGE_CHARS if k == last > 0 else EQUAL_CHARS
            left.append_text(_piece(a[i1:i2], "", head, tail))
            right.append_text(_piece(b[j1:j2], "", head, tail))
            continue
        if i2 > i1:
            left.append_text(_piece(a[i1:i2], OLD_CHAR, CHANGED_CHARS, CHANGED_CHARS // 4))
        if j2 > j1:
            right.append_text(_piece(b[j1:j2], NEW_CHAR, CHANGED_CHARS, CHANGED_CHARS // 4))
    return left, right, d.level


def build_diff(
    old: Any, new: Any, *, seconds: float = DIFF_SECONDS, stop: Callable[[], bool] | None = None
) -> DiffResult:
    """The diff of two JSON values, bounded in time (run it in a worker: it may take ``seconds``)."""
    return DiffResult(old, new, deadline=time.monotonic() + seconds, stop=stop)


class DiffResult:
    """A computed diff: rows for the side-by-side view, and which rows are changes.

    Bounded whatever the values: lines are aligned by :func:`tapetui.review.textdiff.diff_lines`, the
    changes inside a line by :func:`tapetui.review.textdiff.diff_text` (exact where cheap, coarser
    beyond, and ``note`` says so); equal lines far from a change collapse into one row, long
    stretches inside a line are elided, and at most MAX_ROWS rows are kept.
    """

    def __init__(
        self, old: Any, new: Any, *, deadline: float | None = None, stop: Callable[[], bool] | None = None
    ) -> None:
        a = pretty(old)
        time.sleep(0)  # in a worker: let the screen's thread in between the long steps
        b = pretty(new)
        time.sleep(0)
        self._values = (old, new)  # for the size, measured only when a note needs it
        self._size: int | None = None
        self.rows: list[tuple[Text, Text]] = []
        self.unified: list[Text] = []
        self.change_rows: list[int] = []  # first row of each changed block (side by side)
        self.change_lines: list[int] = []  # first line of each changed block (unified)
        self.change_ends: list[int] = []  # rows where an equal stretch starts (ends a changed block before it)
        self.change_line_ends: list[int] = []
        self._offsets: dict[tuple[int, bool], tuple[list[tuple[int, int]], int]] = {}
        self.truncated = 0  # rows left out past MAX_ROWS
        level = "chars"
        lines = diff_lines(a, b, deadline=deadline, stop=stop)
        time.sleep(0)
        if lines.level == "blocks":
            level = "blocks"
        timed_out = lines.timed_out
        ops = lines.opcodes
        for n, (tag, i1, i2, j1, j2) in enumerate(ops):
            if tag == "equal":
                self.change_ends.append(len(self.rows))  # the block before (if any) ends here
                self.change_line_ends.append(len(self.unified))
                self._equal(a, i1, i2, first=n == 0, last=n == len(ops) - 1)
                continue
            self.change_rows.append(len(self.rows))
            self.change_lines.append(len(self.unified))
            olds, news = a[i1:i2], b[j1:j2]
            for k in range(max(len(olds), len(news))):
                o = olds[k] if k < len(olds) else None
                n_ = news[k] if k < len(news) else None
                if o is not None and n_ is not None:
                    if timed_out or (deadline is not None and time.monotonic() > deadline):
                        timed_out = True
                        left, right, how = _line(o, OLD_STYLE), _line(n_, NEW_STYLE), "lines"
                    else:
                        left, right, how = _inline(o, n_, deadline, stop)
                    if _LEVEL_RANK[how] > _LEVEL_RANK[level]:
                        level = how
                    self._row(left, right)
                    self.unified += [Text("- ") + left, Text("+ ") + right]
                else:
                    self._row(
                        _line(o, OLD_STYLE) if o is not None else Text(""),
                        _line(n_, NEW_STYLE) if n_ is not None else Text(""),
                    )
                    if o is not None:
                        self.unified.append(Text("- ") + _line(o, OLD_STYLE))
                    if n_ is not None:
                        self.unified.append(Text("+ ") + _line(n_, NEW_STYLE))
        self.level = level
        self.timed_out = timed_out
        self.note: str | None = None
        if level != "chars":
            self.note = f"diff coarsened to {LEVEL_WORDS[level]}: values of {size_text(self.size)}"
            if timed_out:
                self.note += f" (time cap {DIFF_SECONDS:.1f} s reached)"

    @property
    def size(self) -> int:
        """Bytes of the bigger value as compact JSON."""
        if self._size is None:
            self._size = max(_json_size(self._values[0]), _json_size(self._values[1]))
        return self._size

    def _row(self, left: Text, right: Text) -> None:
        if len(self.rows) >= MAX_ROWS:
            self.truncated += 1
            return
        self.rows.append((left, right))

    def _equal(self, a: list[str], i1: int, i2: int, *, first: bool, last: bool) -> None:
        """Equal lines: all of them when few, else CONTEXT lines next to each change and one row
        saying how many were left out."""
        keep_head = 0 if first else CONTEXT
        keep_tail = 0 if last else CONTEXT
        n = i2 - i1
        if first and last or n <= keep_head + keep_tail + 1:
            shown = [(i, True) for i in range(i1, i2)]
        else:
            shown = (
                [(i, True) for i in range(i1, i1 + keep_head)]
                + [(-1, False)]
                + [(i, True) for i in range(i2 - keep_tail, i2)]
            )
        for i, real in shown:
            if not real:
                gap = Text(f"⋯ {n - keep_head - keep_tail:,} equal lines", "italic dim")
                self._row(gap, gap.copy())
                self.unified.append(Text("  ") + gap)
                continue
            line = _line(a[i])
            self._row(line, line.copy())
            self.unified.append(Text.assemble("  ", line, style="dim"))

    def offsets(self, width: int, unified: bool) -> tuple[list[tuple[int, int]], int]:
        """Where each changed block starts and ends on screen, in lines below the start of the diff's body (its
        note and the header row counted), and how many lines the body takes, at ``width`` columns: a row whose
        text is folded over several lines (a coarsened diff's whole lines) moves everything below it down."""
        key = (width, unified)
        got = self._offsets.get(key)
        if got is not None:
            return got
        console = Console(width=max(width, 4), file=io.StringIO(), color_system=None)
        y = 1 if self.note else 0
        at: list[int] = []  # the screen line where each row (or unified line) starts, and one past the last
        if unified:
            firsts, ends = self.change_lines, self.change_line_ends
            for line in self.unified[:MAX_ROWS]:
                at.append(y)
                y += max(1, len(line.wrap(console, width, overflow="fold")))
        else:
            firsts, ends = self.change_rows, self.change_ends
            y += 1  # the header row
            left_w = max(1, (width - 2) // 2)
            right_w = max(1, width - 2 - left_w)
            for left, right in self.rows:
                at.append(y)
                y += max(
                    1,
                    len(left.wrap(console, left_w, overflow="fold")),
                    len(right.wrap(console, right_w, overflow="fold")),
                )
        at.append(y)
        blocks = []
        for first in firsts:
            end = next((e for e in ends if e > first), len(at) - 1)
            blocks.append((at[min(first, len(at) - 1)], at[min(end, len(at) - 1)]))
        self._offsets[key] = got = (blocks, y)
        return got

    def render(self, unified: bool, *, mono: bool = False) -> RenderableType:
        """The diff; ``mono`` (NO_COLOR): without colours, a changed character in reverse video and the headings
        underlined, since a monochrome terminal shows red and green backgrounds as two dark greys."""
        m = _mono_text if mono else _same
        if unified:
            rows = [m(line) for line in self.unified[:MAX_ROWS]]
            body: RenderableType = Group(*rows) if rows else Text("(empty)")
        else:
            table = Table(expand=True, box=None, show_edge=False, pad_edge=False, padding=(0, 1))
            heads = ("bold underline", "bold underline") if mono else ("bold red", "bold green")
            table.add_column("recorded", ratio=1, overflow="fold", header_style=heads[0])
            table.add_column("new", ratio=1, overflow="fold", header_style=heads[1])
            for left, right in self.rows:
                table.add_row(m(left), m(right))
            body = table
        parts: list[RenderableType] = []
        if self.note:
            parts.append(Text("⚠ " + self.note, "bold yellow"))
        parts.append(body)
        if self.truncated:
            parts.append(Text(f"(only the first {MAX_ROWS:,} rows are shown; {self.truncated:,} more)", "italic dim"))
        return parts[0] if len(parts) == 1 else Group(*parts)


def _same(t: Text) -> Text:
    return t


def _mono_style(style: str | Style) -> Style:
    """A diff style without colour: a changed character (bold on a coloured background) in bold reverse video;
    a changed line's background dropped (its ``-``/``+`` or its column says it)."""
    st = Style.parse(style) if isinstance(style, str) else style
    return Style(bold=st.bold, italic=st.italic, dim=st.dim, reverse=bool(st.bgcolor is not None and st.bold) or None)


def _mono_text(t: Text) -> Text:
    out = Text(t.plain, style=_mono_style(t.style) if t.style else "", end=t.end, overflow=t.overflow)
    for span in t.spans:
        out.stylize(_mono_style(span.style), span.start, span.end)
    return out


def _json_size(value: Any) -> int:
    if value is MISSING:
        return 0
    return len(json_text(value).encode())
