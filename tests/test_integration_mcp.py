"""The MCP adapter with the real SDK: record through an in-memory client/server pair, replay with the server
gone, contract drift from a changed listing; ``tapetui mcp serve`` answering a real SDK client over stdio;
``tapetui mcp verify`` against a live server started from a script."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import orjson
import pytest
from mcp import Client, MCPError, StdioServerParameters
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import INVALID_PARAMS, CallToolResult, ListToolsResult, Tool, ToolAnnotations

from tapetui import TapeDrift, TapeError, ToolDriftError, use_tape
from tapetui.cli import main
from tapetui.integrations.mcp import TapedClient
from tests.conftest import ROOT

DESCRIPTION = "Search the notes for a query; returns the matching titles."

# A live MCP server for `verify`: the same tools as `server()` below, its description and results steered by
# environment variables (the child inherits the environment).
SERVER_SCRIPT = textwrap.dedent(
    """
    import os
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import ToolAnnotations

    srv = MCPServer("notes", version="1.0", log_level="ERROR")


    @srv.tool(description=os.environ.get("NOTES_DESC", {desc!r}), annotations=ToolAnnotations(read_only_hint=True))
    def search(query: str, limit: int = 3) -> list[str]:
        if os.environ.get("NOTES_CRASH"):
            os._exit(3)  # the server dies in the middle of verify --calls
        return [f"{{query}} {{i + int(os.environ.get('NOTES_SHIFT', '0'))}}" for i in range(limit)]


    @srv.tool(  # NOTES_SAVE_RO: a server that now claims `save` is read-only
        description="Save a note.",
        annotations=ToolAnnotations(read_only_hint=True) if os.environ.get("NOTES_SAVE_RO") else None,
    )
    def save(title: str) -> str:
        if os.environ.get("NOTES_SAVE_LOG"):
            with open(os.environ["NOTES_SAVE_LOG"], "a") as fh:
                fh.write("saved")
        return "saved " + title


    @srv.tool(description="Always fails.", annotations=ToolAnnotations(read_only_hint=True))
    def broken(reason: str) -> str:
        raise ToolError("broken: " + reason)


    if __name__ == "__main__":
        srv.run("stdio")
    """
).format(desc=DESCRIPTION)


class Runs:
    def __init__(self) -> None:
        self.n: dict[str, int] = {}

    def hit(self, name: str) -> None:
        self.n[name] = self.n.get(name, 0) + 1

    @property
    def total(self) -> int:
        return sum(self.n.values())


def server(runs: Runs, description: str = DESCRIPTION) -> MCPServer[Any]:
    """What SERVER_SCRIPT serves, in process, counting its tools' executions."""
    srv: MCPServer[Any] = MCPServer("notes", version="1.0", log_level="ERROR")

    @srv.tool(description=description, annotations=ToolAnnotations(read_only_hint=True))
    def search(query: str, limit: int = 3) -> list[str]:
        runs.hit("search")
        return [f"{query} {i}" for i in range(limit)]

    @srv.tool(description="Save a note.")
    def save(title: str) -> str:
        runs.hit("save")
        return "saved " + title

    @srv.tool(description="Always fails.", annotations=ToolAnnotations(read_only_hint=True))
    def broken(reason: str) -> str:
        runs.hit("broken")
        raise ToolError("broken: " + reason)

    return srv


async def session(client: Any, limit: int = 2) -> list[CallToolResult]:
    """A multi-step agent run: list the tools, then search, save, fail, search again."""
    await client.list_tools()
    return [
        await client.call_tool("search", {"query": "tapes", "limit": limit}),
        await client.call_tool("save", {"title": "tapes 0"}),
        await client.call_tool("broken", {"reason": "disk"}),
        await client.call_tool("search", {"query": "replay"}),
    ]


