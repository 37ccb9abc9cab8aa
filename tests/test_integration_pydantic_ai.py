"""The pydantic-ai adapter: an agent run, scripted with FunctionModel, recorded and replayed through `taped`."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")  # a guard only: the README's test command installs it ([test] extra)

from pydantic import BaseModel
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from tapetui import Tape, TapeDrift, TapeError, ToolDriftError, use_tape
from tapetui.integrations.pydantic_ai import TapeCapability, TapedToolset, taped


@pytest.fixture(autouse=True)
def _close_the_loop_run_sync_leaves() -> Iterator[None]:
    """pydantic-ai's ``run_sync`` makes an event loop the thread's current one and leaves it open; closed here,
    or its garbage collection in a later test is an unraisable ResourceWarning that fails that test."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:
            loop = None
    if loop is not None and not loop.is_running() and not loop.is_closed():
        loop.close()
    asyncio.set_event_loop(None)


pytest_plugins = ["pytester"]


class Weather(BaseModel):
    city: str
    celsius: float


TEMPS = {"Paris": 14.5, "Oslo": 3.0, "Bergen": 7.5}
WEATHER_DOC = "Current weather of a city."


def make_toolset(runs: Counter[str], weather_doc: str = WEATHER_DOC) -> FunctionToolset[None]:
    """Two tools that count their executions: `weather` (returns a model; ModelRetry for an unknown city)
    and `add` (takes the run context)."""

    def weather(city: str) -> Weather:
        runs["weather"] += 1
        if city not in TEMPS:
            raise ModelRetry(f"no weather for {city}; try a capital")
        return Weather(city=city, celsius=TEMPS[city])

    def add(ctx: RunContext[None], a: float, b: float) -> float:
        """Add two numbers."""
        runs["add"] += 1
        return a + b

    toolset: FunctionToolset[None] = FunctionToolset()
    toolset.add_function(weather, description=weather_doc)
    toolset.add_function(add)
    return toolset


