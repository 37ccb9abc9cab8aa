"""LangChain's model turns: an agent loop's requests recorded through ``TapedChatModel`` and replayed with no model
call, no tool run and no token spent (offline chat models written here, and langchain-core's fake one; no
network). LangChain's agent loop is the caller's: the tests drive it by hand (``bind_tools(...).invoke``, the
taped tools' ``invoke`` of each tool call, the ``ToolMessage`` appended, again)."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain_core")  # a guard only: the README's test command installs it ([test] extra)

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding, RunnableLambda
from langchain_core.tools import BaseTool, StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, Field

from tapetui import ModelDrift, Tape, TapeError, ToolDriftError, use_tape
from tapetui.core.config import load_config
from tapetui.integrations.langchain import ORDER_KEY, TapedChatModel, taped
from tapetui.review.findings import check

NAME = "offline-1"
MODEL = f"scripted:{NAME}"  # the name on the tape: the model's _llm_type, then its model_name
SYSTEM = "You add numbers and report the weather."
QUESTION = "What is 1 + 2, and how warm is Paris?"
ANSWER = "1 + 2 = 3, and Paris is at 14.5 degrees: a mild day for a walk along the river."

# ---- offline models -------------------------------------------------------------------------------------------


def turn_1(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "call_add"}])


def turn_2(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(
        content="Now the weather.",
        tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "call_weather"}],
    )


def turn_3(messages: list[BaseMessage]) -> AIMessage:
    outputs = [m.content for m in messages if isinstance(m, ToolMessage)]
    assert outputs == ["3", "14.5"], outputs  # the tools' results reached the model, recorded or replayed
    return AIMessage(content=ANSWER)


SCRIPT = (turn_1, turn_2, turn_3)


class Scripted(BaseChatModel):
    """A chat model answering from a script (one function of the messages per turn), with usage and response
    metadata as a provider gives them; ``fresh``: a new message id at each call, and tool-call ids LangChain-style
    (``lc_…``, made up at each run). It formats tools as OpenAI's partner models do, and streams its text word by
    word and its arguments five characters at a time."""

    script: Sequence[Callable[[list[BaseMessage]], AIMessage]] = SCRIPT
    model_name: str = NAME
    temperature: float = 0.0
    fresh: bool = False
    calls: int = 0
    seen: list[dict[str, Any]] = Field(default_factory=list)  # the kwargs of each call

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name, "temperature": self.temperature}

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, **kwargs: Any) -> Runnable[Any, Any]:
        if tool_choice is not None:
            kwargs["tool_choice"] = tool_choice
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _answer(self, messages: list[BaseMessage], kwargs: dict[str, Any]) -> AIMessage:
        self.seen.append(kwargs)
        step = self.script[self.calls]
        self.calls += 1
        k = self.calls
        message = step(messages)
        calls = [{**c, "id": f"lc_{uuid.uuid4()}"} if self.fresh else c for c in message.tool_calls]
        return message.model_copy(
            update={
                "id": f"msg_{uuid.uuid4().hex}" if self.fresh else f"msg_{k}",
                "tool_calls": calls,
                "usage_metadata": {
                    "input_tokens": 100 * k,
                    "output_tokens": 20,
                    "total_tokens": 100 * k + 20,
                    "input_token_details": {"cache_read": 40},
                },
                "response_metadata": {
                    "finish_reason": "tool_calls" if calls else "stop",
                    "model_name": NAME + "-2026",
                    "system_fingerprint": "fp_1",
                },
            }
        )

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        return ChatResult(generations=[ChatGeneration(message=self._answer(messages, kw))])

    def _stream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> Iterator[ChatGenerationChunk]:
        yield from chunks_of(self._answer(messages, kw))


class Exploding(Scripted):
    """The model of a replay: any call is a failure of the test."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model was called in replay")

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        raise AssertionError("the model was called in replay")


