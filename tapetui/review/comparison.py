"""Comparing two recordings of a session: tool sequences, aligned steps, contract changes."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import orjson
from rapidfuzz.distance import Levenshtein

from tapetui.core.canon import canon
from tapetui.core.changes import MISSING, Change, format_changes, hidden_sides, secret_path, shown_path
from tapetui.core.comparators import CompareSettings, Excuse, Hooks, Judged, Rules
from tapetui.core.config import Config
from tapetui.core.contract import ignore_rules
from tapetui.core.errors import TapeError, TooDeep
from tapetui.core.files import read_regular
from tapetui.core.fingerprint import ToolManifest, explain_manifest_change, in_form, without_ignored
from tapetui.core.index import CallRecord, TapeIndex
from tapetui.core.jsondiff import IgnoreRules
from tapetui.core.paths import prefixed
from tapetui.core.store import refuse_links_out, session_name
from tapetui.core.tapefile import read_index
from tapetui.core.turns import TURN
from tapetui.review.turns import RowLevel, TurnComparison, turn_rows, turn_side
from tapetui.review.verdicts import Verdict, new_capabilities, phase_of, sequence_distance, verdict

__all__ = [
    "Comparison",
    "HooksArg",
    "LoadedTape",
    "NoteDiff",
    "RowLevel",
    "StepDiff",
    "StepKind",
    "capability_line",
    "compare",
    "load",
    "pair_notes",
]

StepKind = Literal["same", "changed", "tolerated", "replaced", "added", "skipped"]
"""How one aligned position of two sessions differs (see :class:`StepDiff`)."""

HooksArg = Hooks | None | Literal["auto"]
"""``compare``'s ``hooks``: the hooks to run, None to run none, ``"auto"`` to import the ones tapes.toml
names when a comparison first needs one (``check`` and ``diff``)."""


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

    ``kind``: ``same``, ``changed`` (same tool, other arguments or result), ``tolerated`` (it differs,
    but a rule of ``[compare.rules]`` excuses every difference), ``replaced`` (another tool), ``added``
    (only in the new session) or ``skipped`` (only in the golden).
    ``excused``: ``(side, excuse)`` of each difference a rule excused; ``remarks``: ``(side, change, why)``
    where a rule governs a difference it did not excuse; ``errors``: hooks that failed (never a pass).
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
    excused: tuple[tuple[str, Excuse], ...] = ()
    remarks: tuple[tuple[str, Change, str], ...] = ()
    errors: tuple[str, ...] = ()

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
        return [text for text, _ in self.rows(contracts_shown)]

    def rows(self, contracts_shown: bool = False) -> list[tuple[str, RowLevel]]:
        """:meth:`lines`, each with its :data:`RowLevel` (a difference a rule excused is ``excused``)."""
        head = f"{self.tool}  step {self.seq}"
        if self.kind == "added":
            assert self.new is not None
            return [(f"{head}  added (new step {self.new.seq}, key {self.new.key})", "differs")]
        if self.kind == "skipped":
            assert self.old is not None
            return [(f"{head}  skipped (recorded key {self.old.key} was not called)", "differs")]
        if self.kind == "replaced":
            assert self.old is not None and self.new is not None
            return [(f"{self.old.tool}  step {self.seq}  replaced by {self.new.tool} (step {self.new.seq})", "differs")]
        out: list[tuple[str, RowLevel]] = [
            (f"{head}  {line}", "differs") for line in self._change_lines("args", self.arg_changes)
        ]
        out += [(f"{head}  {line}", "differs") for line in self._change_lines("result", self.result_changes)]
        out += [(f"{head}  {line}", "excused") for line in excused_lines(self.excused)]
        out += [(f"{head}  [ERROR] {e}", "differs") for e in self.errors]
        if self.expiry is not None:
            old, new = self.expiry
            out.append((f"{head}  expires_at  {old or '(none)'} → {new or '(none)'}", "differs"))
        if not contracts_shown:
            out += [(f"{head}  [CONTRACT] {line}", "differs") for line in self.fingerprint]
        elif self.fingerprint and len(out) == 0:
            out.append((f"{head}  recorded under the old contract of {self.tool}", "differs"))
        return out

    def _change_lines(self, side: str, changes: tuple[Change, ...]) -> list[str]:
        why = {c.path: text for sd, c, text in self.remarks if sd == side}
        return [
            line + (f"  ({why[c.path]})" if c.path in why else "")
            for c, line in zip(changes, format_changes(changes, prefix=side), strict=True)
        ]

    @property
    def outcome(self) -> dict[str, str] | None:
        """``{"old": "result", "new": "error"}`` when the outcome kind of a paired step changed, else None."""
        if self.old is None or self.new is None or (self.old.error is None) == (self.new.error is None):
            return None
        kind = {True: "result", False: "error"}
        return {"old": kind[self.old.error is None], "new": kind[self.new.error is None]}

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
            "outcome": self.outcome,
            "excused": [e.to_json(side) for side, e in self.excused],
            "remarks": [{"path": prefixed(side, c.path), "text": t} for side, c, t in self.remarks],
            "errors": list(self.errors),
        }


def capability_line(tool: str) -> str:
    """The line of a comparison that names a tool the new run used and the golden never did."""
    return f"[NEW TOOL] {tool}: used by the new run, never by the golden (a new capability: audit it)"


def excused_lines(excused: Iterable[tuple[str, Excuse]]) -> list[str]:
    """``result.price  101.2 → 101.25  — within tolerance ±0.1``: differences a rule excused."""
    return [f"{line}  — {e.text}" for side, e in excused for line in format_changes([e.change], prefix=side)]


def _change_json(c: Change) -> dict[str, Any]:
    """A change as ``--json`` gives it; under a secret key (``args.api_key``) its values are ``[REDACTED]``, as
    they are shown (the other values are redacted as the whole output is: see :mod:`tapetui.core.changes`)."""
    out: dict[str, Any] = {"path": shown_path(c.path), "kind": c.kind}
    old, new = hidden_sides(c.old, c.new) if secret_path(c.path) else (c.old, c.new)
    if c.kind != "added":
        out["old"] = old
    if c.kind != "removed":
        out["new"] = new
    return out


@dataclass(frozen=True, slots=True)
class NoteDiff:
    """The ``index``-th note of one kind (``tape.note(kind, value)``) in the golden and the new session.

    ``old``/``new``: the note's value, :data:`MISSING` when that session has no such note.
    """

    kind: str
    index: int
    old: Any
    new: Any
    judged: Judged = field(default_factory=Judged)

    @property
    def differs(self) -> bool:
        return bool(self.judged.changes or self.judged.excused or self.judged.errors)

    @property
    def failing(self) -> int:
        """Differences no rule excused (a missing or extra note is one), and comparisons that failed."""
        return len(self.judged.changes) + len(self.judged.errors)

    @property
    def label(self) -> str:
        return f"note.{self.kind}" + (f" #{self.index + 1}" if self.index else "")

    def lines(self) -> list[str]:
        return [text for text, _ in self.rows()]

    def rows(self) -> list[tuple[str, RowLevel]]:
        if self.old is MISSING or self.new is MISSING:  # a note only one session has
            return [(format_changes([Change("", self.old, self.new)], prefix=self.label)[0], "differs")]
        why = {c.path: text for c, text in self.judged.remarks}
        out: list[tuple[str, RowLevel]] = [
            (line + (f"  ({why[c.path]})" if c.path in why else ""), "differs")
            for c, line in zip(self.judged.changes, format_changes(self.judged.changes, prefix=self.label), strict=True)
        ]
        out += [(line, "excused") for line in excused_lines((self.label, e) for e in self.judged.excused)]
        out += [(f"{self.label}  [ERROR] {e}", "differs") for e in self.judged.errors]
        return out

    def to_json(self) -> dict[str, Any]:
        side = f"note.{self.kind}"
        return {
            "kind": self.kind,
            "index": self.index,
            "old": None if self.old is MISSING else self.old,
            "new": None if self.new is MISSING else self.new,
            "present": {"old": self.old is not MISSING, "new": self.new is not MISSING},
            "changes": [_change_json(c) | {"path": prefixed(side, c.path)} for c in self.judged.changes],
            "excused": [e.to_json(side) for e in self.judged.excused],
            "remarks": [{"path": prefixed(side, c.path), "text": t} for c, t in self.judged.remarks],
            "errors": list(self.judged.errors),
        }


@dataclass(frozen=True)
class Comparison:
    """A golden against a candidate: sequences, aligned steps, contract changes, notes, and one verdict
    per dimension under the session's ``[compare]`` settings (see :mod:`tapetui.review.verdicts`)."""

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
    notes: tuple[NoteDiff, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    new_capabilities: tuple[str, ...] = ()
    settings: CompareSettings = field(default_factory=CompareSettings)
    turns: TurnComparison = field(default_factory=TurnComparison)

    @property
    def changed_steps(self) -> list[StepDiff]:
        return [s for s in self.steps if s.differs]

    @property
    def changed_notes(self) -> list[NoteDiff]:
        return [n for n in self.notes if n.differs]

    @property
    def clean(self) -> bool:
        """Nothing differs at all (what a rule excuses differs too: accepting would change the golden)."""
        return (
            not self.changed_steps
            and not self.contracts
            and self.edit_distance == 0
            and not self.changed_notes
            and not self.turns.changed
            and self.turns.old_count == self.turns.new_count
        )

    @property
    def passed(self) -> bool:
        """Every dimension within its threshold, no contract change (of a tool, or a step's own: a fingerprint or
        side_effect its line claims), no new capability."""
        return (
            all(v.passed for v in self.verdicts)
            and not self.contracts
            and not self.new_capabilities
            and not any(s.fingerprint for s in self.steps)
        )

    @property
    def failing(self) -> list[Verdict]:
        return [v for v in self.verdicts if not v.passed]

    def verdict(self, dimension: str) -> Verdict | None:
        return next((v for v in self.verdicts if v.dimension == dimension), None)

    def lines(self, *, capabilities: bool = True) -> list[str]:
        return [text for text, _ in self.rows(capabilities=capabilities)]

    def rows(self, *, capabilities: bool = True) -> list[tuple[str, RowLevel]]:
        """Every line of the comparison with its :data:`RowLevel`: the verdicts first (when anything differs),
        new capabilities (unless ``capabilities`` is false: a caller that reports them on their own, from
        :attr:`new_capabilities`), sequences, contracts, then each differing step and note."""
        out: list[tuple[str, RowLevel]] = (
            [(v.line(), "pass" if v.passed else "fail") for v in self.verdicts] if not self.clean else []
        )
        if capabilities:
            out += [(capability_line(t), "capability") for t in self.new_capabilities]
        tools = self.verdict("tools")
        if self.edit_distance:
            how = f"edit distance {self.edit_distance}"
            if tools is not None and tools.mode not in (None, "strict"):
                how = f"{tools.mode} order: {tools.value} edit{'' if tools.value == 1 else 's'}; strict {how}"
            out.append(
                (
                    f"[TOOLS] executed sequence changed ({how}): {list(self.old_tools)} → {list(self.new_tools)}",
                    "excused" if tools is not None and tools.passed else "differs",
                )
            )
        if self.turns.present:
            out += self.turns.rows()
        elif self.requested_distance and (self.old_requested != self.old_tools or self.new_requested != self.new_tools):
            out.append(
                (
                    f"[TOOLS] model-requested sequence (edit distance {self.requested_distance}): "
                    f"{list(self.old_requested)} → {list(self.new_requested)}",
                    "differs",
                )
            )
        for tool, (old, new, why) in sorted(self.contracts.items()):
            out.append((f"[CONTRACT] {tool}  fingerprint {old} → {new}", "differs"))
            out += [(f"[CONTRACT] {tool}  {line}", "differs") for line in why]
        for s in self.changed_steps:
            out += s.rows(contracts_shown=s.tool in self.contracts)
        for n in self.changed_notes:
            out += n.rows()
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
            "passed": self.passed,
            "sequence_mode": self.settings.sequence,
            "dimensions": {v.dimension: v.to_json() for v in self.verdicts},
            "new_capabilities": list(self.new_capabilities),
            "notes": [n.to_json() for n in self.changed_notes],
            **({"model_turns": self.turns.to_json()} if self.turns.present else {}),
        }


