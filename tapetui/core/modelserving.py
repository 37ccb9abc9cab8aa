"""The model boundary: a model turn through a tape, decided, served, or run live and written.

:class:`ModelServing` is the half of :class:`~tapetui.core.tape.Tape` that answers model requests (its base
class, beside :class:`~tapetui.core.serving.ToolServing`; the attributes it uses are the tape's). A request
is the neutral request of :mod:`tapetui.core.turns`; its **place** is the k-th model request of the run
(not the step, which shifts when a tool call is added). The decision, in this order:

1. the offered tools' definitions against the fingerprints the recorded turn holds (the hit, else the turn
   at the place): a changed one is a ``ToolDriftError`` (``[fingerprint] ignore`` and
   ``check_fingerprint = false`` honoured), before the framework sees any argument;
2. a hit: the earliest unconsumed turn with the request's key;
3. else the turn at its place: a tolerated hit when tapes.toml excuses every difference (``[compare.rules]``
   on ``request.`` paths, ``model_names = "any"``), a hit "served over a changed input" under
   ``model_turns = "by_place"`` when only tool results inside the request changed, else a
   :class:`~tapetui.core.errors.ModelDrift` (in a fill with ``on_drift="live"``: from here on everything
   runs live into the candidate);
4. else a ``TapeMiss`` naming the nearest recorded request (in a fill: run live into the candidate).

The run log gets the same events as a tool call (``hit``, ``drift``, ``miss``, ``record``, ``live``,
``fingerprint``, ``unused``) with ``tool: "model"`` and the turn's own fields (``turn``, ``model``, ``tokens``,
``requested``), so review reads one timeline.
"""

from __future__ import annotations

import inspect
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.canon import canon, canonical_json
from tapetui.core.changes import Change, event_changes
from tapetui.core.clock import Clock
from tapetui.core.codecs import json_form
from tapetui.core.config import Config
from tapetui.core.errors import InvalidValue, ModelDrift, TapeError, TapeMiss, TapeStale
from tapetui.core.fill import FillCandidate
from tapetui.core.index import TapeIndex
from tapetui.core.modelturn import ModelTurn
from tapetui.core.modes import Mode
from tapetui.core.recorded_errors import raise_recorded
from tapetui.core.redact import Redactor
from tapetui.core.session import SessionFiles
from tapetui.core.stepspans import StepSpans, step_span
from tapetui.core.toolbox import Toolbox
from tapetui.core.turndecide import TurnDeciding
from tapetui.core.turnlive import TurnLive, turn_of
from tapetui.core.turns import (
    TURN,
    RequestForm,
    change_line,
    from_trace,
    request_changes,
    split_request,
    turn_key_of,
)

__all__ = ["TURN_COUNTERS", "ModelServing", "ModelTurn"]  # ModelTurn: re-exported from tapetui.core.modelturn

TURN_COUNTERS: tuple[str, ...] = (
    "live_model_calls",
    "model_hits",
    "model_drifts",
    "model_misses",
    "tokens_live",
    "tokens_saved",
    "turns_without_usage",
)
"""The model turns' own counters in ``stats()``, after the tool counters (which stay tool counts)."""

ON_DRIFT = ("raise", "live")
# the contract fields an offered tool's definition may carry besides its parameters (as Tape.contract takes them)
_DEF_FIELDS = ("description", "output_schema", "annotations", "title", "version", "side_effect")


def _kind(value: Any) -> str:
    """What a refused value is, without its text (it may be a secret)."""
    return "a blank string" if isinstance(value, str) else type(value).__name__


def turn_options(live: Iterable[str], on_drift: str) -> tuple[frozenset[str], str]:
    """``Tape(live=..., on_drift=...)`` checked: the names that run live, and the drift policy.

    Raises:
        InvalidValue: a name that is not a non-empty string, an ``on_drift`` other than ``"raise"``/``"live"``.
    """
    if on_drift not in ON_DRIFT:
        raise InvalidValue(f"on_drift must be one of {', '.join(map(repr, ON_DRIFT))}, got {on_drift!r}")
    names = [live] if isinstance(live, str) else list(live)
    for n in names:
        if type(n) is not str or not n:
            raise InvalidValue(f"live= takes tool names (and 'model'), got {n!r}")
    return frozenset(names), on_drift


