"""README "LangChain": the block with the tools, chat model and messages it takes as yours, run once recording
and once replaying; the replay runs no tool and gives the same ToolMessages."""

# ruff: noqa: F821 (asyncio, message, replies and run_at_once are the README block's)
from collections import Counter

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from tapetui import use_tape

ran: Counter[str] = Counter()


@tool
def search(query: str) -> list[str]:
    """Search the notes; returns matching titles."""
    ran["search"] += 1
    return [f"{query} #1"]


@tool
def summarize(text: str, max_words: int = 20) -> str:
    """Summarize a text."""
    ran["summarize"] += 1
    return " ".join(text.split()[:max_words])


class ChatModel(FakeMessagesListChatModel):
    """A scripted stand-in for a real chat model, which binds tools."""

    def bind_tools(self, tools, **kwargs):
        return self


calls = [
    {"name": "search", "args": {"query": "tapes"}, "id": "call_1"},
    {"name": "summarize", "args": {"text": "Agents call tools. Tools drift."}, "id": "call_2"},
]
model = ChatModel(responses=[AIMessage("", tool_calls=calls)])  # the same answer each time it is asked
messages = [HumanMessage("What do my notes say about tapes?")]


def agent_turn(mode: str) -> tuple:
    with use_tape("tapes/tools.jsonl", mode=mode) as tape:
        # readme-block
        at_once = asyncio.run(run_at_once(message, 1))
        return [r.content for r in replies], [r.content for r in at_once], tape.stats()


recorded = agent_turn("record")
ran.clear()
replayed = agent_turn("replay")
assert replayed[:2] == recorded[:2] and not ran, (recorded, replayed, ran)
assert replayed[2]["tape_hits"] == 4, replayed[2]
