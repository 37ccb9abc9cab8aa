"""Checking sessions: what a run log says went wrong, a golden's stored keys, pending candidates.

``check`` is what ``tapetui check`` and CI run; the app shows the same findings.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tapetui.core.canon import canon
from tapetui.core.changes import MISSING, Change, format_changes
from tapetui.core.comparators import CompareSettings, Hooks
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import file_sha256
from tapetui.core.index import TapeIndex
from tapetui.core.jsondiff import IgnoreRules, path_segments
from tapetui.core.locks import reading
from tapetui.core.runlog import CALL_EVENTS, EXECUTED_EVENTS, RunLogReader, event_problem
from tapetui.core.store import (
    candidate_path,
    iter_goldens,
    journal_path,
    refuse_links_out,
    runlog_path,
    session_name,
)
from tapetui.core.tapefile import read_index
from tapetui.review.comparison import Comparison, HooksArg, LoadedTape, compare, load
from tapetui.review.journal import recover
from tapetui.review.parking import is_parked, parked_dir
from tapetui.review.verdicts import Verdict, new_capabilities, phase_of, sequence_distance, verdict

__all__ = [
    "Finding",
    "FindingKind",
    "Progress",
    "SessionReport",
    "check",
    "check_session",
    "compare_run",
    "golden_sha256",
    "judge_run",
    "no_tapes_message",
    "pending",
    "run_log_stale",
]

FindingKind = Literal[
    "drift",  # a call's arguments changed (run log)
    "miss",  # a call not on the tape (run log)
    "fingerprint",  # a tool's contract changed (run log)
    "unused",  # recorded steps never called, or not reached
    "stale",  # an expired entry was replayed
    "stale_run",  # the last run predates the golden
    "pending",  # a candidate waits for review
    "candidate",  # one line of the candidate's comparison with the golden
    "error",  # the run ended in an error, or has no end
    "tools",  # the executed tool sequence changed
    "torn",  # the golden's last line is torn
    "key",  # a stored key is not the key of its arguments
    "journal",  # an interrupted change recover could not finish: review actions on the session are refused
    "capability",  # a tool the golden never used: a new capability to audit
    "tolerated",  # a replay call served from a recording whose differences a rule excuses (a warning)
    "note",  # a note (tape.note) differs from the golden's
    "samples",  # fewer repeated samples match than tapes.toml requires
]
"""What a :class:`Finding` is about."""

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called by :func:`check` as sessions are checked."""


# ---- run logs -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``check`` reports about a session."""

    kind: FindingKind
    text: str
    seq: int | None = None
    tool: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    warning: bool = False  # shown, but does not fail check

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seq": self.seq,
            "tool": self.tool,
            "text": self.text,
            "warning": self.warning,
            **self.data,
        }


_REPLAY_ERRORS = ("TapeDrift", "TapeMiss", "ToolDriftError", "TapeStale")


def compare_run(
    golden: TapeIndex,
    events: list[dict[str, Any]],
    config: Config | None = None,
    *,
    log: Path | None = None,
    checked: bool = False,
    hooks: HooksArg = "auto",
) -> list[Finding]:
    """What a run log says went wrong against its golden (:func:`judge_run` without its verdicts)."""
    return judge_run(golden, events, config, log=log, checked=checked, hooks=hooks)[0]