def _requested(calls: Iterable[CallRecord]) -> tuple[str, ...]:
    return tuple(c.requested_tool or c.tool for c in calls)


def compare(
    golden: Path | LoadedTape,
    other: Path | LoadedTape,
    config: Config | None = None,
    *,
    hooks: HooksArg = "auto",
    settings: CompareSettings | None = None,
) -> Comparison:
    """Compare a golden with a candidate (or any other tape of the same session).

    In ``strict`` sequence mode steps are aligned on the tool-name sequence (Levenshtein opcodes), so a
    step inserted at 3 shows as added instead of making 4..n look changed; in the other modes calls are
    paired by tool (the same key first), within a phase in ``phases`` mode, so a reorder is no change.

    Args:
        hooks: see :data:`HooksArg`.
        settings: the comparison settings (default: tapes.toml's for the golden's session).

    Raises:
        ConfigError: a hook tapes.toml names cannot be imported (naming the file and key).
    """
    if config is not None:
        refuse_links_out(config.tapes_dir, *(p for p in (golden, other) if not isinstance(p, LoadedTape)))
    g = golden if isinstance(golden, LoadedTape) else load(Path(golden))
    o = other if isinstance(other, LoadedTape) else load(Path(other))
    if settings is None:
        settings = config.compare_for(session_name(g.path, config.tapes_dir)) if config else CompareSettings()
    if hooks == "auto":
        hooks = Hooks.lazy(settings, config.root if config else None) if settings.rules.needs_hooks() else None
    ctx = _Judge(
        config.ignore_rules() if config else IgnoreRules(),
        settings.rules,
        hooks,
        g.path,
        o.path,
        config.replay_ignore() if config else IgnoreRules(volatile=False),
    )
    old_tools = tuple(c.tool for c in g.calls)
    new_tools = tuple(c.tool for c in o.calls)
    lines: dict[int, dict[str, ToolManifest]] = {}  # every tool line of each tape, read when first needed
    same = _same_contract(g, o, config, lines)
    contracts = _contracts(g, o, config, same)
    old_phases = _phases(g)
    new_phases = _phases(o)
    if settings.sequence == "strict":
        steps = _aligned(g, o, ctx, contracts, same)
    else:
        steps = _paired(g, o, old_phases if settings.sequence == "phases" else None, new_phases, ctx, contracts, same)
    notes = tuple(_notes(g, o, ctx))
    turns = turn_rows(
        turn_side(g.index), turn_side(o.index), settings, config, lambda side, a, b: ctx.side(side, a, b, TURN)
    )
    old_req, new_req = _requested(g.calls), _requested(o.calls)
    if turns.present:  # what the model asked for, from its own responses
        old_req, new_req = turns.old_requested, turns.new_requested
    verdicts = _verdicts(settings, g, o, (old_phases, new_phases), steps, notes, turns)
    return Comparison(
        golden=g.path,
        other=o.path,
        old_tools=old_tools,
        new_tools=new_tools,
        edit_distance=Levenshtein.distance(list(old_tools), list(new_tools)),
        old_requested=old_req,
        new_requested=new_req,
        requested_distance=Levenshtein.distance(list(old_req), list(new_req)),
        steps=tuple(steps),
        contracts=contracts,
        notes=notes,
        verdicts=verdicts,
        # a tool the model asked for counts too: the harness may have run another in its place
        new_capabilities=tuple(new_capabilities((*old_tools, *old_req), (*new_tools, *new_req))),
        settings=settings,
        turns=turns,
    )


