"""Model turns: the neutral request and response every adapter converts to, and what the tape does with them.

A *model turn* is one request an agent sends to its model and the model's response. On the tape it is a
``"type": "model"`` line in the same step sequence as the tool calls (``docs/format.md``, "Model turns"). Every
adapter (pydantic-ai, the OpenAI Agents SDK, LangChain) and the traces importer convert to one
framework-neutral schema shaped like OpenTelemetry's GenAI conventions:

- **request**: ``instructions`` (text or None), ``messages`` (each ``{"role", "parts": [...]}``, a part typed
  ``text`` / ``tool_call`` / ``tool_call_response`` / ``reasoning`` or any other JSON part), ``tools`` (the
  offered tools: full definitions when given to :meth:`Tape.model <tapetui.core.tape.Tape.model>`, their names
  on the tape — the definitions become tool lines, contracts like any other), ``output_schema`` and
  ``settings``;
- **response**: ``parts`` (the model's text, reasoning and ``tool_call`` parts, in its order),
  ``finish_reason``, ``usage`` (``input`` with cache included, ``output``, ``cache_read``, ``cache_write``),
  and what an adapter needs to rebuild its framework's type (``model_name``, ``id``...).

This module holds what does not need a tape: checking and normalising both, the turn's key
(``model:`` + 12 hex chars of the canonical request and model name), tokens, stream events and their
redaction, and a request difference written for people.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import orjson

from tapetui.core.canon import canon, canonical_json
from tapetui.core.changes import MISSING, Change, hidden_sides, secret_path, short, shown_path
from tapetui.core.errors import InvalidValue, TapeError
from tapetui.core.jsondiff import diff_values, path_segments
from tapetui.core.redact import DEFAULT_REDACTOR, Redactor

__all__ = [
    "REQUEST_FIELDS",
    "TURN",
    "RequestForm",
    "json_arguments",
    "normal_response",
    "normal_usage",
    "request_changes",
    "requested_calls",
    "requested_tools",
    "split_request",
    "stable_ids",
    "stream_events",
    "redact_events",
    "tokens",
    "turn_key",
    "turn_key_of",
]

TURN = "model"
"""The name a model turn goes by where a tool's name would be (run-log events, ``live=["model"]``, the ``model:``
key prefix): no tool may be called ``model``."""

REQUEST_FIELDS = ("instructions", "messages", "tools", "output_schema", "settings")
"""The neutral request's fields, in the order they are documented."""

_USAGE = ("input", "output", "cache_read", "cache_write")
_USAGE_SYNONYMS = {
    "input_tokens": "input",
    "prompt_tokens": "input",
    "request_tokens": "input",
    "output_tokens": "output",
    "completion_tokens": "output",
    "response_tokens": "output",
    "cache_read_tokens": "cache_read",
    "cache_write_tokens": "cache_write",
}


# ---- helpers for adapters -------------------------------------------------------------
def json_arguments(value: Any) -> Any:
    """A tool call's arguments as a JSON value: JSON text parsed, text that is not JSON as
    ``{"input_json": text}``, anything else as it is."""
    if isinstance(value, (str, bytes)):
        if not value:
            return {}
        try:
            return orjson.loads(value)
        except orjson.JSONDecodeError:
            return {"input_json": value if isinstance(value, str) else value.decode("utf-8", "replace")}
    return value


def stable_ids(messages: list[dict[str, Any]], is_local: Callable[[str], bool]) -> list[dict[str, Any]]:
    """``messages`` with every tool-call id for which ``is_local`` holds (made up by the framework or an offline
    model, new at each run) replaced by ``call_1``, ``call_2``... in order of first appearance, in ``tool_call``
    and ``tool_call_response`` parts alike; ids a provider issued are kept (they come back from the tape)."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for m in messages:
        parts = m.get("parts")
        if not isinstance(parts, list):
            out.append(m)
            continue
        new_parts = []
        for p in parts:
            ident = (
                p.get("id") if isinstance(p, dict) and p.get("type") in ("tool_call", "tool_call_response") else None
            )
            if isinstance(ident, str) and is_local(ident):
                stable = names.get(ident)
                if stable is None:
                    stable = names[ident] = f"call_{len(names) + 1}"
                p = {**p, "id": stable}
            new_parts.append(p)
        out.append({**m, "parts": new_parts})
    return out


NOT_CAPTURED = "not captured"  # a traced turn's or call's content the instrumentation did not record
CAPTURE_HINT = (
    "capture it with the instrumentation's content setting (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="
    "true; pydantic-ai: InstrumentationSettings(include_content=True); OpenInference: OPENINFERENCE_HIDE_INPUTS and "
    "OPENINFERENCE_HIDE_OUTPUTS unset) and import the trace again, or record the session"
)
TRACE_SOURCES = frozenset({"otlp"})  # what an imported trace's turns are recorded through (tapetui.traces)


def from_trace(source: str) -> bool:
    """Whether a turn recorded through ``source`` came from a trace (``otlp``, ``trace:…``): such a turn serves
    any adapter's request, as the neutral form it is; a turn one adapter recorded serves only that adapter."""
    return source in TRACE_SOURCES or source.startswith("trace")