def judge_run(
    golden: TapeIndex,
    events: list[dict[str, Any]],
    config: Config | None = None,
    *,
    log: Path | None = None,
    checked: bool = False,
    hooks: HooksArg = "auto",
) -> tuple[list[Finding], tuple[Verdict, ...]]:
    """What a run log says went wrong against its golden, and one verdict per dimension.

    Never silent about a run that did not replay cleanly: a run log with no ``end`` (the replay
    was killed, or is still running) and a run that ended in an error are findings, even when
    every argument path it drifted on is hidden by the ignore rules (those paths are still part
    of the call key, so the replay raised).

    Args:
        log: the run log, named in messages.
        checked: the events come from :class:`~tapetui.core.runlog.RunLogReader`, which checked each one
            (:func:`~tapetui.core.runlog.event_problem`); other events are checked here.
        hooks: see :data:`~tapetui.review.comparison.HooksArg` (for the notes' judge and similarity hooks).

    The session's ``[compare]`` settings apply: the executed sequence is matched in its mode and within
    its threshold, golden steps a ``subset`` run leaves out are not findings, a call served as a tolerated
    hit is a warning naming the rule, a tool the golden never used is a new capability, and the run's
    notes are compared with the golden's under the rules. A drift's arguments are read with ``[diff] ignore``
    as written (the volatile defaults never hide an argument: it makes the call's key), and each difference
    that excuses is listed as a warning; a tolerated hit is judged again by value under today's rules.

    Raises:
        TapeError: a malformed event, naming the run log and its line.
        ConfigError: a hook tapes.toml names cannot be imported.
    """
    arg_ignore = config.replay_ignore() if config else IgnoreRules(volatile=False)
    settings = config.compare_for(session_name(golden.path, config.tapes_dir)) if config else CompareSettings()
    run_notes: list[tuple[str, Any]] = []
    executed_phases: list[str | None] = []  # the phase each executed call ran in (events come in run order)
    current_phase: str | None = None
    missed: set[tuple[Any, Any]] = set()  # (seq, tool) of each miss: a fill answers it live under the same seq
    where = str(log) if log is not None else "run log"
    out: list[Finding] = []
    executed: list[str] = []
    unused: list[dict[str, Any]] = []
    end: dict[str, Any] | None = None
    last_seq: int | None = None
    last_tool: str | None = None
    hidden_at: int | None = None  # index in ``out`` of the finding for the last drift whose paths are all ignored
    for n, ev in enumerate(events, 1):
        problem = None if checked else event_problem(ev)
        if problem is None and ev.get("event") == "invalid":
            problem = str(ev.get("problem") or "invalid event")
        if problem is not None:
            line = ev.get("line") if type(ev) is dict else None
            raise TapeError(f"{where}:{line}: {problem}" if type(line) is int else f"{where}: event {n}: {problem}")
        kind, seq, tool = ev.get("event"), ev.get("seq"), ev.get("tool")
        executes = kind in EXECUTED_EVENTS or (kind == "fingerprint" and not ev.get("allowed"))
        if kind == "miss":
            missed.add((seq, tool))
        elif kind in ("live", "record") and (seq, tool) in missed:
            executes = False  # a fill's miss, then the live call that answered it: one call, not two
        if executes and isinstance(tool, str):
            executed.append(tool)
            executed_phases.append(current_phase)
        if kind in CALL_EVENTS and seq is not None:
            last_seq, last_tool = seq, tool
        if kind == "drift":
            changes = [Change(p, o, n) for p, o, n in ev.get("changes") or []]
            ignored_by = [_ignored_by(arg_ignore, c.path) for c in changes]
            shown = [c for c, pat in zip(changes, ignored_by, strict=True) if pat is None]
            data = {"recorded_key": ev.get("recorded_key"), "key": ev.get("key")}
            if not shown:
                # The call key still differed (ignore rules only hide paths from diffs): the replay raised here.
                paths = ", ".join(_arg_paths(changes)) or "no path shown"
                hidden_at = len(out)
                out.append(
                    Finding(
                        "drift",
                        f"{tool}  step {seq}  drift only in ignored paths ({paths}); they are "
                        "still part of the call key, so the replay raised TapeDrift",
                        seq,
                        tool,
                        {**data, "ignored_paths": _arg_paths(changes)},
                    )
                )
                continue
            hidden_at = None
            for line in format_changes(shown, prefix="args"):
                out.append(Finding("drift", f"{tool}  step {seq}  {line}", seq, tool, data))
            # what the user's [diff] ignore excuses is listed too, never dropped: a warning (the drift fails above)
            for c, pat in zip(changes, ignored_by, strict=True):
                if pat is not None:
                    (line,) = format_changes([c], prefix="args")
                    text = f"{tool}  step {seq}  {line}  — ignored by [diff] ignore {pat!r}"
                    out.append(Finding("drift", text, seq, tool, {**data, "ignored_by": pat}, warning=True))
        elif kind == "miss":
            near = ev.get("nearest")
            detail = "; ".join(format_changes([Change(p, o, n) for p, o, n in ev.get("changes") or []], "args"))
            why = f" ({ev['reason']})" if ev.get("reason") else ""
            text = f"{tool}  step {seq}  miss{why}: {ev.get('key')} not on tape" + (
                (f"; nearest is step {near}: {detail}" if detail else f"; recorded at step {near}")
                if near
                else f"; no recorded {tool} call"
            )
            out.append(Finding("miss", text, seq, tool, {"key": ev.get("key")}))
        elif kind == "fingerprint" and not ev.get("allowed"):
            out.append(
                Finding(
                    "fingerprint",
                    f"{tool}  step {seq}  [CONTRACT] fingerprint {ev.get('recorded')} → {ev.get('live')}",
                    seq,
                    tool,
                )
            )
            out += [
                Finding("fingerprint", f"{tool}  step {seq}  [CONTRACT] {line}", seq, tool)
                for line in ev.get("explanation") or []
            ]
        elif kind == "unused":
            unused.append(ev)
        elif kind == "hit" and ev.get("tolerated"):
            items = [t for t in ev["tolerated"] if isinstance(t, dict)]
            excused = "; ".join(f"{t.get('path')} ({t.get('text')})" for t in items)
            # the run was judged under the rules of its day: judged again by value, under today's
            gone = _no_longer_excused(ev, golden, settings, config)
            unknown = gone is None  # an older run log: the values are not there to judge
            if gone is None:
                gone = [str(t.get("path")) for t in items]
            if not gone:
                why = ""
            elif unknown:
                why = (
                    f"; the run log does not hold the call's arguments (an older tapetui wrote it), so whether "
                    f"tapes.toml still excuses {', '.join(gone)} is not known: run the replay again"
                )
            else:
                why = f"; no rule of tapes.toml excuses {', '.join(gone)} now: run the replay again"
            out.append(
                Finding(
                    "tolerated",
                    f"{tool}  step {seq}  served as a tolerated hit: {excused}{why}",
                    seq,
                    tool,
                    {"tolerated": ev["tolerated"], "recorded_key": ev.get("recorded_key"), "no_longer_excused": gone},
                    warning=not gone,
                )
            )
        elif kind == "note":
            run_notes.append((str(ev.get("kind")), ev.get("value")))
        elif kind == "phase":
            current_phase = str(ev.get("name"))
        elif kind == "stale":
            out.append(
                Finding(
                    "stale",
                    f"{tool}  step {seq}  expired at {ev.get('expires_at')} (stale policy {ev.get('policy')})",
                    seq,
                    tool,
                    warning=ev.get("policy") == "warn",
                )
            )
        elif kind == "end":
            end = ev
            err = ev.get("error")
            if err is not None and err.get("type") not in _REPLAY_ERRORS:  # an error object is an error, even {}
                out.append(
                    Finding(
                        "error",
                        f"run ended with {err.get('type') or 'an error'}: {_first_line(err.get('message'))}",
                        data={"error": err.get("type")},
                    )
                )
    if end is None:
        out.append(
            Finding(
                "error",
                f"run log has no end: the replay was killed or is still running ({len(events)} events)",
                data={"events": len(events)},
            )
        )
    err = end.get("error") if end is not None else None
    if err is not None and err.get("type") in _REPLAY_ERRORS:
        etype = err["type"]
        if etype == "TapeDrift" and hidden_at is not None and hidden_at == len(out) - 1:
            old = out[hidden_at]  # the run stopped at that drift: say so in its words
            out[hidden_at] = Finding(
                "drift",
                f"{old.tool}  step {old.seq}  run ended with TapeDrift at step {old.seq}; "
                f"the changed paths are ignored in diffs but still part of the call key "
                f"({', '.join(old.data['ignored_paths']) or 'no path shown'})",
                old.seq,
                old.tool,
                {**old.data, "error": etype},
            )
        elif not any(not f.warning for f in out):  # nothing above says why the run stopped
            at = f" at step {last_seq}" if last_seq is not None else ""
            out.append(
                Finding(
                    "error",
                    f"run ended with {etype}{at}: {_first_line(err.get('message'))}",
                    last_seq,
                    last_tool,
                    {"error": etype},
                )
            )
    stopped_by: dict[str, Any] | None = end.get("error") if end is not None else None
    stopped = stopped_by is not None
    recorded = list(golden.tools)
    mode = settings.sequence
    golden_phases = [(p.name, p.after) for p in golden.phases]
    dist = sequence_distance(
        mode,
        recorded,
        executed,
        phase_of(list(golden.seqs), golden_phases) if golden_phases else None,
        executed_phases if current_phase is not None else None,
    )
    # golden steps the run left out are part of the sequence: within its mode and threshold, a warning
    judged = end is not None and not stopped  # the sequence of a run that stopped (or has no end) is not judged
    tools_v = verdict("tools", settings, dist)
    loose = judged and tools_v.passed
    if stopped_by is not None and unused:
        # The run stopped at a drift or miss: the steps after it were not reached, not skipped.
        steps = ", ".join(str(e.get("seq")) for e in unused)
        out.append(
            Finding(
                "unused",
                f"run stopped at step {len(executed)} ({stopped_by.get('type')}); step(s) {steps} not reached",
                data={"steps": [e.get("seq") for e in unused]},
            )
        )
    else:
        out += [
            Finding(
                "unused",
                f"{e.get('tool')}  step {e.get('seq')}  unused: recorded but never called"
                + (f" (within the {mode} sequence threshold)" if loose else ""),
                e.get("seq"),
                e.get("tool"),
                warning=loose,
            )
            for e in unused
        ]
    if recorded != executed and judged and (dist or mode != "strict"):
        how = "edit distance" if mode == "strict" else f"{mode} order: {dist} edit{'' if dist == 1 else 's'}"
        out.insert(
            0,
            Finding(
                "tools",
                f"[TOOLS] executed sequence changed ({how if mode != 'strict' else f'{how} {dist}'}"
                + (f", within max {tools_v.threshold}" if tools_v.passed else "")
                + f"): {recorded} → {executed}",
                data={"edit_distance": dist, "mode": mode, "threshold": tools_v.threshold},
                warning=tools_v.passed,
            ),
        )
    out += [
        Finding(
            "capability", f"[NEW TOOL] {t}: called in this run, never recorded in the golden (a new capability)", tool=t
        )
        for t in new_capabilities(recorded, executed)
    ]
    golden_notes = [(n.kind, n.value) for n in golden.notes]
    note_findings, notes_v = _note_findings(golden_notes, run_notes, settings, config, hooks)
    out += note_findings
    # a miss is a call the golden lacks: the sequence's; a drift's path [diff] ignore excuses is a warning
    drifted = sum(1 for f in out if f.kind == "drift" and not f.warning)
    excused_args = sum(1 for f in out if f.kind == "tolerated" or (f.kind == "drift" and f.warning))
    # a run log judges what a run can change: the tools it ran, the arguments it passed, its notes (a replay's
    # results come from the tape, and its events do not name the tool the model asked for)
    verdicts = (
        *((tools_v,) if judged else ()),
        verdict("arguments", settings, drifted, excused_args),
        notes_v,
    )
    return out, verdicts


