"""pydantic-ai's model turns: an agent's model requests recorded through ``TapedModel`` (or
``TapeCapability(models=True)``) and replayed with no model call, no tool run and no token spent (offline
``FunctionModel``s written here; no network)."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")  # a guard only: the README's test command installs it ([test] extra)

from pydantic_ai import Agent, ModelSettings
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    PartDeltaEvent,
    PartStartEvent,
    SystemPromptPart,
    TextPart,
    TextPartDelta,
    ThinkingPart,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RequestUsage

from tapetui import ModelDrift, TapeError, ToolDriftError, use_tape
from tapetui.core.config import load_config
from tapetui.core.turns import turn_key
from tapetui.integrations.pydantic_ai import TapeCapability, TapedModel, taped
from tapetui.review.findings import check

NAME = "offline-1"
MODEL = f"function:{NAME}"  # f"{model.system}:{model.model_name}" of FunctionModel(..., model_name=NAME)
INSTRUCTIONS = "You add numbers and report the weather."
SYSTEM = "You are a careful assistant."
QUESTION = "What is 1 + 2, and how warm is Paris?"
ANSWER = "1 + 2 = 3, and Paris is at 14.5 degrees: a mild day for a walk along the river."
SETTINGS = ModelSettings(temperature=0.0, max_tokens=400)


# ---- offline models -------------------------------------------------------------------------------------------


def step(messages: list[ModelMessage]) -> int:
    return sum(isinstance(m, ModelResponse) for m in messages)


def tool_results(messages: list[ModelMessage]) -> list[Any]:
    return [
        p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
    ]


def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Turn 1: add; turn 2: weather (its arguments as JSON text); turn 3: the answer, once both results came."""
    k = step(messages)
    usage = RequestUsage(input_tokens=100 * (k + 1), output_tokens=20)
    if k == 0:
        return ModelResponse(parts=[ToolCallPart("add", {"a": 1, "b": 2})], usage=usage)
    if k == 1:
        return ModelResponse(parts=[ToolCallPart("weather", '{"city": "Paris"}')], usage=usage)
    assert tool_results(messages) == [3, 14.5]  # the tools' results reached the model, recorded or replayed
    return ModelResponse(parts=[TextPart(ANSWER)], usage=usage, finish_reason="stop")


