"""One diff of a golden against its candidate, another tape or a run log: for ``tapetui diff`` and the app.

:func:`diff` finds what to compare with and compares it once; the :class:`Diff` it returns holds
the structured result (a :class:`~tapetui.review.comparison.Comparison`, or run-log
:class:`~tapetui.review.findings.Finding` s) and renders it as text lines or JSON, so every front
shows the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import open_regular
from tapetui.core.hookcalls import next_session
from tapetui.core.runlog import read_run_log
from tapetui.core.store import candidate_path, refuse_links_out, runlog_path
from tapetui.core.tapefile import read_index
from tapetui.core.turns import TURN, from_trace
from tapetui.core.turns import tokens as turn_tokens
from tapetui.review.comparison import Comparison, HooksArg, LoadedTape, compare
from tapetui.review.findings import Finding, compare_run, run_log_stale

__all__ = ["Diff", "DiffLevel", "DiffSource", "diff"]

DiffSource = Literal["candidate", "tape", "run_log"]
DiffLevel = Literal["differs", "warning", "clean"]
"""How a line of a diff reads: a difference, a warning that does not fail, or "no differences"."""


@dataclass(frozen=True)
class Diff:
    """A golden compared with one other file."""

    golden: Path
    other: Path
    source: DiffSource
    comparison: Comparison | None = None  # source "candidate" or "tape"
    findings: tuple[Finding, ...] = ()  # source "run_log"
    totals: tuple[str, ...] = ()  # two imported traces: steps, tokens and latency, each side and the change
    notes: tuple[str, ...] = ()  # what was left out of the comparison (a torn last line): warnings, shown first

    @property
    def differs(self) -> bool:
        """Whether anything differs (``tapetui diff`` exits 1): a warning alone does not."""
        if self.comparison is not None:
            return not self.comparison.passed
        return any(not f.warning for f in self.findings)

    @property
    def title(self) -> str:
        return f"{self.golden.name} ⟷ {self.other.name}" + (" (run log)" if self.source == "run_log" else "")

    def rows(self) -> list[tuple[str, DiffLevel]]:
        """Each line with how it reads (for colour); ``no differences`` alone when nothing differs (after the
        notes of what was left out)."""
        return [(note, "warning") for note in self.notes] + self._rows()

    def _rows(self) -> list[tuple[str, DiffLevel]]:
        if self.comparison is not None:
            cmp = self.comparison
            if cmp.clean and not cmp.new_capabilities:
                return [("no differences", "clean"), *((line, "clean") for line in self.totals)]
            within = cmp.passed  # every difference within its dimension's threshold: shown, not failing
            level: dict[str, DiffLevel] = {
                "pass": "clean",
                "fail": "differs",
                "excused": "warning",
                "differs": "warning" if within else "differs",
                "capability": "differs",  # a tool the golden never used fails the comparison (Comparison.passed)
            }
            rows = [(line, level[how]) for line, how in cmp.rows()]
            return rows + [(line, "clean") for line in self.totals]
        if not self.findings:
            return [("no differences", "clean")]
        return [(f.text, "warning" if f.warning else "differs") for f in self.findings]

    def lines(self) -> list[str]:
        """The text lines ``tapetui diff`` prints under its title."""
        return [text for text, _ in self.rows()]

    def to_json(self) -> dict[str, Any]:
        """What ``tapetui diff --json`` prints."""
        if self.comparison is not None:
            out = self.comparison.to_json()
            if self.totals:
                out["totals"] = list(self.totals)
        else:
            out = {
                "golden": str(self.golden),
                "run_log": str(self.other),
                "findings": [f.to_json() for f in self.findings],
            }
        if self.notes:
            out["notes"] = list(self.notes)
        return out


def diff(
    config: Config,
    golden: Path,
    other: Path | None = None,
    *,
    loaded: LoadedTape | None = None,
    hooks: HooksArg = "auto",
) -> Diff:
    """Compare a golden with ``other``: by default its candidate, else its latest run log.

    A file named ``*.run.jsonl`` is read as a run log (its findings against the golden, or one
    ``stale_run`` finding when it ran against an earlier golden); any other as a tape.

    Args:
        loaded: the golden, when the caller has read it already (not read again).
        hooks: see :data:`~tapetui.review.comparison.HooksArg` (the app passes None until a person allows them).

    Raises:
        TapeError: nothing to compare with, or a file that cannot be read as what it is named.
    """
    next_session()  # a regex rule spent on another session runs again: what is shown depends on this one only
    golden = Path(golden)
    source: DiffSource = "tape"
    if other is None:
        other, source = candidate_path(golden), "candidate"
        if not other.exists():
            other, source = runlog_path(golden), "run_log"
        if not other.exists():
            raise TapeError(f"{golden}: nothing to compare with (no candidate and no run log; name one as B)")
    elif not other.exists():
        raise TapeError(f"{other}: no such file to compare {golden.name} with")
    refuse_links_out(config.tapes_dir, golden, other)  # a planted link to a file outside is never read or shown
    notes = _left_out(golden, tape_only=True) if loaded is None else ()
    if other.name.endswith(".run.jsonl"):
        events = read_run_log(other)
        idx = loaded.index if loaded is not None else read_index(golden, validate=True, keep_bytes=True)
        whole = idx.data if idx.data is not None and len(idx.data) == idx.size else None
        stale = run_log_stale(golden, events, whole)  # a small golden is hashed as read, not read again
        findings = (
            [Finding("stale_run", stale)]
            if stale
            else compare_run(idx, events, config, log=other, checked=True, hooks=hooks)
        )
        return Diff(golden, other, "run_log", findings=tuple(findings), notes=notes)
    if source == "tape" and other == candidate_path(golden):
        source = "candidate"
    notes += tuple(n for n in _left_out(other, tape_only=True) if n not in notes)  # a tape diffed with itself
    cmp = compare(loaded or golden, other, config, hooks=hooks)
    return Diff(golden, other, source, comparison=cmp, totals=trace_totals(golden, other), notes=notes)


def _left_out(path: Path, *, tape_only: bool = False) -> tuple[str, ...]:
    """What a comparison leaves out of the tape at ``path``: its torn last line (an interrupted write), said.

    Raises:
        TapeError: ``tape_only`` and the file holds no complete line: not a tape (compared, it would read as one
            with every step gone).
    """
    idx = read_index(path)
    if tape_only and idx.line_count == 0:
        raise TapeError(f"{path}: not a tape (no complete line); nothing to compare")
    if idx.torn is None:
        return ()
    return (f"{path.name}: torn last line {idx.torn.line} ({idx.torn.size:,} bytes, an interrupted write) left out",)


def _sums(path: Path) -> tuple[dict[str, Any], int, int, float]:
    """A tape's header, steps, tokens and milliseconds (its lines read as JSON; the comparison read them already,
    so a malformed one has been named)."""
    header: dict[str, Any] = {}
    steps = tokens = 0
    ms = 0.0
    with open(open_regular(path), "rb", closefd=True) as fh:
        for raw in fh:
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            if not isinstance(rec, dict):
                continue
            kind = rec.get("type")
            if kind == "session" and not header:
                header = rec
            elif kind in ("call", TURN):
                steps += 1
                tokens += turn_tokens(rec.get("usage")) if kind == TURN else 0
                took = rec.get("ms")
                ms += took if isinstance(took, (int, float)) and not isinstance(took, bool) else 0.0
    return header, steps, tokens, ms


def _change(old: float, new: float) -> str:
    return f" ({(new - old) / old:+.0%})" if old else ""


def trace_totals(a: Path, b: Path) -> tuple[str, ...]:
    """For two imported traces of a task (``tapetui import otlp``): their steps, tokens and summed latency, side by
    side; nothing for other tapes."""
    ha, sa, ta, ma = _sums(a)
    hb, sb, tb, mb = _sums(b)
    traced = [isinstance(h.get("labels"), dict) and from_trace(str(h["labels"].get("source", ""))) for h in (ha, hb)]
    if not all(traced):
        return ()
    return (
        f"[STEPS] {sa} → {sb}",
        f"[TOKENS] {ta:,} → {tb:,}{_change(ta, tb)}",
        f"[LATENCY] {ma:,.1f} ms → {mb:,.1f} ms{_change(ma, mb)} (the steps' own time, summed)",
    )
