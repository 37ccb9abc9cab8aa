"""Model turns in review: what a candidate says about a session's model turns (a run log's:
:mod:`tapetui.review.turnfindings`).

Tool calls are judged by :mod:`tapetui.review.findings` (a run log) and :mod:`tapetui.review.comparison` (a
candidate); the turns are judged beside them, set aside from the tool sequence:

- **prompts**: a request that drifted from, or missed, its recorded turn (run log), or a turn whose request
  differs from the golden's at its place (candidate), by path (``instructions: + "…"``); a candidate that lost
  its golden's turns; turns added to a golden that had none are reported, not failed;
- **model tools** (the model-requested dimension, ``max_requested_edits``): the tools the model asked for,
  read from each turn's own response — never ``n/a`` on a tape with turns;
- **results**: a turn's response (and its error) is the model's result, judged under the rules as a tool's is
  (``response.…`` paths), its differences counted in the ``results`` dimension beside the tools' results;
- **tokens** (``[compare] tokens = "+20%"`` or ``"+5000"``) and, with ``[models."NAME"] price``, cost:
  ``[COST] 12,400 → 16,900 tokens (+36%)``;
- warnings that never fail: a turn "served over a changed input" (``model_turns = "by_place"``), a difference a
  rule excused, a turn a trace import wrote serving an adapter; and **behaviour drift**, a live tool's or model's
  result against the recording at its place (fails under ``live_results = "must_match"``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rapidfuzz.distance import Levenshtein

from tapetui.core.canon import canon
from tapetui.core.changes import Change
from tapetui.core.comparators import CompareSettings, token_threshold
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.index import TapeIndex
from tapetui.core.jsondiff import diff_values
from tapetui.core.judgements import Judged
from tapetui.core.turns import TURN, change_line, requested_tools, tokens
from tapetui.review.verdicts import Verdict

__all__ = [
    "RowLevel",
    "TurnSide",
    "comparable_turns",
    "cost_line",
    "cost_text",
    "model_tools_line",
    "token_verdict",
    "turn_rows",
    "turn_side",
]


RowLevel = Literal["pass", "fail", "capability", "excused", "differs"]
"""How a line of a comparison reads: a dimension's verdict (``pass``/``fail``), a tool the golden never used
(``capability``), a difference a rule excused (or a sequence change within its mode and threshold), or a plain
difference. The fronts style a line by it, never by its text."""


@dataclass(frozen=True)
class TurnSide:
    """One tape's model turns, as review reads them: per turn its model, request, response and tokens."""

    turns: tuple[dict[str, Any], ...] = ()

    @property
    def requested(self) -> tuple[str, ...]:
        return tuple(name for t in self.turns for name in requested_tools(t.get("response")))

    @property
    def tokens(self) -> int:
        return sum(tokens(t.get("usage")) for t in self.turns)

    def models(self) -> list[str]:
        return [str(t.get("model")) for t in self.turns]


def turn_side(index: TapeIndex) -> TurnSide:
    """The turns of a tape, decoded (its request and response read again from the file)."""
    if not index.turns:
        return TurnSide()
    return TurnSide(tuple(index.turn(k) for k in range(len(index.turns))))


# ---- shared lines ----------------------------------------------------------------------------
def model_tools_line(old: Sequence[str], new: Sequence[str]) -> str:
    dist = Levenshtein.distance(list(old), list(new))
    return f"[MODEL TOOLS] model-requested sequence changed (edit distance {dist}): {list(old)} → {list(new)}"


def cost_text(config: Config | None, turns: Iterable[tuple[str, Any]]) -> str:
    """`` ($0.0420)`` for turns ``(model, usage)`` when tapes.toml prices every model among them, else empty."""
    if config is None or not config.models:
        return ""
    total = 0.0
    for model, usage in turns:
        if not isinstance(usage, dict):
            continue
        cost = config.model_policy(model).cost(int(usage.get("input") or 0), int(usage.get("output") or 0))
        if cost is None:
            return ""
        total += cost
    return f" (${total:,.4f})"


