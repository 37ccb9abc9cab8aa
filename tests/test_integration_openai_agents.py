"""The OpenAI Agents SDK adapter: agent runs, scripted with the SDK's ScriptedModel, recorded and replayed."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")  # a guard only: the README's test command installs it ([test] extra)

from agents import Agent, FunctionTool, RunConfig, RunHooks, Runner, Tool, UserError, WebSearchTool, function_tool
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from pydantic import BaseModel

from tapetui import TapeDrift, TapeError, ToolDriftError, use_tape
from tapetui.integrations.openai_agents import taped

NO_TRACING = RunConfig(tracing_disabled=True)
DEFAULT_FAILURE = "An error occurred while running the tool. Please try again."
TEMPS = {"Paris": 14.5, "Oslo": 3.0}


class Weather(BaseModel):
    city: str
    celsius: float


class QuotaError(Exception):
    """Raised by a tool that lets its errors through (failure_error_function=None)."""


def make_tools(runs: Counter[str], add_doc: str = "Add two numbers.") -> list[FunctionTool]:
    """Tools that count their executions: `add` (async), `divide` (fails on 0: the SDK answers with its default
    text), `weather` (returns a pydantic model, which the SDK only ever shows the model as text)."""

    @function_tool(description_override=add_doc)
    async def add(a: int, b: int) -> int:
        runs["add"] += 1
        return a + b

    @function_tool
    def divide(a: float, b: float) -> float:
        """Divide a by b."""
        runs["divide"] += 1
        return a / b

    @function_tool
    def weather(city: str) -> Weather:
        """Current weather of a city."""
        runs["weather"] += 1
        return Weather(city=city, celsius=TEMPS[city])

    return [add, divide, weather]


def outputs(call: Any) -> str:
    """The answer: every tool output the model was given, in the order it was given."""
    seen = [
        item["output"] for item in call.input if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]
    return " | ".join(str(s) for s in seen)


def script(b: int = 2, city: str = "Paris") -> ScriptedModel:
    """Turn 1: add and weather in parallel; turn 2: a division by zero; then the answer made of all outputs."""
    return ScriptedModel(
        [
            [
                function_call("add", {"a": 1, "b": b}, call_id="c1"),
                function_call("weather", {"city": city}, call_id="c2"),
            ],
            [function_call("divide", {"a": 1, "b": 0}, call_id="c3")],
            ModelStep.respond(lambda call: [assistant_message(outputs(call))]),
        ]
    )


def run(tools: list[Tool], model: ScriptedModel, hooks: RunHooks[Any] | None = None) -> Any:
    agent = Agent(name="calc", model=model, tools=tools)
    return asyncio.run(Runner.run(agent, "go", run_config=NO_TRACING, hooks=hooks)).final_output


def lines(path: Path, kind: str) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, path.read_text().splitlines()) if line["type"] == kind]


def record(path: Path, hooks: RunHooks[Any] | None = None) -> tuple[str, Counter[str]]:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="record") as tape:
        output = run(taped(make_tools(runs), tape), script(), hooks)
        assert tape.stats()["live_tool_calls"] == 3
    return output, runs


def test_record_then_replay_runs_no_tool_and_gives_the_same_answer(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    recorded, runs = record(path)
    assert runs == {"add": 1, "weather": 1, "divide": 1}
    assert recorded == f"3 | city='Paris' celsius=14.5 | {DEFAULT_FAILURE}"  # what an untaped run gives

    calls = {c["call_id"]: c for c in lines(path, "call")}
    assert {k: (c["tool"], c["order"]) for k, c in calls.items()} == {
        "c1": ("add", [1, 0]),
        "c2": ("weather", [1, 1]),
        "c3": ("divide", [2, 0]),
    }
    assert calls["c1"]["args"] == {"a": 1, "b": 2} and calls["c1"]["result"] == 3
    assert calls["c2"]["result"] == "city='Paris' celsius=14.5"  # the text the SDK shows the model
    assert calls["c3"]["result"] == DEFAULT_FAILURE and "error" not in calls["c3"]  # the SDK swallowed it
    tools = {t["name"]: t for t in lines(path, "tool")}
    assert tools["add"]["description"] == "Add two numbers."
    assert tools["add"]["schema"]["properties"]["b"] == {"title": "B", "type": "integer"}
    assert tools["add"]["annotations"] == {"strict": True}

    runs.clear()
    with use_tape(path, mode="replay") as tape:
        assert run(taped(make_tools(runs)), script()) == recorded
        assert tape.stats()["live_tool_calls"] == 0 and tape.stats()["tape_hits"] == 3
    assert runs == {}


def test_a_changed_argument_in_the_script_is_drift_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay"), pytest.raises(UserError) as caught:
        run(taped(make_tools(runs)), script(b=5))
    drift = caught.value.__cause__  # the SDK wraps what a tool raised; the drift is never text for the model
    assert isinstance(drift, TapeDrift)
    assert drift.tool == "add" and drift.changes == [("b", 2, 5)]
    assert "args.b  2 → 5" in str(drift)
    assert runs == {}


def test_a_changed_description_is_contract_drift_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay"), pytest.raises(UserError) as caught:
        run(taped(make_tools(runs, add_doc="Add two numbers and send the sum to the auditor.")), script())
    changed = caught.value.__cause__
    assert isinstance(changed, ToolDriftError) and changed.tool == "add"
    assert any(line.startswith("description") for line in changed.explanation), changed.explanation
    assert runs == {}


class SecondCallFirst(RunHooks[Any]):
    """Holds call c1 back until call c2 has finished, so the calls reach their tools against the response's
    order (no timing: an event set when c2 ends)."""

    def __init__(self) -> None:
        self.c2_done = asyncio.Event()

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        if getattr(context, "tool_call_id", None) == "c1":
            await self.c2_done.wait()

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        if getattr(context, "tool_call_id", None) == "c2":
            self.c2_done.set()


def test_places_come_from_the_response_not_from_the_order_calls_start_in(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    recorded, _ = record(path, hooks=SecondCallFirst())
    calls = lines(path, "call")
    assert [(c["call_id"], c["order"]) for c in calls[:2]] == [("c2", [1, 1]), ("c1", [1, 0])]

    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay"):  # the calls now start in the response's order
        assert run(taped(make_tools(runs)), script()) == recorded
    assert runs == {}

    with use_tape(path, mode="replay"), pytest.raises(UserError) as caught:
        run(taped(make_tools(runs)), script(city="Oslo"), hooks=SecondCallFirst())
    drift = caught.value.__cause__
    assert isinstance(drift, TapeDrift) and drift.changes == [("city", "Paris", "Oslo")]


def test_an_exception_the_sdk_lets_through_is_recorded_and_raised_again(tmp_path: Path) -> None:
    runs: Counter[str] = Counter()

    @function_tool(failure_error_function=None)
    def charge(amount: int) -> str:
        """Charge the card."""
        runs["charge"] += 1
        raise QuotaError(f"quota exceeded for {amount}")

    def model() -> ScriptedModel:
        return ScriptedModel([[function_call("charge", {"amount": 3}, call_id="k1")], [assistant_message("no")]])

    path = tmp_path / "charge.jsonl"
    with use_tape(path, mode="record"), pytest.raises(UserError) as recorded:
        run(taped([charge]), model())
    assert isinstance(recorded.value.__cause__, QuotaError)
    (line,) = lines(path, "call")
    assert line["error"]["type"] == "QuotaError" and line["error"]["message"] == "quota exceeded for 3"

    with use_tape(path, mode="replay"), pytest.raises(UserError) as replayed:
        run(taped([charge]), model())
    assert str(replayed.value) == str(recorded.value)
    assert isinstance(replayed.value.__cause__, QuotaError)
    assert runs == {"charge": 1}


def test_a_failure_of_a_tool_with_an_output_schema_replays_as_recorded(tmp_path: Path) -> None:
    """The SDK lets its default failure text past the tool's output schema; replay must too."""
    runs: Counter[str] = Counter()

    @function_tool(output_type=Weather)
    def forecast(city: str) -> Weather:
        """Tomorrow's weather."""
        runs["forecast"] += 1
        raise RuntimeError("station offline")

    def model() -> ScriptedModel:
        return ScriptedModel(
            [
                [function_call("forecast", {"city": "Oslo"}, call_id="f1")],
                ModelStep.respond(lambda call: [assistant_message(outputs(call))]),
            ]
        )

    path = tmp_path / "forecast.jsonl"
    with use_tape(path, mode="record"):
        recorded = run(taped([forecast]), model())
    assert recorded == DEFAULT_FAILURE
    assert lines(path, "tool")[0]["output_schema"]["properties"]["celsius"]["type"] == "number"
    with use_tape(path, mode="replay"):
        assert run(taped([forecast]), model()) == recorded
    assert runs == {"forecast": 1}


