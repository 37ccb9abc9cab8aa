"""An OpenAI Agents SDK agent's tool calls recorded on a tape, then replayed with no tool run.

Offline: the model is the SDK's own ScriptedModel (``agents.testing``), scripted to call `weather` twice in one
response (the SDK runs both at once), then `to_fahrenheit`, then to answer with what the tools returned.
Needs `pip install 'tapetui[openai-agents]'`; run `python examples/openai_agents_tools.py`.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool
from agents.testing import ModelCall, ModelStep, ScriptedModel, assistant_message, function_call

from tapetui import use_tape
from tapetui.integrations.openai_agents import taped

executions: Counter[str] = Counter()  # how often each tool really ran


@function_tool
def weather(city: str) -> dict[str, Any]:
    """Current weather of a city."""
    executions["weather"] += 1
    return {"city": city, "celsius": {"Paris": 14.5, "Oslo": 3.0}.get(city, 20.0)}


@function_tool
async def to_fahrenheit(celsius: float) -> float:
    """Convert degrees Celsius to Fahrenheit."""
    executions["to_fahrenheit"] += 1
    return round(celsius * 9 / 5 + 32, 1)


tools = taped([weather, to_fahrenheit])  # the one line: each call through the current tape


def answer(call: ModelCall) -> list[Any]:
    """The model's last step: every tool output it was given."""
    outputs = [i["output"] for i in call.input if isinstance(i, dict) and i.get("type") == "function_call_output"]
    return [assistant_message(" / ".join(outputs))]


def ask() -> str:
    model = ScriptedModel(  # what a real model would answer at each step
        [
            [
                function_call("weather", {"city": "Paris"}, call_id="w1"),
                function_call("weather", {"city": "Oslo"}, call_id="w2"),
            ],
            [function_call("to_fahrenheit", {"celsius": 3.0}, call_id="f1")],
            ModelStep.respond(answer),
        ]
    )
    agent = Agent(name="forecaster", model=model, tools=tools)
    offline = RunConfig(tracing_disabled=True)  # no trace export
    return str(Runner.run_sync(agent, "Which city is colder, in Fahrenheit?", run_config=offline).final_output)


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "weather.jsonl"
        with use_tape(path, mode="record"):
            recorded = ask()
        print(f"record: {recorded}   [{sum(executions.values())} tool executions]")

        executions.clear()
        with use_tape(path, mode="replay") as tape:
            replayed = ask()
            hits = tape.stats()["tape_hits"]
        print(f"replay: {replayed}   [{sum(executions.values())} tool executions, {hits} calls from the tape]")
        assert replayed == recorded and not executions


if __name__ == "__main__":
    main()
