"""Live spans: every step of a run (a tool call, a model turn) as a span with its fingerprint and outcome.

The engine knows only :class:`StepSpans`, two methods: :meth:`~StepSpans.begin` when a step starts, and
:meth:`~StepSpans.end` with its outcome once the tape decided it (and the live call, if any, returned). What a
step's events say (``_emit``: hit, drift, miss, live, record, stale, fingerprint, behaviour) is noted for the step
running in the current context, so a span gets the outcome of its own call even when many run at once (threads
and tasks each have their context).

OpenTelemetry itself is the extra ``tapetui[otel]``: ``Tape(tracer=…)`` with an OpenTelemetry ``Tracer`` (or
``[otel] enabled = true`` in tapes.toml, for the global tracer provider) loads the ``tapetui.spans`` entry point
``otel`` (:mod:`tapetui.integrations.otel`), which turns a ``Tracer`` into a :class:`StepSpans`. The engine
imports no OpenTelemetry, and without a tracer a step costs one attribute check.

Outcomes (``tapetui.outcome``): ``hit``, ``tolerated`` (served over an excused difference), ``served over a changed
input``, ``drift``, ``contract``, ``miss``, ``stale``, ``behaviour drift``, ``live`` (run live on replay or fill)
and ``recorded`` (record mode); ``error`` when the step raised before any of these.

What reaches a :class:`StepSpans` is redacted here, by the tape's redactor, as what reaches the tape is: the step's
name (a model's name can hold a key), every text attribute (a call id) and what the step raised, given as a
:class:`StepError` (its type, message and stack trace as text), never the exception itself. A receiver that raises
(an exporter down, a span processor's bug) costs the run its spans, never a call: the tape warns once and goes on.
"""

from __future__ import annotations

import contextlib
import traceback
import warnings
from contextvars import ContextVar
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from tapetui.core.errors import TapeError
from tapetui.core.redact import Redactor

__all__ = ["StepError", "StepSpans", "load_spans", "note_event", "step_span", "tool_span"]


@dataclass(frozen=True, slots=True)
class StepError:
    """What a step raised, as a span carries it (OpenTelemetry's ``exception.*`` attributes), redacted.

    Attributes:
        type: the exception's class, with its module (``builtins.`` left out).
        message: ``str()`` of it.
        stacktrace: the traceback as Python prints it.
    """

    type: str
    message: str
    stacktrace: str

    @classmethod
    def of(cls, error: BaseException, redactor: Redactor) -> StepError:
        """``error`` as text, every part redacted (a provider's 401 quotes the key it was sent)."""
        kind = type(error)
        name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        try:
            message = str(error)
        except Exception:  # noqa: BLE001 - an exception whose __str__ fails: its type says enough
            message = f"<{kind.__name__} that cannot be printed>"
        try:
            stack = "".join(traceback.format_exception(error))
        except Exception:  # noqa: BLE001
            stack = ""
        return cls(redactor.redact_text(name), redactor.redact_text(message), redactor.redact_text(stack))


@runtime_checkable
class StepSpans(Protocol):
    """What receives a run's steps as spans (see the module doc)."""

    def begin(self, kind: str, name: str, attrs: dict[str, Any]) -> Any:
        """A step starts: ``kind`` ``"tool"`` or ``"model"``; returns what :meth:`end` gets back."""
        ...

    def end(self, token: Any, outcome: str, attrs: dict[str, Any], error: StepError | None) -> None:
        """The step ended with ``outcome`` (and ``error`` when it raised); ``attrs`` what the tape learned of it."""
        ...


_OUTCOMES = {
    "hit": "hit",
    "drift": "drift",
    "miss": "miss",
    "live": "live",
    "record": "recorded",
    "stale": "stale",
    "fingerprint": "contract",
    "behaviour": "behaviour drift",
}
_LOUD = frozenset({"drift", "contract", "behaviour drift"})  # a later event (the hit after it) never hides these
_NOTE: ContextVar[dict[str, Any] | None] = ContextVar("tapetui_step_note", default=None)


def note_event(event: str, fields: dict[str, Any]) -> None:
    """An event of the step running in this context (the tape's ``_emit``): its outcome and attributes noted."""
    note = _NOTE.get()
    if note is None:
        return
    outcome = _OUTCOMES.get(event)
    if outcome is None:
        return
    if outcome == "hit" and fields.get("tolerated"):
        outcome = "tolerated"
    elif outcome == "hit" and fields.get("changed_input"):
        outcome = "served over a changed input"
    if note.get("outcome") not in _LOUD:
        note["outcome"] = outcome
    attrs = note["attrs"]
    for k, attr in (("seq", "tapetui.step"), ("key", "tapetui.key"), ("fingerprint", "tool.fingerprint")):
        v = fields.get(k)
        if isinstance(v, (str, int)) and not isinstance(v, bool):
            attrs[attr] = v
    if isinstance(fields.get("tokens"), int):
        attrs["tapetui.tokens"] = fields["tokens"]
    changes = fields.get("changes")
    if outcome in _LOUD and isinstance(changes, list):
        attrs["tapetui.changes"] = [str(c[0]) for c in changes if isinstance(c, list) and c][:50]


