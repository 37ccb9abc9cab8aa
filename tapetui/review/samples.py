"""Repeated samples of one session: how many match the golden, per dimension, and pass^k.

One replay is one sample; an agent that passes once may fail when it must pass k times in a row. A
session's samples are its older candidates (``NAME.samples/``, where a newer recording moves the pending
candidate) and its pending candidate, or files named on the command line (candidates, or run logs named
``*.run.jsonl``), or N new recordings made by ``tapes.toml``'s ``record_command`` (:func:`record_samples`).
Each is compared with the golden under the session's ``[compare]`` settings; a sample *matches* when every
dimension is within its threshold and it shows no new tool and no contract change.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tapetui.core.comparators import DIMENSIONS, CompareSettings
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.hookcalls import next_session
from tapetui.core.locks import held_park_fd, session_lock
from tapetui.core.runlog import read_run_log
from tapetui.core.runstart import runs_of
from tapetui.core.store import candidate_path, rotate_candidate, samples_of, session_name
from tapetui.core.textsafe import safe_text
from tapetui.review.comparison import HooksArg, LoadedTape, compare, load
from tapetui.review.findings import Finding, SessionReport, judge_run, run_log_stale
from tapetui.review.parking import parked
from tapetui.review.replay import quoted_output, record_command
from tapetui.review.verdicts import Verdict, pass_hat

__all__ = [
    "Sample",
    "SampleReport",
    "SampleSource",
    "add_samples",
    "judge_samples",
    "record_samples",
    "session_samples",
]


@dataclass(frozen=True)
class Sample:
    """One sample judged: its verdicts, and what else keeps it from matching (new tools, contracts...)."""

    path: Path
    verdicts: tuple[Verdict, ...] = ()
    problems: tuple[str, ...] = ()  # new capabilities, contract changes, run errors: each fails the sample
    error: str | None = None  # the sample could not be read

    @property
    def matched(self) -> bool:
        return self.error is None and not self.problems and all(v.passed for v in self.verdicts)

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "matched": self.matched,
            "dimensions": {v.dimension: v.passed for v in self.verdicts},
            "problems": list(self.problems),
            "error": self.error,
        }


@dataclass(frozen=True)
class SampleReport:
    """Every sample of one session, and how many must match (``[compare] samples_required``)."""

    session: str
    samples: tuple[Sample, ...]
    settings: CompareSettings = field(default_factory=CompareSettings)

    @property
    def n(self) -> int:
        return len(self.samples)

    @property
    def matched(self) -> int:
        return sum(s.matched for s in self.samples)

    @property
    def required(self) -> int:
        return self.settings.required(self.n)

    @property
    def ok(self) -> bool:
        return self.n > 0 and self.matched >= self.required

    def per_dimension(self) -> dict[str, int]:
        """How many samples pass each dimension (a run log, which judges no results, passes that one)."""
        return {
            d: sum(1 for s in self.samples if s.error is None and all(v.passed for v in s.verdicts if v.dimension == d))
            for d in DIMENSIONS
        }

    def pass_hat(self) -> dict[int, float]:
        return pass_hat(self.matched, self.n)

    def lines(self) -> list[str]:
        """``4 of 5 samples match (required 5): pass^1 0.80, pass^5 0.00`` and one line per dimension."""
        ph = self.pass_hat()
        head = f"[SAMPLES] {self.matched} of {self.n} samples match (required {self.required})"
        if ph:
            head += f": pass^1 {ph[1]:.2f}" + (f", pass^{self.n} {ph[self.n]:.2f}" if self.n > 1 else "")
        dims = self.per_dimension()
        out = [head, "[SAMPLES] per dimension: " + ", ".join(f"{d} {dims[d]}/{self.n}" for d in DIMENSIONS)]
        for s in self.samples:
            if not s.matched:
                why = s.error or "; ".join(
                    [*(f"{v.dimension} over threshold" for v in s.verdicts if not v.passed), *s.problems]
                )
                out.append(f"[SAMPLES] {s.path.name}: does not match ({why})")
        return out

    def finding(self) -> Finding:
        """The report as one finding: failing when fewer samples match than required."""
        text = self.lines()[0]
        return Finding("samples", text, data={"samples": self.to_json()}, warning=self.ok)

    def to_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "matched": self.matched,
            "required": self.required,
            "ok": self.ok,
            "dimensions": self.per_dimension(),
            "pass_hat": {str(k): v for k, v in self.pass_hat().items()},
            "samples": [s.to_json() for s in self.samples],
        }


def session_samples(golden: Path) -> list[Path]:
    """The samples a session has: its older candidates (oldest first), then its pending candidate."""
    cand = candidate_path(golden)
    return [*samples_of(golden), *([cand] if os.path.lexists(cand) else [])]


def judge_samples(
    config: Config, golden: Path, paths: Iterable[Path], *, hooks: HooksArg = "auto", loaded: LoadedTape | None = None
) -> SampleReport:
    """Judge each of ``paths`` (candidates, or run logs named ``*.run.jsonl``) against the golden.

    A sample that cannot be read is a sample that does not match (its error is reported), never skipped.

    Raises:
        TapeError: the golden cannot be read.
        ConfigError: a hook tapes.toml names cannot be imported.
    """
    golden = Path(golden)
    g = loaded or load(golden, keep_bytes=True)
    settings = config.compare_for(session_name(golden, config.tapes_dir))
    out: list[Sample] = []
    for p in paths:
        p = Path(p)
        try:
            out.append(_judge_one(config, golden, g, p, hooks))
        except TapeError as e:
            out.append(Sample(p, error=str(e)))
    return SampleReport(session_name(golden, config.tapes_dir), tuple(out), settings)


def _judge_one(config: Config, golden: Path, g: LoadedTape, p: Path, hooks: HooksArg) -> Sample:
    if p.name.endswith(".run.jsonl"):
        events = read_run_log(p)
        stale = run_log_stale(golden, events, g.index.data if g.index.data is not None else None)
        if stale:
            return Sample(p, error=stale)
        findings, verdicts = judge_run(g.index, events, config, log=p, checked=True, hooks=hooks)
        stopped: list[str] = []  # a run that did not finish matches nothing, whatever a threshold lets through
        for run in runs_of(events):  # each run of a run group's log (tapetui.core.runstart): every one must finish
            end = next((e for e in reversed(run) if e.get("event") == "end"), None)
            err = end.get("error") if end is not None else None
            if end is None:
                stopped.append("the run has no end (killed, or still running)")
            elif isinstance(err, dict):
                stopped.append(f"the run stopped with {err.get('type') or 'an error'}")
        problems = tuple(stopped) + tuple(
            f.text for f in findings if not f.warning and f.kind not in ("drift", "miss", "tools", "note", "error")
        )
        return Sample(p, verdicts, problems)
    cmp = compare(g, p, config, hooks=hooks)
    problems = tuple(f"new tool {t}" for t in cmp.new_capabilities) + tuple(
        f"contract of {t} changed" for t in sorted(cmp.contracts)
    )
    return Sample(p, cmp.verdicts, problems)


def record_samples(
    config: Config,
    golden: Path,
    n: int,
    *,
    on_run: Callable[[int, list[str]], None] | None = None,
    notes: list[str] | None = None,
) -> list[Path]:
    """Run ``record_command`` ``n`` times for one session; each run records one new candidate.

    Returns the ``n`` candidates those runs wrote, all in ``NAME.samples/`` by the end. The session is left
    as it was otherwise: a candidate pending before, and the run log, are parked outside the session while the
    samples record (:mod:`tapetui.review.parking`: where no command can delete them, and put back byte for byte,
    after a kill too), so what ``check`` then says of the session besides its samples does not depend on which
    sample came last. ``on_run(i, argv)`` is called before run ``i``; ``notes`` gets a line for anything out of
    the ordinary (the parked folder deleted by the command: put back from memory).

    Raises:
        TapeError: no record_command, a run that fails, runs longer than ``[tapes] command_timeout`` or writes
            no candidate (naming the command and the exit status; what it printed last is quoted redacted and
            escaped); the session is put back as it was all the same.
    """
    if n < 1:
        raise TapeError(f"--samples needs a number of at least 1, got {n}")
    command = record_command(config, golden)
    cand = candidate_path(golden)
    name = safe_text(golden.name, newlines=False)
    made: list[tuple[int, int]] = []  # (device, inode) of each candidate a run wrote
    with parked(config, golden, notes):
        for i in range(1, n + 1):
            if on_run is not None:
                on_run(i, list(command.argv))
            before = _inode(cand)
            park_fd = held_park_fd(golden)  # the command holds the park lock too while it lives (after a kill)
            done = command.run(capture=True, keep_fds=(park_fd,) if park_fd is not None else ())
            after = _inode(cand)
            if done.returncode != 0 or after is None or after == before:
                what = f"exited with status {done.returncode}" if done.returncode else "wrote no new candidate"
                said = quoted_output(done.stdout, done.stderr, config.redactor(), lines=3)
                raise TapeError(
                    f"record_command for {name} (run {i} of {n}) {what}: {command.shown()}"
                    + (f"; it said: {' / '.join(said.splitlines())}" if said != "(no output)" else "")
                )
            made.append(after)
            with session_lock(golden):
                rotate_candidate(golden)  # each sample joins the others at once: nothing a run recorded stays pending
    found = {_inode(p): p for p in session_samples(golden)}
    out = [found[m] for m in made if m in found]
    if len(out) != n:
        raise TapeError(f"{name}: {n - len(out)} of the {n} recorded samples were moved or removed meanwhile")
    return out


def _inode(p: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(p)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


SampleSource = Literal["folder"] | Mapping[Path, list[Path]]
"""Where ``check`` takes samples from: ``"folder"`` (each session's ``NAME.samples/`` and pending candidate),
or files per golden (named on the command line, or recorded by :func:`record_samples` first)."""


def add_samples(config: Config, reports: Iterable[SessionReport], source: SampleSource) -> int:
    """Judge each session's samples and add the result to its report (a ``samples`` finding, failing
    when fewer match than required, and ``report.samples``); returns how many sessions had samples.

    A session without samples is left alone.

    Raises:
        ConfigError: a hook tapes.toml names cannot be imported.
    """
    counted = 0
    for rep in reports:
        if rep.error is not None or not rep.golden.exists():
            continue
        paths = session_samples(rep.golden) if isinstance(source, str) else list(source.get(rep.golden, []))
        if not paths:
            continue
        counted += 1
        next_session()  # a regex rule spent on another session runs again; on this one's samples, once
        report = judge_samples(config, rep.golden, paths)
        rep.samples = report.to_json()
        rep.findings.append(report.finding())
        rep.findings += [Finding("samples", line, warning=True) for line in report.lines()[1:]]
    return counted