def _ignored_by(ignore: IgnoreRules, path: str) -> str | None:
    """The ``[diff] ignore`` pattern that excuses an argument path as a run log prints it (``x["a.b"][0]``),
    read by the one path parser; None when none does, or the path cannot be read (then it is shown)."""
    try:
        return ignore.matching(path_segments(path))
    except ValueError:  # a hand-edited run log: shown as it is
        return None


def _no_longer_excused(
    ev: dict[str, Any], golden: TapeIndex, settings: CompareSettings, config: Config | None
) -> list[str] | None:
    """The argument paths of a tolerated hit that the rules as they are now do not excuse, judged by value as a
    replay judges them: the golden's recording (its step, which must still hold the recorded key) against the
    arguments the run logged, under ``[compare.rules]`` and ``[diff] ignore`` as written, no hook run. ``[]``:
    still excused. None: not known — a run log an older tapetui wrote holds no arguments, or the recording is
    gone — so a caller excuses nothing (a rule is judged by the values it excuses, never by its text)."""
    live, step, key, tool = ev.get("args"), ev.get("step"), ev.get("recorded_key"), ev.get("tool")
    if live is None or not isinstance(key, str) or not isinstance(tool, str):
        return None
    i = golden.at_seq(step) if type(step) is int else None
    if i is None or golden.keys[i] != key:
        i = golden.key_first.get(key)
    if i is None:
        return None
    if config is None:  # no tapes.toml: no rule excuses anything
        return [str(t.get("path")) for t in ev["tolerated"] if isinstance(t, dict)]
    try:
        recorded = canon(config.redactor().redact(golden.record(i).args))
        judged = settings.rules.judge("args", recorded, live, tool=tool, hooks=None, ignore=config.replay_ignore())
    except TapeError:  # the golden changed under the check, or nested too deeply: not known
        return None
    # a change a hook could not judge (a replay runs none) is among the changes: unexcused
    return _arg_paths(list(judged.changes))


