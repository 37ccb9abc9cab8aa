"""OpenAI Agents SDK: ``FunctionTool``s and model turns that go through a tape.

``taped(tools)`` returns copies of the agent's ``FunctionTool``s — the same class, name, schema, description,
guardrails, approval and failure settings — whose ``on_invoke_tool`` goes through ``await tape.acall(...)``:
``Agent(name="a", tools=taped([get_weather, add]))``. Without ``tape=``, the tape current when the call is made
is used (``with tapetui.use_tape(...)``, the pytest ``tape`` fixture), so tools wrapped once at import time work
in every test. Written against openai-agents 0.24.

``TapedModel(model)`` is a ``Model`` whose requests go through the tape as model turns (:meth:`Tape.model_turn
<tapetui.core.tape.Tape.model_turn>`): ``Agent(name="a", model=TapedModel(OpenAIResponsesModel(...)),
tools=taped([...]))``, or, for every agent named by a model string, ``RunConfig(model_provider=
TapedModelProvider(MultiProvider()))``. Together they rerun a whole agent offline: no model call, no tool run,
no token; a changed prompt, tool menu, setting or model is a ``ModelDrift``.

What goes on the tape for one tool call:

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

What goes on the tape for one model turn (a ``"type": "model"`` line, ``source`` ``"openai-agents"``; see
``docs/format.md``, "Model turns"):

- **model**: ``name=`` when given; through ``TapedModelProvider``, the name ``get_model`` was asked for; else
  ``model.model`` (``OpenAIResponsesModel``, ``OpenAIChatCompletionsModel``, ``LitellmModel``), else the model's
  class name.
- **request.instructions**: ``system_instructions``, as the runner passes them (the agent's, resolved).
- **request.messages**: ``input``, item by item. A text input is one user message. A message item is a message
  of its role (``developer`` as ``system``): a ``text`` part per ``input_text``/``output_text`` (its non-empty
  ``annotations`` and ``logprobs`` kept), a ``refusal`` part per refusal, any other content (an image, a file)
  as its JSON. A ``function_call`` is a ``tool_call`` part (``id``: its ``call_id``; ``arguments``: its JSON
  text parsed); a ``function_call_output`` a ``tool_call_response`` part (``name``: its call's; ``response``:
  the output as the model gets it, text or a content list); a ``reasoning`` item a ``reasoning`` part per
  summary (``kind: "summary"``) and per content text; any other item (a hosted tool's call or output, an MCP
  item) a part of its own ``type`` holding it. Consecutive items of the model's (one response) make one
  ``assistant`` message, consecutive tool outputs one ``tool`` message. An item's other fields
  (``namespace``, ``encrypted_content``, ``provider_data``) go on its first part.
- **request.tools**: every tool and handoff offered. A ``FunctionTool`` as :func:`taped` registers it
  (``qualified_name``; ``description``, ``params_json_schema``, ``output_json_schema``, annotations ``strict``
  and its MCP annotations), so the model turn and the tool's calls share one contract; a handoff as the
  function the model sees (``tool_name``, ``tool_description``, ``input_json_schema``; annotations ``strict``
  and ``handoff``, the agent's name); any other tool (``WebSearchTool``, ``FileSearchTool``, ``HostedMCPTool``...)
  by its ``name``, its Responses API form as annotations. The definitions become contracts (tool lines, checked
  first on replay: a changed one is a ``ToolDriftError`` even for a tool the model never calls); the request
  holds their names.
- **request.output_schema**: the JSON schema of the agent's ``output_type`` (None for plain text).
- **request.settings**: ``ModelSettings.to_json_dict()`` without None values, ``extra_headers`` (headers are
  never recorded), ``retry`` and ``timeout`` (how a request is sent, not what it asks), and without the
  ``prompt_cache_key`` the runner generates (``agents-sdk:…``, new at each run; one set by hand stays).
- **request.prompt**: the prompt configuration (``id``, ``version``, ``variables``), when there is one.
- **never in the request**: ``previous_response_id``, ``conversation_id``, tracing; every input item's ``id``,
  ``status`` and ``created_by`` (the provider's item ids, the SDK's ``__fake_id__``, a fake model's ids), and
  ``provider_data.response_id``. Call ids stay: the model issued them, and on replay they come back from the
  tape. A call id the SDK made up (starting with ``__fake_id__``) becomes ``call_1``, ``call_2``... by first
  appearance (:func:`~tapetui.core.turns.stable_ids`).
- **response.parts**: the output, in order: a message's ``text`` and ``refusal`` parts, a reasoning item's
  ``reasoning`` parts (summary first), a function call's ``tool_call`` part (``id``: its ``call_id``;
  ``arguments`` parsed, with ``arguments_text`` when the model's text is not their compact JSON; ``namespace``),
  any other item as a part of its own ``type`` holding it; each with ``output_index``, its item's place.
- **response.output**: each output item without what its parts hold (its id and status, a text's annotations
  and logprobs, ``encrypted_content``...). Replay fills it with the parts' text and arguments (an edited part
  replays edited) and validates it as the SDK's output item.
- **response.finish_reason**: ``tool_calls`` when the model asked for a tool the client runs, ``length`` for an
  incomplete stream, else ``stop``. **response.id**: ``response_id``; **response.request_id** and
  **response.raw_usage** when the SDK had them; for a stream, **response.model_name** (the final
  ``Response``'s ``model``) and **response.response**, that ``Response``'s other fields (not its echo of the
  request's ``instructions`` and ``tools``).
- **usage**: ``input_tokens`` (cache included) as ``input``, ``output_tokens`` as ``output``, ``cached_tokens``
  as ``cache_read`` and ``cache_write_tokens`` as ``cache_write`` (these two when not 0); none when the model
  reported nothing (no request, no token). **response.usage_details**: what else rebuilds the SDK's ``Usage``,
  when it is not the default: ``requests`` (1), ``total_tokens`` (input + output), ``reasoning_tokens``,
  ``request_usage_entries``.
- **errors**: what the model call raised is the turn's error, raised again on replay (as its own class when
  the tape's rules allow). A stream's ``response.failed``, ``response.incomplete`` or ``error`` event is
  recorded as the ``ModelBehaviorError`` the runner raises on it, a stream that ends without
  ``response.completed`` as the runner's "Model did not produce a final response!"; a stream whose reader
  stops before ``response.completed`` (a cancellation) leaves no turn.

Replay rebuilds the ``ModelResponse`` — output items, ``Usage``, ``response_id``, ``request_id``, ``raw_usage``
— equal to the recorded one, so the run's usage is what it was live. A turn that no longer rebuilds (a field
edited or missing, another adapter version) raises ``TapeError`` naming the tape, the step and the field
(``parts[1].content``).

Streams: ``stream_response`` passes the model's events through as they come, and records one neutral event per
SDK event that has a neutral meaning: ``start`` (``response.created``), ``part`` (``response.content_part.added``,
``response.reasoning_summary_part.added``, the ``response.output_item.added`` of a function call or another
item without content parts), ``delta`` (text, refusal, reasoning and argument deltas, as ``content`` or
``arguments``), ``end`` (``response.completed``). Each holds the SDK event itself as ``sdk``, without the
delta's text; the SDK events between two neutral ones (``*.done``, ``response.in_progress``, a message's
``output_item.added``...) are in the next one's ``sdk_before`` (after the last, its ``sdk_after``). A done
event's full text, item or part, and the final ``Response``, are left out when the recorded response gives
them back equal, so a text is on the tape in its part and its deltas only. **Exact**: replay yields the
recorded events, in order, rebuilt as the SDK's event classes — the same types, deltas and sequence numbers —
except that the ``Response`` of ``response.created``/``in_progress`` has ``tools`` ``[]`` and no
``instructions``, and deltas that redaction merged come as one. **Rebuilt**: a turn recorded without
streaming serves a stream of ``response.created``, ``response.in_progress``, then per output item
``output_item.added``, each text, refusal, reasoning or argument text in one delta with its done events, and
``output_item.done``, then ``response.completed`` carrying the whole ``Response`` and its usage. A recorded
stream serves a plain request with its final response.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast, overload

import agents.usage as _agents_usage
from agents import (
    FunctionTool,
    ItemHelpers,
    Model,
    ModelBehaviorError,
    ModelProvider,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    Tool,
    ToolOutputFileContent,
    ToolOutputImage,
    ToolOutputText,
    Usage,
)
from agents import default_tool_error_function as _default_error_text
from agents.items import TResponseOutputItem, TResponseStreamEvent
from agents.models.fake_id import FAKE_RESPONSES_ID
from agents.models.openai_responses import Converter as _Converter
from agents.tool_context import ToolContext
from agents.usage import deserialize_usage, serialize_usage
from openai.types.responses import Response, ResponseUsage
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel, TypeAdapter, ValidationError

from tapetui.core.errors import InvalidValue
from tapetui.core.tape import Tape
from tapetui.core.turns import json_arguments, stable_ids
from tapetui.integrations._common import resolve_tape

if TYPE_CHECKING:
    from tapetui.core.modelturn import ModelTurn

__all__ = ["TapedModel", "TapedModelProvider", "taped"]

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


# ---- model turns: TapedModel, TapedModelProvider ------------------------------------------------------------

SOURCE = "openai-agents"
"""The ``source`` of the model turns this module writes."""

_DROPPED_ITEM_KEYS = ("id", "status", "created_by")  # an input item's own id and state: never in the request
_TRANSPORT_SETTINGS = ("extra_headers", "retry", "timeout")  # how the request is sent, not what it asks
_GENERATED_CACHE_KEY = "agents-sdk:"  # the runner's own prompt_cache_key (a new one at each run)
_TOOL_CALL_ITEMS = frozenset(
    {"function_call", "custom_tool_call", "computer_call", "local_shell_call", "shell_call", "apply_patch_call"}
)
_ASSISTANT_ITEMS = frozenset({"reasoning", "mcp_list_tools", "mcp_approval_request", "compaction"})
_TEXT_DONE = {  # a stream event's full text field, and where the output item holds it
    "response.output_text.done": ("text", "content", "text"),
    "response.refusal.done": ("refusal", "content", "refusal"),
    "response.reasoning_text.done": ("text", "content", "text"),
    "response.reasoning_summary_text.done": ("text", "summary", "text"),
}
_DELTAS = {  # a stream delta event → (the neutral field, the slot kind its part has)
    "response.output_text.delta": ("content", "content"),
    "response.refusal.delta": ("content", "content"),
    "response.reasoning_text.delta": ("content", "content"),
    "response.reasoning_summary_text.delta": ("content", "summary"),
    "response.function_call_arguments.delta": ("arguments", "call"),
}
_FAILED = ("response.failed", "response.incomplete", "error", "response.error")


class TapedModel(Model):  # type: ignore[misc]
    """An Agents SDK ``Model`` whose requests go through a tape: ``Agent(model=TapedModel(model))``.

    ``get_response`` and ``stream_response`` convert each request to the neutral request (see the module doc)
    and ask :meth:`Tape.model_turn <tapetui.core.tape.Tape.model_turn>`: ``record`` calls ``model`` and writes
    the turn; ``replay`` rebuilds the SDK's ``ModelResponse`` (or its stream of events) from the tape and never
    calls ``model``; ``fill`` calls it only on a miss. Without ``tape=``, the tape current at each request is
    used. ``name`` is the model's name on the tape (by default ``model.model``, as ``OpenAIResponsesModel`` and
    ``OpenAIChatCompletionsModel`` name it, else the class's name). A ``TapedModel`` given a ``TapedModel``
    wraps the model inside it (the new tape replaces the old).
    """

    model: Any
    tape: Tape | None
    name: str

    def __init__(self, model: Any, tape: Tape | None = None, *, name: str | None = None) -> None:
        if isinstance(model, TapedModel):
            name = name or model.name
            model = model.model
        if not isinstance(model, Model):
            raise InvalidValue(f"TapedModel takes an Agents SDK Model, not {type(model).__name__}")
        self.model = model
        self.tape = tape
        self.name = name or _model_name(model)

    def __repr__(self) -> str:
        return f"TapedModel({self.model!r}, name={self.name!r})"

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> ModelResponse:
        request = _request(system_instructions, input, model_settings, tools, output_schema, handoffs, prompt)
        turn = resolve_tape(self.tape).model_turn(request, model=self.name, source=SOURCE)
        if turn.served:
            return _rebuilt(turn)
        try:
            response = await self.model.get_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
        except BaseException as e:
            turn.fail(e)
            raise
        try:
            neutral = _neutral_response(response)
        except BaseException:
            turn.abandon()
            raise
        turn.finish(neutral)
        return response

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
    ) -> AsyncIterator[Any]:
        request = _request(system_instructions, input, model_settings, tools, output_schema, handoffs, prompt)
        turn = resolve_tape(self.tape).model_turn(request, model=self.name, source=SOURCE, stream=True)
        if turn.served:
            for event in _replayed_events(turn):  # all rebuilt first: a bad recording fails before any event
                yield event
            return
        try:
            stream = self.model.stream_response(
                system_instructions,
                input,
                model_settings,
                tools,
                output_schema,
                handoffs,
                tracing,
                previous_response_id=previous_response_id,
                conversation_id=conversation_id,
                prompt=prompt,
            )
        except BaseException as e:
            turn.fail(e)
            raise
        seen: list[Any] = []
        done = False
        try:
            async for event in stream:
                seen.append(event)
                kind = getattr(event, "type", None)
                if kind in _FAILED and not done:
                    done = True
                    turn.fail(_stream_failure(kind, event))  # the runner raises this very error on the event
                yield event
        except GeneratorExit:
            # the caller stopped reading: a stream that completed is recorded, any other leaves no turn
            if not done:
                done = True
                if _completed(seen) is not None:
                    _finish_stream(turn, seen)
                else:
                    turn.abandon()
            raise
        except BaseException as e:
            if not done:
                done = True
                turn.fail(e)
            raise
        finally:
            aclose = getattr(stream, "aclose", None)
            if callable(aclose):
                await aclose()
        if not done:
            if _completed(seen) is None:
                error = ModelBehaviorError("Model did not produce a final response!")  # the runner's own error
                turn.fail(error)
            else:
                _finish_stream(turn, seen)

    # the rest of the Model interface: the wrapped model's
    async def close(self) -> None:
        await self.model.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        cleanup = getattr(self.model, "_cleanup_on_run_end", None)
        if callable(cleanup):
            await cleanup(owner)

    def get_retry_advice(self, request: Any) -> Any:
        return self.model.get_retry_advice(request)

    def _supports_default_prompt_cache_key(self) -> bool:
        supports = getattr(self.model, "_supports_default_prompt_cache_key", None)
        return bool(supports()) if callable(supports) else False


class TapedModelProvider(ModelProvider):  # type: ignore[misc]
    """A ``ModelProvider`` whose models go through a tape: ``RunConfig(model_provider=TapedModelProvider(
    MultiProvider()))`` tapes every agent of the run named by a model string. ``get_model(name)`` is
    ``TapedModel(provider.get_model(name), tape, name=name)`` (the model's own name when ``name`` is None)."""

    def __init__(self, provider: Any, tape: Tape | None = None) -> None:
        if not isinstance(provider, ModelProvider):
            raise InvalidValue(f"TapedModelProvider takes an Agents SDK ModelProvider, not {type(provider).__name__}")
        self.provider = provider
        self.tape = tape

    def get_model(self, model_name: str | None) -> Model:
        return TapedModel(self.provider.get_model(model_name), self.tape, name=model_name or None)

    async def aclose(self) -> None:
        await self.provider.aclose()


def _model_name(model: Any) -> str:
    for attr in ("model", "model_name", "name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value.strip():
            return value
    return type(model).__name__


# ---- the request -------------------------------------------------------------------------------------------


def _request(
    instructions: str | None,
    given: str | list[Any],
    settings: Any,
    tools: list[Any],
    output_schema: Any,
    handoffs: list[Any],
    prompt: Any,
) -> dict[str, Any]:
    """The neutral request of one model call (the module doc says what each field holds)."""
    request: dict[str, Any] = {
        "instructions": instructions,
        "messages": stable_ids(_messages(given), _local_id),
        "tools": [_tool_definition(t) for t in tools] + [_handoff_definition(h) for h in handoffs],
        "output_schema": None
        if output_schema is None or output_schema.is_plain_text()
        else output_schema.json_schema(),
        "settings": _settings(settings),
    }
    if prompt is not None:
        request["prompt"] = _clean(prompt)
    return request


def _local_id(ident: str) -> bool:
    """A tool-call id the SDK made up (its ``__fake_id__`` placeholder), not one a provider issued."""
    return ident.startswith(FAKE_RESPONSES_ID)


def _messages(given: str | list[Any]) -> list[dict[str, Any]]:
    """The input items as neutral messages: consecutive items of the model's (or of tool results) in one."""
    if isinstance(given, str):
        return [{"role": "user", "parts": [{"type": "text", "content": given}]}]
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for item in given:
        d = _clean(item)
        if not isinstance(d, dict):
            d = {"type": "unknown", "value": d}
        role, parts = _item_parts(d, names)
        if out and role in ("assistant", "tool") and out[-1]["role"] == role:
            out[-1]["parts"].extend(parts)
        else:
            out.append({"role": role, "parts": parts})
    return out


def _item_parts(d: dict[str, Any], names: dict[str, str]) -> tuple[str, list[dict[str, Any]]]:
    """One input item: its role and its neutral parts (what the part does not hold, on its first part)."""
    kind = d.get("type")
    parts: list[dict[str, Any]]
    part: dict[str, Any]
    if kind == "message" or (kind is None and "role" in d):
        role = d.get("role", "user")
        content = d.get("content")
        if isinstance(content, str):
            parts = [{"type": "text", "content": content}]
        else:
            parts = [_content_part(c) for c in content or []]
        return ("system" if role == "developer" else str(role)), _with_extras(parts, d, ("type", "role", "content"))
    if kind == "function_call":
        call_id = d.get("call_id")
        if isinstance(call_id, str) and isinstance(d.get("name"), str):
            names[call_id] = d["name"]
        part = {
            "type": "tool_call",
            "id": call_id,
            "name": d.get("name"),
            "arguments": json_arguments(d.get("arguments")),
        }
        return "assistant", _with_extras([part], d, ("type", "call_id", "name", "arguments"))
    if kind == "function_call_output":
        call_id = d.get("call_id")
        part = {
            "type": "tool_call_response",
            "id": call_id,
            "name": names.get(call_id) if isinstance(call_id, str) else None,
            "response": d.get("output"),
        }
        return "tool", _with_extras([part], d, ("type", "call_id", "output"))
    if kind == "reasoning":
        parts = [{"type": "reasoning", "content": s.get("text"), "kind": "summary"} for s in _dicts(d.get("summary"))]
        parts += [{"type": "reasoning", "content": c.get("text")} for c in _dicts(d.get("content"))]
        return "assistant", _with_extras(parts or [{"type": "reasoning"}], d, ("type", "summary", "content"))
    if kind == "item_reference":
        return "user", [dict(d)]  # its id is what it says
    part = {k: v for k, v in d.items() if k not in _DROPPED_ITEM_KEYS}
    part["type"] = str(kind)
    if isinstance(kind, str) and kind.endswith("_output"):
        return "tool", [part]
    if isinstance(kind, str) and (kind.endswith("_call") or kind in _ASSISTANT_ITEMS):
        return "assistant", [part]
    return "user", [part]


def _content_part(c: Any) -> dict[str, Any]:
    if not isinstance(c, dict):
        return {"type": "unknown", "value": c}
    kind = c.get("type")
    if kind in ("input_text", "output_text", "refusal"):
        part = {
            "type": "text" if kind != "refusal" else "refusal",
            "content": c.get("refusal" if kind == "refusal" else "text"),
        }
        part.update((k, v) for k, v in c.items() if k not in ("type", "text", "refusal") and v != [])
        return part
    return dict(c)


def _with_extras(parts: list[dict[str, Any]], d: dict[str, Any], used: tuple[str, ...]) -> list[dict[str, Any]]:
    """``parts`` with the item's other fields (its ids and status dropped) on the first one."""
    extras = {k: v for k, v in d.items() if k not in used and k not in _DROPPED_ITEM_KEYS}
    data = extras.get("provider_data")
    if isinstance(data, dict):  # what a non-OpenAI model keeps for itself: its response id is not content
        data = {k: v for k, v in data.items() if k != "response_id"}
        if data:
            extras["provider_data"] = data
        else:
            del extras["provider_data"]
    if extras and parts:
        parts = [{**extras, **parts[0]}, *parts[1:]]
    return parts


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _tool_definition(tool: Any) -> dict[str, Any]:
    """An offered tool's definition: a ``FunctionTool``'s as :func:`taped` registers it (so the contract the model
    turn registers is the one its calls register), any other tool as its Responses API form."""
    if isinstance(tool, FunctionTool):
        annotations: dict[str, Any] = {"strict": tool.strict_json_schema}
        if getattr(tool, "_mcp_annotations", None) is not None:
            dump = getattr(tool.mcp_annotations, "model_dump", None)
            if callable(dump):
                annotations.update(dump(exclude_none=True))
        definition = {
            "name": getattr(tool, "qualified_name", tool.name),
            "description": tool.description,
            "parameters": tool.params_json_schema,
            "output_schema": tool.output_json_schema,
            "annotations": annotations,
        }
        title = getattr(tool, "_mcp_title", None)
        if title is not None:  # as taped() registers it: a field of the contract
            definition["title"] = title
        return definition
    try:
        form = _clean(_Converter._convert_tool(tool)[0])
    except Exception:  # noqa: BLE001 - a tool the converter cannot write (an uninitialised computer): its fields
        form = {"type": type(tool).__name__}
        if dataclasses.is_dataclass(tool):
            for f in dataclasses.fields(tool):
                value = _clean(getattr(tool, f.name, None))
                if value is not None and _is_json(value):
                    form[f.name] = value
    return {"name": str(getattr(tool, "name", type(tool).__name__)), "annotations": form}


def _handoff_definition(handoff: Any) -> dict[str, Any]:
    """A handoff, as the model sees it: a function tool (``transfer_to_…``)."""
    return {
        "name": handoff.tool_name,
        "description": handoff.tool_description,
        "parameters": handoff.input_json_schema,
        "annotations": {"strict": handoff.strict_json_schema, "handoff": handoff.agent_name},
    }


def _settings(settings: Any) -> dict[str, Any]:
    """The model settings as JSON, without None values, transport settings or the runner's generated cache key."""
    dump = getattr(settings, "to_json_dict", None)
    try:
        out = _clean(dump() if callable(dump) else settings)
    except Exception:  # noqa: BLE001 - a value pydantic cannot write as JSON: the fields as they are (the tape says)
        out = _clean(settings)
    if not isinstance(out, dict):
        return {}
    for k in _TRANSPORT_SETTINGS:
        out.pop(k, None)
    for k in ("extra_args", "extra_body"):
        extra = out.get(k)
        if isinstance(extra, dict):
            key = extra.get("prompt_cache_key")
            if isinstance(key, str) and key.startswith(_GENERATED_CACHE_KEY):
                extra = {n: v for n, v in extra.items() if n != "prompt_cache_key"}
                if extra:
                    out[k] = extra
                else:
                    del out[k]
    return out


def _clean(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON for a request: models and dataclasses dumped, None values dropped."""
    if depth > 60:
        return value
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", exclude_none=True)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _clean(v, depth + 1) for k, v in value.items() if v is not None}
    if isinstance(value, list | tuple):
        return [_clean(v, depth + 1) for v in value]
    return value


def _is_json(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


# ---- the response ------------------------------------------------------------------------------------------


def _dump(value: Any) -> Any:
    """An SDK object (output item, stream event) as JSON: the fields it was made with."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    if isinstance(value, dict):
        return {str(k): _dump(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_dump(v) for v in value]
    return value


def _neutral_response(response: Any) -> dict[str, Any]:
    """A ``ModelResponse`` as the neutral response."""
    return _neutral(
        response.output,
        response.usage,
        response.response_id,
        getattr(response, "request_id", None),
        getattr(response, "raw_usage", None),
    )


def _neutral(
    output: list[Any],
    usage: Any,
    response_id: Any,
    request_id: Any,
    raw_usage: Any,
    *,
    model_name: str | None = None,
    meta: dict[str, Any] | None = None,
    status: Any = None,
) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    skeletons: list[dict[str, Any]] = []
    finish = "stop"
    for i, item in enumerate(output):
        d = _dump(item)
        if not isinstance(d, dict):
            d = {"type": "unknown", "value": d}
        kind = d.get("type")
        if kind in _TOOL_CALL_ITEMS:
            finish = "tool_calls"
        if kind == "message" and isinstance(d.get("content"), list):
            holders = []
            for c in d["content"]:
                c = dict(c) if isinstance(c, dict) else {"type": "unknown", "value": c}
                field = {"output_text": "text", "refusal": "refusal"}.get(c.get("type"))  # type: ignore[arg-type]
                if field is not None and isinstance(c.get(field), str):
                    parts.append(
                        {"type": "text" if field == "text" else "refusal", "content": c.pop(field), "output_index": i}
                    )
                    holders.append(c)
                else:
                    parts.append({**c, "output_index": i})
                    holders.append({"type": c.get("type")})
            skeletons.append({**d, "content": holders})
        elif kind == "function_call" and isinstance(d.get("arguments"), str):
            text = d.pop("arguments")
            args = json_arguments(text)
            part: dict[str, Any] = {
                "type": "tool_call",
                "id": d.pop("call_id", None),
                "name": d.pop("name", None),
                "arguments": args,
            }
            if "namespace" in d:
                part["namespace"] = d.pop("namespace")
            if _arguments_text(args) != text:
                part["arguments_text"] = text  # exactly as the model wrote it
            part["output_index"] = i
            parts.append(part)
            skeletons.append(d)
        elif kind == "reasoning":
            skeleton = dict(d)
            for key in ("summary", "content"):
                if isinstance(d.get(key), list):
                    holders = []
                    for c in d[key]:
                        c = dict(c) if isinstance(c, dict) else {"value": c}
                        text = c.pop("text", None)
                        p: dict[str, Any] = {"type": "reasoning", "content": text}
                        if key == "summary":
                            p["kind"] = "summary"
                        p["output_index"] = i
                        parts.append(p)
                        holders.append(c)
                    skeleton[key] = holders
            skeletons.append(skeleton)
        else:  # any other item: the part holds it whole
            parts.append({**d, "type": str(kind), "output_index": i})
            skeletons.append({"type": kind})
    if status == "incomplete":
        finish = "length"
    out: dict[str, Any] = {
        "parts": parts,
        "finish_reason": finish,
        "usage": None,
        "model_name": model_name,
        "id": response_id,
    }
    out["output"] = skeletons
    u, details = _neutral_usage(usage)
    out["usage"] = u
    if details:
        out["usage_details"] = details
    if request_id is not None:
        out["request_id"] = request_id
    if raw_usage is not None:
        out["raw_usage"] = raw_usage
    if meta:
        out["response"] = meta
    return out


def _arguments_text(args: Any) -> str:
    return json.dumps(args, ensure_ascii=False, separators=(",", ":"))


def _neutral_usage(usage: Any) -> tuple[dict[str, int] | None, dict[str, Any]]:
    """``Usage`` as the neutral usage, and what else rebuilds it (when not the default)."""
    if usage is None:
        return None, {"requests": 0}
    inp = usage.input_tokens or 0
    out = usage.output_tokens or 0
    cached = getattr(usage.input_tokens_details, "cached_tokens", 0) or 0
    written = getattr(usage.input_tokens_details, "cache_write_tokens", 0) or 0
    reasoning = getattr(usage.output_tokens_details, "reasoning_tokens", 0) or 0
    details: dict[str, Any] = {}
    if usage.requests != 1:
        details["requests"] = usage.requests
    if (usage.total_tokens or 0) != inp + out:
        details["total_tokens"] = usage.total_tokens or 0
    if reasoning:
        details["reasoning_tokens"] = reasoning
    if usage.request_usage_entries:
        details["request_usage_entries"] = serialize_usage(usage)["request_usage_entries"]
    if usage.requests == 0 and not (inp or out or cached or written or reasoning or usage.total_tokens):
        return None, details  # nothing reported
    neutral = {"input": inp, "output": out}
    if cached:
        neutral["cache_read"] = cached
    if written:
        neutral["cache_write"] = written
    return neutral, details


# ---- rebuilding the SDK's types from the tape ------------------------------------------------------------


class _Unbuildable(Exception):
    """A recorded field that does not rebuild: ``field`` is its path in the recorded turn."""

    def __init__(self, field: str, error: BaseException | str) -> None:
        super().__init__(field)
        self.field = field
        self.error = error


_ADAPTERS: dict[str, Any] = {}


def _adapter(name: str) -> Any:
    """The SDK's output item and stream event unions, validated by a ``TypeAdapter`` made once."""
    found = _ADAPTERS.get(name)
    if found is None:
        found = _ADAPTERS[name] = TypeAdapter(TResponseOutputItem if name == "item" else TResponseStreamEvent)
    return found


def _rebuilt(turn: ModelTurn) -> ModelResponse:
    """The served turn as the SDK's ``ModelResponse``."""
    try:
        response = _response_of(turn)
        return ModelResponse(
            output=_items(response),
            usage=_usage(response),
            response_id=_text_or_none(response, "id"),
            request_id=_text_or_none(response, "request_id"),
            raw_usage=response.get("raw_usage"),
        )
    except _Unbuildable as e:
        raise turn.cannot_rebuild(e.field, e.error) from None


def _response_of(turn: ModelTurn) -> dict[str, Any]:
    response = turn.response
    if not isinstance(response, dict):
        raise _Unbuildable("response", "not an object")
    return response


def _text_or_none(response: dict[str, Any], key: str) -> str | None:
    value = response.get(key)
    if value is not None and not isinstance(value, str):
        raise _Unbuildable(key, f"expected text or null, got {type(value).__name__}")
    return value


def _items(response: dict[str, Any]) -> list[Any]:
    """The output items: each recorded skeleton (``output[i]``) filled with its parts' text and arguments."""
    parts, skeletons = response.get("parts"), response.get("output")
    if not isinstance(parts, list):
        raise _Unbuildable("parts", "not a list")
    if skeletons is None:  # a neutral response (a trace import wrote it): the items made from its parts
        skeletons, parts = _neutral_items(parts)
    if not isinstance(skeletons, list):
        raise _Unbuildable("output", "not a list of output items")
    owned: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for j, p in enumerate(parts):
        if not isinstance(p, dict):
            raise _Unbuildable(f"parts[{j}]", "not an object")
        i = p.get("output_index")
        if type(i) is not int or not 0 <= i < len(skeletons):
            raise _Unbuildable(f"parts[{j}].output_index", f"no output item {i!r}")
        owned.setdefault(i, []).append((j, p))
    items = []
    for i, skeleton in enumerate(skeletons):
        if not isinstance(skeleton, dict):
            raise _Unbuildable(f"output[{i}]", "not an object")
        d = _item(i, skeleton, owned.get(i, []))
        try:
            items.append(_adapter("item").validate_python(d))
        except ValidationError as e:
            where = next((".".join(map(str, err["loc"][1:])) for err in e.errors() if err.get("loc")), "")
            raise _Unbuildable(f"output[{i}]" + (f".{where}" if where else ""), e) from None
    return items


def _neutral_items(parts: list[Any]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Output item skeletons for the parts of a neutral response, and the parts each with its ``output_index``:
    text and refusals in a row are one assistant message, each tool call a function call, reasoning one reasoning
    item of summaries. Raises :class:`_Unbuildable` for a part of another kind (no item holds it)."""
    skeletons: list[dict[str, Any]] = []
    placed: list[Any] = []
    for j, p in enumerate(parts):
        kind = p.get("type") if isinstance(p, dict) else None
        last = skeletons[-1] if skeletons else None
        if kind in ("text", "refusal"):
            if last is None or last["type"] != "message":
                last = {"type": "message", "id": f"msg_{len(skeletons)}", "role": "assistant", "status": "completed"}
                last["content"] = []
                skeletons.append(last)
            holder = {"type": "output_text", "annotations": []} if kind == "text" else {"type": "refusal"}
            last["content"].append(holder)
        elif kind == "tool_call":
            skeletons.append({"type": "function_call", "status": "completed"})
        elif kind == "reasoning":
            if last is None or last["type"] != "reasoning":
                last = {"type": "reasoning", "id": f"rs_{len(skeletons)}", "summary": []}
                skeletons.append(last)
            last["summary"].append({"type": "summary_text"})
        else:
            raise _Unbuildable(f"parts[{j}]", f"a part of type {kind!r} that no output item of the SDK holds")
        placed.append({**p, "output_index": len(skeletons) - 1})
    return skeletons, placed


def _item(i: int, skeleton: dict[str, Any], parts: list[tuple[int, dict[str, Any]]]) -> dict[str, Any]:
    kind = skeleton.get("type")
    if kind == "message" and isinstance(skeleton.get("content"), list):
        return {**skeleton, "content": _filled(i, "content", skeleton["content"], parts)}
    if kind == "function_call":
        if len(parts) != 1:
            raise _Unbuildable(f"output[{i}]", f"a function call needs one tool_call part, the tape has {len(parts)}")
        j, p = parts[0]
        for key in ("id", "name"):
            if not isinstance(p.get(key), str):
                raise _Unbuildable(f"parts[{j}].{key}", f"expected text, got {type(p.get(key)).__name__}")
        if "arguments" not in p:
            raise _Unbuildable(f"parts[{j}].arguments", "missing")
        text = p.get("arguments_text")
        if not (isinstance(text, str) and json_arguments(text) == p["arguments"]):
            try:
                text = _arguments_text(p["arguments"])
            except (TypeError, ValueError) as e:
                raise _Unbuildable(f"parts[{j}].arguments", e) from None
        d = {**skeleton, "call_id": p["id"], "name": p["name"], "arguments": text}
        if "namespace" in p:
            d["namespace"] = p["namespace"]
        return d
    if kind == "reasoning":
        d = dict(skeleton)
        summary = skeleton.get("summary")
        n = len(summary) if isinstance(summary, list) else 0
        if isinstance(summary, list):
            d["summary"] = _filled(i, "summary", summary, parts[:n])
        if isinstance(skeleton.get("content"), list):
            d["content"] = _filled(i, "content", skeleton["content"], parts[n:])
        elif len(parts) > n:
            raise _Unbuildable(f"parts[{parts[n][0]}]", f"output item {i} has no place for this part")
        return d
    if len(parts) != 1:
        raise _Unbuildable(f"output[{i}]", f"expected one part for this {kind} item, the tape has {len(parts)}")
    return {k: v for k, v in parts[0][1].items() if k != "output_index"}


def _filled(i: int, key: str, holders: list[Any], parts: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """``output[i].key``'s entries, each with its text from the part at its place."""
    if len(holders) != len(parts):
        raise _Unbuildable(f"output[{i}].{key}", f"{len(holders)} entries on the tape, and {len(parts)} parts for them")
    out = []
    for holder, (j, p) in zip(holders, parts, strict=True):
        if not isinstance(holder, dict):
            raise _Unbuildable(f"output[{i}].{key}", "an entry that is not an object")
        field = "refusal" if holder.get("type") == "refusal" else "text"
        if key == "content" and holder.get("type") not in ("output_text", "refusal", "reasoning_text"):
            out.append({k: v for k, v in p.items() if k != "output_index"})  # a part that holds it whole
            continue
        if not isinstance(p.get("content"), str):
            raise _Unbuildable(f"parts[{j}].content", f"expected text, got {type(p.get('content')).__name__}")
        out.append({**holder, field: p["content"]})
    return out


def _usage(response: dict[str, Any]) -> Usage:
    """The turn's ``Usage``: its tokens from the line's ``usage``, the rest from ``usage_details``."""
    usage, details = response.get("usage"), response.get("usage_details") or {}
    if usage is not None and not isinstance(usage, dict):
        raise _Unbuildable("usage", "not an object")
    if not isinstance(details, dict):
        raise _Unbuildable("usage_details", "not an object")

    def count(where: str, value: Any) -> int:
        if type(value) is not int or value < 0:
            raise _Unbuildable(where, f"expected a whole number of tokens, got {value!r}")
        return value

    u = usage or {}
    inp = count("usage.input", u.get("input", 0))
    out = count("usage.output", u.get("output", 0))
    try:
        entries = deserialize_usage({"request_usage_entries": details.get("request_usage_entries") or []})
        return Usage(
            requests=count("usage_details.requests", details.get("requests", 1 if usage is not None else 0)),
            input_tokens=inp,
            output_tokens=out,
            total_tokens=count("usage_details.total_tokens", details.get("total_tokens", inp + out)),
            input_tokens_details=InputTokensDetails.model_validate(
                {
                    "cached_tokens": count("usage.cache_read", u.get("cache_read", 0)),
                    "cache_write_tokens": count("usage.cache_write", u.get("cache_write", 0)),
                }
            ),
            output_tokens_details=OutputTokensDetails(
                reasoning_tokens=count("usage_details.reasoning_tokens", details.get("reasoning_tokens", 0))
            ),
            request_usage_entries=entries.request_usage_entries,
        )
    except (ValidationError, TypeError, ValueError, AttributeError) as e:
        raise _Unbuildable("usage_details", e) from None


# ---- streams ---------------------------------------------------------------------------------------------


def _completed(events: list[Any]) -> Any:
    """The ``Response`` of the stream's ``response.completed`` event (None before it)."""
    for event in reversed(events):
        if getattr(event, "type", None) == "response.completed":
            return getattr(event, "response", None)
    return None


def _stream_failure(kind: Any, event: Any) -> Exception:
    """The error the runner raises on a stream's failure event (``ModelBehaviorError`` naming it)."""
    try:
        # private to openai-agents 0.24: imported when needed, so another version only loses the exact message
        from agents.models._response_terminal import (
            response_error_event_failure_error,
            response_terminal_failure_error,
        )

        if kind in ("error", "response.error"):
            return cast(Exception, response_error_event_failure_error(kind, event))
        return cast(Exception, response_terminal_failure_error(kind, getattr(event, "response", None)))
    except Exception:  # noqa: BLE001 - another SDK version: the same class, with the event's type
        return cast(Exception, ModelBehaviorError(f"Responses stream ended with terminal event `{kind}`."))


def _finish_stream(turn: ModelTurn, seen: list[Any]) -> None:
    """Record a live stream: its final ``Response`` as the neutral response, its events as neutral events."""
    try:
        response, events = _stream_record(seen)
    except BaseException:
        turn.abandon()
        raise
    turn.finish(response, events=events)


def _stream_record(seen: list[Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    final = _completed(seen)
    output = list(getattr(final, "output", None) or [])
    if not output:  # the runner's rule: a backend that only sends its items in item.done events
        output = [getattr(e, "item", None) for e in seen if getattr(e, "type", None) == "response.output_item.done"]
    raw = getattr(final, "usage", None)
    if raw is not None:
        usage = _usage_of(raw)
    else:
        without = getattr(_agents_usage, "_requests_for_response_without_usage", None)
        usage = Usage(requests=without(final) if callable(without) else 0)
    meta = _dump(final)
    meta = {k: v for k, v in meta.items() if k not in _RESPONSE_OWN} if isinstance(meta, dict) else {}
    response = _neutral(
        output,
        usage,
        getattr(final, "id", None),
        getattr(final, "_request_id", None),
        _raw_usage_of(final),
        model_name=getattr(final, "model", None),
        meta=meta,
        status=getattr(final, "status", None),
    )
    return response, _neutral_events(seen, response)


def _usage_of(raw: Any) -> Any:
    """A ``ResponseUsage`` as the SDK's ``Usage``, as the runner converts it."""
    convert = getattr(_agents_usage, "_response_usage_to_usage", None)
    if callable(convert):
        return convert(raw)
    return Usage(
        requests=1,
        input_tokens=raw.input_tokens or 0,
        output_tokens=raw.output_tokens or 0,
        total_tokens=raw.total_tokens or 0,
        input_tokens_details=raw.input_tokens_details,
        output_tokens_details=raw.output_tokens_details,
    )


_RESPONSE_OWN = ("id", "model", "output", "usage", "instructions", "tools")  # on the tape elsewhere, or not at all


def _raw_usage_of(response: Any) -> Any:
    attr = getattr(_agents_usage, "_RAW_USAGE_ATTRIBUTE", None)
    value = getattr(response, attr, None) if isinstance(attr, str) else None
    return value if isinstance(value, dict) else None


def _slots(response: dict[str, Any]) -> dict[tuple[int, str, int], int]:
    """Where each part of the neutral response sits in the output: ``(output_index, kind, index) → part``; kind
    ``content`` (a message's or reasoning's content), ``summary``, ``call`` (a function call) or ``item``."""
    out: dict[tuple[int, str, int], int] = {}
    skeletons = response.get("output") or []
    seen: dict[int, int] = {}
    for j, p in enumerate(response.get("parts") or []):
        i = p.get("output_index")
        if type(i) is not int or not 0 <= i < len(skeletons):
            continue
        n = seen.get(i, 0)
        seen[i] = n + 1
        kind = skeletons[i].get("type")
        if kind == "message":
            out[(i, "content", n)] = j
        elif kind == "reasoning":
            summary = skeletons[i].get("summary")
            s = len(summary) if isinstance(summary, list) else 0
            out[(i, "summary", n) if n < s else (i, "content", n - s)] = j
        else:
            out[(i, "call" if kind == "function_call" else "item", 0)] = j
    return out


def _neutral_events(seen: list[Any], response: dict[str, Any]) -> list[dict[str, Any]]:
    """The live stream's events as neutral events, each holding the SDK's own event as ``sdk`` (its text in the
    neutral ``content``/``arguments``, its full texts, item and response left out where the recorded response
    gives them back) and the SDK events between two neutral ones in ``sdk_before`` (``sdk_after`` on the last)."""
    slots = _slots(response)
    parts = response.get("parts") or []
    final = _rebuilt_dumps(response)
    out: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for event in seen:
        d = _dump(event)
        if not isinstance(d, dict):
            continue
        kind = d.get("type")
        oi = d.get("output_index")
        neutral: dict[str, Any] | None = None
        if kind == "response.created":
            neutral = {"type": "start"}
        elif kind == "response.completed":
            d.pop("response", None)
            neutral = {"type": "end"}
        elif kind in _DELTAS and isinstance(d.get("delta"), str):
            field, slot = _DELTAS[kind]
            sub = d.get("summary_index") if slot == "summary" else d.get("content_index", 0) if slot == "content" else 0
            j = slots.get((oi, slot, sub))  # type: ignore[arg-type]
            if j is not None:
                neutral = {"type": "delta", "index": j, field: d.pop("delta")}
        elif kind in (
            "response.content_part.added",
            "response.reasoning_summary_part.added",
            "response.output_item.added",
        ):
            if kind == "response.output_item.added":
                item_kind = d.get("item", {}).get("type") if isinstance(d.get("item"), dict) else None
                key: tuple[Any, str, Any] = (oi, "call" if item_kind == "function_call" else "item", 0)
            else:
                slot = "summary" if kind == "response.reasoning_summary_part.added" else "content"
                key = (oi, slot, d.get("summary_index" if slot == "summary" else "content_index"))
            j = slots.get(key)
            if j is not None:
                neutral = {"type": "part", "index": j, "part": _part_head(parts[j])}
        _strip(d, final)
        if neutral is None:
            pending.append(d)
            continue
        neutral["sdk"] = d
        if pending:
            neutral["sdk_before"] = pending
            pending = []
        out.append(neutral)
    if pending:
        if out:
            out[-1]["sdk_after"] = pending
        else:
            out.append({"type": "start", "sdk_before": pending})
    if not out or out[0]["type"] != "start":
        out.insert(0, {"type": "start"})
    if out[-1]["type"] != "end":
        out.append({"type": "end"})
    return out


def _part_head(part: Any) -> Any:
    """A part without its text or arguments (what a ``part`` event carries)."""
    if not isinstance(part, dict):
        return part
    if part.get("type") == "tool_call":
        return {k: v for k, v in part.items() if k not in ("arguments", "arguments_text")}
    if isinstance(part.get("content"), str):
        return {k: v for k, v in part.items() if k != "content"}
    return part


def _rebuilt_dumps(response: dict[str, Any]) -> list[Any] | None:
    """The output items the recorded response rebuilds, as JSON (None when it does not rebuild)."""
    try:
        return [_dump(item) for item in _items(response)]
    except _Unbuildable:
        return None


def _strip(d: dict[str, Any], final: list[Any] | None) -> None:
    """Leave out of a recorded SDK event what the rebuilt output gives back exactly (so a text is on the tape
    once); a value the output would not give back stays."""
    kind = d.get("type")
    response = d.get("response")
    if isinstance(response, dict):  # the Responses echo of the request: not recorded
        d["response"] = {k: v for k, v in response.items() if k not in ("instructions", "tools")}
    if final is None:
        return
    oi = d.get("output_index")
    item = final[oi] if type(oi) is int and 0 <= oi < len(final) else None
    if not isinstance(item, dict):
        return
    if kind == "response.output_item.done":
        if _same(d.get("item"), item):
            del d["item"]
        return
    if kind == "response.function_call_arguments.done":
        if d.get("arguments") == item.get("arguments"):
            del d["arguments"]
        return
    if kind in _TEXT_DONE or kind in ("response.content_part.done", "response.reasoning_summary_part.done"):
        where = "summary" if "summary_index" in d else "content"
        entries = item.get(where)
        sub = d.get("summary_index" if where == "summary" else "content_index")
        entry = entries[sub] if isinstance(entries, list) and type(sub) is int and 0 <= sub < len(entries) else None
        if not isinstance(entry, dict):
            return
        if kind in _TEXT_DONE:
            field, _, own = _TEXT_DONE[kind]
            if d.get(field) == entry.get(own):
                del d[field]
        else:
            given = (
                entry if kind == "response.content_part.done" else {"type": "summary_text", "text": entry.get("text")}
            )
            if _same(d.get("part"), given):
                del d["part"]


def _same(a: Any, b: Any) -> bool:
    """Equal JSON, a field set to None and a field not set being the same (as they are to the SDK)."""
    return bool(_clean(a) == _clean(b))


def _replayed_events(turn: ModelTurn) -> list[Any]:
    """The served turn's stream as the SDK's events: a recorded stream's own events, else events made from the
    response (created, in_progress, each item's added / text / done events, completed)."""
    try:
        response = _response_of(turn)
        items = _items(response)
        completed = _response_object(response, items, turn.model)
        events = turn.events
        if any(isinstance(e, dict) and ("sdk" in e or "sdk_before" in e or "sdk_after" in e) for e in events):
            return _recorded_events(events, items, completed)
        return _made_events(items, completed)
    except _Unbuildable as e:
        raise turn.cannot_rebuild(e.field, e.error) from None


def _response_object(response: dict[str, Any], items: list[Any], model: str) -> Any:
    """The ``Response`` a ``response.completed`` event carries: the recorded one's fields, the rebuilt output and
    usage (the SDK's ``Usage`` attached as the runner reads it back)."""
    meta = response.get("response") or {}
    if not isinstance(meta, dict):
        raise _Unbuildable("response.response", "not an object")
    usage = _usage(response)
    neutral = response.get("usage")
    try:
        response_usage = None
        if neutral is not None:
            response_usage = ResponseUsage.model_validate(
                {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                    "total_tokens": usage.total_tokens,
                    "input_tokens_details": {
                        "cached_tokens": usage.input_tokens_details.cached_tokens,
                        "cache_write_tokens": getattr(usage.input_tokens_details, "cache_write_tokens", 0),
                    },
                    "output_tokens_details": {"reasoning_tokens": usage.output_tokens_details.reasoning_tokens},
                }
            )
            attach = getattr(_agents_usage, "_attach_normalized_usage", None)
            if callable(attach):
                attach(response_usage, usage)
        fields = {
            "created_at": 0,
            "object": "response",
            "parallel_tool_calls": False,
            "tool_choice": "auto",
            "status": "completed",
            **meta,
            "id": response.get("id") or "",
            "model": response.get("model_name") or model,
            "output": items,
            "tools": [],
            "usage": response_usage,
        }
        made = Response.model_validate(fields)
    except ValidationError as e:
        where = next((".".join(map(str, err["loc"])) for err in e.errors() if err.get("loc")), "")
        raise _Unbuildable("response" + (f".{where}" if where else ""), e) from None
    if response.get("id") is None:
        object.__setattr__(made, "id", None)  # the SDK lets a model give no response id; Response does not
    if response.get("request_id") is not None:
        object.__setattr__(made, "_request_id", response["request_id"])
    if usage.requests and neutral is None:
        mark = getattr(_agents_usage, "_mark_requests_completed_without_usage", None)
        if callable(mark):
            mark(made, usage.requests)
    raw = response.get("raw_usage")
    attr = getattr(_agents_usage, "_RAW_USAGE_ATTRIBUTE", None)
    if isinstance(raw, dict) and isinstance(attr, str):
        object.__setattr__(made, attr, raw)
    return made


def _event(d: dict[str, Any], where: str) -> Any:
    try:
        return _adapter("event").validate_python(d)
    except ValidationError as e:
        raise _Unbuildable(where, e) from None


def _recorded_events(events: list[Any], items: list[Any], completed: Any) -> list[Any]:
    final = [_dump(item) for item in items]
    out = []
    for n, e in enumerate(events):
        if not isinstance(e, dict):
            raise _Unbuildable(f"events[{n}]", "not an object")
        for key in ("sdk_before", "sdk", "sdk_after"):
            held = e.get(key)
            if held is None:
                continue
            group = held if key != "sdk" else [held]
            if not isinstance(group, list):
                raise _Unbuildable(f"events[{n}].{key}", "not a list")
            for m, sk in enumerate(group):
                where = f"events[{n}].{key}" + (f"[{m}]" if key != "sdk" else "")
                if not isinstance(sk, dict):
                    raise _Unbuildable(where, "not an object")
                out.append(_event(_refilled(dict(sk), e if key == "sdk" else None, final, completed, where), where))
    return out


def _refilled(
    d: dict[str, Any], neutral: dict[str, Any] | None, final: list[Any], completed: Any, where: str
) -> dict[str, Any]:
    """A recorded SDK event with what :func:`_strip` left out put back."""
    kind = d.get("type")
    if kind == "response.completed" and "response" not in d:
        d["response"] = completed
        return d
    if isinstance(d.get("response"), dict) and "tools" not in d["response"]:
        d["response"] = {**d["response"], "tools": []}
    if kind in _DELTAS and "delta" not in d:
        field = _DELTAS[kind][0]
        if neutral is None or not isinstance(neutral.get(field), str):
            raise _Unbuildable(f"{where}.{field}" if neutral is not None else where, "the delta's text is missing")
        d["delta"] = neutral[field]
        return d
    oi = d.get("output_index")
    item = final[oi] if type(oi) is int and 0 <= oi < len(final) else None
    missing = {
        "response.output_item.done": "item",
        "response.function_call_arguments.done": "arguments",
        "response.content_part.done": "part",
        "response.reasoning_summary_part.done": "part",
    }.get(kind, _TEXT_DONE.get(kind, ("",))[0])  # type: ignore[arg-type]
    if not missing or missing in d:
        return d
    if not isinstance(item, dict):
        raise _Unbuildable(where, f"no output item {oi!r} to take its {missing} from")
    if kind == "response.output_item.done":
        d["item"] = item
    elif kind == "response.function_call_arguments.done":
        d["arguments"] = item.get("arguments")
    else:
        key = "summary" if "summary_index" in d else "content"
        entries = item.get(key)
        sub = d.get("summary_index" if key == "summary" else "content_index")
        if not (isinstance(entries, list) and type(sub) is int and 0 <= sub < len(entries)):
            raise _Unbuildable(where, f"output item {oi} has no {key} entry {sub!r}")
        entry = entries[sub]
        if kind == "response.content_part.done":
            d["part"] = entry
        elif kind == "response.reasoning_summary_part.done":
            d["part"] = {"type": "summary_text", "text": entry.get("text")}
        else:
            d[missing] = entry.get(_TEXT_DONE[str(kind)][2])
    return d


def _made_events(items: list[Any], completed: Any) -> list[Any]:
    """A stream made from a response recorded without streaming: each text and argument text in one delta."""
    n = 0
    out: list[Any] = []

    def add(d: dict[str, Any]) -> None:
        nonlocal n
        d["sequence_number"] = n
        n += 1
        out.append(_event(d, "events"))

    started = completed.model_copy(update={"output": [], "status": "in_progress", "usage": None})
    add({"type": "response.created", "response": started})
    add({"type": "response.in_progress", "response": started})
    for oi, item in enumerate(items):
        d = _dump(item)
        kind = d.get("type")
        item_id = d.get("id") or d.get("call_id") or ""
        at = {"item_id": item_id, "output_index": oi}
        if kind == "message":
            add(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {**d, "content": [], "status": "in_progress"},
                }
            )
            for ci, c in enumerate(d.get("content") or []):
                ct = c.get("type")
                if ct not in ("output_text", "refusal"):
                    continue
                field = "text" if ct == "output_text" else "refusal"
                empty = {**c, field: ""} | ({"annotations": [], "logprobs": []} if ct == "output_text" else {})
                add({"type": "response.content_part.added", **at, "content_index": ci, "part": empty})
                delta = "response.output_text.delta" if ct == "output_text" else "response.refusal.delta"
                done = "response.output_text.done" if ct == "output_text" else "response.refusal.done"
                extra: dict[str, Any] = {"logprobs": []} if ct == "output_text" else {}
                add({"type": delta, **at, "content_index": ci, "delta": c[field], **extra})
                add({"type": done, **at, "content_index": ci, field: c[field], **extra})
                add({"type": "response.content_part.done", **at, "content_index": ci, "part": c})
        elif kind == "function_call":
            add(
                {
                    "type": "response.output_item.added",
                    "output_index": oi,
                    "item": {**d, "arguments": "", "status": "in_progress"},
                }
            )
            add({"type": "response.function_call_arguments.delta", **at, "delta": d.get("arguments", "")})
            add(
                {
                    "type": "response.function_call_arguments.done",
                    **at,
                    "arguments": d.get("arguments", ""),
                    "name": d.get("name"),
                }
            )
        elif kind == "reasoning":
            empty = {**d, "summary": [], "status": "in_progress"}
            if isinstance(d.get("content"), list):
                empty["content"] = []
            add({"type": "response.output_item.added", "output_index": oi, "item": empty})
            for si, s in enumerate(d.get("summary") or []):
                text = s.get("text", "")
                add(
                    {
                        "type": "response.reasoning_summary_part.added",
                        **at,
                        "summary_index": si,
                        "part": {"type": "summary_text", "text": ""},
                    }
                )
                add({"type": "response.reasoning_summary_text.delta", **at, "summary_index": si, "delta": text})
                add({"type": "response.reasoning_summary_text.done", **at, "summary_index": si, "text": text})
                add(
                    {
                        "type": "response.reasoning_summary_part.done",
                        **at,
                        "summary_index": si,
                        "part": {"type": "summary_text", "text": text},
                    }
                )
            for ci, c in enumerate(d.get("content") or []):
                text = c.get("text", "")
                add({"type": "response.reasoning_text.delta", **at, "content_index": ci, "delta": text})
                add({"type": "response.reasoning_text.done", **at, "content_index": ci, "text": text})
        else:
            add({"type": "response.output_item.added", "output_index": oi, "item": d})
        add({"type": "response.output_item.done", "output_index": oi, "item": d})
    add({"type": "response.completed", "response": completed})
    return out
