"""Golden review without a screen: compare, check, accept, reject, expire, re-record, undo.

Every action that changes a golden goes through :func:`_commit`, a small journaled
protocol so that the golden never changes without its changelog entry, even if the
process dies half way:

1. the new golden is written to a hidden temp file beside it and fsynced;
2. a journal (``name.jsonl.journal``) naming the temp file, the changelog entry and
   its id is written atomically — from here on the change rolls forward;
3. the entry is appended to the changelog (skipped when its id is already there);
4. the temp file is renamed over the golden; the candidate is removed if accepted whole;
5. the journal is removed.

:func:`recover` (run first by every command and by the app) finishes any journal it
finds and deletes temp files that never got a journal, so an interrupted accept is
either fully done or never happened.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import os
import secrets
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from rapidfuzz.distance import Levenshtein

from tapetui.core.canon import canon
from tapetui.core.config import Config
from tapetui.core.errors import TapeError, TooDeep
from tapetui.core.fingerprint import LATEST_FORM, ToolManifest, explain_manifest_change, in_form
from tapetui.core.jsondiff import Change, IgnoreRules, diff_values, format_changes
from tapetui.core.locks import reading, session_lock, try_session_lock
from tapetui.core.registry import ToolRegistry
from tapetui.core.runlog import RunLogReader, event_problem, read_run_log
from tapetui.core.store import (
    candidate_path,
    golden_of,
    iter_goldens,
    journal_path,
    refuse_links_out,
    runlog_path,
    session_name,
)
from tapetui.core.tape import iso, key_of, parse_iso, utcnow
from tapetui.core.tapefile import CallRecord, TapeIndex, atomic_write, call_line, dump_line, fsync_dir, read_index
from tapetui.review.changelog import Entry, append_entry, has_entry

__all__ = [
    "AlreadyExpired",
    "Comparison",
    "Finding",
    "SessionReport",
    "StepDiff",
    "accept",
    "check",
    "compare",
    "compare_run",
    "expire",
    "pending",
    "recover",
    "rerecord",
    "reject",
    "restore",
    "restore_candidate",
]


# ---- loading ------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadedTape:
    """A tape read whole: for review, not for the replay hot path."""

    path: Path
    index: TapeIndex
    calls: tuple[CallRecord, ...]

    @property
    def manifests(self) -> dict[str, ToolManifest]:
        return self.index.manifests


def load(path: Path) -> LoadedTape:
    idx = read_index(path, validate=True)
    return LoadedTape(Path(path), idx, tuple(idx.records()))


# ---- comparing ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class StepDiff:
    """One aligned position of two sessions.

    ``kind``: ``same``, ``changed`` (same tool, other arguments), ``replaced`` (another
    tool), ``added`` (only in the new session) or ``skipped`` (only in the golden).
    ``expiry``: ``(old, new)`` ``expires_at`` when only the new one differs there (a re-record that
    refreshed a time-sensitive answer): accepting changes it, so it is a difference too.
    """

    kind: str
    old: CallRecord | None
    new: CallRecord | None
    arg_changes: tuple[Change, ...] = ()
    result_changes: tuple[Change, ...] = ()
    fingerprint: tuple[str, ...] = ()
    expiry: tuple[str | None, str | None] | None = None

    @property
    def tool(self) -> str:
        rec = self.new or self.old
        assert rec is not None
        return rec.tool

    @property
    def seq(self) -> int:
        rec = self.old or self.new
        assert rec is not None
        return rec.seq

    @property
    def differs(self) -> bool:
        return self.kind != "same"

    def lines(self, contracts_shown: bool = False) -> list[str]:
        """Human lines such as ``summarize  step 3  args.max_words  120 → 80``."""
        head = f"{self.tool}  step {self.seq}"
        if self.kind == "added":
            assert self.new is not None
            return [f"{head}  added (new step {self.new.seq}, key {self.new.key})"]
        if self.kind == "skipped":
            assert self.old is not None
            return [f"{head}  skipped (recorded key {self.old.key} was not called)"]
        if self.kind == "replaced":
            assert self.old is not None and self.new is not None
            return [f"{self.old.tool}  step {self.seq}  replaced by {self.new.tool} (step {self.new.seq})"]
        out = [f"{head}  {line}" for line in format_changes(self.arg_changes, prefix="args")]
        out += [f"{head}  {line}" for line in format_changes(self.result_changes, prefix="result")]
        if self.expiry is not None:
            old, new = self.expiry
            out.append(f"{head}  expires_at  {old or '(none)'} → {new or '(none)'}")
        if not contracts_shown:
            out += [f"{head}  [CONTRACT] {line}" for line in self.fingerprint]
        elif self.fingerprint and len(out) == 0:
            out.append(f"{head}  recorded under the old contract of {self.tool}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "tool": self.tool,
            "seq": self.seq,
            "new_seq": self.new.seq if self.new else None,
            "old_key": self.old.key if self.old else None,
            "new_key": self.new.key if self.new else None,
            "arg_changes": [_change_json(c) for c in self.arg_changes],
            "result_changes": [_change_json(c) for c in self.result_changes],
            "fingerprint": list(self.fingerprint),
            "expires_at": None if self.expiry is None else {"old": self.expiry[0], "new": self.expiry[1]},
        }


def _change_json(c: Change) -> dict[str, Any]:
    out: dict[str, Any] = {"path": c.path, "kind": c.kind}
    if c.kind != "added":
        out["old"] = c.old
    if c.kind != "removed":
        out["new"] = c.new
    return out


@dataclass(frozen=True)
class Comparison:
    """A golden against a candidate: sequences, aligned steps, contract changes."""

    golden: Path
    other: Path
    old_tools: tuple[str, ...]
    new_tools: tuple[str, ...]
    edit_distance: int
    old_requested: tuple[str, ...]
    new_requested: tuple[str, ...]
    requested_distance: int
    steps: tuple[StepDiff, ...]
    contracts: dict[str, tuple[str, str, tuple[str, ...]]] = field(default_factory=dict)

    @property
    def changed_steps(self) -> list[StepDiff]:
        return [s for s in self.steps if s.differs]

    @property
    def clean(self) -> bool:
        return not self.changed_steps and not self.contracts and self.edit_distance == 0

    def lines(self) -> list[str]:
        out = []
        if self.edit_distance:
            out.append(
                f"[TOOLS] executed sequence changed (edit distance {self.edit_distance}): "
                f"{list(self.old_tools)} → {list(self.new_tools)}"
            )
        if self.requested_distance and (self.old_requested != self.old_tools or self.new_requested != self.new_tools):
            out.append(
                f"[TOOLS] model-requested sequence (edit distance {self.requested_distance}): "
                f"{list(self.old_requested)} → {list(self.new_requested)}"
            )
        for tool, (old, new, why) in sorted(self.contracts.items()):
            out.append(f"[CONTRACT] {tool}  fingerprint {old} → {new}")
            out += [f"[CONTRACT] {tool}  {line}" for line in why]
        for s in self.changed_steps:
            out += s.lines(contracts_shown=s.tool in self.contracts)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "golden": str(self.golden),
            "other": str(self.other),
            "tools": {"old": list(self.old_tools), "new": list(self.new_tools), "edit_distance": self.edit_distance},
            "requested": {
                "old": list(self.old_requested),
                "new": list(self.new_requested),
                "edit_distance": self.requested_distance,
            },
            "contracts": {t: {"old": o, "new": n, "explanation": list(w)} for t, (o, n, w) in self.contracts.items()},
            "steps": [s.to_json() for s in self.changed_steps],
        }


def _requested(calls: Iterable[CallRecord]) -> tuple[str, ...]:
    return tuple(c.requested_tool or c.tool for c in calls)


def compare(golden: Path | LoadedTape, other: Path | LoadedTape, config: Config | None = None) -> Comparison:
    """Compare a golden with a candidate (or any other tape of the same session).

    Steps are aligned on the tool-name sequence (Levenshtein opcodes), so a step
    inserted at 3 shows as added instead of making 4..n look changed.
    """
    if config is not None:
        refuse_links_out(config.tapes_dir, *(p for p in (golden, other) if not isinstance(p, LoadedTape)))
    g = golden if isinstance(golden, LoadedTape) else load(Path(golden))
    o = other if isinstance(other, LoadedTape) else load(Path(other))
    rules = config.ignore_rules() if config else IgnoreRules()
    old_tools = tuple(c.tool for c in g.calls)
    new_tools = tuple(c.tool for c in o.calls)
    contracts: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    same = _same_contract(g, o, config)
    for tool in sorted(set(old_tools) & set(new_tools)):
        gm, om = g.manifests.get(tool), o.manifests.get(tool)
        old_fp = gm.fingerprint if gm else next(c.fingerprint for c in g.calls if c.tool == tool)
        new_fp = om.fingerprint if om else next(c.fingerprint for c in o.calls if c.tool == tool)
        if not same(old_fp, new_fp):
            redactor = config.redactor() if config else None  # no secret-looking value is shown
            contracts[tool] = (old_fp, new_fp, tuple(explain_manifest_change(gm, om, redactor)))
    steps: list[StepDiff] = []
    for op in Levenshtein.opcodes(list(old_tools), list(new_tools)):
        olds = g.calls[op.src_start : op.src_end]
        news = o.calls[op.dest_start : op.dest_end]
        if op.tag == "equal":
            steps += [_pair(a, b, rules, contracts, (g.path, o.path), same) for a, b in zip(olds, news, strict=False)]
        elif op.tag == "replace":
            steps += [StepDiff("replaced", a, b) for a, b in zip(olds, news, strict=False)]
            steps += [StepDiff("skipped", a, None) for a in olds[len(news) :]]
            steps += [StepDiff("added", None, b) for b in news[len(olds) :]]
        elif op.tag == "delete":
            steps += [StepDiff("skipped", a, None) for a in olds]
        elif op.tag == "insert":
            steps += [StepDiff("added", None, b) for b in news]
    return Comparison(
        golden=g.path,
        other=o.path,
        old_tools=old_tools,
        new_tools=new_tools,
        edit_distance=Levenshtein.distance(list(old_tools), list(new_tools)),
        old_requested=_requested(g.calls),
        new_requested=_requested(o.calls),
        requested_distance=Levenshtein.distance(list(_requested(g.calls)), list(_requested(o.calls))),
        steps=tuple(steps),
        contracts=contracts,
    )


def _same_contract(g: LoadedTape, o: LoadedTape, config: Config | None) -> Callable[[str, str], bool]:
    """Whether a fingerprint of ``g`` and one of ``o`` name the same contract.

    Fingerprints of one form are compared as they are (a tape is verified in the form it was
    recorded with); of two forms, both are compared in form 2, from the tool lines that hold
    them (see :mod:`tapetui.core.fingerprint`): re-recording a form-1 tape in form 2 is not a
    contract change, nor is the rotation of a key that form 2 redacts.
    """
    redactor = config.redactor() if config else None

    def form2(t: LoadedTape) -> dict[str, str]:
        out = {}
        for m in t.manifests.values():
            with contextlib.suppress(ValueError):  # a form this version does not know: compared as it is
                out[m.fingerprint] = in_form(m, LATEST_FORM, redactor).fingerprint
        return out

    cache: dict[int, dict[str, str]] = {}

    def same(old_fp: str, new_fp: str) -> bool:
        if old_fp == new_fp:
            return True
        if g.index.fp_forms.get(old_fp, 1) == o.index.fp_forms.get(new_fp, 1):
            return False
        if not cache:
            cache[0], cache[1] = form2(g), form2(o)
        a, b = cache[0].get(old_fp), cache[1].get(new_fp)
        return a is not None and a == b

    return same


def _pair(
    a: CallRecord,
    b: CallRecord,
    rules: IgnoreRules,
    contracts: dict[str, Any],
    where: tuple[Path, Path],
    same: Callable[[str, str], bool] | None = None,
) -> StepDiff:
    try:
        return _pair_diff(a, b, rules, contracts, same)
    except TooDeep:
        raise TooDeep(f"{where[0]}:{a.line} and {where[1]}:{b.line}: step {a.seq} ({a.tool})") from None


def _pair_diff(
    a: CallRecord,
    b: CallRecord,
    rules: IgnoreRules,
    contracts: dict[str, Any],
    same: Callable[[str, str], bool] | None = None,
) -> StepDiff:
    differs = a.fingerprint != b.fingerprint and not (same is not None and same(a.fingerprint, b.fingerprint))
    fp = tuple(contracts[a.tool][2]) if differs and a.tool in contracts else ()
    if differs and not fp:
        fp = (f"fingerprint {a.fingerprint} → {b.fingerprint}",)
    args = () if a.key == b.key else tuple(diff_values(canon(a.args), canon(b.args), rules))
    old_res = {"error": a.error} if a.error is not None else a.result
    new_res = {"error": b.error} if b.error is not None else b.result
    res = tuple(diff_values(old_res, new_res, rules))
    expiry = (a.expires_at, b.expires_at) if a.expires_at != b.expires_at else None
    kind = "changed" if (args or res or fp or expiry) else "same"
    return StepDiff(kind, a, b, args, res, fp, expiry)


# ---- run logs -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``check`` reports about a session."""

    kind: str  # drift, miss, fingerprint, unused, stale, pending, candidate, error, tools, invalid, torn
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
) -> list[Finding]:
    """What a run log says went wrong against its golden.

    Never silent about a run that did not replay cleanly: a run log with no ``end`` (the replay
    was killed, or is still running) and a run that ended in an error are findings, even when
    every argument path it drifted on is hidden by the ignore rules (those paths are still part
    of the call key, so the replay raised).

    Args:
        log: the run log, named in messages.
        checked: the events come from :class:`~tapetui.core.runlog.RunLogReader`, which checked each one
            (:func:`~tapetui.core.runlog.event_problem`); other events are checked here.

    Raises:
        TapeError: a malformed event, naming the run log and its line.
    """
    rules = config.ignore_rules() if config else IgnoreRules()
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
        executes = kind in ("hit", "drift", "miss", "live", "record") or (
            kind == "fingerprint" and not ev.get("allowed")
        )
        if executes and isinstance(tool, str):
            executed.append(tool)
        if kind in ("hit", "drift", "miss", "live", "fingerprint", "record", "stale") and seq is not None:
            last_seq, last_tool = seq, tool
        if kind == "drift":
            changes = [Change(p, o, n) for p, o, n in ev.get("changes") or []]
            shown = [c for c in changes if not rules.ignores(c.path.replace("[", ".").replace("]", "").split("."))]
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
    stopped = end is not None and end.get("error") is not None
    if stopped and unused:
        # The run stopped at a drift or miss: the steps after it were not reached, not skipped.
        steps = ", ".join(str(e.get("seq")) for e in unused)
        out.append(
            Finding(
                "unused",
                f"run stopped at step {len(executed)} ({end['error'].get('type')}); step(s) {steps} not reached",
                data={"steps": [e.get("seq") for e in unused]},
            )
        )
    else:
        out += [
            Finding(
                "unused",
                f"{e.get('tool')}  step {e.get('seq')}  unused: recorded but never called",
                e.get("seq"),
                e.get("tool"),
            )
            for e in unused
        ]
    recorded = list(golden.tools)
    dist = Levenshtein.distance(recorded, executed)
    if dist and end is not None and not stopped:
        out.insert(
            0,
            Finding(
                "tools",
                f"[TOOLS] executed sequence changed (edit distance {dist}): {recorded} → {executed}",
                data={"edit_distance": dist},
            ),
        )
    return out


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
                    rep.findings += compare_run(idx, events, config, log=log, checked=True)
        if cand.exists():
            if idx is None:
                rep.findings.append(Finding("pending", f"pending new session {cand.name} (no golden yet)"))
            else:
                c = load(cand)
                rep.findings += _key_findings(c.index)
                cmp = compare(LoadedTape(golden, idx, tuple(idx.records())), c, config)
                rep.comparison = cmp
                n = len(cmp.changed_steps)
                rep.findings.append(
                    Finding("pending", f"pending candidate {cand.name}: {n} step(s) differ", data={"clean": cmp.clean})
                )
                rep.findings += [Finding("candidate", line) for line in cmp.lines()]
    except TapeError as e:
        rep.error = str(e)
    except OSError as e:  # a name too long for the file system, a folder that cannot be listed...
        rep.error = f"{e.filename or golden}: {e.strerror or e}"
    return rep