async def respond_streamed(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    """The same script as a stream: argument text and the answer in chunks of 9 characters."""
    k = step(messages)
    if k == 0:
        yield {0: DeltaToolCall("add", '{"a": 1,')}
        yield {0: DeltaToolCall(None, ' "b": 2}')}
    elif k == 1:
        yield {0: DeltaToolCall("weather", '{"city": "Paris"}')}
    else:
        assert tool_results(messages) == [3, 14.5]
        for i in range(0, len(ANSWER), 9):
            yield ANSWER[i : i + 9]


def offline() -> FunctionModel:
    return FunctionModel(respond, stream_function=respond_streamed, model_name=NAME)


def explode(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise AssertionError("the model was called in replay")


async def explode_streamed(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
    raise AssertionError("the model was called in replay")
    yield  # pragma: no cover - an async generator


def exploding() -> FunctionModel:
    """The model of a replay: any call is a failure of the test."""
    return FunctionModel(explode, stream_function=explode_streamed, model_name=NAME)


# ---- the agent --------------------------------------------------------------------------------------------------


def make_toolset(
    runs: Counter[str],
    forecast_doc: str = "Tomorrow's weather of a city.",
    celsius: float = 14.5,
    strict: bool | None = None,
) -> FunctionToolset[None]:
    """``add`` and ``weather``, which the script calls, and ``forecast``, which it never calls."""

    def add(a: int, b: int) -> int:
        """Add two numbers."""
        runs["add"] += 1
        return a + b

    def weather(city: str) -> float:
        """Current temperature of a city, in degrees Celsius."""
        runs["weather"] += 1
        return celsius

    def forecast(city: str) -> str:
        runs["forecast"] += 1
        return "rain"

    toolset: FunctionToolset[None] = FunctionToolset()
    toolset.add_function(add)
    toolset.add_function(weather)
    toolset.add_function(forecast, description=forecast_doc, strict=strict)
    return toolset


def agent(model: FunctionModel, runs: Counter[str], instructions: str = INSTRUCTIONS, **kw: Any) -> Agent[None, str]:
    return Agent(
        TapedModel(model),
        instructions=instructions,
        system_prompt=SYSTEM,
        toolsets=[taped(make_toolset(runs, **kw))],
        model_settings=SETTINGS,
    )


def run(a: Agent[None, str]) -> Any:
    return asyncio.run(a.run(QUESTION))


async def streamed(a: Agent[None, str]) -> tuple[str, list[str]]:
    """The answer of a streamed run, and the text deltas it streamed."""
    async with a.run_stream(QUESTION) as result:
        chunks = [c async for c in result.stream_text(delta=True, debounce_by=None)]
    return "".join(chunks), chunks


def lines(path: Path, kind: str = "model") -> list[dict[str, Any]]:
    return [line for line in map(json.loads, path.read_text().splitlines()) if line["type"] == kind]


def record(path: Path, model: FunctionModel | None = None) -> Any:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="record") as tape:
        result = run(agent(model or offline(), runs))
        assert tape.stats()["live_model_calls"] == 3
    assert runs == {"add": 1, "weather": 1}
    return result


def replay(path: Path, **kw: Any) -> tuple[Any, dict[str, Any]]:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay") as tape:
        result = run(agent(exploding(), runs, **kw))
        stats = tape.stats()
    assert runs == {}, "a tool ran in replay"
    return result, stats


def responses(result: Any) -> list[ModelResponse]:
    return [m for m in result.all_messages() if isinstance(m, ModelResponse)]


# ---- tests --------------------------------------------------------------------------------------------------------


def test_a_three_turn_agent_replays_with_no_model_call_no_tool_run_and_its_usage(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    recorded = record(path)
    assert recorded.output == ANSWER

    turns = lines(path)
    assert [(t["seq"], t["model"], t["source"], t["stream"]) for t in turns] == [
        (1, MODEL, "pydantic-ai", False),
        (3, MODEL, "pydantic-ai", False),
        (5, MODEL, "pydantic-ai", False),
    ]
    assert [t["usage"] for t in turns] == [
        {"input": 100, "output": 20},
        {"input": 200, "output": 20},
        {"input": 300, "output": 20},
    ]
    assert [t["response"]["finish_reason"] for t in turns] == [None, None, "stop"]
    assert {t["name"] for t in lines(path, "tool")} == {"add", "weather", "forecast"}  # every offered tool

    replayed, stats = replay(path)
    assert replayed.output == ANSWER
    assert stats["live_model_calls"] == 0 and stats["live_tool_calls"] == 0
    assert stats["model_hits"] == 3 and stats["tape_hits"] == 2
    assert stats["tokens_saved"] == 660 > 0
    assert replayed.usage == recorded.usage  # the run's usage, as if live
    before, after = responses(recorded), responses(replayed)
    assert [r.parts for r in after] == [r.parts for r in before]  # the model's own tool-call ids too
    assert [(r.usage, r.model_name, r.timestamp) for r in after] == [
        (r.usage, r.model_name, r.timestamp) for r in before
    ]


def test_the_request_on_the_tape_is_the_neutral_one(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    request = lines(path)[2]["request"]
    assert request["instructions"] == INSTRUCTIONS
    assert request["tools"] == ["add", "weather", "forecast"]
    assert request["settings"] == {"temperature": 0.0, "max_tokens": 400}
    assert request["messages"] == [
        {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_1", "name": "add", "arguments": {"a": 1, "b": 2}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "name": "add", "response": 3}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_2", "name": "weather", "arguments": {"city": "Paris"}}],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_2", "name": "weather", "response": 14.5}],
        },
    ]
    tool = next(t for t in lines(path, "tool") if t["name"] == "add")
    assert tool["description"] == "Add two numbers." and tool["output_schema"] == {"type": "integer"}
    # the response keeps the model's own id and the text it wrote, so replay gives back the same ModelResponse
    call = lines(path)[1]["response"]["parts"][0]
    assert call["id"].startswith("pyd_ai_") and call["arguments_text"] == '{"city": "Paris"}'


def test_two_recordings_give_the_same_keys(tmp_path: Path) -> None:
    """pydantic-ai makes new tool-call ids (``pyd_ai_…``), timestamps and run ids at each run: none reaches a
    request."""
    first, second = record(tmp_path / "a.jsonl"), record(tmp_path / "b.jsonl")
    ids = [
        [p.tool_call_id for r in responses(x) for p in r.parts if isinstance(p, ToolCallPart)] for x in (first, second)
    ]
    assert ids[0] != ids[1] and all(i.startswith("pyd_ai_") for i in ids[0] + ids[1])
    assert first.run_id != second.run_id
    keys = [[t["key"] for t in lines(tmp_path / name)] for name in ("a.jsonl", "b.jsonl")]
    assert keys[0] == keys[1] and len(set(keys[0])) == 3
    requests = json.dumps([t["request"] for t in lines(tmp_path / "a.jsonl")])
    assert "pyd_ai_" not in requests and first.run_id not in requests and "timestamp" not in requests


def test_the_key_of_a_one_turn_run_is_the_key_of_its_neutral_request(tmp_path: Path) -> None:
    """What a hand-built neutral request gives through the core is what this pydantic-ai records for the run."""
    path = tmp_path / "one.jsonl"

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("Hello.")], usage=RequestUsage(input_tokens=10, output_tokens=2))

    with use_tape(path, mode="record"):
        a = Agent(
            TapedModel(FunctionModel(answer, model_name=NAME)),
            instructions=INSTRUCTIONS,
            system_prompt=SYSTEM,
            toolsets=[taped(make_toolset(Counter()))],
            model_settings=SETTINGS,
        )
        assert asyncio.run(a.run("Say hello.")).output == "Hello."

    def tool(name: str, description: str, parameters: dict[str, Any], returns: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "description": description, "parameters": parameters, "output_schema": returns}

    def params(**props: str) -> dict[str, Any]:
        properties = {k: {"type": v} for k, v in props.items()}
        return {"additionalProperties": False, "properties": properties, "required": list(props), "type": "object"}

    neutral = {
        "instructions": INSTRUCTIONS,
        "messages": [
            {"role": "system", "parts": [{"type": "text", "content": SYSTEM}]},
            {"role": "user", "parts": [{"type": "text", "content": "Say hello."}]},
        ],
        "tools": [
            tool("add", "Add two numbers.", params(a="integer", b="integer"), {"type": "integer"}),
            tool(
                "weather",
                "Current temperature of a city, in degrees Celsius.",
                params(city="string"),
                {"type": "number"},
            ),
            tool("forecast", "Tomorrow's weather of a city.", params(city="string"), {"type": "string"}),
        ],
        "output_schema": None,
        "settings": {"temperature": 0.0, "max_tokens": 400},
    }
    (turn,) = lines(path)
    assert turn["model"] == MODEL
    assert turn["key"] == turn_key(MODEL, neutral)


