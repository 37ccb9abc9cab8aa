"""The OpenAI Agents SDK's model turns: an agent's model requests recorded through ``TapedModel`` and replayed
with no model call, no tool run and no token spent (offline models written here; no network)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")  # a guard only: the README's test command installs it ([test] extra)

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelBehaviorError,
    ModelProvider,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    Runner,
    Usage,
    function_tool,
)
from agents.items import TResponseStreamEvent
from agents.testing import assistant_message, function_call
from openai.types.responses import (
    Response,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
    ResponseUsage,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import TypeAdapter

from tapetui import ModelDrift, Tape, TapeError, ToolDriftError, use_tape
from tapetui.core.config import load_config
from tapetui.integrations.openai_agents import TapedModel, TapedModelProvider, taped
from tapetui.review.findings import check

NO_TRACING = RunConfig(tracing_disabled=True)
NAME = "offline-1"
INSTRUCTIONS = "You add numbers and report the weather."
ANSWER = "1 + 2 = 3, and Paris is at 14.5 degrees: a mild day for a walk along the river."
EVENTS: TypeAdapter[Any] = TypeAdapter(TResponseStreamEvent)


# ---- offline models -------------------------------------------------------------------------------------------


def turn_1(input: Any) -> list[Any]:
    return [function_call("add", {"a": 1, "b": 2}, call_id="call_add")]


def turn_2(input: Any) -> list[Any]:
    return [function_call("weather", {"city": "Paris"}, call_id="call_weather")]


def turn_3(input: Any) -> list[Any]:
    outputs = [i["output"] for i in input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    assert outputs[-1:] == ["14.5"], outputs  # the tool's result reached the model, recorded or replayed
    return [assistant_message(ANSWER)]


SCRIPT = (turn_1, turn_2, turn_3)


class Offline(Model):
    """A model answering from a script (one function of the input per turn), with usage; ``fresh`` makes new
    response and item ids at each call, as a live provider does. The runner gives it a generated
    ``prompt_cache_key`` per run (``_supports_default_prompt_cache_key``), as it does OpenAI's models."""

    model = NAME

    def __init__(self, script: tuple[Callable[[Any], list[Any]], ...] = SCRIPT, fresh: bool = False) -> None:
        self.script = script
        self.fresh = fresh
        self.calls = 0
        self.requests: list[dict[str, Any]] = []

    def _supports_default_prompt_cache_key(self) -> bool:
        return True

    def _respond(self, input: Any, **request: Any) -> ModelResponse:
        self.requests.append(request)
        step = self.script[self.calls]
        self.calls += 1
        output = step(input)
        if self.fresh:
            output = [o.model_copy(update={"id": f"item_{uuid.uuid4().hex}"}) for o in output]
        tokens = 100 * self.calls
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=tokens, output_tokens=20, total_tokens=tokens + 20),
            response_id=f"resp_{uuid.uuid4().hex}" if self.fresh else f"resp_{self.calls}",
        )

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        return self._respond(input, instructions=system_instructions, settings=args[0], **kwargs)

    async def stream_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        for event in stream_of(self._respond(input, instructions=system_instructions, settings=args[0], **kwargs)):
            yield event


class Exploding(Model):
    """The model of a replay: any call is a failure of the test."""

    model = NAME

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        raise AssertionError("the model was called in replay")

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise AssertionError("the model was called in replay")


