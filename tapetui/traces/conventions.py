"""What a span is, by the conventions that wrote it: a model turn, a tool call, or neither.

Read, newest first (the GenAI conventions are "Development" status; each generation is still in the field):

- **OpenTelemetry GenAI** (``open-telemetry/semantic-conventions-genai``): a model span has
  ``gen_ai.operation.name`` ``chat``, ``generate_content`` or ``text_completion``, ``gen_ai.request.model``,
  ``gen_ai.provider.name`` (``gen_ai.system`` before it), ``gen_ai.request.*`` settings,
  ``gen_ai.response.{id,model,finish_reasons}``, ``gen_ai.usage.*`` and, opt-in, ``gen_ai.input.messages``,
  ``gen_ai.output.messages``, ``gen_ai.system_instructions`` and ``gen_ai.tool.definitions`` (structured, or a
  JSON string). A tool span has operation ``execute_tool`` with ``gen_ai.tool.{name,call.id}`` and, opt-in,
  ``gen_ai.tool.call.{arguments,result}``; ``error.type`` or an error status for a failure.
- **Older GenAI**: the messages as span events (``gen_ai.system.message``, ``gen_ai.user.message``,
  ``gen_ai.assistant.message``, ``gen_ai.tool.message``, ``gen_ai.choice``); or as indexed attributes
  (OpenLLMetry's ``gen_ai.prompt.{i}.*`` / ``gen_ai.completion.{i}.*``, ``llm.request.functions.{i}.*``,
  ``gen_ai.usage.prompt_tokens``); pydantic-ai's ``running tool`` spans with ``tool_arguments`` and
  ``tool_response``.
- **OpenInference** (Phoenix; the OpenAI Agents SDK's and LangChain's instrumentors): ``openinference.span.kind``
  ``LLM`` with ``llm.input_messages.{i}.message.*`` (tool calls under ``message.tool_calls.{k}.tool_call.*``),
  ``llm.output_messages``, ``llm.tools.{i}.tool.json_schema``, ``llm.token_count.*``, ``llm.model_name``,
  ``llm.provider``, ``llm.invocation_parameters``; ``TOOL`` with ``tool.name``, ``input.value``,
  ``output.value``.
- **MCP**: a client or server span with ``mcp.method.name`` ``tools/call`` (``jsonrpc.request.id``,
  ``mcp.session.id``) is a tool call; when a GenAI tool span covers the same call, the two are one call (merged
  by the importer).

Every model turn comes out in the neutral request and response of ``docs/format.md`` ("Model turns"), as an
adapter writes them: the system instructions joined as text, a tool's response in a ``tool`` message, pydantic-ai's
made-up call ids (``pyd_ai_…``) as ``call_1``, ``call_2``... Content an instrumentation did not capture is
marked ``not captured``, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from tapetui.core.turns import NOT_CAPTURED
from tapetui.traces.otlp import Span

__all__ = ["NOT_CAPTURED", "LocalIds", "TraceCall", "TraceTurn", "classify"]

MODEL_OPERATIONS = frozenset({"chat", "generate_content", "text_completion"})
_SETTINGS_SKIP = frozenset({"model"})
# where the client sends the request and how, not what it asks the model: OpenInference's invocation parameters
# carry some (the Agents SDK's base_url), no adapter keys them
_TRANSPORT = frozenset(
    {
        "base_url",
        "api_base",
        "api_key",
        "api_version",
        "organization",
        "project",
        "timeout",
        "max_retries",
        "default_headers",
        "default_query",
        "extra_headers",
        "extra_query",
        "http_client",
        "websocket_base_url",
        "azure_endpoint",
        "azure_deployment",
        "azure_ad_token",
    }
)
_LOCAL_IDS = ("pyd_ai_",)  # ids pydantic-ai makes up, new at each run (its adapter keys them as call_N too)


class LocalIds:
    """Tool-call ids an agent made up (pydantic-ai's ``pyd_ai_…``, new at each run) as ``call_1``, ``call_2``... by
    first appearance in the trace: in the requests as the adapters key them (each request numbers its history by
    first appearance, which is the trace's order), and in the responses and calls alike, so a replayed response's
    call comes back in the next request under the id that request was recorded with."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def name(self, ident: Any) -> Any:
        if not isinstance(ident, str) or not ident.startswith(_LOCAL_IDS):
            return ident
        return self.names.setdefault(ident, f"call_{len(self.names) + 1}")

    def parts(self, parts: list[Any]) -> list[Any]:
        return [
            {**p, "id": self.name(p.get("id"))}
            if isinstance(p, dict) and p.get("type") in ("tool_call", "tool_call_response") and "id" in p
            else p
            for p in parts
        ]

    def turn(self, turn: TraceTurn) -> None:
        turn.request["messages"] = [{**m, "parts": self.parts(m["parts"])} for m in turn.request["messages"]]
        if turn.response is not None:
            turn.response["parts"] = self.parts(turn.response.get("parts") or [])

    def call(self, call: TraceCall) -> None:
        call.call_id = self.name(call.call_id)


@dataclass
class TraceTurn:
    """A model span read as a turn."""

    span: Span
    model: str
    provider: str
    convention: str
    request: dict[str, Any]
    response: dict[str, Any] | None
    usage: dict[str, int] | None
    error: dict[str, str] | None
    captured: bool
    definitions: list[dict[str, Any]] = field(default_factory=list)
    held: tuple[str, ...] = ()  # the request fields the span held (a turn line's "from_trace"): replay compares those

    @property
    def requested(self) -> list[tuple[str, str]]:
        """``(call id, tool)`` of each tool call the response asks for, in order."""
        parts = (self.response or {}).get("parts") or []
        return [
            (str(p.get("id") or ""), str(p.get("name") or ""))
            for p in parts
            if isinstance(p, dict) and p.get("type") == "tool_call"
        ]


@dataclass
class TraceCall:
    """A tool span read as a call."""

    span: Span
    tool: str
    convention: str
    call_id: str | None
    args: Any
    result: Any
    error: dict[str, str] | None
    captured: bool
    mcp: bool = False
    definition: dict[str, Any] | None = None


def classify(span: Span) -> TraceTurn | TraceCall | None:
    """The span as a turn or a call; None for anything else (an agent's span, an HTTP request...)."""
    a = span.attrs
    op = a.get("gen_ai.operation.name")
    kind = a.get("openinference.span.kind")
    if kind == "LLM":
        return _openinference_turn(span)
    if kind == "TOOL":
        return _openinference_call(span)
    if a.get("mcp.method.name") == "tools/call":
        return _mcp_call(span)
    if op in MODEL_OPERATIONS or (op is None and span.name.split(" ", 1)[0] in MODEL_OPERATIONS and _has_genai(a)):
        return _genai_turn(span)
    if op == "execute_tool" or (op is None and span.name.startswith("execute_tool ")):
        return _genai_call(span)
    if span.name.startswith("running tool") and ("tool_arguments" in a or "gen_ai.tool.name" in a):
        return _pydantic_ai_call(span)
    if _indexed(a, "gen_ai.prompt") or _indexed(a, "gen_ai.completion"):
        return _genai_turn(span)
    return None


def _has_genai(a: dict[str, Any]) -> bool:
    return any(k.startswith("gen_ai.") for k in a)


# ---- values ------------------------------------------------------------------------------------------------
def _json(v: Any) -> Any:
    """A structured attribute, or a JSON string of one (both are the conventions' forms)."""
    if isinstance(v, str):
        s = v.strip()
        if s[:1] in ("{", "[") or s in ("null", "true", "false") or _number(s):
            try:
                parsed = orjson.loads(s)
            except orjson.JSONDecodeError:
                return v
            if isinstance(parsed, (int, float)) and not isinstance(parsed, bool) and orjson.dumps(parsed) != s.encode():
                return v  # "1180591620717411303424", "1e5": a number that would not come back as written stays text
            return parsed
    return v


def _structured(v: Any) -> Any:
    """A setting: an object or a list written as JSON text (an attribute holds only scalars and arrays) read back;
    other text stays text."""
    if isinstance(v, str) and v.strip()[:1] in ("{", "["):
        try:
            return orjson.loads(v)
        except orjson.JSONDecodeError:
            return v
    return v


def _number(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _args(v: Any) -> Any:
    """A tool call's arguments: an object when they parse as one; text that is not JSON stays text."""
    parsed = _json(v)
    return parsed


def _error(span: Span) -> dict[str, str] | None:
    a = span.attrs
    etype = a.get("error.type")
    exc = next((e for e in span.events if e["name"] == "exception"), None)
    if exc is not None:
        etype = etype or exc["attrs"].get("exception.type")
    if span.status != 2 and etype is None:
        return None
    message = span.status_message or (exc["attrs"].get("exception.message") if exc else "") or ""
    return {"type": str(etype or "Error"), "message": str(message)}


def _unflatten(a: dict[str, Any], prefix: str) -> Any:
    """``prefix.0.x.y = v`` attributes as nested values: numbered segments become lists (in number order)."""
    root: dict[Any, Any] = {}
    p = prefix + "."
    for k, v in a.items():
        if not k.startswith(p):
            continue
        node = root
        segs = [int(s) if s.isascii() and s.isdigit() else s for s in k[len(p) :].split(".")]  # "²" is a digit too
        for s in segs[:-1]:
            nxt = node.get(s)
            if not isinstance(nxt, dict):
                nxt = node[s] = {}
            node = nxt
        node[segs[-1]] = v
    return _lists(root)


def _lists(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    if node and all(type(k) is int for k in node):
        return [_lists(node[k]) for k in sorted(node)]
    return {k: _lists(v) for k, v in node.items()}


def _indexed(a: dict[str, Any], prefix: str) -> list[Any]:
    v = _unflatten(a, prefix)
    return v if isinstance(v, list) else []


# ---- messages ---------------------------------------------------------------------------------------------
def _part(p: Any) -> dict[str, Any]:
    """A GenAI message part in the neutral form."""
    if isinstance(p, str):
        return {"type": "text", "content": p}
    if not isinstance(p, dict):
        return {"type": "unknown", "value": p}
    t = p.get("type")
    if t == "text":
        return {"type": "text", "content": p.get("content", "")}
    if t == "tool_call":
        out = {
            "type": "tool_call",
            "id": _call_id(p.get("id")),
            "name": p.get("name"),
            "arguments": _args(p.get("arguments")),
        }
        return {k: v for k, v in out.items() if v is not None}
    if t == "tool_call_response":
        response = p.get("response", p.get("result"))
        out = {"type": "tool_call_response", "id": _call_id(p.get("id")), "name": p.get("name"), "response": response}
        return {k: v for k, v in out.items() if v is not None or k == "response"}
    if t in ("thinking", "reasoning"):
        return {"type": "reasoning", "content": p.get("content", "")}
    return {k: v for k, v in p.items() if v is not None}


def _messages(raw: Any, *, request: bool = True) -> list[dict[str, Any]]:
    """GenAI messages as neutral ones: a tool's response in a ``tool`` message of its own (as adapters write it).
    Made-up call ids stay as they are here: the importer numbers them across the whole trace (:class:`LocalIds`)."""
    out: list[dict[str, Any]] = []
    for m in raw if isinstance(raw, list) else []:
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "user")
        parts = m.get("parts")
        if parts is None:  # the older {role, content, tool_calls} form
            parts = [{"type": "text", "content": m["content"]}] if m.get("content") not in (None, "") else []
            parts += [_older_call(c) for c in _items(m.get("tool_calls")) if isinstance(c, dict)]
            if role == "tool":
                parts = [{"type": "tool_call_response", "id": _call_id(m.get("id") or m.get("tool_call_id")),
                          "response": _json(m.get("content"))}]  # fmt: skip
        last: dict[str, Any] | None = None
        for p in parts if isinstance(parts, list) else []:
            n = _part(p)
            r = "tool" if n.get("type") == "tool_call_response" else role
            if last is None or last["role"] != r:
                last = {"role": r, "parts": []}
                out.append(last)
            last["parts"].append(n)
    return out


def _items(v: Any) -> list[Any]:
    """A list a message holds (its parts, contents, tool calls); anything else holds none."""
    return v if isinstance(v, list) else []


def _call_id(v: Any) -> str | None:
    """A tool call's id as the neutral form holds it: text (a number as its digits); any other value is no id (the
    importer makes one up, as for a call that has none)."""
    if isinstance(v, str):
        return v
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    return None


def _older_call(c: dict[str, Any]) -> dict[str, Any]:
    fn: dict[str, Any] = c["function"] if isinstance(c.get("function"), dict) else c
    return {
        "type": "tool_call",
        "id": _call_id(c.get("id")),
        "name": fn.get("name"),
        "arguments": _args(fn.get("arguments")),
    }


def _instructions(raw: Any) -> str | list[Any] | None:
    raw = _json(raw)
    if raw is None or raw == []:
        return None
    if isinstance(raw, str):
        return raw
    parts = [_part(p) for p in raw] if isinstance(raw, list) else [_part(raw)]
    if all(p.get("type") == "text" for p in parts):
        return "\n\n".join(str(p.get("content", "")) for p in parts)
    return parts


def _definitions(raw: Any) -> list[dict[str, Any]]:
    out = []
    for d in _json(raw) if isinstance(_json(raw), list) else []:
        if not isinstance(d, dict):
            continue
        fn: dict[str, Any] = d["function"] if isinstance(d.get("function"), dict) else d
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        item: dict[str, Any] = {"name": name}
        if isinstance(fn.get("description"), str):
            item["description"] = fn["description"]
        params = _json(fn.get("parameters", fn.get("input_schema")))
        if isinstance(params, dict):
            item["parameters"] = params
        out.append(item)
    return out


def _usage(a: dict[str, Any], names: dict[str, str]) -> dict[str, int] | None:
    out: dict[str, int] = {}
    for attr, key in names.items():
        v = a.get(attr)
        if type(v) is int and v >= 0:
            out[key] = out.get(key, 0) + v
    return out or None


_GENAI_USAGE = {
    "gen_ai.usage.input_tokens": "input",
    "gen_ai.usage.output_tokens": "output",
    "gen_ai.usage.cache_read.input_tokens": "cache_read",
    "gen_ai.usage.cache_write.input_tokens": "cache_write",
    "gen_ai.usage.prompt_tokens": "input",  # the older names
    "gen_ai.usage.completion_tokens": "output",
}


def _model_name(provider: str, model: str) -> str:
    """The model's name on a tape, as the adapters write it: ``provider:model``."""
    return f"{provider}:{model}" if provider and model else model or provider or "unknown"


def _turn(
    span: Span,
    convention: str,
    provider: str,
    model: str,
    instructions: Any,
    messages: list[dict[str, Any]] | None,
    output: list[dict[str, Any]] | None,
    definitions: list[dict[str, Any]],
    settings: dict[str, Any],
    usage: dict[str, int] | None,
    response_fields: dict[str, Any],
    tools_held: bool,
    settings_held: bool,
) -> TraceTurn:
    """A turn from what a span held (``tools_held``: it carried tool definitions, or said there were none;
    ``settings_held``: it carried the request's settings, even none but where the request went)."""
    captured = messages is not None
    settings = {k: v for k, v in settings.items() if k not in _TRANSPORT}
    held = (("instructions", "messages") if captured else ()) + (("tools",) if tools_held else ())
    held += ("settings",) if settings_held else ()
    request: dict[str, Any] = {
        "instructions": instructions,
        "messages": messages or [],
        "tools": definitions,
        "output_schema": None,
        "settings": settings,
    }
    if not captured:
        request["content"] = NOT_CAPTURED
    error = _error(span)
    response = None
    if error is None:
        parts = [p for m in output or [] for p in m["parts"]] if output is not None else []
        response = {"parts": parts, **{k: v for k, v in response_fields.items() if v is not None}}
        if output is None:
            response["content"] = NOT_CAPTURED
    return TraceTurn(
        span=span,
        model=_model_name(provider, model),
        provider=provider,
        convention=convention,
        request=request,
        response=response,
        usage=usage,
        error=error,
        captured=captured,
        definitions=definitions,
        held=held,
    )


# ---- GenAI -------------------------------------------------------------------------------------------------
def _genai_turn(span: Span) -> TraceTurn:
    a = span.attrs
    provider = str(a.get("gen_ai.provider.name") or a.get("gen_ai.system") or "")
    model = str(a.get("gen_ai.request.model") or a.get("gen_ai.response.model") or "")
    convention = "genai"
    instructions = _instructions(a.get("gen_ai.system_instructions"))
    messages: list[dict[str, Any]] | None = None
    output: list[dict[str, Any]] | None = None
    if "gen_ai.input.messages" in a:
        messages = _messages(_json(a["gen_ai.input.messages"]))
    if "gen_ai.output.messages" in a:
        output = _messages(_json(a["gen_ai.output.messages"]), request=False)
    if messages is None and any(e["name"].startswith("gen_ai.") for e in span.events):
        convention = "genai-events"
        messages, output = _event_messages(span)
    if messages is None and _indexed(a, "gen_ai.prompt"):
        convention = "openllmetry"
        messages = _messages(_indexed(a, "gen_ai.prompt"))
        output = _messages(_indexed(a, "gen_ai.completion"), request=False)
    if messages and messages[0]["role"] == "system" and instructions is None and convention != "genai":
        instructions = _instructions([p for p in messages[0]["parts"]])
        messages = messages[1:]
    definitions = _definitions(a.get("gen_ai.tool.definitions"))
    tools_held = "gen_ai.tool.definitions" in a
    if not definitions:
        functions = _indexed(a, "llm.request.functions")
        definitions = _definitions(functions)
        tools_held = tools_held or bool(functions)
    settings = {
        k[len("gen_ai.request.") :]: _structured(v)
        for k, v in a.items()
        if k.startswith("gen_ai.request.") and k[len("gen_ai.request.") :] not in _SETTINGS_SKIP and v is not None
    }
    reasons = a.get("gen_ai.response.finish_reasons")
    finish = reasons[0] if isinstance(reasons, list) and reasons else reasons if isinstance(reasons, str) else None
    return _turn(
        span,
        convention,
        provider,
        model,
        instructions,
        messages,
        output,
        definitions,
        settings,
        _usage(a, _GENAI_USAGE),
        {"finish_reason": finish, "id": a.get("gen_ai.response.id"), "model_name": a.get("gen_ai.response.model")},
        tools_held,
        True,  # gen_ai.request.* are the settings: a setting not there was not set
    )


_EVENT_ROLES = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
}


def _event_messages(span: Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """The older generation: one span event per message, ``gen_ai.choice`` for the response."""
    inputs, outputs = [], []
    for e in span.events:
        ea = e["attrs"]
        body = _json(ea.get("body")) if "body" in ea else ea
        body = body if isinstance(body, dict) else {}
        if e["name"] in _EVENT_ROLES:
            inputs.append({"role": body.get("role") or _EVENT_ROLES[e["name"]], **_content(body)})
        elif e["name"] == "gen_ai.choice":
            msg = _json(body.get("message"))
            msg = msg if isinstance(msg, dict) else body
            outputs.append({"role": msg.get("role") or "assistant", **_content(msg)})
    return _messages(inputs), _messages(outputs, request=False) if outputs else None


def _content(body: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"content": _json(body.get("content")) if body.get("role") == "tool" else body.get("content")}
    calls = _json(body.get("tool_calls"))
    if isinstance(calls, list):
        out["tool_calls"] = calls
    if body.get("id") is not None:
        out["id"] = body["id"]
    return out


def _attr_call(
    span: Span, convention: str, prefix: str, ids: tuple[str, ...], args: str, result: str, *, mcp: bool = False
) -> TraceCall:
    """A tool span whose call is in attributes: its name (``gen_ai.tool.name``, else the span name after
    ``prefix``), its id (the first of ``ids`` present), its arguments and result (the ``args`` and ``result``
    attributes; without ``args``, the content was not captured)."""
    a = span.attrs
    name = a.get("gen_ai.tool.name") or span.name.removeprefix(prefix).strip(": ")
    captured = args in a
    return TraceCall(
        span=span,
        tool=str(name),
        convention=convention,
        call_id=_str(next((a[k] for k in ids if a.get(k) is not None), None)),
        args=_args(a.get(args)) if captured else None,
        result=_json(a.get(result)),
        error=_error(span),
        captured=captured,
        mcp=mcp,
    )


def _genai_call(span: Span) -> TraceCall:
    ids = ("gen_ai.tool.call.id",)
    return _attr_call(span, "genai", "execute_tool", ids, "gen_ai.tool.call.arguments", "gen_ai.tool.call.result")


def _pydantic_ai_call(span: Span) -> TraceCall:
    ids = ("gen_ai.tool.call.id", "tool_call_id")
    return _attr_call(span, "pydantic-ai", "running tool", ids, "tool_arguments", "tool_response")


def _mcp_call(span: Span) -> TraceCall:
    ids = ("gen_ai.tool.call.id", "jsonrpc.request.id")
    args, result = "gen_ai.tool.call.arguments", "gen_ai.tool.call.result"
    return _attr_call(span, "mcp", "tools/call", ids, args, result, mcp=True)


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


# ---- OpenInference ----------------------------------------------------------------------------------------
def _oi_messages(raw: Any) -> list[dict[str, Any]]:
    """``llm.input_messages`` (any numbering: the Agents SDK's processor starts at 1) as GenAI-form messages."""
    out = []
    for item in raw if isinstance(raw, list) else []:
        m = item.get("message") if isinstance(item, dict) else None
        if not isinstance(m, dict):
            continue
        role = str(m.get("role") or "user")
        parts: list[dict[str, Any]] = []
        if role == "tool":
            parts.append(
                {
                    "type": "tool_call_response",
                    "id": _call_id(m.get("tool_call_id")),
                    "response": _json(m.get("content")),
                }
            )
        else:
            if m.get("content") not in (None, ""):
                parts.append({"type": "text", "content": m["content"]})
            for c in _items(m.get("contents")):
                mc = c.get("message_content") if isinstance(c, dict) else None
                if isinstance(mc, dict) and mc.get("type", "text") == "text" and mc.get("text") is not None:
                    parts.append({"type": "text", "content": mc["text"]})
            for c in _items(m.get("tool_calls")):
                tc = c.get("tool_call") if isinstance(c, dict) else None
                if isinstance(tc, dict):
                    fn: dict[str, Any] = tc["function"] if isinstance(tc.get("function"), dict) else {}
                    parts.append(
                        {
                            "type": "tool_call",
                            "id": _call_id(tc.get("id")),
                            "name": fn.get("name"),
                            "arguments": fn.get("arguments"),
                        }
                    )
        out.append({"role": role, "parts": parts})
    return out


_OI_USAGE = {
    "llm.token_count.prompt": "input",
    "llm.token_count.completion": "output",
    "llm.token_count.prompt_details.cache_read": "cache_read",
    "llm.token_count.prompt_details.cache_write": "cache_write",
}


def _openinference_turn(span: Span) -> TraceTurn:
    a = span.attrs
    provider = str(a.get("llm.provider") or a.get("llm.system") or "")
    model = str(a.get("llm.request.model_name") or a.get("llm.model_name") or "")
    raw_in = _unflatten(a, "llm.input_messages")
    raw_out = _unflatten(a, "llm.output_messages")
    messages = _messages(_oi_messages(raw_in)) if raw_in else None
    output = _messages(_oi_messages(raw_out), request=False) if raw_out else None
    instructions = None
    if messages and messages[0]["role"] == "system":
        instructions = _instructions(messages[0]["parts"])
        messages = messages[1:]
    tools = _unflatten(a, "llm.tools")
    definitions = _definitions(
        [_json(t["tool"].get("json_schema")) for t in tools if isinstance(t, dict) and isinstance(t.get("tool"), dict)]
        if isinstance(tools, list)
        else []
    )
    params = _json(a.get("llm.invocation_parameters"))
    settings = (
        {k: v for k, v in params.items() if k not in ("model", "tools", "input", "messages")}
        if isinstance(params, dict)
        else {}
    )
    return _turn(
        span,
        "openinference",
        provider,
        model,
        instructions,
        messages,
        output,
        definitions,
        settings,
        _usage(a, _OI_USAGE),
        {"model_name": a.get("llm.response.model_name"), "finish_reason": a.get("llm.finish_reason")},
        isinstance(tools, list) and bool(tools),  # no llm.tools: none offered, or not recorded (it cannot tell)
        isinstance(params, dict),
    )


def _openinference_call(span: Span) -> TraceCall:
    a = span.attrs
    captured = "input.value" in a
    definition = None
    schema = _json(a.get("tool.parameters") or a.get("tool.json_schema"))
    if isinstance(schema, dict):
        definition = {"name": str(a.get("tool.name") or span.name), "parameters": schema}
        if isinstance(a.get("tool.description"), str):
            definition["description"] = a["tool.description"]
    return TraceCall(
        span=span,
        tool=str(a.get("tool.name") or span.name),
        convention="openinference",
        call_id=_str(a.get("tool_call.id") or a.get("tool.id")),
        args=_args(a.get("input.value")) if captured else None,
        result=_json(a.get("output.value")),
        error=_error(span),
        captured=captured,
        definition=definition,
    )
