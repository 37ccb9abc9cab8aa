"""Comparing two recordings of a session: tool sequences, aligned steps, contract changes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from rapidfuzz.distance import Levenshtein

from tapetui.core.canon import canon
from tapetui.core.changes import Change, format_changes
from tapetui.core.config import Config
from tapetui.core.contract import ignore_rules
from tapetui.core.errors import TapeError, TooDeep
from tapetui.core.files import read_regular
from tapetui.core.fingerprint import ToolManifest, explain_manifest_change, in_form, without_ignored
from tapetui.core.index import CallRecord, TapeIndex
from tapetui.core.jsondiff import IgnoreRules, diff_values
from tapetui.core.store import refuse_links_out
from tapetui.core.tapefile import read_index

__all__ = ["Comparison", "LoadedTape", "StepDiff", "StepKind", "compare", "load"]

StepKind = Literal["same", "changed", "replaced", "added", "skipped"]
"""How one aligned position of two sessions differs (see :class:`StepDiff`)."""


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


def load(path: Path, *, keep_bytes: bool = False) -> LoadedTape:
    """Read a tape whole (every line validated).

    Args:
        keep_bytes: keep a small tape's bytes as read (``index.data``), for a caller that writes them.
    """
    idx = read_index(path, validate=True, keep_bytes=keep_bytes)
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

    kind: StepKind
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
    lines: dict[int, dict[str, ToolManifest]] = {}  # every tool line of each tape, read when first needed
    same = _same_contract(g, o, config, lines)
    for tool in sorted(set(old_tools) & set(new_tools)):
        gm, om = g.manifests.get(tool), o.manifests.get(tool)
        old_fp = gm.fingerprint if gm else next(c.fingerprint for c in g.calls if c.tool == tool)
        new_fp = om.fingerprint if om else next(c.fingerprint for c in o.calls if c.tool == tool)
        if not same(tool, old_fp, new_fp):
            contracts[tool] = (old_fp, new_fp, tuple(_explain(tool, gm, om, config)))
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


def _same_contract(
    g: LoadedTape, o: LoadedTape, config: Config | None, lines: dict[int, dict[str, ToolManifest]]
) -> Callable[[str, str, str], bool]:
    """Whether a fingerprint of ``g`` and one of ``o`` name the same contract of a tool.

    Fingerprints of one form are compared as they are (a tape is verified in the form it was
    recorded with); of two forms, both are compared in form 2 (the lower form a manifest of either
    can be put in), from the tool lines that hold them (see :mod:`tapetui.core.fingerprint`):
    re-recording a form-1 tape in a later form is not a contract change, nor is the rotation of a
    key that form 2 redacts. Fields tapes.toml's ``[fingerprint] ignore`` names for the tool are
    left out of both tool lines first (only when both tapes hold the manifest of that fingerprint).
    """
    redactor = config.redactor() if config else None

    def form2(t: LoadedTape) -> dict[str, str]:
        out = {}
        for m in _by_fingerprint(t, lines).values():
            with contextlib.suppress(ValueError):  # a form this version does not know: compared as it is
                out[m.fingerprint] = in_form(m, 2, redactor).fingerprint
        return out

    cache: dict[int, dict[str, str]] = {}

    def same(tool: str, old_fp: str, new_fp: str) -> bool:
        if old_fp == new_fp:
            return True
        ignore = config.fingerprint_ignore(tool) if config else ()
        if ignore:
            kept = _kept(_by_fingerprint(g, lines).get(old_fp), _by_fingerprint(o, lines).get(new_fp), ignore, config)
            if kept is not None:
                return kept[0].fingerprint == kept[1].fingerprint
        if g.index.fp_forms.get(old_fp, 1) == o.index.fp_forms.get(new_fp, 1):
            return False
        if not cache:
            cache[0], cache[1] = form2(g), form2(o)
        a, b = cache[0].get(old_fp), cache[1].get(new_fp)
        return a is not None and a == b

    return same


def _by_fingerprint(t: LoadedTape, cache: dict[int, dict[str, ToolManifest]]) -> dict[str, ToolManifest]:
    """Fingerprint → manifest, from every tool line of ``t`` (kept in ``cache`` for one comparison).

    The index keeps the last tool line of each tool; a candidate rebuilt from its golden (a re-record,
    an accepted step) holds the new manifest and, after it, the golden's older one.
    """
    hit = cache.get(id(t))
    if hit is not None:
        return hit
    out = {m.fingerprint: m for m in t.manifests.values()}
    if any(fp not in out for fp in t.index.fp_forms):  # fp_forms names every tool line of a form after 1
        data = t.index.data if t.index.data is not None else _read(t.path)
        for line in data.splitlines():
            if b'"type":"tool"' not in line:
                continue
            with contextlib.suppress(orjson.JSONDecodeError):
                rec = orjson.loads(line)
                if isinstance(rec, dict) and rec.get("type") == "tool":
                    m = ToolManifest.from_record(rec)
                    out.setdefault(m.fingerprint, m)
    cache[id(t)] = out
    return out


def _read(path: Path) -> bytes:
    try:
        return read_regular(path)
    except TapeError:  # gone since it was loaded: what the index knows
        return b""


def _kept(
    gm: ToolManifest | None,
    om: ToolManifest | None,
    ignore: tuple[str, ...],
    config: Config | None,
) -> tuple[ToolManifest, ToolManifest] | None:
    """Both tool lines in one form, the ignored fields left out; None when a tape lacks its line."""
    if gm is None or om is None:
        return None
    redactor = config.redactor() if config else None
    try:
        if gm.form != om.form:
            gm, om = in_form(gm, 2, redactor), in_form(om, 2, redactor)
    except ValueError:  # a form this version does not know
        return None
    rules = ignore_rules(ignore)
    return without_ignored(gm, rules), without_ignored(om, rules)


def _explain(tool: str, gm: ToolManifest | None, om: ToolManifest | None, config: Config | None) -> list[str]:
    """Why the two tool lines differ, field by field, leaving out what ``[fingerprint] ignore`` names."""
    redactor = config.redactor() if config else None  # no secret-looking value is shown
    ignore = config.fingerprint_ignore(tool) if config else ()
    if ignore and gm is not None and om is not None:
        rules = ignore_rules(ignore)
        gm, om = without_ignored(gm, rules), without_ignored(om, rules)
    return explain_manifest_change(gm, om, redactor)


def _pair(
    a: CallRecord,
    b: CallRecord,
    rules: IgnoreRules,
    contracts: dict[str, Any],
    where: tuple[Path, Path],
    same: Callable[[str, str, str], bool] | None = None,
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
    same: Callable[[str, str, str], bool] | None = None,
) -> StepDiff:
    differs = a.fingerprint != b.fingerprint and not (same is not None and same(a.tool, a.fingerprint, b.fingerprint))
    fp = tuple(contracts[a.tool][2]) if differs and a.tool in contracts else ()
    if differs and not fp:
        fp = (f"fingerprint {a.fingerprint} → {b.fingerprint}",)
    args = () if a.key == b.key else tuple(diff_values(canon(a.args), canon(b.args), rules))
    old_res = {"error": a.error} if a.error is not None else a.result
    new_res = {"error": b.error} if b.error is not None else b.result
    res = tuple(diff_values(old_res, new_res, rules))
    expiry = (a.expires_at, b.expires_at) if a.expires_at != b.expires_at else None
    kind: StepKind = "changed" if (args or res or fp or expiry) else "same"
    return StepDiff(kind, a, b, args, res, fp, expiry)