def stream_of(response: ModelResponse, size: int = 9) -> list[Any]:
    """A Responses API stream of ``response``: each text and argument text in chunks of ``size`` characters."""
    u = response.usage
    final = Response(
        id=response.response_id or "resp",
        created_at=0,
        model=NAME + "-2026",
        object="response",
        output=response.output,
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
        status="completed",
        usage=ResponseUsage(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            total_tokens=u.total_tokens,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        ),
    )
    started = final.model_copy(update={"output": [], "status": "in_progress", "usage": None})
    events: list[dict[str, Any]] = [{"type": "response.created", "response": started}]
    for oi, item in enumerate(response.output):
        d = item.model_dump()
        at = {"item_id": d["id"], "output_index": oi}
        if isinstance(item, ResponseOutputMessage):
            events.append({"type": "response.output_item.added", "output_index": oi, "item": {**d, "content": []}})
            text = d["content"][0]["text"]
            empty = {"type": "output_text", "text": "", "annotations": []}
            events.append({"type": "response.content_part.added", **at, "content_index": 0, "part": empty})
            for k in range(0, len(text), size):
                delta = {"type": "response.output_text.delta", **at, "content_index": 0, "logprobs": []}
                events.append({**delta, "delta": text[k : k + size]})
            events.append({"type": "response.output_text.done", **at, "content_index": 0, "text": text, "logprobs": []})
            events.append({"type": "response.content_part.done", **at, "content_index": 0, "part": d["content"][0]})
        else:
            events.append({"type": "response.output_item.added", "output_index": oi, "item": {**d, "arguments": ""}})
            args = d["arguments"]
            for k in range(0, len(args), size):
                events.append({"type": "response.function_call_arguments.delta", **at, "delta": args[k : k + size]})
            events.append({"type": "response.function_call_arguments.done", **at, "arguments": args, "name": d["name"]})
        events.append({"type": "response.output_item.done", "output_index": oi, "item": d})
    events.append({"type": "response.completed", "response": final})
    return [EVENTS.validate_python({**e, "sequence_number": n}) for n, e in enumerate(events)]


# ---- the agent --------------------------------------------------------------------------------------------------


def make_tools(
    runs: Counter[str], forecast_doc: str = "Tomorrow's weather of a city.", celsius: float = 14.5
) -> list[FunctionTool]:
    """``add`` and ``weather``, which the script calls, and ``forecast``, which it never calls."""

    @function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        runs["add"] += 1
        return a + b

    @function_tool
    def weather(city: str) -> float:
        """Current temperature of a city, in degrees Celsius."""
        runs["weather"] += 1
        return celsius

    @function_tool(description_override=forecast_doc)
    def forecast(city: str) -> str:
        runs["forecast"] += 1
        return "rain"

    return [add, weather, forecast]


def agent(model: Model, runs: Counter[str], instructions: str = INSTRUCTIONS, **kw: Any) -> Agent[Any]:
    return Agent(
        name="helper",
        instructions=instructions,
        model=TapedModel(model),
        tools=taped(make_tools(runs, **kw)),
        model_settings=ModelSettings(temperature=0.0, max_tokens=400),
    )


def run(a: Agent[Any], stream: bool = False, **kw: Any) -> tuple[Any, list[Any]]:
    """The agent's answer, and the raw stream events a streamed run gave."""
    if not stream:
        result = asyncio.run(Runner.run(a, "What is 1 + 2, and how warm is Paris?", run_config=NO_TRACING, **kw))
        return result, []

    async def go() -> tuple[Any, list[Any]]:
        result = Runner.run_streamed(a, "What is 1 + 2, and how warm is Paris?", run_config=NO_TRACING, **kw)
        raw = [e.data async for e in result.stream_events() if e.type == "raw_response_event"]
        return result, raw

    return asyncio.run(go())


def lines(path: Path, kind: str = "model") -> list[dict[str, Any]]:
    return [line for line in map(json.loads, path.read_text().splitlines()) if line["type"] == kind]


def record(path: Path, stream: bool = False, model: Offline | None = None, **kw: Any) -> tuple[Any, list[Any]]:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="record") as tape:
        result, raw = run(agent(model or Offline(), runs), stream, **kw)
        assert tape.stats()["live_model_calls"] == 3
    assert runs == {"add": 1, "weather": 1}
    return result, raw


def replay(path: Path, stream: bool = False, **kw: Any) -> tuple[Any, list[Any], dict[str, Any]]:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay") as tape:
        result, raw = run(agent(Exploding(), runs, **kw), stream)
        stats = tape.stats()
    assert runs == {}, "a tool ran in replay"
    return result, raw, stats


