"""``tapetui mcp serve`` and ``tapetui mcp verify``: a tape as an MCP server, and a live MCP server against a tape.

``serve`` answers an MCP client over stdio from a tape (replay: no tool ever runs): it lists the recorded
tool contracts and answers recorded calls; a call that is not on the tape gets an ``isError`` result
naming the nearest recorded call.

``verify`` starts a live MCP server (a command speaking stdio), lists its tools and compares each
contract with the tape's tool lines, field by field (as replay explains a ``ToolDriftError``); with
``--calls`` it also sends the tape's calls again and reports result differences by JSON path. Calls of
tools the server does not mark read-only (or marks destructive) are skipped unless ``--yes``.

The command line (:mod:`tapetui.cli`) imports this module only for ``tapetui mcp``: the MCP SDK is an
optional extra. Output goes through the callables it passes, so this layer never imports a front.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import mcp.client.stdio as sdk_stdio
from mcp import Client, StdioServerParameters
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED, REQUEST_TIMEOUT, CallToolResult, ListToolsResult, TextContent
from mcp.types import Tool as McpTool

from tapetui.core.canon import dumps
from tapetui.core.changes import MISSING, Change, format_changes
from tapetui.core.config import Config, config_for_tape
from tapetui.core.contract import contract_change
from tapetui.core.errors import TapeError, TapeReplayedError
from tapetui.core.index import TapeIndex
from tapetui.core.jsondiff import diff_values
from tapetui.core.live import tool_as_written
from tapetui.core.redact import REDACTED
from tapetui.core.tape import Tape
from tapetui.core.tapefile import read_index
from tapetui.integrations.mcp import (
    PAGE_CAP,
    as_call_tool_result,
    error_result,
    is_read_only,
    mcp_error_from,
    recorded_tools,
    tool_contract,
    wire,
)
from tapetui.review.lookup import tape_file

__all__ = ["CallCheck", "ToolCheck", "VerifyReport", "find_tape", "replay_server", "serve", "verify"]

Line = Callable[[str, str | None], None]
"""Writes one line of human output, with an optional style (``red``, ``green``, ``yellow``, ``dim``, ``bold``)."""

_SERVER_NAME = "tapetui-replay"


def find_tape(name: str, tapes_dir: Path) -> Path:
    """A tape given as a path (``.jsonl`` may be left out), else as a session name in the tapes folder, which it
    must not lead out of: the command line's lookup (:func:`tapetui.review.lookup.tape_file`).

    Raises:
        TapeError: neither exists, or the name leads out of the tapes folder (the message says which).
    """
    return tape_file(tapes_dir, name)


# ---- serve ------------------------------------------------------------------------------
def replay_server(tape: Tape, tools: list[McpTool]) -> Server[Any]:
    """An MCP server (the SDK's low-level ``Server``) answering from ``tape``, a replay: no tool runs.

    ``tools`` is what it lists (the tape's tool lines: :func:`~tapetui.integrations.mcp.recorded_tools`).
    A recorded call is answered with its recorded result; a recorded protocol error (``MCPError``) is sent
    again as that error; a call that is not on the tape (or drifted from it) gets an ``isError`` result
    whose text is the ``TapeMiss`` / ``TapeDrift`` message, naming the nearest recorded call.
    """
    listing = ListToolsResult(tools=tools)

    async def on_list_tools(ctx: Any, params: Any) -> ListToolsResult:
        return listing

    async def on_call_tool(ctx: Any, params: Any) -> CallToolResult:
        name, arguments = params.name, params.arguments or {}
        try:
            value = await tape.acall(name, arguments)
        except TapeReplayedError as e:
            err = mcp_error_from(e)
            if err is not None:
                raise err from None
            return error_result(f"recorded error: {e}")
        except MCPError:
            raise
        except TapeError as e:  # a miss, a drift, a closed tape: fail closed, saying why
            return error_result(str(e))
        except Exception as e:  # a recorded error raised again as its own class
            return error_result(f"recorded error: {type(e).__name__}: {e}")
        return _served(value, name)

    return Server(
        _SERVER_NAME,
        version=_version(),
        instructions=f"Replays the tape {tape.path.name}: recorded calls only; no tool runs.",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
    )


def _served(value: Any, tool: str) -> CallToolResult:
    """A recorded result as a ``CallToolResult``: as recorded by ``TapedClient``, else (a tape recorded some
    other way) its JSON as text content, and as structured content when it is an object."""
    try:
        return as_call_tool_result(value, tool)
    except TapeError:
        text = value if isinstance(value, str) else _json_text(value)
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=value if isinstance(value, dict) else None,
        )


def serve(path: Path, note: Line) -> int:
    """Serve the tape at ``path`` over stdio until the client leaves; a summary goes to ``note`` (stderr).

    Raises:
        TapeError: the tape cannot be read, or a tool line is not a valid MCP tool.
    """
    tools = recorded_tools(path)  # before the server starts: a bad tape is an error, not a silent server
    tape = Tape(path, mode="replay")
    try:
        anyio.run(_serve_stdio, tape, tools)
    finally:
        tape.close()
    s = tape.stats()
    unused = tape.unused_steps
    note(
        f"tapetui mcp serve: {path}: {s['tape_hits']} call(s) answered from the tape, "
        f"{s['tape_misses']} not on it, {s['drift_events']} drifted"
        + (f"; steps never called: {', '.join(map(str, unused))}" if unused else ""),
        "dim",
    )
    return 0


async def _serve_stdio(tape: Tape, tools: list[McpTool]) -> None:
    server = replay_server(tape, tools)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# ---- verify -----------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ToolCheck:
    """One tool's contract, tape against server.

    ``status``: ``same``; ``changed`` (``changes`` says how, field by field); ``allowed`` (changed, but
    tapes.toml turns the check off for it); ``missing`` (the server does not list it); ``new`` (listed, not
    on the tape: the session never called it; not a difference).
    """

    tool: str
    status: str
    recorded: str | None = None
    live: str | None = None
    changes: tuple[str, ...] = ()

    @property
    def differs(self) -> bool:
        return self.status in ("changed", "missing")

    def to_json(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "status": self.status,
            "recorded": self.recorded,
            "live": self.live,
            "changes": list(self.changes),
        }


@dataclass(frozen=True, slots=True)
class CallCheck:
    """One recorded call sent again: ``same``, ``changed`` (``changes`` by JSON path), or ``skipped`` (why)."""

    seq: int
    tool: str
    status: str
    reason: str = ""
    changes: tuple[Change, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "tool": self.tool,
            "status": self.status,
            "reason": self.reason or None,
            "changes": [
                {
                    "path": c.path,
                    "kind": c.kind,
                    "old": None if c.old is MISSING else c.old,
                    "new": None if c.new is MISSING else c.new,
                }
                for c in self.changes
            ],
        }


@dataclass(slots=True)
class VerifyReport:
    """What ``tapetui mcp verify`` found; ``exit_code`` is 0 (same), 1 (differences) or 2 (an error)."""

    tape: Path
    command: list[str]
    calls_checked: bool = False
    server: dict[str, Any] | None = None
    tools: list[ToolCheck] = field(default_factory=list)
    calls: list[CallCheck] = field(default_factory=list)
    error: str | None = None

    @property
    def differs(self) -> bool:
        return any(t.differs for t in self.tools) or any(c.status == "changed" for c in self.calls)

    @property
    def exit_code(self) -> int:
        return 2 if self.error is not None else 1 if self.differs else 0

    def to_json(self) -> dict[str, Any]:
        count = _counts(self)
        return {
            "ok": self.exit_code == 0,
            "exit": self.exit_code,
            "tape": str(self.tape),
            "command": self.command,
            "server": self.server,
            "error": self.error,
            "tools": [t.to_json() for t in self.tools],
            "calls": [c.to_json() for c in self.calls] if self.calls_checked else None,
            "summary": count,
        }

    def lines(self) -> list[tuple[str, str | None]]:
        """The human report, one ``(text, style)`` per line."""
        out: list[tuple[str, str | None]] = []
        server = self.server or {}
        named = " ".join(str(x) for x in (server.get("name") or "?", server.get("version")) if x) if server else ""
        who = f" (server {named})" if server else ""
        out.append((f"{self.tape}: against {shlex.join(self.command)}{who}".rstrip(), "bold"))
        if self.error is not None:
            out.append((f"  error: {self.error}", "red"))
            return out
        out.append(("contracts", None))
        for t in self.tools:
            if t.status == "same":
                out.append((f"  ✓ {t.tool}  same contract", "green"))
            elif t.status == "missing":
                out.append((f"  ✗ {t.tool}  not listed by the server any more", "red"))
            elif t.status == "new":
                out.append((f"  · {t.tool}  listed by the server, not on the tape (never called)", "dim"))
            else:
                allowed = t.status == "allowed"
                head = "changed (allowed: check_fingerprint = false)" if allowed else "contract changed"
                out.append(
                    (f"  ✗ {t.tool}  {head}: fingerprint {t.recorded} → {t.live}", "yellow" if allowed else "red")
                )
                out += [(f"      {line}", "yellow" if allowed else "red") for line in t.changes]
        if self.calls_checked:
            out.append(("calls", None))
            for c in self.calls:
                if c.status == "same":
                    out.append((f"  ✓ step {c.seq} {c.tool}  same result", "green"))
                elif c.status == "skipped":
                    out.append((f"  - step {c.seq} {c.tool}  skipped: {c.reason}", "yellow"))
                else:
                    out.append((f"  ✗ step {c.seq} {c.tool}  {c.reason or 'result differs'}", "red"))
                    out += [(f"      {line}", "red") for line in format_changes(c.changes, prefix="result")]
            if not self.calls:
                out.append(("  (the tape holds no calls)", "dim"))
        n = _counts(self)
        summary = (
            f"{n['contracts_changed']} contract(s) changed, {n['tools_missing']} tool(s) missing"
            + (f", {n['calls_changed']} call(s) differ, {n['calls_skipped']} skipped" if self.calls_checked else "")
            + ("" if self.calls_checked else " (results not checked: --calls sends the tape's calls again)")
        )
        out.append((summary, "red" if self.differs else "green"))
        return out


def _counts(r: VerifyReport) -> dict[str, int]:
    return {
        "tools": len([t for t in r.tools if t.status != "new"]),
        "contracts_changed": sum(t.status == "changed" for t in r.tools),
        "tools_missing": sum(t.status == "missing" for t in r.tools),
        "calls": len(r.calls),
        "calls_changed": sum(c.status == "changed" for c in r.calls),
        "calls_skipped": sum(c.status == "skipped" for c in r.calls),
    }


def verify(
    path: Path,
    command: list[str],
    *,
    calls: bool = False,
    yes: bool = False,
    timeout: float = 30.0,
    config: Config | None = None,
) -> VerifyReport:
    """Start ``command`` as an MCP server on stdio and compare it with the tape at ``path``.

    Args:
        calls: also send the tape's calls again and compare the results (``_meta`` left out: it carries
            the server's own stamp, such as its version).
        yes: send calls of tools that are not marked read-only, or are marked destructive, too.
        timeout: seconds for the server to start and list its tools, and for each call.
        config: the tapes.toml whose ``[fingerprint] ignore``, ``[diff] ignore``, redaction and per-tool
            ``check_fingerprint`` apply (default: the one found from the tape's folder up).

    Never raises for a problem of the tape or the server: ``report.error`` says what went wrong (exit 2).
    """
    report = VerifyReport(tape=path, command=list(command), calls_checked=calls)
    if not command:
        report.error = "no server command: tapetui mcp verify TAPE -- COMMAND [ARGS...]"
        return report
    try:
        cfg = config or config_for_tape(path)
        index = read_index(path, validate=True, keep_bytes=True)
    except TapeError as e:
        report.error = str(e)
        return report
    if not index.manifests and not len(index):
        report.error = f"{path}: the tape holds no tool and no call: nothing to verify (record a session first)"
        return report
    logs = _quiet_sdk_logs()
    try:
        anyio.run(_verify_live, report, index, cfg, calls, yes, timeout)
    except Exception as e:  # what went wrong with the server (an ExceptionGroup from its task groups, often)
        leaf = _leaf(e)
        report.error = (
            str(leaf) if isinstance(leaf, TapeError) else _server_problem(command, leaf, timeout, logs.messages)
        )
    finally:
        logs.close()
    return report


async def _verify_live(
    report: VerifyReport, index: TapeIndex, cfg: Config, calls: bool, yes: bool, timeout: float
) -> None:
    command = report.command
    params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with anyio.CancelScope() as connecting, _no_grace_until_connected() as connected:
        connecting.deadline = anyio.current_time() + timeout  # starting and the handshake
        async with Client(params, read_timeout_seconds=timeout) as client:
            connecting.deadline = math.inf  # connected: each request has its own time limit from here
            connected()
            with anyio.fail_after(timeout):
                live = await _all_tools(client)
            info = client.server_info
            report.server = {"name": info.name, "version": info.version} if info is not None else None
            report.tools = _compare_contracts(index, live, cfg)
            if calls:
                annotations = {name: m.annotations for name, m in index.manifests.items()}
                report.calls = [
                    await _check_call(client, rec, live, cfg, yes, timeout, annotations) for rec in index.records()
                ]
    if connecting.cancelled_caught:
        raise TimeoutError


@contextmanager
def _no_grace_until_connected() -> Iterator[Callable[[], None]]:
    """Stop a server that never answered the handshake at once, not after the SDK's grace period.

    The SDK gives a server ``PROCESS_TERMINATION_TIMEOUT`` (2 s) to exit after its stdin closes, which
    is right for a server that spoke MCP and wrong for one that never answered: ``--timeout 3`` took
    6 s. The grace is 0 until the handshake succeeds, then the SDK's own again; the SDK reads it when
    it stops the server. A version of the SDK without the constant keeps its own policy.
    """
    name = "PROCESS_TERMINATION_TIMEOUT"
    grace = getattr(sdk_stdio, name, None)
    if not isinstance(grace, int | float):
        yield lambda: None
        return

    def connected() -> None:
        setattr(sdk_stdio, name, grace)

    setattr(sdk_stdio, name, 0.0)
    try:
        yield connected
    finally:
        setattr(sdk_stdio, name, grace)


async def _all_tools(client: Client) -> dict[str, McpTool]:
    tools: dict[str, McpTool] = {}
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await (client.list_tools(cursor=cursor) if cursor is not None else client.list_tools())
        tools.update((t.name, t) for t in page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _compare_contracts(index: TapeIndex, live: dict[str, McpTool], cfg: Config) -> list[ToolCheck]:
    redactor = cfg.redactor()
    recorded: dict[str, str] = {name: m.fingerprint for name, m in index.manifests.items()}
    for name, fp in zip(index.tools, index.fingerprints, strict=True):
        recorded.setdefault(name, fp)  # a tool with no tool line: its calls' fingerprint (no explanation)
    out = []
    for name, fp in recorded.items():
        listed = live.get(name)
        if listed is None:
            out.append(ToolCheck(name, "missing", recorded=fp))
            continue
        manifest = index.manifests.get(name)
        tool = tool_as_written(tool_contract(listed), redactor)
        form = manifest.form if manifest is not None else index.fp_forms.get(fp, 1)
        change = contract_change(
            tool,
            fp,
            form=form,
            old=manifest,
            redactor=redactor,
            where=f"{index.path}",
            ignore=cfg.fingerprint_ignore(name),
        )
        if change is None:
            out.append(ToolCheck(name, "same", recorded=fp, live=fp))
        else:
            status = "changed" if cfg.policy(name).check_fingerprint else "allowed"
            out.append(ToolCheck(name, status, recorded=fp, live=change.live, changes=tuple(change.explanation)))
    out += [
        ToolCheck(name, "new", live=tool_contract(t).fingerprint) for name, t in live.items() if name not in recorded
    ]
    return out


async def _check_call(
    client: Client,
    rec: Any,
    live: dict[str, McpTool],
    cfg: Config,
    yes: bool,
    timeout: float,
    recorded_annotations: dict[str, Any],
) -> CallCheck:
    listed = live.get(rec.tool)
    if listed is None:
        return CallCheck(rec.seq, rec.tool, "skipped", "the server does not list this tool")
    if not yes:
        # both the contract on the tape and the live one must say read-only: a server that changed (or lies)
        # cannot switch the check off in the very listing verify reports as a change
        annotations = wire(listed).get("annotations") or {}
        why = ""
        if rec.side_effect or not is_read_only(recorded_annotations.get(rec.tool)):
            why = "recorded as a tool with side effects (not read-only when the tape was made)"
        elif not is_read_only(annotations):
            why = (
                "marked destructive (destructiveHint)"
                if annotations.get("destructiveHint") is True
                else "not marked read-only (readOnlyHint)"
            )
        if why:
            return CallCheck(rec.seq, rec.tool, "skipped", f"{why}; pass --yes to send it")
    if _redacted(rec.args):
        return CallCheck(
            rec.seq, rec.tool, "skipped", "its recorded arguments were redacted, so they cannot be sent as recorded"
        )
    try:
        with anyio.fail_after(timeout):
            result = await client.call_tool(rec.tool, rec.args if isinstance(rec.args, dict) else {})
        now: Any = _without_meta(cfg.redactor().redact(wire(result)))
        failed = None
    except TimeoutError:
        raise TapeError(f"step {rec.seq} {rec.tool}: no answer from the server within {timeout:g} s") from None
    except MCPError as e:
        if e.code == CONNECTION_CLOSED and "connection closed" in e.message.lower():
            raise  # the server died: not a changed result (exit 2, said by _server_problem)
        now, failed = None, {"type": "MCPError", "message": cfg.redactor().redact_text(str(e))}
    if rec.error is not None:
        was = {"type": str(rec.error.get("type", "")).rpartition(".")[2], "message": rec.error.get("message")}
        if failed is None:
            return CallCheck(rec.seq, rec.tool, "changed", f"recorded an error ({was['type']}); now a result")
        changes = diff_values(was, failed)
        return CallCheck(rec.seq, rec.tool, "changed" if changes else "same", "error differs", tuple(changes))
    if failed is not None:
        return CallCheck(
            rec.seq, rec.tool, "changed", f"recorded a result; now an error: {failed['type']}: {failed['message']}"
        )
    changes = diff_values(_without_meta(rec.result), now, cfg.ignore_rules())
    return CallCheck(rec.seq, rec.tool, "changed" if changes else "same", "", tuple(changes))


def _without_meta(value: Any) -> Any:
    if isinstance(value, dict) and "_meta" in value:
        return {k: v for k, v in value.items() if k != "_meta"}
    return value


def _redacted(value: Any) -> bool:
    if isinstance(value, str):
        return REDACTED in value
    if isinstance(value, dict):
        return any(_redacted(k) or _redacted(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_redacted(v) for v in value)
    return False


# ---- errors and the SDK's logs -------------------------------------------------------------
class _SdkLogs(logging.Handler):
    """Keeps the MCP SDK's log messages (one line each, no traceback) instead of printing them: a server
    that writes something other than MCP on stdout makes the SDK log a traceback per line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self._logger = logging.getLogger("mcp")
        self._was = (self._logger.propagate, self._logger.level)
        self._logger.addHandler(self)
        self._logger.propagate = False
        self._logger.setLevel(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            text += f": {_one_line(record.exc_info[1])}"
        if len(self.messages) < 20:
            self.messages.append(text)

    def close(self) -> None:
        self._logger.removeHandler(self)
        self._logger.propagate, level = self._was
        self._logger.setLevel(level)
        super().close()


def _quiet_sdk_logs() -> _SdkLogs:
    return _SdkLogs()


def _leaf(e: BaseException) -> BaseException:
    while isinstance(e, BaseExceptionGroup) and e.exceptions:
        e = e.exceptions[0]
    return e


def _one_line(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text[:300]}" if text else type(e).__name__


def _server_problem(command: list[str], e: BaseException, timeout: float, logs: list[str]) -> str:
    """What went wrong with the server, in one message (never a traceback)."""
    cmd = shlex.join(command)
    if isinstance(e, TimeoutError) or (isinstance(e, MCPError) and e.code == REQUEST_TIMEOUT):
        return (
            f"no MCP answer from `{cmd}` within {timeout:g} s: is it an MCP server speaking stdio? "
            "(--timeout SECONDS waits longer)"
        )
    if isinstance(e, OSError) and not isinstance(e, TimeoutError):
        return f"cannot start the server `{cmd}`: {e.strerror or e}"
    said = f"; the SDK logged: {logs[0]}" if logs else ""
    if isinstance(e, MCPError) and "closed" in e.message.lower():
        return f"the server `{cmd}` closed the connection (it exited, or does not speak MCP on stdio){said}"
    return f"the server `{cmd}` failed: {_one_line(e)}{said}"


def _json_text(value: Any) -> str:
    """A recorded value as the text a client gets: whole, at any depth (canon's dumps; orjson stops at 254)."""
    return dumps(value).decode()


def _version() -> str:
    try:
        return metadata.version("tapetui")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return ""


def server_command(args: argparse.Namespace) -> list[str]:
    """The server command of ``tapetui mcp verify [OPTIONS] TAPE [OPTIONS] -- COMMAND...``.

    The command is everything after ``--``; options given between TAPE and ``--`` are parsed as options
    (the parser's REMAINDER took them as part of the command). Without ``--``, the words after TAPE are
    the command, unless the first looks like an option.

    Raises:
        TapeError: no command, or options where the command should start.
    """
    words = list(args.command)
    if "--" in words:
        i = words.index("--")
        if i:
            fresh = args.mcp_parser.parse_args([*words[:i], args.tape])
            for key in ("calls", "yes", "json", "timeout"):
                setattr(args, key, getattr(args, key) or getattr(fresh, key))
        words = words[i + 1 :]
    elif words and words[0].startswith("-"):
        raise TapeError(
            f"put the server command after `--`: tapetui mcp verify [OPTIONS] TAPE -- COMMAND (got {words[0]})"
        )
    if not words:
        raise TapeError("no server command: tapetui mcp verify [OPTIONS] TAPE -- COMMAND [ARGS...]")
    return words