def _contracts(
    g: LoadedTape, o: LoadedTape, config: Config | None, same: Callable[[str, str, str], bool]
) -> dict[str, tuple[str, str, tuple[str, ...]]]:
    """``tool → (old fingerprint, new fingerprint, why)`` of each tool both tapes use whose contract changed."""
    contracts: dict[str, tuple[str, str, tuple[str, ...]]] = {}
    for tool in sorted({c.tool for c in g.calls} & {c.tool for c in o.calls}):
        gm, om = g.manifests.get(tool), o.manifests.get(tool)
        old_fp = gm.fingerprint if gm else next(c.fingerprint for c in g.calls if c.tool == tool)
        new_fp = om.fingerprint if om else next(c.fingerprint for c in o.calls if c.tool == tool)
        if not same(tool, old_fp, new_fp):
            contracts[tool] = (old_fp, new_fp, tuple(_explain(tool, gm, om, config)))
    return contracts


def _verdicts(
    settings: CompareSettings,
    g: LoadedTape,
    o: LoadedTape,
    phases: tuple[list[str | None], list[str | None]],
    steps: list[StepDiff],
    notes: tuple[NoteDiff, ...],
    turns: TurnComparison,
) -> tuple[Verdict, ...]:
    """One verdict per dimension (see :mod:`tapetui.review.verdicts`); ``phases``: each call's, old and new; with
    model turns, the model-requested sequence is the turns' own and the turns' verdicts follow."""
    mode = settings.sequence
    old_tools, new_tools = [c.tool for c in g.calls], [c.tool for c in o.calls]
    old_req, new_req = _requested(g.calls), _requested(o.calls)
    if turns.present:
        requested = verdict(
            "requested", settings, Levenshtein.distance(list(turns.old_requested), list(turns.new_requested))
        )
    else:
        requested = replace(
            verdict("requested", settings, sequence_distance(mode, old_req, new_req, *phases)),
            # without a requested_tool anywhere the requested sequence is the executed one: judged once, as tools
            judged=any(c.requested_tool for c in (*g.calls, *o.calls)),
        )
    return (
        verdict("tools", settings, sequence_distance(mode, old_tools, new_tools, *phases)),
        requested,
        _side_verdict("arguments", settings, steps, "args"),
        _side_verdict("results", settings, steps, "result", turns.results),
        verdict(
            "notes",
            settings,
            sum(n.failing - len(n.judged.errors) for n in notes),
            sum(len(n.judged.excused) for n in notes),
            sum(len(n.judged.errors) for n in notes),
        ),
        *turns.verdicts,
    )


