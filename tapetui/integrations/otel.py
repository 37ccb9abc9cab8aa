"""OpenTelemetry, for the extra ``tapetui[otel]``: spans written as OTLP JSON Lines.

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
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["OTLPJsonFileExporter", "otlp_json"]

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
