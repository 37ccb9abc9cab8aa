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

import hashlib
import importlib
import os
import secrets
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from rapidfuzz.distance import Levenshtein

from tapetui.canon import canon
from tapetui.changelog import Entry, append_entry, has_entry
from tapetui.config import Config
from tapetui.errors import TapeError, TooDeep
from tapetui.fingerprint import ToolManifest, explain_manifest_change
from tapetui.jsondiff import Change, IgnoreRules, diff_values, format_changes
from tapetui.registry import ToolRegistry
from tapetui.runlog import read_run_log
from tapetui.store import candidate_path, iter_goldens, journal_path, refuse_links_out, runlog_path, session_name
from tapetui.tape import iso, key_of, parse_iso, utcnow
from tapetui.tapefile import CallRecord, TapeIndex, atomic_write, call_line, dump_line, fsync_dir, read_index

__all__ = ["Comparison", "Finding", "SessionReport", "StepDiff", "accept", "check", "compare", "compare_run",
           "expire", "pending", "recover", "rerecord", "reject", "restore", "restore_candidate"]


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
    ``result_only`` marks a ``changed`` step whose arguments match but result differs.
    """

    kind: str
    old: CallRecord | None
    new: CallRecord | None
    arg_changes: tuple[Change, ...] = ()
    result_changes: tuple[Change, ...] = ()
    fingerprint: tuple[str, ...] = ()

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
        if not contracts_shown:
            out += [f"{head}  [CONTRACT] {line}" for line in self.fingerprint]
        elif self.fingerprint and len(out) == 0:
            out.append(f"{head}  recorded under the old contract of {self.tool}")
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "tool": self.tool, "seq": self.seq,
            "new_seq": self.new.seq if self.new else None,
            "old_key": self.old.key if self.old else None, "new_key": self.new.key if self.new else None,
            "arg_changes": [_change_json(c) for c in self.arg_changes],
            "result_changes": [_change_json(c) for c in self.result_changes],
            "fingerprint": list(self.fingerprint),
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
            out.append(f"[TOOLS] executed sequence changed (edit distance {self.edit_distance}): "
                       f"{list(self.old_tools)} → {list(self.new_tools)}")
        if self.requested_distance and (self.old_requested != self.old_tools or self.new_requested != self.new_tools):
            out.append(f"[TOOLS] model-requested sequence (edit distance {self.requested_distance}): "
                       f"{list(self.old_requested)} → {list(self.new_requested)}")
        for tool, (old, new, why) in sorted(self.contracts.items()):
            out.append(f"[CONTRACT] {tool}  fingerprint {old} → {new}")
            out += [f"[CONTRACT] {tool}  {line}" for line in why]
        for s in self.changed_steps:
            out += s.lines(contracts_shown=s.tool in self.contracts)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "golden": str(self.golden), "other": str(self.other),
            "tools": {"old": list(self.old_tools), "new": list(self.new_tools), "edit_distance": self.edit_distance},
            "requested": {"old": list(self.old_requested), "new": list(self.new_requested),
                          "edit_distance": self.requested_distance},
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
    rules = (config.ignore_rules() if config else IgnoreRules())
    old_tools = tuple(c.tool for c in g.calls)
    new_tools = tuple(c.tool for c in o.calls)
    contracts: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    for tool in sorted(set(old_tools) & set(new_tools)):
        gm, om = g.manifests.get(tool), o.manifests.get(tool)
        old_fp = gm.fingerprint if gm else next(c.fingerprint for c in g.calls if c.tool == tool)
        new_fp = om.fingerprint if om else next(c.fingerprint for c in o.calls if c.tool == tool)
        if old_fp != new_fp:
            contracts[tool] = (old_fp, new_fp, tuple(explain_manifest_change(gm, om)))
    steps: list[StepDiff] = []
    for op in Levenshtein.opcodes(list(old_tools), list(new_tools)):
        olds = g.calls[op.src_start:op.src_end]
        news = o.calls[op.dest_start:op.dest_end]
        if op.tag == "equal":
            steps += [_pair(a, b, rules, contracts, (g.path, o.path)) for a, b in zip(olds, news)]
        elif op.tag == "replace":
            steps += [StepDiff("replaced", a, b) for a, b in zip(olds, news)]
            steps += [StepDiff("skipped", a, None) for a in olds[len(news):]]
            steps += [StepDiff("added", None, b) for b in news[len(olds):]]
        elif op.tag == "delete":
            steps += [StepDiff("skipped", a, None) for a in olds]
        elif op.tag == "insert":
            steps += [StepDiff("added", None, b) for b in news]
    return Comparison(
        golden=g.path, other=o.path, old_tools=old_tools, new_tools=new_tools,
        edit_distance=Levenshtein.distance(list(old_tools), list(new_tools)),
        old_requested=_requested(g.calls), new_requested=_requested(o.calls),
        requested_distance=Levenshtein.distance(list(_requested(g.calls)), list(_requested(o.calls))),
        steps=tuple(steps), contracts=contracts,
    )


def _pair(a: CallRecord, b: CallRecord, rules: IgnoreRules, contracts: dict[str, Any], where: tuple[Path, Path]
          ) -> StepDiff:
    try:
        return _pair_diff(a, b, rules, contracts)
    except TooDeep:
        raise TooDeep(f"{where[0]}:{a.line} and {where[1]}:{b.line}: step {a.seq} ({a.tool})") from None


def _pair_diff(a: CallRecord, b: CallRecord, rules: IgnoreRules, contracts: dict[str, Any]) -> StepDiff:
    fp = tuple(contracts[a.tool][2]) if a.fingerprint != b.fingerprint and a.tool in contracts else ()
    if a.fingerprint != b.fingerprint and not fp:
        fp = (f"fingerprint {a.fingerprint} → {b.fingerprint}",)
    args = () if a.key == b.key else tuple(diff_values(canon(a.args), canon(b.args), rules))
    old_res = {"error": a.error} if a.error is not None else a.result
    new_res = {"error": b.error} if b.error is not None else b.result
    res = tuple(diff_values(old_res, new_res, rules))
    kind = "changed" if (args or res or fp) else "same"
    return StepDiff(kind, a, b, args, res, fp)


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
        return {"kind": self.kind, "seq": self.seq, "tool": self.tool, "text": self.text, "warning": self.warning,
                **self.data}


def compare_run(golden: TapeIndex, events: list[dict[str, Any]], config: Config | None = None) -> list[Finding]:
    """What a run log says went wrong against its golden."""
    rules = config.ignore_rules() if config else IgnoreRules()
    out: list[Finding] = []
    executed: list[str] = []
    unused: list[dict[str, Any]] = []
    end: dict[str, Any] | None = None
    for ev in events:
        kind, seq, tool = ev.get("event"), ev.get("seq"), ev.get("tool")
        if kind in ("hit", "drift", "miss", "live", "fingerprint", "record") and isinstance(tool, str):
            if kind != "fingerprint" or not ev.get("allowed"):
                executed.append(tool)
        if kind == "drift":
            changes = [Change(p, o, n) for p, o, n in ev.get("changes") or []]
            shown = [c for c in changes if not rules.ignores(c.path.replace("[", ".").replace("]", "").split("."))]
            if not shown:
                continue
            for line in format_changes(shown, prefix="args"):
                out.append(Finding("drift", f"{tool}  step {seq}  {line}", seq, tool,
                                   {"recorded_key": ev.get("recorded_key"), "key": ev.get("key")}))
        elif kind == "miss":
            near = ev.get("nearest")
            detail = "; ".join(format_changes([Change(p, o, n) for p, o, n in ev.get("changes") or []], "args"))
            why = f" ({ev['reason']})" if ev.get("reason") else ""
            text = (f"{tool}  step {seq}  miss{why}: {ev.get('key')} not on tape"
                    + ((f"; nearest is step {near}: {detail}" if detail else f"; recorded at step {near}")
                       if near else f"; no recorded {tool} call"))
            out.append(Finding("miss", text, seq, tool, {"key": ev.get("key")}))
        elif kind == "fingerprint" and not ev.get("allowed"):
            out.append(Finding("fingerprint", f"{tool}  step {seq}  [CONTRACT] fingerprint {ev.get('recorded')} → "
                               f"{ev.get('live')}", seq, tool))
            out += [Finding("fingerprint", f"{tool}  step {seq}  [CONTRACT] {line}", seq, tool)
                    for line in ev.get("explanation") or []]
        elif kind == "unused":
            unused.append(ev)
        elif kind == "stale":
            out.append(Finding("stale", f"{tool}  step {seq}  expired at {ev.get('expires_at')} "
                               f"(stale policy {ev.get('policy')})", seq, tool, warning=ev.get("policy") == "warn"))
        elif kind == "invalid":
            out.append(Finding("invalid", f"run log line {ev.get('line')}: {ev.get('problem')}"))
        elif kind == "end":
            end = ev
            err = ev.get("error")
            if err and err.get("type") not in ("TapeDrift", "TapeMiss", "ToolDriftError", "TapeStale"):
                out.append(Finding("error", f"run ended with {err.get('type')}: {err.get('message')}"))
    stopped = end is not None and end.get("error")
    if stopped and unused:
        # The run stopped at a drift or miss: the steps after it were not reached, not skipped.
        steps = ", ".join(str(e.get("seq")) for e in unused)
        out.append(Finding("unused", f"run stopped at step {len(executed)} ({end['error'].get('type')}); "
                           f"step(s) {steps} not reached", data={"steps": [e.get("seq") for e in unused]}))
    else:
        out += [Finding("unused", f"{e.get('tool')}  step {e.get('seq')}  unused: recorded but never called",
                        e.get("seq"), e.get("tool")) for e in unused]
    recorded = list(golden.tools)
    dist = Levenshtein.distance(recorded, executed)
    if dist and end is not None and not stopped:
        out.insert(0, Finding("tools", f"[TOOLS] executed sequence changed (edit distance {dist}): "
                              f"{recorded} → {executed}", data={"edit_distance": dist}))
    return out


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
        return {"session": self.session, "golden": str(self.golden), "ok": self.ok, "error": self.error,
                "findings": [f.to_json() for f in self.findings],
                "candidate": self.comparison.to_json() if self.comparison else None}


def check_session(golden: Path, config: Config) -> SessionReport:
    rep = SessionReport(session_name(golden, config.tapes_dir), golden)
    try:
        cand, log = candidate_path(golden), runlog_path(golden)
        refuse_links_out(config.tapes_dir, golden, cand, log)
        idx = read_index(golden, validate=True) if golden.exists() else None
        if idx is not None and idx.torn is not None:
            rep.findings.append(Finding("torn", f"torn last line {idx.torn.line} ({idx.torn.size} bytes); "
                                        "the next append sets it aside"))
        if idx is not None and log.exists():
            rep.findings += compare_run(idx, read_run_log(log), config)
        if cand.exists():
            if idx is None:
                rep.findings.append(Finding("pending", f"pending new session {cand.name} (no golden yet)"))
            else:
                cmp = compare(load(golden), load(cand), config)
                rep.comparison = cmp
                n = len(cmp.changed_steps)
                rep.findings.append(Finding("pending", f"pending candidate {cand.name}: {n} step(s) differ",
                                            data={"clean": cmp.clean}))
                rep.findings += [Finding("candidate", line) for line in cmp.lines()]
    except TapeError as e:
        rep.error = str(e)
    return rep


def check(tapes_dir: Path, config: Config, sessions: Iterable[Path] | None = None) -> list[SessionReport]:
    """Check every session of a folder (or the given goldens)."""
    recover(config)
    goldens = list(sessions) if sessions is not None else list(iter_goldens(tapes_dir))
    return [check_session(g, config) for g in goldens]


def pending(config: Config) -> list[tuple[Path, Path]]:
    """``(golden, candidate)`` of every candidate waiting for review."""
    return [(g, candidate_path(g)) for g in iter_goldens(config.tapes_dir) if candidate_path(g).exists()]


# ---- committing a golden ------------------------------------------------------------
def _now() -> str:
    return iso(datetime.now(UTC).replace(microsecond=0))


def _tmp_of(golden: Path) -> Path:
    return golden.with_name(f".{golden.name}.next")


def _commit(config: Config, golden: Path, data: bytes | None, entry: Entry, remove_candidate: bool = False) -> None:
    """Change a golden and write its changelog entry, crash-safely (see the module doc)."""
    recover(config)
    tmp = _tmp_of(golden)
    if data is not None:
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    journal = {"id": entry.id, "golden": golden.name, "tmp": tmp.name if data is not None else None,
               "sha256": hashlib.sha256(data).hexdigest() if data is not None else None,
               "remove_candidate": remove_candidate,
               "entry": {"when": entry.when, "action": entry.action, "session": entry.session,
                         "steps": list(entry.steps), "details": list(entry.details), "rationale": entry.rationale}}
    atomic_write(journal_path(golden), orjson.dumps(journal))
    _finish(config, golden, journal)


def _finish(config: Config, golden: Path, journal: dict[str, Any]) -> None:
    e = journal["entry"]
    entry = Entry(journal["id"], e["when"], e["action"], e["session"], tuple(e["steps"]), tuple(e["details"]),
                  e["rationale"])
    if not has_entry(config.changelog, entry.id):
        append_entry(config.changelog, entry, config.redactor())
    if journal.get("tmp"):
        tmp = golden.with_name(journal["tmp"])
        if tmp.exists():
            os.replace(tmp, golden)
            fsync_dir(golden.parent)
    if journal.get("remove_candidate"):
        candidate_path(golden).unlink(missing_ok=True)
    journal_path(golden).unlink(missing_ok=True)
    fsync_dir(golden.parent)


def recover(config: Config) -> list[str]:
    """Finish interrupted commits and drop temp goldens that never got a journal.

    Returns:
        One line per repair, for the caller to show.
    """
    notes: list[str] = []
    root = config.tapes_dir
    if not root.is_dir():
        return notes
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        here = Path(dirpath)
        journals = {f for f in filenames if f.endswith(".jsonl.journal")}
        for jf in sorted(journals):
            golden = here / jf[: -len(".journal")]
            try:
                journal = orjson.loads((here / jf).read_bytes())
            except (OSError, orjson.JSONDecodeError) as e:
                notes.append(f"{here / jf}: unreadable journal left in place: {e}")
                continue
            _finish(config, golden, journal)
            notes.append(f"{golden}: completed an interrupted {journal['entry']['action']} "
                         f"(changelog entry {journal['id']})")
        for f in filenames:
            if f.startswith(".") and f.endswith(".jsonl.next") and f"{f[1:-5]}.journal" not in journals:
                (here / f).unlink(missing_ok=True)
                notes.append(f"{here / f}: removed an unfinished temp golden (the golden was not changed)")
    return notes


def _entry(action: str, config: Config, golden: Path, steps: Iterable[int], details: list[str],
           rationale: str | None) -> Entry:
    return Entry(secrets.token_hex(6), _now(), action, session_name(golden, config.tapes_dir),
                 tuple(sorted(set(steps))), tuple(details), rationale)


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
        parts.append(data[pos:index.offsets[i]])
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
    if not cand.exists():
        raise TapeError(f"{golden}: no pending candidate to accept")
    c = load(cand)
    if not golden.exists():
        entry = _entry("accept (new session)", config, golden, [x.seq for x in c.calls],
                       [f"new session with {len(c.calls)} steps: {[x.tool for x in c.calls]}"], why)
        _commit(config, golden, cand.read_bytes(), entry, remove_candidate=True)
        return entry
    g = load(golden)
    cmp = compare(g, c, config)
    if steps is None:
        details = _details(cmp, cmp.changed_steps) + ([] if cmp.changed_steps else ["no differences"])
        entry = _entry("accept", config, golden, [s.seq for s in cmp.changed_steps if s.old], details, why)
        _commit(config, golden, cand.read_bytes(), entry, remove_candidate=True)
        return entry
    wanted = sorted(set(steps))
    by_seq = {s.old.seq: s for s in cmp.steps if s.old is not None and s.kind in ("same", "changed")}
    replace: dict[int, bytes] = {}
    manifests: list[bytes] = []
    chosen = []
    for n in wanted:
        sd = by_seq.get(n)
        if sd is None or sd.new is None:
            raise TapeError(f"{golden}: step {n} does not line up with a step of the candidate; accept the whole "
                            "candidate instead")
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
        out += [f"step {s.seq} contract: {line}" for line in s.fingerprint]
    return out


def reject(config: Config, golden: Path, why: str | None = None) -> Entry | None:
    """Discard the pending candidate; a changelog note only when a reason is given."""
    golden = Path(golden)
    cand = candidate_path(golden)
    if not cand.exists():
        raise TapeError(f"{golden}: no pending candidate to reject")
    entry = None
    if why and why.strip():
        entry = _entry("reject", config, golden, [], [f"candidate {cand.name} discarded"], why.strip())
        append_entry(config.changelog, entry, config.redactor())
    cand.unlink()
    return entry


def expire(config: Config, golden: Path, steps: Iterable[int] | None = None, *, all_time_sensitive: bool = False,
           why: str | None = None, now: datetime | None = None) -> Entry:
    """Mark entries expired (``expires_at`` = now) so the next ``fill`` re-records them."""
    golden = Path(golden)
    refuse_links_out(config.tapes_dir, golden)
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
    replace = {}
    details = []
    for i in targets:
        raw = dict(g.calls[i].raw)
        details.append(f"step {g.calls[i].seq} {g.calls[i].tool}: expires_at {raw.get('expires_at')} → {when}")
        raw["expires_at"] = when
        replace[i] = dump_line(raw)
    entry = _entry("expire", config, golden, [g.calls[i].seq for i in targets], details,
                   why.strip() if why and why.strip() else None)
    _commit(config, golden, _rebuild(g.index, replace, []), entry)
    return entry


def restore(config: Config, golden: Path, data: bytes, why: str, candidate: bytes | None = None) -> Entry:
    """Put back an earlier golden (undo), with a changelog entry; optionally its candidate too."""
    golden = Path(golden)
    entry = _entry("undo", config, golden, [], [f"restored the golden as it was before ({len(data)} bytes)"], why)
    _commit(config, golden, data, entry)
    if candidate is not None:
        atomic_write(candidate_path(golden), candidate)
    return entry


def restore_candidate(config: Config, golden: Path, data: bytes, why: str) -> Entry:
    """Put back a rejected candidate (undo of a reject), noted in the changelog."""
    golden = Path(golden)
    atomic_write(candidate_path(golden), data)
    entry = _entry("undo", config, golden, [], ["restored the rejected candidate"], why)
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


def rerecord(config: Config, golden: Path, seq: int, *, yes: bool = False,
             registry: ToolRegistry | None = None) -> Path:
    """Run step ``seq``'s tool live with its recorded arguments; the result becomes a pending candidate.

    Raises:
        TapeError: unknown step, a side-effecting tool without ``yes``, a failing import.
    """
    golden = Path(golden)
    cand = candidate_path(golden)
    refuse_links_out(config.tapes_dir, golden, cand)
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
        line = call_line(seq=rec.seq, tool=rec.tool, key=key_of(rec.tool, redactor.redact(args)),
                         fingerprint=tool.fingerprint, side_effect=tool.side_effect, ms=ms,
                         expires_at=iso(started + timedelta(seconds=ttl)) if ttl else None,
                         recorded_at=iso(started), args=canon(redactor.redact(args)),
                         result=None if error else redactor.redact(result), error=error,
                         requested_tool=rec.requested_tool, extra={"rerecorded": True})
    except TypeError as e:
        raise TapeError(f"{rec.tool} returned a value that cannot be recorded: {e}") from None
    manifests = []
    if tool.fingerprint != rec.fingerprint:
        manifests.append(dump_line(tool.manifest.to_record(tool.side_effect)))
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
        "steps": len(idx), "tools": sorted(set(idx.tools)), "side_effect_steps": sum(idx.side_effects),
        "time_sensitive": len(idx.expires), "expired": expired, "recorded_ms": round(sum(idx.ms), 3),
        "pending_candidate": candidate_path(golden).exists(), "torn_tail": idx.torn is not None,
    }
    log = runlog_path(golden)
    if log.exists():
        for ev in reversed(read_run_log(log)):
            if ev.get("event") == "end":
                out["last_run"] = ev.get("stats")
                break
    return out