@dataclass(frozen=True)
class _Judge:
    """What every step of one comparison is judged with."""

    ignore: IgnoreRules  # [diff] ignore and the volatile defaults: hidden from results and notes
    rules: Rules
    hooks: Hooks | None
    golden: Path
    other: Path
    arg_ignore: IgnoreRules = field(default_factory=lambda: IgnoreRules(volatile=False))  # [diff] ignore as written

    def side(self, side: str, old: Any, new: Any, tool: str | None) -> Judged:
        """One side compared under the rules. Arguments make a call's key: no volatile default hides them (a
        booking on another date is another call), and what the user's ``[diff] ignore`` excuses there is listed."""
        if side == "args":
            return self.rules.judge(
                side,
                old,
                new,
                tool=tool,
                hooks=self.hooks,
                context={"golden": str(self.golden)},
                listed=self.arg_ignore,
            )
        return self.rules.judge(
            side, old, new, tool=tool, hooks=self.hooks, ignore=self.ignore, context={"golden": str(self.golden)}
        )


def _side_verdict(
    dimension: str,
    settings: CompareSettings,
    steps: Iterable[StepDiff],
    side: str,
    more: tuple[int, int, int] = (0, 0, 0),
) -> Verdict:
    """A side's verdict over every step; ``more``: changes, excused and errors of the model turns' responses (their
    part of the results)."""
    value, excused, errors = more
    for s in steps:
        if side == "args":
            value += len(s.arg_changes)
        else:
            value += len(s.result_changes)  # a refreshed expires_at is bookkeeping: shown, and accepted with it
        excused += sum(1 for sd, _ in s.excused if sd == side)
        errors += sum(1 for e in s.errors if e.startswith(side))
    return verdict(dimension, settings, value, excused, errors)