def test_an_edited_system_prompt_is_a_model_drift_naming_the_instructions(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    with pytest.raises(ModelDrift) as caught:
        replay(path, instructions=INSTRUCTIONS + " Always answer in French.")
    assert caught.value.turn == 1
    assert "instructions" in str(caught.value) and "Always answer in French." in str(caught.value)


def test_an_edited_description_of_a_tool_the_model_never_calls_is_a_tool_drift(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    with pytest.raises(ToolDriftError) as caught:
        replay(path, forecast_doc="Tomorrow's weather of a city, hour by hour.")
    assert caught.value.tool == "forecast"
    assert "description" in str(caught.value)


@pytest.mark.parametrize(("recorded", "now"), [(None, True), (True, False)])
def test_a_tool_switched_to_or_from_strict_schemas_is_a_tool_drift(
    tmp_path: Path, recorded: bool | None, now: bool
) -> None:
    """The model is sent a tool's ``strict`` mode: another one is another contract, never a silent hit."""
    path = tmp_path / "agent.jsonl"
    runs: Counter[str] = Counter()
    with use_tape(path, mode="record"):
        run(agent(offline(), runs, strict=recorded))
    with pytest.raises(ToolDriftError) as caught:
        replay(path, strict=now)
    assert caught.value.tool == "forecast" and "strict" in str(caught.value)
    replay(path, strict=recorded)  # the same mode: every turn and call a hit


def test_a_streamed_run_replays_as_a_stream_of_the_same_text(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with use_tape(path, mode="record") as tape:
        answer, live = asyncio.run(streamed(agent(offline(), Counter())))
        assert tape.stats()["live_model_calls"] == 3
    assert answer == ANSWER and len(live) > 5

    turns = lines(path)
    assert all(t["stream"] for t in turns)
    last = turns[2]
    assert [e["content"] for e in last["events"] if e["type"] == "delta"] == live  # the chunks as they came
    assert last["events"][:2] == [{"type": "start"}, {"type": "part", "index": 0, "part": {"type": "text"}}]
    assert last["events"][-1] == {"type": "end"}
    args = [e["arguments"] for e in turns[0]["events"] if e["type"] == "delta"]
    assert args == ['{"a": 1,', ' "b": 2}']

    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay") as tape:
        again, chunks = asyncio.run(streamed(agent(exploding(), runs)))
        stats = tape.stats()
    assert again == ANSWER and chunks == live and runs == {}
    assert stats["live_model_calls"] == 0 and stats["model_hits"] == 3 and stats["tokens_saved"] > 0


async def model_events(a: Agent[None, str]) -> list[tuple[str, int, str]]:
    """The model's stream events as ``agent.iter`` gives them: (kind, part index, text or argument text)."""
    seen: list[tuple[str, int, str]] = []
    async with a.iter(QUESTION) as run:
        async for node in run:
            if Agent.is_model_request_node(node):
                async with node.stream(run.ctx) as stream:
                    async for event in stream:
                        if isinstance(event, PartStartEvent):
                            part = event.part
                            text = (
                                part.args_as_json_str()
                                if isinstance(part, ToolCallPart)
                                else getattr(part, "content", "")
                            )
                            seen.append((part.part_kind, event.index, text))
                        elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                            seen.append(("text-delta", event.index, event.delta.content_delta))
                        elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, ToolCallPartDelta):
                            seen.append(("args-delta", event.index, str(event.delta.args_delta)))
    return seen


def test_agent_iter_sees_the_recorded_events_in_their_order(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with use_tape(path, mode="record"):
        live = asyncio.run(model_events(agent(offline(), Counter())))
    assert ("args-delta", 0, ' "b": 2}') in live and ("text-delta", 0, ANSWER[9:18]) in live
    with use_tape(path, mode="replay"):
        assert asyncio.run(model_events(agent(exploding(), Counter()))) == live


def test_a_plain_recording_serves_a_stream_and_a_stream_serves_a_plain_run(tmp_path: Path) -> None:
    plain, stream = tmp_path / "plain.jsonl", tmp_path / "stream.jsonl"
    recorded = record(plain)
    with use_tape(stream, mode="record"):
        asyncio.run(streamed(agent(offline(), Counter())))

    with use_tape(plain, mode="replay") as tape:
        answer, chunks = asyncio.run(streamed(agent(exploding(), Counter())))
        assert tape.stats()["model_hits"] == 3 and tape.stats()["live_model_calls"] == 0
    assert answer == ANSWER and chunks == [ANSWER]  # rebuilt: one delta per text

    with use_tape(stream, mode="replay") as tape:
        result = run(agent(exploding(), Counter()))
        assert tape.stats()["model_hits"] == 3 and tape.stats()["live_model_calls"] == 0
    assert result.output == ANSWER
    assert [p.tool_name for r in responses(result) for p in r.parts if isinstance(p, ToolCallPart)] == [
        "add",
        "weather",
    ]
    first = responses(recorded)[0].parts[0]
    assert isinstance(first, ToolCallPart) and first.args == {"a": 1, "b": 2}


def test_the_capability_puts_the_model_through_the_tape_too(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"

    def go(model: FunctionModel, runs: Counter[str], models: bool = True) -> str:
        a = Agent(
            model,
            instructions=INSTRUCTIONS,
            toolsets=[make_toolset(runs)],
            capabilities=[TapeCapability(models=models)],
        )
        return str(run(a).output)

    with use_tape(path, mode="record"):
        assert go(offline(), Counter()) == ANSWER
    assert [(t["model"], t["source"]) for t in lines(path)] == [(MODEL, "pydantic-ai")] * 3
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay") as tape:
        assert go(exploding(), runs) == ANSWER
        assert tape.stats()["model_hits"] == 3 and tape.stats()["live_model_calls"] == 0
    assert runs == {}

    with use_tape(tmp_path / "tools.jsonl", mode="record"):  # TapeCapability(): the tools only, as before
        assert go(offline(), Counter(), models=False) == ANSWER
    assert lines(tmp_path / "tools.jsonl") == [] and len(lines(tmp_path / "tools.jsonl", "call")) == 2


def test_a_tapedmodel_inside_the_capability_records_each_turn_once(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with use_tape(path, mode="record"):
        a = Agent(TapedModel(offline()), toolsets=[make_toolset(Counter())], capabilities=[TapeCapability(models=True)])
        assert run(a).output == ANSWER
    assert len(lines(path)) == 3


def test_the_name_on_the_tape_is_system_and_model_name() -> None:
    assert TapedModel(offline()).tape_name == MODEL
    assert TapedModel(TestModel()).tape_name == "test:test"


def test_a_response_edited_by_hand_that_cannot_rebuild_is_a_tape_error(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    edited = []
    for text in path.read_text().splitlines():
        line = json.loads(text)
        if line["type"] == "model" and line["seq"] == 5:
            line["response"]["parts"][0]["content"] = 42
        edited.append(json.dumps(line))
    path.write_text("\n".join(edited) + "\n")
    with pytest.raises(TapeError) as caught:
        replay(path)
    message = str(caught.value)
    assert str(path) in message and "step 5" in message and "parts[0].content" in message


def test_a_stream_edited_by_hand_that_cannot_rebuild_is_a_tape_error(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with use_tape(path, mode="record"):
        asyncio.run(streamed(agent(offline(), Counter())))
    edited = []
    for text in path.read_text().splitlines():
        line = json.loads(text)
        if line["type"] == "model" and line["seq"] == 5:
            delta = [n for n, e in enumerate(line["events"]) if e["type"] == "delta"][2]
            line["events"][delta]["content"] = ["not", "text"]
        edited.append(json.dumps(line))
    path.write_text("\n".join(edited) + "\n")
    with use_tape(path, mode="replay"), pytest.raises(TapeError) as caught:
        asyncio.run(streamed(agent(exploding(), Counter())))
    message = str(caught.value)
    assert str(path) in message and "step 5" in message and f"events[{delta}].content" in message


def test_a_model_that_raised_raises_again_in_replay(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"

    def overloaded(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise ConnectionError("the model is overloaded")

    with use_tape(path, mode="record"), pytest.raises(ConnectionError):
        run(agent(FunctionModel(overloaded, model_name=NAME), Counter()))
    assert lines(path)[0]["error"]["type"] == "ConnectionError"
    with use_tape(path, mode="replay") as tape, pytest.raises(ConnectionError, match="overloaded"):
        run(agent(exploding(), Counter()))
    assert tape.stats()["live_model_calls"] == 0


def rich_response() -> ModelResponse:
    """Text with an item id and provider details, reasoning with its item id, a tool call whose arguments are
    text that is not compact, a provider's own tool call; usage with cache reads and reasoning tokens; the
    provider's response id, name and finish reason."""
    return ModelResponse(
        parts=[
            TextPart("See the docs.", id="msg_1", provider_details={"annotations": [1]}),
            ThinkingPart("Thinking.", id="rs_1", provider_name="openai"),
            ToolCallPart("add", '{"a": 1,  "b": 2}', tool_call_id="call_1"),
            NativeToolCallPart("web_search", {"query": "q"}, tool_call_id="ws_1", provider_name="openai"),
        ],
        usage=RequestUsage(input_tokens=1000, output_tokens=50, cache_read_tokens=800, output_reasoning_tokens=30),
        model_name="gpt-test-2026",
        provider_name="openai",
        provider_response_id="resp_9",
        provider_details={"service_tier": "default"},
        finish_reason="tool_call",
    )


def test_every_kind_of_part_rebuilds_as_it_was(tmp_path: Path) -> None:
    given = rich_response()
    path = tmp_path / "one.jsonl"
    messages: list[ModelMessage] = [ModelRequest(parts=[SystemPromptPart("Be brief."), UserPromptPart("hello")])]
    tools = [
        ToolDefinition(name="add", parameters_json_schema={"type": "object", "properties": {}}, description="Add.")
    ]
    params = ModelRequestParameters(function_tools=tools)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return given

    with use_tape(path, mode="record"):
        assert asyncio.run(TapedModel(FunctionModel(answer, model_name="gpt")).request(messages, None, params)) is given
    (turn,) = lines(path)
    assert [p["type"] for p in turn["response"]["parts"]] == ["text", "reasoning", "tool_call", "builtin-tool-call"]
    assert turn["usage"] == {"input": 1000, "output": 50, "cache_read": 800}
    assert turn["response"]["finish_reason"] == "tool_calls" and turn["response"]["id"] == "resp_9"
    assert turn["response"]["usage_details"] == {"output_reasoning_tokens": 30}

    with use_tape(path, mode="replay"):
        back = asyncio.run(TapedModel(FunctionModel(explode, model_name="gpt")).request(messages, None, params))
    assert back == given  # every field: parts, usage, ids, details, timestamp
    call = back.parts[2]
    assert isinstance(call, ToolCallPart) and call.args == '{"a": 1,  "b": 2}'  # as the model wrote it


def test_the_sample_sessions_turns_are_what_pydantic_ai_records_for_the_same_run(tmp_path: Path) -> None:
    """sample_tapes/research_prompt.jsonl is built through the core with pinned neutral requests (the samples need
    no framework, sample_agent.research_agent); the same agent run through pydantic-ai's adapter records the same
    turns: the same keys."""
    from pydantic_ai import Tool
    from pydantic_ai.messages import ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from tapetui import Tape
    from tapetui import sample_agent as sa
    from tapetui.integrations.pydantic_ai import TapeCapability

    then = sa.SESSIONS["research_prompt"][0]
    assert then.model_prompt is not None

    def decide(messages: list[ModelMessage], info: Any) -> ModelResponse:  # research_model's choices
        returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("search_index", {"query": "tool contracts", "top_k": 3})])
        if len(returns) == 1:
            return ModelResponse(parts=[ToolCallPart("fetch_doc", {"doc_id": returns[0].content[0]["doc_id"]})])
        doc = returns[1].content
        return ModelResponse(parts=[TextPart(f"{doc['title']}: " + " ".join(doc["text"].split()[:16]))])

    tools = [
        Tool.from_schema(
            getattr(sa, n), name=n, description=sa.registry[n].description, json_schema=sa.registry[n].schema
        )
        for n in ("search_index", "fetch_doc")
    ]
    agent = Agent(
        FunctionModel(decide, model_name="research_model"),
        instructions=then.model_prompt,
        tools=tools,
        model_settings=ModelSettings(temperature=0.0),
        capabilities=[TapeCapability(models=True)],
    )
    tape = tmp_path / "research_prompt.jsonl"
    with Tape(tape, "record") as t, use_tape(t):
        asyncio.run(agent.run(f"What do the docs say about {then.topic}?"))
    sample = tmp_path / "sample.jsonl"  # the sample session as regenerate writes it
    with Tape(sample, "record", sa.build_registry(), run_log=False) as t:
        sa.research_agent(t, then)

    def turns(path: Path) -> list[tuple[str, str]]:
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        return [(x["model"], x["key"]) for x in lines if x["type"] == "model"]

    assert turns(tape) == turns(sample)


def _check(root: Path) -> Any:
    config = load_config(root / "tapes.toml")
    return check(config.tapes_dir, config)[0]


def test_a_model_that_now_asks_for_another_tool_is_model_tools_in_check(tmp_path: Path) -> None:
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    path = tmp_path / "tapes" / "agent.jsonl"
    record(path)

    def forecaster(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if step(messages) == 1:  # asks for the forecast instead of the weather
            return ModelResponse(parts=[ToolCallPart("forecast", {"city": "Paris"})])
        if step(messages) == 2:
            return ModelResponse(parts=[TextPart("rain")])
        return respond(messages, info)

    with use_tape(path, mode="record"):  # a golden exists: a candidate
        run(agent(FunctionModel(forecaster, model_name=NAME), Counter()))
    texts = [f.text for f in _check(tmp_path).findings]
    want = "[MODEL TOOLS] model-requested sequence changed (edit distance 1): ['add', 'weather'] → ['add', 'forecast']"
    assert want in texts, texts


def test_a_cut_point_run_with_one_tool_live_reports_its_changed_result_by_path(tmp_path: Path) -> None:
    from tapetui import Tape

    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare]\nmodel_turns = "by_place"\n')
    path = tmp_path / "tapes" / "agent.jsonl"
    record(path)
    runs: Counter[str] = Counter()
    toolset = make_toolset(runs, celsius=16.0)  # the tool's code changed: the same contract, another sensor
    a = Agent(
        TapedModel(exploding()),
        instructions=INSTRUCTIONS,
        system_prompt=SYSTEM,
        toolsets=[taped(toolset)],
        model_settings=SETTINGS,
    )
    with Tape(path, "replay", live=["weather"]) as t, use_tape(t):
        result = run(a)
    assert result.output == ANSWER and runs == {"weather": 1}  # the model's answer served, over the new result
    texts = [f.text for f in _check(tmp_path).findings]
    assert "behaviour drift: weather result 14.5 → 16.0 (step 4)" in texts, texts
    assert any("served over a changed input" in x for x in texts), texts
