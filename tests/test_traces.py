"""Traces in and out: OTLP JSON imported as tapes that replay (each attribute generation, OpenInference, MCP, bad
input), tapes exported as OTLP the official protobuf definitions accept, and a real instrumented agent's trace
replayed with zero model calls and zero tool runs."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from opentelemetry.proto.trace.v1.trace_pb2 import TracesData
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from pydantic_ai import Agent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

from tapetui import ModelDrift, Tape, TapeError, ToolDriftError, ToolRegistry, use_tape
from tapetui.cli import main
from tapetui.core.config import load_config
from tapetui.integrations.otel import OTLPJsonFileExporter
from tapetui.integrations.pydantic_ai import TapeCapability
from tapetui.traces.importer import import_otlp
from tests import otlp_fixtures as fx


@pytest.fixture
def proj(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "tapes").mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def steps(path: Path) -> list[dict[str, Any]]:
    return [r for r in lines(path) if r["type"] in ("call", "model")]


def only_tape(proj: Path) -> Path:
    (tape,) = [p for p in (proj / "tapes").glob("*.jsonl") if not p.name.endswith((".run.jsonl", ".candidate.jsonl"))]
    return tape


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


# ---- the current GenAI conventions ------------------------------------------------------------------------
def test_a_genai_trace_becomes_a_golden_with_its_turns_calls_contracts_and_provenance(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = fx.write(proj / "trace.jsonl", fx.doc(fx.genai_trace()))
    code, out, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 0, err
    assert "2 model turns, 1 tool call into 1 tape; 1 other span skipped" in out
    tape = only_tape(proj)
    recs = lines(tape)
    header, tool = recs[0], recs[1]
    assert header["labels"] == {
        "source": "otlp",
        "trace_id": fx.TRACE,
        "service": "shop-agent",
        "provider": "openai",
        "model": "openai:gpt-4o",
        "file": str(trace),
        "conventions": ["genai"],
    }
    assert (
        tool["type"] == "tool" and tool["name"] == "weather" and tool["from_trace"] == ["name", "description", "schema"]
    )
    assert tool["description"] == "The weather of a city." and tool["schema"]["required"] == ["city"]
    first, call, second = steps(tape)
    assert [first["type"], call["type"], second["type"]] == ["model", "call", "model"]
    assert first["source"] == "otlp" and first["model"] == "openai:gpt-4o"
    assert first["request"]["instructions"] == "Be brief."
    assert first["request"]["settings"] == {"temperature": 0.0}
    assert first["request"]["tools"] == ["weather"] and first["offered"] == {"weather": tool["fingerprint"]}
    assert first["response"]["parts"] == [
        {"type": "tool_call", "id": "call_a", "name": "weather", "arguments": {"city": "Paris"}}
    ]
    assert first["response"]["id"] == "resp_1" and first["usage"] == {"input": 50, "output": 7}
    assert first["ms"] == 10.0
    assert call["args"] == {"city": "Paris"} and call["result"] == 14.5 and call["call_id"] == "call_a"
    assert call["order"] == [1, 0] and call["fingerprint"] == tool["fingerprint"]
    tool_msg = second["request"]["messages"][2]
    assert tool_msg == {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_a", "response": 14.5}]}
    changelog = (proj / "tapes" / "CHANGELOG.md").read_text()
    assert "imported" in changelog and fx.TRACE in changelog


def test_an_import_beside_a_golden_is_a_candidate_and_the_golden_is_untouched(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = fx.write(proj / "trace.jsonl", fx.doc(fx.genai_trace()))
    assert run_cli(capsys, "import", "otlp", str(trace))[0] == 0
    golden = only_tape(proj)
    before = golden.read_bytes()
    code, out, _ = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 0 and out.startswith("candidate ")
    assert golden.read_bytes() == before
    candidate = golden.with_name(golden.name.replace(".jsonl", ".candidate.jsonl"))
    assert [s["key"] for s in steps(candidate)] == [s["key"] for s in steps(golden)]
    assert run_cli(capsys, "pending")[1].count(golden.stem) >= 1


def test_an_imported_trace_replays_offline_with_zero_live_calls_and_a_changed_prompt_is_model_drift(
    proj: Path,
) -> None:
    trace = fx.write(proj / "trace.jsonl", fx.doc(fx.genai_trace()))
    cfg = load_config(proj / "tapes.toml")
    import_otlp([trace], cfg.tapes_dir, config=cfg)
    tape = only_tape(proj)
    first, call, second = steps(tape)

    def ask(t: Tape, instructions: str) -> Any:
        definition = {k: v for k, v in fx.WEATHER_DEF.items() if k != "type"}
        req = {**first["request"], "instructions": instructions, "tools": [definition]}
        return t.model(req, model="openai:gpt-4o", live=lambda: pytest.fail("the model ran"))

    with Tape(tape, "replay", config=cfg) as t:
        out = ask(t, "Be brief.")
        assert out["parts"][0]["name"] == "weather"
        result = t.call("weather", {"city": "Paris"}, live=lambda: pytest.fail("the tool ran"))
        assert result == 14.5
        assert t.stats()["live_model_calls"] == 0 and t.stats()["live_tool_calls"] == 0
    with Tape(tape, "replay", config=cfg) as t, pytest.raises(ModelDrift, match="instructions"):
        ask(t, "Be long-winded.")


# ---- a contract seen in a trace is partial ------------------------------------------------------------------
def test_a_traced_contract_is_compared_only_on_what_the_trace_held(proj: Path) -> None:
    trace = fx.write(proj / "trace.jsonl", fx.doc(fx.genai_trace()))
    cfg = load_config(proj / "tapes.toml")
    import_otlp([trace], cfg.tapes_dir, config=cfg)
    tape = only_tape(proj)

    def registry(description: str) -> ToolRegistry:
        reg = ToolRegistry()

        @reg.tool(
            description=description,
            schema=fx.WEATHER_DEF["parameters"],
            output_schema={"type": "number"},
            version="3",
        )
        def weather(city: str) -> float:
            return 99.0

        return reg

    # the whole contract registered: an output schema, a version and a signature the trace never held
    with Tape(tape, "replay", registry(fx.WEATHER_DEF["description"]), config=cfg) as t:
        assert t.call("weather", {"city": "Paris"}) == 14.5
        assert t.stats()["fingerprint_changes"] == 0
    changed = registry("The weather, in Fahrenheit.")
    with Tape(tape, "replay", changed, config=cfg) as t, pytest.raises(ToolDriftError, match="description"):
        t.call("weather", {"city": "Paris"})


# ---- older generations, OpenInference, MCP ------------------------------------------------------------------
def test_the_older_per_message_events_import_as_the_same_turns(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    a = {"gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o", "gen_ai.operation.name": "chat"}
    events = [
        ("gen_ai.system.message", {"content": "Be brief."}),
        ("gen_ai.user.message", {"content": "How warm is Paris?"}),
        (
            "gen_ai.choice",
            {"message": json.dumps({"role": "assistant", "content": "Mild.", "tool_calls": []}), "index": 0},
        ),
    ]
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "chat gpt-4o", a, parent=None, kind=3, events=events)]))
    import_otlp([trace], cfg.tapes_dir, config=cfg)
    (turn,) = steps(only_tape(proj))
    assert turn["model"] == "openai:gpt-4o"
    assert turn["request"]["instructions"] == "Be brief."
    assert turn["request"]["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "How warm is Paris?"}]}
    ]
    assert turn["response"]["parts"] == [{"type": "text", "content": "Mild."}]


def test_openllmetry_indexed_attributes_import_with_their_tool_calls(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    a = {
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.prompt.0.role": "system",
        "gen_ai.prompt.0.content": "Be brief.",
        "gen_ai.prompt.1.role": "user",
        "gen_ai.prompt.1.content": "How warm is Paris?",
        "gen_ai.completion.0.role": "assistant",
        "gen_ai.completion.0.tool_calls.0.id": "c9",
        "gen_ai.completion.0.tool_calls.0.name": "weather",
        "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
        "gen_ai.usage.prompt_tokens": 30,
        "gen_ai.usage.completion_tokens": 4,
        "llm.request.functions.0.name": "weather",
        "llm.request.functions.0.description": "The weather of a city.",
        "llm.request.functions.0.parameters": json.dumps(fx.WEATHER_DEF["parameters"]),
    }
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "openai.chat", a, parent=None, kind=3)]))
    report = import_otlp([trace], cfg.tapes_dir, config=cfg)
    assert report.turns == 1
    (turn,) = steps(only_tape(proj))
    assert turn["request"]["instructions"] == "Be brief."
    assert turn["request"]["tools"] == ["weather"]
    assert turn["response"]["parts"] == [
        {"type": "tool_call", "id": "c9", "name": "weather", "arguments": {"city": "Paris"}}
    ]
    assert turn["usage"] == {"input": 30, "output": 4}


def test_pydantic_ais_older_running_tool_spans_are_calls(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    a = {"gen_ai.tool.name": "weather", "tool_arguments": '{"city": "Rome"}', "tool_response": "21.0"}
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "running tool: weather", a, parent=None)]))
    import_otlp([trace], cfg.tapes_dir, config=cfg)
    (call,) = steps(only_tape(proj))
    assert (call["tool"], call["args"], call["result"]) == ("weather", {"city": "Rome"}, 21.0)


def test_openinference_llm_and_tool_spans_import_numbered_from_one(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    llm = {
        "openinference.span.kind": "LLM",
        "llm.provider": "openai",
        "llm.model_name": "gpt-4o",
        "llm.input_messages.1.message.role": "system",
        "llm.input_messages.1.message.content": "Be brief.",
        "llm.input_messages.2.message.role": "user",
        "llm.input_messages.2.message.content": "How warm is Paris?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_x",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "weather",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Paris"}',
        "llm.tools.0.tool.json_schema": json.dumps({"type": "function", "function": fx.WEATHER_DEF}),
        "llm.token_count.prompt": 20,
        "llm.token_count.completion": 3,
        "llm.invocation_parameters": json.dumps({"temperature": 0.2, "model": "gpt-4o"}),
    }
    tool = {
        "openinference.span.kind": "TOOL",
        "tool.name": "weather",
        "input.value": '{"city": "Paris"}',
        "output.value": "14.5",
    }
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "response", llm, parent=None), fx.span(1, "weather", tool)]))
    import_otlp([trace], cfg.tapes_dir, config=cfg)
    turn, call = steps(only_tape(proj))
    assert turn["request"]["instructions"] == "Be brief." and turn["request"]["settings"] == {"temperature": 0.2}
    assert turn["request"]["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "How warm is Paris?"}]}
    ]
    assert turn["response"]["parts"][0]["name"] == "weather" and turn["usage"] == {"input": 20, "output": 3}
    assert (call["tool"], call["args"], call["result"]) == ("weather", {"city": "Paris"}, 14.5)


def test_an_mcp_span_under_the_genai_tool_span_of_the_same_call_is_one_call(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    spans = fx.genai_trace()
    mcp = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "weather",
        "jsonrpc.request.id": "7",
        "mcp.session.id": "s1",
    }
    spans.append(fx.span(4, "tools/call weather", mcp, parent=2, kind=3))
    spans.append(
        fx.span(5, "tools/call lookup", {**mcp, "gen_ai.tool.name": "lookup", "jsonrpc.request.id": "8"}, parent=0)
    )
    trace = fx.write(proj / "t.jsonl", fx.doc(spans))
    report = import_otlp([trace], cfg.tapes_dir, config=cfg)
    assert report.merged == 1 and report.calls == 2  # weather once (merged); lookup, an MCP call of its own
    assert [s.get("tool") for s in steps(only_tape(proj)) if s["type"] == "call"] == ["weather", "lookup"]


def test_duplicate_spans_merge_and_base64_ids_are_read_with_a_notice(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = fx.genai_trace()
    b64 = json.loads(json.dumps(spans))
    for s in b64:
        for k in ("traceId", "spanId", "parentSpanId"):
            if k in s:
                s[k] = base64.b64encode(bytes.fromhex(s[k])).decode()
    trace = fx.write(proj / "t.jsonl", fx.doc(spans), fx.doc(b64))  # the same spans twice, the second in base64
    code, out, _ = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 0
    assert "4 duplicate spans merged" in out and "ids were base64" in out
    assert len(steps(only_tape(proj))) == 3


def test_group_by_makes_one_tape_per_attribute_value(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    other = [dict(s, traceId="0" * 31 + "1") for s in fx.genai_trace()]
    for s in other:
        s["attributes"] = s["attributes"] + fx.attrs({"session.id": "beta"})
    mine = [dict(s, attributes=s["attributes"] + fx.attrs({"session.id": "alpha"})) for s in fx.genai_trace()]
    trace = fx.write(proj / "t.jsonl", fx.doc(mine + other))
    report = import_otlp([trace], cfg.tapes_dir, group_by="session.id", config=cfg)
    # session.id is a key the redaction rules hide: its values name no file and are said redacted, one tape each
    assert [g for _, _, g in report.tapes] == ["[REDACTED]", "[REDACTED]"]
    assert len({p.name for p, _, _ in report.tapes}) == 2 and all(
        p.name.startswith("group-") for p, _, _ in report.tapes
    )
    for p, _, _ in report.tapes:
        assert "alpha" not in p.read_text() and "beta" not in p.read_text()


# ---- content not captured -----------------------------------------------------------------------------------
def test_spans_without_content_import_marked_and_replaying_them_says_how_to_capture(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = fx.write(proj / "t.jsonl", fx.doc(fx.genai_trace(content=False)))
    code, out, _ = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 0 and "3 turns and calls without their content" in out
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in out
    tape = only_tape(proj)
    first = steps(tape)[0]
    assert first["request"]["content"] == "not captured"
    with Tape(tape, "replay") as t, pytest.raises(TapeError, match="did not capture its messages"):
        t.model(
            {"messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]},
            model="openai:gpt-4o",
            live=lambda: pytest.fail("the model ran"),
        )


# ---- bad input ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ('{"resourceSpans": []}\n{"resourceSpans": [\n', "t.jsonl:2: not JSON"),
        ('{"hello": 1}\n', "t.jsonl:1: no resourceSpans"),
        (
            json.dumps({"name": "x", "context": {"trace_id": "0x1", "span_id": "0x2"}, "kind": "SpanKind.INTERNAL"}),
            "console exporter's output (ConsoleSpanExporter), not OTLP JSON",
        ),
        (json.dumps(fx.doc([dict(fx.span(0, "x", {}), spanId="")])), "spanId is missing"),
        (json.dumps(fx.doc([dict(fx.span(0, "x", {}), traceId="zz")])), "traceId 'zz' is not an id"),
        (json.dumps(fx.doc([dict(fx.span(0, "x", {}), startTimeUnixNano="soon")])), "startTimeUnixNano must be"),
        (
            json.dumps(fx.doc([fx.span(0, "a", {}, parent=1), fx.span(1, "b", {}, parent=0)])),
            "is its own ancestor: the parent ids",
        ),
        ("[1, 2]\n", "a list, not an OTLP TracesData object"),
        (
            json.dumps(fx.doc([dict(fx.span(0, "x", {}), attributes=[{"key": "n", "value": {"intValue": "9" * 30}}])])),
            "intValue must be a 64-bit integer",
        ),
        (json.dumps(fx.doc([dict(fx.span(0, "x", {}), startTimeUnixNano="\u00b2")])), "ASCII digits, within 64 bits"),
        (
            json.dumps(fx.doc([dict(fx.span(0, "x", {}), attributes=[{"key": "b", "value": {"boolValue": "false"}}])])),
            "boolValue must be true or false",
        ),
        ('{"resourceSpans": [\n{"resourceSpans": []}\n', "t.jsonl:1: not JSON"),
        ('{"resourceSpans": [{"scopeSpans": 3}', "t.jsonl:1: not JSON: unexpected end of data"),  # one line, cut
        ('{"resourceSpans": [{"resource": {"attributes": 5}}]}', "resourceSpans[0].resource.attributes must be a list"),
        ('{"resourceSpans": [\n  {"scopeSpans": []},\n  x\n]}\n', "t.jsonl:3: not JSON"),  # pretty-printed
        ("\n\n{\n  oops\n}\n", "t.jsonl:4: not JSON"),  # blank lines first: lines counted from the file's start
        (
            json.dumps(
                fx.doc([fx.span(0, "", {"openinference.span.kind": "TOOL", "tool.json_schema": "{}"}, parent=None)])
            ),
            "span '' (0000000000000001): the tool's definition: a tool contract needs a name",
        ),
    ],
)
def test_bad_input_is_a_clear_error_naming_the_file_and_line(
    proj: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    trace = proj / "t.jsonl"
    trace.write_text(content)
    code, out, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 2, out
    assert expected in err and "Traceback" not in err
    assert str(trace) in err
    assert not list((proj / "tapes").glob("*.jsonl"))


def test_an_error_quoting_the_trace_is_said_redacted(proj: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8t"
    trace = proj / "t.jsonl"
    trace.write_text(json.dumps(fx.doc([dict(fx.span(0, "x", {}), startTimeUnixNano=secret)])))
    code, out, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 2 and "startTimeUnixNano must be" in err and "[REDACTED]" in err
    assert "Ab3dEf6hIj9kLm2n" not in out + err


def test_a_value_quoted_by_an_error_under_a_secret_attribute_name_is_redacted(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The value of an ``api_key`` attribute is redacted in a tape by its name, not its shape: an error that quotes
    it says it redacted too, and so does one under a ``[redact]`` key of the project."""
    (proj / "tapes.toml").write_text((proj / "tapes.toml").read_text() + '\n[redact]\nkeys = ["customer_ref"]\n')
    for key, kind in (("api_key", "intValue"), ("password", "boolValue"), ("customer_ref", "intValue")):
        bad = [{"key": "config", "value": {"kvlistValue": {"values": [{"key": key, "value": {kind: "hunter2-xyz"}}]}}}]
        trace = proj / f"{key}.jsonl"
        trace.write_text(json.dumps(fx.doc([dict(fx.span(0, "x", {}), attributes=bad)])))
        code, out, err = run_cli(capsys, "import", "otlp", str(trace))
        assert code == 2 and f"{kind} must be" in err and "[REDACTED]" in err, err
        assert "hunter2" not in out + err
    trace = proj / "plain.jsonl"
    bad = [{"key": "retries", "value": {"intValue": "many"}}]
    trace.write_text(json.dumps(fx.doc([dict(fx.span(0, "x", {}), attributes=bad)])))
    code, out, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 2 and "got 'many'" in err  # any other value is quoted, to say what is wrong


