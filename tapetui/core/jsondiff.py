"""Differences between two JSON values, by JSON path, with ignorable paths.

The structural work is done by deepdiff (it aligns lists, tells type changes from
value changes and handles deep nesting); this module turns its tree into
``(path, old, new)`` changes and filters them through ignore patterns.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from tapetui.core.changes import MISSING, Change
from tapetui.core.errors import TooDeep
from tapetui.core.paths import JsonPath, join, split

__all__ = [
    "VOLATILE_DEFAULTS",
    "IgnoreRules",
    "JsonPath",
    "diff_parts",
    "diff_values",
    "match_path",
    "parse_pattern",
    "path_segments",
    "split_pattern",
]

# Paths that differ between otherwise identical runs. On by default; tapes.toml
# `[diff] volatile_defaults = false` turns them off. Diffs apply them to results and notes only, never
# to arguments: an argument makes the call's key (a booking on another date is another call).
VOLATILE_DEFAULTS: tuple[str, ...] = (
    "**.request_id",
    "**.requestId",
    "**.trace_id",
    "**.traceId",
    "**.span_id",
    "**.x-request-id",
    "**.timestamp",
    "**.created_at",
    "**.updated_at",
    "**.date",
    "**.Date",
    "**.latency_ms",
    "**.duration_ms",
    "**.elapsed_ms",
    "**.took_ms",
)


class IgnoreRules:
    """Glob patterns over JSON paths: ``headers.date``, ``*.request_id``, ``**.timestamp``.

    Segments are separated by dots; ``*`` (or any fnmatch glob) matches one segment,
    ``**`` matches any number of them; list indices are segments too (``items.*.id``).
    A pattern that starts with ``*.`` also matches at any depth, as people expect of
    ``*.request_id``.
    """

    def __init__(self, patterns: Iterable[str] = (), *, volatile: bool = True) -> None:
        pats = list(patterns) + (list(VOLATILE_DEFAULTS) if volatile else [])
        self.patterns = tuple(pats)
        self._compiled = [self._split(p) for p in pats]

    @staticmethod
    def _split(pattern: str) -> tuple[str, ...]:
        return split_pattern(pattern)

    def ignores(self, parts: Sequence[str | int]) -> bool:
        segs = tuple(str(p) for p in parts)
        return any(_match(pat, segs) for pat in self._compiled)

    def matching(self, parts: Sequence[str | int]) -> str | None:
        """The first pattern (as written) that ignores ``parts``, or None: for saying which rule excused a
        difference that is listed rather than hidden."""
        segs = tuple(str(p) for p in parts)
        return next((p for p, pat in zip(self.patterns, self._compiled, strict=True) if _match(pat, segs)), None)


def parse_pattern(pattern: str) -> tuple[str, ...]:
    """A path pattern's segments, written as ``check`` prints paths: ``a.b[0]``, ``result["my key"]``
    (a quoted key is one segment, dots and all); a leading ``*`` is ``**``.

    Raises:
        ValueError: a character out of place (an unclosed bracket or quote), or an empty segment.
    """
    segs = split(pattern, glob=True)
    if segs and segs[0] == "*":
        return ("**", *segs[1:])
    return segs


def path_segments(path: str) -> tuple[str, ...]:
    """A concrete path as ``check`` prints it (``args["a.b"][0]``, :func:`tapetui.core.paths.join`)
    back into its literal segments (``("args", "a.b", "0")``), for :meth:`IgnoreRules.ignores` and
    :func:`match_path` (:func:`tapetui.core.paths.split`). Read by the same tokens as :func:`parse_pattern`,
    so a printed path and a rule written like it always agree; unlike a pattern, a quoted key keeps its
    ``*`` ``?`` ``[`` as they are (it is the key, to be matched), and a leading ``*`` is a key named ``*``.

    Raises:
        ValueError: a character out of place (an unclosed bracket or quote), or an empty segment.
    """
    return split(path)


def split_pattern(pattern: str) -> tuple[str, ...]:
    """A path pattern's segments (:func:`parse_pattern`); one it cannot read is split at dots and
    brackets, as ``[diff] ignore`` always has been. A leading ``*`` is ``**``."""
    try:
        return parse_pattern(pattern)
    except (ValueError, orjson.JSONDecodeError):
        segs = tuple(s for s in re.split(r"\.|\[|\]", pattern) if s)
        return ("**", *segs[1:]) if segs and segs[0] == "*" else segs


def match_path(pat: tuple[str, ...], segs: tuple[str, ...]) -> bool:
    """Whether a split pattern matches a path given as string segments."""
    return _match(pat, segs)


def _match(pat: tuple[str, ...], segs: tuple[str, ...]) -> bool:
    if not pat:
        return not segs
    head = pat[0]
    if head == "**":
        return any(_match(pat[1:], segs[i:]) for i in range(len(segs) + 1))
    return bool(segs) and fnmatch.fnmatchcase(segs[0], head) and _match(pat[1:], segs[1:])


NO_RULES = IgnoreRules(volatile=False)


def diff_values(old: Any, new: Any, ignore: IgnoreRules | None = None) -> list[Change]:
    """Every path where ``old`` and ``new`` differ, as :class:`Change`, in path order.

    Raises:
        TooDeep: a value nested deeper than Python's recursion limit allows.
    """
    return [c for _, c in diff_parts(old, new, ignore)]


def _same_json(old: Any, new: Any) -> bool:
    """``old == new`` as JSON: Python's ``==`` holds ``True == 1 == 1.0`` inside containers too."""
    if not isinstance(old, (dict, list)):
        return True  # same type, equal: the same JSON value
    try:
        return orjson.dumps(old, option=orjson.OPT_SORT_KEYS) == orjson.dumps(new, option=orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):  # deeper than orjson goes, an integer beyond 64 bits...
        return repr(old) == repr(new)  # repr tells True from 1 too; a dict in another key order: deepdiff decides


def diff_parts(old: Any, new: Any, ignore: IgnoreRules | None = None) -> list[tuple[JsonPath, Change]]:
    """:func:`diff_values`, each change with its path as segments (for rules that match on them).

    Raises:
        TooDeep: a value nested deeper than Python's recursion limit allows.
    """
    try:
        return _diff(old, new, ignore or NO_RULES)
    except RecursionError:
        raise TooDeep("a compared value") from None


def _diff(old: Any, new: Any, rules: IgnoreRules) -> list[tuple[JsonPath, Change]]:
    if old == new and type(old) is type(new) and _same_json(old, new):
        return []
    if _deeper_than_orjson(old) or _deeper_than_orjson(new):  # deepdiff's time grows with the square of depth
        changes = _diff_deep(old, new, rules)
    else:
        try:
            changes = _deepdiff(old, new, rules, ())
        except RecursionError:  # deepdiff spends about four frames a level: 250 levels of lists are too many
            changes = _diff_deep(old, new, rules)
    changes.sort(key=lambda pc: pc[1].path)
    return changes


def _deeper_than_orjson(value: Any) -> bool:
    """Whether ``value`` is nested deeper than the 254 levels orjson writes: a probe at C speed."""
    if not isinstance(value, (dict, list)):
        return False
    try:
        orjson.dumps(value, default=repr)
    except TypeError as e:  # orjson.JSONEncodeError is one
        return "Recursion limit" in str(e)
    return False


def _deepdiff(old: Any, new: Any, rules: IgnoreRules, at: JsonPath) -> list[tuple[JsonPath, Change]]:
    """The changes deepdiff finds between two values found at path ``at`` (unsorted)."""
    # deferred: deepdiff takes ~250 ms to import, and a replay that never drifts never needs it
    from deepdiff import DeepDiff

    tree = DeepDiff(old, new, view="tree", verbose_level=2, threshold_to_diff_deeper=0)
    changes: list[tuple[JsonPath, Change]] = []
    for kind, levels in tree.items():
        for level in levels:
            parts = (*at, *level.path(output_format="list"))
            if rules.ignores(parts):
                continue
            t1 = MISSING if "added" in kind else level.t1
            t2 = MISSING if "removed" in kind else level.t2
            changes.append((parts, Change(join(parts), t1, t2)))
    return changes


_DEEPDIFF_DEPTH = 100
"""The deepest values deepdiff is given whole once it ran out of stack (about 400 of Python's 1,000 frames)."""


def _diff_deep(old: Any, new: Any, rules: IgnoreRules) -> list[tuple[JsonPath, Change]]:
    """The changes between values too deep for deepdiff: their deep parts are walked here, a loop and no
    recursion, through the keys of two objects and the items of two lists of one length, down to where
    both sides are at most :data:`_DEEPDIFF_DEPTH` levels deep, which deepdiff compares. Lists of other
    lengths above that are one change (deepdiff would align their items; it cannot go that deep)."""
    depth = _depths(old, new)
    changes: list[tuple[JsonPath, Change]] = []
    todo: list[tuple[JsonPath, Any, Any]] = [((), old, new)]
    while todo:
        at, a, b = todo.pop()
        if depth.get(id(a), 0) <= _DEEPDIFF_DEPTH and depth.get(id(b), 0) <= _DEEPDIFF_DEPTH:
            if not (a == b and type(a) is type(b) and _same_json(a, b)):
                changes += _deepdiff(a, b, rules, at)
        elif isinstance(a, dict) and isinstance(b, dict):
            for k, v in a.items():
                if k in b:
                    todo.append(((*at, k), v, b[k]))
                elif not rules.ignores((*at, k)):
                    changes.append(((*at, k), Change(join((*at, k)), v, MISSING)))
            for k, v in b.items():
                if k not in a and not rules.ignores((*at, k)):
                    changes.append(((*at, k), Change(join((*at, k)), MISSING, v)))
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            todo += (((*at, i), x, y) for i, (x, y) in enumerate(zip(a, b, strict=True)))
        elif not rules.ignores(at):
            changes.append((at, Change(join(at), a, b)))
    return changes


def _depths(*roots: Any) -> dict[int, int]:
    """How many levels deep each object and list in ``roots`` is (by ``id``; a scalar is 0 deep), walked with
    a stack of its own: a value of any depth, in one pass."""
    out: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(r, False) for r in roots]
    while stack:
        v, kids_done = stack.pop()
        if not isinstance(v, (dict, list)):
            continue
        kids = v.values() if isinstance(v, dict) else v
        if kids_done:
            out[id(v)] = 1 + max((out.get(id(k), 0) for k in kids), default=0)
        elif id(v) not in out:
            stack.append((v, True))
            stack += ((k, False) for k in kids if isinstance(k, (dict, list)))
    return out
