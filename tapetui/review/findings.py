"""Checking sessions: what a run log says went wrong, a golden's stored keys, pending candidates.

``check`` is what ``tapetui check`` and CI run; the app shows the same findings.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import signal
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tapetui.core.canon import canon
from tapetui.core.changes import MISSING, Change, format_changes, secret_path, show_redacted_by, shown_redactor
from tapetui.core.comparators import CompareSettings, Hooks, Judged
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import file_sha256, file_stamp
from tapetui.core.freshstack import frames_left, lift_recursion_limit, lifted
from tapetui.core.hookcalls import next_session
from tapetui.core.index import TapeIndex
from tapetui.core.jsondiff import IgnoreRules, path_segments
from tapetui.core.listing import Listing, SessionFiles
from tapetui.core.locks import reading
from tapetui.core.paths import prefixed
from tapetui.core.redact import REDACTED
from tapetui.core.runlog import RunLogReader
from tapetui.core.runstart import runs_of
from tapetui.core.store import (
    candidate_path,
    iter_goldens,
    journal_path,
    refuse_links_out,
    runlog_path,
    session_name,
)
from tapetui.core.tapefile import read_index
from tapetui.core.turns import TURN
from tapetui.review.checkcache import CheckCache, Lookup
from tapetui.review.comparison import (
    Comparison,
    HooksArg,
    LoadedTape,
    capability_line,
    compare,
    load,
    pair_notes,
)
from tapetui.review.facts import (
    REPLAY_ERRORS,
    ContractChange,
    Drift,
    EndError,
    Miss,
    RunFacts,
    Stale,
    ToleratedHit,
    collect_run,
)
from tapetui.review.finding import Finding, FindingKind
from tapetui.review.journal import recover
from tapetui.review.parking import PARKED_DIR, is_parked, parked_dir, parked_sessions
from tapetui.review.plainrun import plain_verdicts, read_plain_run
from tapetui.review.turnfindings import run_turn_findings
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

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called by :func:`check` as sessions are checked."""


# ---- run logs -----------------------------------------------------------------------
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

    The run's facts are read in one pass (:func:`~tapetui.review.facts.collect_run`); the rules below
    turn them into findings, in this order: the tool sequence, what each event reports (in run order),
    why the run stopped, unused steps, new capabilities, notes.

    A run log holding the runs of a group (a test session whose tests share the tape: tapetui.core.runstart) has
    each run judged on its own: a finding says which run (``run 2 of 8: ...``, once for the runs it is true of), and
    each dimension's verdict is the first failing run's.

    Raises:
        TapeError: a malformed event, naming the run log and its line.
        ConfigError: a hook tapes.toml names cannot be imported.
    """
    runs = runs_of(events)
    if len(runs) <= 1:
        return _judge_one(golden, events, config, log=log, checked=checked, hooks=hooks)
    judged = [_judge_one(golden, run, config, log=log, checked=checked, hooks=hooks) for run in runs]
    found: dict[tuple[Any, ...], tuple[Finding, list[int]]] = {}
    for k, (run_found, _) in enumerate(judged, 1):
        for f in run_found:
            ks = found.setdefault((f.kind, f.text, f.seq, f.tool, f.warning, f.level), (f, []))[1]
            if not ks or ks[-1] != k:  # a run that says it twice is one run that says it
                ks.append(k)
    out = [replace(f, text=f"{_which_runs(ks, len(runs))}: {f.text}") for f, ks in found.values()]
    per_dimension: dict[str, Verdict] = {}
    for _, run_verdicts in judged:
        for v in run_verdicts:
            if v.dimension not in per_dimension or (per_dimension[v.dimension].passed and not v.passed):
                per_dimension[v.dimension] = v
    return out, tuple(per_dimension.values())


def _which_runs(ks: list[int], n: int) -> str:
    if len(ks) == n:
        return f"every run of {n}"
    if len(ks) == 1:
        return f"run {ks[0]} of {n}"
    return f"runs {', '.join(map(str, ks))} of {n}"


def _judge_one(
    golden: TapeIndex,
    events: list[dict[str, Any]],
    config: Config | None,
    *,
    log: Path | None,
    checked: bool,
    hooks: HooksArg,
) -> tuple[list[Finding], tuple[Verdict, ...]]:
    """:func:`judge_run` of one run's events."""
    settings = config.compare_for(session_name(golden.path, config.tapes_dir)) if config else CompareSettings()
    facts = collect_run(events, checked=checked, where=str(log) if log is not None else "run log")
    facts, tools_only = _tools_only(facts, events)
    out, hidden = event_findings(facts, golden, settings, config)
    out += tools_only
    out += no_end_findings(facts)
    out = stop_findings(facts, out, hidden)
    tools_v = tools_verdict(facts, golden, settings)
    out += unused_findings(facts, settings.sequence, loose=facts.judged and tools_v.passed)
    out[:0] = tools_findings(facts, golden, tools_v)
    out += capability_findings(golden, facts)
    out += hit_findings(golden, events)
    out += trace_contract_findings(golden, events)
    notes, notes_v = (
        note_findings([(n.kind, n.value) for n in golden.notes], facts.notes, settings, config, hooks)
        if golden.notes or facts.notes
        else ([], verdict("notes", settings, 0))  # neither side wrote a note: nothing to pair
    )
    out += notes
    # a run log with neither a model turn nor a behaviour event has nothing for the judge of turns
    turn_found, turn_verdicts = (
        run_turn_findings(golden, events, settings, config)
        if facts.model_turns or "behaviour" in facts.kinds
        else ([], [])
    )
    out += turn_found
    return out, (*run_verdicts(facts, settings, out, tools_v, notes_v), *turn_verdicts)


