"""What comparing a side under the rules concludes — a difference excused (:class:`Excuse`), and the whole
side (:class:`Judged`) — and the comparators that judge a changed value by itself, calling no user's code:
``unordered``, ``tolerance`` and ``regex`` (within its time budget).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson

from tapetui.core.changes import MISSING, Change
from tapetui.core.hookcalls import spend, spent
from tapetui.core.paths import JsonPath, prefixed
from tapetui.core.rulekinds import Rule
from tapetui.core.shown import shown_number

__all__ = ["Excuse", "Judged", "Verdict", "try_regex", "try_tolerance", "try_unordered"]


@dataclass(frozen=True, slots=True)
class Excuse:
    """A difference a rule excused, and how it is shown (``within tolerance ±0.01``)."""

    change: Change
    rule: Rule
    text: str

    def to_json(self, prefix: str = "") -> dict[str, Any]:
        return {"path": prefixed(prefix, self.change.path), "rule": self.rule.kind, "text": self.text}


@dataclass(frozen=True, slots=True)
class Judged:
    """A side compared under the rules.

    ``changes``: the differences no rule excuses; ``excused``: the ones a rule did; ``remarks``: why a
    rule that governs an unexcused change did not excuse it (``similarity 0.41 < 0.8``, a judge's reason);
    ``errors``: a hook that raised or could not run (never a pass).
    """

    changes: tuple[Change, ...] = ()
    excused: tuple[Excuse, ...] = ()
    remarks: tuple[tuple[Change, str], ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.changes and not self.errors


Verdict = Excuse | tuple[str, str] | None
"""A rule's word on one change: an excuse, ``("remark"|"error", why)``, or None (not its business)."""


def try_unordered(
    rule: Rule, change: Change, at: JsonPath, old_root: Any, new_root: Any, cache: dict[JsonPath, bool]
) -> Verdict:
    """``unordered``: the lists at ``at`` (the rule's path in the two sides) hold the same items; ``cache``
    keeps the answer per path for the other changes inside the same lists."""
    hit = cache.get(at)
    if hit is None:
        hit = cache[at] = _same_multiset(_at(old_root, at), _at(new_root, at))
    return Excuse(change, rule, "same items in another order") if hit else None


def try_tolerance(rule: Rule, change: Change) -> Verdict:
    """``tolerance``: two numbers within the rule's absolute or relative difference."""
    a, b = change.old, change.new
    if not (_is_number(a) and _is_number(b)):
        return None
    diff = abs(a - b)  # two integers: exact, however large
    try:
        limit = rule.value * max(abs(a), abs(b)) if rule.relative else rule.value
        within = diff <= limit * (1 + 1e-12)
        shown = shown_number(float(diff))
    except OverflowError:  # an integer beyond a float, against a relative tolerance
        within, shown = False, "more than a float holds"
    if within:
        return Excuse(change, rule, f"within {rule.describe()}")
    return ("remark", f"differs by {shown}, outside {rule.describe()}")


def try_regex(rule: Rule, change: Change, budget: float) -> Verdict:
    """``regex``: the new string matches, searched within ``budget`` seconds (past it: an error, and the rule
    is not run again in this session: see :func:`tapetui.core.hookcalls.next_session`)."""
    b = change.new
    if spent(rule):  # it went over its budget once in this session: a hostile tape has many values
        return (
            "error",
            f"the rule {rule.key!r} ({rule.describe()}) exceeded its time budget before in this session; not run again",
        )
    try:  # the user's pattern on the tape's text: a backtracking one would run for ever without a budget
        hit = isinstance(b, str) and rule.value.search(b, timeout=budget)
    except TimeoutError:
        spend(rule, session=True)
        return (
            "error",
            f"the rule {rule.key!r} ({rule.describe()}) exceeded its time budget of {shown_number(budget)} s "
            "on this value: the pattern backtracks (not run again in this session)",
        )
    if hit:
        return Excuse(change, rule, f"matches {rule.describe()}")
    return ("remark", f"does not match {rule.describe()}")


def _at(root: Any, path: JsonPath) -> Any:
    cur = root
    for p in path:
        if isinstance(cur, dict):
            cur = cur.get(str(p), MISSING)
        elif isinstance(cur, list) and isinstance(p, int) and 0 <= p < len(cur):
            cur = cur[p]
        else:
            return MISSING
    return cur


def _same_multiset(a: Any, b: Any) -> bool:
    if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
        return False
    opt = orjson.OPT_SORT_KEYS
    try:
        return Counter(orjson.dumps(x, option=opt) for x in a) == Counter(orjson.dumps(x, option=opt) for x in b)
    except (TypeError, orjson.JSONEncodeError):
        return False


def _is_number(x: Any) -> bool:
    return type(x) in (int, float) and not (isinstance(x, float) and math.isnan(x))
