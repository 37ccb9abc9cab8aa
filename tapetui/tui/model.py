"""The text of a comparison as the detail pane shows it, quick for megabyte strings.

Presentation only: what is known of a session comes from ``tapetui.review.sessions``.
"""

from __future__ import annotations

from dataclasses import replace

from tapetui.core.changes import Change
from tapetui.review import Comparison, StepDiff
from tapetui.review.textdiff import common_prefix

CLIP = 2000  # a changed string longer than this is cut near its first difference before it is formatted


def _clipped(changes: tuple[Change, ...]) -> tuple[Change, ...]:
    """Long changed strings cut to a window around their first difference (found at C speed).

    ``format_changes`` shows about 60 characters there anyway, but finds the place with a character
    loop in Python: tens of milliseconds per megabyte, holding the interpreter while the screen waits.
    """
    out = []
    for c in changes:
        if isinstance(c.old, str) and isinstance(c.new, str) and max(len(c.old), len(c.new)) > CLIP:
            p = common_prefix(c.old, c.new)
            lo = max(0, p - CLIP // 4)
            c = Change(c.path, c.old[lo : p + CLIP // 4], c.new[lo : p + CLIP // 4])
        out.append(c)
    return tuple(out)


def step_lines(sd: StepDiff) -> list[str]:
    """``sd.lines()``, the same text, quick for megabyte strings (see _clipped)."""
    return replace(sd, arg_changes=_clipped(sd.arg_changes), result_changes=_clipped(sd.result_changes)).lines()


def comparison_lines(cmp: Comparison) -> list[str]:
    """``cmp.lines()``, the same text, quick for megabyte strings (see _clipped)."""
    steps = tuple(
        replace(sd, arg_changes=_clipped(sd.arg_changes), result_changes=_clipped(sd.result_changes))
        for sd in cmp.steps
    )
    return replace(cmp, steps=steps).lines()