def golden_sha256(golden: Path, data: bytes | None = None) -> str | None:
    """The sha256 of a golden's bytes (what a run log's ``start`` names), None when there is none.

    ``data``: the golden's bytes when the caller has read them already (not read again)."""
    return hashlib.sha256(data).hexdigest() if data is not None else _sha256_file(golden)


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
        "last run predates the golden (it ran against an earlier version of it); run the replay again "
        "(p in the app) to check the golden as it is now"
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


def check(tapes_dir: Path, config: Config, sessions: Iterable[Path] | None = None) -> list[SessionReport]:
    """Check every session of a folder (or the given goldens).

    Raises:
        TapeError: the folder does not exist or holds no tapes (a misconfigured CI job must not go green).
    """
    recover(config)
    goldens = list(sessions) if sessions is not None else list(iter_goldens(tapes_dir))
    if sessions is None and not goldens:
        raise TapeError(no_tapes_message(tapes_dir, config))
    return [check_session(g, config) for g in goldens]


def pending(config: Config) -> list[tuple[Path, Path]]:
    """``(golden, candidate)`` of every candidate waiting for review."""
    return [(g, candidate_path(g)) for g in iter_goldens(config.tapes_dir) if candidate_path(g).exists()]


# ---- committing a golden ------------------------------------------------------------
def _now() -> str:
    return iso(datetime.now(UTC).replace(microsecond=0))


