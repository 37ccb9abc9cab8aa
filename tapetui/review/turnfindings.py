"""What a run log says of a session's model turns: findings and verdicts beside the tool calls'
(:mod:`tapetui.review.findings` calls :func:`run_turn_findings`; what each dimension means is in
:mod:`tapetui.review.turns`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rapidfuzz.distance import Levenshtein

from tapetui.core.changes import Change
from tapetui.core.comparators import CompareSettings
from tapetui.core.config import Config
from tapetui.core.index import TapeIndex
from tapetui.core.turns import TURN, change_line, from_trace
from tapetui.review.finding import Finding
from tapetui.review.turns import cost_line, model_tools_line, token_verdict
from tapetui.review.verdicts import Verdict, new_capabilities

__all__ = ["behaviour_findings", "run_turn_findings"]


def _changes(e: dict[str, Any]) -> list[Change]:
    return [Change(p, o, n) for p, o, n in e.get("changes") or []]


def behaviour_findings(events: Sequence[dict[str, Any]], settings: CompareSettings) -> list[Finding]:
    """Each ``behaviour`` event: a tool or the model run live on replay returned other than its recording, by
    path (a warning unless ``[compare] live_results = "must_match"``)."""
    out = []
    for e in events:
        if e.get("event") != "behaviour":
            continue
        what = "model" if e.get("tool") == TURN else str(e.get("tool"))
        for c in _changes(e):
            text = f"behaviour drift: {what} {change_line(c)} (step {e.get('step', e.get('seq'))})"
            out.append(Finding("behaviour", text, e.get("seq"), what, warning=settings.live_results != "must_match"))
    return out


class _Traced:
    """The turns a run was served from a trace import: said once, on the first, with every request field any of
    them was not compared in."""

    def __init__(self) -> None:
        self.first: tuple[str, Any, str] | None = None  # (where, seq, source)
        self.outside: list[str] = []

    def add(self, where: str, seq: Any, source: str, outside: Any) -> None:
        if self.first is None:
            self.first = (where, seq, source)
        for f in outside if isinstance(outside, list) else []:
            if str(f) not in self.outside:
                self.outside.append(str(f))

    def findings(self) -> list[Finding]:
        if self.first is None:
            return []
        where, seq, source = self.first
        text = f"{where}  served from a turn a trace import wrote ({source})"
        if self.outside:  # compared in what the trace held: said once, never drift
            text += f"; not in the trace, so not compared: {', '.join(self.outside)}"
        return [Finding("prompt", text, seq, TURN, warning=True)]


def _event_findings(e: dict[str, Any], traced: _Traced) -> tuple[list[Finding], int]:
    """What one turn event reports, and how many of its findings fail the prompts dimension."""
    kind, seq, k, model = e.get("event"), e.get("seq"), e.get("turn"), e.get("model")
    where = f"model  step {seq}  turn {k} ({model})"
    out: list[Finding] = []
    if kind == "drift":
        lines = [change_line(c) for c in _changes(e)] or ["the request differs (no path shown)"]
        return [Finding("prompt", f"{where}  {line}", seq, TURN, {"key": e.get("key")}) for line in lines], len(lines)
    if kind == "miss":
        near, reason = e.get("nearest"), e.get("reason")
        text = f"{where}  not on the tape" + (f" ({reason})" if reason else "")
        if type(near) is int:
            text += f"; nearest recorded turn is step {near}"
        out.append(Finding("prompt", text, seq, TURN, {"key": e.get("key")}))
        out += [Finding("prompt", f"{where}  {change_line(c)}", seq, TURN) for c in _changes(e)[:20]]
        return out, 1
    if kind in ("hit", "record", "live") and isinstance(e.get("unoffered"), list):
        for name in e["unoffered"]:
            text = f"{where}  the model asked for {str(name)!r}, a tool it was not offered (the framework handled it)"
            out.append(Finding("model_tools", text, seq, TURN, warning=True))
    if kind == "hit":
        for x in e.get("excused") or []:
            if isinstance(x, dict):
                text = f"{where}  {x.get('text')}  — excused by tapes.toml ({x.get('rule')})"
                out.append(Finding("prompt", text, seq, TURN, warning=True))
        if e.get("changed_input"):
            paths = ", ".join(str(p) for p in e["changed_input"][:5])
            text = f'{where}  served over a changed input ([compare] model_turns = "by_place"): {paths}'
            out.append(Finding("prompt", text, seq, TURN, warning=True))
        src = e.get("source")
        if isinstance(src, str) and from_trace(src):
            traced.add(where, seq, src, e.get("not_in_trace"))
    return out, 0


def run_turn_findings(
    golden: TapeIndex, events: Sequence[dict[str, Any]], settings: CompareSettings, config: Config | None
) -> tuple[list[Finding], list[Verdict]]:
    """What a run's model-turn events (and its ``behaviour`` events) say against its golden: findings and the
    ``prompts``, ``requested`` and ``tokens`` verdicts (only for a golden or a run with turns; ``requested`` and
    ``tokens`` only for a run that ended without an error: a run that stopped asked for less)."""
    out = behaviour_findings(events, settings)
    turn_events = [e for e in events if e.get("tool") == TURN]
    if not any(e.get("event") != "unused" for e in turn_events):
        return out, []  # no model request: a tools-only replay (findings.py says so once) or a tape without turns
    failing = 0
    run_requested: list[str] = []
    run_tokens = 0
    traced = _Traced()
    for e in turn_events:
        if e.get("event") in ("hit", "record", "live"):
            req = e.get("requested")
            run_requested += [str(r) for r in req] if isinstance(req, list) else []
            run_tokens += e["tokens"] if type(e.get("tokens")) is int else 0
        found, fails = _event_findings(e, traced)
        out += found
        failing += fails
    out += traced.findings()
    ended = any(e.get("event") == "end" and e.get("error") is None for e in events)
    # a turn the run never requested (a run that stopped says so once, not per turn)
    failing += sum(1 for e in turn_events if e.get("event") == "unused") if ended else 0
    verdicts = [Verdict("prompts", failing, 0)]
    if not ended:
        return out, verdicts
    golden_requested = [name for t in golden.turns for name in t.requested]
    dist = Levenshtein.distance(golden_requested, run_requested)
    verdicts.append(Verdict("requested", dist, settings.max_requested_edits))
    if dist:
        data = {"old": golden_requested, "new": run_requested, "edit_distance": dist}
        text = model_tools_line(golden_requested, run_requested)
        out.append(Finding("model_tools", text, data=data, warning=dist <= settings.max_requested_edits))
        for t in new_capabilities(golden_requested + list(golden.tools), run_requested):
            text = f"[NEW TOOL] {t}: the model asked for it in this run, never in the golden"
            out.append(Finding("capability", text, tool=t))
    golden_tokens = sum(t.tokens for t in golden.turns)
    tv = token_verdict(settings, golden_tokens, run_tokens)
    if tv is not None:
        verdicts.append(tv)
        if not tv.passed:
            data = {"old": golden_tokens, "new": run_tokens}
            out.append(Finding("cost", cost_line(golden_tokens, run_tokens, tv), data=data))
    return out, verdicts
