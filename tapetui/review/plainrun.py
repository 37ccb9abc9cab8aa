"""A run log that is one run which replayed its golden cleanly, read without making events of it.

Most run logs ``check`` reads are a replay that went as recorded: a ``start``, one plain ``hit`` per recorded call
in the recorded order, an ``end`` without an error. For such a run :func:`~tapetui.review.findings.judge_run`
finds nothing and gives each dimension a verdict of 0 (tools, arguments, notes), so ``check`` reads the hits
typed (:mod:`tapetui.core.typedlines`: decoded and type-checked in C, no dict made) and gives those verdicts
itself (:func:`plain_verdicts`). Anything else, in the run log or in the golden, is read and judged as events, as
before: a run log that is not one plain run (:func:`read_plain_run` is None) or a golden whose judgement needs the
events (notes, a contract from a trace, a phased sequence mode; :func:`plain_verdicts` is None). The two ways give
the same report; ``tests/test_typed_lines.py`` compares them on every run log it can make.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.comparators import CompareSettings
from tapetui.core.files import read_small
from tapetui.core.index import TapeIndex
from tapetui.core.runlog import event_problem
from tapetui.core.turns import TURN
from tapetui.core.typedlines import DECODE_ERRORS, decode_hit, fits
from tapetui.review.verdicts import Verdict, verdict

__all__ = ["PlainRun", "plain_verdicts", "read_plain_run"]

_SMALL = 1 << 20  # bytes: a bigger run log is read as events, in chunks


@dataclass(frozen=True, slots=True)
class PlainRun:
    """A run log that is one clean run: its ``start`` event, and the tools its hits called, in run order."""

    start: dict[str, Any]
    executed: tuple[str, ...]
    served: tuple[tuple[int | None, str | None], ...] = ()  # each hit's golden step and key, in run order


def read_plain_run(path: Path) -> PlainRun | None:
    """The run log at ``path`` when it is one run that replayed cleanly, in the form a replay writes it; else None
    (a run log that is anything else, or cannot be read here, is read as events: that read says why).

    One run that replayed cleanly: every complete line (a last line without its newline is a run still writing, and
    is not read, as :class:`~tapetui.core.runlog.RunLogReader` does not) is a ``start`` event first, an ``end`` event
    with no error last, and between them only ``hit`` events of exactly the fields a replay writes for a plain hit
    (:class:`~tapetui.core.typedlines.HitEvent`), none of a model turn; every event valid
    (:func:`~tapetui.core.runlog.event_problem`), and all of one run (one ``run`` id, or none).
    """
    data = read_small(path, _SMALL)  # a FIFO, a folder, anything unreadable: None, and read as events (which says so)
    if data is None:
        return None
    whole = data[: data.rfind(b"\n") + 1]
    if not fits(whole):
        return None
    raws = whole.split(b"\n")
    raws.pop()
    if len(raws) < 2:
        return None
    try:
        start, end = orjson.loads(raws[0]), orjson.loads(raws[-1])
        hits = list(map(decode_hit, raws[1:-1]))
    except (*DECODE_ERRORS, orjson.JSONDecodeError):
        return None
    if not (_is(start, "start") and _is(end, "end")) or end.get("error") is not None:
        return None
    runs = {h.run for h in hits}
    runs.update((start.get("run"), end.get("run")))
    tools = [h.tool for h in hits]
    if len(runs) != 1 or TURN in tools:
        return None
    return PlainRun(start, tuple(t for t in tools if t is not None), tuple((h.step, h.key) for h in hits))


def _is(ev: Any, kind: str) -> bool:
    """``ev`` is a valid event of ``kind`` about no call (no tool named: a model turn's is judged as one)."""
    return type(ev) is dict and ev.get("event") == kind and ev.get("tool") is None and event_problem(ev) is None


def plain_verdicts(golden: TapeIndex, run: PlainRun, settings: CompareSettings) -> tuple[Verdict, ...] | None:
    """What :func:`~tapetui.review.findings.judge_run` gives a plain run against ``golden`` under ``settings`` (it
    finds nothing): a verdict of 0 for the tools, the arguments and the notes. None where the judgement needs the
    run's events: the golden's tool sequence is not the one the run executed, or the golden holds notes (the run
    wrote none: a finding) or a contract from a trace (a warning per tool the run used), or the session's sequence
    mode is ``phases``, or the hits are not each golden call in order under its key (a hit the golden does not hold
    is a finding)."""
    if golden.notes or golden.traced or settings.sequence == "phases" or tuple(golden.tools) != run.executed:
        return None
    if run.served != tuple(zip(golden.seqs, golden.keys, strict=True)):  # each golden call, in order, by its key
        return None
    last = _LAST[0] if _LAST else None
    if last is not None and last[0] is settings:  # most sessions share one settings object: so do their verdicts
        return last[1]
    made = verdict("tools", settings, 0), verdict("arguments", settings, 0, 0), verdict("notes", settings, 0)
    _LAST[:] = [(settings, made)]  # the settings held, so their id is never another's
    return made


# the last settings judged and their verdicts (a Verdict is a frozen value: reports may share one)
_LAST: list[tuple[CompareSettings, tuple[Verdict, ...]]] = []