def _note_findings(
    golden: list[tuple[str, Any]],
    run: list[tuple[str, Any]],
    settings: CompareSettings,
    config: Config | None,
    hooks: HooksArg,
) -> tuple[list[Finding], Verdict]:
    """The run's notes against the golden's, by kind and position among the notes of that kind."""
    if not golden and not run:
        return [], verdict("notes", settings, 0)
    if hooks == "auto":
        hooks = Hooks.lazy(settings, config.root if config else None) if settings.rules.needs_hooks() else None
    rules = settings.rules
    ignore = config.ignore_rules() if config else IgnoreRules()
    old: dict[str, list[Any]] = {}
    new: dict[str, list[Any]] = {}
    for k, v in golden:
        old.setdefault(k, []).append(v)
    for k, v in run:
        new.setdefault(k, []).append(v)
    out: list[Finding] = []
    failing = excused = errors = 0
    for kind in [*old, *(k for k in new if k not in old)]:
        a, b = old.get(kind, []), new.get(kind, [])
        for i in range(max(len(a), len(b))):
            label = f"note.{kind}" + (f" #{i + 1}" if i else "")
            if i >= len(b):
                out.append(Finding("note", f"{label}  (removed) the run wrote no such note"))
                failing += 1
                continue
            if i >= len(a):
                out.append(Finding("note", format_changes([Change("", MISSING, b[i])], prefix=label)[0]))
                failing += 1
                continue
            j = rules.judge(f"note.{kind}", a[i], b[i], hooks=hooks, ignore=ignore)
            why = {id(c): t for c, t in j.remarks}
            for c, line in zip(j.changes, format_changes(j.changes, prefix=f"note.{kind}"), strict=True):
                out.append(Finding("note", line + (f"  ({why[id(c)]})" if id(c) in why else "")))
            out += [Finding("note", f"{label}  [ERROR] {e}") for e in j.errors]
            out += [
                Finding("note", f"{line}  — {e.text}", warning=True)
                for e in j.excused
                for line in format_changes([e.change], prefix=f"note.{kind}")
            ]
            failing += len(j.changes)
            excused += len(j.excused)
            errors += len(j.errors)
    v = verdict("notes", settings, failing, excused, errors)
    if v.passed:  # within max_note_changes: shown, as a warning
        out = [replace(f, warning=True) for f in out]
    return out, v


