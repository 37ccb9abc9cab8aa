"""The comparators a ``[compare.rules]`` entry can name (:data:`RULE_KINDS`), one rule as read from
``tapes.toml`` and checked there (:func:`parse_rule`), and which rules govern a path (:func:`governing`).
What each comparator excuses: :mod:`tapetui.core.comparators`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import orjson

from tapetui.core.errors import ConfigError
from tapetui.core.jsondiff import match_path, parse_pattern, split_pattern
from tapetui.core.shown import shown_number

__all__ = ["RULE_KINDS", "Rule", "RuleKind", "governing", "ignore_rule", "parse_rule", "rule_problem"]

RuleKind = Literal["tolerance", "unordered", "regex", "similarity", "judge", "ignore"]
RULE_KINDS: tuple[RuleKind, ...] = ("tolerance", "unordered", "regex", "similarity", "judge", "ignore")

_SIDES = ("args", "result", "note", "request", "response")  # request/response: a model turn's


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``[compare.rules]`` entry: a path pattern and its comparator.

    ``value``: the tolerance (a number, or a fraction when ``relative``), the compiled regex, the
    similarity threshold; None for ``unordered``, ``judge`` and ``ignore``. ``key``: the key as written.
    """

    pattern: str
    kind: RuleKind
    value: Any
    tool: str | None
    key: str
    relative: bool = False
    segs: tuple[str, ...] = ()

    def describe(self) -> str:
        """``tolerance ±0.01``, ``regex '^a'``: the comparator in a few words."""
        if self.kind == "tolerance":
            if self.relative:
                return f"tolerance {shown_number(self.value * 100)}%"
            return f"tolerance ±{shown_number(self.value)}"
        if self.kind == "regex":
            return f"regex {self.value.pattern!r}"
        if self.kind == "similarity":
            return f"similarity ≥ {shown_number(self.value)}"
        return self.kind


def ignore_rule(pattern: str) -> Rule:
    """A ``[diff] ignore`` pattern as the rule an excuse names (``kind`` ``ignore``)."""
    return Rule(pattern, "ignore", None, None, f"[diff] ignore {pattern!r}", segs=split_pattern(pattern))


def governing(rules: Iterable[Rule], full: tuple[str, ...]) -> list[tuple[Rule, int]]:
    """The rules whose pattern matches ``full`` or a prefix of it, with the length of the prefix:
    the most specific (longest) first, in file order among equals."""
    out: list[tuple[Rule, int]] = []
    for r in rules:
        for depth in range(len(full), 0, -1):
            if match_path(r.segs, full[:depth]):
                out.append((r, depth))
                break
    out.sort(key=lambda rd: -rd[1])
    return out


def rule_problem(pattern: str) -> str | None:
    """What makes a rule's path pattern unable to match anything, or None."""
    if not pattern or pattern != pattern.strip():
        return "an empty path, or one with spaces around it"
    try:
        segs = parse_pattern(pattern)
    except (ValueError, orjson.JSONDecodeError) as e:
        return str(e)
    if not segs:
        return "no segment"
    if segs[0] in ("**", "*") or any(ch in segs[0] for ch in "*?["):
        return None
    if segs[0] not in _SIDES:
        return f"it must start with args, result, note, request, response or a wildcard, not {segs[0]!r}"
    if segs[0] == "note" and len(segs) < 2:
        return "a note path names the note's kind: note.KIND"
    return None


def parse_rule(key: str, value: Any, where: str) -> Rule:
    """One ``[compare.rules]`` entry (``"TOOL:result.price" = { tolerance = 0.01 }``).

    Raises:
        ConfigError: naming ``where`` and what is wrong.
    """
    tool: str | None = None
    pattern = key
    head, colon, rest = key.partition(":")
    if colon and not any(ch in head for ch in '["'):  # a ':' inside a quoted key is the key's
        tool, pattern = head, rest
        if not tool.strip() or tool != tool.strip():
            raise ConfigError(f"{where}: {key!r} has no tool name before ':'")
    problem = rule_problem(pattern)
    if problem:
        raise ConfigError(f"{where}: the path pattern {pattern!r} can never match: {problem}")
    if isinstance(value, str):
        kind, params = value, {}
    elif isinstance(value, Mapping):
        known = [k for k in value if k in RULE_KINDS]
        if len(known) != 1 or len(value) != 1:
            raise ConfigError(
                f"{where} must be one comparator ({', '.join(RULE_KINDS)}), as a name or {{ kind = value }}; "
                f"got {dict(value)!r}"
            )
        kind, params = known[0], {known[0]: value[known[0]]}
    else:
        raise ConfigError(f"{where} must be a comparator name or a table, got {type(value).__name__} {value!r}")
    if kind not in RULE_KINDS:
        raise ConfigError(f"{where}: unknown comparator {kind!r} (known: {', '.join(RULE_KINDS)})")
    segs = parse_pattern(pattern)
    rule = Rule(pattern, kind, None, tool, key, segs=segs)
    arg = params.get(kind)
    if kind == "tolerance":
        if arg is None:
            raise ConfigError(f'{where}: tolerance needs a value: {{ tolerance = 0.01 }} or {{ tolerance = "2%" }}')
        return replace(rule, **_tolerance(arg, where))
    if kind == "regex":
        if not isinstance(arg, str):
            raise ConfigError(f'{where}: regex needs a regular expression string: {{ regex = "^a" }}')
        # deferred: the regex package (its search takes a time budget, REGEX_BUDGET) only for a regex rule
        import regex

        try:  # V0: a pattern is read as re reads it
            return replace(rule, value=regex.compile(arg, regex.V0))
        except (regex.error, OverflowError) as e:
            raise ConfigError(f"{where}: invalid regular expression {arg!r}: {e}") from None
        except RecursionError:  # groups nested thousands deep
            raise ConfigError(f"{where}: invalid regular expression {arg!r}: nested too deeply") from None
    if kind == "similarity":
        if isinstance(arg, bool) or not isinstance(arg, (int, float)) or not 0 < arg <= 1:
            raise ConfigError(f"{where}: similarity needs a threshold in (0, 1]: {{ similarity = 0.8 }}, got {arg!r}")
        return replace(rule, value=float(arg))
    if arg is not None and arg is not True:
        raise ConfigError(f'{where}: {kind} takes no value (write "{kind}"), got {arg!r}')
    return rule


def _tolerance(arg: Any, where: str) -> dict[str, Any]:
    if isinstance(arg, str) and arg.strip().endswith("%"):
        try:
            pct = float(arg.strip()[:-1])
        except ValueError:
            pct = -1.0
        if not (math.isfinite(pct) and pct >= 0):
            raise ConfigError(f'{where}: a relative tolerance is a percentage such as "2%", got {arg!r}')
        return {"value": pct / 100, "relative": True}
    if isinstance(arg, bool) or not isinstance(arg, (int, float)) or not math.isfinite(arg) or arg < 0:
        raise ConfigError(f'{where}: a tolerance is a number of at least 0 or a percentage ("2%"), got {arg!r}')
    return {"value": float(arg), "relative": False}
