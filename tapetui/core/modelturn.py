"""One model request through a tape, once decided: served from the tape, or run live by its caller.

:meth:`Tape.model_turn <tapetui.core.modelserving.ModelServing.model_turn>` returns a :class:`ModelTurn`;
``Tape.model`` and ``Tape.amodel`` use it the same way. Streams need this form: the caller passes the live
events through as they come, then calls :meth:`ModelTurn.finish`.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tapetui.core.errors import InvalidValue, TapeError
from tapetui.core.stepspans import step_span
from tapetui.core.turns import normal_response, rebuild_error, stream_events

if TYPE_CHECKING:
    from tapetui.core.turnlive import TurnLive

__all__ = ["ModelTurn"]


class ModelTurn:
    """One model request through a tape, decided (:meth:`Tape.model_turn <ModelServing.model_turn>`).

    When :attr:`served`, the tape answered it: :attr:`response` is the recorded response (the neutral form, its
    ``usage`` included) and :attr:`events` its stream. Otherwise the adapter runs the model live and calls
    :meth:`finish` with the response (or :meth:`fail` with what the call raised); nothing else runs until then.

    Attributes:
        seq: the turn's step; ``turn``: its place among the run's model requests (1 for the first).
        model / source / stream: as requested.
        served: the tape answered; ``response``: what it answered with (None until then).
    """

    __slots__ = (
        "_compare",
        "_done",
        "_offered",
        "_recorded_at",
        "_recorded_events",
        "_start",
        "_tape",
        "_write",
        "from_trace",
        "key",
        "model",
        "order",
        "request",
        "response",
        "seq",
        "served",
        "source",
        "span",
        "stream",
        "turn",
    )

    def __init__(
        self,
        tape: TurnLive,
        *,
        seq: int,
        turn: int,
        model: str,
        source: str,
        stream: bool,
        key: str,
        request: dict[str, Any],
        served: bool,
        response: dict[str, Any] | None = None,
        recorded_events: list[Any] | None = None,
        write: bool = False,
        offered: dict[str, str] | None = None,
        recorded_at: Any = None,
        compare: dict[str, Any] | None = None,
        order: Any = None,
    ) -> None:
        self._tape = tape
        self.seq = seq
        self.turn = turn
        self.model = model
        self.source = source
        self.stream = stream
        self.key = key
        self.request = request
        self.served = served
        self.response = response
        self._recorded_events = recorded_events
        self._write = write
        self._offered = offered or {}
        self._recorded_at = recorded_at
        self._compare = compare
        self.order = order
        self._done = served
        self._start = tape._timer()  # the tape's timer: a sample tape's fixed clock too
        self.span: step_span | None = None  # a live turn's span (Tape(tracer=...)): closed when the turn ends
        # the request fields a trace held, when a trace import writes the turn (its line's "from_trace")
        self.from_trace: tuple[str, ...] | None = None

    @property
    def path(self) -> Path:
        return self._tape.path

    @property
    def events(self) -> list[dict[str, Any]]:
        """The served response's stream: the recorded events verbatim, else events rebuilt from the response
        (start, a part and one delta per part, end); empty for a turn not served."""
        if self._recorded_events is not None:
            return list(self._recorded_events)
        return stream_events(self.response) if self.response is not None else []

    def cannot_rebuild(self, what: str, error: BaseException | str) -> TapeError:
        """The error to raise when the served response no longer rebuilds as the framework's type: naming the
        tape, the step, the turn and ``what`` (the field)."""
        return rebuild_error(self._tape.path, self.seq, self.turn, what, error)

    def finish(self, response: Any, *, events: Iterable[Any] | None = None, ms: float | None = None) -> dict[str, Any]:
        """The live model's response (the neutral form; ``events``: its stream's events, when streamed): written
        when the run records it, counted; returns it normalised (:func:`~tapetui.core.turns.normal_response`).

        Raises:
            InvalidValue: a response that is not the neutral form (nothing is written).
            TapeError: it cannot be recorded, or the turn was finished already.
        """
        if self._done:
            raise TapeError(f"{self._tape.path}: model turn {self.turn} (step {self.seq}) was finished already")
        self._done = True
        took = round((self._tape._timer() - self._start) * 1000, 3) if ms is None else ms
        where = f"{self._tape.path}: step {self.seq} (model turn {self.turn})"
        try:
            try:
                norm = normal_response(response, where)
            except InvalidValue as e:  # it may quote a value of the response
                raise InvalidValue(self._tape._redactor.redact_text(str(e))) from None
            evs = list(events) if events is not None else None
            line, usage, stored = self._tape._turn_line(self, norm, None, evs, took, where)
        except BaseException:
            self._tape._turn_abandon()
            raise
        self._tape._turn_end(self, line, usage, stored, took, error=False)
        self.response = norm
        self._close_span(None, usage)
        return norm

    def _close_span(self, error: BaseException | None, usage: Any = None) -> None:
        span, self.span = self.span, None
        if span is not None:
            if isinstance(usage, dict):
                span.note["attrs"].update(
                    {f"gen_ai.usage.{k}_tokens": v for k, v in usage.items() if k in ("input", "output")}
                )
            span.close(error)

    def fail(self, error: BaseException) -> None:
        """The live model call raised ``error``: an ``Exception`` is written as the turn's error (replay raises
        it again, as its own class when restorable); a cancellation or an interrupt writes nothing."""
        if self._done:
            return
        self._done = True
        if not isinstance(error, Exception):
            self._tape._turn_abandon()
            self._close_span(error)
            return
        took = round((self._tape._timer() - self._start) * 1000, 3)
        where = f"{self._tape.path}: step {self.seq} (model turn {self.turn})"
        try:
            line, usage, stored = self._tape._turn_line(self, None, error, None, took, where)
        except BaseException:
            self._tape._turn_abandon()
            raise
        self._tape._turn_end(self, line, usage, stored, took, error=True)
        self._close_span(error)

    def abandon(self) -> None:
        """Nothing is written for this turn (a live call that never returned)."""
        if not self._done:
            self._done = True
            self._tape._turn_abandon()
            self._close_span(None)
