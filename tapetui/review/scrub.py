"""``tapetui scrub``: redact what is already on disk with the rules in force now.

New redaction rules (a new tapetui, or ``[redact]`` in ``tapes.toml``) apply to what is
recorded from then on; the tapes, run logs and index-cache entries written before keep
what they hold. :func:`scrub` rewrites every file of every session under a tapes folder
with the current rules:

* goldens, candidates and older candidates (``NAME.samples/``): arguments, results, errors,
  headers and unknown fields re-redacted; a call whose arguments changed gets the key of
  its new arguments (so the next replay finds it); a tool line that holds a secret-looking
  value verbatim (fingerprint form 1) moves to form 2, and its calls' fingerprints with it
  (see :mod:`tapetui.core.fingerprint`); a form-2 line is recomputed under the current rules;
  a torn tail is redacted as text and kept;
* run logs and ``.torn`` files, line by line;
* index-cache entries of the rewritten tapes, and every entry of this user's cache whose
  header or tool lines the current rules would change, are dropped (the next open of a big
  tape makes a new one).

Each session is rewritten under its session lock (:func:`tapetui.core.locks.session_lock`), so
never while a recording or a review action holds it; a session that changed gets one
changelog entry, committed with the golden atomically (:func:`tapetui.review.journal.commit`),
before its other files are replaced one by one (each atomically): a crash leaves an entry
that names every file it changed, and a second run finishes the rest. The report says
what was removed by rule name and count, never the secret. The changelog itself is not
rewritten: its entries were redacted when written, and appenders hold it open.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

import tapetui.review.history as history
import tapetui.review.journal as journal
from tapetui.core import cachedir, indexcache
from tapetui.core.canon import canon, canonical_json
from tapetui.core.config import Config
from tapetui.core.errors import TapeError, TooDeep
from tapetui.core.files import atomic_write
from tapetui.core.fingerprint import CONTRACT_FIELDS, ToolManifest, in_form, redact_manifest
from tapetui.core.keys import key_of_json
from tapetui.core.redact import Redactor
from tapetui.core.store import candidate_path, iter_goldens, refuse_links_out, runlog_path, samples_of, session_name
from tapetui.core.tapefile import dump_line, torn_path
from tapetui.core.turns import TURN, redact_events, turn_key_of

__all__ = ["FileScrub", "ScrubReport", "scrub"]

# Call-line fields that are structure, not data: never redacted (the others are).
_CALL_FIELDS = frozenset(
    {
        "type",
        "seq",
        "tool",
        "key",
        "fingerprint",
        "side_effect",
        "ms",
        "expires_at",
        "recorded_at",
        "args",
        "result",
        "error",
    }
)
_TOOL_FIELDS = frozenset({"type", "name", "version", "fingerprint", "form", "params", "schema", "side_effect"})


@dataclass
class FileScrub:
    """What scrubbing one file changed: lines, removals by rule, steps whose key was recomputed."""

    path: Path
    kind: str  # golden, candidate, sample, run log, torn
    session: str = ""
    lines: int = 0
    rules: Counter[str] = field(default_factory=Counter)
    rekeyed: list[int] = field(default_factory=list)
    forms: list[str] = field(default_factory=list)  # tools whose fingerprint moved to form 2 or was recomputed
    data: bytes | None = field(default=None, repr=False)
    counter: Redactor | None = field(default=None, repr=False)  # the counting twin of the rules

    @property
    def changed(self) -> bool:
        return self.data is not None

    def summary(self) -> str:
        rules = ", ".join(f"{name} ×{n}" for name, n in sorted(self.rules.items())) or "fingerprints only"
        out = f"{self.path.name} ({self.kind}): {self.lines} line(s) re-redacted: {rules}"
        if self.rekeyed:
            out += f"; keys recomputed for step(s) {', '.join(map(str, self.rekeyed))}"
        if self.forms:
            out += f"; fingerprints recomputed (form 2 or later) for {', '.join(self.forms)}"
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "path": str(self.path),
            "kind": self.kind,
            "lines": self.lines,
            "rules": dict(sorted(self.rules.items())),
            "rekeyed_steps": self.rekeyed,
            "form2_tools": self.forms,
        }


@dataclass
class ScrubReport:
    """Everything one :func:`scrub` did (or, with ``dry_run``, would do)."""

    tapes_dir: Path
    dry_run: bool = False
    sessions: int = 0
    files: list[FileScrub] = field(default_factory=list)
    changed_sessions: list[str] = field(default_factory=list)
    entries: dict[str, str] = field(default_factory=dict)  # session → changelog entry id
    cache_dropped: int = 0
    history_dropped: int = 0  # undo records whose kept bytes held what the rules remove
    errors: list[str] = field(default_factory=list)

    @property
    def rules(self) -> Counter[str]:
        total: Counter[str] = Counter()
        for f in self.files:
            total.update(f.rules)
        return total

    @property
    def changed(self) -> bool:
        return bool(self.files) or self.cache_dropped > 0 or self.history_dropped > 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tapes_dir": str(self.tapes_dir),
            "dry_run": self.dry_run,
            "ok": not self.errors,
            "sessions_checked": self.sessions,
            "sessions_changed": self.changed_sessions,
            "files": [f.to_json() for f in self.files],
            "removed_by_rule": dict(sorted(self.rules.items())),
            "changelog_entries": self.entries,
            "cache_entries_dropped": self.cache_dropped,
            "history_records_dropped": self.history_dropped,
            "errors": self.errors,
        }


def scrub(
    config: Config, tapes_dir: Path | None = None, *, dry_run: bool = False, redactor: Redactor | None = None
) -> ScrubReport:
    """Re-redact every session under ``tapes_dir`` (default: the config's) with the current rules.

    Args:
        dry_run: change nothing; report what would be removed.
        redactor: the rules (default: ``config.redactor()``, the defaults plus ``tapes.toml [redact]``).

    Raises:
        TapeError: the folder does not exist. Problems with one session (a malformed tape, a
            session another process holds) are in the report's ``errors``; the other sessions
            are scrubbed.
    """
    root = Path(tapes_dir or config.tapes_dir)
    if not root.is_dir():
        raise TapeError(f"{root}: no such folder")
    rules = redactor or config.redactor()
    report = ScrubReport(root.resolve(), dry_run=dry_run)
    unlisted: list[tuple[Path, str]] = []
    for golden in iter_goldens(root, unlisted=unlisted):
        report.sessions += 1
        try:
            _scrub_session(config, golden, rules, report, dry_run)
        except TapeError as e:
            report.errors.append(str(e))
        except OSError as e:
            report.errors.append(f"{e.filename or golden}: {e.strerror or e}")
    report.errors += [
        f"{folder}: a folder scrub cannot list ({why}): its sessions are not scrubbed" for folder, why in unlisted
    ]
    _scrub_history(config, rules, report, dry_run)
    if not dry_run:
        report.cache_dropped += indexcache.drop_where(lambda meta: _meta_needs_scrub(meta, rules))
    else:
        report.cache_dropped += _count_cache(rules)
    return report


# ---- one session ----------------------------------------------------------------------
def _scrub_session(config: Config, golden: Path, r: Redactor, report: ScrubReport, dry_run: bool) -> None:
    # The session lock (tapetui.core.locks.session_lock) and, under it, what a dead process left finished first:
    # reading before that recovery would compute the new golden from one the recovery then replaces.
    with journal.session(config, golden):
        cand, log = candidate_path(golden), runlog_path(golden)
        refuse_links_out(config.tapes_dir, golden, cand, log)
        plan: list[FileScrub] = []
        tapes = [(golden, "golden"), (cand, "candidate"), *((p, "sample") for p in samples_of(golden))]
        for path, kind in tapes:
            plan.append(_scrub_file(path, kind, lambda data, f: _tape_bytes(data, f, r)))
            plan.append(_scrub_file(torn_path(path), "torn", lambda data, f: _text_lines(data, f, r)))
        plan.append(_scrub_file(log, "run log", lambda data, f: _text_lines(data, f, r)))
        plan.append(_scrub_file(torn_path(log), "torn", lambda data, f: _text_lines(data, f, r)))
        changed = [f for f in plan if f.changed]
        if not changed:
            return
        name = session_name(golden, config.tapes_dir)
        for f in changed:
            f.session = name
        report.files += changed
        report.changed_sessions.append(name)
        if dry_run:
            return
        g = next((f for f in changed if f.path == golden), None)
        details = [f.summary() for f in changed]
        rekeyed = g.rekeyed if g is not None else []
        entry = journal.new_entry(
            "scrub",
            config,
            golden,
            rekeyed,
            details,
            "tapetui scrub: re-redacted with the redaction rules in force now",
        )
        history.forget(config, golden)  # the bytes it kept may hold what this removes; undo stops here
        journal.commit(config, golden, g.data if g is not None else None, entry, before=None)
        report.entries[name] = entry.id
        for f in changed:
            if f is not g:
                assert f.data is not None
                atomic_write(f.path, f.data)
        for f in changed:  # an entry of a rewritten tape is stale, and may hold its old tool lines
            cached = cachedir.entry_path(f.path) if f.kind in ("golden", "candidate", "sample") else None
            if cached is not None and cached.exists():
                cachedir.forget(f.path)
                report.cache_dropped += 1


def _scrub_history(config: Config, r: Redactor, report: ScrubReport, dry_run: bool) -> None:
    """Undo records keep the bytes a change replaced: any that hold what the rules remove now are dropped
    (the undo they allowed goes with them), for every session, also those whose golden is gone."""
    root = config.root / history.HISTORY_DIR
    try:
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            return  # not a folder tapetui made: history refuses to use it, and so does this
    except FileNotFoundError:
        return
    for folder, _dirs, names in os.walk(root, followlinks=False):
        for stem in sorted({n.rpartition(".")[0] for n in names if n.endswith((".golden", ".candidate"))}):
            kept = [Path(folder) / f"{stem}{ext}" for ext in (".golden", ".candidate")]
            try:
                holds = any(
                    _scrub_file(p, "history", lambda data, f: _tape_bytes(data, f, r)).changed
                    for p in kept
                    if os.path.lexists(p)
                )
            except TapeError:
                holds = True  # kept bytes that are not a tape this version reads: not kept past a scrub
            if not holds:
                continue
            report.history_dropped += 1
            if not dry_run:
                for n in names:
                    if n.rpartition(".")[0] == stem:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(Path(folder) / n)


def _scrub_file(path: Path, kind: str, fn: Any) -> FileScrub:
    f = FileScrub(path, kind)
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return f
    if not stat.S_ISREG(st.st_mode):
        raise TapeError(f"{path}: not a regular file; not scrubbed (remove or replace it)")
    data = path.read_bytes()
    new = fn(data, f)
    if new != data:
        f.data = new
    return f


# ---- tapes ----------------------------------------------------------------------------
def _tape_bytes(data: bytes, f: FileScrub, r: Redactor) -> bytes:
    """A tape's bytes with every line re-redacted; unchanged lines keep their bytes."""
    end = data.rfind(b"\n") + 1
    body, tail = data[:end], data[end:]
    lines = body.split(b"\n")[:-1] if body else []
    objs: list[Any] = []
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            objs.append(None)
            continue
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise TapeError(f"{f.path}:{n}: invalid JSON ({e}); not scrubbed: fix or remove the line first") from None
        if not isinstance(obj, dict):
            raise TapeError(f"{f.path}:{n}: expected a JSON object; not scrubbed: fix or remove the line first")
        objs.append(obj)
    # Tool lines first: a call's fingerprint follows its tool line into form 2.
    fps: dict[tuple[str, str], str] = {}
    out: list[bytes] = []
    new_tools: dict[int, bytes] = {}
    for n, obj in enumerate(objs):
        if obj is not None and obj.get("type") == "tool":
            tool_line = _tool_line(obj, f, r, fps)
            if tool_line is not None:
                new_tools[n] = tool_line
    for n, (raw, obj) in enumerate(zip(lines, objs, strict=True)):
        if obj is None:
            out.append(raw + b"\n")
            continue
        kind = obj.get("type")
        if n in new_tools:
            line: bytes | None = new_tools[n]
        elif kind == "tool":
            line = None
        elif kind == "call" or (kind is None and "seq" in obj and "tool" in obj):
            line = _call_line(obj, f, r, fps, n + 1)
        elif kind == TURN:
            line = _turn_line(obj, f, r, fps, n + 1)
        else:
            line = _other_line(obj, f, r)
        if line is None:
            out.append(raw + b"\n")
        else:
            f.lines += 1
            out.append(line)
    if tail.strip():  # a torn last line: redacted as text, kept as the torn tail it is
        new_tail = _redact_bytes(tail, r, f)
        if new_tail != tail:
            f.lines += 1
        tail = new_tail
    return b"".join(out) + tail


def _counting(r: Redactor, f: FileScrub) -> Redactor:
    if f.counter is None:
        f.counter = r.counting()
    return f.counter


def _collect(c: Redactor, f: FileScrub) -> None:
    f.rules.update(c.counts)
    c.counts.clear()


def _tool_line(obj: dict[str, Any], f: FileScrub, r: Redactor, fps: dict[tuple[str, str], str]) -> bytes | None:
    c = _counting(r, f)
    params_in, schema_in = obj.get("params") or [], obj.get("schema") or {}
    if not isinstance(params_in, list) or not isinstance(schema_in, dict):
        return None
    params, schema = redact_manifest(tuple(params_in), schema_in, c)
    rec = dict(obj)
    content = list(params) != params_in or schema != schema_in
    changed = content
    if content:
        rec["params"], rec["schema"] = list(params), schema
    changed = _redact_into(rec, obj, [k for k in obj if k not in _TOOL_FIELDS], c) or changed
    form = obj.get("form", 1)
    m = ToolManifest.from_record(obj)
    if (form == 1 and content) or form in (2, 3):
        target = 2 if form == 1 else form  # a form-1 line holds no form-3 field (description ...): form 2
        new = in_form(m, target, r)
        if new.fingerprint != m.fingerprint or form == 1:
            fps[(m.name, m.fingerprint)] = new.fingerprint
            rec = {
                **{k: v for k, v in rec.items() if k not in ("params", "schema", "side_effect", *CONTRACT_FIELDS)},
                "fingerprint": new.fingerprint,
                "form": target,
                "params": list(new.params),
                "schema": new.schema,
                "side_effect": obj.get("side_effect", False),
                **{k: v for k, v in new.to_record(False).items() if k in CONTRACT_FIELDS},
            }
            f.forms.append(m.name)
            changed = True
    _collect(c, f)
    return dump_line(_ordered_tool(rec)) if changed else None


def _ordered_tool(rec: dict[str, Any]) -> dict[str, Any]:
    head = ("type", "name", "version", "fingerprint", "form", "params", "schema", "side_effect")
    return {**{k: rec[k] for k in head if k in rec}, **{k: v for k, v in rec.items() if k not in head}}


def _call_line(
    obj: dict[str, Any], f: FileScrub, r: Redactor, fps: dict[tuple[str, str], str], line: int
) -> bytes | None:
    c = _counting(r, f)
    rec = dict(obj)
    changed = False
    tool = obj.get("tool")
    args = obj.get("args")
    if args is not None:
        try:
            old_json = canonical_json(canon(args))
            redacted = c.redact(args)  # as passed: key order, whitespace and None values kept (README)
            new_json = canonical_json(canon(redacted))
        except (TypeError, TooDeep) as e:
            raise TapeError(f"{f.path}:{line}: call args: {e}; not scrubbed") from None
        if new_json != old_json:
            rec["args"] = redacted
            if isinstance(tool, str):
                rec["key"] = key_of_json(tool, new_json)
                if isinstance(obj.get("seq"), int):
                    f.rekeyed.append(obj["seq"])
            changed = True
    outcome = [k for k in ("result", "error") if k in obj]
    changed = _redact_into(rec, obj, outcome + [k for k in obj if k not in _CALL_FIELDS], c) or changed
    fp = obj.get("fingerprint")
    if isinstance(tool, str) and isinstance(fp, str) and (tool, fp) in fps:
        rec["fingerprint"] = fps[(tool, fp)]
        changed = True
    _collect(c, f)
    return dump_line(rec) if changed else None


def _turn_line(
    obj: dict[str, Any], f: FileScrub, r: Redactor, fps: dict[tuple[str, str], str], line: int
) -> bytes | None:
    """A model turn re-redacted: its request (its key recomputed when the request changed), its response, usage and
    error; its stream's events as a stream is redacted (each part's joined text); its offered tools' fingerprints
    following their tool lines into a newer form."""
    c = _counting(r, f)
    rec = dict(obj)
    try:
        request = obj.get("request")
        new_request = canon(c.redact(request))
        if new_request != canon(request):
            rec["request"] = new_request
            if isinstance(obj.get("model"), str):
                rec["key"] = turn_key_of(obj["model"], new_request)
                if isinstance(obj.get("seq"), int):
                    f.rekeyed.append(obj["seq"])
        events = obj.get("events")
        if isinstance(events, list):
            new_events = redact_events(events, c, f"{f.path}:{line}")
            if new_events != events:
                rec["events"] = new_events
    except (TypeError, TapeError) as e:
        raise TapeError(
            f"{f.path}:{line}: model turn: {str(e).removeprefix(f'{f.path}:{line}: ')}; not scrubbed"
        ) from None
    skip = {"type", "request", "events", "key", "offered"}
    _redact_into(rec, obj, [k for k in obj if k not in skip], c)
    offered = obj.get("offered")
    if isinstance(offered, dict):
        moved = {n: fps.get((n, fp), fp) if isinstance(fp, str) else fp for n, fp in offered.items()}
        if moved != offered:
            rec["offered"] = moved
    _collect(c, f)
    return dump_line(rec) if rec != obj else None


def _other_line(obj: dict[str, Any], f: FileScrub, r: Redactor) -> bytes | None:
    c = _counting(r, f)
    new = c.redact({k: v for k, v in obj.items() if k != "type"})
    _collect(c, f)
    if all(new.get(k) is v for k, v in obj.items() if k != "type"):
        return None
    return dump_line({"type": obj["type"], **new} if "type" in obj else new)


# ---- run logs and torn files: line by line ---------------------------------------------
def _text_lines(data: bytes, f: FileScrub, r: Redactor) -> bytes:
    """Each line re-redacted: a JSON object as data, anything else as text."""
    out = []
    for raw in data.split(b"\n"):
        new = _redact_bytes(raw, r, f)
        if new != raw:
            f.lines += 1
        out.append(new)
    return b"\n".join(out)


def _redact_bytes(raw: bytes, r: Redactor, f: FileScrub) -> bytes:
    if not raw.strip():
        return raw
    c = _counting(r, f)
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, (dict, list)):
        try:
            new_obj = c.redact(obj)
        except TooDeep:
            new_obj = obj
        _collect(c, f)
        return raw if new_obj is obj else orjson.dumps(new_obj)
    text = raw.decode("utf-8", "surrogateescape")
    new = c.redact_text(text)
    _collect(c, f)
    return raw if new == text else new.encode("utf-8", "surrogateescape")