def _phases(t: LoadedTape) -> list[str | None]:
    """The phase of each call of ``t`` (None before the first phase line, and in a tape without any)."""
    marks = [(p.name, p.after) for p in t.index.phases]
    if not marks:
        return [None] * len(t.calls)
    return phase_of([c.seq for c in t.calls], marks)


def _aligned(
    g: LoadedTape,
    o: LoadedTape,
    ctx: _Judge,
    contracts: dict[str, Any],
    same: Callable[[str, str, str], bool],
) -> list[StepDiff]:
    """Steps aligned on the tool-name sequence (strict mode). Calls left out of the alignment (a step moved,
    inserted or dropped) are then paired by tool, the same key first, and compared too: a threshold that
    lets two edits of the sequence pass never hides what a moved call passed or returned."""
    steps: list[StepDiff] = []
    loose_old: list[tuple[int, CallRecord]] = []  # (opcode number, call) left out of the alignment
    loose_new: list[tuple[int, CallRecord]] = []
    for n, op in enumerate(Levenshtein.opcodes([c.tool for c in g.calls], [c.tool for c in o.calls])):
        olds = g.calls[op.src_start : op.src_end]
        news = o.calls[op.dest_start : op.dest_end]
        if op.tag == "equal":
            steps += [_pair(a, b, ctx, contracts, same) for a, b in zip(olds, news, strict=False)]
        else:
            loose_old += [(n, a) for a in olds]
            loose_new += [(n, b) for b in news]
    if not loose_old and not loose_new:
        return steps
    op_of = {id(c): n for n, c in (*loose_old, *loose_new)}
    pairs, lone_old, lone_new = _match([(None, a) for _, a in loose_old], [(None, b) for _, b in loose_new])
    steps += [_pair(a, b, ctx, contracts, same) for a, b in pairs]
    # what is left of one edit of the sequence: another tool at that place (replaced), or a step dropped or added
    by_op: dict[int, list[CallRecord]] = {}
    for b in lone_new:
        by_op.setdefault(op_of[id(b)], []).append(b)
    for a in lone_old:
        there = by_op.get(op_of[id(a)])
        steps.append(StepDiff("replaced", a, there.pop(0)) if there else StepDiff("skipped", a, None))
    steps += [StepDiff("added", None, b) for rest in by_op.values() for b in rest]
    steps.sort(key=_step_order)
    return steps