# ---- the request ------------------------------------------------------------------------
def split_request(request: Any, where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A neutral request checked: ``(the request as stored, with the offered tools by name; the offered tools'
    definitions, for a tool given only by name none)``.

    Raises:
        InvalidValue: naming ``where`` and the field: not an object, messages that are not a list of
            ``{role, parts}``, a part without a ``type``, a tool without a name, a tool offered twice.
    """
    if not isinstance(request, Mapping):
        raise InvalidValue(
            f"{where}: a model request must be an object (the neutral request), got {type(request).__name__}"
        )
    stored: dict[str, Any] = {}
    instructions = request.get("instructions")
    if instructions is not None and not isinstance(instructions, (str, list)):
        raise InvalidValue(f"{where}: request.instructions must be text, a list of parts or None")
    stored["instructions"] = instructions
    messages = request.get("messages", [])
    if not isinstance(messages, (list, tuple)):
        raise InvalidValue(f"{where}: request.messages must be a list of {{role, parts}} objects")
    for i, m in enumerate(messages):
        # exact type tests first: a long conversation is checked at every turn, and an ABC check costs ~10x
        parts: Any = m.get("parts") if type(m) is dict or isinstance(m, Mapping) else None
        if type(parts) not in (list, tuple) or type(m.get("role")) is not str:
            raise InvalidValue(
                f"{where}: request.messages[{i}] must be an object with 'role' (text) and 'parts' (a list)"
            )
        for j, p in enumerate(parts):
            if (type(p) is not dict and not isinstance(p, Mapping)) or type(p.get("type")) is not str:
                raise InvalidValue(f"{where}: request.messages[{i}].parts[{j}] must be an object with a 'type'")
    stored["messages"] = list(messages)
    defs: list[dict[str, Any]] = []
    names: list[str] = []
    for i, t in enumerate(request.get("tools") or []):
        name = t if isinstance(t, str) else t.get("name") if isinstance(t, Mapping) else None
        if not isinstance(name, str) or not name:
            raise InvalidValue(f"{where}: request.tools[{i}] must be a tool's name or an object with a 'name'")
        if name == TURN:
            raise InvalidValue(
                f"{where}: request.tools[{i}]: a tool may not be called {TURN!r} (the name of a model turn)"
            )
        if name in names:
            raise InvalidValue(f"{where}: request.tools[{i}]: tool {name!r} is offered twice")
        names.append(name)
        if isinstance(t, Mapping):
            defs.append(dict(t))
    stored["tools"] = names
    stored["output_schema"] = request.get("output_schema")
    settings = request.get("settings")
    if settings is not None and not isinstance(settings, Mapping):
        raise InvalidValue(f"{where}: request.settings must be an object")
    stored["settings"] = dict(settings) if settings else {}
    for k, v in request.items():  # what a newer adapter adds: kept, and keyed
        if k not in REQUEST_FIELDS:
            stored[k] = v
    return stored, defs


class RequestForm:
    """Redacts and canonicalises requests for one tape, memoising each message already seen (a conversation
    sends its history again at every turn: the cost per turn is what is new)."""

    __slots__ = ("_memo", "redactor")

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._memo: dict[bytes, Any] = {}

    def redacted(self, stored: dict[str, Any]) -> dict[str, Any]:
        """``stored`` (from :func:`split_request`) redacted and in canonical form (what is written and keyed).

        Raises:
            InvalidValue: a value that is not JSON.
            TooDeep: nested past what Python can walk.
        """
        memo = self._memo
        out_messages = []
        for m in stored["messages"]:
            try:
                raw = orjson.dumps(m, option=orjson.OPT_SORT_KEYS)
            except TypeError:
                raw = None  # not orjson's JSON (a tuple inside is fine; an object is not): canon says what
            done = memo.get(raw) if raw is not None else None
            if done is None:
                done = canon(self.redactor.redact(m))
                if raw is not None:
                    if len(memo) > 100_000:
                        memo.clear()
                    memo[raw] = done
            out_messages.append(done)
        rest = {k: v for k, v in stored.items() if k != "messages"}
        try:
            raw_rest: bytes | None = orjson.dumps(rest, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            raw_rest = None
        done_rest = memo.get(raw_rest) if raw_rest is not None else None  # instructions, tools, settings: as before
        if done_rest is None:
            done_rest = canon(self.redactor.redact(rest))
            if raw_rest is not None:
                memo[raw_rest] = done_rest
        out: dict[str, Any] = dict(done_rest)
        out["messages"] = out_messages
        out.setdefault("tools", [])
        return out


def turn_key_of(model: str, redacted: Any) -> str:
    """The key of a request already redacted and canonical (as a turn line stores it): the one place the
    key's form is written."""
    body = canonical_json({"model": model, "request": redacted})
    return f"{TURN}:{hashlib.sha256(body).hexdigest()[:12]}"


def turn_key(model: str, request: Any) -> str:
    """The key of a model turn: ``model:`` + 12 hex chars of the sha256 of the canonical JSON of
    ``{"model": name, "request": the request redacted (default rules) and canonical, the offered tools by name}``.

    Raises:
        InvalidValue: the request is not a neutral request.
    """
    stored, _ = split_request(request, "request")
    return turn_key_of(model, RequestForm(DEFAULT_REDACTOR).redacted(stored))


# ---- the response -------------------------------------------------------------------------
def normal_usage(usage: Any, where: str = "usage") -> dict[str, int] | None:
    """Usage as ``{input, output, cache_read, cache_write}`` (the keys given; the usual synonyms accepted:
    ``input_tokens``, ``prompt_tokens``...); None when there is none.

    Raises:
        InvalidValue: not an object, or a count that is not a whole number of at least 0.
    """
    if usage is None:
        return None
    if not isinstance(usage, Mapping):
        raise InvalidValue(f"{where} must be an object of token counts, got {type(usage).__name__}")
    out: dict[str, int] = {}
    for k, v in usage.items():
        name = k if k in _USAGE else _USAGE_SYNONYMS.get(k)
        if name is None or v is None:
            continue
        if type(v) is not int or v < 0:
            got = v if type(v) is int else type(v).__name__  # a count may be shown; a string may be anything
            raise InvalidValue(f"{where}.{k} must be a whole number of tokens (at least 0), got {got}")
        out[name] = out.get(name, 0) + v
    return out or None


def tokens(usage: Any) -> int:
    """Tokens of a turn's usage: input (cache included) + output; 0 without usage."""
    if not isinstance(usage, Mapping):
        return 0
    total = 0
    for k in ("input", "output"):
        v = usage.get(k)
        if type(v) is int:
            total += v
    return total


def normal_response(response: Any, where: str) -> dict[str, Any]:
    """A live function's neutral response checked and normalised: ``parts`` with the ``tool_calls`` given apart
    appended as ``tool_call`` parts (each ``{id, name, arguments}``), ``finish_reason``, ``usage``
    (:func:`normal_usage`), other keys kept.

    Raises:
        InvalidValue: naming ``where`` and the field.
    """
    if not isinstance(response, Mapping):
        raise InvalidValue(
            f"{where}: a model's live function must return the neutral response (an object), "
            f"got {type(response).__name__}"
        )
    parts = response.get("parts") or []
    if not isinstance(parts, (list, tuple)):
        raise InvalidValue(f"{where}: response.parts must be a list")
    out_parts: list[Any] = []
    for j, p in enumerate(parts):
        if not isinstance(p, Mapping) or not isinstance(p.get("type"), str):
            raise InvalidValue(f"{where}: response.parts[{j}] must be an object with a 'type'")
        if p["type"] == "tool_call":
            _check_call(p, f"{where}: response.parts[{j}]")
        out_parts.append(dict(p))
    calls = response.get("tool_calls") or []
    if not isinstance(calls, (list, tuple)):
        raise InvalidValue(f"{where}: response.tool_calls must be a list")
    have = {(p.get("id"), p.get("name")) for p in out_parts if p.get("type") == "tool_call"}
    for j, c in enumerate(calls):
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            raise InvalidValue(f"{where}: response.tool_calls[{j}] must be an object with a 'name'")
        _check_call(c, f"{where}: response.tool_calls[{j}]")
        if (c.get("id"), c["name"]) not in have:
            out_parts.append(
                {"type": "tool_call", "id": c.get("id"), "name": c["name"], "arguments": c.get("arguments")}
            )
    finish = response.get("finish_reason")
    if finish is not None and not isinstance(finish, str):
        raise InvalidValue(f"{where}: response.finish_reason must be text or None")
    out: dict[str, Any] = {k: v for k, v in response.items() if k not in ("parts", "tool_calls", "usage", "events")}
    out["parts"] = out_parts
    out["finish_reason"] = finish
    out["usage"] = normal_usage(response.get("usage"), f"{where}: response.usage")
    return out


def _check_call(call: Mapping[str, Any], where: str) -> None:
    """A tool call a response asks for names its tool (text), and its id, if any, is text or a number."""
    if not isinstance(call.get("name"), str):
        raise InvalidValue(f"{where}: a tool_call part needs a 'name'")
    ident = call.get("id")
    if ident is not None and not isinstance(ident, str) and (not isinstance(ident, int) or isinstance(ident, bool)):
        raise InvalidValue(f"{where}: a tool call's 'id' must be text, got {type(ident).__name__}")


def requested_calls(response: Any) -> list[dict[str, Any]]:
    """The tool calls a response asked for (its ``tool_call`` parts), in order."""
    parts = response.get("parts") if isinstance(response, Mapping) else None
    if not isinstance(parts, list):
        return []
    return [p for p in parts if isinstance(p, dict) and p.get("type") == "tool_call"]


def requested_tools(response: Any) -> list[str]:
    """The names of the tools a response asked for, in order."""
    return [str(p.get("name")) for p in requested_calls(response)]


# ---- streams ------------------------------------------------------------------------------
def stream_events(response: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The events of a turn recorded without streaming, rebuilt: ``start``, then per part a ``part`` event (the
    part without its text or argument text) and one ``delta`` (its whole text, or its arguments as JSON text),
    then ``end``."""
    events: list[dict[str, Any]] = [{"type": "start"}]
    for i, p in enumerate(response.get("parts") or []):
        if not isinstance(p, dict):
            continue
        if p.get("type") == "tool_call":
            head = {k: v for k, v in p.items() if k != "arguments"}
            events.append({"type": "part", "index": i, "part": head})
            args = p.get("arguments")
            events.append(
                {"type": "delta", "index": i, "arguments": orjson.dumps(args).decode() if args is not None else ""}
            )
        elif isinstance(p.get("content"), str):
            events.append({"type": "part", "index": i, "part": {k: v for k, v in p.items() if k != "content"}})
            events.append({"type": "delta", "index": i, "content": p["content"]})
        else:
            events.append({"type": "part", "index": i, "part": p})
    events.append({"type": "end"})
    return events


def redact_events(events: Iterable[Any], redactor: Redactor, where: str) -> list[dict[str, Any]]:
    """A recorded stream's events redacted: the text of each part's deltas is joined and redacted as one text, so
    a secret split across two chunks never reaches disk; when redaction changed it, the part's deltas become one
    delta holding the redacted text (at the first one's place). Every other field is redacted as any value.

    Raises:
        InvalidValue: an event that is not an object with a ``type``.
    """
    evs = list(events)
    joined: dict[tuple[Any, str], list[int]] = {}
    for n, e in enumerate(evs):
        if not isinstance(e, Mapping) or not isinstance(e.get("type"), str):
            raise InvalidValue(f"{where}: events[{n}] must be an object with a 'type'")
        if e["type"] == "delta":
            for field in ("content", "arguments"):
                if isinstance(e.get(field), str):
                    joined.setdefault((e.get("index"), field), []).append(n)
    replaced: dict[int, dict[str, Any] | None] = {}
    for (_index, field), ns in joined.items():
        text = "".join(evs[n][field] for n in ns)
        clean = redactor.redact_text(text)
        if clean != text or any(redactor.redact_text(evs[n][field]) != evs[n][field] for n in ns):
            first = ns[0]
            replaced[first] = {**evs[first], field: clean}
            for n in ns[1:]:
                replaced[n] = None
    out: list[dict[str, Any]] = []
    for n, e in enumerate(evs):
        if n in replaced:
            r = replaced[n]
            if r is None:
                continue
            e = r
        text_fields = {
            f: e[f] for f in ("content", "arguments") if e.get("type") == "delta" and isinstance(e.get(f), str)
        }
        rest = redactor.redact({k: v for k, v in e.items() if k not in text_fields})
        out.append({**rest, **text_fields})
    return out


# ---- differences, for people ------------------------------------------------------------------
def request_changes(old: Any, new: Any, old_model: str | None = None, new_model: str | None = None) -> list[Change]:
    """How request ``new`` differs from ``old`` (both as stored), by path; a changed model name first, at
    path ``model``."""
    out: list[Change] = []
    if old_model is not None and new_model is not None and old_model != new_model:
        out.append(Change("model", old_model, new_model))
    return out + diff_values(old, new)


def traced_fields(rec: Any, header: Any) -> tuple[str, ...] | None:
    """The request fields the trace held, as a turn line a trace import wrote says (``from_trace``); None for a
    turn recorded whole (every turn an adapter recorded, and imports from before the field). Only a turn of an
    import (``source`` ``otlp``) on a tape whose session header says it was imported (``labels.source``)."""
    labels = header.get("labels") if isinstance(header, dict) else None
    if not isinstance(labels, dict) or labels.get("source") not in TRACE_SOURCES:
        return None
    if not isinstance(rec, dict) or rec.get("source") not in TRACE_SOURCES:
        return None
    held = rec.get("from_trace")
    if not isinstance(held, list) or not all(isinstance(f, str) for f in held):
        return None
    if "instructions" not in held or "messages" not in held:  # a trace without them cannot replay (not captured):
        return None  # a line saying so is compared whole, never loosened
    return tuple(held)


def partial_changes(changes: list[Change], held: tuple[str, ...]) -> tuple[list[Change], list[str]]:
    """``changes`` of a request from a turn a trace held only in part (``held``): those inside a field the
    trace held, and the model's name unless one is the other with a provider prefix (a trace names
    ``gpt-4o`` where an adapter says ``openai:gpt-4o``); with the fields outside ``held`` that differed
    (reported as not in the trace, never as drift)."""
    kept: list[Change] = []
    outside: list[str] = []
    for c in changes:
        if c.path == "model":
            old, new = str(c.old), str(c.new)
            if not (old.endswith(":" + new) or new.endswith(":" + old)):  # azure:x and openai:x are two models
                kept.append(c)
            continue
        try:
            segs = path_segments(c.path)
        except ValueError:  # not a path diff_values writes: kept, to be seen
            segs = ()
        top = segs[0] if segs else ""
        if not top or top in held:
            if not _as_traced(segs, c):
                kept.append(c)
        elif top not in outside:
            outside.append(top)
    return kept, outside


def _as_traced(segs: tuple[str, ...], c: Change) -> bool:
    """A difference in a tool's response part that is only how a trace writes it: the tool's ``name``, which a
    trace's tool message does not carry (the adapter's part does), or the response as JSON text on one side and
    its value on the other (a trace holds the text the model was given; adapters keep text or the value)."""
    if len(segs) != 5 or segs[0] != "messages" or segs[2] != "parts":
        return False
    if segs[4] == "name":
        return c.old is MISSING
    if segs[4] == "response" and (type(c.old) is str) != (type(c.new) is str):
        text, value = (c.old, c.new) if type(c.old) is str else (c.new, c.old)
        try:  # as JSON, not by Python's ==: "3.0" is not the 3 a framework sends as "3", nor true a 1
            return orjson.dumps(orjson.loads(text), option=orjson.OPT_SORT_KEYS) == orjson.dumps(
                value, option=orjson.OPT_SORT_KEYS
            )
        except (orjson.JSONDecodeError, TypeError):
            return False
    return False


def change_line(c: Change) -> str:
    """One request difference as a person reads it: ``instructions: + "Always answer in French."``,
    ``messages[2].parts[0].content "…" → "…"``, ``settings.temperature 0 → 0.7``, ``model a → b``; a path under
    a secret key (``settings.extra_headers.authorization``) shows ``[REDACTED]``, as every change does."""
    if secret_path(c.path) and not c.path.startswith("tools"):  # an offered tool's schema is structure
        c = Change(c.path, *hidden_sides(c.old, c.new))
    c = Change(shown_path(c.path), c.old, c.new)
    if c.old is MISSING:
        return f"{c.path}: + {short(c.new)}"
    if c.new is MISSING:
        return f"{c.path}: - {short(c.old)}"
    if c.old is None and c.new is not None:
        return f"{c.path}: + {short(c.new)}"
    if c.path == "model":
        return f"model {c.old} → {c.new}"
    old_s = short(c.old, around=c.new if isinstance(c.new, str) else None)
    new_s = short(c.new, around=c.old if isinstance(c.old, str) else None)
    return f"{c.path} {old_s} → {new_s}"


def rebuild_error(path: Any, seq: int, turn: int, what: str, error: BaseException | str) -> TapeError:
    """The error of a recorded response that no longer rebuilds as its framework's type."""
    why = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
    return TapeError(
        f"{path}: step {seq} (model turn {turn}): the recorded response cannot be rebuilt: {what}: {why} "
        "(recorded by another version of the framework, or edited by hand; re-record it)"
    )
