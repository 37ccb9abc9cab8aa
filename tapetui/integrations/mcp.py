"""MCP: a client whose tool calls go through a tape, with each tool's listed definition as its contract.

``TapedClient(client_or_session, tape)`` wraps an ``mcp.Client`` or ``mcp.ClientSession`` of the official
MCP Python SDK (``mcp`` 2.x; tested with 2.3). ``call_tool`` goes through the tape (record, replay, fill);
everything else passes through to the wrapped client. The server's ``list_tools()`` result is each tool's
contract (name, description, input and output schema, annotations, title): registered on the tape, written
in its tool lines when recording, and checked against the recording on replay (``ToolDriftError``,
explained field by field). With no client (``TapedClient(None, tape)``) a replay runs with the server
gone: ``list_tools()`` answers from the tape's tool lines.

Recorded values are MCP's wire form (``CallToolResult`` as ``{"content": [...], "isError": ...,
"structuredContent": ...}``), and both modes return a ``CallToolResult``; an ``isError`` result is a result,
not an exception.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, ListToolsResult, PaginatedRequestParams, TextContent
from mcp.types import Tool as McpTool
from pydantic import BaseModel, ValidationError

from tapetui.core.current import current_tape
from tapetui.core.errors import TapeError, TapeReplayedError
from tapetui.core.fingerprint import ToolManifest
from tapetui.core.registry import Tool, make_contract
from tapetui.core.tape import Tape
from tapetui.core.tapefile import read_index
from tapetui.integrations._common import resolve_tape

__all__ = [
    "PAGE_CAP",
    "SUPPORTED_SDK",
    "TapedClient",
    "as_call_tool_result",
    "contract_fields",
    "error_result",
    "is_read_only",
    "mcp_error_from",
    "recorded_tools",
    "tool_contract",
    "tool_from_manifest",
    "wire",
]

SUPPORTED_SDK = "mcp>=2.0,<3"  # the official MCP Python SDK, major version 2 (tested with 2.3)
PAGE_CAP = 100  # pages of tools/list read at most: a paginator that never ends cannot hang a call


def wire(model: BaseModel) -> dict[str, Any]:
    """An SDK model as MCP sends it: camelCase keys (``isError``, ``inputSchema``), unset fields left out."""
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


def contract_fields(tool: McpTool) -> dict[str, Any]:
    """The keywords of :meth:`Tape.contract <tapetui.Tape.contract>` for an MCP tool definition.

    Its contract is what the model sees: ``description``, ``inputSchema`` (``schema``), ``outputSchema``,
    ``annotations`` (MCP's hints, as sent: ``readOnlyHint``...) and ``title``. A tool not marked
    ``readOnlyHint: true`` is taken to have side effects, as the MCP spec assumes.
    """
    d = wire(tool)
    annotations = d.get("annotations")
    return {
        "schema": d.get("inputSchema"),
        "description": d.get("description"),
        "output_schema": d.get("outputSchema"),
        "annotations": annotations,
        "title": d.get("title"),
        "side_effect": not is_read_only(annotations),
    }


def tool_contract(tool: McpTool) -> Tool:
    """An MCP tool definition as a tapetui contract (not registered anywhere)."""
    return make_contract(tool.name, **contract_fields(tool))


def is_read_only(annotations: dict[str, Any] | None) -> bool:
    """The tool says it changes nothing: ``readOnlyHint: true`` and not ``destructiveHint: true``."""
    if not annotations:
        return False
    return annotations.get("readOnlyHint") is True and annotations.get("destructiveHint") is not True


def tool_from_manifest(m: ToolManifest, path: Path | str = "") -> McpTool:
    """The MCP tool definition a tape's tool line holds (as recorded: redacted where it looked secret).

    Raises:
        TapeError: the line does not make a valid MCP tool (names the tape and the tool).
    """
    data: dict[str, Any] = {"name": m.name, "inputSchema": m.schema or {"type": "object"}}
    for key, value in (
        ("title", m.title),
        ("description", m.description),
        ("outputSchema", m.output_schema),
        ("annotations", m.annotations),
    ):
        if value is not None:
            data[key] = value
    try:
        return McpTool.model_validate(data)
    except ValidationError as e:
        raise TapeError(f"{path}: the tool line of {m.name!r} is not a valid MCP tool: {_first_error(e)}") from None


def recorded_tools(path: Path | str) -> list[McpTool]:
    """The tool definitions a tape's tool lines hold, in the order they were first written.

    Every tool the server listed while the session was recorded has one, called or not (a recording writes
    each contract it is given: :meth:`Tape.contract <tapetui.core.tape.Tape.contract>`).

    Raises:
        TapeError: the tape cannot be read, or a tool line is not a valid MCP tool.
    """
    index = read_index(path)
    return [tool_from_manifest(m, path) for m in index.manifests.values()]


def as_call_tool_result(value: Any, tool: str = "") -> CallToolResult:
    """A recorded result as the ``CallToolResult`` it was recorded from.

    Raises:
        TapeError: the value is not a ``CallToolResult`` in MCP's wire form.
    """
    if isinstance(value, CallToolResult):
        return value
    try:
        return CallToolResult.model_validate(value)
    except ValidationError as e:
        raise TapeError(
            f"{tool or 'tool'}: the recorded result is not an MCP CallToolResult ({_first_error(e)}); "
            "TapedClient records call_tool's default result"
        ) from None


def error_result(text: str) -> CallToolResult:
    """An MCP tool error result (``isError: true``) holding ``text``."""
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def mcp_error_from(e: TapeReplayedError) -> MCPError | None:
    """The ``MCPError`` a replayed error was when recorded, or None when it was another error.

    The core cannot rebuild an ``MCPError`` without its constructor (its ``error`` attribute is not a
    JSON value), so it replays as a ``TapeReplayedError`` carrying the recorded ``(code, message, data)``.
    """
    args = e.recorded_args
    if not e.module.startswith("mcp.") or args is None or not 2 <= len(args) <= 3:
        return None
    code, message = args[0], args[1]
    if type(code) is not int or not isinstance(message, str):
        return None
    return MCPError(code, message, args[2] if len(args) == 3 else None)


class TapedClient:
    """An MCP client whose ``call_tool`` goes through a tape; everything else passes through.

    Args:
        client_or_session: an ``mcp.Client`` or ``mcp.ClientSession`` (connected, or entered through this
            wrapper: ``async with TapedClient(Client(server)) as client``), or None to replay with no server.
        tape: the tape; by default the current one (``with tapetui.use_tape(...)``, the pytest ``tape``
            fixture), looked up at each call, so a client wrapped once works with every test's tape.

    ``list_tools()`` passes through, and registers each listed tool as its contract on the current tape.
    Before the first call of a tool it has not seen listed, a client that has a server lists the server's
    tools itself (every page) and registers each as its contract: a recording writes every tool the server
    offers, called or not, with its whole contract; a replay with a live server checks each recorded call
    against the live contract (``ToolDriftError`` when a tool's description, schema, annotations...
    changed). A replay with no client never reaches a server.
    """

    def __init__(self, client_or_session: Any | None, tape: Tape | None = None) -> None:
        self._inner = client_or_session
        self._tape = tape
        # name → the latest definition a live listing gave, as Tape.contract's keywords (dumped once per listing)
        self._listed: dict[str, dict[str, Any]] = {}
        self._complete = False  # a whole listing (every page) was seen

    @property
    def wrapped(self) -> Any | None:
        """The wrapped client or session (None when replaying without a server)."""
        return self._inner

    def __getattr__(self, name: str) -> Any:
        inner = self.__dict__.get("_inner")
        if inner is None:
            raise AttributeError(f"{name}: this TapedClient has no MCP client (it replays without a server)")
        return getattr(inner, name)

    async def __aenter__(self) -> TapedClient:
        enter = getattr(self._inner, "__aenter__", None)
        if enter is not None:
            await enter()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        """Leave the wrapped client. An exception raised inside the block (a ``TapeDrift``...) comes out as
        itself: the SDK's task groups would wrap it in an ``ExceptionGroup`` of that one exception."""
        leave = getattr(self._inner, "__aexit__", None)
        if leave is None:
            return None
        try:
            return await leave(*exc)
        except BaseExceptionGroup as group:
            if exc[1] is not None and _only(group) is exc[1]:
                return False  # the block's own exception propagates, unwrapped
            raise

    # ---- tools ---------------------------------------------------------------------
    async def list_tools(self, *args: Any, **kwargs: Any) -> ListToolsResult:
        """The server's tools (registered as contracts on the current tape), or with no client, the tape's."""
        inner = self._inner
        if inner is None:
            return ListToolsResult(tools=recorded_tools(resolve_tape(self._tape).path))
        result: ListToolsResult = await inner.list_tools(*args, **kwargs)
        whole = result.next_cursor is None and not _has_cursor(kwargs)
        self._absorb(result.tools, whole)
        tape = self._tape or current_tape()
        if tape is not None:
            for tool in result.tools:
                tape.contract(tool.name, **self._listed[tool.name])
        return result

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        *args: Any,
        order: Any = None,
        call_id: str | None = None,
        **kwargs: Any,
    ) -> CallToolResult:
        """Call a tool through the tape; the same ``CallToolResult`` in every mode.

        Args:
            name / arguments: as the wrapped client's ``call_tool`` takes them; further arguments
                (``read_timeout_seconds``, ``meta``...) go to it unchanged and are not part of the call's key.
            order: the call's place in the model's response, e.g. ``(turn, index)``, for parallel calls.
            call_id: the model's id of this tool call, recorded on the line.

        Raises:
            TapeDrift / TapeMiss / ToolDriftError: as ``Tape.call`` (replay never reaches the server).
            MCPError: the server answered with a protocol error (recorded, and raised again on replay).
        """
        tape = resolve_tape(self._tape)
        inner = self._inner
        if inner is None and tape.mode != "replay":
            raise TapeError(
                f"{tape.path}: {name}: a {tape.mode} may run tools live, and this TapedClient has no MCP client "
                "(pass the client, or replay)"
            )
        if inner is not None:
            if name not in self._listed and not self._complete:
                # a live listing is at hand: every tool the server offers becomes a contract (written to the
                # tape when recording; checked against the recorded calls in a replay)
                await self._list_all(inner)
                for listed_name, fields in self._listed.items():
                    tape.contract(listed_name, **fields)
            listed = self._listed.get(name)
            if listed is not None:
                tape.contract(name, **listed)

        async def live() -> dict[str, Any]:
            assert inner is not None  # a replay never runs live=, and nothing else runs without a client
            result = await inner.call_tool(name, arguments, *args, **kwargs)
            return wire(result)

        try:
            value = await tape.acall(
                name, {} if arguments is None else arguments, live=live, order=order, call_id=call_id
            )
        except TapeReplayedError as e:
            err = mcp_error_from(e)
            if err is None:
                raise
            raise err from None
        return as_call_tool_result(value, name)

    # ---- listing -------------------------------------------------------------------
    def _absorb(self, tools: list[McpTool], whole: bool) -> None:
        for tool in tools:
            self._listed[tool.name] = contract_fields(tool)
        if whole:
            self._complete = True

    async def _list_all(self, inner: Any) -> None:
        """Read every page of the server's tool listing (the wrapped client's own ``list_tools``)."""
        page_of = _pager(inner)
        cursor: str | None = None
        for _ in range(PAGE_CAP):
            page = await page_of(cursor)
            self._absorb(page.tools, False)
            cursor = page.next_cursor
            if cursor is None:
                self._complete = True
                return