def test_tools_wrapped_without_a_tape_use_the_current_one(tmp_path: Path) -> None:
    runs: Counter[str] = Counter()
    tools = taped(make_tools(runs))  # at import time, say: no tape yet
    with pytest.raises(UserError) as caught:
        run(tools, script())
    assert isinstance(caught.value.__cause__, TapeError) and "no tape" in str(caught.value.__cause__)

    path = tmp_path / "agent.jsonl"
    with use_tape(path, mode="record"):
        recorded = run(tools, script())
    runs.clear()
    with use_tape(path, mode="replay"):
        assert run(tools, script()) == recorded
    assert runs == {}


def test_taped_gives_copies_of_the_same_kind(tmp_path: Path) -> None:
    runs: Counter[str] = Counter()
    add, divide, weather = make_tools(runs)
    one = taped(add)
    assert isinstance(one, FunctionTool) and one is not add
    assert (one.name, one.description, one.params_json_schema) == (add.name, add.description, add.params_json_schema)
    assert one.on_invoke_tool is not add.on_invoke_tool
    assert [t.name for t in taped([add, divide])] == ["add", "divide"]
    with pytest.raises(TypeError, match="WebSearchTool"):
        taped([add, WebSearchTool()])

    path = tmp_path / "twice.jsonl"
    with use_tape(path, mode="record") as first, use_tape(tmp_path / "other.jsonl", mode="record") as second:
        tools = taped(taped([add, divide, weather], first), second)  # taped again: the new tape only
        run(tools, script())
        assert first.stats()["steps"] == 0 and second.stats()["steps"] == 3
    assert runs == {"add": 1, "weather": 1, "divide": 1}