def _tmp_of(golden: Path) -> Path:
    return golden.with_name(f".{golden.name}.next")


@contextmanager
def _session(config: Config, golden: Path) -> Iterator[None]:
    """Hold a session for a review action: its lock, then what a dead process left of it finished.

    Every action reads the files it changes inside this, after the recovery: reading first
    would compute the change from a golden that the recovery then replaces (a lost update).
    """
    with session_lock(golden):
        _recover_session(config, golden, strict=True)
        yield


def _commit(config: Config, golden: Path, data: bytes | None, entry: Entry, remove_candidate: bool = False) -> None:
    """Change a golden and write its changelog entry, crash-safely (see the module doc).

    The caller computed ``data`` inside :func:`_session` (the lock is re-entrant).

    Raises:
        TapeError: the new golden or its journal cannot be written (nothing changed), or the
            change is journaled but cannot be finished now (``recover`` finishes it).
    """
    golden = Path(golden)
    with session_lock(golden):
        _recover_session(config, golden, strict=True)
        tmp = _tmp_of(golden)
        entry = entry.redacted(config.redactor())  # the journal is on disk too: no secret in it either
        journal = {
            "id": entry.id,
            "golden": golden.name,
            "tmp": tmp.name if data is not None else None,
            "sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
            "remove_candidate": remove_candidate,
            "entry": {
                "when": entry.when,
                "action": entry.action,
                "session": entry.session,
                "steps": list(entry.steps),
                "details": list(entry.details),
                "rationale": entry.rationale,
            },
        }
        try:
            if data is not None:
                _write_new(tmp, data)
            atomic_write(journal_path(golden), orjson.dumps(journal))
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise TapeError(f"{e.filename or golden}: cannot write: {e.strerror}; nothing was changed") from None
        try:
            _finish(config, golden, journal)
        except OSError as e:
            raise TapeError(
                f"{e.filename or golden}: {e.strerror}: the change of {golden.name} is journaled but not "
                "finished; run `tapetui recover` once this is fixed"
            ) from None