# ---- the rules: a run's facts → findings and verdicts --------------------------------
def hit_findings(golden: TapeIndex, events: list[dict[str, Any]]) -> list[Finding]:
    """Each hit of one run holds the run to the golden: a plain hit says it was served the call at ``step`` under its
    ``key`` (a tolerated one, under its ``recorded_key``), and each step is served once in a run. A step the golden
    does not hold, holds under another key, or that two hits claim, and a hit that names no step in a run log that
    knows its golden (``golden_sha256``: every hit a replay writes names its step), is another golden's run or an
    edited run log: never a pass. An override (``override: true``) and, in a fill, a hit served from an earlier
    fill's recording (``source: "candidate"``) are served by what they name; a model turn's hits are judged with the
    turns."""
    start = next((e for e in events if e.get("event") == "start"), {})
    fill, current = start.get("mode") == "fill", start.get("golden_sha256") is not None
    claimed: set[int] = set()
    out = []
    for ev in events:
        if ev.get("event") != "hit" or ev.get("tool") == TURN:
            continue
        if ev.get("override") is True or (fill and ev.get("source") == "candidate"):
            continue
        step, tool = ev.get("step"), ev.get("tool")
        key = ev.get("recorded_key") if ev.get("tolerated") else ev.get("key")
        name = tool if isinstance(tool, str) else None
        if type(step) is not int or not isinstance(key, str):
            if current:  # an older run log's hits name no step: nothing to hold them to
                text = f"{tool}  a hit that names no step and key of the golden: its run log was edited"
                out.append(Finding("stale_run", text, None, name))
            continue
        i = golden.at_seq(step)
        if i is None or golden.keys[i] != key:
            holds = "no call" if i is None else f"{golden.tools[i]} {golden.keys[i]}"
            text = (
                f"{tool}  step {step}  the run log's hit ({key}) is not the golden's call there ({holds}): the run "
                "replayed another golden, or its run log was edited"
            )
            out.append(Finding("stale_run", text, step, name))
        elif step in claimed:
            text = f"{tool}  step {step}  served twice in one run: a replay serves each step once (edited run log)"
            out.append(Finding("stale_run", text, step, name))
        claimed.add(step)
    return out


def trace_contract_findings(golden: TapeIndex, events: list[dict[str, Any]]) -> list[Finding]:
    """Once per tool whose contract the golden holds from a trace (``from_trace``) and this run called or was
    offered: what was compared and what the trace did not hold (a warning: never drift)."""
    if not golden.traced:
        return []
    used = {e.get("tool") for e in events} | {n for e in events for n in (e.get("offered") or ())}
    out = []
    for tool, held in sorted(golden.traced.items()):
        if tool not in used and not any(e.get("tool") == TURN for e in events):
            continue
        missing = [f for f in ("params", "output_schema", "annotations", "title", "version") if f not in held]
        text = (
            f"{tool}: its contract is from a trace: {', '.join(held)} compared; {', '.join(missing)} not in the "
            "trace (record the session again, or accept a candidate with the whole contract)"
        )
        out.append(Finding("fingerprint", text, tool=tool, warning=True))
    return out


def _tools_only(facts: RunFacts, events: list[dict[str, Any]]) -> tuple[RunFacts, list[Finding]]:
    """A run that requested no model turn at all replayed the tool calls only (a tools-only adapter, an older
    test): its golden's turns are one warning, not each a skipped step."""
    turns = [u for u in facts.unused if u.get("tool") == TURN]
    if not turns or any(e.get("tool") == TURN and e.get("event") != "unused" for e in events):
        return facts, []
    kept = tuple(u for u in facts.unused if u.get("tool") != TURN)
    text = (
        f"model turns: this run requested none of the {len(turns)} recorded (it replayed the tool calls only; "
        "put the model through the tape too, e.g. TapeCapability(models=True))"
    )
    return replace(facts, unused=kept), [Finding("unused", text, warning=True)]


def event_findings(
    facts: RunFacts, golden: TapeIndex, settings: CompareSettings, config: Config | None
) -> tuple[list[Finding], Finding | None]:
    """What each reported fact of the run says, in run order, and the last finding when it is a drift only
    in ignored paths (the run may have stopped there: :func:`stop_findings` says so in its words)."""
    arg_ignore = config.replay_ignore() if config else IgnoreRules(volatile=False)
    out: list[Finding] = []
    hidden: Finding | None = None  # the finding of the last drift whose paths are all ignored
    for fact in facts.reported:
        if isinstance(fact, Drift):
            found = drift_findings(fact, arg_ignore)
            hidden = found[0] if "ignored_paths" in found[0].data else None
            out += found
        elif isinstance(fact, Miss):
            out.append(miss_finding(fact))
        elif isinstance(fact, ContractChange):
            out += contract_findings(fact)
        elif isinstance(fact, ToleratedHit):
            out.append(tolerated_finding(fact, golden, settings, config))
        elif isinstance(fact, Stale):
            out.append(stale_finding(fact))
        elif not fact.by_replay:  # the replay's own errors: the findings above say why (see stop_findings)
            out.append(end_error_finding(fact))
    return out, (hidden if out and out[-1] is hidden else None)


def drift_findings(d: Drift, arg_ignore: IgnoreRules) -> list[Finding]:
    """A drift's changed argument paths; what the user's ``[diff] ignore`` excuses is listed too, never
    dropped: a warning (the drift fails on the others). A drift only in ignored paths is one finding: the
    call key still differed (ignore rules only hide paths from diffs), so the replay raised there."""
    tool, seq = d.tool, d.seq
    ignored_by = [_ignored_by(arg_ignore, c.path) for c in d.changes]
    shown = [c for c, pat in zip(d.changes, ignored_by, strict=True) if pat is None]
    data = {"recorded_key": d.recorded_key, "key": d.key}
    if not d.changes:  # the same arguments under another key: the tape's key is not the key of what it stores
        text = (
            f"{tool}  step {seq}  drift, though no argument differs as stored: the recorded key is not the key of the "
            "recorded arguments (the tape was edited, or holds a value in clear that a [redact] rule now hides)"
        )
        return [Finding("drift", text, seq, tool, data)]
    if not shown:
        paths = _arg_paths(d.changes)
        text = (
            f"{tool}  step {seq}  drift only in ignored paths ({', '.join(paths) or 'no path shown'}); they are "
            "still part of the call key, so the replay raised TapeDrift"
        )
        return [Finding("drift", text, seq, tool, {**data, "ignored_paths": paths})]
    out = [Finding("drift", f"{tool}  step {seq}  {line}", seq, tool, data) for line in format_changes(shown, "args")]
    for c, pat in zip(d.changes, ignored_by, strict=True):
        if pat is not None:
            (line,) = format_changes([c], prefix="args")
            text = f"{tool}  step {seq}  {line}  — ignored by [diff] ignore {pat!r}"
            out.append(Finding("drift", text, seq, tool, {**data, "ignored_by": pat}, warning=True))
    return out


