"""Reading OTLP JSON: the OpenTelemetry file exporter's format, one ``TracesData`` document per line (JSON Lines),
or one document in a file of its own.

Each span comes out as a :class:`Span`: ids as lowercase hex, times as integer nanoseconds, attributes decoded from
OTLP's ``AnyValue`` (``stringValue``, ``intValue`` as a number or a string, ``doubleValue``, ``boolValue``,
``bytesValue`` as its base64 text, ``arrayValue`` as a list, ``kvlistValue`` as an object), its resource's
attributes and its scope's name beside it. The file is read a line at a time: a file of gigabytes in JSON Lines
costs the memory of its longest line. A one-document file (pretty-printed, as a collector's debug output is) is
read whole, up to :data:`ONE_DOCUMENT_LIMIT`.

Ids: OTLP's file format writes them as hex (32 digits a trace id, 16 a span id). The protobuf JSON mapping writes
bytes as base64, and some exporters do so: an id that decodes from base64 to exactly 16 (trace) or 8 (span) bytes
is accepted, and counted so the importer can say so once. Anything else is a :class:`TraceFormatError`.

Nothing read is ever run, imported or evaluated: a trace is data from wherever it came from.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.errors import TapeError
from tapetui.core.files import open_regular
from tapetui.core.redact import DEFAULT_REDACTOR, REDACTED

__all__ = ["ONE_DOCUMENT_LIMIT", "IdNotes", "Span", "TraceFormatError", "read_spans"]

ONE_DOCUMENT_LIMIT = 256 * 1024 * 1024  # a file that is one JSON document: read whole up to this size
_MAX_DEPTH = 64  # AnyValue nesting: deeper is not a trace any exporter writes


class TraceFormatError(TapeError):
    """An OTLP file that cannot be read as one: its message names the file, the line and what is wrong."""


@dataclass(slots=True)
class Span:
    """One span as the importer reads it (see the module doc)."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    kind: int  # 0 unspecified, 1 internal, 2 server, 3 client, 4 producer, 5 consumer
    start: int  # ns since the epoch
    end: int
    attrs: dict[str, Any]
    events: list[dict[str, Any]]  # each {name, time, attrs}
    status: int  # 0 unset, 1 ok, 2 error
    status_message: str
    resource: dict[str, Any]
    scope: str
    where: str  # "file:line" of the document that held it

    def to_json(self) -> list[Any]:
        """Its fields in order, as JSON (the importer's spill file): :meth:`from_json` reads them back."""
        return [
            self.trace_id,
            self.span_id,
            self.parent_id,
            self.name,
            self.kind,
            self.start,
            self.end,
            self.attrs,
            self.events,
            self.status,
            self.status_message,
            self.resource,
            self.scope,
            self.where,
        ]

    @classmethod
    def from_json(cls, fields: list[Any]) -> Span:
        return cls(*fields)

    @property
    def ms(self) -> float:
        return round(max(0, self.end - self.start) / 1e6, 3)


@dataclass
class IdNotes:
    """What the reader noticed of ids: how many were base64 (the protobuf JSON mapping) rather than hex."""

    base64_ids: int = 0
    documents: int = 0
    spans: int = 0
    files: list[str] = field(default_factory=list)
    # which attribute names hold secrets (the redaction rules of the tapes the spans go to): an error never quotes
    # a value under one; None: the default rules
    secret_key: Callable[[str], bool] | None = None