def _pager(inner: Any) -> Callable[[str | None], Awaitable[ListToolsResult]]:
    """One page of ``tools/list``: ``ClientSession.list_tools`` takes ``params=``, ``Client.list_tools`` ``cursor=``."""
    if isinstance(inner, ClientSession):

        async def session_page(cursor: str | None) -> ListToolsResult:
            params = PaginatedRequestParams(cursor=cursor) if cursor is not None else None
            page: ListToolsResult = await inner.list_tools(params=params)
            return page

        return session_page

    async def client_page(cursor: str | None) -> ListToolsResult:
        page: ListToolsResult = await (inner.list_tools(cursor=cursor) if cursor is not None else inner.list_tools())
        return page

    return client_page


def _has_cursor(kwargs: dict[str, Any]) -> bool:
    params = kwargs.get("params")
    return kwargs.get("cursor") is not None or getattr(params, "cursor", None) is not None


def _first_error(e: ValidationError) -> str:
    err = e.errors()[0]
    where = ".".join(str(p) for p in err.get("loc", ()))
    return f"{where}: {err.get('msg', '')}" if where else str(err.get("msg", ""))


def _only(group: BaseExceptionGroup[Any]) -> BaseException | None:
    """The one exception a group (of groups) of one holds, else None."""
    e: BaseException = group
    while isinstance(e, BaseExceptionGroup):
        if len(e.exceptions) != 1:
            return None
        e = e.exceptions[0]
    return e
