"""OpenAI Agents SDK: ``FunctionTool``s whose invocations go through a tape.

``taped(tools)`` returns copies of the agent's ``FunctionTool``s — the same class, name, schema, description,
guardrails, approval and failure settings — whose ``on_invoke_tool`` goes through ``await tape.acall(...)``:
``Agent(name="a", tools=taped([get_weather, add]))``. Without ``tape=``, the tape current when the call is made
is used (``with tapetui.use_tape(...)``, the pytest ``tape`` fixture), so tools wrapped once at import time work
in every test. Written against openai-agents 0.24.

What goes on the tape for one call:

- **tool**: the name the model calls the tool by (``qualified_name``: its name, after its namespace when it has
  one).
- **args**: what the model passed — the JSON text the SDK hands the tool, parsed; not the arguments the tool's
  function receives after validation. Text that is not a JSON object is recorded as ``{"input_json": text}``.
- **order**: ``(turn, index)``. The SDK runs the function calls of one model response as concurrent tasks,
  which reach their tools in no fixed order; this place is fixed by the response alone. ``turn`` counts the
  model responses of the agent run that called a taped tool (1 for the first); ``index`` is the call's
  position among the tool calls the SDK registered for that response, from 0 (function calls in the
  response's order). Both are read from the run context's registry of the run's tool calls, which the SDK
  fills before any tool of a response starts (``ToolContext._tool_invocations``, a private field of
  openai-agents 0.24). When it is missing or does not hold the call (a ``ToolContext`` built by hand,
  another SDK version), no order is given and the tape matches by content and step. The model's call ids
  are not places: a live model makes new ones each run. Each ``Runner.run`` starts at turn 1 again; a
  resumed run counts from its resumption.
- **call_id**: ``ctx.tool_call_id``, the model's id of the call.
- **contract**: the ``FunctionTool`` itself, registered with :meth:`Tape.contract
  <tapetui.core.tape.Tape.contract>` at each call: ``params_json_schema`` (schema), ``description``,
  ``output_json_schema`` (output schema), and as ``annotations`` its ``strict`` mode (``strict_json_schema``)
  plus, for a tool the SDK made from an MCP server, that tool's MCP annotations (and its title). A changed
  description or schema is a ``ToolDriftError`` in replay, explained field by field.
- **result**: what the SDK's own invoker returned, as the model will see it. Text, JSON values and the SDK's
  structured outputs (``ToolOutputText``, ``ToolOutputImage``, ``ToolOutputFileContent``) are recorded as they
  are (a structured output as its JSON form, which the SDK reads back as the same output); any other value,
  which the SDK would only send to the model as ``str(value)``, is recorded as that text — so the model sees
  the same thing taped or not, in record and in replay. (A tool with an output schema, and a call made by a
  hosted program, keep their value: the SDK sends its JSON dump.)
- **errors**: the SDK turns what a tool raises into text for the model (its ``failure_error_function``,
  :func:`agents.default_tool_error_function` by default: ``"An error occurred while running the tool. Please
  try again."``) inside the invoker this module wraps, so that text is the call's recorded ``result`` and
  replay returns it: the model sees the same text in both modes; the exception itself is not on the tape, and
  replay does not log it again. With ``failure_error_function=None`` the exception leaves the invoker: it is
  recorded as the call's ``error`` and raised again in replay (as its own class when the tape's rules allow,
  README "A recorded error is data"), and the SDK ends the run with ``UserError("Error running tool NAME:
  MESSAGE")`` caused by it, in both modes. A drift, a miss or a changed contract is never turned into text for
  the model: ``Runner.run`` raises ``UserError("Error running tool NAME: …")`` whose ``__cause__`` is the
  ``TapeDrift``, ``TapeMiss`` or ``ToolDriftError`` (the pytest plugin prints its report). A call stopped by
  the tool's ``timeout_seconds`` is cancelled and leaves no line, so its replay is a miss.
"""

from __future__ import annotations

import copy
import json
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from agents import FunctionTool, ItemHelpers, Tool, ToolOutputFileContent, ToolOutputImage, ToolOutputText
from agents import default_tool_error_function as _default_error_text
from agents.tool_context import ToolContext