def read_spans(path: Path, notes: IdNotes | None = None) -> Iterator[Span]:
    """Every span of an OTLP JSON file, in file order.

    Raises:
        TraceFormatError: the file cannot be opened as a regular file, is not OTLP JSON (the console exporter's
            output is named as such), or a span lacks what a span must have; the message names the file and line.
    """
    notes = notes if notes is not None else IdNotes()
    notes.files.append(str(path))
    try:
        fd = open_regular(path, "trace")
    except TapeError as e:
        raise TraceFormatError(str(e)) from None
    except OSError as e:
        raise TraceFormatError(f"{path}: cannot read the trace: {e.strerror}") from None
    with open(fd, "rb", closefd=True) as fh:
        first = fh.readline().removeprefix(b"\xef\xbb\xbf")  # a UTF-8 byte order mark: not part of the JSON
        n = 1  # the line ``first`` is
        while first and not first.strip():  # blank lines before the first document
            first = fh.readline()
            n += 1
        head = first.strip()
        single = False
        if head:
            try:
                doc = orjson.loads(head)
            except orjson.JSONDecodeError as e:
                single = (head.startswith(b"{") or head.startswith(b"[")) and not _next_is_json(fh)
                if not single:
                    raise TraceFormatError(f"{path}:{n}: not JSON: {_json_error(e)}") from None
            else:
                yield from _document(doc, path, n, notes)
        if single:  # one document across lines (pretty-printed), or one line that is not JSON
            rest = fh.read(ONE_DOCUMENT_LIMIT + 1)
            if len(first) + len(rest) > ONE_DOCUMENT_LIMIT:
                raise TraceFormatError(
                    f"{path}:{n}: one JSON document of more than {ONE_DOCUMENT_LIMIT >> 20} MB: write the trace as "
                    "JSON Lines (one TracesData per line, the OTLP file exporter's format) to import it streamed"
                )
            try:
                doc = orjson.loads(first + rest)
            except orjson.JSONDecodeError as e:  # where in the document: its line in the file, and the column
                raise TraceFormatError(f"{path}:{n + e.lineno - 1}: not JSON: {e.msg} at column {e.colno}") from None
            yield from _document(doc, path, n, notes)
            return
        for raw in fh:
            n += 1
            line = raw.strip()
            if not line:
                continue
            try:
                doc = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise TraceFormatError(f"{path}:{n}: not JSON: {_json_error(e)}") from None
            yield from _document(doc, path, n, notes)


def _next_is_json(fh: Any) -> bool:
    """Whether the line after a first line that is not JSON alone is a JSON document: then the file is JSON Lines
    with a bad first line, not one document across lines (the read goes back to where it was)."""
    at = fh.tell()
    nxt = fh.readline().strip()
    fh.seek(at)
    try:
        return bool(nxt) and isinstance(orjson.loads(nxt), dict)
    except orjson.JSONDecodeError:
        return False


def _json_error(e: orjson.JSONDecodeError) -> str:
    return f"{e.msg} at character {e.pos}"


def _document(doc: Any, path: Path, line: int, notes: IdNotes) -> Iterator[Span]:
    where = f"{path}:{line}"
    if isinstance(doc, list):
        if doc and all(isinstance(d, dict) and _is_console(d) for d in doc):
            raise TraceFormatError(_console(where))
        raise TraceFormatError(f'{where}: a list, not an OTLP TracesData object ({{"resourceSpans": [...]}})')
    if not isinstance(doc, dict):
        raise TraceFormatError(f"{where}: {type(doc).__name__}, not an OTLP TracesData object")
    if "resourceSpans" not in doc and "resource_spans" not in doc:
        if _is_console(doc):
            raise TraceFormatError(_console(where))
        if "resourceLogs" in doc or "resourceMetrics" in doc:
            raise TraceFormatError(f"{where}: OTLP logs or metrics, not traces (no resourceSpans)")
        raise TraceFormatError(f"{where}: no resourceSpans: not an OTLP TracesData document")
    notes.documents += 1
    secret_key = notes.secret_key or DEFAULT_REDACTOR.is_secret_key
    for r, rs in enumerate(_list(doc.get("resourceSpans", doc.get("resource_spans")), where, "resourceSpans")):
        at = _Root(f"resourceSpans[{r}]", secret_key)
        rs = _obj(rs, where, at)
        raw = _obj(rs.get("resource") or {}, where, f"{at}.resource").get("attributes")
        resource = _attributes(raw, where, _Root(f"{at}.resource", secret_key))
        for s_i, ss in enumerate(_list(rs.get("scopeSpans", rs.get("scope_spans")), where, f"{at}.scopeSpans")):
            sat = _Root(f"{at}.scopeSpans[{s_i}]", secret_key)
            ss = _obj(ss, where, sat)
            scope = _obj(ss.get("scope") or {}, where, f"{sat}.scope").get("name")
            for i, sp in enumerate(_list(ss.get("spans"), where, f"{sat}.spans")):
                notes.spans += 1
                if type(sp) is not dict:
                    _obj(sp, where, f"{sat}.spans[{i}]")
                yield _span(sp, where, (sat, ".", "spans", i), resource, scope, notes)