class step_span:  # noqa: N801 - used as a context manager, named as one
    """One step's span: begun on entry, ended on exit with the outcome its events noted; everything it hands the
    receiver redacted by ``redactor`` (see the module doc)."""

    __slots__ = ("_attrs", "_kind", "_name", "_redactor", "_reset", "_spans", "_token", "note")

    def __init__(self, spans: StepSpans, kind: str, name: str, attrs: dict[str, Any], redactor: Redactor) -> None:
        self._spans, self._kind, self._redactor = spans, kind, redactor
        self._name = redactor.redact_text(name)
        self._attrs = _redacted(attrs, redactor)
        self.note: dict[str, Any] = {"outcome": None, "attrs": {}}

    def __enter__(self) -> step_span:
        try:
            self._token = self._spans.begin(self._kind, self._name, self._attrs)
        except Exception as e:  # noqa: BLE001 - the receiver's failure: the step runs without its span
            self._token = _NO_SPAN
            _receiver_failed(e, self._redactor)
        self._reset = _NOTE.set(self.note)
        return self

    def detach(self) -> None:
        """Stop noting this context's events for the step (a model turn whose live call ends elsewhere)."""
        _NOTE.reset(self._reset)

    def __exit__(self, et: Any, e: BaseException | None, tb: Any) -> None:
        _NOTE.reset(self._reset)
        self.close(e)

    def close(self, error: BaseException | None = None) -> None:
        if self._token is _NO_SPAN:
            return
        outcome = self.note["outcome"] or ("error" if error is not None else "hit")
        try:
            told = None if error is None else StepError.of(error, self._redactor)
            self._spans.end(self._token, outcome, _redacted(self.note["attrs"], self._redactor), told)
        except Exception as e:  # noqa: BLE001 - never the step's outcome: the call ran, its line is written
            _receiver_failed(e, self._redactor)


_NO_SPAN: Any = object()  # a step whose span the receiver could not begin
_WARNED: list[bool] = [False]


def _redacted(attrs: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """``attrs`` with each text, and each text of a list, redacted."""
    out = {}
    for k, v in attrs.items():
        if isinstance(v, str):
            v = redactor.redact_text(v)
        elif isinstance(v, list):
            v = [redactor.redact_text(x) if isinstance(x, str) else x for x in v]
        out[k] = v
    return out


def _receiver_failed(e: Exception, redactor: Redactor) -> None:
    """A span receiver raised: said once a process (a warning), never raised into the agent's call — not even
    where warnings are errors (``-W error``), nor when the exception cannot be printed."""
    if _WARNED[0]:
        return
    _WARNED[0] = True
    try:
        said = redactor.redact_text(f"{type(e).__name__}: {e}")[:300]
    except Exception:  # noqa: BLE001 - its __str__ raised: its type says enough
        said = type(e).__name__
    with contextlib.suppress(Exception):  # warnings made errors: the call's outcome is the call's alone
        warnings.warn(
            f"tapetui: live spans: the span receiver raised {said}; the run goes on without those spans",
            RuntimeWarning,
            stacklevel=4,
        )


def tool_span(spans: StepSpans, tool: str, call_id: str | None, live: Any, redactor: Redactor) -> step_span:
    """A call's span: the tool, its call id and (``live``: the registered tool, when there is one) the contract it
    runs under."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = str(call_id)
    if live is not None:
        attrs["tool.fingerprint"] = live.fingerprint
        attrs["tool.version"] = live.manifest.version
    return step_span(spans, "tool", tool, attrs, redactor)


def load_spans(tracer: Any, enabled: bool) -> StepSpans | None:
    """The run's :class:`StepSpans`: ``tracer`` itself when it is one; an OpenTelemetry ``Tracer`` (or, with
    ``enabled``, the global provider's) through the ``tapetui.spans`` entry point ``otel``; None for neither.

    Raises:
        TapeError: a tracer or ``[otel] enabled`` without the extra installed.
    """
    if tracer is None and not enabled:
        return None
    if isinstance(tracer, StepSpans):
        return tracer
    found = [ep for ep in entry_points(group="tapetui.spans") if ep.name == "otel"]
    if not found:
        raise TapeError(
            "live spans need OpenTelemetry: pip install 'tapetui[otel]' (Tape(tracer=...) or tapes.toml's "
            "[otel] enabled = true)"
        )
    try:
        factory = found[0].load()
    except ImportError as e:
        raise TapeError(f"live spans need OpenTelemetry ({e}): pip install 'tapetui[otel]'") from None
    if tracer is not None and not callable(getattr(tracer, "start_span", None)):  # refused now, not at the first call
        raise TapeError(
            f"tracer= takes an OpenTelemetry Tracer (opentelemetry.trace.get_tracer(...)) or a StepSpans, not "
            f"{type(tracer).__name__}"
        )
    spans = factory(tracer)
    if not isinstance(spans, StepSpans):
        raise TapeError(f"the tapetui.spans entry point 'otel' gave {type(spans).__name__}, not a StepSpans")
    return spans