# ---- the index cache ------------------------------------------------------------------
def _meta_needs_scrub(meta: dict[str, Any], r: Redactor) -> bool:
    header = meta.get("header")
    if isinstance(header, dict) and r.redact(header) is not header:
        return True
    for line in meta.get("manifest_lines") or ():
        if not isinstance(line, str):
            continue
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError:
            return True  # not ours to read: drop it
        if not isinstance(rec, dict):
            return True
        params_in, schema_in = rec.get("params") or [], rec.get("schema") or {}
        if not isinstance(params_in, list) or not isinstance(schema_in, dict):
            return True
        params, schema = redact_manifest(tuple(params_in), schema_in, r)
        if list(params) != params_in or schema != schema_in:
            return True
    return False


def _count_cache(r: Redactor) -> int:
    found = [0]

    def count(meta: dict[str, Any]) -> bool:
        if _meta_needs_scrub(meta, r):
            found[0] += 1
        return False

    indexcache.drop_where(count)
    return found[0]


def _redact_into(rec: dict[str, Any], obj: dict[str, Any], keys: list[str], c: Any) -> bool:
    """Redact ``obj[k]`` into ``rec`` for each key; whether any value changed."""
    changed = False
    for k in keys:
        nv = c.redact(obj[k])
        if nv is not obj[k]:
            rec[k] = nv
            changed = True
    return changed
