"""Live spans (the extra tapetui[otel]): each call and model turn of a record, replay or fill as a span with its
fingerprint and outcome, nested under the framework's spans, never doubling a span the framework made."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic_ai import Agent
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings

import tapetui.core.stepspans as stepspans
import tapetui.integrations.otel as otel
from tapetui import Tape, TapeDrift, TapeError, TapeMiss, ToolRegistry, use_tape
from tapetui.integrations.pydantic_ai import TapeCapability

REQUEST = {"messages": [{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]}


@pytest.fixture
def spans() -> tuple[Any, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    _PROVIDER[tracer] = provider  # pydantic-ai's instrumentation takes the provider, tapetui the tracer
    return tracer, exporter


_PROVIDER: dict[Any, TracerProvider] = {}


def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(version="2")
    def add(a: int, b: int) -> int:
        return a + b

    return reg


def by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for s in exporter.get_finished_spans():
        out.setdefault(s.name, []).append(s)
    return out


def test_record_and_replay_emit_a_span_per_step_with_fingerprint_and_outcome(
    tmp_path: Path, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    tracer, exporter = spans
    tape = tmp_path / "t.jsonl"
    with Tape(tape, "record", registry(), tracer=tracer) as t:
        assert t.call("add", {"a": 1, "b": 2}) == 3
        t.model(REQUEST, model="test:m", live=lambda: {"parts": [{"type": "text", "content": "hello"}]})
    recorded = by_name(exporter)
    (call,) = recorded["execute_tool add"]
    fingerprint = registry().get("add").fingerprint  # type: ignore[union-attr]
    assert call.attributes["tool.fingerprint"] == fingerprint and call.attributes["tool.version"] == "2"
    assert call.attributes["tapetui.outcome"] == "recorded" and call.attributes["tapetui.step"] == 1
    (turn,) = recorded["chat test:m"]
    assert turn.attributes["tapetui.outcome"] == "recorded" and turn.attributes["gen_ai.request.model"] == "test:m"
    exporter.clear()
    with Tape(tape, "replay", registry(), tracer=tracer) as t:
        t.call("add", {"a": 1, "b": 2})
        t.model(REQUEST, model="test:m", live=lambda: pytest.fail("the model ran"))
        with pytest.raises(TapeMiss):
            t.call("add", {"a": 5, "b": 2})
    replayed = by_name(exporter)
    hit, drifted = replayed["execute_tool add"]
    assert hit.attributes["tapetui.outcome"] == "hit" and hit.attributes["tool.fingerprint"] == fingerprint
    assert drifted.attributes["tapetui.outcome"] == "miss"
    assert not drifted.status.is_ok
    assert replayed["chat test:m"][0].attributes["tapetui.outcome"] == "hit"


def test_a_drift_is_a_span_event_with_the_changed_paths(
    tmp_path: Path, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    tracer, exporter = spans
    tape = tmp_path / "t.jsonl"
    with Tape(tape, "record", registry()) as t:
        t.call("add", {"a": 1, "b": 2})
        t.call("add", {"a": 3, "b": 4})
    with Tape(tape, "replay", registry(), tracer=tracer) as t:
        t.call("add", {"a": 1, "b": 2})
        with pytest.raises(TapeDrift):
            t.call("add", {"a": 3, "b": 5})
    drifted = by_name(exporter)["execute_tool add"][1]
    assert drifted.attributes["tapetui.outcome"] == "drift"
    assert list(drifted.attributes["tapetui.changes"]) == ["b"]
    assert [e.name for e in drifted.events] == ["tapetui.drift", "exception"]


def test_spans_nest_under_the_current_span(tmp_path: Path, spans: tuple[Any, InMemorySpanExporter]) -> None:
    tracer, exporter = spans
    with (
        tracer.start_as_current_span("my agent") as outer,
        Tape(tmp_path / "t.jsonl", "record", registry(), tracer=tracer) as t,
    ):
        t.call("add", {"a": 1, "b": 2})
    (call,) = by_name(exporter)["execute_tool add"]
    assert call.parent is not None and call.parent.span_id == outer.get_span_context().span_id


def _agent(capabilities: list[Any], counts: dict[str, int]) -> Agent[None, str]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        counts["model"] += 1
        if len(messages) == 1:
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Paris"})])
        return ModelResponse(parts=[TextPart("14.5 degrees.")])

    agent = Agent(FunctionModel(model, model_name="bot"), capabilities=capabilities)

    @agent.tool_plain
    def weather(city: str) -> float:
        """The weather of a city."""
        counts["tool"] += 1
        return 14.5

    return agent


def test_pydantic_ais_own_spans_get_the_attributes_instead_of_a_second_span(
    tmp_path: Path, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    tracer, exporter = spans
    instrumented = InstrumentationSettings(tracer_provider=_PROVIDER[tracer], include_content=False)
    tape = tmp_path / "t.jsonl"
    counts = {"model": 0, "tool": 0}
    with Tape(tape, "record") as t, use_tape(t):
        asyncio.run(_agent([TapeCapability(models=True)], counts).run("How warm is Paris?"))
    exporter.clear()
    counts = {"model": 0, "tool": 0}
    caps = [Instrumentation(settings=instrumented), TapeCapability(models=True)]
    with Tape(tape, "replay", tracer=tracer) as t, use_tape(t):
        asyncio.run(_agent(caps, counts).run("How warm is Paris?"))
    assert counts == {"model": 0, "tool": 0}
    named = by_name(exporter)
    (tool,) = named["execute_tool weather"]  # pydantic-ai's, with tapetui's attributes: not two
    assert tool.attributes["tapetui.outcome"] == "hit" and tool.attributes["tool.fingerprint"]
    assert tool.attributes["gen_ai.tool.call.id"]  # pydantic-ai's own attribute: the span is the framework's
    chats = [s for name, ss in named.items() if name.startswith("chat ") for s in ss]
    assert len(chats) == 2 and all(s.attributes["tapetui.outcome"] == "hit" for s in chats)


def test_otel_enabled_in_tapes_toml_uses_the_global_tracer(
    tmp_path: Path, spans: tuple[Any, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch
) -> None:
    tracer, exporter = spans
    monkeypatch.setattr(otel.trace, "get_tracer", lambda *a, **k: tracer)
    (tmp_path / "tapes.toml").write_text("[otel]\nenabled = true\n")
    with Tape(tmp_path / "t.jsonl", "record", registry()) as t:
        t.call("add", {"a": 1, "b": 2})
    assert by_name(exporter)["execute_tool add"][0].attributes["tapetui.outcome"] == "recorded"


def test_without_the_extra_a_tracer_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stepspans, "entry_points", lambda **kw: [])
    with pytest.raises(TapeError, match=r"pip install 'tapetui\[otel\]'"):
        Tape(tmp_path / "t.jsonl", "record", tracer=object())


def test_no_opentelemetry_is_imported_without_a_tracer(tmp_path: Path) -> None:
    code = (
        "import sys, tapetui\n"
        f"with tapetui.Tape({str(tmp_path / 't.jsonl')!r}, 'record') as t:\n"
        "    t.call('x', {}, live=lambda: 1)\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'opentelemetry imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tmp_path)


# ---- what a hostile tester found: spans hold what the tape holds, redacted, and a span never costs a call --------
KEY = "sk-proj-ABCDEFGHIJKLMNOPQRSTUVWXYZ123456"
BEARER = "Bearer abcdefghijklmnopqrstuvwxyz0123"


def _span_texts(exporter: InMemorySpanExporter) -> list[str]:
    """Every text a span carries: its name, attributes, events' names and attributes, status."""
    out = []
    for s in exporter.get_finished_spans():
        out += [s.name, str(s.status.description), *map(str, s.attributes.values())]
        out += [f"{e.name} {dict(e.attributes or {})}" for e in s.events]
    return out