@pytest.fixture
def recorded(tmp_path: Path) -> Iterator[tuple[Path, list[CallToolResult]]]:
    tape = tmp_path / "notes.jsonl"
    runs = Runs()

    async def record() -> list[CallToolResult]:
        with use_tape(tape, mode="record"):
            async with TapedClient(Client(server(runs))) as client:
                return await session(client)

    results = anyio.run(record)
    assert runs.n == {"search": 2, "save": 1, "broken": 1}
    yield tape, results


def lines(tape: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in tape.read_bytes().splitlines()]


# ---- the adapter -------------------------------------------------------------------------
async def test_replay_without_the_server_returns_the_same_results_and_runs_nothing(
    recorded: tuple[Path, list[CallToolResult]],
) -> None:
    tape, live = recorded
    tools = {rec["name"]: rec for rec in lines(tape) if rec.get("type") == "tool"}
    assert tools["search"]["form"] == 3 and tools["search"]["description"] == DESCRIPTION
    assert tools["search"]["annotations"] == {"readOnlyHint": True}
    assert tools["search"]["schema"]["properties"]["limit"]["default"] == 3
    assert tools["save"]["side_effect"] is True and tools["search"]["side_effect"] is False

    with use_tape(tape, mode="replay") as t:
        client = TapedClient(None)  # the server is gone
        listing = await client.list_tools()
        replayed = await session(client)
        assert t.stats()["tape_hits"] == 4 and t.stats()["live_tool_calls"] == 0
    assert replayed == live and all(isinstance(r, CallToolResult) for r in replayed)
    assert replayed[0].structured_content == {"result": ["tapes 0", "tapes 1"]}
    assert [tool.name for tool in listing.tools] == ["search", "save", "broken"]
    assert listing.tools[0].description == DESCRIPTION and listing.tools[0].annotations == ToolAnnotations(
        read_only_hint=True
    )


async def test_is_error_results_are_recorded_and_replayed_as_results(
    recorded: tuple[Path, list[CallToolResult]],
) -> None:
    tape, live = recorded
    assert live[2].is_error is True and "broken: disk" in live[2].content[0].text  # type: ignore[union-attr]
    call = [rec for rec in lines(tape) if rec.get("tool") == "broken"][0]
    assert call["result"]["isError"] is True and "error" not in call
    with use_tape(tape, mode="replay"):
        replayed = await session(TapedClient(None))
    assert replayed[2] == live[2] and replayed[2].is_error is True


async def test_replay_against_the_unchanged_server_runs_nothing(recorded: tuple[Path, list[CallToolResult]]) -> None:
    tape, live = recorded
    runs = Runs()
    with use_tape(tape, mode="replay") as t:
        async with TapedClient(Client(server(runs))) as client:
            assert await session(client) == live
        assert t.stats()["fingerprint_changes"] == 0
    assert runs.total == 0


async def test_a_changed_argument_is_drift_naming_it(recorded: tuple[Path, list[CallToolResult]]) -> None:
    tape, _ = recorded
    with use_tape(tape, mode="replay"), pytest.raises(TapeDrift) as e:
        await session(TapedClient(None), limit=5)
    assert "args.limit  2 → 5" in str(e.value)


async def test_a_changed_description_on_the_server_is_tool_drift_naming_description(
    recorded: tuple[Path, list[CallToolResult]],
) -> None:
    tape, _ = recorded
    runs = Runs()
    changed = DESCRIPTION + " Also emails the results to the team."
    with use_tape(tape, mode="replay"), pytest.raises(ToolDriftError) as e:
        async with TapedClient(Client(server(runs, description=changed))) as client:
            await session(client)
    assert e.value.tool == "search"
    assert any(line.startswith("description: +") and "emails" in line for line in e.value.explanation)
    assert runs.total == 0


async def test_a_session_is_wrapped_too_and_listed_before_its_first_recorded_call(tmp_path: Path) -> None:
    tape = tmp_path / "s.jsonl"
    runs = Runs()
    async with Client(server(runs), mode="legacy") as client:  # the JSON-RPC stream pair of the SDK's tests
        with use_tape(tape, mode="record"):
            taped = TapedClient(client.session)  # no list_tools(): the adapter lists before recording
            result = await taped.call_tool("search", {"query": "q", "limit": 1})
    assert result.structured_content == {"result": ["q 0"]}
    tools = {rec["name"]: rec for rec in lines(tape) if rec.get("type") == "tool"}
    assert sorted(tools) == ["broken", "save", "search"]  # every tool the server offers, called or not
    assert tools["search"]["description"] == DESCRIPTION and tools["search"]["annotations"] == {"readOnlyHint": True}


