"""README "Async agents and parallel tool calls": its ``call_tool``, called as a framework calls it (one model
response with two calls, run at once), recorded and then replayed with no tool run."""

# ruff: noqa: F821 (call_tool is the README block's)
import asyncio

from tapetui import Tape


class Executor:
    """A framework's own tool executor."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    async def run(self, name: str, args: dict) -> dict:
        self.ran.append(name)
        return {"tool": name, "hits": [f"{args['query']} #1"]}


executor = Executor()

# readme-block


async def turn() -> list:
    return await asyncio.gather(
        call_tool("search", {"query": "tapes"}, "call_1", 1, 0),
        call_tool("search", {"query": "drift"}, "call_2", 1, 1),
    )


with Tape("tapes/parallel.jsonl", mode="record") as tape:
    recorded = asyncio.run(turn())
executor.ran.clear()
with Tape("tapes/parallel.jsonl", mode="replay") as tape:
    replayed = asyncio.run(turn())
    assert tape.stats()["tape_hits"] == 2, tape.stats()
assert replayed == recorded and not executor.ran, (recorded, replayed, executor.ran)