@pytest.mark.parametrize(
    "attributes",
    [
        {"openinference.span.kind": "LLM", "llm.tools.0.tool": "x"},
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.contents": 5,
        },  # fmt: skip
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "assistant",
            "llm.input_messages.0.message.tool_calls": 5,
        },  # fmt: skip
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": json.dumps([{"role": "user", "content": "x", "tool_calls": 5}]),
        },  # fmt: skip
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "m",
            "gen_ai.input.messages": "[]",
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "tool_call", "id": {"x": 1}, "name": "n", "arguments": {}}]}]
            ),
        },  # fmt: skip
    ],
)
def test_attributes_of_an_odd_shape_import_as_far_as_they_go_never_a_traceback(
    proj: Path, capsys: pytest.CaptureFixture[str], attributes: dict[str, Any]
) -> None:
    """A list where a message holds a number, a tool given as text, a call id that is an object: what a convention
    cannot hold is left out (a call id that is no text, as a missing one), the rest imports."""
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "root", {}, parent=None), fx.span(1, "chat m", attributes)]))
    code, out, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 0, err
    assert "1 model turn" in out and "Traceback" not in err
    turn = next(r for r in lines(only_tape(proj)) if r["type"] == "model")
    ids = [p.get("id") for p in turn["response"]["parts"] if p.get("type") == "tool_call"] if turn["response"] else []
    assert all(i is None or isinstance(i, str) for i in ids)


