"""One verdict per dimension of a comparison, and how tool sequences are matched in each mode.

A comparison of a session with its golden is judged on five dimensions (:data:`DIMENSIONS`), each
against its own threshold from ``tapes.toml``'s ``[compare]`` (see :mod:`tapetui.core.comparators`):
the executed tool sequence and the model-requested one (edits, counted as the sequence mode says),
and the arguments, results and notes (differences no rule excused). A tool the new run used and the
golden never did is reported on its own, whatever the mode: a new capability.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

from rapidfuzz.distance import Levenshtein

from tapetui.core.comparators import DIMENSIONS, CompareSettings

__all__ = ["DIMENSIONS", "Verdict", "new_capabilities", "pass_hat", "phase_of", "sequence_distance", "verdict"]


@dataclass(frozen=True, slots=True)
class Verdict:
    """One dimension judged: ``value`` (edits, or differences no rule excused) against ``threshold``.

    ``errors``: comparisons of this dimension a hook could not make (they fail it whatever the threshold).
    """

    dimension: str
    value: int
    threshold: int
    excused: int = 0
    errors: int = 0
    mode: str | None = None
    judged: bool = True  # False: nothing to judge (no call of either session names a requested tool)

    @property
    def passed(self) -> bool:
        return not self.judged or (self.errors == 0 and self.value <= self.threshold)

    def line(self) -> str:
        """``[VERDICT] tools  pass  0 edits (phases; max 0)``."""
        if not self.judged:
            return f"[VERDICT] {self.dimension:<9}  n/a   no call records a requested_tool"
        unit = {"tools": "edit", "requested": "edit", "tokens": "token"}.get(self.dimension, "difference")
        what = f"{self.value:,} {unit}{'' if self.value == 1 else 's'}"
        extra = [f"{self.mode} order"] if self.mode else []
        extra.append(f"max {self.threshold:,}")
        if self.excused:
            extra.append(f"{self.excused} excused by rules")
        if self.errors:
            extra.append(f"{self.errors} comparison error{'' if self.errors == 1 else 's'}")
        return f"[VERDICT] {self.dimension:<9}  {'pass' if self.passed else 'FAIL'}  {what} ({'; '.join(extra)})"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "passed": self.passed,
            "judged": self.judged,
            "value": self.value,
            "threshold": self.threshold,
            "excused": self.excused,
            "errors": self.errors,
        }
        if self.mode:
            out["mode"] = self.mode
        return out


_THRESHOLD = {
    "tools": "max_tool_edits",
    "requested": "max_requested_edits",
    "arguments": "max_arg_changes",
    "results": "max_result_changes",
    "notes": "max_note_changes",
}


def verdict(dimension: str, settings: CompareSettings, value: int, excused: int = 0, errors: int = 0) -> Verdict:
    """The verdict of ``dimension`` for ``value`` under ``settings``' threshold."""
    mode = settings.sequence if dimension in ("tools", "requested") else None
    return Verdict(dimension, value, getattr(settings, _THRESHOLD[dimension]), excused, errors, mode)


def phase_of(seqs: Sequence[int], phases: Sequence[tuple[str, int]]) -> list[str | None]:
    """The phase of each call (by its seq): the last phase line written before it (``after`` < seq)."""
    out: list[str | None] = []
    for s in seqs:
        name: str | None = None
        for pname, after in phases:
            if after < s:
                name = pname
            else:
                break
        out.append(name)
    return out


def _multiset(old: Sequence[str], new: Sequence[str]) -> tuple[int, int]:
    """``(missing, extra)``: tools of ``old`` not in ``new`` and the reverse, counted with repeats."""
    a, b = Counter(old), Counter(new)
    return sum((a - b).values()), sum((b - a).values())


def _phase_groups(tools: Sequence[str], phases: Sequence[str | None]) -> list[tuple[str | None, list[str]]]:
    groups: list[tuple[str | None, list[str]]] = []
    for tool, ph in zip(tools, phases, strict=True):
        if not groups or groups[-1][0] != ph:
            groups.append((ph, []))
        groups[-1][1].append(tool)
    return groups


def sequence_distance(
    mode: str,
    old: Sequence[str],
    new: Sequence[str],
    old_phases: Sequence[str | None] | None = None,
    new_phases: Sequence[str | None] | None = None,
) -> int:
    """Edits between two tool sequences as ``mode`` counts them.

    * ``strict``: Levenshtein distance (a substitution is one edit);
    * ``unordered``: the larger of the tools missing and the tools extra (multisets; a substitution is one);
    * ``subset``: tools the new run used beyond the golden's multiset (leaving some out is fine);
    * ``superset``: the golden's tools the new run left out (adding more is fine);
    * ``phases``: per phase, as ``unordered``, phases paired by name in order; a phase only one side has
      counts its calls, and the phases' own order counts as in ``strict``.
    """
    if mode == "strict":
        return int(Levenshtein.distance(list(old), list(new)))
    if mode in ("unordered", "subset", "superset"):
        missing, extra = _multiset(old, new)
        return max(missing, extra) if mode == "unordered" else extra if mode == "subset" else missing
    if mode != "phases":
        raise ValueError(f"unknown sequence mode {mode!r}")
    og = _phase_groups(old, old_phases if old_phases is not None else [None] * len(old))
    ng = _phase_groups(new, new_phases if new_phases is not None else [None] * len(new))
    total = int(Levenshtein.distance([n for n, _ in og], [n for n, _ in ng]))
    pool: dict[str | None, list[list[str]]] = {}
    for name, tools in ng:
        pool.setdefault(name, []).append(tools)
    for name, tools in og:
        mine = pool.get(name)
        if mine:
            missing, extra = _multiset(tools, mine.pop(0))
            total += max(missing, extra)
        else:
            total += len(tools)
    total += sum(len(t) for rest in pool.values() for t in rest)
    return total


def new_capabilities(old: Sequence[str], new: Sequence[str]) -> list[str]:
    """Tools the new run used that the golden never did, in the order first used."""
    seen = set(old)
    out: list[str] = []
    for t in new:
        if t not in seen and t not in out:
            out.append(t)
    return out


def pass_hat(passed: int, n: int) -> dict[int, float]:
    """pass^k for k = 1..n: the chance that k samples drawn without replacement all pass,
    ``C(passed, k) / C(n, k)`` (the unbiased estimate of tau-bench); pass^1 is the pass rate."""
    return {k: comb(passed, k) / comb(n, k) for k in range(1, n + 1)} if n else {}