class AuthenticationError(Exception):
    pass


def test_what_a_live_step_raised_its_call_id_and_its_model_reach_a_span_redacted(
    tmp_path: Path, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    tracer, exporter = spans

    def model_live() -> Any:
        raise AuthenticationError(f"Error code: 401 - Incorrect API key provided: {KEY}")

    def tool_live() -> Any:
        raise ValueError(f"upstream said: {BEARER} / {KEY}")

    for mode in ("record", "replay"):
        with Tape(tmp_path / "t.jsonl", mode, tracer=tracer) as t:
            with pytest.raises(AuthenticationError):
                t.model(REQUEST, model="openai:gpt-4o", live=model_live)
            with pytest.raises(ValueError):
                t.call("fetch", {"q": 1}, live=tool_live)
            t.call("add", {"a": 1}, live=lambda: 2, call_id=KEY)
            t.model(REQUEST, model=f"gpt-{KEY}", live=lambda: {"parts": [{"type": "text", "content": "ok"}]})
    texts = _span_texts(exporter)
    assert not [t for t in texts if KEY in t or "abcdefghijklmnop" in t]
    errors = [e for s in exporter.get_finished_spans() for e in s.events if e.name == "exception"]
    assert len(errors) == 4  # each failed step, on record and on replay: its type, message and stack trace
    told = errors[0].attributes or {}
    assert told["exception.type"].endswith("AuthenticationError") and "[REDACTED]" in told["exception.message"]
    assert "Traceback" in told["exception.stacktrace"]


class _Raising:
    """A span processor that raises where it is told to (an exporter down, a processor's bug)."""

    def __init__(self, where: str) -> None:
        self.where = where

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.where == "start":
            raise RuntimeError(f"exporter down {KEY}")

    def on_end(self, span: Any) -> None:
        if self.where == "end":
            raise RuntimeError(f"exporter down {KEY}")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


@pytest.mark.parametrize("where", ["start", "end"])
def test_a_span_processor_that_raises_never_costs_a_call_or_its_line(tmp_path: Path, where: str) -> None:
    provider = TracerProvider()
    provider.add_span_processor(_Raising(where))  # type: ignore[arg-type]
    ran: list[int] = []
    stepspans._WARNED[0] = False
    warned = pytest.warns(RuntimeWarning, match="the run goes on without those spans")
    with warned as said, Tape(tmp_path / "t.jsonl", "record", tracer=provider.get_tracer("t")) as t:
        assert t.call("send", {"to": "x"}, live=lambda: ran.append(1) or "sent") == "sent"
        assert t.call("send", {"to": "y"}, live=lambda: ran.append(1) or "sent") == "sent"
    assert ran == [1, 1] and KEY not in str(said[0].message)  # each tool ran once, and once only
    assert sum(b'"type":"call"' in line for line in (tmp_path / "t.jsonl").read_bytes().splitlines()) == 2


@pytest.mark.parametrize("tracer", [TracerProvider(), "tracer"])
def test_a_tracer_that_is_no_tracer_is_refused_when_the_tape_opens(tmp_path: Path, tracer: Any) -> None:
    with pytest.raises(TapeError, match="tracer= takes an OpenTelemetry Tracer"):
        Tape(tmp_path / "t.jsonl", "record", tracer=tracer)


def test_a_tolerated_hit_and_a_recorded_error_served_say_so_live_and_on_export(
    tmp_path: Path, spans: tuple[Any, InMemorySpanExporter]
) -> None:
    tracer, exporter = spans
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "."\n\n[diff]\nignore = ["b"]\n')
    reg = registry()

    @reg.tool(version="1")
    def boom(x: int) -> int:
        raise ValueError("recorded failure")

    with Tape(tmp_path / "o.jsonl", "record", reg) as t:
        t.call("add", {"a": 1, "b": 2})
        with pytest.raises(ValueError):
            t.call("boom", {"x": 1})
    with Tape(tmp_path / "o.jsonl", "replay", reg, tracer=tracer) as t:
        t.call("add", {"a": 1, "b": 99})  # another value only on an ignored path: served, tolerated
        with pytest.raises(ValueError):
            t.call("boom", {"x": 1})  # the recorded error, served from the tape: a hit
        assert (t.stats()["tape_hits"], t.stats()["tolerated_hits"]) == (2, 1)
    live = {s.name: s.attributes for s in exporter.get_finished_spans()}
    assert live["execute_tool add"]["tapetui.outcome"] == "tolerated"
    assert live["execute_tool boom"]["tapetui.outcome"] == "hit" and live["execute_tool boom"]["tapetui.step"] == 2
    out = subprocess.run(
        [sys.executable, "-m", "tapetui", "export", "otlp", "o"], capture_output=True, text=True, cwd=tmp_path
    )
    exported = {
        s["name"]: {a["key"]: a["value"] for a in s["attributes"]}
        for s in __import__("json").loads(out.stdout)["resourceSpans"][0]["scopeSpans"][0]["spans"]
    }
    assert exported["execute_tool add"]["tapetui.outcome"] == {"stringValue": "tolerated"}, out.stderr
    assert exported["execute_tool boom"]["tapetui.outcome"] == {"stringValue": "hit"}


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("cannot print me")


class _RaisingUnprintable(_Raising):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise _Unprintable()


def test_a_receiver_failure_that_cannot_be_printed_or_warned_still_never_costs_the_call(tmp_path: Path) -> None:
    import warnings

    provider = TracerProvider()
    provider.add_span_processor(_RaisingUnprintable("start"))  # type: ignore[arg-type]
    stepspans._WARNED[0] = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # -W error: the warning itself would raise
        with Tape(tmp_path / "t.jsonl", "record", tracer=provider.get_tracer("t")) as t:
            assert t.call("send", {"to": "x"}, live=lambda: "sent") == "sent"
    assert b'"type":"call"' in (tmp_path / "t.jsonl").read_bytes()