def test_a_traced_error_of_a_builtin_alias_is_recorded_and_its_message_stays_redacted(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``IOError`` is ``OSError`` in Python: the traced error is recorded as that class (replay raises it), never
    taken for a failure of the import (which printed its message, unredacted, as a file error)."""
    secret = "sk-proj-" + "A1b2C3d4E5" * 4
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch", "gen_ai.tool.call.arguments": "{}"}
    spans = [
        fx.span(0, "root", {}, parent=None),
        fx.span(1, "execute_tool fetch", {**tool, "error.type": "IOError"}, error=f"upstream said {secret}"),
        fx.span(2, "execute_tool fetch", {**tool, "error.type": "my.mod.QuotaError"}, error="over quota"),
    ]
    trace = fx.write(proj / "t.jsonl", fx.doc(spans))
    code, out, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 0, err
    assert secret not in out + err + only_tape(proj).read_text()
    errors = [r["error"] for r in steps(only_tape(proj))]
    assert [(e["type"], e.get("module")) for e in errors] == [("OSError", "builtins"), ("QuotaError", "my.mod")]
    assert "[REDACTED]" in errors[0]["message"]


def test_traces_grouped_together_may_reuse_span_ids(proj: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A span id is unique within its trace only: two traces of one ``--group-by`` value numbering their spans alike
    are no cycle (known by span id alone, span 2's parent is span 3 in one trace and span 3's is span 2 in the
    other), and an MCP span merges with the tool span of its own trace."""
    other = "a" * 32
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", "session.id": "s"}
    mcp = {"mcp.method.name": "tools/call", "gen_ai.tool.name": "t", "session.id": "s"}
    agent = {"session.id": "s"}
    spans = [
        fx.span(0, "agent", agent, parent=None, trace=other),
        fx.span(1, "execute_tool t", {**tool, "gen_ai.tool.call.arguments": '{"n": 2}'}, parent=0, trace=other),
        fx.span(0, "agent", agent, parent=None),
        fx.span(2, "agent step", agent, parent=0),
        fx.span(1, "execute_tool t", {**tool, "gen_ai.tool.call.arguments": '{"n": 1}'}, parent=2),
        fx.span(2, "tools/call t", mcp, parent=1, trace=other),
    ]
    trace = fx.write(proj / "t.jsonl", fx.doc(spans))
    code, out, err = run_cli(capsys, "import", "otlp", str(trace), "--group-by", "session.id")
    assert code == 0, err
    assert sorted(s["args"]["n"] for s in steps(only_tape(proj))) == [1, 2]
    assert "1 MCP spans merged with their tool spans" in out, out


def test_a_numbered_attribute_with_a_digit_that_is_not_ascii_is_a_key_not_an_index(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    a = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "llm.input_messages.\u00b2.message.role": "user",  # "²".isdigit() is true, int("²") an error
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": "hi",
    }
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "ChatCompletion", a, parent=None)]))
    assert import_otlp([trace], cfg.tapes_dir, config=cfg).turns == 1