def miss_finding(m: Miss) -> Finding:
    """A call not on the tape, and the nearest recorded call (how its arguments differ)."""
    detail = "; ".join(format_changes(m.changes, "args"))
    why = f" ({m.reason})" if m.reason else ""
    text = f"{m.tool}  step {m.seq}  miss{why}: {m.key} not on tape" + (
        (f"; nearest is step {m.nearest}: {detail}" if detail else f"; recorded at step {m.nearest}")
        if m.nearest
        else f"; no recorded {m.tool} call"
    )
    return Finding("miss", text, m.seq, m.tool, {"key": m.key})


def contract_findings(c: ContractChange) -> list[Finding]:
    """A changed contract: the two fingerprints, then why they differ, a line each."""
    head = f"{c.tool}  step {c.seq}  [CONTRACT]"
    return [Finding("fingerprint", f"{head} fingerprint {c.recorded} → {c.live}", c.seq, c.tool)] + [
        Finding("fingerprint", f"{head} {line}", c.seq, c.tool) for line in c.explanation
    ]


def tolerated_finding(h: ToleratedHit, golden: TapeIndex, settings: CompareSettings, config: Config | None) -> Finding:
    """A tolerated hit: a warning naming what excused it, unless tapes.toml no longer excuses it (the run was
    judged under the rules of its day: it is judged again by value, under today's) or that is not known."""
    excused = "; ".join(_excuse_shown(t) for t in h.items)
    gone = _no_longer_excused(h, golden, settings, config)
    unknown = gone is None  # an older run log: the values are not there to judge
    if gone is None:
        gone = [str(t.get("path")) for t in h.items]
    if not gone:
        why = ""
    elif unknown:
        why = (
            f"; the run log does not hold the call's arguments (an older tapetui wrote it), so whether "
            f"tapes.toml still excuses {', '.join(gone)} is not known: run the replay again"
        )
    else:
        why = f"; no rule of tapes.toml excuses {', '.join(gone)} now: run the replay again"
    return Finding(
        "tolerated",
        f"{h.tool}  step {h.seq}  served as a tolerated hit: {excused}{why}",
        h.seq,
        h.tool,
        {"tolerated": [_excuse_data(t) for t in h.items], "recorded_key": h.recorded_key, "no_longer_excused": gone},
        warning=not gone,
    )


def _excuse_shown(t: dict[str, Any]) -> str:
    """``path (the rule's text)`` of a tolerated difference; the text of one under a secret key's path hidden (it
    quotes both values, as the run log wrote them)."""
    path = str(t.get("path"))
    return f"{path} ([REDACTED] values, excused)" if secret_path(path) else f"{path} ({t.get('text')})"


def _excuse_data(t: dict[str, Any]) -> dict[str, Any]:
    """A tolerated difference as ``--json`` gives it: its text hidden under a secret key's path (see above)."""
    return {**t, "text": REDACTED} if secret_path(str(t.get("path"))) else t


def stale_finding(s: Stale) -> Finding:
    """An expired entry was replayed: a warning under the ``warn`` policy."""
    text = f"{s.tool}  step {s.seq}  expired at {s.expires_at} (stale policy {s.policy})"
    return Finding("stale", text, s.seq, s.tool, warning=s.policy == "warn")


def end_error_finding(e: EndError) -> Finding:
    """The run ended in an error of its own (not one the replay raised)."""
    text = f"run ended with {e.type or 'an error'}: {_first_line(e.error.get('message'))}"
    return Finding("error", text, data={"error": e.type})


def no_end_findings(facts: RunFacts) -> list[Finding]:
    """A run log with no ``end``: the replay was killed, or is still running."""
    if facts.end is not None:
        return []
    text = f"run log has no end: the replay was killed or is still running ({facts.events} events)"
    return [Finding("error", text, data={"events": facts.events})]


def stop_findings(facts: RunFacts, found: list[Finding], hidden: Finding | None) -> list[Finding]:
    """``found`` with why the run stopped, when the replay raised: a run that stopped at a drift only in ignored
    paths (``hidden``, the last finding) says so in that drift's words; else, when nothing in ``found`` says
    why, an error at the last call."""
    err = facts.stopped_by
    if err is None or err.get("type") not in REPLAY_ERRORS:
        return found
    etype = err["type"]
    if etype == "TapeDrift" and hidden is not None:
        text = (
            f"{hidden.tool}  step {hidden.seq}  run ended with TapeDrift at step {hidden.seq}; "
            f"the changed paths are ignored in diffs but still part of the call key "
            f"({', '.join(hidden.data['ignored_paths']) or 'no path shown'})"
        )
        return [*found[:-1], Finding("drift", text, hidden.seq, hidden.tool, {**hidden.data, "error": etype})]
    if any(not f.warning for f in found):  # something above says why the run stopped
        return found
    at = f" at step {facts.last_seq}" if facts.last_seq is not None else ""
    text = f"run ended with {etype}{at}: {_first_line(err.get('message'))}"
    return [*found, Finding("error", text, facts.last_seq, facts.last_tool, {"error": etype})]