from tapetui.core.errors import InvalidValue
from tapetui.core.tape import Tape
from tapetui.integrations._common import resolve_tape

__all__ = ["taped"]

Invoker = Callable[[ToolContext[Any], str], Awaitable[Any]]

_INNER = "__tapetui_inner__"  # on a taped invoker: the SDK's own invoker it wraps (taping a taped tool again)
_STRUCTURED = (ToolOutputText, ToolOutputImage, ToolOutputFileContent)
# The SDK marks a ToolContext when its default failure text answered the call; the mark lets that text past
# the tool's output schema. Replay sets it again for a replayed default text (see _replayed).
_DEFAULT_FAILURE_MARK = "_function_tool_default_failure_handled"


@overload
def taped(tools: Sequence[Tool], tape: Tape | None = None) -> list[Tool]: ...
@overload
def taped(tools: FunctionTool, tape: Tape | None = None) -> FunctionTool: ...
def taped(tools: FunctionTool | Sequence[Tool], tape: Tape | None = None) -> FunctionTool | list[Tool]:
    """Copies of ``tools`` whose invocations go through ``tape`` (the current tape at each call when None).

    ``Agent(name="a", tools=taped([get_weather, add]))``; one tool gives one tool, a list gives a list typed as
    ``Agent.tools`` is (each item a ``FunctionTool``). The originals are left as they are. A tool taped before
    is taped again around its own invoker (the new tape replaces the old).

    Raises:
        TypeError: a tool that is not a ``FunctionTool`` (a hosted tool runs on OpenAI's side: leave it out).
    """
    if isinstance(tools, FunctionTool):
        return _taped(tools, tape)
    return [_taped(t, tape) for t in tools]


def _taped(given: Any, tape: Tape | None) -> FunctionTool:
    if not isinstance(given, FunctionTool):
        raise InvalidValue(
            f"taped() takes the SDK's FunctionTool objects, not {type(given).__name__}: a hosted tool runs on "
            "OpenAI's side and cannot be taped; leave it out of taped(...)"
        )
    tool = copy.copy(given)  # FunctionTool.__copy__: the same class, with the SDK's invoker bound to the copy
    inner: Invoker = getattr(tool.on_invoke_tool, _INNER, tool.on_invoke_tool)
    name = getattr(tool, "qualified_name", tool.name)

    async def on_invoke_tool(ctx: ToolContext[Any], input_json: str) -> Any:
        the_tape = resolve_tape(tape)
        _register(the_tape, name, tool)
        ran = False

        async def live() -> Any:
            nonlocal ran
            ran = True
            return _as_the_model_sees_it(tool, ctx, await inner(ctx, input_json))

        result = await the_tape.acall(
            name, _args(input_json), live=live, order=_place(ctx), call_id=getattr(ctx, "tool_call_id", None)
        )
        if not ran:
            _replayed(tool, ctx, result)
        return result

    setattr(on_invoke_tool, _INNER, inner)
    tool.on_invoke_tool = on_invoke_tool
    return tool


def _args(input_json: str) -> dict[str, Any]:
    """The model's arguments: the tool call's JSON text, parsed (``{}`` for none)."""
    try:
        parsed = json.loads(input_json) if input_json.strip() else {}
    except (ValueError, AttributeError):
        parsed = None
    return parsed if isinstance(parsed, dict) else {"input_json": input_json}


def _register(tape: Tape, name: str, tool: FunctionTool) -> None:
    """Make the tool's own definition its contract on ``tape`` (cheap when it is the one already registered)."""
    annotations: dict[str, Any] = {"strict": tool.strict_json_schema}
    if getattr(tool, "_mcp_annotations", None) is not None:
        mcp = tool.mcp_annotations
        dump = getattr(mcp, "model_dump", None)
        if callable(dump):
            annotations.update(dump(exclude_none=True))
    tape.contract(
        name,
        schema=tool.params_json_schema,
        description=tool.description,
        output_schema=tool.output_json_schema,
        annotations=annotations,
        title=getattr(tool, "_mcp_title", None),
    )