@pytest.mark.parametrize("pid", ["\u00b2", "9" * 30, "12x"])
def test_a_spill_folder_not_named_for_a_process_is_left_alone(
    proj: Path, monkeypatch: pytest.MonkeyPatch, pid: str
) -> None:
    tmp = proj / "tmp"
    odd = tmp / f"tapetui-import-{pid}-x"
    odd.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    cfg = load_config(proj / "tapes.toml")
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "execute_tool f", {"gen_ai.tool.name": "f"}, parent=None)]))
    assert import_otlp([trace], cfg.tapes_dir, config=cfg).calls == 1
    assert odd.is_dir()


def test_arguments_that_are_not_json_are_kept_as_text(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    a = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.arguments": "cats {"}
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "execute_tool search", a, parent=None)]))
    import_otlp([trace], cfg.tapes_dir, config=cfg)
    assert steps(only_tape(proj))[0]["args"] == {"input": "cats {"}


def test_a_fifo_in_place_of_the_trace_is_refused_without_hanging(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fifo = proj / "t.jsonl"
    os.mkfifo(fifo)
    code, _, err = run_cli(capsys, "import", "otlp", str(fifo))
    assert code == 2 and "t.jsonl" in err


def test_a_pretty_printed_one_document_file_is_read(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    trace = proj / "t.json"
    trace.write_text(json.dumps(fx.doc(fx.genai_trace()), indent=2))
    assert import_otlp([trace], cfg.tapes_dir, config=cfg).turns == 2


# ---- export ------------------------------------------------------------------------------------------------
def _protobuf(line: str) -> TracesData:
    """The official definitions' JSON parsing: ids converted from the file format's hex to the mapping's base64."""
    d = json.loads(line)
    for rs in d["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for sp in ss["spans"]:
                for k in ("traceId", "spanId", "parentSpanId"):
                    if k in sp:
                        sp[k] = base64.b64encode(bytes.fromhex(sp[k])).decode()
    return json_format.ParseDict(d, TracesData())


def test_export_writes_spans_the_protobuf_definitions_accept_with_fingerprints_and_outcomes(
    sample_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sample_dir)
    code, out, err = run_cli(capsys, "export", "otlp", "drift_summarize", "research_prompt")
    assert code == 0, err
    docs = out.splitlines()
    assert len(docs) == 2
    spans = list(_protobuf(docs[0]).resource_spans[0].scope_spans[0].spans)
    assert all(len(s.trace_id) == 16 and len(s.span_id) == 8 for s in spans)
    assert spans[0].name == "invoke_agent drift_summarize"
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert tools and all(s.parent_span_id == spans[0].span_id for s in tools)
    attrs = [{a.key: json_format.MessageToDict(a.value) for a in s.attributes} for s in tools]
    assert all(a["tool.fingerprint"]["stringValue"] and "tool.version" in a for a in attrs)
    outcomes = [a["tapetui.outcome"]["stringValue"] for a in attrs]
    assert "drift" in outcomes and "hit" in outcomes
    drifted = tools[outcomes.index("drift")]
    (event,) = drifted.events
    assert event.name == "tapetui.drift"
    changed = {a.key: json_format.MessageToDict(a.value) for a in event.attributes}["tapetui.changes"]
    assert changed["arrayValue"]["values"]
    turns = list(_protobuf(docs[1]).resource_spans[0].scope_spans[0].spans)
    chat = [s for s in turns if s.name.startswith("chat ")]
    assert chat and all(s.kind == 3 for s in chat)
    assert {a.key for a in chat[0].attributes} >= {
        "gen_ai.input.messages",
        "gen_ai.usage.input_tokens",
        "tapetui.outcome",
    }


def test_an_exported_tape_imports_back_to_the_same_steps(
    tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sample_dir)
    assert main(["export", "otlp", "research_prompt", "--out", str(tmp_path / "out.jsonl")]) == 0
    assert main(["import", "otlp", str(tmp_path / "out.jsonl"), "--out", str(tmp_path / "back")]) == 0
    (back,) = (tmp_path / "back").glob("*.jsonl")
    original = steps(sample_dir / "sample_tapes" / "research_prompt.jsonl")
    assert [(s["type"], s["key"]) for s in steps(back)] == [(s["type"], s["key"]) for s in original]


def test_import_export_import_keeps_each_steps_time_and_its_errors_class(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A step's span starts at its ``recorded_at`` (a recording stamps a step as it starts it), so a trace exported
    and imported again has the same times, round after round; an error keeps the module of its class."""
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "fetch", "gen_ai.tool.call.arguments": "{}"}
    spans = [
        fx.span(0, "root", {}, parent=None),
        fx.span(1, "execute_tool fetch", {**tool, "gen_ai.tool.call.result": '{"ok": 1}'}, ms=10),
        fx.span(2, "execute_tool fetch", {**tool, "error.type": "my.mod.QuotaError"}, error="over quota", ms=25),
        fx.span(3, "execute_tool fetch", {**tool, "error.type": "KeyError"}, error="'missing'"),  # str(KeyError(k))
    ]
    first = fx.write(proj / "t.jsonl", fx.doc(spans))
    assert run_cli(capsys, "import", "otlp", str(first), "--out", str(proj / "tapes" / "a"))[0] == 0
    seen = []
    tape = next((proj / "tapes" / "a").glob("*.jsonl"))
    for n in range(2):
        out = proj / f"out{n}.jsonl"
        assert run_cli(capsys, "export", "otlp", str(tape), "--out", str(out))[0] == 0
        assert run_cli(capsys, "import", "otlp", str(out), "--out", str(proj / "tapes" / f"back{n}"))[0] == 0
        tape = next((proj / "tapes" / f"back{n}").glob("*.jsonl"))
        seen.append([(s["recorded_at"], s["ms"], s.get("error")) for s in steps(tape)])
    original = [
        (s["recorded_at"], s["ms"], s.get("error")) for s in steps(next((proj / "tapes" / "a").glob("*.jsonl")))
    ]
    assert seen == [original, original]
    assert original[1][2]["module"] == "my.mod" and original[0][0] == "2025-11-24T16:00:00.100000Z"
    assert (original[2][2]["message"], original[2][2]["args"]) == ("'missing'", ["missing"])  # never quoted anew


def test_spans_exported_to_a_ci_log_carry_no_runner_command(proj: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A GitHub runner reads ``##[command]`` anywhere in a line of a job's log: on standard output the bracket is
    JSON's ``\\u005b``, the same value once parsed; a file written with ``--out`` holds the bytes as they are."""
    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "t",
        "gen_ai.tool.call.result": "##[add-mask]x",
    }
    trace = fx.write(
        proj / "t.jsonl", fx.doc([fx.span(0, "root", {}, parent=None), fx.span(1, "execute_tool t", tool)])
    )
    assert run_cli(capsys, "import", "otlp", str(trace))[0] == 0
    assert main(["export", "otlp", only_tape(proj).stem]) == 0
    out = capsys.readouterr().out
    assert "##[" not in out and "##[add-mask]x" in json.dumps(json.loads(out))


def test_export_out_replaces_a_regular_file_only_and_never_a_tape(
    tmp_path: Path, sample_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--out`` writes a new or a regular file (atomically); a FIFO, a device (through a symlink too), a folder, a
    tape or lock of the tapes folder and its changelog are refused (exit 2), each left as it was."""
    monkeypatch.chdir(sample_dir)
    tapes = sample_dir / "sample_tapes"
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    device = tmp_path / "null"
    device.symlink_to(os.devnull)
    golden = tapes / "research_prompt.jsonl"
    before = golden.read_bytes()
    changelog = load_config(sample_dir / "tapes.toml").changelog
    if not changelog.exists():
        changelog.write_text("# entries\n")
    kept = changelog.read_bytes()
    for target, why in (
        (fifo, "not a regular file (a FIFO)"),
        (device, "not a regular file (a character device)"),
        (tmp_path, "this is a folder"),
        (golden, "a file of the tapes folder"),
        (tapes / "new.jsonl", "a file of the tapes folder"),
        (changelog, "its changelog"),
        (tapes / "research_prompt.jsonl.journal", "a file of the tapes folder"),
        (tapes / "research_prompt.jsonl.torn", "a file of the tapes folder"),
        (sample_dir / "tapes.toml", "or tapes.toml"),
    ):
        assert main(["export", "otlp", "research_prompt", "--out", str(target)]) == 2, target
        assert why in capsys.readouterr().err, target
    assert fifo.is_fifo() and device.is_symlink() and os.path.realpath(device) == os.devnull
    assert golden.read_bytes() == before and changelog.read_bytes() == kept and not (tapes / "new.jsonl").exists()
    assert not (tapes / "research_prompt.jsonl.journal").exists() and (sample_dir / "tapes.toml").read_text()
    out = tmp_path / "spans.jsonl"
    out.write_text("old\n")
    assert main(["export", "otlp", "research_prompt", "--out", str(out)]) == 0
    (doc,) = lines(out)
    root = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    named = {a["key"]: a["value"] for a in root["attributes"]}
    assert named["tapetui.tape"] == {"stringValue": "sample_tapes/research_prompt.jsonl"}  # not this machine's path


def test_times_otlp_cannot_hold_export_as_unset(proj: Path) -> None:
    """A step recorded in year 9999 or before 1970 (a hand edit): its span's times are 0 (unknown), as OTLP's
    fixed64 nanoseconds take no other, and the line still loads with the protobuf definitions."""
    from tests.builders import HEADER, call_line

    tape = proj / "tapes" / "odd_times.jsonl"
    tape.write_bytes(
        HEADER
        + call_line(seq=1, tool="a", args={}, result=1, recorded_at="9999-12-31T23:59:59Z", ms=5.0)
        + call_line(seq=2, tool="a", args={"x": 1}, result=1, recorded_at="1960-01-01T00:00:00Z", ms=1e12)
    )
    code = main(["export", "otlp", "odd_times", "--out", str(proj / "spans.json")])
    assert code == 0
    data = _protobuf((proj / "spans.json").read_text())
    spans = data.resource_spans[0].scope_spans[0].spans
    assert len(spans) == 3 and all(s.start_time_unix_nano == s.end_time_unix_nano == 0 for s in spans)


# ---- a real instrumented agent ----------------------------------------------------------------------------
def _agent(capabilities: list[Any], counts: dict[str, int], instructions: str = "Be brief.") -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        counts["model"] += 1
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"})])
        return ModelResponse(parts=[TextPart("14.5 degrees.")])

    agent = Agent(FunctionModel(model, model_name="weather-bot"), instructions=instructions, capabilities=capabilities)

    @agent.tool_plain
    def weather(city: str) -> float:
        """The weather of a city."""
        counts["tool"] += 1
        return 14.5

    return agent


def test_a_pydantic_ai_trace_replays_the_agent_offline_and_a_prompt_change_is_drift_against_production(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPJsonFileExporter(proj / "prod.jsonl")))
    counts = {"model": 0, "tool": 0}
    settings = InstrumentationSettings(tracer_provider=provider, include_content=True)
    asyncio.run(_agent([Instrumentation(settings=settings)], counts).run("How warm is Paris?"))
    assert counts == {"model": 2, "tool": 1}
    cfg = load_config(proj / "tapes.toml")
    report = import_otlp([proj / "prod.jsonl"], cfg.tapes_dir, config=cfg)
    assert (report.turns, report.calls) == (2, 1)
    tape = only_tape(proj)
    counts = {"model": 0, "tool": 0}
    with Tape(tape, "replay", config=cfg) as t, use_tape(t):
        out = asyncio.run(_agent([TapeCapability(models=True)], counts).run("How warm is Paris?"))
        stats = t.stats()
    assert out.output == "14.5 degrees."
    assert counts == {"model": 0, "tool": 0}
    assert stats["live_model_calls"] == 0 and stats["live_tool_calls"] == 0 and stats["model_hits"] == 2
    assert stats["contracts_from_trace"] == ["weather"]
    # check is green on it, and says once what a trace's contract left out
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert out.count("weather: its contract is from a trace: name, description, schema compared") == 1
    with Tape(tape, "replay", config=cfg) as t, use_tape(t), pytest.raises(ModelDrift, match="instructions"):
        asyncio.run(_agent([TapeCapability(models=True)], counts, "Be verbose.").run("How warm is Paris?"))
    assert counts == {"model": 0, "tool": 0}


# ---- the OpenAI Agents SDK through OpenInference's instrumentor ----------------------------------------------
def test_an_agents_sdk_trace_through_openinference_replays_with_zero_model_calls_and_zero_tool_runs(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Agents SDK's own OpenAI model (the HTTP answered offline by httpx's MockTransport), traced by the
    OpenInference processor: its LLM spans hold the messages but no tool list, the import says which request
    fields each turn held, and the agent replays through TapedModel with no HTTP request and no tool run; the
    tools are listed once as not in the trace, and a changed prompt is a ModelDrift against production."""
    agents = pytest.importorskip("agents")
    httpx = pytest.importorskip("httpx")
    from openai import AsyncOpenAI
    from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

    from tapetui.integrations.openai_agents import TapedModel, taped

    runs = {"http": 0, "add": 0}

    def answer(request: Any) -> Any:  # what the Chat Completions API answers: a tool call, then the final text
        runs["http"] += 1
        told = any(m.get("role") == "tool" for m in json.loads(request.content)["messages"])
        call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a":1,"b":2}'}}
        message = {"role": "assistant", "content": "3"} if told else {"role": "assistant", "tool_calls": [call]}
        return httpx.Response(
            200,
            json={
                "id": f"chatcmpl-{runs['http']}",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o-mini",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop" if told else "tool_calls"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
            },
        )

    def model() -> Any:
        client = AsyncOpenAI(
            api_key="sk-offline",
            base_url="http://offline/v1",
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(answer)),
        )
        return agents.OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client)

    @agents.function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        runs["add"] += 1
        return a + b

    def run(agent: Any, **kw: Any) -> str:
        return str(asyncio.run(agents.Runner.run(agent, "What is 1 + 2?", **kw)).final_output)

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPJsonFileExporter(proj / "prod.jsonl")))
    instrumentor = OpenAIAgentsInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        assert run(agents.Agent(name="calc", instructions="You add numbers.", model=model(), tools=[add])) == "3"
    finally:
        instrumentor.uninstrument()
    assert runs == {"http": 2, "add": 1}
    cfg = load_config(proj / "tapes.toml")
    report = import_otlp([proj / "prod.jsonl"], cfg.tapes_dir, config=cfg)
    assert (report.turns, report.calls) == (2, 1)
    tape = only_tape(proj)
    turn, call, _ = steps(tape)
    assert turn["from_trace"] == ["instructions", "messages", "settings"]  # no tool list in the span
    assert turn["request"]["settings"] == {}  # the span's only parameter was base_url: where it went, not a setting
    assert (call["tool"], call["args"], call["result"]) == ("add", {"a": 1, "b": 2}, 3)

    def replay(instructions: str, settings: Any = None) -> Tape:
        with Tape(tape, "replay", config=cfg) as t, use_tape(t):
            agent = agents.Agent(name="calc", instructions=instructions, model=TapedModel(model()), tools=taped([add]))
            if settings is not None:
                agent.model_settings = settings
            assert run(agent, run_config=agents.RunConfig(tracing_disabled=True)) == "3"
        return t

    runs.update(http=0, add=0)
    stats = replay("You add numbers.").stats()
    assert runs == {"http": 0, "add": 0}
    assert (stats["model_hits"], stats["tape_hits"], stats["live_model_calls"], stats["live_tool_calls"]) == (
        2,
        1,
        0,
        0,
    )
    assert main(["check"]) == 0
    out = capsys.readouterr().out
    assert "served from a turn a trace import wrote (otlp); not in the trace, so not compared: tools" in out
    with pytest.raises(ModelDrift, match=r'instructions "You add numbers\." → "You add numbers carefully\."'):
        replay("You add numbers carefully.")
    with pytest.raises(ModelDrift, match=r"settings.temperature: \+ 0.9"):  # the span held the settings: none
        replay("You add numbers.", agents.ModelSettings(temperature=0.9))
    assert runs == {"http": 0, "add": 0}


