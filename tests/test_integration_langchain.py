"""The LangChain adapter: an agent loop driven by langchain-core's fake chat model, recorded and replayed."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain_core")  # a guard only: the README's test command installs it ([test] extra)

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool, ToolException, tool

from tapetui import TapeDrift, TapeError, ToolDriftError, use_tape
from tapetui.integrations.langchain import ORDER_KEY, taped

WORDS = {"tape": "a strip that records", "drift": "a slow change"}


class Lookup(BaseTool):
    """A tool class with a sync `_run` only: `ainvoke` runs it in a thread (LangChain's default `_arun`)."""

    name: str = "lookup"
    description: str = "Look a word up."
    handle_tool_error: bool = True  # a ToolException becomes the ToolMessage (status "error")
    runs: Any  # the test's Counter itself (a Counter[str] field would be validated into a copy)

    def _run(self, word: str) -> str:
        self.runs["lookup"] += 1
        if word not in WORDS:
            raise ToolException(f"unknown word: {word}")
        return WORDS[word]


def make_tools(runs: Counter[str], add_doc: str = "Add two numbers.") -> list[BaseTool]:
    """Tools that count their executions: `add` (sync only: `ainvoke` runs it in a thread), `mul` (sync and
    async), `lookup` (a BaseTool class; fails on an unknown word) and `cite` (content and artifact)."""

    def add(a: int, b: int) -> int:
        runs["add"] += 1
        return a + b

    def mul(a: int, b: int) -> int:
        runs["mul"] += 1
        return a * b

    async def amul(a: int, b: int) -> int:
        runs["mul"] += 1
        await asyncio.sleep(0)
        return a * b

    @tool(response_format="content_and_artifact")
    def cite(word: str) -> tuple[str, dict[str, Any]]:
        """Cite the source of a word."""
        runs["cite"] += 1
        return f"see the glossary for {word}", {"page": len(word)}

    return [
        StructuredTool.from_function(add, description=add_doc),
        StructuredTool.from_function(mul, coroutine=amul, description="Multiply two numbers."),
        Lookup(runs=runs),
        cite,
    ]


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id}


def script(b: Any = 2, word: str = "tape") -> FakeMessagesListChatModel:
    """Turn 1: add (its `a` as text, which LangChain validates into a number) and mul; turn 2: two lookups,
    one of an unknown word, and a citation; then the answer."""
    return FakeMessagesListChatModel(
        responses=[
            AIMessage("", tool_calls=[call("add", {"a": "1", "b": b}, "c1"), call("mul", {"a": 3, "b": 4}, "c2")]),
            AIMessage(
                "",
                tool_calls=[
                    call("lookup", {"word": word}, "c3"),
                    call("lookup", {"word": "nope"}, "c4"),
                    call("cite", {"word": word}, "c5"),
                ],
            ),
            AIMessage("done"),
        ]
    )


def transcript(messages: list[BaseMessage]) -> list[Any]:
    """What the model was given back: each tool message's content, status and artifact; then its answer."""
    said = [(m.name, m.content, m.status, m.artifact) for m in messages if isinstance(m, ToolMessage)]
    return [*said, messages[-1].content]


def run_sync(model: FakeMessagesListChatModel, tools: list[BaseTool]) -> list[Any]:
    """An agent loop: ask the model, run the calls of its message one after the other, until it answers."""
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage("go")]
    while True:
        message = model.invoke(messages)
        messages.append(message)
        if not isinstance(message, AIMessage) or not message.tool_calls:
            return transcript(messages)
        messages.extend(by_name[c["name"]].invoke(c) for c in message.tool_calls)


async def run_async(model: FakeMessagesListChatModel, tools: list[BaseTool]) -> list[Any]:
    """The same loop, async: the calls of one message run at once, each given its place in the message."""
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [HumanMessage("go")]
    turn = 0
    while True:
        message = await model.ainvoke(messages)
        messages.append(message)
        turn += 1
        if not isinstance(message, AIMessage) or not message.tool_calls:
            return transcript(messages)
        calls = message.tool_calls
        places = [RunnableConfig(metadata={ORDER_KEY: (turn, i)}) for i in range(len(calls))]
        messages.extend(
            await asyncio.gather(*(by_name[c["name"]].ainvoke(c, p) for c, p in zip(calls, places, strict=True)))
        )


def lines(path: Path, kind: str) -> list[dict[str, Any]]:
    return [line for line in map(json.loads, path.read_text().splitlines()) if line["type"] == kind]


EXPECTED = [
    ("add", "3", "success", None),
    ("mul", "12", "success", None),
    ("lookup", "a strip that records", "success", None),
    ("lookup", "unknown word: nope", "error", None),
    ("cite", "see the glossary for tape", "success", {"page": 4}),
    "done",
]


def record_sync(path: Path) -> Counter[str]:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="record") as tape:
        assert run_sync(script(), taped(make_tools(runs), tape)) == EXPECTED
    return runs