def _paired(
    g: LoadedTape,
    o: LoadedTape,
    old_phases: list[str | None] | None,
    new_phases: list[str | None],
    ctx: _Judge,
    contracts: dict[str, Any],
    same: Callable[[str, str, str], bool],
) -> list[StepDiff]:
    """Steps paired by tool, order ignored (within a phase when ``old_phases`` is given): each new call
    takes the golden's unpaired call with its key, else the earliest unpaired call of its tool."""
    group_old = old_phases if old_phases is not None else [None] * len(g.calls)
    group_new = new_phases if old_phases is not None else [None] * len(o.calls)
    pairs, lone_old, lone_new = _match(
        list(zip(group_old, g.calls, strict=True)), list(zip(group_new, o.calls, strict=True))
    )
    out = [_pair(a, b, ctx, contracts, same) for a, b in pairs]
    out += [StepDiff("skipped", a, None) for a in lone_old]
    out += [StepDiff("added", None, b) for b in lone_new]
    out.sort(key=_step_order)
    return out


def _match(
    olds: list[tuple[Any, CallRecord]], news: list[tuple[Any, CallRecord]]
) -> tuple[list[tuple[CallRecord, CallRecord]], list[CallRecord], list[CallRecord]]:
    """Calls paired by group (a phase, or None) and tool: each new call takes the unpaired old call with its key,
    else the earliest. Returns the pairs, the old calls left (in golden order) and the new calls left."""
    free: dict[tuple[Any, str], list[CallRecord]] = {}
    for grp, a in olds:
        free.setdefault((grp, a.tool), []).append(a)
    pairs: list[tuple[CallRecord, CallRecord]] = []
    lone_new: list[CallRecord] = []
    for grp, b in news:
        mine = free.get((grp, b.tool))
        if not mine:
            lone_new.append(b)
            continue
        at = next((i for i, a in enumerate(mine) if a.key == b.key), 0)
        pairs.append((mine.pop(at), b))
    lone_old = sorted((a for rest in free.values() for a in rest), key=lambda a: a.seq)
    return pairs, lone_old, lone_new


def _step_order(s: StepDiff) -> float:
    """Paired and skipped steps at the golden's seq; an added one just before the golden's step of its seq."""
    return s.old.seq if s.old is not None else (s.new.seq - 0.5 if s.new is not None else 0.0)