def _as_the_model_sees_it(tool: FunctionTool, ctx: ToolContext[Any], output: Any) -> Any:
    """``output`` as it goes on the tape: the value itself when its JSON form gives the model the same thing,
    else the text the SDK would make of it (``str(output)``)."""
    if isinstance(output, str) or _plain_json(output):
        return output
    if tool.output_json_schema is not None or getattr(tool, "_output_type_adapter", None) is not None:
        return output  # validated and JSON-dumped by the SDK: the JSON form dumps the same
    caller = getattr(getattr(ctx, "tool_call", None), "caller", None)
    if getattr(caller, "type", None) == "program":
        return output  # a hosted program gets the JSON dump
    if isinstance(output, _STRUCTURED) or _structured(output):
        return output
    return str(output)


def _structured(output: Any) -> bool:
    """Whether the SDK sends ``output`` to the model as structured content (not as its text)."""
    convert = getattr(ItemHelpers, "_convert_tool_output_as_structured", None)
    if convert is not None:
        try:
            return convert(output) is not None
        except Exception:  # noqa: BLE001 - the SDK could not read it as structured: it stringifies it
            return False
    return isinstance(output, list | tuple) and bool(output) and all(isinstance(o, _STRUCTURED) for o in output)


def _plain_json(value: Any, depth: int = 0) -> bool:
    """A value whose JSON form is itself (so ``str`` of it is the same before and after the tape)."""
    if value is None or type(value) in (str, int, bool):
        return True
    if type(value) is float:
        return value == value and value not in (float("inf"), float("-inf"))
    if depth > 50:
        return False
    if type(value) is list:
        return all(_plain_json(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(type(k) is str and _plain_json(v, depth + 1) for k, v in value.items())
    return False


def _replayed(tool: FunctionTool, ctx: ToolContext[Any], result: Any) -> None:
    """After a call the tape answered: mark the context as the SDK marks it when its default failure text is
    the tool's output, so that a replayed failure passes the tool's output schema as the recorded one did."""
    if not (isinstance(result, str) and getattr(tool, "_use_default_failure_error_function", False)):
        return
    try:
        default = _default_error_text(ctx, Exception())
    except Exception:  # noqa: BLE001 - a future SDK whose default text needs more: leave the context as it is
        return
    if result == default:
        setattr(ctx, _DEFAULT_FAILURE_MARK, True)


# ---- places: (turn, index) of a call in its model response ------------------------------------------------


@dataclass
class _RunPlaces:
    """The places given so far in one agent run. ``calls`` is the SDK's registry of the run's tool calls
    (call id → record, in the order the SDK registered them); holding it keeps its id from being reused."""

    calls: dict[str, Any]
    seen: int = 0  # registered calls already split into turns
    turn: int = 0
    places: dict[str, tuple[int, int]] = field(default_factory=dict)


_RUNS: dict[int, _RunPlaces] = {}  # id(the registry) → its run; dropped when the run's Usage object goes
_RUNS_LOCK = threading.Lock()


def _place(ctx: ToolContext[Any]) -> tuple[int, int] | None:
    """``(turn, index)`` of this call (see the module's docstring), or None when the SDK does not say."""
    calls = getattr(ctx, "_tool_invocations", None)
    call_id = getattr(ctx, "tool_call_id", None)
    if not isinstance(calls, dict) or not isinstance(call_id, str) or call_id not in calls:
        return None
    key = id(calls)
    with _RUNS_LOCK:
        run = _RUNS.get(key)
        if run is None:
            try:  # the run context's Usage lives as long as the run (and its result)
                weakref.finalize(ctx.usage, _RUNS.pop, key, None)
            except TypeError:
                return None
            run = _RUNS[key] = _RunPlaces(calls)
        place = run.places.get(call_id)
        if place is None:  # the first call of a new response: the calls registered since the last one are its
            registered = list(calls)
            run.turn += 1
            for index, other in enumerate(registered[run.seen :]):
                run.places.setdefault(other, (run.turn, index))
            run.seen = len(registered)
            place = run.places.get(call_id)
        return place