def token_verdict(settings: CompareSettings, old: int, new: int) -> Verdict | None:
    """The ``tokens`` dimension: ``new`` tokens against the golden's ``old`` under ``[compare] tokens``; None when
    no threshold is set."""
    limit = token_threshold(settings.tokens) if settings.tokens else None
    if limit is None:
        return None
    amount, percent = limit
    allowed = int(old * (1 + amount / 100)) if percent else int(old + amount)
    return Verdict("tokens", new, allowed)


def cost_line(old: int, new: int, v: Verdict | None, old_cost: str = "", new_cost: str = "") -> str:
    pct = f" ({(new - old) / old:+.0%})" if old else ""
    within = f", within {v.threshold:,}" if v is not None and v.passed else (f", max {v.threshold:,}" if v else "")
    return f"[COST] {old:,}{old_cost} → {new:,}{new_cost} tokens{pct}{within}"


# ---- a candidate -----------------------------------------------------------------------------
@dataclass(frozen=True)
class TurnDiff:
    """One place of two sessions' model turns: the golden's turn there, the other's, and how they differ."""

    turn: int
    old: dict[str, Any] | None
    new: dict[str, Any] | None
    request: tuple[Change, ...] = ()
    excused: tuple[tuple[Change, str], ...] = ()
    response: tuple[Change, ...] = ()  # what no rule excuses, under ``response.`` (an error: ``response.error``)
    response_excused: tuple[tuple[Change, str], ...] = ()

    @property
    def label(self) -> str:
        """The turn's place, its model, and its step in the golden (the step ``accept --step`` takes, as it takes a
        call's); the candidate's step for a turn only the candidate has."""
        t = self.new or self.old or {}
        step = (self.old or t).get("seq")
        return f"[MODEL] turn {self.turn} ({t.get('model')}) step {step}"

    def rows(self) -> list[tuple[str, RowLevel]]:
        if self.new is None:
            return [(f"{self.label}  removed: the candidate has no turn here", "differs")]
        if self.old is None:
            return [(f"{self.label}  added: the golden has no turn here", "differs")]
        out: list[tuple[str, RowLevel]] = [(f"{self.label}  request {change_line(c)}", "differs") for c in self.request]
        out += [(f"{self.label}  request {change_line(c)}  — {why}", "excused") for c, why in self.excused]
        out += [(f"{self.label}  {change_line(c)}", "differs") for c in self.response]
        out += [(f"{self.label}  {change_line(c)}  — {why}", "excused") for c, why in self.response_excused]
        offered = set((self.new.get("request") or {}).get("tools") or ())
        out += [
            (f"{self.label}  the model asked for {name!r}, a tool it was not offered", "differs")
            for name in requested_tools(self.new.get("response"))
            if name not in offered
        ]
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "old_step": (self.old or {}).get("seq"),
            "new_step": (self.new or {}).get("seq"),
            "request": [{"path": c.path, "text": change_line(c)} for c in self.request],
            "excused": [{"path": c.path, "text": change_line(c), "rule": why} for c, why in self.excused],
            "response": [{"path": c.path, "text": change_line(c)} for c in self.response],
            "response_excused": [
                {"path": c.path, "text": change_line(c), "rule": why} for c, why in self.response_excused
            ],
            "added": self.old is None,
            "removed": self.new is None,
        }


