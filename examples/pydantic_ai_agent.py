"""A pydantic-ai agent's tool calls recorded on a tape, then replayed with no tool run.

Offline: the model is pydantic-ai's own FunctionModel, scripted to call `weather` twice in parallel, then
`to_fahrenheit`, then answer. Needs `pip install 'tapetui[pydantic-ai]'`; run `python examples/pydantic_ai_agent.py`.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.toolsets import FunctionToolset

from tapetui import use_tape
from tapetui.integrations.pydantic_ai import taped

executions: Counter[str] = Counter()  # how often each tool really ran
toolset: FunctionToolset[None] = FunctionToolset()


@toolset.tool_plain
def weather(city: str) -> dict[str, object]:
    """Current weather of a city."""
    executions["weather"] += 1
    return {"city": city, "celsius": {"Paris": 14.5, "Oslo": 3.0}.get(city, 20.0)}


@toolset.tool_plain
def to_fahrenheit(celsius: float) -> float:
    """Convert degrees Celsius to Fahrenheit."""
    executions["to_fahrenheit"] += 1
    return round(celsius * 9 / 5 + 32, 1)


def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The scripted model: what a real one would answer at each step."""
    returned = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    step = sum(isinstance(m, ModelResponse) for m in messages)
    if step == 0:  # one response, two calls: pydantic-ai runs them in parallel
        return ModelResponse(
            parts=[ToolCallPart("weather", {"city": "Paris"}), ToolCallPart("weather", {"city": "Oslo"})]
        )
    if step == 1:
        coldest = min(p.model_response_object()["celsius"] for p in returned)
        return ModelResponse(parts=[ToolCallPart("to_fahrenheit", {"celsius": coldest})])
    return ModelResponse(parts=[TextPart(" / ".join(p.model_response_str() for p in returned))])


agent = Agent(FunctionModel(model), toolsets=[taped(toolset)])  # the one line: taped(toolset)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "weather.jsonl"
        with use_tape(path, mode="record"):
            recorded = agent.run_sync("Which city is colder, in Fahrenheit?").output
        print(f"record: {recorded}   [{sum(executions.values())} tool executions]")

        executions.clear()
        with use_tape(path, mode="replay") as tape:
            replayed = agent.run_sync("Which city is colder, in Fahrenheit?").output
            hits = tape.stats()["tape_hits"]
        print(f"replay: {replayed}   [{sum(executions.values())} tool executions, {hits} calls from the tape]")
        assert replayed == recorded and not executions


if __name__ == "__main__":
    main()