def test_a_sync_loop_recorded_then_replayed_runs_no_tool(tmp_path: Path) -> None:
    path = tmp_path / "loop.jsonl"
    runs = record_sync(path)
    assert runs == {"add": 1, "mul": 1, "lookup": 2, "cite": 1}

    calls = {c["call_id"]: c for c in lines(path, "call")}
    assert [c["tool"] for c in calls.values()] == ["add", "mul", "lookup", "lookup", "cite"]
    assert calls["c1"]["args"] == {"a": "1", "b": 2} and calls["c1"]["result"] == 3  # as the model passed them
    assert calls["c4"]["error"]["type"] == "ToolException" and calls["c4"]["error"]["message"] == "unknown word: nope"
    assert calls["c5"]["result"] == ["see the glossary for tape", {"page": 4}]
    assert all("order" not in c for c in calls.values())  # one call after the other: content and step suffice
    tools = {t["name"]: t for t in lines(path, "tool")}
    assert tools["add"]["description"] == "Add two numbers."
    assert tools["add"]["schema"] == {
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "type": "object",
    }
    assert tools["lookup"]["description"] == "Look a word up."

    runs.clear()
    with use_tape(path, mode="replay") as tape:
        assert run_sync(script(), taped(make_tools(runs))) == EXPECTED
        assert tape.stats()["live_tool_calls"] == 0 and tape.stats()["tape_hits"] == 5
    assert runs == {}


def test_an_async_loop_with_places_recorded_then_replayed(tmp_path: Path) -> None:
    path = tmp_path / "loop.jsonl"
    runs: Counter[str] = Counter()
    with use_tape(path, mode="record"):
        assert asyncio.run(run_async(script(), taped(make_tools(runs)))) == EXPECTED
    assert runs == {"add": 1, "mul": 1, "lookup": 2, "cite": 1}  # lookup through ainvoke: recorded once each
    calls = {c["call_id"]: c for c in lines(path, "call")}
    assert len(calls) == 5
    assert {k: c["order"] for k, c in calls.items()} == {
        "c1": [1, 0],
        "c2": [1, 1],
        "c3": [2, 0],
        "c4": [2, 1],
        "c5": [2, 2],
    }

    runs.clear()
    with use_tape(path, mode="replay") as tape:
        assert asyncio.run(run_async(script(), taped(make_tools(runs)))) == EXPECTED
        assert tape.stats()["live_tool_calls"] == 0
    with use_tape(path, mode="replay"):  # the sync tools replay what the async ones recorded
        assert run_sync(script(), taped(make_tools(runs))) == EXPECTED
    assert runs == {}


def test_a_changed_argument_in_the_script_is_drift_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "loop.jsonl"
    record_sync(path)
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay"), pytest.raises(TapeDrift) as caught:
        run_sync(script(b=5), taped(make_tools(runs)))
    assert caught.value.tool == "add" and caught.value.changes == [("b", 2, 5)]
    assert "args.b  2 → 5" in str(caught.value)

    with use_tape(path, mode="replay"), pytest.raises(TapeDrift) as caught:
        asyncio.run(run_async(script(word="drift"), taped(make_tools(runs))))
    assert caught.value.tool in ("lookup", "cite") and caught.value.changes == [("word", "tape", "drift")]
    assert runs == {}


def test_a_changed_description_is_contract_drift_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "loop.jsonl"
    record_sync(path)
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay"), pytest.raises(ToolDriftError) as caught:
        run_sync(script(), taped(make_tools(runs, add_doc="Add two numbers and email the sum.")))
    assert caught.value.tool == "add"
    assert any(line.startswith("description") for line in caught.value.explanation), caught.value.explanation
    assert runs == {}


def test_tools_wrapped_without_a_tape_use_the_current_one(tmp_path: Path) -> None:
    runs: Counter[str] = Counter()
    tools = taped(make_tools(runs))  # at import time, say: no tape yet
    with pytest.raises(TapeError, match="no tape"):
        run_sync(script(), tools)

    path = tmp_path / "loop.jsonl"
    with use_tape(path, mode="record"):
        assert run_sync(script(), tools) == EXPECTED
    runs.clear()
    with use_tape(path, mode="replay"):
        assert run_sync(script(), tools) == EXPECTED
    assert runs == {}


def test_taped_gives_copies_of_the_same_kind(tmp_path: Path) -> None:
    runs: Counter[str] = Counter()
    add, mul, lookup, cite = make_tools(runs)
    one = taped(lookup)
    assert type(one) is Lookup and one is not lookup and one.name == "lookup"
    assert [type(t) for t in taped([add, mul])] == [StructuredTool, StructuredTool]
    with pytest.raises(TypeError, match="BaseTool"):
        taped([add, lambda word: word])  # type: ignore[list-item]
    assert lookup.invoke({"word": "tape"}) == WORDS["tape"]  # the original is untouched: no tape needed

    path = tmp_path / "twice.jsonl"
    with use_tape(path, mode="record") as first, use_tape(tmp_path / "other.jsonl", mode="record") as second:
        again = taped(taped(lookup, first), second)  # taped again: the new tape only
        assert again.invoke("drift") == WORDS["drift"]  # a string input goes to the first argument
        assert first.stats()["steps"] == 0 and second.stats()["steps"] == 1
    (line,) = lines(tmp_path / "other.jsonl", "call")
    assert line["args"] == {"word": "drift"} and "call_id" not in line


def test_arguments_langchain_injects_are_not_the_models(tmp_path: Path) -> None:
    @tool
    def note(text: str, call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Take a note."""
        return f"{text} ({call_id})"

    path = tmp_path / "note.jsonl"
    the_call = {"type": "tool_call", "id": "n1", "name": "note", "args": {"text": "hi"}}
    with use_tape(path, mode="record"):
        recorded = taped(note).invoke(the_call)
    (line,) = lines(path, "call")
    assert line["args"] == {"text": "hi"} and line["call_id"] == "n1" and line["result"] == "hi (n1)"
    assert lines(path, "tool")[0]["schema"]["properties"] == {"text": {"type": "string"}}
    with use_tape(path, mode="replay"):
        assert taped(note).invoke(the_call) == recorded  # the same ToolMessage