def _write_new(path: Path, data: bytes) -> None:
    """Write a temp golden (never through a planted symlink), fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


_HEX = frozenset("0123456789abcdef")


def _journal_problem(golden: Path, j: Any) -> str | None:
    """What is wrong with a journal, or None: it is data from disk and is checked before anything is done."""
    if not isinstance(j, dict):
        return f"expected a JSON object, got {type(j).__name__}"
    jid = j.get("id")
    if not isinstance(jid, str) or not 1 <= len(jid) <= 64 or not set(jid) <= _HEX:
        return "'id' must be a hex string"
    if j.get("golden") != golden.name:
        return f"'golden' must be {golden.name!r}"
    tmp, sha = j.get("tmp"), j.get("sha256")
    if tmp is not None and tmp != _tmp_of(golden).name:
        return f"'tmp' must be null or {_tmp_of(golden).name!r}"
    if tmp is not None and not (isinstance(sha, str) and len(sha) == 64 and set(sha) <= _HEX):
        return "'sha256' must be the 64-hex sha256 of the temp golden"
    if not isinstance(j.get("remove_candidate"), bool):
        return "'remove_candidate' must be true or false"
    e = j.get("entry")
    if not isinstance(e, dict):
        return "'entry' must be an object"
    for k in ("when", "action", "session"):
        if not isinstance(e.get(k), str):
            return f"'entry.{k}' must be a string"
    steps, details = e.get("steps"), e.get("details")
    if not isinstance(steps, list) or not all(type(s) is int for s in steps):
        return "'entry.steps' must be a list of integers"
    if not isinstance(details, list) or not all(isinstance(d, str) for d in details):
        return "'entry.details' must be a list of strings"
    if e.get("rationale") is not None and not isinstance(e.get("rationale"), str):
        return "'entry.rationale' must be a string or null"
    return None


def _sha256_file(path: Path) -> str | None:
    """sha256 of a regular file (never follows a symlink, never opens a FIFO), None when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except (FileNotFoundError, OSError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def _finish(config: Config, golden: Path, journal: dict[str, Any], *, verify: bool = False) -> None:
    """Roll a journaled change forward: changelog entry, rename, candidate, journal. Idempotent.

    ``verify``: check the temp golden (or, after the rename, the golden) against the journal's sha256
    first: ``recover`` does, since it finishes what another process wrote.

    Raises:
        TapeError: the files do not match the journal (nothing is done; the journal is left in place).
    """
    e = journal["entry"]
    entry = Entry(
        journal["id"], e["when"], e["action"], e["session"], tuple(e["steps"]), tuple(e["details"]), e["rationale"]
    )
    tmp = golden.with_name(journal["tmp"]) if journal.get("tmp") else None
    rename = tmp is not None and os.path.lexists(tmp)
    if verify and tmp is not None:
        want = journal["sha256"]
        if rename and _sha256_file(tmp) != want:
            raise TapeError(
                f"{tmp}: does not match its journal's sha256; the golden was not changed "
                f"(inspect {journal_path(golden).name}, then remove it and {tmp.name})"
            )
        if not rename and _sha256_file(golden) != want:
            raise TapeError(
                f"{journal_path(golden)}: its temp golden is gone and the golden is not the journaled "
                "one; nothing was done (inspect and remove the journal)"
            )
    if not has_entry(config.changelog, entry.id):
        append_entry(config.changelog, entry, config.redactor())
    if tmp is not None and rename:
        os.replace(tmp, golden)
        fsync_dir(golden.parent)
    if journal.get("remove_candidate"):
        candidate_path(golden).unlink(missing_ok=True)
    journal_path(golden).unlink(missing_ok=True)
    fsync_dir(golden.parent)


def _leftovers(golden: Path) -> list[Path]:
    """Temp files of a session's atomic writes (``.NAME….XXXXXXXX.tmp``) that a killed process left."""
    stems = {golden.name, golden.name + ".journal", candidate_path(golden).name, runlog_path(golden).name}
    out: list[Path] = []
    try:
        names = os.listdir(golden.parent)
    except OSError:
        return out
    for n in names:
        if n.startswith(".") and n.endswith(".tmp"):
            stem = n[1:-4].rpartition(".")[0]  # mkstemp: ".<name>.<random>.tmp"
            if stem in stems:
                out.append(golden.parent / n)
    return out


def _recover_session(config: Config, golden: Path, *, strict: bool = False) -> list[str]:
    """Finish or undo what a dead process left of one session. The caller holds the session lock.

    ``strict``: raise instead of noting a journal that cannot be finished (before a new commit,
    which must not overwrite it).
    """
    notes: list[str] = []
    jp = journal_path(golden)
    if os.path.lexists(jp):
        problem = None
        journal: Any = None
        try:
            if not stat.S_ISREG(os.lstat(jp).st_mode):
                problem = "not a regular file"
            else:
                journal = orjson.loads(jp.read_bytes())
        except (OSError, orjson.JSONDecodeError) as e:
            problem = f"unreadable: {e}"
        problem = problem or _journal_problem(golden, journal)
        if problem is None:
            try:
                _finish(config, golden, journal, verify=True)
                notes.append(
                    f"{golden}: completed an interrupted {journal['entry']['action']} (changelog entry {journal['id']})"
                )
            except TapeError as e:
                problem = str(e)
        else:
            problem = f"{jp}: malformed journal ({problem}); left in place, the golden was not changed"
        if problem is not None:
            if strict:
                raise TapeError(problem)
            notes.append(problem)
    tmp = _tmp_of(golden)
    if not os.path.lexists(jp) and os.path.lexists(tmp):
        tmp.unlink()
        notes.append(f"{tmp}: removed an unfinished temp golden (the golden was not changed)")
    for left in _leftovers(golden):
        left.unlink(missing_ok=True)
        notes.append(f"{left}: removed a temp file of an interrupted write")
    return notes


def recover(config: Config) -> list[str]:
    """Finish interrupted commits and drop temp files that a dead process left.

    A session another live process holds (:mod:`tapetui.core.locks`) is left alone: every file
    this finds in a session it could lock belongs to a process that died.

    Returns:
        One line per repair (or per problem left in place), for the caller to show.
    """
    notes: list[str] = []
    root = config.tapes_dir
    if not root.is_dir():
        return notes
    found: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.endswith(".samples")]
        here = Path(dirpath)
        for f in filenames:
            if f.endswith(".jsonl.journal"):
                found.add(here / f[: -len(".journal")])
            elif f.startswith(".") and f.endswith(".jsonl.next"):
                found.add(here / f[1 : -len(".next")])
            elif f.startswith(".") and f.endswith(".tmp"):
                g = golden_of(here / f[1:-4].rpartition(".")[0])
                if g is not None:
                    found.add(g)
    for golden in sorted(found):
        try:
            with try_session_lock(golden) as held:
                if not held:
                    notes.append(f"{golden}: in use by another process; left alone")
                    continue
                notes += _recover_session(config, golden)
        except (TapeError, OSError) as e:
            notes.append(f"{golden}: cannot recover: {e}")
    return notes