def deltas(raw: list[Any]) -> list[str]:
    return [e.delta for e in raw if e.type == "response.output_text.delta"]


# ---- tests --------------------------------------------------------------------------------------------------------


def test_a_three_turn_agent_replays_with_no_model_call_no_tool_run_and_its_usage(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    recorded, _ = record(path)
    assert recorded.final_output == ANSWER

    turns = lines(path)
    assert [(t["seq"], t["model"], t["source"], t["stream"]) for t in turns] == [
        (1, NAME, "openai-agents", False),
        (3, NAME, "openai-agents", False),
        (5, NAME, "openai-agents", False),
    ]
    assert [t["usage"] for t in turns] == [
        {"input": 100, "output": 20},
        {"input": 200, "output": 20},
        {"input": 300, "output": 20},
    ]
    assert [t["response"]["finish_reason"] for t in turns] == ["tool_calls", "tool_calls", "stop"]
    assert [t["response"]["id"] for t in turns] == ["resp_1", "resp_2", "resp_3"]  # the provider's ids stay
    assert {t["name"] for t in lines(path, "tool")} == {"add", "weather", "forecast"}  # every offered tool

    replayed, _, stats = replay(path)
    assert replayed.final_output == ANSWER
    assert stats["live_model_calls"] == 0 and stats["live_tool_calls"] == 0
    assert stats["model_hits"] == 3 and stats["tape_hits"] == 2
    assert stats["tokens_saved"] == 660 > 0
    assert replayed.context_wrapper.usage == recorded.context_wrapper.usage  # the run's usage, as if live
    assert [r.usage for r in replayed.raw_responses] == [r.usage for r in recorded.raw_responses]
    assert [r.response_id for r in replayed.raw_responses] == ["resp_1", "resp_2", "resp_3"]


def test_the_request_on_the_tape_is_the_neutral_one(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    request = lines(path)[2]["request"]
    assert request["instructions"] == INSTRUCTIONS
    assert request["tools"] == ["add", "weather", "forecast"]
    assert request["settings"] == {"temperature": 0.0, "max_tokens": 400}  # the generated prompt_cache_key left out
    assert request["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": "What is 1 + 2, and how warm is Paris?"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_add", "name": "add", "arguments": {"a": 1, "b": 2}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_add", "name": "add", "response": "3"}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_weather", "name": "weather", "arguments": {"city": "Paris"}}],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_weather", "name": "weather", "response": "14.5"}],
        },
    ]
    tool = next(t for t in lines(path, "tool") if t["name"] == "forecast")
    assert tool["description"] == "Tomorrow's weather of a city." and tool["annotations"] == {"strict": True}


def test_two_recordings_give_the_same_keys(tmp_path: Path) -> None:
    """New response ids, item ids and a new generated prompt cache key at each run, a conversation continued
    from another previous response: none reaches a request."""
    first, second = Offline(fresh=True), Offline(fresh=True)
    record(tmp_path / "a.jsonl", model=first, previous_response_id="resp_earlier_1")
    record(tmp_path / "b.jsonl", model=second, previous_response_id="resp_earlier_2")
    assert first.requests[0]["previous_response_id"] == "resp_earlier_1"
    keys = [[t["key"] for t in lines(tmp_path / name)] for name in ("a.jsonl", "b.jsonl")]
    assert keys[0] == keys[1] and len(set(keys[0])) == 3
    generated = [r["settings"].extra_args["prompt_cache_key"] for r in (first.requests[0], second.requests[0])]
    assert generated[0] != generated[1] and all(k.startswith("agents-sdk:") for k in generated)
    assert "agents-sdk:" not in (tmp_path / "a.jsonl").read_text()
    requests = json.dumps([t["request"] for t in lines(tmp_path / "a.jsonl")])
    assert "item_" not in requests and "resp_" not in requests  # the responses' ids, sent back: not keyed


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