def tools_verdict(facts: RunFacts, golden: TapeIndex, settings: CompareSettings) -> Verdict:
    """The executed sequence against the golden's, matched in the session's sequence mode (within a phase in
    ``phases`` mode, when both wrote phase lines)."""
    if settings.sequence != "phases" and tuple(golden.tools) == facts.executed:  # the same calls: no edit
        return verdict("tools", settings, 0)
    golden_phases = [(p.name, p.after) for p in golden.phases]
    dist = sequence_distance(
        settings.sequence,
        list(golden.tools),
        list(facts.executed),
        phase_of(list(golden.seqs), golden_phases) if golden_phases else None,
        list(facts.phases) if facts.phased else None,
    )
    return verdict("tools", settings, dist)


def tools_findings(facts: RunFacts, golden: TapeIndex, tools_v: Verdict) -> list[Finding]:
    """A changed executed sequence (a warning within its mode's threshold). Not judged for a run that stopped
    or has no end; in a mode other than ``strict``, a changed order within the mode is shown too."""
    recorded, executed = list(golden.tools), list(facts.executed)
    dist, mode = tools_v.value, tools_v.mode or "strict"
    if recorded == executed or not facts.judged or not (dist or mode != "strict"):
        return []
    how = f"edit distance {dist}" if mode == "strict" else f"{mode} order: {dist} edit{'' if dist == 1 else 's'}"
    text = (
        f"[TOOLS] executed sequence changed ({how}"
        + (f", within max {tools_v.threshold}" if tools_v.passed else "")
        + f"): {recorded} → {executed}"
    )
    data = {"edit_distance": dist, "mode": mode, "threshold": tools_v.threshold}
    return [Finding("tools", text, data=data, warning=tools_v.passed)]


def unused_findings(facts: RunFacts, mode: str, *, loose: bool) -> list[Finding]:
    """Recorded steps the run never called (a warning when the sequence passed in its mode: ``loose``);
    after a run that stopped, one finding: the steps after where it stopped were not reached, not skipped."""
    unused = sorted(facts.unused, key=_by_step)  # a run writes its unused calls, then its unused turns
    if facts.stopped_by is not None and unused:
        at = facts.last_seq if type(facts.last_seq) is int else len(facts.executed)
        # the step it stopped at was reached (a contract change raises before its recording is used)
        after = [e.get("seq") for e in unused if e.get("seq") != at]
        text = f"run stopped at step {at} ({facts.stopped_by.get('type')})"
        if after:
            text += f"; step(s) {', '.join(str(s) for s in after)} not reached"
        return [Finding("unused", text, data={"steps": after})]
    within = f" (within the {mode} sequence threshold)" if loose else ""
    return [
        Finding(
            "unused",
            f"model  step {e.get('seq')}  turn {e.get('turn')} ({e.get('model')})  unused: recorded but never requested"
            if e.get("tool") == TURN
            else f"{e.get('tool')}  step {e.get('seq')}  unused: recorded but never called{within}",
            e.get("seq"),
            e.get("tool"),
            warning=loose and e.get("tool") != TURN,  # the tool sequence's threshold says nothing of turns
        )
        for e in unused
    ]


def _by_step(e: dict[str, Any]) -> tuple[bool, int]:
    seq = e.get("seq")
    return (False, seq) if type(seq) is int else (True, 0)


def capability_findings(golden: TapeIndex, facts: RunFacts) -> list[Finding]:
    """Each tool the run called that the golden never did: a new capability to audit."""
    return [
        Finding(
            "capability", f"[NEW TOOL] {t}: called in this run, never recorded in the golden (a new capability)", tool=t
        )
        for t in new_capabilities(golden.tools, facts.executed)
    ]


def run_verdicts(
    facts: RunFacts, settings: CompareSettings, found: list[Finding], tools_v: Verdict, notes_v: Verdict
) -> tuple[Verdict, ...]:
    """A run log judges what a run can change: the tools it ran (not for a run that stopped), the arguments
    it passed, its notes (a replay's results come from the tape, and its events do not name the tool the
    model asked for). A miss is a call the golden lacks: the sequence's; a drift's path ``[diff] ignore``
    excuses, and a tolerated hit, are excused arguments."""
    drifted = sum(1 for f in found if f.kind == "drift" and not f.warning)
    excused_args = sum(1 for f in found if f.kind == "tolerated" or (f.kind == "drift" and f.warning))
    return (
        *((tools_v,) if facts.judged else ()),
        verdict("arguments", settings, drifted, excused_args),
        notes_v,
    )


def _ignored_by(ignore: IgnoreRules, path: str) -> str | None:
    """The ``[diff] ignore`` pattern that excuses an argument path as a run log prints it (``x["a.b"][0]``),
    read by the one path parser; None when none does, or the path cannot be read (then it is shown)."""
    try:
        return ignore.matching(path_segments(path))
    except ValueError:  # a hand-edited run log: shown as it is
        return None


def _no_longer_excused(
    h: ToleratedHit, golden: TapeIndex, settings: CompareSettings, config: Config | None
) -> list[str] | None:
    """The argument paths of a tolerated hit that the rules as they are now do not excuse, judged by value as a
    replay judges them: the golden's recording (its step, which must still hold the recorded key) against the
    arguments the run logged, under ``[compare.rules]`` and ``[diff] ignore`` as written, no hook run. ``[]``:
    still excused. None: not known — a run log an older tapetui wrote holds no arguments, or the recording is
    gone — so a caller excuses nothing (a rule is judged by the values it excuses, never by its text)."""
    live, step, key, tool = h.args, h.step, h.recorded_key, h.tool
    if live is None or not isinstance(key, str) or not isinstance(tool, str):
        return None
    i = golden.at_seq(step) if type(step) is int else None
    if i is None or golden.keys[i] != key:
        i = golden.key_first.get(key)
    if i is None:
        return None
    if config is None:  # no tapes.toml: no rule excuses anything
        return [str(t.get("path")) for t in h.items]
    try:
        recorded = canon(config.redactor().redact(golden.record(i).args))
        judged = settings.rules.judge("args", recorded, live, tool=tool, hooks=None, ignore=config.replay_ignore())
    except TapeError:  # the golden changed under the check, or nested too deeply: not known
        return None
    # a change a hook could not judge (a replay runs none) is among the changes: unexcused
    return _arg_paths(judged.changes)