def _entry(
    action: str, config: Config, golden: Path, steps: Iterable[int], details: list[str], rationale: str | None
) -> Entry:
    return Entry(
        secrets.token_hex(6),
        _now(),
        action,
        session_name(golden, config.tapes_dir),
        tuple(sorted(set(steps))),
        tuple(details),
        rationale,
    )


def _require_why(why: str | None, action: str) -> str:
    if why is None or not why.strip():
        raise TapeError(f"{action} needs a rationale (--why TEXT): the changelog records why a golden changed")
    return why.strip()


def _rebuild(index: TapeIndex, replace: dict[int, bytes], extra_manifests: list[bytes]) -> bytes:
    """The golden's bytes with some call lines replaced (by call index) and manifests added."""
    data = Path(index.path).read_bytes()
    if index.torn is not None:
        data = data[: index.torn.offset]
    parts = []
    pos = 0
    first_call = index.offsets[0] if len(index) else len(data)
    parts.append(data[:first_call])
    parts += extra_manifests
    pos = first_call
    for i in sorted(replace):
        parts.append(data[pos : index.offsets[i]])
        parts.append(replace[i])
        pos = index.offsets[i] + index.lengths[i]
    parts.append(data[pos:])
    return b"".join(parts)


def accept(config: Config, golden: Path, why: str | None, steps: Iterable[int] | None = None) -> Entry:
    """Promote the candidate (whole, or the given golden steps) to golden, with a changelog entry.

    Raises:
        TapeError: no rationale, no candidate, a step that does not line up.
    """
    why = _require_why(why, "accept")
    golden = Path(golden)
    cand = candidate_path(golden)
    refuse_links_out(config.tapes_dir, golden, cand)
    with _session(config, golden):  # a second accept waits, then finds the candidate gone
        return _accept_locked(config, golden, cand, why, steps)


