"""What the app knows of a session: paths, latest run summary, candidate, load errors.

Pure data over the core; no widgets here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.jsondiff import Change
from tapetui.core.runlog import RunSummary, event_problem
from tapetui.core.store import candidate_path, refuse_links_out, samples_of
from tapetui.core.tapefile import TapeIndex, open_regular, read_index
from tapetui.review.golden import Comparison, StepDiff, compare
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


def _stamp(path: Path) -> tuple[int, int]:
    """What tells that a file changed: its mtime and size."""
    st = path.stat()
    return st.st_mtime_ns, st.st_size


GLYPH = {
    "hit": "✓",
    "drift": "≠",
    "miss": "?",
    "stale": "⌛",
    "unused": "∅",
    "contract": "⚡",
    "error": "✗",
    "pending": "●",
    "": "·",
}

# A step's status when the last run said several things of it (stale, then missed, then unused): the
# first of these it was given. What asks most of the reviewer wins; each step is counted once.
STATUS_PRECEDENCE = ("contract", "drift", "miss", "stale", "hit", "unused")
_RANK = {name: i for i, name in enumerate(STATUS_PRECEDENCE)}


@dataclass
class StepSummary(RunSummary):
    """A RunSummary whose ``status`` gives each step exactly one status, by STATUS_PRECEDENCE (not by
    the order the events came in), so per-step counts add up to the steps the run touched.

    ``off_tape`` counts misses that name no recorded step (a call the tape never had).
    """

    seen: dict[int, set[str]] = field(default_factory=dict, repr=False)
    off_tape: int = 0

    def add(self, ev: dict[str, Any]) -> None:
        super().add(ev)
        if event_problem(ev) is not None or ev.get("event") == "invalid":
            return  # counted as invalid by RunSummary
        kind = ev.get("event")
        step = ev.get("step", ev.get("seq"))
        if kind == "miss":
            step = ev.get("nearest")
            if not isinstance(step, int):
                self.off_tape += 1
        elif kind == "fingerprint":
            kind = None if ev.get("allowed") else "contract"
        if kind not in _RANK or not isinstance(step, int):
            return
        seen = self.seen.setdefault(step, set())
        seen.add(kind)
        self.status[step] = min(seen, key=_RANK.__getitem__)

    def reset(self) -> None:
        fresh = StepSummary()
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(fresh, name))

    def counts(self) -> dict[str, int]:
        """Steps per status, in STATUS_PRECEDENCE order (only those with steps)."""
        out = dict.fromkeys(STATUS_PRECEDENCE, 0)
        for status in self.status.values():
            if status in out:
                out[status] += 1
        return {k: v for k, v in out.items() if v}


@dataclass(eq=False)  # identity: two sessions are never equal by value
class Session:
    golden: Path
    name: str
    tapes_dir: Path | None = field(default=None, repr=False)  # symlinks leading out of it are not followed
    summary: StepSummary = field(default_factory=lambda: StepSummary(), repr=False)
    pending: bool = False
    error: str | None = None
    loaded: bool = False
    marked: bool = False
    _idx: tuple[tuple[int, int], TapeIndex] | None = field(default=None, repr=False)
    _cmp: tuple[tuple[tuple[int, int], tuple[int, int]], Comparison] | None = field(default=None, repr=False)
    recorded_error: bool | None = None  # a call of the tape recorded an error (None: not looked at yet)
    _err_stamp: tuple[int, int] | None = field(default=None, repr=False)

    def scan_recorded_error(self) -> bool:
        """Whether a call of the tape recorded an error; reads the tape (run it in a worker), again only
        when the file changed. A nested ``"error"`` key inside a result does not count."""
        idx = self.index()
        stamp = _stamp(idx.path)
        if self._err_stamp == stamp and self.recorded_error is not None:
            return self.recorded_error
        found = False
        with os.fdopen(open_regular(idx.path), "rb") as fh:
            for i in range(len(idx)):
                raw = idx.raw_line(i, fh)
                if b'"error":{' in raw and isinstance(orjson.loads(raw).get("error"), dict):
                    found = True
                    break
        self.recorded_error, self._err_stamp = found, stamp
        return found

    def older_candidates(self) -> list[Path]:
        """Candidates a newer recording displaced into ``NAME.samples/`` (kept, never replaced silently)."""
        return samples_of(self.golden)

    def index(self) -> TapeIndex:
        """The golden's index, re-read only when the file changed (size or mtime)."""
        path = self.golden if self.golden.exists() else candidate_path(self.golden)
        try:
            if self.tapes_dir is not None:
                refuse_links_out(self.tapes_dir, path)
            stamp = _stamp(path)
            if self._idx is not None and self._idx[0] == stamp:
                return self._idx[1]
            idx = read_index(path)
        except TapeError as e:
            self.error = str(e)
            raise
        except OSError as e:
            self.error = f"{path}: {e.strerror}"
            raise TapeError(self.error) from None
        self.error = None
        self._idx = (stamp, idx)
        return idx

    def comparison(self, config: Config) -> Comparison:
        """The golden against its pending candidate, compared again only when either file changed
        (moving over the steps of a session would otherwise re-read both tapes at every key)."""
        cand = candidate_path(self.golden)
        try:
            stamp = (_stamp(self.golden), _stamp(cand))
        except OSError as e:
            raise TapeError(f"{e.filename}: {e.strerror}") from None
        if self._cmp is not None and self._cmp[0] == stamp:
            return self._cmp[1]
        cmp = compare(self.golden, cand, config)
        self._cmp = (stamp, cmp)
        return cmp

    @property
    def statuses(self) -> set[str]:
        s = self.summary
        flags = {
            "drift": s.drift,
            "miss": s.misses,
            "stale": s.stale,
            "pending": self.pending,
            "error": self.error,
            "unused": s.unused,
        }
        return {name for name, on in flags.items() if on}

    @property
    def needs_review(self) -> bool:
        return bool(self.statuses - {"stale", "unused"}) or bool(self.error)