def _arg_paths(changes: list[Change]) -> list[str]:
    return [("args" + ("" if c.path.startswith("[") else ".") + c.path) if c.path else "args" for c in changes]


def _first_line(text: Any) -> str:
    s = str(text) if text is not None else ""
    return s.split("\n", 1)[0]


# ---- check --------------------------------------------------------------------------
@dataclass
class SessionReport:
    """Everything ``check`` found for one session."""

    session: str
    golden: Path
    findings: list[Finding] = field(default_factory=list)
    comparison: Comparison | None = None
    error: str | None = None
    samples: dict[str, Any] | None = None  # the JSON of its repeated samples' report, when check counted them
    run_verdicts: tuple[Verdict, ...] = ()  # the latest run log's verdict per dimension (none: no current run log)

    def dimension_line(self) -> str | None:
        """``run: tools pass · arguments FAIL (1) · …``: the run log's verdicts on one line, or None."""
        if not self.run_verdicts:
            return None
        shown = [
            f"{v.dimension} {'pass' if v.passed else 'FAIL'}" + (f" ({v.value}/{v.threshold})" if v.value else "")
            for v in self.run_verdicts
        ]
        if not any(v.dimension == "tools" for v in self.run_verdicts):
            shown.insert(0, "tools not judged (the run stopped)")
        return "run dimensions: " + " · ".join(shown)

    @property
    def ok(self) -> bool:
        return self.error is None and not any(not f.warning for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "golden": str(self.golden),
            "ok": self.ok,
            "error": self.error,
            "findings": [f.to_json() for f in self.findings],
            "candidate": self.comparison.to_json() if self.comparison else None,
            "samples": self.samples,
            "run": {"dimensions": {v.dimension: v.to_json() for v in self.run_verdicts}} if self.run_verdicts else None,
        }