def _accept_locked(config: Config, golden: Path, cand: Path, why: str, steps: Iterable[int] | None) -> Entry:
    if not os.path.lexists(cand):
        raise TapeError(f"{golden}: no pending candidate to accept")
    c = load(cand)
    if not golden.exists():
        entry = _entry(
            "accept (new session)",
            config,
            golden,
            [x.seq for x in c.calls],
            [f"new session with {len(c.calls)} steps: {[x.tool for x in c.calls]}"],
            why,
        )
        _commit(config, golden, _complete_bytes(c), entry, remove_candidate=True)
        return entry
    g = load(golden)
    cmp = compare(g, c, config)
    if steps is None:
        details = _details(cmp, cmp.changed_steps) + ([] if cmp.changed_steps else ["no differences"])
        entry = _entry("accept", config, golden, [s.seq for s in cmp.changed_steps if s.old], details, why)
        _commit(config, golden, _complete_bytes(c), entry, remove_candidate=True)
        return entry
    wanted = sorted(set(steps))
    by_seq = {s.old.seq: s for s in cmp.steps if s.old is not None and s.kind in ("same", "changed")}
    replace: dict[int, bytes] = {}
    manifests: list[bytes] = []
    chosen = []
    for n in wanted:
        sd = by_seq.get(n)
        if sd is None or sd.new is None:
            raise TapeError(
                f"{golden}: step {n} does not line up with a step of the candidate; accept the whole candidate instead"
            )
        assert sd.old is not None
        chosen.append(sd)
        raw = dict(sd.new.raw)
        raw["seq"] = sd.old.seq
        i = next(i for i in range(len(g.index)) if g.index.lines[i] == sd.old.line)
        replace[i] = dump_line(raw)
        if sd.fingerprint and sd.tool in c.manifests:
            manifests.append(c.index.manifest_lines[sd.tool])
    data = _rebuild(g.index, replace, manifests)
    entry = _entry("accept", config, golden, wanted, _details(cmp, chosen), why)
    # When nothing else differs any more, the candidate has been fully reviewed.
    rest = [s for s in cmp.changed_steps if s not in chosen]
    _commit(config, golden, data, entry, remove_candidate=not rest and not cmp.edit_distance)
    return entry


def _complete_bytes(t: LoadedTape) -> bytes:
    """A tape's complete lines as indexed (a torn tail a dead recorder left is not promoted)."""
    with open(t.path, "rb") as fh:
        data = fh.read(t.index.scanned)
    if len(data) != t.index.scanned:
        raise TapeError(f"{t.path}: changed while it was read; try again")
    return data


