"""A model turn run live: its line built and written (record, a fill's miss), or compared with the
recording at its place (a cut-point replay), and the turns a run never requested (at close)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tapetui.core.canon import canon
from tapetui.core.changes import event_changes
from tapetui.core.clock import Clock, Timer, iso
from tapetui.core.codecs import json_form
from tapetui.core.errors import TapeError
from tapetui.core.index import TapeIndex
from tapetui.core.jsondiff import diff_values
from tapetui.core.modelturn import ModelTurn
from tapetui.core.modes import Mode
from tapetui.core.recorded_errors import error_record
from tapetui.core.redact import Redactor
from tapetui.core.runlog import EventKind, add_status
from tapetui.core.session import SessionFiles
from tapetui.core.tapefile import dump_line
from tapetui.core.toolbox import Toolbox
from tapetui.core.turns import TURN, redact_events, requested_tools, tokens

__all__ = ["TurnLive", "turn_of"]


def turn_of(owner: Any, head: tuple[Any, ...], **fields: Any) -> ModelTurn:
    """The :class:`ModelTurn` of a request decided now (``head``: its seq, turn, model, source, stream, key and
    request, as the deciding tape holds them), with its other ``fields``."""
    seq, k, model, source, stream, key, redacted, *_ = head
    return ModelTurn(
        owner, seq=seq, turn=k, model=model, source=source, stream=stream, key=key, request=redacted, **fields
    )


class TurnLive:
    """The live half of :class:`~tapetui.core.modelserving.ModelServing` (the tape's attributes below)."""

    path: Path
    mode: Mode
    _redactor: Redactor
    _clock: Clock
    _timer: Timer
    _mu: threading.Lock
    _active: int
    _after: int
    _counts: dict[str, int]
    _status: dict[int, str]
    _files: SessionFiles
    _tools: Toolbox
    _index: TapeIndex | None
    _turn_used: bytearray
    _turn_place: Callable[[int, bytes | None], int | None]  # TurnDeciding's
    _emit: Callable[..., None]  # the tape's (ToolServing)

    def _turn_cut(self, head: tuple[Any, ...]) -> ModelTurn:
        """The model named live on replay (``live=["model"]``, ``[models."NAME"] live = true``): it runs, and its
        response is compared with the turn at its place, which it consumes."""
        seq, k, *_ = head
        compare = None
        idx = self._index
        if idx is not None and idx.turns:
            at = self._turn_place(k, head[8][0])
            if at is not None:
                self._turn_used[at] = 1
                rec = idx.turn(at, self._files.fh)
                compare = {"step": idx.turns[at].seq, "response": rec.get("response")}
        return self._turn_live(head, write=False, compare=compare)

    def _turn_live(self, head: tuple[Any, ...], *, write: bool, compare: dict[str, Any] | None = None) -> ModelTurn:
        self._active += 1
        return turn_of(
            self,
            head,
            served=False,
            write=write,
            offered=head[7],
            recorded_at=self._clock() if write else None,
            compare=compare,
            order=head[8][1],
        )

    def _turn_line(
        self,
        turn: ModelTurn,
        response: dict[str, Any] | None,
        error: Exception | None,
        events: list[Any] | None,
        ms: float,
        where: str,
    ) -> tuple[bytes, dict[str, int] | None, dict[str, Any] | None]:
        """The turn's line (empty when it is not written), its usage and its response as stored (redacted)."""
        usage = None
        stored = None
        fields: dict[str, Any] = {
            "type": TURN,
            "seq": turn.seq,
            "model": turn.model,
            "key": turn.key,
            "source": turn.source,
            "request": turn.request,
            "offered": turn._offered,
        }
        if turn.order is not None:
            fields["order"] = turn.order
        if turn.from_trace is not None:
            fields["from_trace"] = list(turn.from_trace)
        if response is not None:
            usage = response.get("usage")
            body = {k: v for k, v in response.items() if k != "usage"}
            try:
                stored = self._redactor.redact(json_form(body, "response"))
            except (TypeError, TapeError) as e:  # not JSON, or nested too deeply
                why = self._redactor.redact_text(str(e))
                raise TapeError(f"{where}: the model's response cannot be recorded: {why}") from None
            fields["response"] = stored
        else:
            assert error is not None
            fields["error"] = error_record(error, self._redactor)
        fields["usage"] = usage
        fields["ms"] = ms
        fields["stream"] = bool(turn.stream)
        if events is not None:
            try:
                fields["events"] = redact_events(events, self._redactor, where)
            except (TypeError, TapeError) as e:
                raise TapeError(
                    f"{where}: the stream's events cannot be recorded: {self._redactor.redact_text(str(e))}"
                ) from None
        if not turn._write:
            return b"", usage, stored
        fields["recorded_at"] = iso(turn._recorded_at)
        try:
            return dump_line(fields), usage, stored
        except (TypeError, TapeError) as e:
            raise TapeError(f"{where}: this model turn cannot be recorded: {e}") from None

    def _turn_end(
        self, turn: ModelTurn, line: bytes, usage: dict[str, int] | None, stored: Any, ms: float, *, error: bool
    ) -> None:
        with self._mu:
            self._active -= 1
            self._counts["live_model_calls"] += 1
            self._counts["tokens_live"] += tokens(usage)
            if turn.seq > self._after:
                self._after = turn.seq
            fields: dict[str, Any] = {
                "seq": turn.seq,
                "tool": TURN,
                "key": turn.key,
                "turn": turn.turn,
                "model": turn.model,
                "ms": ms,
                "tokens": tokens(usage),
                "requested": requested_tools(stored) if stored is not None else [],
                "error": error,
            }
            offered = set(turn.request.get("tools") or ())
            unoffered = [n for n in fields["requested"] if n not in offered]
            if unoffered:  # the model asked for a tool it was not offered: recorded as asked, reported
                fields["unoffered"] = unoffered
            compare = turn._compare
            behaviour: list[list[Any]] = []
            if compare is not None:
                fields["step"] = compare["step"]
                old = canon(self._redactor.redact({"response": compare.get("response")}))
                new = canon({"response": stored} if stored is not None else {"error": True})
                behaviour = event_changes(diff_values(old, new))
            if line:
                writer = self._files.writer
                if writer is None:
                    raise TapeError(
                        f"{self.path}: the tape was closed while model turn {turn.turn} (step {turn.seq}) ran; "
                        "it was not recorded"
                    )
                tool_lines = b"".join(self._tools.tool_line(n, self._index) for n in turn._offered)
                writer.append(tool_lines + line)
            kind: EventKind = "record" if self.mode == Mode.RECORD else "live"
            self._emit(kind, **fields)
            if behaviour:
                self._emit(
                    "behaviour", seq=turn.seq, tool=TURN, step=fields["step"], model=turn.model, changes=behaviour
                )

    def _turn_abandon(self) -> None:
        with self._mu:
            self._active -= 1

    def _report_unused_turns(self) -> None:
        """At close: the golden's turns this run never requested (``unused`` events, counted in ``unused``)."""
        idx = self._index
        if idx is None or not idx.turns:
            return
        events = []
        for j, t in enumerate(idx.turns):
            if not self._turn_used[j]:
                self._counts["unused"] += 1
                add_status(self._status, t.seq, "unused")
                events.append(
                    {"event": "unused", "seq": t.seq, "tool": TURN, "key": t.key, "model": t.model, "turn": j + 1}
                )
        log = getattr(self, "_log", None)
        if log is not None and events:
            log.emit_many(events)