def check_session(golden: Path, config: Config) -> SessionReport:
    """Check one session, reading it consistently (see :func:`_check_session_once` for what is checked).

    The read holds the session's lock shared (:func:`tapetui.core.locks.reading`), so no review action
    changes the files under it; a recording may still move a pending candidate into the samples
    folder, so a read that failed is done again while the files change under it (a real error,
    such as a malformed line, fails the same way on unchanged files and is reported).
    """
    with reading(golden):
        rep = _check_session_once(golden, config)
    for _ in range(2):  # a failed read is done again only while the session's files keep changing under it
        if rep.error is None:
            break
        before = _stamp(golden)
        with reading(golden):
            rep = _check_session_once(golden, config)
        if rep.error is not None and _stamp(golden) == before:
            break  # the same files, the same error: a real one
    return rep


def _stamp(golden: Path) -> tuple[tuple[int, int, int] | None, ...]:
    out: list[tuple[int, int, int] | None] = []
    for p in (golden, candidate_path(golden), runlog_path(golden)):
        try:
            st = os.stat(p)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def _check_session_once(golden: Path, config: Config) -> SessionReport:
    """Check one session: its golden (every line parsed, every stored key checked against its arguments),
    its latest run log and its pending candidate. A file that cannot be read as what it is named
    (malformed, a FIFO or a folder, gone since it was listed, a name too long) sets ``error``."""
    rep = SessionReport(session_name(golden, config.tapes_dir), golden)
    try:
        cand, log = candidate_path(golden), runlog_path(golden)
        refuse_links_out(config.tapes_dir, golden, cand, log)
        if os.path.lexists(journal_path(golden)):  # check ran recover first: what is left, it could not finish
            rep.findings.append(
                Finding(
                    "journal",
                    f"{journal_path(golden).name}: an interrupted change could not be finished; review actions on "
                    "this session are refused until it is resolved (`tapetui recover` says why)",
                )
            )
        if is_parked(config, golden):  # recover could not put it back (or a check --samples runs now)
            rep.findings.append(
                Finding(
                    "journal",
                    f"its pending candidate is parked in {parked_dir(config, golden)} by a check --samples that is "
                    "still running (or could not be put back: `tapetui recover` says why)",
                )
            )
        idx = read_index(golden, validate=True, keep_bytes=True) if golden.exists() else None
        if idx is not None:
            rep.findings += _key_findings(idx)
        if idx is not None and idx.torn is not None:
            rep.findings.append(
                Finding(
                    "torn", f"torn last line {idx.torn.line} ({idx.torn.size:,} bytes); the next append sets it aside"
                )
            )
        if idx is not None:
            reader = RunLogReader(log)
            events = reader.poll()[1]
            if reader.inode is not None:  # there is a run log (an empty one too: a run that never got going)
                whole = idx.data if idx.data is not None and len(idx.data) == idx.size else None
                stale = run_log_stale(golden, events, whole)  # a small golden is hashed as read, not read again
                if stale:
                    rep.findings.append(Finding("stale_run", stale))
                else:
                    found, rep.run_verdicts = judge_run(idx, events, config, log=log, checked=True)
                    rep.findings += found
        if cand.exists():
            if idx is None:
                rep.findings.append(Finding("pending", f"pending new session {cand.name} (no golden yet)"))
            else:
                c = load(cand)
                rep.findings += _key_findings(c.index)
                cmp = compare(LoadedTape(golden, idx, tuple(idx.records())), c, config)
                rep.comparison = cmp
                seen = {f.tool for f in rep.findings if f.kind == "capability"}  # the run log said it already
                rep.findings += [
                    f for f in candidate_findings(cmp, cand.name) if f.kind != "capability" or f.tool not in seen
                ]
    except TapeError as e:
        rep.error = str(e)
    except OSError as e:  # a name too long for the file system, a folder that cannot be listed...
        rep.error = f"{e.filename or golden}: {e.strerror or e}"
    return rep


