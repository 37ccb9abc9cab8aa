"""pydantic-ai: a toolset whose tool calls go through a tape.

``taped(toolset)`` wraps any pydantic-ai toolset (a ``FunctionToolset``, an MCP server, a combined or prefixed
one) in a :class:`TapedToolset`, a ``WrapperToolset``: the agent lists the same tools, and each call the model
makes goes through ``await tape.acall(...)`` — recorded, replayed with no tool run, or reported as drift.
``TapeCapability()`` does the same for every tool of an agent, its own ``@agent.tool`` functions included
(``Agent(model, capabilities=[TapeCapability()])``). Without ``tape=``, the tape current when the call is
made is used (``with tapetui.use_tape(...)``, the pytest ``tape`` fixture), so a toolset wrapped once at import
time works in every test.

What goes on the tape for one call:

- **tool**: the name the wrapped toolset knows the tool by (wrap outside a ``PrefixedToolset`` or
  ``RenamedToolset`` to record the names the model uses).
- **args**: what the model passed — the arguments of the ``ToolCallPart`` (its JSON text parsed), not the
  validated ones pydantic-ai hands the tool (which may hold models, datetimes and filled-in defaults). When
  the part cannot be found (a toolset called outside an agent run), the validated arguments in their JSON
  form (``pydantic_core.to_jsonable_python``).
- **order**: ``(run_step, index)``: ``ctx.run_step``, the model request of the run whose response asked for
  the call (1 for the first), and the call's position among the tool calls (``ToolCallPart``) of that
  response, counting from 0; found by looking ``ctx.tool_call_id`` up in the run's messages, newest first.
  pydantic-ai runs one response's calls concurrently, starting in any order; this place is fixed by the
  model's response alone, so the calls of one response get distinct places and hit, drift and miss are the
  same in every run (the same calls in another order in the response are drift at each place). The model's
  ids are not places: most models, and ``FunctionModel``/``TestModel``, make new ones at each run. A later
  ``agent.run`` on the same tape starts at step 1 again; its calls are matched among the recordings still
  unconsumed at each place. A call not found in the messages (a toolset called outside an agent run) has
  no order: the tape matches it by content and step.
- **call_id**: the model's id of the call (``ctx.tool_call_id``), recorded on the line.
- **contract**: the tool's ``ToolDefinition`` as the toolset gives it at the call, registered with
  :meth:`Tape.contract <tapetui.core.tape.Tape.contract>`: ``parameters_json_schema`` (schema),
  ``description``, ``return_schema`` (output schema; an empty one is none), the MCP ``annotations`` an
  ``MCPToolset`` puts in the definition's ``metadata``; ``side_effect`` when the tool requires
  approval (``kind == "unapproved"``). The declared return type of a ``FunctionToolset`` tool's function is
  passed as ``returns``, so a tool returning a pydantic model or a dataclass returns that type in record and
  replay alike. ``Tape.contract`` is cached by its inputs (a few microseconds a call), so a definition a
  ``prepare`` function rebuilds at every step costs nothing more, and one it changes becomes the contract
  from then on. Replay checks the recorded fingerprint against it: a changed description or schema is a
  ``ToolDriftError`` explained field by field.
- **errors**: what the tool raised, recorded and raised again on replay as its own class when the tape's
  rules allow (README "A recorded error is data"): ``ModelRetry`` comes back as ``ModelRetry`` with its
  ``message``, so pydantic-ai retries the model as it did when recording; ``ToolFailed``, ``CallDeferred``
  and ``ApprovalRequired`` too.
"""

from __future__ import annotations

import contextvars
import typing
import weakref
from dataclasses import dataclass
from typing import Any, TypeVar

import pydantic_core
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from tapetui.core.tape import Tape
from tapetui.integrations._common import resolve_tape

__all__ = ["TapeCapability", "TapedToolset", "taped"]

DepsT = TypeVar("DepsT")

