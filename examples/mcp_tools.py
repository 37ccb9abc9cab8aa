"""An MCP client's tool calls recorded on a tape, then replayed with the server gone.

Offline: the server is the SDK's own `MCPServer`, in process (the in-memory pairing of `mcp.Client`). The
client lists its tools (their contracts go on the tape), searches, fails once (an `isError` result), and
saves; the replay runs with no server at all and gets the same `CallToolResult`s. Needs
`pip install 'tapetui[mcp]'`; run `python examples/mcp_tools.py`.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import anyio
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ToolAnnotations

from tapetui import use_tape
from tapetui.integrations.mcp import TapedClient

executions: Counter[str] = Counter()  # how often each tool really ran
server = MCPServer("notes", log_level="ERROR")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def search(query: str, limit: int = 3) -> list[str]:
    """Search the notes; returns matching titles."""
    executions["search"] += 1
    if not query.strip():
        raise ToolError("empty query")  # the client gets an isError result, recorded as a result
    return [f"{query} #{i}" for i in range(limit)]


@server.tool()
def save(title: str) -> str:
    """Save a note."""
    executions["save"] += 1
    return f"saved {title!r}"


async def agent(client: TapedClient) -> list[CallToolResult]:
    """What an agent does with the tools (the model's decisions, scripted)."""
    tools = await client.list_tools()
    assert [t.name for t in tools.tools] == ["search", "save"]
    found = await client.call_tool("search", {"query": "tapes", "limit": 2})
    failed = await client.call_tool("search", {"query": " "})
    saved = await client.call_tool("save", {"title": found.structured_content["result"][0]})
    return [found, failed, saved]


def texts(results: list[CallToolResult]) -> list[str]:
    return [getattr(r.content[0], "text", "") for r in results]


async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "notes.jsonl"
        with use_tape(path, mode="record"):
            async with TapedClient(Client(server)) as client:  # the one line: TapedClient(...)
                recorded = await agent(client)
        print(f"record: {texts(recorded)}   [{sum(executions.values())} tool executions]")

        executions.clear()
        with use_tape(path, mode="replay") as tape:
            replayed = await agent(TapedClient(None))  # no server: contracts and results come from the tape
            hits = tape.stats()["tape_hits"]
        runs = sum(executions.values())
        print(f"replay: {texts(replayed)}   [{runs} tool executions, {hits} calls from the tape]")
        assert replayed == recorded and replayed[1].is_error and not executions


if __name__ == "__main__":
    anyio.run(main)