def candidate_findings(cmp: Comparison, name: str) -> list[Finding]:
    """What a pending candidate's comparison with its golden says, as findings.

    Where tapes.toml's ``[compare]`` says something for the session, a candidate that passes every
    dimension under it is a warning (shown, review it when you like; it does not fail ``check``); without
    it a pending candidate fails ``check``, as it always has. One that fails a dimension, changes a
    contract or uses a new tool fails it. Each new tool is a finding of its own (``capability``).
    """
    n = len(cmp.changed_steps)
    data = {"clean": cmp.clean, "passed": cmp.passed}
    if cmp.passed and cmp.settings.configured:
        excused = sum(v.excused for v in cmp.verdicts)
        what = "identical to the golden" if cmp.clean else f"{n} step(s) differ"
        within = "; every dimension within its threshold" + (
            f" ({excused} difference(s) excused by rules)" if excused else ""
        )
        text = f"pending candidate {name}: {what}" + ("" if cmp.clean else within)
        return [Finding("pending", text, data=data, warning=True)] + [
            Finding("candidate", line, warning=True) for line in cmp.lines()
        ]
    if cmp.passed:  # no [compare] for the session: a pending candidate waits for review, and fails check
        what = "identical to the golden" if cmp.clean else f"{n} step(s) differ"
        text = (
            f"pending candidate {name}: {what}; it waits for review (accept or reject it: without [compare] for "
            "this session a pending candidate fails check)"
        )
        return [Finding("pending", text, data=data)] + [Finding("candidate", line) for line in cmp.lines()]
    failing = ", ".join(v.dimension for v in cmp.failing)
    out = [
        Finding(
            "pending",
            f"pending candidate {name}: {n} step(s) differ" + (f"; over threshold: {failing}" if failing else ""),
            data=data,
        )
    ]
    out += [
        Finding("capability", line, tool=line.split()[2].rstrip(":"))
        for line in cmp.lines()
        if line.startswith("[NEW TOOL]")
    ]
    out += [Finding("candidate", line) for line in cmp.lines() if not line.startswith("[NEW TOOL]")]
    return out


