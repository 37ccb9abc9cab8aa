"""A difference at one JSON path, and how differences are written for a person.

Apart from :mod:`tapetui.core.jsondiff` (which finds them) so that the errors a replay raises
(:mod:`tapetui.core.errors`) can describe changes without importing the differ.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

import orjson

__all__ = ["MISSING", "Change", "format_changes", "format_path", "short"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "(absent)"


MISSING: Any = _Missing()


class Change(NamedTuple):
    """One differing JSON path. ``old`` or ``new`` is :data:`MISSING` when added or removed."""

    path: str
    old: Any
    new: Any

    @property
    def kind(self) -> str:
        if self.old is MISSING:
            return "added"
        if self.new is MISSING:
            return "removed"
        return "changed"


_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def format_path(parts: Sequence[str | int], prefix: str = "") -> str:
    """``["opts", "a", 2]`` → ``opts.a[2]``; keys that are not identifiers are quoted."""
    out = prefix
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _IDENT.match(p):
            out += f".{p}" if out else p
        else:
            out += f"[{orjson.dumps(p).decode()}]"
    return out


def short(value: Any, width: int = 60, around: str | None = None) -> str:
    """Compact JSON of ``value``, shortened to about ``width`` chars.

    Args:
        around: the other side's string; when both are long strings the window is
            placed at their first difference so that what changed stays visible.
    """
    if value is MISSING:
        return "(absent)"
    text = orjson.dumps(value, default=repr).decode() if not isinstance(value, str) else orjson.dumps(value).decode()
    if len(text) <= width:
        return text
    start = 0
    if around is not None and isinstance(value, str):
        other = orjson.dumps(around).decode()
        start = next(
            (i for i, (a, b) in enumerate(zip(text, other, strict=False)) if a != b), min(len(text), len(other))
        )
        start = max(0, start - width // 3)
    piece = text[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def format_changes(changes: Iterable[Change | tuple[str, Any, Any]], prefix: str = "", width: int = 60) -> list[str]:
    """Lines such as ``args.max_words  120 → 80``; added and removed paths say so."""
    lines = []
    for path, old, new in changes:
        full = (prefix + ("" if path.startswith("[") or not prefix else ".") + path) if path else prefix
        if old is MISSING:
            lines.append(f"{full}  (added) {short(new, width)}")
        elif new is MISSING:
            lines.append(f"{full}  (removed) {short(old, width)}")
        else:
            o = short(old, width, around=new if isinstance(new, str) else None)
            n = short(new, width, around=old if isinstance(old, str) else None)
            lines.append(f"{full}  {o} → {n}")
    return lines