@dataclass(frozen=True)
class TurnComparison:
    """Two sessions' model turns compared (see the module doc)."""

    diffs: tuple[TurnDiff, ...] = ()
    old_requested: tuple[str, ...] = ()
    new_requested: tuple[str, ...] = ()
    old_tokens: int = 0
    new_tokens: int = 0
    old_count: int = 0
    new_count: int = 0
    verdicts: tuple[Verdict, ...] = ()
    cost: tuple[str, str] = ("", "")
    changed: tuple[TurnDiff, ...] = field(default=())
    results: tuple[int, int, int] = (0, 0, 0)  # the responses' part of the results dimension: changes, excused, errors

    @property
    def present(self) -> bool:
        return bool(self.old_count or self.new_count)

    def rows(self) -> list[tuple[str, RowLevel]]:
        out: list[tuple[str, RowLevel]] = []
        if self.old_count == 0 and self.new_count:
            out.append(
                (f"[MODEL] {self.new_count} model turns added (the golden was recorded without model turns)", "differs")
            )
        elif self.new_count == 0 and self.old_count:
            out.append((f"[MODEL] the candidate lost its golden's {self.old_count} model turns", "fail"))
        if self.old_requested != self.new_requested:
            out.append((model_tools_line(self.old_requested, self.new_requested), "differs"))
        tv = next((v for v in self.verdicts if v.dimension == "tokens"), None)
        if self.old_tokens != self.new_tokens:
            out.append(
                (
                    cost_line(self.old_tokens, self.new_tokens, tv, *self.cost),
                    "differs" if tv is not None and not tv.passed else "excused",
                )
            )
        if self.old_count and self.new_count:
            for d in self.changed:
                out += d.rows()
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "old_count": self.old_count,
            "new_count": self.new_count,
            "requested": {"old": list(self.old_requested), "new": list(self.new_requested)},
            "tokens": {"old": self.old_tokens, "new": self.new_tokens},
            "turns": [d.to_json() for d in self.changed],
        }


def turn_rows(
    old: TurnSide,
    new: TurnSide,
    settings: CompareSettings,
    config: Config | None,
    judge: Callable[[str, Any, Any], Judged],
) -> TurnComparison:
    """Two sessions' turns compared by place (the k-th turn with the k-th), requests under the rules (``request.``
    paths), responses and errors as a tool's results are (``judge``: how the comparison judges a side of a step,
    with ``[diff] ignore`` and its volatile defaults).

    Raises:
        TapeError: a turn nested too deeply to compare.
    """
    diffs: list[TurnDiff] = []
    failing = 0
    results = [0, 0, 0]  # response differences no rule excuses, excused, a rule's hook errors
    old_turns, new_turns = comparable_turns(old.turns), comparable_turns(new.turns)
    for k in range(max(len(old.turns), len(new.turns))):
        a = old_turns[k] if k < len(old.turns) else None
        b = new_turns[k] if k < len(new.turns) else None
        if a is None or b is None:
            diffs.append(
                TurnDiff(k + 1, old.turns[k] if a is not None else None, new.turns[k] if b is not None else None)
            )
            failing += 1 if old.turns and new.turns else 0  # a turn more or less (all of them: below, or reported)
            continue
        kept, excused = _request_changes(a, b, settings)
        try:
            response, response_excused, errors = _outcome_changes(a, b, judge)
        except RecursionError:
            raise TapeError(f"model turn {k + 1} (step {b.get('seq')}): nested too deeply to compare") from None
        results[2] += errors
        results[0] += len(response)
        results[1] += len(response_excused)
        failing += len(kept)
        shown = old.turns[k], new.turns[k]  # the turns as on the tapes, their ids as recorded
        diffs.append(TurnDiff(k + 1, *shown, tuple(kept), tuple(excused), tuple(response), tuple(response_excused)))
    if old.turns and not new.turns:
        failing += 1
    verdicts: list[Verdict] = []
    if old.turns or new.turns:
        verdicts.append(Verdict("prompts", failing, 0))
        tv = token_verdict(settings, old.tokens, new.tokens)
        if tv is not None:
            verdicts.append(tv)
    cost = (
        cost_text(config, ((str(t.get("model")), t.get("usage")) for t in old.turns)),
        cost_text(config, ((str(t.get("model")), t.get("usage")) for t in new.turns)),
    )
    return TurnComparison(
        diffs=tuple(diffs),
        old_requested=old.requested,
        new_requested=new.requested,
        old_tokens=old.tokens,
        new_tokens=new.tokens,
        old_count=len(old.turns),
        new_count=len(new.turns),
        verdicts=tuple(verdicts),
        cost=cost,
        changed=tuple(
            d
            for d in diffs
            if d.request or d.excused or d.response or d.response_excused or d.old is None or d.new is None
        ),
        results=(results[0], results[1], results[2]),
    )


