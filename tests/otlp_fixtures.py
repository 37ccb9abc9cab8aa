"""OTLP JSON written by hand, one builder per attribute generation the importer reads (tests only)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

TRACE = "5b8efff798038103d269b633813fc60c"
T0 = 1_764_000_000_000_000_000  # ns


def any_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [any_value(x) for x in v]}}
    if isinstance(v, dict):
        return {"kvlistValue": {"values": [{"key": k, "value": any_value(x)} for k, x in v.items()]}}
    raise TypeError(v)


def attrs(d: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": any_value(v)} for k, v in d.items()]


def span(
    n: int,
    name: str,
    a: dict[str, Any],
    *,
    parent: int | None = 0,
    kind: int = 1,
    trace: str = TRACE,
    events: list[tuple[str, dict[str, Any]]] = (),  # type: ignore[assignment]
    error: str | None = None,
    ms: int = 10,
) -> dict[str, Any]:
    start = T0 + n * 100_000_000
    out: dict[str, Any] = {
        "traceId": trace,
        "spanId": f"{n + 1:016x}",
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + ms * 1_000_000),
        "attributes": attrs(a),
        "events": [{"timeUnixNano": str(start), "name": en, "attributes": attrs(ea)} for en, ea in events],
        "status": {"code": 2, "message": error} if error else {},
    }
    if parent is not None:
        out["parentSpanId"] = f"{parent + 1:016x}"
    return out


def doc(spans: list[dict[str, Any]], service: str = "shop-agent") -> dict[str, Any]:
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": attrs({"service.name": service})},
                "scopeSpans": [{"scope": {"name": "test"}, "spans": spans}],
            }
        ]
    }


def write(path: Path, *docs: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(d) + "\n" for d in docs))
    return path


WEATHER_DEF = {
    "type": "function",
    "name": "weather",
    "description": "The weather of a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def genai_trace(*, content: bool = True) -> list[dict[str, Any]]:
    """The current GenAI conventions: invoke_agent, chat, execute_tool, chat."""
    user = [{"role": "user", "parts": [{"type": "text", "content": "How warm is Paris?"}]}]
    call = {"type": "tool_call", "id": "call_a", "name": "weather", "arguments": {"city": "Paris"}}
    first: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.request.temperature": 0.0,
        "gen_ai.response.id": "resp_1",
        "gen_ai.response.finish_reasons": ["tool_calls"],
        "gen_ai.usage.input_tokens": 50,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.tool.definitions": json.dumps([WEATHER_DEF]),
    }
    second = {**first, "gen_ai.response.id": "resp_2", "gen_ai.response.finish_reasons": ["stop"]}
    tool: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "weather",
        "gen_ai.tool.call.id": "call_a",
    }
    if content:
        first |= {
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps(user),
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [call]}]),
        }
        result = {"type": "tool_call_response", "id": "call_a", "response": 14.5}
        second |= {
            "gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Be brief."}]),
            "gen_ai.input.messages": json.dumps(
                [*user, {"role": "assistant", "parts": [call]}, {"role": "tool", "parts": [result]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "text", "content": "14.5 degrees."}]}]
            ),
        }
        tool |= {"gen_ai.tool.call.arguments": json.dumps({"city": "Paris"}), "gen_ai.tool.call.result": "14.5"}
    return [
        span(0, "invoke_agent shop", {"gen_ai.operation.name": "invoke_agent"}, parent=None),
        span(1, "chat gpt-4o", first, kind=3),
        span(2, "execute_tool weather", tool),
        span(3, "chat gpt-4o", second, kind=3),
    ]
