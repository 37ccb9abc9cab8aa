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
"""

from __future__ import annotations

from contextvars import ContextVar
from importlib.metadata import entry_points
from typing import Any, Protocol, runtime_checkable

from tapetui.core.errors import TapeError

__all__ = ["StepSpans", "load_spans", "note_event", "step_span", "tool_span"]


@runtime_checkable
class StepSpans(Protocol):
    """What receives a run's steps as spans (see the module doc)."""

    def begin(self, kind: str, name: str, attrs: dict[str, Any]) -> Any:
        """A step starts: ``kind`` ``"tool"`` or ``"model"``; returns what :meth:`end` gets back."""
        ...

    def end(self, token: Any, outcome: str, attrs: dict[str, Any], error: BaseException | None) -> None:
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
    if outcome == "hit" and fields.get("excused"):
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
    """One step's span: begun on entry, ended on exit with the outcome its events noted."""

    __slots__ = ("_attrs", "_kind", "_name", "_reset", "_spans", "_token", "note")

    def __init__(self, spans: StepSpans, kind: str, name: str, attrs: dict[str, Any]) -> None:
        self._spans, self._kind, self._name, self._attrs = spans, kind, name, attrs
        self.note: dict[str, Any] = {"outcome": None, "attrs": {}}

    def __enter__(self) -> step_span:
        self._token = self._spans.begin(self._kind, self._name, self._attrs)
        self._reset = _NOTE.set(self.note)
        return self

    def detach(self) -> None:
        """Stop noting this context's events for the step (a model turn whose live call ends elsewhere)."""
        _NOTE.reset(self._reset)

    def __exit__(self, et: Any, e: BaseException | None, tb: Any) -> None:
        _NOTE.reset(self._reset)
        self.close(e)

    def close(self, error: BaseException | None = None) -> None:
        outcome = self.note["outcome"] or ("error" if error is not None else "hit")
        self._spans.end(self._token, outcome, self.note["attrs"], error)


def tool_span(spans: StepSpans, tool: str, call_id: str | None, live: Any) -> step_span:
    """A call's span: the tool, its call id and (``live``: the registered tool, when there is one) the contract it
    runs under."""
    attrs: dict[str, Any] = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool}
    if call_id is not None:
        attrs["gen_ai.tool.call.id"] = str(call_id)
    if live is not None:
        attrs["tool.fingerprint"] = live.fingerprint
        attrs["tool.version"] = live.manifest.version
    return step_span(spans, "tool", tool, attrs)


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
    spans = factory(tracer)
    if not isinstance(spans, StepSpans):
        raise TapeError(f"the tapetui.spans entry point 'otel' gave {type(spans).__name__}, not a StepSpans")
    return spans