def note_findings(
    golden: Iterable[tuple[str, Any]],
    run: Iterable[tuple[str, Any]],
    settings: CompareSettings,
    config: Config | None,
    hooks: HooksArg,
) -> tuple[list[Finding], Verdict]:
    """The run's notes against the golden's, paired by :func:`~tapetui.review.comparison.pair_notes` (by kind
    and position among the notes of that kind); within ``max_note_changes`` each is shown as a warning."""
    pairs = pair_notes(golden, run)
    if not pairs:
        return [], verdict("notes", settings, 0)
    if hooks == "auto":
        hooks = Hooks.lazy(settings, config.root if config else None) if settings.rules.needs_hooks() else None
    ignore = config.ignore_rules() if config else IgnoreRules()
    out: list[Finding] = []
    failing = excused = errors = 0
    for kind, i, a, b in pairs:
        side = f"note.{kind}"
        label = side + (f" #{i + 1}" if i else "")
        if b is MISSING:
            out.append(Finding("note", f"{label}  (removed) the run wrote no such note"))
            failing += 1
        elif a is MISSING:
            out.append(Finding("note", format_changes([Change("", MISSING, b)], prefix=label)[0]))
            failing += 1
        else:
            j = settings.rules.judge(side, a, b, hooks=hooks, ignore=ignore)
            out += _judged_note_findings(side, label, j)
            failing += len(j.changes)
            excused += len(j.excused)
            errors += len(j.errors)
    v = verdict("notes", settings, failing, excused, errors)
    if v.passed:  # within max_note_changes: shown, as a warning
        out = [replace(f, warning=True) for f in out]
    return out, v


def _judged_note_findings(side: str, label: str, j: Judged) -> list[Finding]:
    """A note present in both runs, judged: its changes (with a rule's remark), errors, then what rules excused."""
    why = {id(c): t for c, t in j.remarks}
    out = [
        Finding("note", line + (f"  ({why[id(c)]})" if id(c) in why else ""))
        for c, line in zip(j.changes, format_changes(j.changes, prefix=side), strict=True)
    ]
    out += [Finding("note", f"{label}  [ERROR] {e}") for e in j.errors]
    out += [
        Finding("note", f"{line}  — {e.text}", warning=True)
        for e in j.excused
        for line in format_changes([e.change], prefix=side)
    ]
    return out


def _arg_paths(changes: Iterable[Change]) -> list[str]:
    """Each change's path under ``args``, joined as ``check`` prints paths."""
    return [prefixed("args", c.path) for c in changes]


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


def check_session(
    golden: Path, config: Config, files: SessionFiles | None = None, *, parked: bool = True
) -> SessionReport:
    """Check one session, reading it consistently (see :func:`_check_session_once` for what is checked).

    The read holds the session's lock shared (:func:`tapetui.core.locks.reading`), so no review action
    changes the files under it; a recording may still move a pending candidate into the samples
    folder, so a read that failed is done again while the files change under it (a real error,
    such as a malformed line, fails the same way on unchanged files and is reported).

    ``files``: what a listing of the folder, just taken, saw of the session (:mod:`tapetui.core.listing`):
    the file system is not asked again. A read that fails is done again without it. ``parked=False``: the
    folder has no parked candidates at all (the caller looked), so this session's are not looked for.
    """
    next_session()  # a regex rule spent on the session before runs again: this verdict depends on this session only
    with reading(golden, lock_file=files is None or files.lock):
        rep = _check_session_once(golden, config, files, parked)
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
    """The session's three files' stamps: a check of it is stale when one of them changes."""
    return tuple(file_stamp(p) for p in (golden, candidate_path(golden), runlog_path(golden)))


def _session_paths(golden: Path, config: Config, files: SessionFiles | None) -> tuple[Path | None, Path | None]:
    """The session's candidate and run log to read (None: not there), once none of its files leads out of the
    tapes folder (else TapeError). ``files``: what a listing saw: only the files it saw are looked at, and only a
    symlink can lead out."""
    cand: Path | None
    log: Path | None
    if files is None:
        cand, log = candidate_path(golden), runlog_path(golden)
        refuse_links_out(config.tapes_dir, golden, cand, log)
    else:
        cand = candidate_path(golden) if files.candidate else None
        log = runlog_path(golden) if files.run_log else None
        if files.links:
            linked = (p for p in (golden, cand, log) if p is not None and p.name in files.links)
            refuse_links_out(config.tapes_dir, *linked)
    if not golden.name.endswith(".jsonl"):  # a folder the listing could not read, listed by its name
        try:
            os.scandir(golden).close()
            why = "it could not be listed when check looked"
        except OSError as e:
            why = e.strerror or type(e).__name__
        raise TapeError(f"{golden}: a folder check cannot list ({why}): its sessions are not checked")
    return cand, log