_UNKNOWN: Any = object()
# (tape, tool call id, tool) of the call a TapedToolset is running live: a second wrapper inside it passes through
_TAPING: contextvars.ContextVar[tuple[int, str | None, str] | None] = contextvars.ContextVar(
    "tapetui_pydantic_ai_taping", default=None
)
# a tool function's declared return type, read once per function (typing.get_type_hints is not cheap)
_RETURNS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@dataclass
class TapedToolset(WrapperToolset[DepsT]):
    """A toolset whose tool calls go through a tape (see the module's docstring for what is recorded).

    Attributes:
        wrapped: the toolset whose tools are offered and, when a call runs live, called.
        tape: the tape; None for the one current at each call (``tapetui.use_tape``, the pytest fixture).
    """

    tape: Tape | None = None

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[DepsT], tool: ToolsetTool[DepsT]
    ) -> Any:
        """Call ``name`` through the tape: replayed, recorded or reported as drift, by the tape's mode.

        Raises:
            TapeDrift, TapeMiss, ToolDriftError: replay found the call changed, missing, or its tool changed.
            TapeError: no tape was given and none is current.
        """
        tape = resolve_tape(self.tape)
        wrapped = self.wrapped
        if _TAPING.get() == (id(tape), ctx.tool_call_id, name):
            # wrapped twice (taped(toolset) and TapeCapability): the outer wrapper records this call already
            return await wrapped.call_tool(name, tool_args, ctx, tool)
        _register(tape, name, tool)
        part, order = _find_call(ctx)
        args = part.args_as_dict() if part is not None else pydantic_core.to_jsonable_python(tool_args)

        async def live() -> Any:
            token = _TAPING.set((id(tape), ctx.tool_call_id, name))
            try:
                return await wrapped.call_tool(name, tool_args, ctx, tool)
            finally:
                _TAPING.reset(token)

        return await tape.acall(name, args, live=live, order=order, call_id=ctx.tool_call_id)


def taped(toolset: AbstractToolset[DepsT], tape: Tape | None = None) -> TapedToolset[DepsT]:
    """``toolset`` with its calls going through ``tape`` (the current tape at each call when None).

    ``Agent(model, toolsets=[taped(toolset)])``; the contract of each tool is its own ``ToolDefinition``.
    """
    return TapedToolset(toolset, tape)


@dataclass
class TapeCapability(AbstractCapability[DepsT]):
    """Every tool of an agent through a tape: ``Agent(model, capabilities=[TapeCapability()])``.

    It wraps the agent's assembled toolset (its ``@agent.tool`` functions and its ``toolsets``, not its output
    tools) with :func:`taped` at each run.

    Attributes:
        tape: the tape; None for the one current at each call.
    """

    tape: Tape | None = None

    def get_wrapper_toolset(self, toolset: AbstractToolset[DepsT]) -> AbstractToolset[DepsT] | None:
        return taped(toolset, self.tape)


def _find_call(ctx: RunContext[Any]) -> tuple[ToolCallPart | None, tuple[int, int] | None]:
    """The model's ``ToolCallPart`` of this call and its place ``(run_step, index among the response's tool
    calls)``, looked up by ``ctx.tool_call_id`` in the run's messages, newest first; ``(None, None)`` when
    it is not there."""
    call_id = ctx.tool_call_id
    if call_id is None:
        return None, None
    for message in reversed(ctx.messages):
        if not isinstance(message, ModelResponse):
            continue
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        for index, part in enumerate(calls):
            if part.tool_call_id == call_id:
                return part, (ctx.run_step, index)
    return None, None


def _register(tape: Tape, name: str, tool: ToolsetTool[Any]) -> None:
    """Make the tool's own definition its contract on ``tape`` (cheap when it is the one already registered)."""
    tool_def: ToolDefinition = tool.tool_def
    metadata = tool_def.metadata
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    tape.contract(
        name,
        schema=tool_def.parameters_json_schema,
        description=tool_def.description,
        output_schema=tool_def.return_schema or None,
        annotations=annotations if isinstance(annotations, dict) else None,
        side_effect=tool_def.kind == "unapproved",
        returns=_returns(tool),
    )


def _returns(tool: ToolsetTool[Any]) -> Any:
    """The declared return type of a ``FunctionToolset`` tool's function, else None.

    Its ``call_func`` is its function schema's bound ``call``, and the schema holds the function; a combined
    toolset's tool (an agent's own tools) holds the tool it came from as ``source_tool``. Read with ``getattr``
    only: both are private to pydantic-ai.
    """
    for _ in range(8):  # a combined toolset inside another, at most a few deep
        source = getattr(tool, "source_tool", None)
        if source is None or hasattr(tool, "call_func"):
            break
        tool = source
    function = getattr(getattr(getattr(tool, "call_func", None), "__self__", None), "function", None)
    if function is None:
        return None
    try:
        known = _RETURNS.get(function, _UNKNOWN)
    except TypeError:  # not weakly referable: read every time
        return _declared_return(function)
    if known is _UNKNOWN:
        known = _RETURNS[function] = _declared_return(function)
    return known


def _declared_return(function: Any) -> Any:
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # noqa: BLE001 - an unresolvable forward reference, a callable typing cannot read
        return None
    return hints.get("return")