def chunks_of(message: AIMessage, size: int = 5) -> Iterator[ChatGenerationChunk]:
    """A provider's stream of ``message``: its text word by word, each call's arguments ``size`` characters at a
    time (name and id in the first chunk), then the usage and metadata."""
    assert isinstance(message.content, str)
    for word in (w for w in re.split(r"(\s)", message.content) if w):
        yield ChatGenerationChunk(message=AIMessageChunk(content=word, id=message.id))
    for index, c in enumerate(message.tool_calls):
        args = json.dumps(c["args"])
        for k in range(0, len(args), size):
            first = k == 0
            part = {"name": c["name"] if first else None, "id": c["id"] if first else None, "index": index}
            tcc = {**part, "args": args[k : k + size], "type": "tool_call_chunk"}
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[tcc], id=message.id))
    last = AIMessageChunk(
        content="",
        id=message.id,
        usage_metadata=message.usage_metadata,
        response_metadata=message.response_metadata,
        chunk_position="last",
    )
    yield ChatGenerationChunk(message=last)


# ---- the agent loop -------------------------------------------------------------------------------------------


def make_tools(
    runs: Counter[str], forecast_doc: str = "Tomorrow's weather of a city.", celsius: float = 14.5
) -> list[BaseTool]:
    """``add`` and ``weather``, which the script calls, and ``forecast``, which it never calls; taped."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        runs["add"] += 1
        return a + b

    @tool
    def weather(city: str) -> float:
        """Current temperature of a city, in degrees Celsius."""
        runs["weather"] += 1
        return celsius

    def forecast(city: str) -> str:
        runs["forecast"] += 1
        return "rain"

    return taped([add, weather, StructuredTool.from_function(forecast, description=forecast_doc)])


def ask(model: Runnable[Any, Any], messages: list[BaseMessage], how: str) -> tuple[AIMessage, list[AIMessageChunk]]:
    """One model turn: ``invoke``, ``stream``, ``ainvoke`` or ``astream``; the message and the chunks streamed."""
    if how == "invoke":
        return model.invoke(messages), []
    if how == "ainvoke":
        return asyncio.run(model.ainvoke(messages)), []
    if how == "stream":
        chunks = list(model.stream(messages))
    else:

        async def go() -> list[AIMessageChunk]:
            return [c async for c in model.astream(messages)]

        chunks = asyncio.run(go())
    joined = chunks[0]
    for c in chunks[1:]:
        joined = joined + c
    return joined, chunks


def run_agent(
    model: BaseChatModel, tools: list[BaseTool], how: str = "invoke", system: str = SYSTEM
) -> tuple[list[BaseMessage], list[list[AIMessageChunk]]]:
    """The agent loop, by hand: the conversation at its end, and the chunks each turn streamed."""
    bound = TapedChatModel(model).bind_tools(tools)
    by_name = {t.name: t for t in tools}
    messages: list[BaseMessage] = [SystemMessage(system), HumanMessage(QUESTION)]
    streamed = []
    for turn in range(1, 5):
        ai, chunks = ask(bound, messages, how)
        streamed.append(chunks)
        messages.append(ai)
        if not ai.tool_calls:
            return messages, streamed
        for i, call in enumerate(ai.tool_calls):
            messages.append(by_name[call["name"]].invoke(call, config={"metadata": {ORDER_KEY: (turn, i)}}))
    raise AssertionError("the agent did not finish")


def record(path: Path, how: str = "invoke", model: Scripted | None = None) -> tuple[list[BaseMessage], list[Any]]:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="record") as tape:
        out = run_agent(model or Scripted(), make_tools(runs), how)
        assert tape.stats()["live_model_calls"] == 3
    assert runs == {"add": 1, "weather": 1}
    return out


def replay(path: Path, how: str = "invoke", **kw: Any) -> tuple[list[BaseMessage], list[Any], dict[str, Any]]:
    runs: Counter[str] = Counter()
    with use_tape(path, mode="replay") as tape:
        system = kw.pop("system", SYSTEM)
        messages, streamed = run_agent(Exploding(), make_tools(runs, **kw), how, system)
        stats = tape.stats()
    assert runs == {}, "a tool ran in replay"
    return messages, streamed, stats


def lines(path: Path, kind: str = "model") -> list[dict[str, Any]]:
    return [line for line in map(json.loads, path.read_text().splitlines()) if line["type"] == kind]


def texts(chunks: list[AIMessageChunk]) -> list[Any]:
    return [c.content for c in chunks if c.content]


def same(a: BaseMessage, b: BaseMessage) -> bool:
    """Two messages equal but for the id LangChain gives a message without one (``lc_run-…``, new at each run)."""
    if isinstance(a, AIMessage) and (a.id or "").startswith("lc_"):
        a, b = a.model_copy(update={"id": None}), b.model_copy(update={"id": None})
    return a == b


# ---- tests ----------------------------------------------------------------------------------------------------


def test_a_three_turn_agent_replays_with_no_model_call_no_tool_run_and_its_usage(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    recorded, _ = record(path)
    assert recorded[-1].content == ANSWER

    turns = lines(path)
    assert [(t["seq"], t["model"], t["source"], t["stream"]) for t in turns] == [
        (1, MODEL, "langchain", False),
        (3, MODEL, "langchain", False),
        (5, MODEL, "langchain", False),
    ]
    assert [t["usage"] for t in turns] == [
        {"input": 100, "output": 20, "cache_read": 40},
        {"input": 200, "output": 20, "cache_read": 40},
        {"input": 300, "output": 20, "cache_read": 40},
    ]
    assert [t["response"]["finish_reason"] for t in turns] == ["tool_calls", "tool_calls", "stop"]
    assert [t["response"]["id"] for t in turns] == ["msg_1", "msg_2", "msg_3"]  # the provider's ids stay
    assert {t["model_name"] for t in (x["response"] for x in turns)} == {NAME + "-2026"}
    assert {t["name"] for t in lines(path, "tool")} == {"add", "weather", "forecast"}  # every offered tool

    replayed, _, stats = replay(path)
    assert replayed[-1].content == ANSWER
    assert stats["live_model_calls"] == 0 and stats["live_tool_calls"] == 0
    assert stats["model_hits"] == 3 and stats["tape_hits"] == 2
    assert stats["tokens_saved"] == 660 > 0
    assert len(replayed) == len(recorded) and all(map(same, replayed, recorded))  # messages, usage, metadata
    assert replayed[2].usage_metadata == {
        "input_tokens": 100,
        "output_tokens": 20,
        "total_tokens": 120,
        "input_token_details": {"cache_read": 40},
    }
    assert replayed[-1].response_metadata == {
        "finish_reason": "stop",
        "model_name": NAME + "-2026",
        "system_fingerprint": "fp_1",
    }


def test_the_request_on_the_tape_is_the_neutral_one(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    request = lines(path)[2]["request"]
    assert request["instructions"] == SYSTEM
    assert request["tools"] == ["add", "weather", "forecast"]
    assert request["settings"] == {"temperature": 0.0}  # the model's own parameters; its name is the model's
    assert request["messages"] == [
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]},
        {
            "role": "assistant",
            "parts": [{"type": "tool_call", "id": "call_add", "name": "add", "arguments": {"a": 1, "b": 2}}],
        },
        {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_add", "name": "add", "response": "3"}]},
        {
            "role": "assistant",
            "parts": [
                {"type": "text", "content": "Now the weather."},
                {"type": "tool_call", "id": "call_weather", "name": "weather", "arguments": {"city": "Paris"}},
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_weather", "name": "weather", "response": "14.5"}],
        },
    ]
    forecast = next(t for t in lines(path, "tool") if t["name"] == "forecast")
    assert forecast["description"] == "Tomorrow's weather of a city."
    assert len(lines(path, "tool")) == 3  # the tool adapter's contract and the model turn's are one: one line each


def test_bind_tools_is_the_wrapped_models_and_calls_through_the_taped_one(tmp_path: Path) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    model = Scripted(script=[turn_1])
    taped_model = TapedChatModel(model)
    assert taped_model.chat_model is model and taped_model._llm_type == "taped-scripted"
    bound = taped_model.bind_tools([add], tool_choice="add")
    assert isinstance(bound, RunnableBinding) and bound.bound is taped_model
    with use_tape(tmp_path / "one.jsonl", mode="record") as tape:
        ai = bound.invoke("add 1 and 2")
    assert ai.tool_calls == [{"name": "add", "args": {"a": 1, "b": 2}, "id": "call_add", "type": "tool_call"}]
    assert model.seen == [{"tools": [convert_to_openai_tool(add)], "tool_choice": "add"}]  # as the model formatted
    assert tape.stats()["live_model_calls"] == 1
    (turn,) = lines(tmp_path / "one.jsonl")
    assert turn["request"]["tools"] == ["add"] and turn["request"]["settings"]["tool_choice"] == "add"

    # a model without bind_tools (langchain-core's fake one): the tools in OpenAI's format, on the taped model
    fake = GenericFakeChatModel(messages=iter([AIMessage(content="hello")]))
    with use_tape(tmp_path / "fake.jsonl", mode="record"):
        assert TapedChatModel(fake).bind_tools([add]).invoke("hi").content == "hello"
    with use_tape(tmp_path / "fake.jsonl", mode="replay") as tape:
        gone = GenericFakeChatModel(messages=iter([]))  # a call would raise StopIteration
        assert TapedChatModel(gone).bind_tools([add]).invoke("hi").content == "hello"
        assert tape.stats()["model_hits"] == 1
    (turn,) = lines(tmp_path / "fake.jsonl")
    assert turn["model"] == "generic-fake-chat-model" and turn["request"]["tools"] == ["add"]


def test_two_recordings_give_the_same_keys(tmp_path: Path) -> None:
    """New message ids and tool-call ids made up at each run (``lc_…``), LangChain's run ids: none reaches a
    request."""
    first, second = Scripted(fresh=True), Scripted(fresh=True)
    a, _ = record(tmp_path / "a.jsonl", model=first)
    b, _ = record(tmp_path / "b.jsonl", model=second)
    assert a[2].tool_calls[0]["id"] != b[2].tool_calls[0]["id"] and a[2].id != b[2].id  # fresh, both
    keys = [[t["key"] for t in lines(tmp_path / name)] for name in ("a.jsonl", "b.jsonl")]
    assert keys[0] == keys[1] and len(set(keys[0])) == 3
    requests = json.dumps([t["request"] for t in lines(tmp_path / "a.jsonl")])
    assert "lc_" not in requests and "msg_" not in requests and '"call_1"' in requests

    replayed, _, stats = replay(tmp_path / "a.jsonl")  # the made-up ids come back from the tape: every turn hits
    assert replayed[-1].content == ANSWER and stats["model_hits"] == 3


def test_an_edited_system_prompt_is_a_model_drift_naming_the_instructions(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    with pytest.raises(ModelDrift) as caught:
        replay(path, system=SYSTEM + " Always answer in French.")
    assert caught.value.turn == 1
    assert "instructions" in str(caught.value) and "Always answer in French." in str(caught.value)


def test_an_edited_description_of_a_tool_the_model_never_calls_is_a_tool_drift(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    record(path)
    with pytest.raises(ToolDriftError) as caught:
        replay(path, forecast_doc="Tomorrow's weather of a city, hour by hour.")
    assert caught.value.tool == "forecast"
    assert "description" in str(caught.value)


@pytest.mark.parametrize("how", ["stream", "astream"])
def test_a_streamed_run_replays_as_a_stream_of_the_same_text(tmp_path: Path, how: str) -> None:
    path = tmp_path / "agent.jsonl"
    recorded, live = record(path, how)
    assert recorded[-1].content == ANSWER
    assert len(texts(live[2])) > 10 and "".join(texts(live[2])) == ANSWER

    turns = lines(path)
    assert all(t["stream"] for t in turns)
    last = turns[2]
    assert [e["content"] for e in last["events"] if e["type"] == "delta"] == texts(live[2])
    assert last["events"][:2] == [{"type": "start"}, {"type": "part", "index": 0, "part": {"type": "text"}}]
    assert last["events"][-1] == {"type": "end"}
    assert json.dumps(last).count("mild day") == 1  # the text is on the tape once: its deltas
    call = [e for e in turns[0]["events"] if e["type"] != "delta"]
    assert call[1] == {"type": "part", "index": 0, "part": {"type": "tool_call", "id": "call_add", "name": "add"}}
    assert "".join(e["arguments"] for e in turns[0]["events"] if "arguments" in e) == '{"a": 1, "b": 2}'

    replayed, again, stats = replay(path, how)
    assert replayed[-1].content == ANSWER
    assert [texts(c) for c in again] == [texts(c) for c in live]  # the same chunks of text, in the same order
    assert [[c.tool_call_chunks for c in t] for t in again] == [[c.tool_call_chunks for c in t] for t in live]
    assert all(map(same, replayed, recorded))  # joined: the same messages, usage and metadata
    assert stats["live_model_calls"] == 0 and stats["tokens_saved"] == 660


def test_a_plain_recording_serves_a_stream_and_a_stream_serves_a_plain_run(tmp_path: Path) -> None:
    plain, streamed = tmp_path / "plain.jsonl", tmp_path / "streamed.jsonl"
    recorded, _ = record(plain)
    record(streamed, "stream")

    messages, chunks, stats = replay(plain, "stream")
    assert texts(chunks[2]) == [ANSWER]  # rebuilt: one chunk per text
    assert chunks[2][-1].usage_metadata is not None and chunks[2][-1].chunk_position == "last"
    assert [m.content for m in messages] == [m.content for m in recorded]
    assert [getattr(m, "usage_metadata", None) for m in messages] == [
        getattr(m, "usage_metadata", None) for m in recorded
    ]
    assert stats["model_hits"] == 3 and stats["live_model_calls"] == 0

    messages, _, stats = replay(streamed, "ainvoke")
    assert messages[-1].content == ANSWER and messages[2].tool_calls == recorded[2].tool_calls
    assert stats["model_hits"] == 3 and stats["live_model_calls"] == 0
    assert [m.usage_metadata["input_tokens"] for m in messages if isinstance(m, AIMessage)] == [100, 200, 300]


class Given(BaseChatModel):
    """A model answering one message (``_generate``), or streaming given chunks."""

    message: AIMessage | None = None
    chunks: list[ChatGenerationChunk] = Field(default_factory=list)
    generation_info: dict[str, Any] | None = None
    llm_output: dict[str, Any] | None = None

    @property
    def _llm_type(self) -> str:
        return "given"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
        if self.message is None:
            raise AssertionError("the model was called in replay")
        generation = ChatGeneration(message=self.message, generation_info=self.generation_info)
        return ChatResult(generations=[generation], llm_output=self.llm_output)

    def _stream(self, *args: Any, **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        if not self.chunks:
            raise AssertionError("the model was called in replay")
        yield from self.chunks


def rich_message() -> AIMessage:
    """Content blocks (text with annotations, thinking with a field of its own, an image), a tool call, an invalid
    tool call, usage with cache reads and writes and reasoning tokens, an Anthropic-like stop reason, OpenAI-like
    ``token_usage`` (a key the redaction would blank)."""
    return AIMessage(
        content=[
            {"type": "thinking", "thinking": "The user wants a sum.", "checksum": "c_1"},
            {"type": "text", "text": "See the docs.", "annotations": [{"url": "https://example.com"}]},
            "plain text",
            {"type": "image", "url": "https://example.com/a.png"},
        ],
        tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "toolu_1"}],
        invalid_tool_calls=[{"name": "add", "args": "not json", "id": "toolu_2", "error": None}],
        usage_metadata={
            "input_tokens": 1000,
            "output_tokens": 50,
            "total_tokens": 1050,
            "input_token_details": {"cache_read": 800, "cache_creation": 100, "ephemeral_5m_input_tokens": 100},
            "output_token_details": {"reasoning": 30},
        },
        response_metadata={
            "stop_reason": "tool_use",
            "model": "claude-test-1",
            "id": "msg_01",
            "token_usage": {"prompt_tokens": 1000, "completion_tokens_details": {"reasoning_tokens": 30}},
        },
        additional_kwargs={"provider_extra": {"k": 1}},
        id="msg_01",
    )


def test_every_kind_of_content_rebuilds_as_it_was(tmp_path: Path) -> None:
    given = rich_message()
    path = tmp_path / "one.jsonl"
    info, output = {"logprobs": None, "seed": 7}, {"token_usage": {"total_tokens": 1050}, "plan": "x"}
    model = Given(message=given, generation_info=info, llm_output=output)
    with use_tape(path, mode="record"):
        live = TapedChatModel(model).generate([[HumanMessage("hi")]])
    (turn,) = lines(path)
    kinds = [p["type"] for p in turn["response"]["parts"]]
    assert kinds == ["reasoning", "text", "text", "image", "tool_call", "invalid_tool_call"]
    assert turn["usage"] == {"input": 1000, "output": 50, "cache_read": 800, "cache_write": 100}
    assert turn["response"]["finish_reason"] == "tool_calls" and turn["response"]["model_name"] == "claude-test-1"
    assert "[REDACTED]" not in path.read_text()  # token counts are no secrets

    with use_tape(path, mode="replay"):
        back = TapedChatModel(Given()).generate([[HumanMessage("hi")]])
    with use_tape(path, mode="replay"):  # the same turn, served as a stream
        streamed = list(TapedChatModel(Given()).stream([HumanMessage("hi")]))
    live_message, back_message = live.generations[0][0].message, back.generations[0][0].message
    assert same(back_message, live_message)
    assert back_message.usage_metadata == given.usage_metadata
    assert back.generations[0][0].generation_info == live.generations[0][0].generation_info
    assert back.llm_output == live.llm_output

    joined = streamed[0]
    for c in streamed[1:]:
        joined = joined + c
    assert joined.content == given.content and joined.tool_calls == given.tool_calls
    assert joined.invalid_tool_calls == given.invalid_tool_calls and joined.usage_metadata == given.usage_metadata


def test_a_stream_of_content_blocks_replays_as_it_came(tmp_path: Path) -> None:
    """Anthropic-like chunks: blocks merged by their ``index``, a field of a block in a chunk of its own."""
    pieces: list[Any] = [
        [{"type": "thinking", "thinking": "Let", "index": 0}],
        [{"type": "thinking", "thinking": " me think.", "index": 0}],
        [{"type": "thinking", "checksum": "c_9", "index": 0}],
        [{"type": "text", "text": "Hello", "index": 1}],
        [{"type": "text", "text": " there.", "index": 1}],
    ]
    chunks = [ChatGenerationChunk(message=AIMessageChunk(content=p, id="msg_9")) for p in pieces]
    tcc = [
        {"name": "add", "args": '{"a": ', "id": "toolu_9", "index": 2, "type": "tool_call_chunk"},
        {"name": None, "args": "1}", "id": None, "index": 2, "type": "tool_call_chunk"},
    ]
    chunks += [ChatGenerationChunk(message=AIMessageChunk(content=[], tool_call_chunks=[t])) for t in tcc]
    usage = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}
    end = AIMessageChunk(content=[], usage_metadata=usage, response_metadata={"stop_reason": "tool_use"})
    chunks.append(ChatGenerationChunk(message=end, generation_info={"provider": "given"}))
    path = tmp_path / "blocks.jsonl"
    with use_tape(path, mode="record"):
        live = list(TapedChatModel(Given(chunks=chunks)).stream([HumanMessage("hi")]))
    (turn,) = lines(path)
    assert [e["type"] for e in turn["events"]] == [
        "start",
        *("part", "delta", "delta"),
        *("part", "delta", "delta"),
        *("part", "delta", "delta"),
        "end",
    ]
    assert turn["response"]["parts"][0] == {
        "type": "reasoning",
        "content": "Let me think.",
        "block": {"type": "thinking", "index": 0, "checksum": "c_9"},
    }

    with use_tape(path, mode="replay"):
        again = list(TapedChatModel(Given()).stream([HumanMessage("hi")]))

    def joined(cs: list[AIMessageChunk]) -> AIMessageChunk:
        out = cs[0]
        for c in cs[1:]:
            out = out + c
        return out

    a, b = joined(live), joined(again)
    assert b.content == a.content and b.tool_calls == a.tool_calls == [
        {"name": "add", "args": {"a": 1}, "id": "toolu_9", "type": "tool_call"}
    ]
    assert (b.usage_metadata, b.response_metadata, b.id) == (a.usage_metadata, a.response_metadata, a.id)
    assert [c.content for c in live if c.content] == pieces
    assert [c.content for c in again if c.content] == [
        [{"type": "thinking", "index": 0, "checksum": "c_9", "thinking": "Let"}],  # a block's fields: at its start
        *(pieces[1], pieces[3], pieces[4]),
    ]


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
    with pytest.raises(TapeError, match=r"step 5 .*parts\[0\]\.content"):
        replay(path, "stream")


def test_a_model_that_raised_raises_again_in_replay(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"

    def overloaded(messages: list[BaseMessage]) -> AIMessage:
        raise ConnectionError("the model is overloaded")

    with use_tape(path, mode="record"), pytest.raises(ConnectionError):
        run_agent(Scripted(script=[overloaded]), make_tools(Counter()))
    with use_tape(path, mode="replay") as tape, pytest.raises(ConnectionError, match="overloaded"):
        run_agent(Exploding(), make_tools(Counter()))
    assert tape.stats()["live_model_calls"] == 0


def test_a_stream_the_caller_stops_reading_leaves_no_turn(tmp_path: Path) -> None:
    path = tmp_path / "agent.jsonl"
    with use_tape(path, mode="record"):
        stream = TapedChatModel(Scripted(script=[lambda m: AIMessage(ANSWER)])).stream([HumanMessage(QUESTION)])
        assert next(stream).content == "1"
        stream.close()
    assert lines(path) == []


class Sum(BaseModel):
    """The sum of two numbers."""

    a: int
    b: int
    total: int


def answer_sum(messages: list[BaseMessage]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": "Sum", "args": {"a": 1, "b": 2, "total": 3}, "id": "call_s"}])


class JsonScripted(Scripted):
    """A model whose structured output is a JSON schema in ``response_format`` (OpenAI's default method)."""

    def with_structured_output(self, schema: Any, *, include_raw: bool = False, **kwargs: Any) -> Any:
        spec = {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": True}
        llm = self.bind(response_format={"type": "json_schema", "json_schema": spec})
        return llm | RunnableLambda(lambda m: schema.model_validate_json(m.content))


class JsonExploding(JsonScripted, Exploding):
    pass


@pytest.mark.parametrize("include_raw", [False, True])
def test_structured_output_by_tool_calling_goes_through_the_tape(tmp_path: Path, include_raw: bool) -> None:
    path = tmp_path / "sum.jsonl"
    with use_tape(path, mode="record"):
        live = TapedChatModel(Scripted(script=[answer_sum])).with_structured_output(Sum, include_raw=include_raw)
        got = live.invoke("add 1 and 2")
    with use_tape(path, mode="replay") as tape:
        again = TapedChatModel(Exploding()).with_structured_output(Sum, include_raw=include_raw).invoke("add 1 and 2")
        assert tape.stats()["model_hits"] == 1
    parsed = got["parsed"] if include_raw else got
    assert parsed == Sum(a=1, b=2, total=3) and (again["parsed"] if include_raw else again) == parsed
    (turn,) = lines(path)
    assert turn["request"]["tools"] == ["Sum"] and turn["request"]["settings"]["tool_choice"] == "any"


def test_structured_output_by_a_response_format_is_the_output_schema(tmp_path: Path) -> None:
    path = tmp_path / "sum.jsonl"

    def as_json(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(content='{"a": 1, "b": 2, "total": 3}')

    with use_tape(path, mode="record"):
        got = TapedChatModel(JsonScripted(script=[as_json])).with_structured_output(Sum).invoke("add 1 and 2")
    with use_tape(path, mode="replay"):
        again = TapedChatModel(JsonExploding()).with_structured_output(Sum).invoke("add 1 and 2")
    assert got == again == Sum(a=1, b=2, total=3)
    (turn,) = lines(path)
    assert turn["request"]["output_schema"] == Sum.model_json_schema()
    assert turn["request"]["settings"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Sum", "strict": True},
    }


def test_every_kind_of_message_and_tool_definition_is_normalised(tmp_path: Path) -> None:
    """Ids LangChain, LangGraph or a provider gave messages, LangChain's block ids, response metadata and usage
    never reach the request; a later system message stays a message; Anthropic-format tools and their options."""
    history: list[BaseMessage] = [
        SystemMessage("Be brief."),
        SystemMessage("Use metric units."),
        HumanMessage(
            [{"type": "text", "text": "Look:", "id": "lc_1b2"}, {"type": "image", "url": "https://x/a.png"}],
            id=str(uuid.uuid4()),  # as LangGraph's add_messages gives every message
            name="alice",
        ),
        AIMessage(
            content=[{"type": "reasoning", "reasoning": "Hm.", "id": "lc_9f"}],
            tool_calls=[{"name": "add", "args": {"a": 1}, "id": "lc_abc"}],
            id="lc_run-0d1",
            response_metadata={"created": 1733140000, "finish_reason": "tool_calls"},
            usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        ),
        ToolMessage("oops", tool_call_id="lc_abc", status="error", artifact={"trace": 1}),
        SystemMessage("Now answer."),
    ]
    tools = [
        {"name": "add", "description": "Add.", "input_schema": {"type": "object"}, "cache_control": {"x": 1}},
        {"type": "web_search_20250305", "name": "web_search", "max_uses": 2},
    ]
    path = tmp_path / "one.jsonl"
    with use_tape(path, mode="record"):
        TapedChatModel(Scripted(script=[lambda m: AIMessage(ANSWER)])).bind(tools=tools, stop=["END"]).invoke(history)
    (turn,) = lines(path)
    request = turn["request"]
    assert request["instructions"] == "Be brief.\n\nUse metric units."
    assert request["messages"] == [
        {
            "role": "user",
            "name": "alice",
            "parts": [
                {"type": "text", "content": "Look:"},
                {"type": "image", "block": {"type": "image", "url": "https://x/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "Hm."},  # its LangChain id left out, nothing else to keep
                {"type": "tool_call", "id": "call_1", "name": "add", "arguments": {"a": 1}},
            ],
        },
        {
            "role": "tool",
            "parts": [
                {"type": "tool_call_response", "id": "call_1", "name": "add", "response": "oops", "status": "error"}
            ],
        },
        {"role": "system", "parts": [{"type": "text", "content": "Now answer."}]},
    ]
    assert request["tools"] == ["add", "web_search"]
    assert request["settings"] == {
        "temperature": 0.0,
        "stop": ["END"],
        "tool_options": {"add": {"cache_control": {"x": 1}}},
    }
    web = next(t for t in lines(path, "tool") if t["name"] == "web_search")
    assert web["annotations"] == {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}


def _check(root: Path) -> Any:
    config = load_config(root / "tapes.toml")
    return check(config.tapes_dir, config)[0]


def test_a_model_that_now_asks_for_another_tool_is_model_tools_in_check(tmp_path: Path) -> None:
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    path = tmp_path / "tapes" / "agent.jsonl"
    record(path)

    def forecast_instead(messages: list[BaseMessage]) -> AIMessage:
        return AIMessage(content="", tool_calls=[{"name": "forecast", "args": {"city": "Paris"}, "id": "call_f"}])

    with use_tape(path, mode="record"):  # a golden exists: a candidate
        run_agent(
            Scripted(script=(turn_1, forecast_instead, lambda m: AIMessage(content="rain"))), make_tools(Counter())
        )
    texts = [f.text for f in _check(tmp_path).findings]
    want = "[MODEL TOOLS] model-requested sequence changed (edit distance 1): ['add', 'weather'] → ['add', 'forecast']"
    assert want in texts, texts


def test_a_cut_point_run_with_one_tool_live_reports_its_changed_result_by_path(tmp_path: Path) -> None:
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare]\nmodel_turns = "by_place"\n')
    path = tmp_path / "tapes" / "agent.jsonl"
    record(path)
    runs: Counter[str] = Counter()
    with Tape(path, "replay", live=["weather"]) as t, use_tape(t):  # the tool's code changed: another sensor
        messages, _ = run_agent(Exploding(), make_tools(runs, celsius=16.0))
    assert messages[-1].content == ANSWER and runs == {"weather": 1}
    texts = [f.text for f in _check(tmp_path).findings]
    assert any(x.startswith("behaviour drift: weather result") and "16.0" in x for x in texts), texts
    assert any("served over a changed input" in x for x in texts), texts