def _details(cmp: Comparison, chosen: Iterable[StepDiff]) -> list[str]:
    out = []
    if cmp.edit_distance:
        out.append(f"tool sequence edit distance {cmp.edit_distance}: {list(cmp.old_tools)} → {list(cmp.new_tools)}")
    for s in chosen:
        keys = f"key {s.old.key if s.old else '-'} → {s.new.key if s.new else '-'}"
        fp = ""
        if s.old and s.new and s.old.fingerprint != s.new.fingerprint:
            fp = f"; fingerprint {s.old.fingerprint} → {s.new.fingerprint}"
        out.append(f"step {s.seq} {s.tool} ({s.kind}): {keys}{fp}")
        out += [f"step {s.seq} {line}" for line in format_changes(s.arg_changes, prefix="args")]
        out += [f"step {s.seq} {line}" for line in format_changes(s.result_changes, prefix="result")]
        if s.expiry is not None:
            out.append(f"step {s.seq} expires_at {s.expiry[0] or '(none)'} → {s.expiry[1] or '(none)'}")
        out += [f"step {s.seq} contract: {line}" for line in s.fingerprint]
    return out


def reject(config: Config, golden: Path, why: str | None = None) -> Entry | None:
    """Discard the pending candidate; a changelog note only when a reason is given."""
    golden = Path(golden)
    cand = candidate_path(golden)
    refuse_links_out(config.tapes_dir, golden, cand)
    with _session(config, golden):
        if not os.path.lexists(cand):
            raise TapeError(f"{golden}: no pending candidate to reject")
        entry = None
        if why and why.strip():
            entry = _entry("reject", config, golden, [], [f"candidate {cand.name} discarded"], why.strip())
            append_entry(config.changelog, entry, config.redactor())
        cand.unlink()
        fsync_dir(cand.parent)
        return entry


def expire(
    config: Config,
    golden: Path,
    steps: Iterable[int] | None = None,
    *,
    all_time_sensitive: bool = False,
    why: str | None = None,
    now: datetime | None = None,
) -> Entry:
    """Mark entries expired (``expires_at`` = now) so the next ``fill`` re-records them."""
    golden = Path(golden)
    refuse_links_out(config.tapes_dir, golden)
    with _session(config, golden):
        return _expire_locked(config, golden, steps, all_time_sensitive, why, now)


class AlreadyExpired(TapeError):
    """Every entry asked for has expired already: nothing was changed and no changelog entry written."""


def _expire_locked(
    config: Config,
    golden: Path,
    steps: Iterable[int] | None,
    all_time_sensitive: bool,
    why: str | None,
    now: datetime | None,
) -> Entry:
    g = load(golden)
    when = iso((now or utcnow()).replace(microsecond=0))
    wanted = set(steps or ())
    if all_time_sensitive:
        targets = [i for i, c in enumerate(g.calls) if c.expires_at is not None]
        if not targets:
            raise TapeError(f"{golden}: no time-sensitive entries (none has expires_at)")
    else:
        if not wanted:
            raise TapeError("expire needs --step N or --all-time-sensitive")
        targets = [i for i, c in enumerate(g.calls) if c.seq in wanted]
        missing = wanted - {g.calls[i].seq for i in targets}
        if missing:
            raise TapeError(f"{golden}: no step {', '.join(map(str, sorted(missing)))} on the tape")
    instant = parse_iso(when)
    assert instant is not None
    done = [i for i in targets if (d := parse_iso(g.calls[i].expires_at or "")) is not None and d <= instant]
    if len(done) == len(targets):  # pressing x again must not move an expiry later, nor log a change
        steps_text = ", ".join(f"{g.calls[i].seq} (at {g.calls[i].expires_at})" for i in done)
        raise AlreadyExpired(
            f"{golden}: already expired: step {steps_text}; nothing to do (the next fill re-records expired steps)"
        )
    targets = [i for i in targets if i not in done]
    replace = {}
    details = []
    for i in targets:
        raw = dict(g.calls[i].raw)
        old = raw.get("expires_at")
        details.append(
            f"step {g.calls[i].seq} {g.calls[i].tool}: "
            + (f"expires_at {old} → {when}" if isinstance(old, str) else f"marked expired at {when} (it had no expiry)")
        )
        raw["expires_at"] = when
        replace[i] = dump_line(raw)
    entry = _entry(
        "expire",
        config,
        golden,
        [g.calls[i].seq for i in targets],
        details,
        why.strip() if why and why.strip() else None,
    )
    _commit(config, golden, _rebuild(g.index, replace, []), entry)
    return entry


def restore(config: Config, golden: Path, data: bytes, why: str, candidate: bytes | None = None) -> Entry:
    """Put back an earlier golden (undo), with a changelog entry; optionally its candidate too."""
    golden = Path(golden)
    entry = _entry("undo", config, golden, [], [f"restored the golden as it was before ({len(data)} bytes)"], why)
    with _session(config, golden):
        _commit(config, golden, data, entry)
        if candidate is not None:
            atomic_write(candidate_path(golden), candidate)
    return entry


def restore_candidate(config: Config, golden: Path, data: bytes, why: str) -> Entry:
    """Put back a rejected candidate (undo of a reject), noted in the changelog."""
    golden = Path(golden)
    entry = _entry("undo", config, golden, [], ["restored the rejected candidate"], why)
    with _session(config, golden):
        if os.path.lexists(candidate_path(golden)):
            raise TapeError(f"{golden}: a newer candidate is pending; review it before restoring the rejected one")
        atomic_write(candidate_path(golden), data)
        append_entry(config.changelog, entry, config.redactor())
    return entry


