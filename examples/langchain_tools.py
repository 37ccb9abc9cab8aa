"""LangChain tool calls recorded on a tape, then replayed with no tool run.

Offline: the model is langchain-core's own FakeMessagesListChatModel, scripted to call `weather` twice in one
message, then `to_fahrenheit`, then answer; a short agent loop runs the calls it asks for. Needs
`pip install 'tapetui[langchain]'`; run `python examples/langchain_tools.py`.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from tapetui import use_tape
from tapetui.integrations.langchain import taped

executions: Counter[str] = Counter()  # how often each tool really ran


@tool
def weather(city: str) -> dict[str, Any]:
    """Current weather of a city."""
    executions["weather"] += 1
    return {"city": city, "celsius": {"Paris": 14.5, "Oslo": 3.0}.get(city, 20.0)}


@tool
def to_fahrenheit(celsius: float) -> float:
    """Convert degrees Celsius to Fahrenheit."""
    executions["to_fahrenheit"] += 1
    return round(celsius * 9 / 5 + 32, 1)


tools = {t.name: t for t in taped([weather, to_fahrenheit])}  # the one line: each call through the current tape


def ask() -> str:
    model = FakeMessagesListChatModel(  # what a real model would answer at each step
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    {"name": "weather", "args": {"city": "Paris"}, "id": "w1"},
                    {"name": "weather", "args": {"city": "Oslo"}, "id": "w2"},
                ],
            ),
            AIMessage("", tool_calls=[{"name": "to_fahrenheit", "args": {"celsius": 3.0}, "id": "f1"}]),
            AIMessage("Oslo is colder."),
        ]
    )
    messages: list[BaseMessage] = [HumanMessage("Which city is colder, in Fahrenheit?")]
    while True:  # the agent loop: ask the model, run the calls it asks for, until it answers
        message = model.invoke(messages)
        messages.append(message)
        if not isinstance(message, AIMessage) or not message.tool_calls:
            break
        messages.extend(tools[call["name"]].invoke(call) for call in message.tool_calls)
    said = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
    return " / ".join([*said, str(messages[-1].content)])


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