async def test_the_current_tape_is_looked_up_at_call_time(recorded: tuple[Path, list[CallToolResult]]) -> None:
    tape, live = recorded
    client = TapedClient(None)  # made before any tape exists
    with pytest.raises(TapeError, match="no tape"):
        await client.call_tool("search", {"query": "tapes", "limit": 2})
    with use_tape(tape, mode="replay"):
        assert await client.call_tool("search", {"query": "tapes", "limit": 2}) == live[0]
    with use_tape(tape, mode="record"), pytest.raises(TapeError, match="has no MCP client"):
        await client.call_tool("search", {"query": "tapes", "limit": 2})


async def test_a_protocol_error_is_recorded_and_raised_again(tmp_path: Path) -> None:
    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return ListToolsResult(tools=[Tool(name="strict", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: Any) -> CallToolResult:
        raise MCPError(INVALID_PARAMS, "x must be positive", {"field": "x"})

    tape = tmp_path / "e.jsonl"
    low: Server[Any] = Server("strict", on_list_tools=list_tools, on_call_tool=call_tool)
    with use_tape(tape, mode="record"), pytest.raises(MCPError):
        async with TapedClient(Client(low)) as client:
            await client.call_tool("strict", {"x": -1})
    with use_tape(tape, mode="replay"), pytest.raises(MCPError) as e:
        await TapedClient(None).call_tool("strict", {"x": -1})
    assert (e.value.code, e.value.message, e.value.data) == (INVALID_PARAMS, "x must be positive", {"field": "x"})


# ---- tapetui mcp serve ------------------------------------------------------------------
@pytest.mark.slow
async def test_serve_answers_a_real_sdk_client_over_stdio(recorded: tuple[Path, list[CallToolResult]]) -> None:
    tape, live = recorded
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tapetui", "mcp", "serve", str(tape)],
        env={"PYTHONPATH": str(ROOT)},
        cwd=str(tape.parent),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        listing = await client.list_tools()
        first = await client.call_tool("search", {"query": "tapes", "limit": 2})
        failed = await client.call_tool("broken", {"reason": "disk"})
        missed = await client.call_tool("search", {"query": "tapes", "limit": 9})
    assert [t.name for t in listing.tools] == ["search", "save", "broken"]
    assert listing.tools[0].description == DESCRIPTION
    assert first == live[0]
    assert failed == live[2] and failed.is_error
    assert missed.is_error and "nearest recorded search is step" in missed.content[0].text  # type: ignore[union-attr]


def test_serve_a_tape_that_does_not_exist_is_an_error_naming_it(tmp_path: Path, capsys: Any) -> None:
    assert main(["mcp", "serve", str(tmp_path / "nope.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "nope.jsonl: no such tape" in err and "Traceback" not in err


# ---- tapetui mcp verify -----------------------------------------------------------------
@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "notes_server.py"
    path.write_text(SERVER_SCRIPT)
    return path


def verify(capsys: Any, tape: Path, script: Path, *options: str) -> tuple[int, str, str]:
    code = main(["mcp", "verify", *options, str(tape), "--", sys.executable, str(script)])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.slow
def test_verify_the_same_server_exits_0_with_json(
    recorded: tuple[Path, list[CallToolResult]], script: Path, capsys: Any
) -> None:
    tape, _ = recorded
    code = main(
        ["mcp", "verify", str(tape), "--calls", "--json", "--", sys.executable, str(script)]
    )  # options after TAPE
    out, err = capsys.readouterr()
    assert code == 0, out + err
    doc = orjson.loads(out)
    assert doc["ok"] is True and doc["exit"] == 0 and doc["error"] is None
    assert doc["server"] == {"name": "notes", "version": "1.0"}
    assert [(t["tool"], t["status"]) for t in doc["tools"]] == [
        ("search", "same"),
        ("save", "same"),
        ("broken", "same"),
    ]
    calls = {c["seq"]: c for c in doc["calls"]}
    assert [calls[s]["status"] for s in (1, 2, 3, 4)] == ["same", "skipped", "same", "same"]
    assert "recorded as a tool with side effects" in calls[2]["reason"] and "--yes" in calls[2]["reason"]
    assert doc["summary"]["calls_skipped"] == 1 and doc["summary"]["contracts_changed"] == 0


@pytest.mark.slow
def test_verify_a_changed_description_exits_1_naming_it(
    recorded: tuple[Path, list[CallToolResult]], script: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape, _ = recorded
    monkeypatch.setenv("NOTES_DESC", DESCRIPTION + " Also emails the results.")
    code, out, _ = verify(capsys, tape, script)
    assert code == 1
    assert "✗ search  contract changed" in out
    assert 'description: + "Also emails the results."' in out
    assert "✓ save  same contract" in out
    assert "results not checked" in out  # no --calls


@pytest.mark.slow
def test_verify_calls_a_changed_result_exits_1_by_path(
    recorded: tuple[Path, list[CallToolResult]], script: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape, _ = recorded
    monkeypatch.setenv("NOTES_SHIFT", "1")
    code, out, _ = verify(capsys, tape, script, "--calls", "--yes")
    assert code == 1
    assert "✗ step 1 search  result differs" in out
    assert 'result.structuredContent.result[0]  "tapes 0" → "tapes 1"' in out
    assert "✓ step 2 save  same result" in out  # --yes: sent too
    assert "contract" in out and "0 contract(s) changed" in out


def test_verify_errors_exit_2_with_a_message_never_a_traceback(
    recorded: tuple[Path, list[CallToolResult]], tmp_path: Path, capsys: Any
) -> None:
    tape, _ = recorded
    assert main(["mcp", "verify", str(tape), "--", str(tmp_path / "no-such-server")]) == 2
    out = capsys.readouterr().out
    assert "cannot start the server" in out and "no-such-server" in out
    assert main(["mcp", "verify", "--json", str(tape), "--", sys.executable, "-c", "print('hello')"]) == 2
    captured = capsys.readouterr()
    doc = orjson.loads(captured.out)
    assert doc["ok"] is False and doc["exit"] == 2 and "closed the connection" in doc["error"]
    assert "Traceback" not in captured.err
    assert main(["mcp", "verify", str(tmp_path / "nope.jsonl"), "--", sys.executable, "x.py"]) == 2
    assert "nope.jsonl: no such tape" in capsys.readouterr().err
    assert main(["mcp", "verify", str(tape)]) == 2
    assert "no server command" in capsys.readouterr().err


@pytest.mark.slow
def test_verify_never_sends_a_call_recorded_with_side_effects_without_yes(
    recorded: tuple[Path, list[CallToolResult]],
    script: Path,
    tmp_path: Path,
    capsys: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The live server now says `save` is read-only; the tape says it was not: verify does not take its word."""
    tape, _ = recorded
    log = tmp_path / "saved.log"
    monkeypatch.setenv("NOTES_SAVE_RO", "1")
    monkeypatch.setenv("NOTES_SAVE_LOG", str(log))
    code, out, _ = verify(capsys, tape, script, "--calls")
    assert code == 1  # the annotation change is reported
    assert "step 2 save  skipped: recorded as a tool with side effects" in out
    assert not log.exists()


@pytest.mark.slow
def test_verify_a_server_that_dies_during_the_calls_is_exit_2_not_a_difference(
    recorded: tuple[Path, list[CallToolResult]], script: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape, _ = recorded
    monkeypatch.setenv("NOTES_CRASH", "1")
    code, out, _ = verify(capsys, tape, script, "--calls")
    assert code == 2 and "closed the connection" in out


def test_verify_an_empty_tape_is_an_error(script: Path, tmp_path: Path, capsys: Any) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    code, out, err = verify(capsys, empty, script)
    assert code == 2 and "nothing to verify" in out + err


def test_verify_a_server_that_never_answers_times_out_and_is_stopped_without_a_grace_period(
    recorded: tuple[Path, list[CallToolResult]], capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp.client.stdio as sdk_stdio

    graces: list[float] = []
    waited = sdk_stdio._wait_for_process_exit

    async def spy(process: Any, timeout: float) -> bool:
        graces.append(timeout)
        return await waited(process, timeout)

    monkeypatch.setattr(sdk_stdio, "_wait_for_process_exit", spy)
    tape, _ = recorded
    cmd = [sys.executable, "-c", "import time; time.sleep(60)"]  # reads nothing, answers nothing
    assert main(["mcp", "verify", "--timeout", "0.3", str(tape), "--", *cmd]) == 2
    assert "no MCP answer" in capsys.readouterr().out
    assert graces and graces[0] == 0  # stopped at once: no 2 s wait for a server that never spoke MCP
    assert sdk_stdio.PROCESS_TERMINATION_TIMEOUT == 2.0  # the SDK's own grace, back for the next server


async def test_parallel_calls_with_order_replay_whatever_order_they_start_in(tmp_path: Path) -> None:
    tape = tmp_path / "p.jsonl"
    queries = ["a", "b", "c"]

    async def run(client: TapedClient, order: list[int]) -> dict[int, CallToolResult]:
        out: dict[int, CallToolResult] = {}

        async def one(i: int) -> None:
            out[i] = await client.call_tool("search", {"query": queries[i]}, order=(0, i), call_id=f"call-{i}")

        async with anyio.create_task_group() as tg:
            for i in order:
                tg.start_soon(one, i)
        return out

    runs = Runs()
    with use_tape(tape, mode="record"):
        async with TapedClient(Client(server(runs))) as client:
            live = await run(client, [0, 1, 2])
    with use_tape(tape, mode="replay"):
        assert await run(TapedClient(None), [2, 0, 1]) == live
    assert runs.n == {"search": 3}
    assert sorted(rec["call_id"] for rec in lines(tape) if rec.get("type") == "call") == ["call-0", "call-1", "call-2"]


async def test_every_listed_tool_is_on_the_tape_called_or_not(tmp_path: Path) -> None:
    """What the model was offered is part of the session: `serve` and an offline listing show it all."""
    tape = tmp_path / "offered.jsonl"
    srv: MCPServer[Any] = MCPServer("offered", version="1.0", log_level="ERROR")

    @srv.tool(description="Look a word up.", annotations=ToolAnnotations(read_only_hint=True))
    def define(word: str) -> str:
        return word.upper()

    @srv.tool(description="Delete every note.", annotations=ToolAnnotations(destructive_hint=True))
    def purge() -> str:
        raise AssertionError("never called")

    with use_tape(tape, mode="record"):
        async with TapedClient(Client(srv)) as client:
            await client.list_tools()
            await client.call_tool("define", {"word": "tape"})
    with use_tape(tape, mode="replay"):
        listing = await TapedClient(None).list_tools()
    assert sorted(t.name for t in listing.tools) == ["define", "purge"]
    assert next(t for t in listing.tools if t.name == "purge").annotations == ToolAnnotations(destructive_hint=True)


async def test_a_replay_with_a_live_server_checks_its_contracts_without_being_asked(
    recorded: tuple[Path, list[CallToolResult]],
) -> None:
    """No list_tools() call in the replaying code: the client lists once, and the changed description is drift."""
    tape, _ = recorded
    runs = Runs()
    with use_tape(tape, mode="replay"):
        async with TapedClient(Client(server(runs, description=DESCRIPTION + " Then email them."))) as client:
            with pytest.raises(ToolDriftError, match="description"):
                await client.call_tool("search", {"query": "tapes", "limit": 2})
    assert runs.total == 0