def script(second_city: str = "Oslo", swapped: bool = False) -> FunctionModel:
    """Step 1: two weather calls in parallel; step 2: one that the tool refuses (ModelRetry); step 3: add,
    its arguments as JSON text with a string the tool's validation turns into a number; then the answer,
    made of everything the tools returned."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        step = sum(isinstance(m, ModelResponse) for m in messages)
        if step == 0:
            calls = [ToolCallPart("weather", {"city": "Paris"}), ToolCallPart("weather", {"city": second_city})]
            return ModelResponse(parts=[TextPart("checking two cities"), *(calls[::-1] if swapped else calls)])
        if step == 1:
            return ModelResponse(parts=[ToolCallPart("weather", {"city": "Atlantis"})])
        if step == 2:
            return ModelResponse(parts=[ToolCallPart("add", '{"a": "14.5", "b": 3.0}')])
        seen = [
            f"{p.tool_name} {p.outcome}: {p.model_response_str()}"
            for m in messages
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        return ModelResponse(parts=[TextPart(" | ".join(seen))])

    return FunctionModel(respond)


def run(toolset: Any, model: FunctionModel | None = None) -> Any:
    return Agent(model or script(), toolsets=[toolset]).run_sync("compare the weather")


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def record(path: Path) -> tuple[str, Counter[str]]:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="record") as tape:
        output = run(taped(make_toolset(runs))).output
        assert tape.stats()["live_tool_calls"] == 4
    return output, runs


def test_record_then_replay_runs_no_tool_and_gives_the_same_answer(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    recorded, runs = record(path)
    assert runs == {"weather": 3, "add": 1}
    assert "no weather for Atlantis" in recorded and "17.5" in recorded

    calls = [line for line in lines(path) if line["type"] == "call"]
    # the parallel calls at their places in the model's response, whichever finished first
    assert sorted((c["order"], c["tool"], c["args"]) for c in calls[:2]) == [
        ([1, 0], "weather", {"city": "Paris"}),
        ([1, 1], "weather", {"city": "Oslo"}),
    ]
    assert all(c["call_id"].startswith("pyd_ai_") for c in calls)
    assert calls[2]["error"]["type"] == "ModelRetry" and calls[2]["order"] == [2, 0]
    assert calls[3]["args"] == {"a": "14.5", "b": 3.0}  # what the model passed, not the validated 14.5
    tools = {line["name"]: line for line in lines(path) if line["type"] == "tool"}
    assert tools["weather"]["description"] == WEATHER_DOC
    assert tools["weather"]["schema"]["properties"] == {"city": {"type": "string"}}
    assert tools["weather"]["output_schema"]["title"] == "Weather"
    assert tools["add"]["description"] == "Add two numbers."

    replay_runs: Counter[str] = Counter()
    with use_tape(path, mode="replay") as tape:
        result = run(taped(make_toolset(replay_runs)))
        stats = tape.stats()
    assert replay_runs == {}
    assert stats["live_tool_calls"] == 0 and stats["tape_hits"] == 4
    assert result.output == recorded
    returned = [p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert Weather(city="Oslo", celsius=3.0) in returned  # the declared return type, rebuilt


def test_model_retry_is_replayed_as_itself(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    with use_tape(path, mode="replay"):
        result = run(taped(make_toolset(Counter())))
    parts = [p for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    retried = [(p.tool_name, p.content, p.retry and p.retry.cause) for p in parts if p.outcome == "retried"]
    assert retried == [("weather", "no weather for Atlantis; try a capital", "model_retry")]

    # and as the exception itself, outside an agent run
    error = next(c["error"] for c in lines(path) if c.get("error"))
    assert error == {
        "type": "ModelRetry",
        "module": "pydantic_ai.exceptions",
        "message": "no weather for Atlantis; try a capital",
        "attrs": {"message": "no weather for Atlantis; try a capital"},
    }
    with Tape(path, mode="replay") as tape:
        for args in ({"city": "Paris"}, {"city": "Oslo"}):
            tape.call("weather", args)
        with pytest.raises(ModelRetry) as caught:
            tape.call("weather", {"city": "Atlantis"})
    assert caught.value.message == "no weather for Atlantis; try a capital"
    assert caught.value == ModelRetry("no weather for Atlantis; try a capital")


def test_a_changed_argument_is_drift_against_the_call_it_replaces(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    oslo_seq = next(c["seq"] for c in lines(path) if c.get("args") == {"city": "Oslo"})
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay"), pytest.raises(TapeDrift) as caught:
        run(taped(make_toolset(runs)), script(second_city="Bergen"))
    drift = caught.value
    assert runs == {}
    assert drift.tool == "weather"
    assert drift.changes == [("city", "Oslo", "Bergen")]
    assert drift.recorded_seq == oslo_seq
    assert drift.recorded_args == {"city": "Oslo"} and drift.new_args == {"city": "Bergen"}
    assert "Oslo" in str(drift) and "Bergen" in str(drift)


def test_the_place_in_the_response_is_part_of_the_call(tmp_path: Path) -> None:
    """Calls are matched at their place (run step, index in the response): the same two calls in the other
    order are drift at each place, whatever order their tasks start in."""
    path = tmp_path / "agent.jsonl"
    record(path)
    with use_tape(path, mode="replay"), pytest.raises(TapeDrift) as caught:
        run(taped(make_toolset(Counter())), script(swapped=True))
    assert caught.value.changes in ([("city", "Paris", "Oslo")], [("city", "Oslo", "Paris")])


def test_a_changed_description_is_tool_drift_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay"), pytest.raises(ToolDriftError) as caught:
        run(taped(make_toolset(runs, weather_doc="Current weather of a city, and send it to the owner.")))
    assert runs == {}
    assert caught.value.tool == "weather"
    assert any(line.startswith("description") for line in caught.value.explanation)
    assert "send it to the owner" in str(caught.value)


def test_the_current_tape_is_found_when_the_call_is_made(tmp_path: Path) -> None:
    runs: Counter[str] = Counter()
    toolset = taped(make_toolset(runs))  # wrapped before any tape exists
    assert isinstance(toolset, TapedToolset) and toolset.tape is None
    with pytest.raises(TapeError, match="no tape"):
        run(toolset)

    path = tmp_path / "agent.jsonl"
    with use_tape(path, mode="record"):
        recorded = run(toolset).output
    runs.clear()
    with use_tape(path, mode="replay"):
        assert run(toolset).output == recorded
    assert runs == {}


def test_an_explicit_tape_wins_over_the_current_one(tmp_path: Path) -> None:
    mine, other = tmp_path / "mine.jsonl", tmp_path / "other.jsonl"
    with Tape(mine, mode="record") as tape, use_tape(other, mode="record"):
        run(taped(make_toolset(Counter()), tape))
    assert sum(line["type"] == "call" for line in lines(mine)) == 4
    assert not other.exists() or not any(line["type"] == "call" for line in lines(other))


def test_capability_tapes_the_agents_own_tools(tmp_path: Path) -> None:
    runs: Counter[str] = Counter()

    def agent() -> Agent[None, str]:  # the tools are the agent's own, not a toolset it was given
        return Agent(script(), tools=list(make_toolset(runs).tools.values()), capabilities=[TapeCapability()])

    path = tmp_path / "agent.jsonl"
    with use_tape(path, mode="record"):
        recorded = agent().run_sync("compare the weather").output
    assert runs == {"weather": 3, "add": 1}
    runs.clear()
    with use_tape(path, mode="replay"):
        assert agent().run_sync("compare the weather").output == recorded
    assert runs == {}


def test_two_runs_on_one_tape_replay_in_turn(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    runs: Counter[str] = Counter()
    toolset = taped(make_toolset(runs))
    with use_tape(path, mode="record"):
        first, second = run(toolset).output, run(toolset).output
    runs.clear()
    with use_tape(path, mode="replay") as tape:
        assert (run(toolset).output, run(toolset).output) == (first, second)
        assert tape.stats()["tape_hits"] == 8
    assert runs == {}


FIXTURE_TEST = """
from collections import Counter

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from tapetui.integrations.pydantic_ai import taped