def _check_session_once(
    golden: Path, config: Config, files: SessionFiles | None = None, parked: bool = True
) -> SessionReport:
    """Check one session: its golden (every line parsed, every stored key checked against its arguments),
    its latest run log and its pending candidate. A file that cannot be read as what it is named
    (malformed, a FIFO or a folder, gone since it was listed, a name too long) sets ``error``.
    ``files``: what a listing saw of the session (see :func:`check_session`), else the file system is asked."""
    rep = SessionReport(session_name(golden, config.tapes_dir), golden)
    try:
        cand, log = _session_paths(golden, config, files)
        if files.journal if files is not None else os.path.lexists(journal_path(golden)):
            # check ran recover first: what is left, it could not finish
            rep.findings.append(
                Finding(
                    "journal",
                    f"{journal_path(golden).name}: an interrupted change could not be finished; review actions on "
                    "this session are refused until it is resolved (`tapetui recover` says why)",
                )
            )
        if parked and is_parked(config, golden):
            # recover could not put it back (or a check --samples runs now)
            rep.findings.append(
                Finding(
                    "journal",
                    f"its pending candidate is parked in {parked_dir(config, golden)} by a check --samples that is "
                    "still running (or could not be put back: `tapetui recover` says why)",
                )
            )
        nowhere = _dangling(files, golden, cand, log)
        if nowhere is not None:  # never what tapetui writes: a golden, candidate or run log gone from under it
            raise TapeError(f"{nowhere}: a symlink that leads nowhere, where the session's file should be")
        there = golden.exists() if files is None or golden.name in files.links else files.golden
        idx = read_index(golden, validate=True, keep_bytes=True) if there else None
        if idx is not None:
            rep.findings += _key_findings(idx)
        if idx is not None and idx.torn is not None:
            rep.findings.append(
                Finding(
                    "torn", f"torn last line {idx.torn.line} ({idx.torn.size:,} bytes); the next append sets it aside"
                )
            )
        if idx is not None and log is not None:
            _judge_log(rep, idx, log, config)
        pending_new = False
        if cand is not None and (cand.exists() if files is None or cand.name in files.links else files.candidate):
            if idx is None:
                rep.findings.append(Finding("pending", f"pending new session {cand.name} (no golden yet)"))
                pending_new = True
            else:
                c = load(cand)
                rep.findings += _key_findings(c.index)
                cmp = compare(LoadedTape(golden, idx, tuple(idx.records())), c, config)
                rep.comparison = cmp
                seen = {f.tool for f in rep.findings if f.kind == "capability"}  # the run log said it already
                rep.findings += [
                    f for f in candidate_findings(cmp, cand.name) if f.kind != "capability" or f.tool not in seen
                ]
        if idx is None and not pending_new and log is not None and (files is not None or log.exists()):
            rep.findings.append(
                Finding(
                    "stale_run",
                    f"{log.name}: a run log with no golden to judge it by (the golden is gone: record the session "
                    "again, or remove its run log)",
                )
            )
    except TapeError as e:
        rep.error = shown_redactor().redact_text(str(e))  # it may quote a line of the tape: redacted as shown
    except OSError as e:  # a name too long for the file system, a folder that cannot be listed...
        rep.error = f"{e.filename or golden}: {e.strerror or e}"
    return rep


def _dangling(files: SessionFiles | None, *paths: Path | None) -> Path | None:
    """The first of ``paths`` that is a symlink to nothing (the listing said which are symlinks), else None."""
    for p in paths:
        if p is None:
            continue
        link = p.name in files.links if files is not None else os.path.islink(p)
        if link and not p.exists():
            return p
    return None


def _judge_log(rep: SessionReport, idx: TapeIndex, log: Path, config: Config) -> None:
    """The findings and verdicts of a session's run log against its golden ``idx``, added to ``rep``: none when the
    run played another version of the golden (a ``stale_run`` finding then). A run log that is one plain run is
    judged without reading it as events (:mod:`tapetui.review.plainrun`: the same verdicts, at a fraction of the
    cost), any other as events (:func:`judge_run`)."""
    whole = idx.data if idx.data is not None and len(idx.data) == idx.size else None  # hashed as read, not read again
    plain = read_plain_run(log)
    settings = config.compare_for(rep.session) if plain is not None else None  # rep.session: the session's name
    verdicts = plain_verdicts(idx, plain, settings) if plain is not None and settings is not None else None
    if plain is not None and verdicts is not None:
        stale = run_log_stale(idx.path, [plain.start], whole)
        if stale:
            rep.findings.append(Finding("stale_run", stale))
        else:
            rep.run_verdicts = verdicts
        return
    reader = RunLogReader(log)
    events = reader.poll()[1]
    if reader.inode is None:  # no run log after all (an empty one is one: a run that never got going)
        return
    stale = run_log_stale(idx.path, events, whole)
    if stale:
        rep.findings.append(Finding("stale_run", stale))
    else:
        found, rep.run_verdicts = judge_run(idx, events, config, log=log, checked=True)
        rep.findings += found


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
            Finding("candidate", line, warning=True, level=level) for line, level in cmp.rows()
        ]
    if cmp.passed:  # no [compare] for the session: a pending candidate waits for review, and fails check
        what = "identical to the golden" if cmp.clean else f"{n} step(s) differ"
        text = (
            f"pending candidate {name}: {what}; it waits for review (accept or reject it: without [compare] for "
            "this session a pending candidate fails check)"
        )
        return [Finding("pending", text, data=data)] + [
            Finding("candidate", line, level=level) for line, level in cmp.rows()
        ]
    failing = ", ".join(v.dimension for v in cmp.failing)
    out = [
        Finding(
            "pending",
            f"pending candidate {name}: {n} step(s) differ" + (f"; over threshold: {failing}" if failing else ""),
            data=data,
        )
    ]
    out += [Finding("capability", capability_line(t), tool=t) for t in cmp.new_capabilities]
    out += [Finding("candidate", line, level=level) for line, level in cmp.rows(capabilities=False)]
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
    # every run of a group's (tapetui.core.runstart) names the golden it played: one that played another is stale
    played = {e.get("golden_sha256") for e in events if e.get("event") == "start"}
    recorded = {h for h in played if isinstance(h, str)}
    if not recorded or recorded == {golden_sha256(golden, data)}:
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


def folder_sessions(tapes_dir: Path, config: Config, listing: Listing | None = None) -> list[Path]:
    """Every session ``check`` checks in ``tapes_dir``, in its order: each with a golden, a candidate or a run log
    in place (a file or folder symlinked out of the folder too, for its check to refuse by name), and each whose
    pending candidate is parked (:func:`~tapetui.review.parking.parked_sessions`), with nothing left in place.
    ``listing``: keeps what the folder's listing saw (see :func:`~tapetui.core.store.iter_goldens`)."""
    goldens = list(iter_goldens(tapes_dir, listing, links_out=True))
    if not os.path.lexists(config.tapes_dir / PARKED_DIR):
        return goldens
    root, top = Path(tapes_dir).resolve(), config.tapes_dir.resolve()
    if root != top and top not in root.parents:  # a folder outside the tapes folder has nothing parked
        return goldens
    # the sessions parked in the folder checked (a sub-folder of the tapes folder: those under it)
    away = {g for name in parked_sessions(config) if root in (g := top / f"{name}.jsonl").parents}.difference(goldens)
    if not away:
        return goldens
    return sorted([*goldens, *away], key=lambda g: g.relative_to(root).parts)  # as iter_goldens sorts