def _exported(capsys: pytest.CaptureFixture[str], name: str) -> list[dict[str, Any]]:
    """The spans ``tapetui export otlp NAME`` prints (one tape)."""
    code, out, err = run_cli(capsys, "export", "otlp", name)
    assert code == 0, err
    spans: list[dict[str, Any]] = json.loads(out)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return spans


def _attr(span: dict[str, Any], key: str) -> Any:
    return next(a["value"] for a in span["attributes"] if a["key"] == key)


def test_a_run_log_exports_the_goldens_spans_with_that_runs_outcomes(
    sample_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sample_dir)
    spans = _exported(capsys, "sample_tapes/drift_summarize.run.jsonl")
    outcomes = {s["name"]: _attr(s, "tapetui.outcome")["stringValue"] for s in spans[1:]}
    assert outcomes == {
        "execute_tool fetch_doc": "hit",
        "execute_tool search_index": "hit",
        "execute_tool summarize": "drift",
        "execute_tool write_report": "unused",
    }


def test_secrets_in_a_trace_are_redacted_on_import(proj: Path, capsys: pytest.CaptureFixture[str]) -> None:
    secret = "sk-proj-" + "A1b2C3d4" * 5
    spans = fx.genai_trace()
    for s in spans:
        s["attributes"] = [
            {**a, "value": {"stringValue": a["value"]["stringValue"].replace("Paris", f"Paris {secret}")}}
            if "stringValue" in a["value"]
            else a
            for a in s["attributes"]
        ]
    # production data may hold one anywhere: as a tool's name, as an error's class
    named = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": secret, "error.type": secret}
    spans.append(fx.span(9, f"execute_tool {secret}", named, error="failed"))
    trace = fx.write(proj / "t.jsonl", fx.doc(spans, service=f"svc {secret}"))
    code, out, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 0, err
    written = "".join(p.read_text() for p in (proj / "tapes").iterdir() if p.is_file())
    assert "Paris" in written and secret not in written
    assert secret not in out + err
    assert main(["export", "otlp", only_tape(proj).stem]) == 0
    assert secret not in capsys.readouterr().out