def golden_sha256(golden: Path, data: bytes | None = None) -> str | None:
    """The sha256 of a golden's bytes (what a run log's ``start`` names), None when there is none.

    ``data``: the golden's bytes when the caller has read them already (not read again)."""
    return hashlib.sha256(data).hexdigest() if data is not None else file_sha256(golden)


def run_log_stale(golden: Path, events: list[dict[str, Any]], data: bytes | None = None) -> str | None:
    """Why a run log does not describe the golden as it is now, or None.

    A run's ``start`` event names the sha256 of the golden it ran against; after an accept (or any
    change of the golden) that run's drift is history, not current drift. A run log from before the
    hash was recorded is "unknown", not stale (None): file times cannot tell, a fresh clone resets them.
    """
    start = next((e for e in events if e.get("event") == "start"), None)
    recorded = start.get("golden_sha256") if start is not None else None
    if not isinstance(recorded, str):
        return None
    if recorded == golden_sha256(golden, data):
        return None
    return (
        "last run predates the golden (it ran against another version of it: an accept or an undo since); run the "
        "replay again (p in the app) to check the golden as it is now"
    )


def _key_findings(idx: TapeIndex) -> list[Finding]:
    """A call whose stored key is not the key of its stored arguments was edited by hand: replay would
    look it up by the key of the arguments it is called with, so the golden is not what it says."""
    return [
        Finding(
            "key",
            f"{idx.path}:{line}: {tool} step {seq}: stored key {key} is not the key of the "
            f"arguments on the line ({computed or 'none: they cannot be encoded'}); edited after it was "
            "recorded? re-record the step, or put the arguments back",
            seq,
            tool,
            {"line": line, "stored_key": key, "computed_key": computed},
        )
        for line, seq, tool, key, computed in idx.key_mismatches
    ]


def no_tapes_message(tapes_dir: Path, config: Config) -> str:
    return f"no tapes found in {tapes_dir} (tapes.toml: {config.path or 'none found'})"


def check(
    tapes_dir: Path,
    config: Config,
    sessions: Iterable[Path] | None = None,
    *,
    progress: Progress | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[SessionReport]:
    """Check every session of a folder (or the given goldens), after :func:`recover`.

    Args:
        progress: called with ``(0, total)`` before the first session and ``(done, total)`` after
            each one, so a front can draw a progress bar.
        on_note: called with each line :func:`recover` reports (a repair, a problem left in place).

    Raises:
        TapeError: the folder does not exist or holds no tapes (a misconfigured CI job must not go green).
    """
    for note in recover(config):
        if on_note is not None:
            on_note(note)
    goldens = list(sessions) if sessions is not None else list(iter_goldens(tapes_dir))
    if sessions is None and not goldens:
        raise TapeError(no_tapes_message(tapes_dir, config))
    total = len(goldens)
    if progress is not None:
        progress(0, total)
    reports = []
    for done, g in enumerate(goldens, 1):
        reports.append(check_session(g, config))
        if progress is not None:
            progress(done, total)
    return reports


def pending(config: Config) -> list[tuple[Path, Path]]:
    """``(golden, candidate)`` of every candidate waiting for review."""
    return [(g, candidate_path(g)) for g in iter_goldens(config.tapes_dir) if candidate_path(g).exists()]