def test_a_streamed_run_replays_as_a_stream_of_the_same_text(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    recorded, live = record(path, stream=True)
    assert recorded.final_output == ANSWER
    assert len(deltas(live)) > 5 and "".join(deltas(live)) == ANSWER

    turns = lines(path)
    assert all(t["stream"] for t in turns)
    last = turns[2]
    assert last["response"]["model_name"] == NAME + "-2026"  # as the provider's Response named it
    assert [e["content"] for e in last["events"] if e["type"] == "delta"] == deltas(live)
    assert last["events"][0]["type"] == "start" and last["events"][-1]["type"] == "end"
    assert last["events"][1] == {
        "type": "part",
        "index": 0,
        "part": {"type": "text", "output_index": 0},
        "sdk": last["events"][1]["sdk"],
        "sdk_before": last["events"][1]["sdk_before"],
    }
    assert json.dumps(last).count("mild day") == 1  # the text is on the tape once: its deltas

    replayed, again, stats = replay(path, stream=True)
    assert replayed.final_output == ANSWER
    assert deltas(again) == deltas(live)
    assert [type(e) for e in again] == [type(e) for e in live]
    assert [e.model_dump() for e in again] == [e.model_dump() for e in live]  # the recorded events, as they came
    assert stats["live_model_calls"] == 0 and stats["tokens_saved"] == 660
    assert recorded.context_wrapper.usage == replayed.context_wrapper.usage


def test_a_plain_recording_serves_a_stream_and_a_stream_serves_a_plain_run(tmp_path: Path) -> None:
    plain, streamed = tmp_path / "plain.jsonl", tmp_path / "streamed.jsonl"
    record(plain)
    record(streamed, stream=True)

    result, raw, stats = replay(plain, stream=True)
    assert result.final_output == ANSWER and deltas(raw) == [ANSWER]  # rebuilt: one delta per text
    assert raw[0].type == "response.created" and raw[-1].type == "response.completed"
    assert stats["model_hits"] == 3 and stats["live_model_calls"] == 0

    result, _, stats = replay(streamed)
    assert result.final_output == ANSWER
    assert stats["model_hits"] == 3 and stats["live_model_calls"] == 0
    assert [r.usage.input_tokens for r in result.raw_responses] == [100, 200, 300]


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


def test_a_model_that_raised_raises_again_in_replay(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"

    def overloaded(input: Any) -> list[Any]:
        raise ConnectionError("the model is overloaded")

    with use_tape(path, mode="record"), pytest.raises(ConnectionError):
        run(agent(Offline((overloaded,)), Counter()))
    with use_tape(path, mode="replay") as tape, pytest.raises(ConnectionError, match="overloaded"):
        run(agent(Exploding(), Counter()))
    assert tape.stats()["live_model_calls"] == 0


def test_the_provider_tapes_the_models_it_names(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"

    class Provider(ModelProvider):
        def __init__(self, model: Model) -> None:
            self.model = model
            self.names: list[str | None] = []

        def get_model(self, model_name: str | None) -> Model:
            self.names.append(model_name)
            return self.model

    def go(model: Model) -> Any:
        a = Agent(name="helper", instructions=INSTRUCTIONS, model="my-model", tools=taped(make_tools(Counter())))
        config = RunConfig(tracing_disabled=True, model_provider=TapedModelProvider(Provider(model)))
        return asyncio.run(Runner.run(a, "What is 1 + 2, and how warm is Paris?", run_config=config)).final_output

    with use_tape(path, mode="record"):
        assert go(Offline()) == ANSWER
    assert {t["model"] for t in lines(path)} == {"my-model"}  # the name the agent gave
    with use_tape(path, mode="replay") as tape:
        assert go(Exploding()) == ANSWER
    assert tape.stats()["model_hits"] == 3


def rich_response() -> ModelResponse:
    """Text with annotations, a refusal, reasoning, a function call whose arguments are not compact, a hosted
    tool call; usage with cached and reasoning tokens; the provider's request id."""
    citation = {"type": "url_citation", "url": "https://example.com", "title": "x", "start_index": 0, "end_index": 3}
    message = ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[
            ResponseOutputText(type="output_text", text="See the docs.", annotations=[citation]),
            ResponseOutputRefusal(type="refusal", refusal="I will not do that."),
        ],
    )
    reasoning = ResponseReasoningItem(
        id="rs_1",
        type="reasoning",
        summary=[Summary(type="summary_text", text="Thinking.")],
        encrypted_content="opaque",
    )
    call = function_call("add", '{"a": 1,  "b": 2}', call_id="call_1", item_id="fc_1")
    search = ResponseFunctionWebSearch.model_validate(
        {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search", "query": "q"}}
    )
    usage = Usage(
        requests=1,
        input_tokens=1000,
        output_tokens=50,
        total_tokens=1050,
        input_tokens_details=InputTokensDetails(cached_tokens=800, cache_write_tokens=0),
        output_tokens_details=OutputTokensDetails(reasoning_tokens=30),
    )
    return ModelResponse(
        output=[message, reasoning, call, search], usage=usage, response_id="resp_9", request_id="req_9"
    )


class Given(Model):
    """A model answering ``response``, or streaming ``events``, once."""

    model = "gpt-test"

    def __init__(self, response: ModelResponse | None = None, events: list[Any] | None = None) -> None:
        self.response = response
        self.events = events

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        assert self.response is not None
        return self.response

    async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        assert self.events is not None
        for event in self.events:
            yield event


class Gone(Exploding):
    model = "gpt-test"


ARGS: tuple[Any, ...] = ("Be brief.", "hello", ModelSettings(), [], None, [], ModelTracing.DISABLED)
IDS: dict[str, Any] = {"previous_response_id": "resp_8", "conversation_id": None, "prompt": None}


def ask(model: Model) -> ModelResponse:
    response: ModelResponse = asyncio.run(TapedModel(model).get_response(*ARGS, **IDS))
    return response


def ask_stream(model: Model) -> list[Any]:
    async def go() -> list[Any]:
        return [e async for e in TapedModel(model).stream_response(*ARGS, **IDS)]

    return asyncio.run(go())


def test_every_kind_of_output_item_rebuilds_as_it_was(tmp_path: Path) -> None:
    given = rich_response()
    path = tmp_path / "one.jsonl"
    with use_tape(path, mode="record"):
        assert ask(Given(given)) is given
    turn = lines(path)[0]
    kinds = [p["type"] for p in turn["response"]["parts"]]
    assert kinds == ["text", "refusal", "reasoning", "tool_call", "web_search_call"]
    assert turn["usage"] == {"input": 1000, "output": 50, "cache_read": 800}
    assert "resp_8" not in json.dumps(turn["request"])  # the previous response's id is not the request's

    with use_tape(path, mode="replay"):
        back = ask(Gone())
    assert [o.model_dump() for o in back.output] == [o.model_dump() for o in given.output]
    assert [type(o) for o in back.output] == [type(o) for o in given.output]
    assert back.output[2].arguments == '{"a": 1,  "b": 2}'  # as the model wrote it
    assert back.usage == given.usage
    assert (back.response_id, back.request_id) == ("resp_9", "req_9")


def test_every_kind_of_output_item_streams_and_replays_as_it_was(tmp_path: Path) -> None:
    """A plain recording served as a stream (events made from it); those events recorded as a live stream,
    then replayed as they came."""
    given = rich_response()
    plain, streamed = tmp_path / "plain.jsonl", tmp_path / "streamed.jsonl"
    with use_tape(plain, mode="record"):
        ask(Given(given))
    with use_tape(plain, mode="replay"):
        made = ask_stream(Gone())
    completed = made[-1].response
    assert [o.model_dump() for o in completed.output] == [o.model_dump() for o in given.output]
    assert completed.id == "resp_9" and completed._request_id == "req_9"
    texts = {e.type: getattr(e, "delta", None) for e in made if e.type.endswith(".delta")}
    assert texts == {
        "response.output_text.delta": "See the docs.",
        "response.refusal.delta": "I will not do that.",
        "response.reasoning_summary_text.delta": "Thinking.",
        "response.function_call_arguments.delta": '{"a": 1,  "b": 2}',
    }

    with use_tape(streamed, mode="record"):
        assert ask_stream(Given(events=made)) == made
    events = lines(streamed)[0]["events"]
    assert [e["type"] for e in events if e["type"] != "part"] == ["start", "delta", "delta", "delta", "delta", "end"]
    with use_tape(streamed, mode="replay"):
        again = ask_stream(Gone())
    assert [e.model_dump() for e in again] == [e.model_dump() for e in made]
    assert [type(e) for e in again] == [type(e) for e in made]


def test_a_stream_edited_by_hand_that_cannot_rebuild_is_a_tape_error(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path, stream=True)
    edited = []
    for text in path.read_text().splitlines():
        line = json.loads(text)
        if line["type"] == "model" and line["seq"] == 5:
            delta = next(n for n, e in enumerate(line["events"]) if e["type"] == "delta")
            line["events"][delta]["sdk"]["type"] = "response.output_text.typo"
        edited.append(json.dumps(line))
    path.write_text("\n".join(edited) + "\n")
    with pytest.raises(TapeError) as caught:
        replay(path, stream=True)
    message = str(caught.value)
    assert str(path) in message and "step 5" in message and f"events[{delta}].sdk" in message


def test_a_failed_stream_is_recorded_as_the_error_the_runner_raises(tmp_path: Path) -> None:
    path = tmp_path / "failed.jsonl"
    started = Response(
        id="resp_f",
        created_at=0,
        model="gpt-test",
        object="response",
        output=[],
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
        status="in_progress",
    )
    events = [
        EVENTS.validate_python({"type": "response.created", "response": started, "sequence_number": 0}),
        EVENTS.validate_python(
            {
                "type": "response.failed",
                "response": started.model_copy(update={"status": "failed"}),
                "sequence_number": 1,
            }
        ),
    ]
    with use_tape(path, mode="record"):
        assert ask_stream(Given(events=events)) == events  # passed through; the runner would raise on the last
    turn = lines(path)[0]
    assert turn["error"]["type"] == "ModelBehaviorError" and "response.failed" in turn["error"]["message"]
    with use_tape(path, mode="replay"), pytest.raises(ModelBehaviorError, match="response.failed"):
        ask_stream(Gone())


def _check(root: Path) -> Any:
    config = load_config(root / "tapes.toml")
    return check(config.tapes_dir, config)[0]


def test_a_model_that_now_asks_for_another_tool_is_model_tools_in_check(tmp_path: Path) -> None:
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    path = tmp_path / "tapes" / "agent.jsonl"
    record(path)

    def forecast_instead(input: Any) -> list[Any]:
        return [function_call("forecast", {"city": "Paris"}, call_id="call_forecast")]

    with use_tape(path, mode="record"):  # a golden exists: a candidate
        run(agent(Offline(script=(turn_1, forecast_instead, lambda i: [assistant_message("rain")])), Counter()))
    texts = [f.text for f in _check(tmp_path).findings]
    want = "[MODEL TOOLS] model-requested sequence changed (edit distance 1): ['add', 'weather'] → ['add', 'forecast']"
    assert want in texts, texts


def test_a_cut_point_run_with_one_tool_live_reports_its_changed_result_by_path(tmp_path: Path) -> None:
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare]\nmodel_turns = "by_place"\n')
    path = tmp_path / "tapes" / "agent.jsonl"
    record(path)
    runs: Counter[str] = Counter()
    with Tape(path, "replay", live=["weather"]) as t, use_tape(t):  # the tool's code changed: another sensor
        result, _ = run(agent(Exploding(), runs, celsius=16.0))
    assert result.final_output == ANSWER and runs == {"weather": 1}
    texts = [f.text for f in _check(tmp_path).findings]
    assert any(x.startswith("behaviour drift: weather result") and "16.0" in x for x in texts), texts
    assert any("served over a changed input" in x for x in texts), texts