def test_a_trace_that_fails_to_import_leaves_no_part_of_a_tape(proj: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans = fx.genai_trace()
    twice = json.dumps([fx.WEATHER_DEF, fx.WEATHER_DEF])  # a tool offered twice: the request is refused
    spans[3]["attributes"] = [
        {**a, "value": {"stringValue": twice}} if a["key"] == "gen_ai.tool.definitions" else a
        for a in spans[3]["attributes"]
    ]
    trace = fx.write(proj / "t.jsonl", fx.doc(spans))
    code, _, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 2 and "offered twice" in err
    assert list((proj / "tapes").iterdir()) == []  # no golden of two steps, no changelog entry


def test_traces_spilled_in_many_pieces_each_become_their_own_tape_and_nothing_else_is_left(
    proj: Path, monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """One spill file for the whole import, each trace's spans in pieces between the others' (a flush at every
    span here): every tape holds its own trace's steps and nothing of another's, and the import leaves only the
    tapes, their lock files and the changelog (each trace recorded in memory, the spill folder removed)."""
    from tapetui.traces import importer

    monkeypatch.setattr(importer, "_SPILL_BYTES", 1)
    spill_root = tmp_path_factory.mktemp("spill")
    monkeypatch.setattr(tempfile, "tempdir", str(spill_root))
    traces = {f"{n:032x}": [dict(s, traceId=f"{n:032x}") for s in fx.genai_trace()] for n in range(1, 6)}
    interleaved = [spans[i] for i in range(len(fx.genai_trace())) for spans in traces.values()]  # span by span
    trace = fx.write(proj / "t.jsonl", fx.doc(interleaved[::2]), fx.doc(interleaved[1::2]))
    report = import_otlp([trace], proj / "tapes", config=load_config(proj / "tapes.toml"))
    one = steps(report.tapes[0][0])
    for tape, kind, group in report.tapes:
        assert kind == "golden" and tape.name == f"trace-{group}.jsonl"
        assert lines(tape)[0]["labels"]["trace_id"] == group
        assert [(r["type"], r.get("tool")) for r in steps(tape)] == [(r["type"], r.get("tool")) for r in one]
    assert sorted(g for _, _, g in report.tapes) == sorted(traces)
    left = {p.name for p in (proj / "tapes").iterdir()}
    made = {f"trace-{t}.jsonl" for t in traces} | {f".trace-{t}.jsonl.{k}" for t in traces for k in ("gate", "lock")}
    assert left == made | {"CHANGELOG.md"}
    assert list(spill_root.iterdir()) == []


def test_two_imports_at_once_make_one_golden_and_one_entry_per_trace(proj: Path) -> None:
    docs = [fx.doc([dict(s, traceId=f"{n:032x}") for s in fx.genai_trace()]) for n in range(1, 21)]
    trace = fx.write(proj / "t.jsonl", *docs)
    runs = [subprocess.Popen([sys.executable, "-m", "tapetui", "import", "otlp", str(trace)], cwd=proj) for _ in "ab"]
    assert [r.wait(timeout=300) for r in runs] == [0, 0]
    goldens = sorted(p.name for p in (proj / "tapes").glob("trace-*.jsonl") if ".candidate." not in p.name)
    candidates = sorted((proj / "tapes").glob("trace-*.candidate.jsonl"))
    assert len(goldens) == 20 and len(candidates) == 20
    assert (proj / "tapes" / "CHANGELOG.md").read_text().count("— imported `trace-") == 20


def test_hostile_names_and_text_stay_inert(proj: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spans = [dict(s, attributes=s["attributes"] + fx.attrs({"session.id": "-rf"})) for s in fx.genai_trace()]
    spans[2]["attributes"] = [
        {**a, "value": {"stringValue": "1180591620717411303424"}} if a["key"] == "gen_ai.tool.call.result" else a
        for a in spans[2]["attributes"]
    ]
    spans[1]["attributes"] = [
        {**a, "value": {"stringValue": a["value"]["stringValue"].replace("Paris", "Paris \u202e")}}
        if a["key"] == "gen_ai.input.messages"
        else a
        for a in spans[1]["attributes"]
    ]
    trace = fx.write(proj / "t.jsonl", fx.doc(spans))
    assert run_cli(capsys, "import", "otlp", str(trace), "--group-by", "session.id")[0] == 0
    (tape,) = [p for p in (proj / "tapes").glob("*.jsonl")]
    assert not tape.name.startswith("-")
    call = next(s for s in steps(tape) if s["type"] == "call")
    assert call["result"] == "1180591620717411303424"  # text a float would change stays text
    code, out, _ = run_cli(capsys, "export", "otlp", tape.stem)
    assert code == 0 and "\u202e" not in out and "\\u202e" in out


def test_a_candidate_exports_with_its_comparison_against_the_golden(
    sample_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sample_dir)
    spans = _exported(capsys, "sample_tapes/drift_summarize.candidate.jsonl")
    outcomes = {s["name"]: _attr(s, "tapetui.outcome")["stringValue"] for s in spans[1:]}
    assert outcomes["execute_tool fetch_doc"] == "hit" and outcomes["execute_tool summarize"] == "drift"
    summarize = next(s for s in spans if s["name"] == "execute_tool summarize")
    (event,) = summarize["events"]
    paths = [v["stringValue"] for v in _attr(event, "tapetui.changes")["arrayValue"]["values"]]
    assert event["name"] == "tapetui.drift" and "args.max_words" in paths
    assert any(p.startswith("result.") for p in paths)


def test_a_request_is_compared_with_a_traced_turn_in_what_the_trace_held() -> None:
    from tapetui.core.changes import MISSING, Change
    from tapetui.core.turns import partial_changes

    held = ("instructions", "messages")
    same = [
        Change("model", "openai:gpt-4o-mini", "gpt-4o-mini"),  # a provider prefix only
        Change("messages[2].parts[0].name", MISSING, "add"),  # a trace's tool message names no tool
        Change("messages[2].parts[0].response", 3, "3"),  # the value, and the text the model was given
        Change("messages[2].parts[0].response", '{"a": [1]}', {"a": [1]}),
    ]
    outside = [Change("tools[0]", MISSING, "add"), Change("settings.temperature", MISSING, 0.2)]
    drift = [
        Change("model", "openai:gpt-4o", "gpt-4o-mini"),
        Change("model", "azure:gpt-4o", "openai:gpt-4o"),  # two providers
        Change("messages[2].parts[0].response", "3.0", 3),  # the model was given 3.0, a framework sends 3
        Change("messages[2].parts[0].response", "true", 1),
        Change("instructions", "You add numbers.", "You add."),
        Change("messages[3]", MISSING, {"role": "user", "parts": []}),  # a message more is drift
        Change("messages[2].parts[0].response", 3, "4"),
        Change("messages[2].parts[0].name", "add", "sub"),
    ]
    kept, not_in_trace = partial_changes(same + outside + drift, held)
    assert kept == drift and not_in_trace == ["tools", "settings"]


def test_a_traced_turn_line_that_claims_to_hold_no_messages_is_compared_whole() -> None:
    from tapetui.core.turns import traced_fields

    imported = {"type": "session", "labels": {"source": "otlp"}}
    held = ["instructions", "messages", "tools"]
    assert traced_fields({"source": "otlp", "from_trace": held}, imported) == tuple(held)
    for hostile in ([], ["tools"], ["messages"], "instructions,messages", [1, "messages"], None):
        # a hand-edited golden cannot switch the comparison off
        assert traced_fields({"source": "otlp", "from_trace": hostile}, imported) is None
    # nor make a turn an adapter recorded (or a tape no import wrote) compare in part
    for source, header in (
        ("trace-x", imported),
        ("pydantic-ai", imported),
        ("otlp", {"type": "session"}),
        ("otlp", None),
    ):
        assert traced_fields({"source": source, "from_trace": held}, header) is None


def test_the_fields_not_compared_are_said_once_for_every_traced_turn_of_the_run() -> None:
    from tapetui.review.turnfindings import _Traced

    traced = _Traced()
    traced.add("model  step 1  turn 1 (m)", 1, "otlp", ["tools"])
    traced.add("model  step 3  turn 2 (m)", 3, "otlp", ["settings", "tools"])
    (f,) = traced.findings()
    assert f.warning and f.seq == 1 and f.text.endswith("not in the trace, so not compared: tools, settings")
    assert _Traced().findings() == []


def test_an_attribute_nested_past_what_python_walks_names_the_file_and_span(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "llm.input_messages." + ".".join(["0"] * 3000) + ".message.role"
    a = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o", key: "user"}
    trace = fx.write(proj / "t.jsonl", fx.doc([fx.span(0, "ChatCompletion", a, parent=None)]))
    code, _, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 2 and "t.jsonl:1: span 'ChatCompletion'" in err and "nested too deeply" in err, err
    assert "Traceback" not in err


# ---- what a hostile tester found -----------------------------------------------------------------------------------
def test_an_import_emits_no_live_spans_and_needs_no_opentelemetry_under_otel_enabled(
    proj: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import runs nothing: ``[otel] enabled = true`` makes it no span (they would be the trace's own again,
    unredacted), and it imports where the extra is not installed."""
    import tapetui.core.stepspans as stepspans

    (proj / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n\n[otel]\nenabled = true\n')
    monkeypatch.setattr(stepspans, "entry_points", lambda **kw: [])  # as without tapetui[otel]
    trace = fx.write(proj / "trace.jsonl", fx.doc(fx.genai_trace()))
    code, _, err = run_cli(capsys, "import", "otlp", str(trace))
    assert code == 0, err  # loading the spans' receiver would have failed: there is none
    assert steps(only_tape(proj))


def test_export_redacts_a_call_id_an_older_tape_holds_in_clear(proj: Path, capsys: pytest.CaptureFixture[str]) -> None:
    key = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ123456"
    with Tape(proj / "tapes" / "s.jsonl", "record") as t:
        t.call("add", {"a": 1}, live=lambda: 2, call_id="call_1")
    tape = proj / "tapes" / "s.jsonl"
    tape.write_text(tape.read_text().replace('"call_1"', json.dumps(key)))  # what an older writer left
    code, out, err = run_cli(capsys, "export", "otlp", "s")
    assert code == 0, err
    assert key not in out and "[REDACTED]" in out


def test_an_exported_candidates_model_turns_carry_their_outcome_against_the_golden(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def request(text: str) -> dict[str, Any]:
        return {"messages": [{"role": "user", "parts": [{"type": "text", "content": text}]}]}

    def answer(text: str) -> Any:
        return lambda: {"parts": [{"type": "text", "content": text}]}

    for last, said in (("old", "y"), ("NEW PROMPT", "z")):  # the second, beside the golden: a candidate
        with Tape(proj / "tapes" / "s.jsonl", "record") as t:
            t.model(request("same"), model="m", live=answer("x"))
            t.call("f", {"a": 1}, live=lambda: 1)
            t.model(request(last), model="m", live=answer(said))
    code, out, err = run_cli(capsys, "export", "otlp", "tapes/s.candidate.jsonl")
    assert code == 0, err
    spans = json.loads(out)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    outcome = [
        (s["name"], next(a["value"]["stringValue"] for a in s["attributes"] if a["key"] == "tapetui.outcome"))
        for s in spans
        if not s["name"].startswith("invoke_agent")
    ]
    assert outcome == [("chat m", "hit"), ("execute_tool f", "hit"), ("chat m", "drift")]
    drift = spans[-1]["events"][0]
    changes = next(a for a in drift["attributes"] if a["key"] == "tapetui.changes")["value"]["arrayValue"]["values"]
    assert {"stringValue": "request.messages[0].parts[0].content"} in changes


@pytest.mark.parametrize(
    "argv",
    [
        ["diff", "loop1"],
        ["export", "otlp", "loop1"],
        ["accept", "loop1", "--why", "x"],
        ["reject", "loop1"],
        ["import", "otlp", "trace.jsonl", "--out", "tapes/loop1.jsonl"],
    ],
)
def test_a_symlink_loop_named_on_the_command_line_is_an_error_never_a_traceback(
    proj: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    fx.write(proj / "trace.jsonl", fx.doc(fx.genai_trace()))
    (proj / "tapes" / "loop1.jsonl").symlink_to("loop1.jsonl")
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and "Traceback" not in err and "loop1.jsonl: Too many levels of symbolic links" in err, err


def test_an_exported_candidates_turn_whose_response_a_rule_excused_is_tolerated(
    proj: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rule = '"response.parts[*].content" = "ignore"'
    (proj / "tapes.toml").write_text(f'[tapes]\ndir = "tapes"\n[compare.rules]\n{rule}\n')
    request = {"messages": [{"role": "user", "parts": [{"type": "text", "content": "2 + 2?"}]}]}
    for said in ("The answer is 4", "The answer is 5"):  # the second, beside the golden: a candidate
        with Tape(proj / "tapes" / "a.jsonl", "record") as t:
            t.model(request, model="m", live=lambda said=said: {"parts": [{"type": "text", "content": said}]})
    code, out, err = run_cli(capsys, "export", "otlp", "tapes/a.candidate.jsonl")
    assert code == 0, err
    (chat,) = [s for s in json.loads(out)["resourceSpans"][0]["scopeSpans"][0]["spans"] if s["name"] == "chat m"]
    assert {"key": "tapetui.outcome", "value": {"stringValue": "tolerated"}} in chat["attributes"]


def test_diff_against_a_session_that_links_out_says_it_is_refused(
    proj: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Tape(proj / "tapes" / "a.jsonl", "record") as t:
        t.call("add", {"a": 1}, live=lambda: 2)
    outside = tmp_path / "outside.jsonl"
    outside.write_bytes((proj / "tapes" / "a.jsonl").read_bytes())
    (proj / "tapes" / "evil.jsonl").symlink_to(outside)
    code, out, err = run_cli(capsys, "diff", "a", "evil")
    assert code == 2 and "outside the tapes folder" in err and "no such file" not in err