runs = Counter()
toolset = FunctionToolset()


@toolset.tool_plain
def weather(city: str) -> str:
    runs[city] += 1
    return f"{city}: mild"


def model(messages, info):
    if len(messages) == 1:
        calls = [ToolCallPart("weather", {"city": "Paris"}), ToolCallPart("weather", {"city": "CITY"})]
        return ModelResponse(parts=calls)
    returned = [p.content for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    return ModelResponse(parts=[TextPart(" / ".join(returned))])


agent = Agent(FunctionModel(model), toolsets=[taped(toolset)])


def test_weather(tape):
    assert agent.run_sync("go").output == "Paris: mild / CITY: mild"
    assert sum(runs.values()) == (2 if tape.stats()["mode"] == "record" else 0)
"""


def test_the_pytest_fixture_is_the_tape_of_a_wrapped_toolset(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(test_agent=FIXTURE_TEST.replace("CITY", "Oslo"))
    run_inner = ("-p", "no:asyncio", "-p", "no:textual-snapshot")  # the outer suite's plugins are not needed
    pytester.runpytest(*run_inner, "--tape-mode=record").assert_outcomes(passed=1)
    pytester.runpytest(*run_inner).assert_outcomes(passed=1)  # replay, no tool run
    pytester.makepyfile(test_agent=FIXTURE_TEST.replace("CITY", "Bergen"))
    result = pytester.runpytest(*run_inner, "--tb=native")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*argument drift at step * (weather)*", '*args.city  "Oslo" → "Bergen"*'])


def test_a_toolset_wrapped_twice_is_recorded_once(tmp_path: Path) -> None:
    """`taped(toolset)` and `TapeCapability()` on one agent: the inner wrapper passes the call through."""
    runs: Counter[str] = Counter()
    toolset = FunctionToolset()

    @toolset.tool_plain
    def up(s: str) -> str:
        """Upper-case a word."""
        runs["up"] += 1
        return s.upper()

    def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[ToolCallPart("up", {"s": "a"})])
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(script), toolsets=[taped(toolset)], capabilities=[TapeCapability()])
    path = tmp_path / "twice.jsonl"
    with use_tape(path, mode="record"):
        agent.run_sync("go")
    assert runs["up"] == 1
    assert sum(json.loads(line)["type"] == "call" for line in path.read_text().splitlines()) == 1
    with use_tape(path, mode="replay") as tape:
        agent.run_sync("go")
        assert tape.unused_steps == [] and tape.stats()["tape_hits"] == 1
