"""Side-by-side (or unified) diff of two JSON values, changed parts highlighted inside lines."""

from __future__ import annotations

import difflib
from typing import Any

import orjson
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tapetui.jsondiff import MISSING
from tapetui.textsafe import safe_json_text

MAX_LINES = 4000
OLD_STYLE = "on #4b1818"
NEW_STYLE = "on #173d1f"
OLD_CHAR = "bold white on #a02525"
NEW_CHAR = "bold white on #1f7a35"


def pretty(value: Any) -> list[str]:
    """Indented, key-sorted JSON lines; control and bidi characters escaped."""
    if value is MISSING:
        return []
    text = orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS, default=repr).decode()
    return safe_json_text(text).splitlines()


def _inline(a: str, b: str) -> tuple[Text, Text]:
    left, right = Text(a, OLD_STYLE), Text(b, NEW_STYLE)
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag in ("replace", "delete"):
            left.stylize(OLD_CHAR, i1, i2)
        if tag in ("replace", "insert"):
            right.stylize(NEW_CHAR, j1, j2)
    return left, right


class DiffResult:
    """A computed diff: rows for the side-by-side view, and which rows are changes."""

    def __init__(self, old: Any, new: Any) -> None:
        a, b = pretty(old), pretty(new)
        self.truncated = max(len(a), len(b)) > MAX_LINES
        a, b = a[:MAX_LINES], b[:MAX_LINES]
        self.rows: list[tuple[Text, Text]] = []
        self.unified: list[Text] = []
        self.change_rows: list[int] = []  # first row of each changed block
        sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            if tag == "equal":
                for line in a[i1:i2]:
                    self.rows.append((Text(line), Text(line)))
                    self.unified.append(Text("  " + line, "dim"))
                continue
            self.change_rows.append(len(self.rows))
            olds, news = a[i1:i2], b[j1:j2]
            for k in range(max(len(olds), len(news))):
                o = olds[k] if k < len(olds) else None
                n = news[k] if k < len(news) else None
                if o is not None and n is not None:
                    self.rows.append(_inline(o, n))
                else:
                    self.rows.append((Text(o, OLD_STYLE) if o is not None else Text(""),
                                      Text(n, NEW_STYLE) if n is not None else Text("")))
            self.unified += [Text("- " + line, OLD_STYLE) for line in olds]
            self.unified += [Text("+ " + line, NEW_STYLE) for line in news]

    def render(self, unified: bool, title_old: str = "recorded", title_new: str = "new") -> RenderableType:
        if unified:
            body: RenderableType = Group(*self.unified) if self.unified else Text("(empty)")
        else:
            table = Table(expand=True, box=None, show_edge=False, pad_edge=False, padding=(0, 1))
            table.add_column(title_old, ratio=1, overflow="fold", header_style="bold red")
            table.add_column(title_new, ratio=1, overflow="fold", header_style="bold green")
            for left, right in self.rows:
                table.add_row(left, right)
            body = table
        if self.truncated:
            return Group(body, Text(f"(only the first {MAX_LINES} lines are compared)", "italic dim"))
        return body