class ModelServing(TurnDeciding, TurnLive):
    """Serves model requests for :class:`~tapetui.core.tape.Tape` (see the module doc)."""

    path: Path
    mode: Mode
    config: Config
    _redactor: Redactor
    _clock: Clock
    _mu: threading.Lock
    _closed: bool
    _active: int
    _after: int
    _seq: int
    _counts: dict[str, int]
    _status: dict[int, str]
    _files: SessionFiles
    _tools: Toolbox
    _records: bool
    _fill: FillCandidate | None
    _index: TapeIndex | None
    _session: str
    _expired: Callable[[str], bool]
    _spans: StepSpans | None
    contract: Callable[..., Any]  # Tape.contract

    def _init_turns(self, live_names: frozenset[str], on_drift: str) -> None:
        self._live_names = live_names
        self._on_drift = on_drift
        self._all_live = False  # a fill with on_drift="live" drifted: everything from there on runs live
        self._turn_k = 0
        idx = self._index
        self._turn_used = bytearray(len(idx.turns)) if idx is not None else bytearray()
        self._turn_form = RequestForm(self._redactor)
        self._turn_orders: dict[bytes, list[int]] | None = None
        self._turn_keys: dict[str, deque[int]] | None = None
        self._offer_seen: dict[str, bytes] = {}  # offered tool → its definition as last registered (JSON)
        for c in TURN_COUNTERS:
            self._counts[c] = 0

    # ---- public ---------------------------------------------------------------------------
    def model(
        self,
        request: Any,
        *,
        live: Callable[[], Any],
        model: str,
        source: str = "core",
        stream: bool = False,
        order: Any = None,
    ) -> dict[str, Any]:
        """One model turn through the tape, the model twin of :meth:`call`: ``record`` runs ``live`` and writes
        the turn; ``replay`` returns the recorded response and never calls ``live``; ``fill`` calls it only on a
        miss.

        Args:
            request: the neutral request (:mod:`tapetui.core.turns`): ``instructions``, ``messages``, ``tools``
                (the offered tools' definitions: each becomes a contract of the tape), ``output_schema``,
                ``settings``.
            live: what calls the model: returns the neutral response (``parts``, ``tool_calls``,
                ``finish_reason``, ``usage``) or raises.
            model: the model's name as the framework names it (``openai:gpt-4o``).
            source: who converted the request (an adapter's name): a turn recorded by another adapter is refused.
            stream: the request is a streamed one (recorded as such).
            order: the turn's place among concurrent turns (sub-agents), any JSON value, as for tools.

        Returns:
            The neutral response (the recorded one, redacted, on replay).

        Raises:
            ModelDrift: the request differs from the turn recorded at its place.
            TapeMiss: no turn is left for it.
            ToolDriftError: an offered tool's definition is not the recorded one.
            TapeError: a bad request or response, a closed tape, a response that cannot be recorded.
        """
        turn = self.model_turn(request, model=model, source=source, stream=stream, order=order)
        if turn.served:
            assert turn.response is not None
            return turn.response
        try:
            out = live()
        except BaseException as e:
            turn.fail(e)
            raise
        if inspect.isawaitable(out):
            close = getattr(out, "close", None)
            if callable(close):
                close()
            turn.abandon()
            raise TapeError(f"{self.path}: model live= returned an awaitable: use `await tape.amodel(...)`")
        return turn.finish(out)

    async def amodel(
        self,
        request: Any,
        *,
        live: Callable[[], Any],
        model: str,
        source: str = "core",
        stream: bool = False,
        order: Any = None,
    ) -> dict[str, Any]:
        """:meth:`model` for async code: ``live`` may be a coroutine function (awaited on the caller's loop)."""
        turn = self.model_turn(request, model=model, source=source, stream=stream, order=order)
        if turn.served:
            assert turn.response is not None
            return turn.response
        try:
            out = live()
            if inspect.isawaitable(out):
                out = await out
        except BaseException as e:
            turn.fail(e)
            raise
        return turn.finish(out)

    def model_turn(
        self, request: Any, *, model: str, source: str = "core", stream: bool = False, order: Any = None
    ) -> ModelTurn:
        """Decide one model request now (see the module doc) and return its :class:`ModelTurn`: served from the
        tape, or to be run live by the caller (streams use this form: the caller passes the live events through
        as they come, then calls :meth:`ModelTurn.finish`).

        Raises:
            as :meth:`model`.
        """
        if self._spans is None:
            return self._model_turn(request, model, source, stream, order)
        attrs = {"gen_ai.operation.name": "chat", "gen_ai.request.model": str(model)}
        span = step_span(self._spans, "model", str(model), attrs, self._redactor).__enter__()
        try:
            turn = self._model_turn(request, model, source, stream, order)
        except BaseException as e:
            span.detach()
            span.close(e)
            raise
        span.detach()
        if turn.served:
            span.close()
        else:  # the live call ends in finish() or fail(), maybe in another context: the turn closes its span
            span.note["outcome"] = "recorded" if self._records else "live"
            turn.span = span
        return turn

    def _model_turn(self, request: Any, model: str, source: str, stream: bool, order: Any) -> ModelTurn:
        if type(model) is not str or not model.strip():
            raise InvalidValue(f"{self.path}: model= must be the model's name (a non-empty string), got {_kind(model)}")
        if type(source) is not str or not source:
            raise InvalidValue(f"{self.path}: source= must be the adapter's name (a string), got {_kind(source)}")
        text = self._redactor.redact_text
        model, source = text(model), text(source)  # a name is no place for a secret: neither is kept
        try:
            stored, defs = split_request(request, f"{self.path}: model request ({model})")
        except InvalidValue as e:  # it may quote a value of the request
            raise InvalidValue(text(str(e))) from None
        registry = self._tools.registry
        seen = self._offer_seen
        for d in defs:  # contracts first (Tape.contract takes the lock itself); a recording writes their tool lines
            name = d["name"]
            try:
                same = seen.get(name) == (raw := orjson.dumps(d, option=orjson.OPT_SORT_KEYS))
            except TypeError:  # not JSON: Tape.contract says what is wrong
                same, raw = False, b""
            held = registry.get(name) if registry is not None else None
            if held is not None and (held.fn is not None or same):
                continue  # a registered function is its own contract; an unchanged definition is registered
            fields = {k: d[k] for k in _DEF_FIELDS if d.get(k) is not None}  # what a tool adapter declares too
            self.contract(name, schema=d.get("parameters"), **fields)
            registry = self._tools.registry
            if raw:
                seen[name] = raw
        place: tuple[bytes | None, Any] = (None, None)
        if order is not None:
            try:
                value = canon(self._redactor.redact(json_form(order, "order")))
            except (TypeError, TapeError):
                raise TapeError(f"{self.path}: model: order= must be a JSON value such as (turn, index)") from None
            place = (canonical_json(value), value)
        with self._mu:
            if self._closed:
                raise TapeError(f"{self.path}: tape is closed")
            try:
                redacted = self._turn_form.redacted(stored)
            except (TypeError, TapeError) as e:
                raise TapeError(f"{self.path}: this model request cannot be recorded: {e}") from None
            key = turn_key_of(model, redacted)
            self._seq += 1
            self._turn_k += 1
            seq, k = self._seq, self._turn_k
            names = redacted.get("tools") or []
            offered = {n: t.fingerprint for n in names if (t := self._tools.live_tool(n)) is not None}
            head = (seq, k, model, source, stream, key, redacted, offered, place)
            if self._records or self._all_live:
                return self._turn_live(head, write=True)
            if TURN in self._live_names or self.config.model_policy(model).live:
                return self._turn_cut(head)
            return self._turn_decide(head)

    # ---- serving -----------------------------------------------------------------------------
    def _turn_serve(
        self,
        head: tuple[Any, ...],
        j: int,
        rec: dict[str, Any],
        *,
        tolerated: list[dict[str, Any]] | None = None,
        changed_input: list[str] | None = None,
        not_in_trace: list[str] | None = None,
    ) -> ModelTurn:
        seq, k, model, source, stream, key, redacted, offered, _ = head
        idx = self._index
        assert idx is not None
        t = idx.turns[j]
        instead = self._turn_checks(head, j, rec)
        if instead is not None:
            return instead
        self._turn_used[j] = 1
        self._counts["model_hits"] += 1
        self._counts["tokens_saved"] += t.tokens
        if not t.has_usage:
            self._counts["turns_without_usage"] += 1
        self._after = seq
        fields: dict[str, Any] = {
            "seq": seq,
            "tool": TURN,
            "key": key,
            "step": t.seq,
            "turn": k,
            "model": model,
            "tokens": t.tokens,
            "requested": list(t.requested),
        }
        offered = set(redacted.get("tools") or ())
        unoffered = [n for n in t.requested if n not in offered]
        if unoffered:  # a hallucinated call: served as recorded (the framework handles it), and reported
            fields["unoffered"] = unoffered
        if tolerated is not None:
            fields["recorded_key"] = t.key
            fields["excused"] = tolerated
        if changed_input is not None:
            fields["recorded_key"] = t.key
            fields["changed_input"] = changed_input
        if not_in_trace is not None:  # the same in every field the trace held (those it did not: listed)
            fields["recorded_key"] = t.key
            fields["not_in_trace"] = not_in_trace
        if t.source != source:
            fields["source"] = t.source
        self._emit("hit", **fields)
        if self._fill is not None:  # in fill mode the candidate is the session as played: hits are carried into it
            line = b"".join(self._tools.tool_line(n, idx) for n in (rec.get("offered") or {}))
            self._fill.carry_line(self._files.writer, line + idx.turn_renumbered(j, seq, self._files.fh))
        return _served(self, head, rec)

    def _turn_checks(self, head: tuple[Any, ...], j: int, rec: dict[str, Any]) -> ModelTurn | None:
        """Before turn ``j`` is served: who recorded it (another adapter's turn is refused), and its expiry (under
        the stale policy: ``error`` raises, ``miss`` makes it a miss, returned; ``warn`` serves it)."""
        seq, k, _, source, _, key, *_ = head
        assert self._index is not None
        t = self._index.turns[j]
        if t.source and t.source != source and not from_trace(t.source):
            raise TapeError(
                f"{self.path}:{t.line}: model turn {k} was recorded through {t.source!r}, and this request comes "
                f"through {source!r}: a turn one adapter recorded never serves another's request (record the "
                f"session again through {source!r})"
            )
        expires = rec.get("expires_at")
        if not isinstance(expires, str) or not self._expired(expires):
            return None
        policy = self.config.stale_policy
        self._counts["stale"] += 1
        self._emit("stale", seq=seq, tool=TURN, key=key, step=t.seq, turn=k, expires_at=expires, policy=policy)
        if policy == "error":
            raise TapeStale(f"{self.path}: step {seq} (model turn {k}) expired at {expires} (stale policy 'error')")
        if policy == "miss":
            self._turn_used[j] = 1
            return self._turn_miss(head, "expired", None)
        return None

    def _turn_drift(self, head: tuple[Any, ...], j: int, rec: dict[str, Any], changes: list[Change]) -> ModelTurn:
        seq, k, model, source, stream, key, redacted, offered, _ = head
        idx = self._index
        assert idx is not None
        t = idx.turns[j]
        self._turn_used[j] = 1
        self._counts["model_drifts"] += 1
        shown = event_changes(changes)
        self._emit(
            "drift",
            seq=seq,
            tool=TURN,
            key=key,
            recorded_key=t.key,
            step=t.seq,
            turn=k,
            model=model,
            recorded_model=t.model,
            changes=shown,
        )
        if self.mode == Mode.FILL and self._on_drift == "live":
            if self._fill is not None and self._files.writer is None:
                self._files.claim_fill_target(self._fill.opening())
            self._all_live = True
            return self._turn_live(head, write=True)
        raise ModelDrift(
            path=str(self.path),
            seq=seq,
            turn=k,
            model=model,
            recorded_model=t.model,
            recorded_key=t.key,
            new_key=key,
            recorded_request=rec.get("request"),
            new_request=redacted,
            changes=[tuple(c) for c in changes],
            lines=[change_line(c) for c in changes] or ["(no difference in the request: the line was edited by hand)"],
            recorded_seq=t.seq,
        )

    def _turn_miss(self, head: tuple[Any, ...], reason: str, _near: int | None) -> ModelTurn:
        seq, k, model, source, stream, key, redacted, offered, _ = head
        earlier = self._fill.earlier if self._fill is not None else None
        taken = earlier.take_turn(key, lambda rec: self._earlier_usable(rec, offered)) if earlier else None
        if taken is not None:  # not on the golden: an earlier fill ran it live already
            return self._turn_serve_earlier(head, *taken)
        idx = self._index
        self._counts["model_misses"] += 1
        nearest: int | None = None
        changes: list[Change] = []
        if idx is not None and idx.turns:
            j = min(k - 1, len(idx.turns) - 1)
            rec = idx.turn(j, self._files.fh)
            nearest = idx.turns[j].seq
            changes = request_changes(
                canon(self._redactor.redact(rec.get("request"))), redacted, idx.turns[j].model, model
            )
        shown = event_changes(changes)
        self._emit(
            "miss",
            seq=seq,
            tool=TURN,
            key=key,
            turn=k,
            model=model,
            nearest=nearest,
            reason=reason or None,
            changes=shown,
        )
        if self.mode == Mode.REPLAY:
            raise TapeMiss(
                path=str(self.path),
                seq=seq,
                tool=TURN,
                key=key,
                args=redacted,
                nearest_seq=nearest,
                changes=[tuple(c) for c in changes],
                reason=reason or f"model turn {k}: no recorded turn is left at this place",
                prefix="request",
            )
        if self._fill is not None and self._files.writer is None:
            self._files.claim_fill_target(self._fill.opening())
        return self._turn_live(head, write=True)

    def _earlier_usable(self, rec: dict[str, Any], offered: dict[str, str]) -> bool:
        """Whether an earlier fill's turn may serve this request: it answered (an error, such as a rate limit, is
        asked again), it has not expired, and the model was offered the tools under the contracts offered now."""
        expires = rec.get("expires_at")
        fresh = not isinstance(expires, str) or not self._expired(expires)
        return rec.get("error") is None and fresh and (rec.get("offered") or {}) == offered

    def _turn_serve_earlier(self, head: tuple[Any, ...], j: int, rec: dict[str, Any]) -> ModelTurn:
        """Serve a turn from what an earlier, unreviewed fill ran live (its candidate's turn ``j``, line ``rec``): the
        model is paid once, not at every fill. Carried into this fill's candidate, as the earlier fill's calls are."""
        seq, k, model, _, _, key, *_ = head
        assert self._fill is not None and self._fill.earlier is not None
        earlier = self._fill.earlier
        t = earlier.index.turns[j]
        self._counts["model_hits"] += 1
        self._counts["tokens_saved"] += t.tokens
        self._after = seq
        self._emit("hit", seq=seq, tool=TURN, key=key, step=seq, turn=k, model=model, source="candidate")
        if self._files.writer is None:  # the earlier candidate is not this session as played: write the new one
            self._files.claim_fill_target(self._fill.opening())
        tools = b"".join(self._tools.tool_line(n, earlier.index) for n in (rec.get("offered") or {}))
        self._fill.carry_line(self._files.writer, tools + earlier.index.turn_renumbered(j, seq, earlier.fh))
        return _served(self, head, rec)


def _served(serving: ModelServing, head: tuple[Any, ...], rec: dict[str, Any]) -> ModelTurn:
    """The turn served from the recorded line ``rec``: its response (and usage, and a stream's events), or its
    recorded error raised again."""
    error = rec.get("error")
    if error is not None:
        raise_recorded(error, TURN, head[0])
    response = dict(rec.get("response") or {})
    response["usage"] = rec.get("usage")
    events = rec.get("events") if rec.get("stream") is True and type(rec.get("events")) is list else None
    return turn_of(serving, head, served=True, response=response, recorded_events=events)