def check(
    tapes_dir: Path,
    config: Config,
    sessions: Iterable[Path] | None = None,
    *,
    progress: Progress | None = None,
    on_note: Callable[[str], None] | None = None,
    jobs: int | Literal["auto"] = 1,
    cache: bool = False,
    require_run: bool = False,
    select: Callable[[str], bool] | None = None,
    on_listed: Callable[[list[Path]], None] | None = None,
) -> list[SessionReport]:
    """Check every session of a folder (:func:`folder_sessions`, or the given goldens), after :func:`recover`.

    Args:
        progress: called with ``(0, total)`` before the first session and ``(done, total)`` after
            each one, so a front can draw a progress bar.
        on_note: called with each line :func:`recover` reports (a repair, a problem left in place).
        jobs: processes to check the sessions in (reading and comparing only; each process imports a hook
            once); the reports come back in the sessions' order, as one process gives them. ``"auto"``: one
            below :data:`AUTO_JOBS_FROM` sessions to check, else as many as the cores this process may use.
        cache: take the report of a session whose files are unchanged since a check kept it, and keep the
            reports made (:mod:`tapetui.review.checkcache`: the user's cache, never the tapes folder).
        require_run: a golden with no run log is a finding (no run replayed it: a test deleted or skipped).
        select: check only the sessions whose name it takes (``--shard``: one runner's part of the folder).
        on_listed: called with every session listed, before ``select`` (what a shard's report names as its folder's).

    Raises:
        TapeError: the folder does not exist or holds no tapes (a misconfigured CI job must not go green).
    """
    for note in recover(config):
        if on_note is not None:
            on_note(note)
    listing = Listing()  # one scandir per folder says which files each session has (see tapetui.core.listing)
    # listed after recover: a session it puts back is checked as it is now
    goldens = list(sessions) if sessions is not None else folder_sessions(tapes_dir, config, listing)
    if sessions is None and not goldens:
        raise TapeError(no_tapes_message(tapes_dir, config))
    if on_listed is not None:
        on_listed(goldens)
    if select is not None:
        goldens = [g for g in goldens if select(session_name(g, config.tapes_dir))]
    total = len(goldens)
    if progress is not None:
        progress(0, total)
    # nothing of the folder is parked at all: one look, not one per session
    parked = os.path.lexists(config.tapes_dir / PARKED_DIR)
    kept = CheckCache.open(config, tapes_dir) if cache and not parked else None
    # what the listing saw of a session is asked where it is checked (in its check process), or here for the cache
    work: list[_Work] = [(g, listing.files(g) if kept is not None else listing, parked) for g in goldens]
    reports: list[SessionReport | None] = [None] * total
    lookups: list[Lookup | None] = [None] * total
    if kept is not None:
        for i, item in enumerate(work):
            g, name = item[0], session_name(item[0], config.tapes_dir)
            lookups[i] = lookup = kept.key(g, _files(item), config, name)
            found = kept.get(g, lookup[0] if lookup is not None else None)
            if found is not None:
                reports[i] = SessionReport(name, g, found[0], run_verdicts=found[1])
    todo = [i for i, r in enumerate(reports) if r is None]
    if progress is not None and len(todo) < total:
        progress(total - len(todo), total)
    made, now = _check_todo([work[i] for i in todo], config, jobs, progress, total, on_note), time.time_ns()
    for i, rep in zip(todo, made, strict=True):
        reports[i] = rep
        lookup = lookups[i]
        if kept is not None and lookup is not None:
            kept.keep(work[i][0], _files(work[i]), lookup, rep, now)
    if kept is not None:
        kept.save()
    done = [r for r in reports if r is not None]
    if require_run:  # after the cache kept its reports: what it keeps does not depend on this option
        for rep, item in zip(done, work, strict=True):
            g, files = item[0], _files(item)
            unreplayed = not files.run_log if files is not None else not os.path.lexists(runlog_path(g))
            there = files.golden if files is not None else g.exists()
            if rep.error is None and there and unreplayed:
                rep.findings = [*rep.findings, _NOT_RUN]
    return done


def _check_todo(
    todo: list[_Work],
    config: Config,
    jobs: int | Literal["auto"],
    progress: Progress | None,
    total: int,
    on_note: Callable[[str], None] | None,
) -> list[SessionReport]:
    """The reports of the sessions to check, in order: in ``jobs`` processes, or in this one."""
    auto = jobs == "auto"
    n = (1 if len(todo) < AUTO_JOBS_FROM else usable_cores()) if jobs == "auto" else jobs
    if n > 1 and len(todo) > 1:
        room = frames_left()  # what a check process gives its sessions too (see _worker_check)
        made = _check_in_processes(todo, config, min(n, len(todo)), progress, total, auto, room)
        if made is not None:
            return made
        if on_note is not None:
            on_note("no check processes could be started here: the sessions are checked in this one")
    reports = []
    for item in todo:
        reports.append(_check_work(item, config))
        if progress is not None:
            progress(total - len(todo) + len(reports), total)
    return reports


_NOT_RUN = Finding(
    "unused",
    "no run log: no run replayed this session (check --require-run: every golden is replayed; a test deleted or "
    "skipped leaves its tape unreplayed)",
)


AUTO_JOBS_FROM = 500  # sessions: below this, a second process costs more than it saves


def usable_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# a golden; what the folder's listing saw of it, or the listing to ask (see _check_work); whether to look for parking
_Work = tuple[Path, SessionFiles | Listing | None, bool]