def _request_changes(
    a: dict[str, Any], b: dict[str, Any], settings: CompareSettings
) -> tuple[list[Change], list[tuple[Change, str]]]:
    """How a turn's model and request differ from the golden's turn's: the differences no rule excuses, and the
    excused ones with the rule that excused each."""
    kept: list[Change] = []
    excused: list[tuple[Change, str]] = []
    if a.get("model") != b.get("model"):
        named = Change("model", a.get("model"), b.get("model"))
        if settings.model_names == "any":
            excused.append((named, 'model_names = "any"'))
        else:
            kept.append(named)
    if diff_values(canon(a.get("request")), canon(b.get("request"))):
        judged = settings.rules.judge("request", canon(a.get("request")), canon(b.get("request")), tool=TURN)
        kept += list(judged.changes)
        excused += [(e.change, e.text) for e in judged.excused]
    return kept, excused


_ID_PARTS = frozenset({"tool_call", "tool_call_response"})


def comparable_turns(turns: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A tape's turns as a comparison reads them: the ids a provider issues anew at every call (each tool call's
    ``id``, in the response that asks for it and in the requests that answer it) numbered ``call_1``, ``call_2``…
    by first appearance in the tape, and the response's own ``id`` left out. Two recordings of the same behaviour
    then compare equal, where a live provider made every sample differ; an answer given to another call than
    before still differs (its number does). The tape keeps its ids: a replay sends them back as recorded."""
    numbers: dict[str, str] = {}

    def numbered(part: Any) -> Any:
        if type(part) is dict and part.get("type") in _ID_PARTS and type(part.get("id")) is str:
            return {**part, "id": numbers.setdefault(part["id"], f"call_{len(numbers) + 1}")}
        return part

    def with_parts(holder: Any) -> Any:  # a message, or a response: its parts numbered
        if type(holder) is dict and type(holder.get("parts")) is list:
            return {**holder, "parts": [numbered(p) for p in holder["parts"]]}
        return holder

    out: list[dict[str, Any]] = []
    for turn in turns:
        turn = dict(turn)
        request = turn.get("request")
        if type(request) is dict and type(request.get("messages")) is list:
            turn["request"] = {**request, "messages": [with_parts(m) for m in request["messages"]]}
        response = turn.get("response")
        if type(response) is dict:
            turn["response"] = {k: v for k, v in with_parts(response).items() if k != "id"}
        out.append(turn)
    return out


def _outcome_changes(
    a: dict[str, Any], b: dict[str, Any], judge: Callable[[str, Any, Any], Judged]
) -> tuple[list[Change], list[tuple[Change, str]], int]:
    """What a turn gave against the golden's turn: the model's result, its response and its error, each judged as a
    tool's result is (``response.…`` paths, ``response.error.…`` for the error); the differences no rule excused,
    the excused ones, and the rules' hook errors."""
    changes: list[Change] = []
    excused: list[tuple[Change, str]] = []
    errors = 0
    if (a.get("error") is None) != (b.get("error") is None):
        # the outcome kind changed (it answered, now it fails, or the reverse): a difference no rule excuses, as a
        # tool call's result that became an error
        old_outcome = a.get("response") if a.get("error") is None else a.get("error")
        new_outcome = b.get("response") if b.get("error") is None else b.get("error")
        return [Change("response" if b.get("error") is None else "response.error", old_outcome, new_outcome)], [], 0
    for old, new in ((a.get("response"), b.get("response")), (_error_of(a), _error_of(b))):
        if old == new:
            continue
        said = judge("response", canon(old), canon(new))
        changes += [_in_response(c) for c in said.changes]
        excused += [(_in_response(e.change), e.text) for e in said.excused]
        errors += len(said.errors)
    return changes, excused, errors


def _error_of(turn: dict[str, Any]) -> dict[str, Any]:
    """A turn's error as its part of the outcome: ``{"error": …}`` (none when it answered)."""
    return {"error": turn["error"]} if turn.get("error") is not None else {}


def _in_response(c: Change) -> Change:
    """A change judged within a response, its path under ``response``."""
    return Change(f"response.{c.path}" if c.path else "response", c.old, c.new)