def pair_notes(old: Iterable[tuple[str, Any]], new: Iterable[tuple[str, Any]]) -> list[tuple[str, int, Any, Any]]:
    """Two sessions' notes (``(kind, value)`` in the order written) paired by kind and position among the notes
    of that kind: ``(kind, index, old value, new value)``, :data:`MISSING` for the side that has no such note.
    The golden's kinds come first (in the order first written), then the kinds only the new session has."""
    by_kind: tuple[dict[str, list[Any]], dict[str, list[Any]]] = ({}, {})
    for side, notes in zip(by_kind, (old, new), strict=True):
        for kind, value in notes:
            side.setdefault(kind, []).append(value)
    a_of, b_of = by_kind
    out: list[tuple[str, int, Any, Any]] = []
    for kind in [*a_of, *(k for k in b_of if k not in a_of)]:
        a, b = a_of.get(kind, []), b_of.get(kind, [])
        out += [
            (kind, i, a[i] if i < len(a) else MISSING, b[i] if i < len(b) else MISSING)
            for i in range(max(len(a), len(b)))
        ]
    return out


def _notes(g: LoadedTape, o: LoadedTape, ctx: _Judge) -> list[NoteDiff]:
    """Notes compared as :func:`pair_notes` pairs them."""
    out: list[NoteDiff] = []
    for kind, i, va, vb in pair_notes(
        ((n.kind, n.value) for n in g.index.notes), ((n.kind, n.value) for n in o.index.notes)
    ):
        if va is MISSING or vb is MISSING:
            judged = Judged((Change("", va, vb),))
        else:
            try:
                judged = ctx.side(f"note.{kind}", va, vb, None)
            except TooDeep:
                raise TooDeep(f"{g.path} and {o.path}: note {kind!r}") from None
        out.append(NoteDiff(kind, i, va, vb, judged))
    return out


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
    ctx: _Judge,
    contracts: dict[str, Any],
    same: Callable[[str, str, str], bool] | None = None,
) -> StepDiff:
    try:
        return _pair_diff(a, b, ctx, contracts, same)
    except TooDeep:
        raise TooDeep(f"{ctx.golden}:{a.line} and {ctx.other}:{b.line}: step {a.seq} ({a.tool})") from None


_OUTCOME = {
    True: "outcome changed: a result became an error",
    False: "outcome changed: an error became a result",
}
"""The remark of a step whose outcome kind changed, by whether the new call raised."""


def _pair_diff(
    a: CallRecord,
    b: CallRecord,
    ctx: _Judge,
    contracts: dict[str, Any],
    same: Callable[[str, str, str], bool] | None = None,
) -> StepDiff:
    differs = a.fingerprint != b.fingerprint and not (same is not None and same(a.tool, a.fingerprint, b.fingerprint))
    fp = tuple(contracts[a.tool][2]) if differs and a.tool in contracts else ()
    if differs and not fp:
        fp = (f"fingerprint {a.fingerprint} → {b.fingerprint}",)
    if a.side_effect != b.side_effect:  # a line's own claim, which the app's re-record warning reads: a difference
        fp = (*fp, f"side_effect {str(a.side_effect).lower()} → {str(b.side_effect).lower()}")
    # compared whatever the stored keys say: a key is a line's own claim (a hand-edited candidate may carry the
    # golden's key over other arguments), and what is accepted must be what was diffed
    args = ctx.side("args", canon(a.args), canon(b.args), a.tool)
    if (a.error is None) != (b.error is None):
        # the outcome kind changed: a difference whatever the values look like (a result may have the shape of
        # an error record), compared by no rule
        change = Change("", a.result if a.error is None else a.error, b.result if b.error is None else b.error)
        res = Judged((change,), remarks=((change, _OUTCOME[b.error is not None]),))
    else:
        old_res = {"error": a.error} if a.error is not None else a.result
        new_res = {"error": b.error} if b.error is not None else b.result
        res = ctx.side("result", old_res, new_res, a.tool)
    expiry = (a.expires_at, b.expires_at) if a.expires_at != b.expires_at else None
    excused = tuple(("args", e) for e in args.excused) + tuple(("result", e) for e in res.excused)
    remarks = tuple(("args", c, t) for c, t in args.remarks) + tuple(("result", c, t) for c, t in res.remarks)
    errors = args.errors + res.errors  # each names its side and path
    kind: StepKind = (
        "changed" if (args.changes or res.changes or fp or expiry or errors) else "tolerated" if excused else "same"
    )
    return StepDiff(kind, a, b, args.changes, res.changes, fp, expiry, excused, remarks, errors)
