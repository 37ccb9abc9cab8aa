"""OpenTelemetry, for the extra ``tapetui[otel]``: live spans, and spans written as OTLP JSON Lines.

:func:`step_spans` makes an OpenTelemetry ``Tracer`` (None: the global provider's) the receiver of a run's steps
(``Tape(tracer=...)``, or ``[otel] enabled = true``; see :mod:`tapetui.core.stepspans`, which loads it through the
``tapetui.spans`` entry point): an ``execute_tool {tool}`` span (INTERNAL) per call and a ``chat {model}`` span
(CLIENT) per model turn, in record, replay and fill alike, carrying ``tool.fingerprint``, ``tool.version``,
``tapetui.step`` and ``tapetui.outcome``; drift and contract changes add ``tapetui.changes`` (the changed paths) and a
span event. A span nests under the current span (the framework's ``invoke_agent``, a test's own). When the
framework already made the span for this call or turn — pydantic-ai's ``execute_tool weather`` or ``chat …`` is the
current span — tapetui sets its attributes on that span instead of adding a second one.

:class:`OTLPJsonFileExporter` is a ``SpanExporter`` that appends each batch as one ``TracesData`` line in the OTLP
file format (the collector's file exporter's: hex ids, times as strings, ``kind`` and status codes as integers),
what ``tapetui import otlp`` reads. It encodes with OpenTelemetry's own protobuf encoder
(``opentelemetry-exporter-otlp-proto-common``) and the protobuf JSON mapping, then writes the ids as hex: the
mapping writes bytes as base64, the file format does not.
"""

from __future__ import annotations

import base64
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import SpanKind, Status, StatusCode

from tapetui.core.stepspans import StepError, StepSpans

__all__ = ["OTLPJsonFileExporter", "OTelSpans", "otlp_json", "step_spans"]

_MODEL_OPERATIONS = ("chat", "generate_content", "text_completion")


def step_spans(tracer: Any = None) -> StepSpans:
    """The ``tapetui.spans`` entry point: ``tracer`` (an OpenTelemetry ``Tracer``; None: the global provider's) as
    a :class:`~tapetui.core.stepspans.StepSpans`."""
    return OTelSpans(tracer if tracer is not None else trace.get_tracer("tapetui"))


class OTelSpans:
    """A run's steps as OpenTelemetry spans (see the module doc)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self.tracer = tracer

    def _framework_span(self, kind: str, name: str) -> Any:
        """The framework's own span of this step, when it is the current one."""
        current = trace.get_current_span()
        if not current.is_recording():
            return None
        attrs = getattr(current, "attributes", None) or {}
        op = attrs.get("gen_ai.operation.name")
        if kind == "tool":
            same = op == "execute_tool" and attrs.get("gen_ai.tool.name", name) == name
            return current if same or getattr(current, "name", "") == f"execute_tool {name}" else None
        return current if op in _MODEL_OPERATIONS else None

    def begin(self, kind: str, name: str, attrs: dict[str, Any]) -> Any:
        found = self._framework_span(kind, name)
        if found is not None:
            found.set_attributes({k: v for k, v in attrs.items() if k.startswith(("tool.", "tapetui."))})
            return (found, False)
        title = f"execute_tool {name}" if kind == "tool" else f"chat {name}"
        span = self.tracer.start_span(
            title, kind=SpanKind.INTERNAL if kind == "tool" else SpanKind.CLIENT, attributes=attrs
        )
        return (span, True)

    def end(self, token: Any, outcome: str, attrs: dict[str, Any], error: StepError | None) -> None:
        span, own = token
        span.set_attributes({**attrs, "tapetui.outcome": outcome})
        if outcome in ("drift", "contract", "behaviour drift"):
            event = {"tapetui.outcome": outcome}
            if "tapetui.changes" in attrs:
                event["tapetui.changes"] = attrs["tapetui.changes"]
            span.add_event(f"tapetui.{outcome.replace(' ', '_')}", event)
        if error is not None:  # what record_exception writes, from the redacted text (never the exception itself)
            told = {"exception.type": error.type, "exception.message": error.message}
            span.add_event("exception", {**told, "exception.stacktrace": error.stacktrace})
            span.set_status(Status(StatusCode.ERROR, error.type))
        if own:
            span.end()


_ID_KEYS = ("traceId", "spanId", "parentSpanId")


def otlp_json(spans: Sequence[ReadableSpan]) -> dict[str, Any]:
    """``spans`` as one OTLP ``TracesData`` document in the file format (hex ids)."""
    doc: dict[str, Any] = json_format.MessageToDict(encode_spans(spans))
    for rs in doc.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for sp in ss.get("spans", []):
                _hex_ids(sp)
                for link in sp.get("links", []):
                    _hex_ids(link)
    return doc


def _hex_ids(d: dict[str, Any]) -> None:
    for k in _ID_KEYS:
        if d.get(k):
            d[k] = base64.b64decode(d[k]).hex()


class OTLPJsonFileExporter(SpanExporter):
    """Appends every exported batch to ``path`` as one line of OTLP JSON (see the module doc)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._mu = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not spans:
            return SpanExportResult.SUCCESS
        line = orjson.dumps(otlp_json(spans)) + b"\n"
        with self._mu, open(self.path, "ab") as fh:
            fh.write(line)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
