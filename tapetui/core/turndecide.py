"""Deciding a model request against the golden's turns (the rules are in :mod:`tapetui.core.modelserving`'s
doc): the offered tools' fingerprints first, then a hit by key, else the turn at its place — tolerated,
served over a changed input, or a drift — else a miss."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tapetui.core.canon import canon, canonical_json
from tapetui.core.changes import Change
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.index import TapeIndex
from tapetui.core.jsondiff import IgnoreRules, path_segments
from tapetui.core.modelturn import ModelTurn
from tapetui.core.redact import Redactor
from tapetui.core.session import SessionFiles
from tapetui.core.toolbox import Toolbox
from tapetui.core.turns import (
    CAPTURE_HINT,
    NOT_CAPTURED,
    TURN,
    change_line,
    partial_changes,
    request_changes,
    traced_fields,
)

__all__ = ["TurnDeciding"]


class TurnDeciding:
    """The deciding half of :class:`~tapetui.core.modelserving.ModelServing` (the tape's attributes below); the
    serving methods it ends in are the subclass's."""

    path: Path
    config: Config
    _redactor: Redactor
    _mu: threading.Lock
    _counts: dict[str, int]
    _files: SessionFiles
    _tools: Toolbox
    _index: TapeIndex | None
    _session: str
    _turn_used: bytearray
    _turn_keys: dict[str, deque[int]] | None
    _turn_orders: dict[bytes, list[int]] | None
    # what the deciding ends in: ModelServing's
    _turn_serve: Callable[..., ModelTurn]
    _turn_drift: Callable[[tuple[Any, ...], int, dict[str, Any], list[Change]], ModelTurn]
    _turn_miss: Callable[[tuple[Any, ...], str, int | None], ModelTurn]
    _emit: Callable[..., None]
    _contract_changed: Callable[..., None]  # ToolServing's: a changed contract counted, logged, raised

    def _turn_decide(self, head: tuple[Any, ...]) -> ModelTurn:
        seq, k, model, source, stream, key, redacted, offered, place = head
        idx = self._index
        if idx is None or not idx.turns:
            reason = "recorded without model turns: record or fill" if idx is not None else "no golden yet"
            return self._turn_miss(head, reason, None)
        used = self._turn_used
        by_key = self._turn_keys
        if by_key is None:  # key → its turns, in file order: built once, so a session of n turns replays in O(n)
            by_key = self._turn_keys = {}
            for i, t in enumerate(idx.turns):
                by_key.setdefault(t.key, deque()).append(i)
        same = by_key.get(key)
        while same and used[same[0]]:  # consumed ones leave from the front: a repeated request costs O(1)
            same.popleft()
        hit = next((i for i in same if not used[i]), None) if same else None
        at = self._turn_place(k, place[0])
        j = hit if hit is not None else at
        rec = idx.turn(j, self._files.fh) if j is not None else None
        if rec is not None and j is not None and _not_captured(rec.get("request")):
            raise TapeError(
                f"{self.path}:{idx.turns[j].line}: model turn {k} was imported from a trace that did not capture "
                f"its messages ({NOT_CAPTURED}): it cannot be replayed; {CAPTURE_HINT}"
            )
        if rec is not None and j is not None:
            self._turn_offered(j, rec, seq, k, list(redacted.get("tools") or []))
        if hit is not None:
            assert rec is not None
            return self._turn_serve(head, hit, rec)
        if at is None or rec is None:
            return self._turn_miss(head, "", None)
        old = canon(self._redactor.redact(rec.get("request")))  # a tape written under older rules: redacted now
        changes = request_changes(old, redacted, str(rec.get("model")), model)
        held = traced_fields(rec, idx.header)
        if held is not None:  # a turn a trace held in part: compared in what the trace held
            changes, outside = partial_changes(changes, held)
            if not changes:
                return self._turn_serve(head, at, rec, not_in_trace=outside)
        excuses = self._turn_excuses(changes, old, redacted)
        if excuses is not None:
            return self._turn_serve(head, at, rec, tolerated=excuses)
        settings = self.config.compare_for(self._session)
        if settings.model_turns == "by_place" and changes and all(_inside_tool_result(c.path) for c in changes):
            return self._turn_serve(head, at, rec, changed_input=[c.path for c in changes])
        return self._turn_drift(head, at, rec, changes)

    def _turn_place(self, k: int, place: bytes | None) -> int | None:
        """The unconsumed turn at this request's place: the k-th turn, or with ``order`` the first unconsumed
        one recorded with that order."""
        idx = self._index
        assert idx is not None
        used = self._turn_used
        if place is not None:
            if self._turn_orders is None:
                self._turn_orders = {}
                for j in range(len(idx.turns)):
                    o = idx.turn(j, self._files.fh).get("order")
                    if o is not None:
                        self._turn_orders.setdefault(canonical_json(canon(o)), []).append(j)
            found = [j for j in self._turn_orders.get(place, []) if not used[j]]
            if found:
                return found[0]
        j = k - 1
        return j if j < len(idx.turns) and not used[j] else None

    def _turn_excuses(self, changes: list[Change], old: Any, new: Any) -> list[dict[str, Any]] | None:
        """Every difference excused by tapes.toml (``[compare.rules]`` on ``request.`` paths, ``[diff] ignore``
        as written, ``model_names = "any"``): the excuses, each ``{path, rule, text}``; else None."""
        if not changes:
            return None
        settings = self.config.compare_for(self._session)
        out: list[dict[str, Any]] = []
        rest = [c for c in changes if c.path != "model"]
        if len(rest) != len(changes):
            if settings.model_names != "any":
                return None
            named = next(c for c in changes if c.path == "model")
            out.append(
                {
                    "path": "model",
                    "rule": "model_names",
                    "text": f'model {named.old} → {named.new} (model_names = "any")',
                }
            )
        if rest:
            rules = settings.rules
            # [diff] ignore as written; a pattern may name the request (request.instructions) or any dimension (*.x)
            patterns = self.config.replay_ignore().patterns
            ignore = IgnoreRules([p.removeprefix("request.") for p in patterns], volatile=False)
            if not rules.rules and not ignore.patterns:
                return None
            try:
                judged = rules.judge("request", old, new, tool=TURN, hooks=None, ignore=None, listed=ignore)
            except TapeError:
                return None
            if not judged.ok:
                return None
            # each said as the difference it excused: a replay lists it (check), never silently
            out += [{**e.to_json("request"), "text": f"{change_line(e.change)} ({e.text})"} for e in judged.excused]
        return out

    def _turn_offered(self, j: int, rec: dict[str, Any], seq: int, k: int, names: list[str]) -> None:
        """Rule 1: each offered tool's live definition against the fingerprint recorded turn ``j`` holds."""
        idx = self._index
        assert idx is not None
        recorded = rec.get("offered")
        if type(recorded) is not dict:
            return
        t = idx.turns[j]
        for name in names:
            fp = recorded.get(name)
            if type(fp) is not str or not fp or self._tools.checked.get(name) == fp:
                continue
            change = self._tools.contract_change_of(idx, name, fp, t.line)
            if change is not None:
                self._contract_changed(
                    seq,
                    name,
                    fp,
                    change,
                    self.config.policy(name),
                    fields={"step": t.seq, "turn": k},
                    context=(f"offered to the model at model turn {k}",),
                )


def _inside_tool_result(path: str) -> bool:
    """Whether a request path lies inside a tool result the request carries (``messages[3].parts[0].response``)."""
    segs = path_segments(path)
    return len(segs) >= 5 and segs[0] == "messages" and segs[2] == "parts" and segs[4] == "response"


def _not_captured(request: Any) -> bool:
    """A traced turn imported without its messages (see tapetui.traces)."""
    return isinstance(request, dict) and request.get("content") == NOT_CAPTURED