# ---- re-recording -------------------------------------------------------------------
def load_registry(config: Config) -> ToolRegistry:
    """Import the registry named in ``tapes.toml`` (only when a person asks for a re-record)."""
    if not config.registry:
        raise TapeError(f"{config.path or 'tapes.toml'}: no 'tapes.registry' (module:attribute) to re-record with")
    module_name, _, attr = config.registry.partition(":")
    root = str(config.root)
    added = root not in sys.path
    if added:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise TapeError(f"cannot import registry module {module_name!r}: {type(e).__name__}: {e}") from None
    finally:
        if added:
            sys.path.remove(root)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if callable(obj) and not isinstance(obj, ToolRegistry):
        obj = obj()
    if not isinstance(obj, ToolRegistry):
        raise TapeError(f"{config.registry} is not a tapetui ToolRegistry")
    return obj


def rerecord(
    config: Config, golden: Path, seq: int, *, yes: bool = False, registry: ToolRegistry | None = None
) -> Path:
    """Run step ``seq``'s tool live with its recorded arguments; the result becomes a pending candidate.

    Raises:
        TapeError: unknown step, a side-effecting tool without ``yes``, a failing import.
    """
    golden = Path(golden)
    cand = candidate_path(golden)
    refuse_links_out(config.tapes_dir, golden, cand)
    with _session(config, golden):
        return _rerecord_locked(config, golden, cand, seq, yes, registry)


def _rerecord_locked(
    config: Config, golden: Path, cand: Path, seq: int, yes: bool, registry: ToolRegistry | None
) -> Path:
    base = load(cand) if cand.exists() else load(golden)
    try:
        pos = next(i for i, c in enumerate(base.calls) if c.seq == seq)
    except StopIteration:
        raise TapeError(f"{base.path}: no step {seq}") from None
    rec = base.calls[pos]
    reg = registry or load_registry(config)
    tool = reg[rec.tool]
    if tool.side_effect and not yes:
        raise TapeError(f"{rec.tool} has side effects: re-recording step {seq} runs it for real; confirm with --yes")
    redactor = config.redactor()
    manifest = tool.manifest_for(LATEST_FORM, redactor)  # as a recording writes it: tapes.toml's [redact] applies
    args = rec.args if isinstance(rec.args, dict) else {}
    started = utcnow()
    import time as _time

    t0 = _time.perf_counter()
    error = None
    result = None
    try:
        result = tool.fn(**args)
    except Exception as e:
        error = {"type": type(e).__name__, "module": type(e).__module__, "message": redactor.redact_text(str(e))}
    ms = round((_time.perf_counter() - t0) * 1000, 3)
    policy = config.policy(rec.tool)
    ttl = policy.ttl if policy.ttl is not None else tool.ttl
    from datetime import timedelta

    try:
        line = call_line(
            seq=rec.seq,
            tool=rec.tool,
            key=key_of(rec.tool, redactor.redact(args)),
            fingerprint=manifest.fingerprint,
            side_effect=tool.side_effect,
            ms=ms,
            expires_at=iso(started + timedelta(seconds=ttl)) if ttl else None,
            recorded_at=iso(started),
            args=canon(redactor.redact(args)),
            result=None if error else redactor.redact(result),
            error=error,
            requested_tool=rec.requested_tool,
            extra={"rerecorded": True},
        )
    except TypeError as e:
        raise TapeError(f"{rec.tool} returned a value that cannot be recorded: {e}") from None
    manifests = []
    if manifest.fingerprint != rec.fingerprint:
        manifests.append(dump_line(manifest.to_record(tool.side_effect)))
    i = next(i for i in range(len(base.index)) if base.index.lines[i] == rec.line)
    data = _rebuild(base.index, {i: line}, manifests)
    if not cand.exists():
        data = _mark_origin(data, "rerecord")
    atomic_write(cand, data)
    return cand


def _mark_origin(data: bytes, origin: str) -> bytes:
    first, _, rest = data.partition(b"\n")
    try:
        head = orjson.loads(first)
    except orjson.JSONDecodeError:
        head = None
    if isinstance(head, dict) and head.get("type") == "session":
        head["origin"] = origin
        return dump_line(head) + rest
    return dump_line({"type": "session", "v": 1, "created_at": _now(), "origin": origin}) + data


def stats_of(golden: Path) -> dict[str, Any]:
    """Counts for a session: steps, tools, side effects, time-sensitive and expired entries, latest run."""
    idx = read_index(golden, validate=True)
    now = utcnow()
    expired = sum(1 for e in idx.expires.values() if (d := parse_iso(e)) is not None and d <= now)
    out: dict[str, Any] = {
        "steps": len(idx),
        "tools": sorted(set(idx.tools)),
        "side_effect_steps": sum(idx.side_effects),
        "time_sensitive": len(idx.expires),
        "expired": expired,
        "recorded_ms": round(sum(idx.ms), 3),
        "pending_candidate": candidate_path(golden).exists(),
        "torn_tail": idx.torn is not None,
    }
    log = runlog_path(golden)
    if log.exists():
        for ev in reversed(read_run_log(log)):
            if ev.get("event") == "end":
                out["last_run"] = ev.get("stats")
                break
    return out
