"""The text of a comparison as the detail pane shows it, quick for megabyte strings.

Presentation only: what is known of a session comes from ``tapetui.review.sessions``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tapetui.core.changes import MISSING, Change
from tapetui.core.comparators import CompareSettings, Excuse, Judged
from tapetui.core.paths import prefixed
from tapetui.review import Comparison, NoteDiff, RowLevel, StepDiff, suggest_rule
from tapetui.review.textdiff import common_prefix

CLIP = 2000  # a changed string longer than this is cut near its first difference before it is formatted

Row = tuple[str, RowLevel]
"""A line of a comparison and how it reads (``pass``, ``fail``, ``excused``, ``differs``)."""


def _clip(c: Change) -> Change:
    """A long changed string cut to a window around its first difference (found at C speed).

    ``format_changes`` shows about 60 characters there anyway, but finds the place with a character
    loop in Python: tens of milliseconds per megabyte, holding the interpreter while the screen waits.
    """
    if isinstance(c.old, str) and isinstance(c.new, str) and max(len(c.old), len(c.new)) > CLIP:
        p = common_prefix(c.old, c.new)
        lo = max(0, p - CLIP // 4)
        return Change(c.path, c.old[lo : p + CLIP // 4], c.new[lo : p + CLIP // 4])
    return c


class _Clipper:
    """Clips changes once each, so that a remark still finds its change (rows match them by identity)."""

    def __init__(self) -> None:
        self.done: dict[int, Change] = {}

    def change(self, c: Change) -> Change:
        out = self.done.get(id(c))
        if out is None:
            out = self.done[id(c)] = _clip(c)
        return out

    def changes(self, cs: tuple[Change, ...]) -> tuple[Change, ...]:
        return tuple(self.change(c) for c in cs)

    def excuses(self, es: tuple[Excuse, ...]) -> tuple[Excuse, ...]:
        return tuple(e if (c := self.change(e.change)) is e.change else replace(e, change=c) for e in es)


def _clipped_step(sd: StepDiff) -> StepDiff:
    k = _Clipper()
    return replace(
        sd,
        arg_changes=k.changes(sd.arg_changes),
        result_changes=k.changes(sd.result_changes),
        excused=tuple(zip((side for side, _ in sd.excused), k.excuses(tuple(e for _, e in sd.excused)), strict=True)),
        remarks=tuple((side, k.change(c), text) for side, c, text in sd.remarks),
    )


def _clipped_note(nd: NoteDiff) -> NoteDiff:
    k = _Clipper()
    j = nd.judged
    judged = Judged(k.changes(j.changes), k.excuses(j.excused), tuple((k.change(c), t) for c, t in j.remarks), j.errors)
    return replace(nd, judged=judged)


def step_rows(sd: StepDiff) -> list[Row]:
    """``sd.rows()``, the same text, quick for megabyte strings (see _clip)."""
    return _clipped_step(sd).rows()


def comparison_rows(cmp: Comparison) -> list[Row]:
    """``cmp.rows()``: the verdicts first, then what differs; the same text, quick for megabyte strings."""
    clipped = replace(
        cmp,
        steps=tuple(_clipped_step(sd) if sd.differs else sd for sd in cmp.steps),
        notes=tuple(_clipped_note(nd) if nd.differs else nd for nd in cmp.notes),
    )
    return clipped.rows()


# ---- a rule to offer when accepting ----------------------------------------------------------------
def _first_change(sd: StepDiff) -> tuple[str, Change] | None:
    if sd.arg_changes:
        return "args", sd.arg_changes[0]
    if sd.result_changes and sd.outcome is None:  # a result that became an error: no rule excuses it
        return "result", sd.result_changes[0]
    return None


def suggested_rule(cmp: Comparison | None, sd: StepDiff | None = None) -> str | None:
    """A rule (``KIND:PATH[=VALUE]``) that would excuse the first difference no rule excuses yet: of the
    step ``sd`` when given, else of the comparison's steps, then its notes. None when there is none."""
    found: tuple[str, Change] | None = None
    tool: str | None = None
    if sd is not None:
        found, tool = _first_change(sd), sd.tool
    elif cmp is not None:
        step = next((s for s in cmp.changed_steps if _first_change(s) is not None), None)
        if step is not None:
            found, tool = _first_change(step), step.tool
        else:
            found = next(((f"note.{n.kind}", n.judged.changes[0]) for n in cmp.changed_notes if n.judged.changes), None)
    if found is None:
        return None
    side, c = found
    return suggest_rule(prefixed(side, c.path), _plain(c.old), _plain(c.new), tool)


def _plain(v: Any) -> Any:
    return None if v is MISSING else v


# ---- comparison hooks ------------------------------------------------------------------------------
def needed_hooks(settings: CompareSettings) -> list[tuple[str, str]]:
    """``(key, "module:function")`` of each hook a comparison under ``settings`` may call
    (``judge`` for a judge rule, ``similarity`` for a similarity rule when a hook is named)."""
    kinds = {r.kind for r in settings.rules.rules}
    out = []
    if "similarity" in kinds and settings.similarity_hook:
        out.append(("similarity", settings.similarity_hook))
    if "judge" in kinds and settings.judge_hook:
        out.append(("judge", settings.judge_hook))
    return out


def hooks_text(needed: list[tuple[str, str]]) -> str:
    """``mypkg.judges (compare.judge)``: the modules that would be imported, and the keys naming them."""
    return ", ".join(f"{spec.partition(':')[0]} (compare.{key})" for key, spec in needed)