def _files(item: _Work) -> SessionFiles | None:
    golden, seen, _ = item
    return seen.files(golden) if isinstance(seen, Listing) else seen


def _check_work(item: _Work, config: Config) -> SessionReport:
    """:func:`check_session` of one session to check."""
    return check_session(item[0], config, _files(item), parked=item[2])


# a check process's config, sessions, and the frames the parent had left where it checks sessions itself (0 once
# _worker_check gave this process as many), set by _worker_start
_WORKER: list[tuple[Config, list[_Work], int]] = []


def _worker_start(config: Config, work: list[_Work], room: int) -> None:
    # a check process sent SIGTERM ends as one: the parent says a process ended abruptly (its CLI handler, inherited
    # through fork, would raise SystemExit in here, which the pool hands the parent as this chunk's result)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _WORKER[:] = [(config, work, room)]
    show_redacted_by(config.redactor())  # the findings' texts redacted as one process redacts them


_Clean = tuple[str, tuple[tuple[Any, ...], ...]]  # a clean session's report on its way back: name, verdicts' fields


def _worker_check(i: int) -> bytes | _Clean | str:
    """Session ``i`` checked, its report without its golden's path (the caller has it: less to send back). Most
    sessions are clean: their report goes back as its name and its verdicts' fields, a few plain values, which
    cost the parent (on the same cores as the workers) a tenth of unpickling a report. Any other goes back pickled
    here (the pool then sends bytes): a report holding a value nested deeper than pickle goes (a candidate's deep
    result) is :data:`_AGAIN` instead.

    A session is checked with as many frames left as one process has where it checks it (:func:`_check_todo`): a
    value nested deep enough to exhaust Python's stack is read, compared and redacted alike with any ``--jobs``."""
    config, work, room = _WORKER[0]
    if room:  # the first session of this process: the limit is set once (the pool calls this at one depth)
        lift_recursion_limit(room - frames_left())  # forked: it has its parent's frames and its pool's below it
        _WORKER[0] = (config, work, 0)
    rep = _check_work(work[i], config)
    if not rep.findings and rep.error is None and rep.comparison is None and rep.samples is None:
        return rep.session, tuple(
            (v.dimension, v.value, v.threshold, v.excused, v.errors, v.mode, v.judged) for v in rep.run_verdicts
        )
    rep.golden = _SENT
    try:
        return pickle.dumps(rep, pickle.HIGHEST_PROTOCOL)
    except RecursionError:
        return _AGAIN


def _check_deeper(item: _Work, config: Config) -> SessionReport:
    """:func:`_check_work` from one frame below :func:`_check_todo`, with the frames it has."""
    with lifted(2):  # this frame and its caller's
        return _check_work(item, config)


_SENT = Path()  # a report's golden on its way back from a check process
_AGAIN = "again"  # what a check process sends back for a report it cannot send: the parent checks the session itself


def _received(item: bytes | _Clean, golden: Path, verdicts: dict[Any, tuple[Verdict, ...]]) -> SessionReport:
    """A report as :func:`_worker_check` sent it, whole again (``verdicts``: the verdicts made so far, by their
    fields: a folder's clean sessions share a few sets of them, and a verdict is a frozen value)."""
    if isinstance(item, bytes):  # pickled by the check process this one forked
        rep: SessionReport = pickle.loads(item)  # noqa: S301 - our own worker's bytes, never a file's
        rep.golden = golden
        return rep
    session, fields = item
    made = verdicts.get(fields)
    if made is None:
        made = verdicts[fields] = tuple(Verdict(*f) for f in fields)
    return SessionReport(session, golden, run_verdicts=made)


def _check_in_processes(
    goldens: list[_Work], config: Config, jobs: int, progress: Progress | None, total: int, fall_back: bool, room: int
) -> list[SessionReport] | None:
    """The sessions checked by ``jobs`` processes (forked where the platform has fork), in order. Each process
    is given the whole list once (forked: shared, not sent at all) and then only numbers. None when no process
    could be started (fork refused, no shared memory for the pool's locks) and ``fall_back`` (``--jobs auto``):
    the caller checks in its own process; asked for processes explicitly, that is a TapeError."""
    # deferred: the process pool's modules cost every check ~15 ms to import, and one process needs none of them
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor  # deferred, as above
    from concurrent.futures.process import BrokenProcessPool  # deferred, as above

    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    chunk = max(1, min(64, len(goldens) // (jobs * 8)))  # big enough to amortise a message, small for the bar
    reports: list[SessionReport] = []
    verdicts: dict[Any, tuple[Verdict, ...]] = {}
    try:
        start = (config, goldens, room)
        pool = ProcessPoolExecutor(jobs, mp_context=context, initializer=_worker_start, initargs=start)
        with pool:
            for item in pool.map(_worker_check, range(len(goldens)), chunksize=chunk):
                work = goldens[len(reports)]
                if isinstance(item, str):  # _AGAIN: checked here, as one process checks it (a frame deeper)
                    reports.append(_check_deeper(work, config))
                else:
                    reports.append(_received(item, work[0], verdicts))
                if progress is not None:
                    progress(total - len(goldens) + len(reports), total)
    except BrokenProcessPool:  # a worker killed (the out-of-memory killer, a signal): no verdict, never a pass
        raise TapeError(
            f"a check process ended abruptly after {len(reports):,} of {len(goldens):,} sessions (killed by a "
            "signal, or out of memory); nothing is concluded: run check again (fewer --jobs use less memory)"
        ) from None
    except OSError as e:  # no process to be had: nothing was checked yet
        if reports or not fall_back:
            raise TapeError(
                f"cannot run {jobs} check processes here ({e.strerror or e}); `--jobs 1` checks in this one"
            ) from None
        return None
    return reports


def pending(config: Config) -> list[tuple[Path, Path]]:
    """``(golden, candidate)`` of every candidate waiting for review."""
    return [(g, candidate_path(g)) for g in iter_goldens(config.tapes_dir) if candidate_path(g).exists()]