def _is_console(d: dict[str, Any]) -> bool:
    """The shape of ``ConsoleSpanExporter``'s output: ``context.trace_id`` as ``0x…``, ``kind`` as ``SpanKind.X``."""
    ctx = d.get("context")
    return isinstance(ctx, dict) and "trace_id" in ctx or str(d.get("kind", "")).startswith("SpanKind.")


def _console(where: str) -> str:
    return (
        f"{where}: this is the OpenTelemetry console exporter's output (ConsoleSpanExporter), not OTLP JSON: "
        "export the spans as OTLP JSON Lines instead (tapetui.integrations.otel.OTLPJsonFileExporter, or a "
        "collector's file exporter)"
    )


def _list(v: Any, where: str, at: str) -> list[Any]:
    if v is None:
        return []
    if not isinstance(v, list):
        raise TraceFormatError(f"{where}: {at} must be a list, got {type(v).__name__}")
    return v


def _obj(v: Any, where: str, at: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise TraceFormatError(f"{where}: {at} must be an object, got {type(v).__name__}")
    return v


def _span(sp: dict[str, Any], where: str, at: Any, resource: dict[str, Any], scope: Any, notes: IdNotes) -> Span:
    """One span; ``at`` is its position in the document (:func:`_at`), put in words only for an error."""
    name = sp.get("name")
    if not isinstance(name, str):
        raise TraceFormatError(f"{where}: {_at(at)}: a span needs a name (text)")
    at = (at, " ", name)  # "... (name)"
    trace_id = _id(_field(sp, "traceId", "trace_id"), 16, where, (at, ".", "traceId"), notes)
    span_id = _id(_field(sp, "spanId", "span_id"), 8, where, (at, ".", "spanId"), notes)
    parent_raw = _field(sp, "parentSpanId", "parent_span_id")
    parent = _id(parent_raw, 8, where, (at, ".", "parentSpanId"), notes) if parent_raw else None
    kind = sp.get("kind", 0)
    if type(kind) is not int:
        if isinstance(kind, str) and kind.startswith("SPAN_KIND_"):  # the protobuf mapping's enum names
            kind = _KINDS.get(kind, 0)
        else:
            raise TraceFormatError(f"{where}: {_at(at)}.kind must be an integer (OTLP's SpanKind), got {kind!r}")
    start = _nanos(_field(sp, "startTimeUnixNano", "start_time_unix_nano"), where, (at, ".", "startTimeUnixNano"))
    end = _nanos(_field(sp, "endTimeUnixNano", "end_time_unix_nano"), where, (at, ".", "endTimeUnixNano"))
    status = sp.get("status") or {}
    if type(status) is not dict:
        status = _obj(status, where, f"{_at(at)}.status")
    code = status.get("code", 0)
    if isinstance(code, str):
        code = _STATUS.get(code, 0)
    if type(code) is not int:
        raise TraceFormatError(f"{where}: {_at(at)}.status.code must be an integer, got {code!r}")
    events = []
    raw_events = sp.get("events")
    if raw_events is not None:
        for j, ev in enumerate(_list(raw_events, where, f"{_at(at)}.events")):
            ev_at = (at, ".", "events", j)
            ev = _obj(ev, where, _at(ev_at)) if type(ev) is not dict else ev
            events.append(
                {
                    "name": str(ev.get("name", "")),
                    "time": _nanos(ev.get("timeUnixNano", 0), where, (ev_at, ".", "timeUnixNano")),
                    "attrs": _attributes(ev.get("attributes"), where, ev_at),
                }
            )
    message = status.get("message")
    return Span(
        trace_id,
        span_id,
        parent,
        name,
        kind,
        start,
        end,
        _attributes(sp.get("attributes"), where, at),
        events,
        code,
        str(message) if message else "",
        resource,
        scope if isinstance(scope, str) else "",
        where,
    )


class _Root(str):
    """The text of a position that chains of :func:`_at` start from, with what says which attribute names hold
    secrets (:func:`_quote`)."""

    def __new__(cls, text: str, secret_key: Callable[[str], bool]) -> _Root:
        root = super().__new__(cls, text)
        root.secret_key = secret_key
        return root

    secret_key: Callable[[str], bool]


def _quote(value: Any, at: Any) -> str:
    """A value an error quotes: its first 40 characters, or ``[REDACTED]`` under an attribute whose name holds secrets
    (``api_key``, a ``[redact]`` key), as a tape would hold it."""
    names = []
    while isinstance(at, tuple):
        parent, how, what, *_ = at
        if how in ("[k]", ".") and isinstance(what, str):
            names.append(what)
        at = parent
    secret_key = getattr(at, "secret_key", None)
    if secret_key is not None and any(secret_key(name) for name in names):
        return REDACTED
    return repr(str(value)[:40])


def _field(d: dict[str, Any], camel: str, snake: str) -> Any:
    """A field under its OTLP JSON name, else (that name absent) under the protobuf field's own name."""
    v = d.get(camel, _ABSENT)
    return d.get(snake) if v is _ABSENT else v


_ABSENT: Any = object()


def _at(at: Any) -> str:
    """A position in a document as an error says it: ``at`` is text, or a chain of tuples made cheaply on the read's
    hot path and put in words only here: ``(parent, ".", name)``, ``(parent, " ", span name)``, ``(parent, ".", name,
    i)`` for ``name[i]``, ``(parent, "[]", i)`` for ``[i]`` and ``(parent, "[k]", key)`` for ``.attributes[key]``."""
    if isinstance(at, str):
        return at
    parent, how, what, *index = at
    head = _at(parent)
    if how == " ":
        return f"{head} ({what!r})"
    if how == "[]":
        return f"{head}[{what}]"
    if how == "[k]":
        return f"{head}.attributes[{what!r}]"
    return f"{head}.{what}[{index[0]}]" if index else f"{head}.{what}"


_KINDS = {
    "SPAN_KIND_UNSPECIFIED": 0,
    "SPAN_KIND_INTERNAL": 1,
    "SPAN_KIND_SERVER": 2,
    "SPAN_KIND_CLIENT": 3,
    "SPAN_KIND_PRODUCER": 4,
    "SPAN_KIND_CONSUMER": 5,
}
_STATUS = {"STATUS_CODE_UNSET": 0, "STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}
_HEX_ID = re.compile(r"[0-9a-fA-F]+")  # ASCII hex digits only (the length is checked apart)
_DIGITS = re.compile(r"-?[0-9]{1,20}")  # ASCII digits only (str.isdigit takes "²" and "١٢٣")
_INT64 = (-(1 << 63), (1 << 63) - 1)  # OTLP's intValue and times are int64 (fixed64 within it)


def _id(v: Any, size: int, where: str, at: Any, notes: IdNotes) -> str:
    """A trace (16 bytes) or span (8 bytes) id as lowercase hex."""
    if type(v) is str and len(v) == size * 2 and _HEX_ID.fullmatch(v):
        return v.lower()
    if not isinstance(v, str) or not v:
        raise TraceFormatError(f"{where}: {_at(at)} is missing (a span needs its trace and span ids)")
    try:
        raw = base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) == size:
        notes.base64_ids += 1
        return raw.hex()
    raise TraceFormatError(
        f"{where}: {_at(at)} {v[:80]!r} is not an id: {size * 2} hex digits expected (base64 of {size} bytes is "
        "read too)"
    )


def _nanos(v: Any, where: str, at: Any) -> int:
    n = v if type(v) is int else int(v) if isinstance(v, str) and _DIGITS.fullmatch(v) else None
    if n is not None and 0 <= n <= _INT64[1]:
        return n
    if v is None:
        raise TraceFormatError(f"{where}: {_at(at)} is missing")
    raise TraceFormatError(
        f"{where}: {_at(at)} must be nanoseconds since the epoch (ASCII digits, within 64 bits), got {str(v)[:40]!r}"
    )


def _attributes(v: Any, where: str, at: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if type(v) is not list:
        v = _list(v, where, f"{_at(at)}.attributes")  # None: no attributes
    for i, kv in enumerate(v):
        key = kv.get("key") if type(kv) is dict else None
        if type(key) is not str:
            if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
                raise TraceFormatError(f'{where}: {_at(at)}.attributes[{i}] must be {{"key": text, "value": AnyValue}}')
            key = kv["key"]
        value = kv.get("value")
        if type(value) is dict and len(value) == 1:  # the common case, a string: no position made
            x = value.get("stringValue")
            if type(x) is str:
                out[key] = x
                continue
        out[key] = _value(value, where, (at, "[k]", key), 0)
    return out


def _value(v: Any, where: str, at: Any, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise TraceFormatError(f"{where}: {_at(at)} is nested more than {_MAX_DEPTH} levels deep")
    if v is None or v == {}:
        return None
    if not isinstance(v, dict) or len(v) != 1:
        raise TraceFormatError(f"{where}: {_at(at)} must be an OTLP AnyValue (one of stringValue, intValue, ...)")
    ((k, x),) = v.items()
    if k in ("stringValue", "string_value"):
        return x if isinstance(x, str) else str(x)
    if k in ("boolValue", "bool_value"):
        if type(x) is not bool:
            raise TraceFormatError(f"{where}: {_at(at)}.boolValue must be true or false, got {_quote(x, at)}")
        return x
    if k in ("intValue", "int_value"):
        n = x if type(x) is int else int(x) if isinstance(x, str) and _DIGITS.fullmatch(x) else None
        if n is None or not _INT64[0] <= n <= _INT64[1]:
            raise TraceFormatError(f"{where}: {_at(at)}.intValue must be a 64-bit integer, got {_quote(x, at)}")
        return n
    if k in ("doubleValue", "double_value"):
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return float(x)
        if x in ("NaN", "Infinity", "-Infinity"):
            return None  # not JSON: a tape cannot hold it
        raise TraceFormatError(f"{where}: {_at(at)}.doubleValue must be a number")
    if k in ("bytesValue", "bytes_value"):
        return x if isinstance(x, str) else None
    if k in ("arrayValue", "array_value"):
        values = x.get("values") if isinstance(x, dict) else None
        return [_value(e, where, (at, "[]", i), depth + 1) for i, e in enumerate(_list(values, where, _at(at)))]
    if k in ("kvlistValue", "kvlist_value"):
        values = x.get("values") if isinstance(x, dict) else None
        out = {}
        for i, kv in enumerate(_list(values, where, _at(at))):
            if not isinstance(kv, dict) or not isinstance(kv.get("key"), str):
                raise TraceFormatError(f'{where}: {_at(at)}[{i}] must be {{"key": text, "value": AnyValue}}')
            out[kv["key"]] = _value(kv.get("value"), where, (at, ".", kv["key"]), depth + 1)
        return out
    raise TraceFormatError(f"{where}: {_at(at)}: {k!r} is not an OTLP AnyValue field")
