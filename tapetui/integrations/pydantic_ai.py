"""pydantic-ai: a toolset whose tool calls, and a model whose requests, go through a tape.

``taped(toolset)`` wraps any pydantic-ai toolset (a ``FunctionToolset``, an MCP server, a combined or prefixed
one) in a :class:`TapedToolset`, a ``WrapperToolset``: the agent lists the same tools, and each call the model
makes goes through ``await tape.acall(...)`` — recorded, replayed with no tool run, or reported as drift.
``TapeCapability()`` does the same for every tool of an agent, its own ``@agent.tool`` functions included
(``Agent(model, capabilities=[TapeCapability()])``). Without ``tape=``, the tape current when the call is
made is used (``with tapetui.use_tape(...)``, the pytest ``tape`` fixture), so a toolset wrapped once at import
time works in every test. Written against pydantic-ai 2.68.

``TapedModel(model)`` is a ``WrapperModel`` whose ``request`` and ``request_stream`` go through the tape as model
turns (:meth:`Tape.model_turn <tapetui.core.tape.Tape.model_turn>`): ``Agent(TapedModel(model), toolsets=
[taped(toolset)])``; ``TapeCapability(models=True)`` does both for an agent, its model wrapped through
pydantic-ai's ``get_wrapper_model`` capability hook (for every attempt at a model request, whichever model
serves it). Together they rerun a whole agent offline: no model call, no tool run, no token; a changed prompt,
tool menu, setting or model is a ``ModelDrift``.

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
  ``MCPToolset`` puts in the definition's ``metadata`` with the definition's ``strict`` mode when it sets one (as
  ``annotations.strict``); ``side_effect`` when the tool requires
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

What goes on the tape for one model turn (a ``"type": "model"`` line, ``source`` ``"pydantic-ai"``; see
``docs/format.md``, "Model turns"):

- **model**: ``f"{model.system}:{model.model_name}"`` of the wrapped model (``openai:gpt-4o``; a
  ``FunctionModel`` is ``function:`` + its ``model_name``, by default made of its functions' names, so give
  the replay's model the same ``model_name=``; ``TestModel`` is ``test:test``).
- **request.instructions**: the instructions the model is sent (``ModelRequestParameters.instruction_parts``
  joined, prompted-output instructions included; ``ModelRequest.instructions`` for a request made without
  them), as ``FunctionModel`` gives them to its function.
- **request.messages**: the history as the model receives it (after ``prepare_messages``), oldest first. In a
  ``ModelRequest``, consecutive parts of one role make one message: a ``SystemPromptPart`` is a ``system``
  message's ``text``; a ``UserPromptPart`` a ``user`` message, a ``text`` part per text and any other content
  (an image, a document, a binary) as its JSON form, typed by its ``kind``; a ``ToolReturnPart`` a ``tool``
  message's ``tool_call_response`` (``response``: its content's JSON form; ``outcome`` when it is not
  ``success``, as ``"retried"`` for a ``ModelRetry``); a ``RetryPromptPart`` the same with its
  ``model_response()`` text (``outcome: "retry"``), or a ``user`` text when it names no tool; any other part
  as its JSON form, typed by its ``part_kind``. A ``ModelResponse`` is one ``assistant`` message of its parts,
  as in **response.parts**, without ``arguments_text``.
- **request.tools**: every tool offered: the function tools the model is shown
  (``declared_function_tools``: not the deferred ones it cannot see yet) and the output tools, each as
  :func:`taped` registers it — ``name``, ``description``, ``parameters`` (``parameters_json_schema``),
  ``output_schema`` (``return_schema``), ``annotations`` (MCP, from ``metadata``, and ``strict``),
  ``side_effect`` — so the model turn and the tool's calls share one contract. The definitions become contracts
  (tool lines, checked first on replay: a changed one is a ``ToolDriftError`` even for a tool the model never
  calls); the request holds their names. **request.native_tools**: the provider's own tools, as their JSON
  form, when there are any.
- **request.output_schema**: ``output_object`` (``json_schema``, ``name``, ``description``, ``strict``)
  without None; None for plain text.
- **request.settings**: the request's ``ModelSettings`` as JSON without None values, ``extra_headers``
  (headers are never recorded), ``timeout``, ``request_timeout``, ``first_event_timeout`` and ``max_retries``
  (how a request is sent, not what it asks).
- **never in the request**: timestamps, ``run_id``, ``conversation_id``, request and response ``metadata``, a
  previous response's own fields (``provider_response_id``, ``model_name``, usage...): only its parts are.
  Tool-call ids pydantic-ai made up (``pyd_ai_…``: its own, ``FunctionModel``'s and ``TestModel``'s, new at
  each run) become ``call_1``, ``call_2``... by first appearance (:func:`~tapetui.core.turns.stable_ids`), in
  calls and returns alike; ids a provider issued stay (they come back from the tape).
- **response.parts**: the ``ModelResponse``'s parts, in order: a ``TextPart`` is ``text``, a ``ThinkingPart``
  ``reasoning`` (``content``), a ``ToolCallPart`` ``tool_call`` (``id``: its ``tool_call_id``; ``arguments``
  parsed; ``arguments_text`` when the model wrote its arguments as text; ``item_id``: the part's own ``id``;
  ``part_kind`` for a typed subclass such as a tool search call), any other part (a provider's own tool call
  or return, a file) a part of its ``part_kind`` holding its JSON form. Each keeps its other fields that are
  not None (``id``, ``signature``, ``provider_name``, ``provider_details``, ``citations``...; a thinking
  ``signature`` is redacted by the default rules).
- **response.finish_reason**: pydantic-ai's, its ``tool_call`` as ``tool_calls``; **response.id**:
  ``provider_response_id``; **response.model_name**: the response's; and the response's other fields that
  are not None nor default (``timestamp``, ``provider_name``, ``provider_url``, ``provider_details``,
  ``model_id``, ``state`` when not ``complete``...) under their own names.
- **usage**: ``input_tokens`` (which includes cached tokens in pydantic-ai) as ``input``, ``output_tokens`` as
  ``output``, ``cache_read_tokens`` and ``cache_write_tokens`` as ``cache_read``/``cache_write`` when not 0;
  none when nothing was counted. **response.usage_details**: the ``RequestUsage``'s other counts that are not
  their default (``output_reasoning_tokens``, audio, ``details``...).
- **errors**: what the model call raised is the turn's error, raised again on replay (as its own class when
  the tape's rules allow). A stream whose reader stops before its end, or that is cancelled, leaves no turn.

Replay rebuilds the ``ModelResponse`` from these fields with pydantic-ai's own validation — equal to the live
one, its usage and timestamp included, so the run's usage is what it was live. A turn that no longer rebuilds
(a field edited or missing, another pydantic-ai version) raises ``TapeError`` naming the tape, the step and the
field (``parts[1].content``, ``events[4].content``).

Streams: ``request_stream`` yields the wrapped model's own ``StreamedResponse``, and records its events as
pydantic-ai makes them (its ``_get_event_iterator``, private, read by instance: before the part-end and
final-result events ``StreamedResponse`` adds): ``start``; per ``PartStartEvent`` a ``part`` event (the part as in
**response.parts**, without its text or argument text; ``arguments_object`` when its arguments were an object)
followed by a ``delta`` holding that text when there is any; per ``PartDeltaEvent`` a ``delta`` (``content`` for
text and thinking, ``arguments`` for argument text, with the delta's ``signature``, ``name``, ``id``,
``provider_name``, ``provider_details``, ``citations`` when it has them); ``end`` once the stream ran out; the
response is ``stream.get()`` then. **Exact**: replay yields a ``StreamedResponse`` whose events are made by
pydantic-ai's parts manager from the recorded ones — a part started with its first chunk, then one delta per
recorded delta — so ``agent.run_stream`` and ``agent.iter`` see the same parts and text chunks in the same order
(part-end and final-result events added by pydantic-ai as live), and once read to its end ``get()`` is the
recorded response. **Rebuilt**: a turn recorded without streaming serves a stream of one part event carrying
all of its text per part. A recorded stream serves a plain request with its final response.
"""

from __future__ import annotations

import contextvars
import json
import typing
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import pydantic_core
from pydantic import TypeAdapter, ValidationError
from pydantic_ai import RunContext
from pydantic_ai._instrumentation import get_instructions  # what FunctionModel tells its function (private)
from pydantic_ai._special_tokens import StreamRestorer  # the parts manager's own (private)
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.messages import (
    Citation,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelResponse,
    ModelResponsePart,
    ModelResponseStreamEvent,
    PartDeltaEvent,
    PartStartEvent,
    RetryPromptPart,
    SystemPromptPart,
    TextPartDelta,
    ThinkingPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from tapetui.core.tape import Tape
from tapetui.core.turns import json_arguments, stable_ids
from tapetui.integrations._common import resolve_tape

if TYPE_CHECKING:
    from tapetui.core.modelturn import ModelTurn

__all__ = ["TapeCapability", "TapedModel", "TapedToolset", "taped"]

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
    """Every tool of an agent through a tape: ``Agent(model, capabilities=[TapeCapability()])``; with
    ``models=True`` its model requests too (``TapeCapability(models=True)``: the whole agent reruns offline).

    It wraps the agent's assembled toolset (its ``@agent.tool`` functions and its ``toolsets``, not its output
    tools) with :func:`taped` at each run; with ``models``, the model that serves each model request (the
    agent's, the run's ``model=``, one a hook selected, a fallback's next candidate) in a :class:`TapedModel`,
    through pydantic-ai's ``get_wrapper_model`` hook (called for every attempt at a model request; a model
    already a ``TapedModel`` is left as it is).

    Attributes:
        tape: the tape; None for the one current at each call.
        models: also put the agent's model requests through the tape (False: its tools only).
    """

    tape: Tape | None = None
    models: bool = False

    def get_wrapper_toolset(self, toolset: AbstractToolset[DepsT]) -> AbstractToolset[DepsT] | None:
        return taped(toolset, self.tape)

    def get_wrapper_model(self, model: Model) -> Model | None:
        if not self.models or isinstance(model, TapedModel):
            return None
        return TapedModel(model, self.tape)


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
    tape.contract(
        name,
        schema=tool_def.parameters_json_schema,
        description=tool_def.description,
        output_schema=tool_def.return_schema or None,
        annotations=_annotations(tool_def),
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


# ---- model turns ---------------------------------------------------------------------------------------------

SOURCE = "pydantic-ai"
_LOCAL_ID = "pyd_ai_"  # pydantic_ai._utils.TOOL_CALL_ID_PREFIX: the tool-call ids pydantic-ai makes up
# the settings that say how a request is sent, not what it asks (and headers, never recorded)
_HOW_SENT = frozenset({"timeout", "request_timeout", "first_event_timeout", "max_retries", "extra_headers"})
# a response's fields that are not the model's (the run's ids, stamped by the agent) or that the neutral
# response holds under its own name
_RESPONSE_OWN = frozenset(
    {"parts", "usage", "model_name", "provider_response_id", "finish_reason", "run_id", "conversation_id", "kind"}
)
# RequestUsage's counts that are the neutral usage, by their neutral names
_USAGE_MAIN = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_tokens": "cache_read",
    "cache_write_tokens": "cache_write",
}
# a ToolCallPart's fields, by their neutral names (the part's own ``id`` is ``item_id``: ``id`` is the call's)
_CALL_FIELDS = {"tool_call_id": "id", "tool_name": "name", "args": "arguments", "id": "item_id"}
_NEUTRAL_FINISH = {"tool_call": "tool_calls"}
_PYDANTIC_FINISH = {v: k for k, v in _NEUTRAL_FINISH.items()}
# a model request a TapedModel of this tape is running live: a TapedModel inside it passes through
_MODEL_TAPING: contextvars.ContextVar[int | None] = contextvars.ContextVar("tapetui_pydantic_ai_model", default=None)


@dataclass(init=False)
class TapedModel(WrapperModel):
    """A pydantic-ai model whose requests go through a tape: ``Agent(TapedModel(model))``.

    ``request`` and ``request_stream`` convert each request to the neutral request (see the module doc) and ask
    :meth:`Tape.model_turn <tapetui.core.tape.Tape.model_turn>`: ``record`` calls ``model`` and writes the turn;
    ``replay`` rebuilds the ``ModelResponse`` (or a ``StreamedResponse`` yielding the recorded events through
    pydantic-ai's parts manager) and never calls ``model``; ``fill`` calls it only on a miss. Everything else
    (profile, settings, ``prepare_request``...) is the wrapped model's. The model's name on the tape is
    ``f"{model.system}:{model.model_name}"``.

    Attributes:
        wrapped: the model that answers live (a model name is inferred as pydantic-ai does).
        tape: the tape; None for the one current at each request (``tapetui.use_tape``, the pytest fixture).
    """

    tape: Tape | None

    def __init__(self, model: Model | str, tape: Tape | None = None) -> None:
        super().__init__(model)
        self.tape = tape

    @property
    def tape_name(self) -> str:
        """The model's name on the tape: ``f"{system}:{model_name}"`` of the wrapped model."""
        return f"{self.wrapped.system}:{self.wrapped.model_name}"

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        """One request through the tape (the module doc says what is recorded).

        Raises:
            ModelDrift, TapeMiss, ToolDriftError: replay found the request changed, missing, or a tool changed.
            TapeError: a recorded response that no longer rebuilds (naming the tape, the step and the field).
        """
        tape = resolve_tape(self.tape)
        wrapped = self.wrapped
        if _MODEL_TAPING.get() == id(tape):  # a TapedModel outside this one records the request
            return await wrapped.request(messages, model_settings, model_request_parameters)
        request = _request(messages, model_settings, model_request_parameters)
        turn = tape.model_turn(request, model=self.tape_name, source=SOURCE)
        if turn.served:
            return _rebuilt(turn)
        token = _MODEL_TAPING.set(id(tape))
        try:
            response = await wrapped.request(messages, model_settings, model_request_parameters)
        except BaseException as e:
            turn.fail(e)
            raise
        finally:
            _MODEL_TAPING.reset(token)
        try:
            neutral = _neutral_response(response)
        except BaseException:
            turn.abandon()
            raise
        turn.finish(neutral)
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: RunContext[Any] | None = None,
    ) -> AsyncIterator[StreamedResponse]:
        """One streamed request through the tape: the wrapped model's own stream, its events recorded as they
        pass; on replay a stream of the recorded events (all rebuilt before the first is yielded).

        Raises:
            as :meth:`request`.
        """
        tape = resolve_tape(self.tape)
        wrapped = self.wrapped
        if _MODEL_TAPING.get() == id(tape):
            async with wrapped.request_stream(messages, model_settings, model_request_parameters, run_context) as s:
                yield s
            return
        request = _request(messages, model_settings, model_request_parameters)
        turn = tape.model_turn(request, model=self.tape_name, source=SOURCE, stream=True)
        if turn.served:
            yield _replayed_stream(turn, model_request_parameters, _restores_tokens(wrapped))
            return
        recorder = _Recorder()
        token = _MODEL_TAPING.set(id(tape))
        try:
            opened = wrapped.request_stream(messages, model_settings, model_request_parameters, run_context)
            stream = await opened.__aenter__()  # a model that fails to open its stream fails here
        except BaseException as e:
            turn.fail(e)
            raise
        finally:
            _MODEL_TAPING.reset(token)
        try:
            recorder.attach(stream)
            yield stream
        except BaseException as e:
            try:
                suppressed = await opened.__aexit__(type(e), e, e.__traceback__)
            finally:
                recorder.settle(turn, stream)
            if not suppressed:
                raise
            return
        try:
            await opened.__aexit__(None, None, None)
        finally:
            recorder.settle(turn, stream)


def _restores_tokens(model: Model) -> bool:
    """Whether ``model``'s streams restore special tokens (``Model._restores_special_tokens``, private: read with
    ``getattr``): a recorded stream holds the events before that restoration, so its replay restores them too."""
    try:
        return bool(getattr(model, "_restores_special_tokens", False))
    except Exception:  # noqa: BLE001 - a profile that cannot be read: no restoration
        return False


# ---- the request -------------------------------------------------------------------------------------------


def _request(
    messages: list[ModelMessage], settings: ModelSettings | None, params: ModelRequestParameters
) -> dict[str, Any]:
    """The neutral request of one model request (the module doc says what each field holds)."""
    function_tools = getattr(params, "declared_function_tools", params.function_tools)
    request: dict[str, Any] = {
        "instructions": get_instructions(messages, params),
        "messages": stable_ids(_messages(messages), _local_id),
        "tools": [_tool_definition(t) for t in [*function_tools, *params.output_tools]],
        "output_schema": _json_without_none(params.output_object) if params.output_object is not None else None,
        "settings": _settings(settings),
    }
    if params.native_tools:
        request["native_tools"] = [_json(t) for t in params.native_tools]
    return request


def _local_id(ident: str) -> bool:
    """A tool-call id pydantic-ai made up (``pyd_ai_…``: new at each run), not one a provider issued."""
    return ident.startswith(_LOCAL_ID)


def _messages(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The history as neutral messages: a request's consecutive parts of one role in one message, a response one
    ``assistant`` message."""
    dumped = _adapter("messages").dump_python(messages, mode="json")
    out: list[dict[str, Any]] = []
    for message, d in zip(messages, dumped, strict=True):
        if isinstance(message, ModelResponse):
            parts = [_response_part(p, history=True) for p in d["parts"]]
            out.append({"role": "assistant", "parts": parts})
            continue
        last: dict[str, Any] | None = None
        for part, p in zip(message.parts, d["parts"], strict=True):
            role, neutral = _request_part(part, p)
            if last is None or last["role"] != role:
                last = {"role": role, "parts": []}
                out.append(last)
            last["parts"].extend(neutral)
    return out


def _request_part(part: Any, p: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """One part of a ``ModelRequest`` (``p``: its JSON form) as ``(role, neutral parts)``."""
    kind = p.get("part_kind")
    if isinstance(part, SystemPromptPart):
        return "system", [{"type": "text", "content": part.content}]
    if isinstance(part, UserPromptPart):
        content = p.get("content")
        items = [content] if isinstance(content, str) else content if isinstance(content, list) else []
        return "user", [_user_content(c) for c in items]
    if isinstance(part, ToolReturnPart):
        response: dict[str, Any] = {
            "type": "tool_call_response",
            "id": part.tool_call_id,
            "name": part.tool_name,
            "response": p.get("content"),
        }
        if p.get("outcome") not in (None, "success"):
            response["outcome"] = p["outcome"]
        return "tool", [response]
    if isinstance(part, RetryPromptPart):
        text = part.model_response()
        if part.tool_name is None:  # an output validation's retry: the model reads it as the user's text
            return "user", [{"type": "text", "content": text}]
        retry = {"type": "tool_call_response", "id": part.tool_call_id, "name": part.tool_name, "response": text}
        return "tool", [{**retry, "outcome": "retry"}]
    rest = {k: v for k, v in p.items() if k not in ("part_kind", "timestamp") and v is not None}
    return "user", [_typed(str(kind), rest)]


def _user_content(c: Any) -> dict[str, Any]:
    if isinstance(c, str):
        return {"type": "text", "content": c}
    if isinstance(c, dict) and c.get("kind") == "text-content" and isinstance(c.get("content"), str):
        return {"type": "text", "content": c["content"]}
    if isinstance(c, dict):
        return _typed(str(c.get("kind")), {k: v for k, v in c.items() if k != "kind" and v is not None})
    return {"type": "unknown", "value": c}


def _typed(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """A part of pydantic-ai's own ``kind`` with its fields (nested when one of them is called ``type``)."""
    return {"type": kind, "fields": fields} if "type" in fields else {"type": kind, **fields}


def _tool_definition(t: ToolDefinition) -> dict[str, Any]:
    """A tool as :func:`taped` registers it, so the model turn and the tool's calls share one contract."""
    return {
        "name": t.name,
        "description": t.description,
        "parameters": t.parameters_json_schema,
        "output_schema": t.return_schema or None,
        "annotations": _annotations(t),
        "side_effect": t.kind == "unapproved",
    }


def _annotations(t: ToolDefinition) -> dict[str, Any] | None:
    """The MCP annotations an ``MCPToolset`` puts in the definition's ``metadata``, and its ``strict`` mode when it
    sets one (the model is sent it: a tool switched to strict schemas is a changed contract)."""
    metadata = t.metadata
    annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
    out = dict(annotations) if isinstance(annotations, dict) else None
    if t.strict is not None:
        out = {**(out or {}), "strict": t.strict}
    return out


def _settings(settings: ModelSettings | None) -> dict[str, Any]:
    if not settings:
        return {}
    return {k: _json(v) for k, v in dict(settings).items() if v is not None and k not in _HOW_SENT}


def _json(value: Any) -> Any:
    return pydantic_core.to_jsonable_python(value, fallback=lambda v: type(v).__name__)


def _json_without_none(value: Any) -> Any:
    d = _json(value)
    return {k: v for k, v in d.items() if v is not None} if isinstance(d, dict) else d


# ---- the response ------------------------------------------------------------------------------------------


def _neutral_response(response: ModelResponse) -> dict[str, Any]:
    """The live ``ModelResponse`` as the neutral response (the module doc says what each field holds)."""
    d = _adapter("messages").dump_python([response], mode="json")[0]
    out: dict[str, Any] = {
        "parts": [_response_part(p) for p in d["parts"]],
        "finish_reason": _NEUTRAL_FINISH.get(d.get("finish_reason"), d.get("finish_reason")),
        "model_name": d.get("model_name"),
        "id": d.get("provider_response_id"),
    }
    usage, details = _neutral_usage(d.get("usage") or {})
    out["usage"] = usage
    if details:
        out["usage_details"] = details
    for k, v in d.items():
        if k in _RESPONSE_OWN or v is None or (k == "state" and v == "complete"):
            continue
        out[k] = v
    return out


def _response_part(p: dict[str, Any], history: bool = False) -> dict[str, Any]:
    """A response part (its JSON form) as a neutral part; in a request's history (``history``), without the
    argument text a response keeps to rebuild the part as it was."""
    kind = p.get("part_kind")
    if kind == "text":
        return _with_extras({"type": "text", "content": p.get("content")}, p, ("content",))
    if kind == "thinking":
        return _with_extras({"type": "reasoning", "content": p.get("content")}, p, ("content",))
    if "tool_name" in p and "args" in p and "tool_call_id" in p and not str(kind).startswith("builtin"):
        args = p.get("args")
        out: dict[str, Any] = {
            "type": "tool_call",
            "id": p.get("tool_call_id"),
            "name": p.get("tool_name"),
            "arguments": json_arguments(args),
        }
        if isinstance(args, str) and not history:
            out["arguments_text"] = args
        for k, v in p.items():
            if (k in _CALL_FIELDS and k != "id") or k == "part_kind" or v is None:
                continue
            out[_CALL_FIELDS.get(k, k)] = v
        if kind != "tool-call":
            out["part_kind"] = kind
        return out
    rest = {k: v for k, v in p.items() if k != "part_kind" and v is not None and not (history and k == "timestamp")}
    return _typed(str(kind), rest)


def _with_extras(out: dict[str, Any], p: dict[str, Any], used: tuple[str, ...]) -> dict[str, Any]:
    for k, v in p.items():
        if k in used or k == "part_kind" or v is None or k in out:
            continue
        out[k] = v
    return out


def _neutral_usage(u: dict[str, Any]) -> tuple[dict[str, int] | None, dict[str, Any]]:
    """``RequestUsage`` (its JSON form) as ``input`` (cache included, as pydantic-ai counts it), ``output``,
    ``cache_read`` and ``cache_write`` (these two when not 0), None when nothing was counted; and the other
    counts that are not their default (``usage_details``)."""
    usage: dict[str, int] = {}
    details: dict[str, Any] = {}
    for k, v in u.items():
        name = _USAGE_MAIN.get(k)
        if name is not None:
            if v or name in ("input", "output"):
                usage[name] = v
        elif v not in (0, None, {}, []):
            details[k] = v
    if not any(usage.values()):
        return None, details
    return usage, details


# ---- rebuilding pydantic-ai's types from the tape ------------------------------------------------------------


class _Unbuildable(Exception):
    """A recorded field that does not rebuild: ``field`` is its path in the recorded turn."""

    def __init__(self, field: str, error: BaseException | str) -> None:
        super().__init__(field)
        self.field = field
        self.error = error


_ADAPTERS: dict[str, Any] = {}


def _adapter(name: str) -> Any:
    """pydantic-ai's message list, response and response part types, each validated by a ``TypeAdapter`` made
    once."""
    found = _ADAPTERS.get(name)
    if found is None:
        if name == "messages":
            found = ModelMessagesTypeAdapter
        else:
            found = TypeAdapter(ModelResponse if name == "response" else ModelResponsePart)
        _ADAPTERS[name] = found
    return found


def _rebuilt(turn: ModelTurn) -> ModelResponse:
    """The served turn as pydantic-ai's ``ModelResponse``, its usage included."""
    try:
        return _response_object(turn.response)
    except _Unbuildable as e:
        raise turn.cannot_rebuild(e.field, e.error) from None


def _response_object(response: Any) -> ModelResponse:
    if not isinstance(response, dict):
        raise _Unbuildable("response", "not an object")
    parts = response.get("parts")
    if not isinstance(parts, list):
        raise _Unbuildable("parts", "expected a list of parts")
    d: dict[str, Any] = {
        k: v
        for k, v in response.items()
        if k not in ("parts", "usage", "usage_details", "finish_reason", "model_name", "id")
    }
    d["kind"] = "response"
    d["parts"] = [_part_object(i, p) for i, p in enumerate(parts)]
    d["usage"] = _usage_json(response)
    for key in ("model_name", "id", "finish_reason"):
        value = response.get(key)
        if value is not None and not isinstance(value, str):
            raise _Unbuildable(key, f"expected text or null, got {type(value).__name__}")
    d["model_name"] = response.get("model_name")
    d["provider_response_id"] = response.get("id")
    finish = response.get("finish_reason")
    d["finish_reason"] = _PYDANTIC_FINISH.get(finish, finish) if finish is not None else None
    try:
        rebuilt: ModelResponse = _adapter("response").validate_python(d)
    except ValidationError as e:
        raise _Unbuildable(_where(e, {"provider_response_id": "id"}), _first_error(e)) from None
    return rebuilt


def _part_object(i: int, p: Any) -> Any:
    """Neutral part ``i`` as pydantic-ai's response part."""
    at = f"parts[{i}]"
    if not isinstance(p, dict) or not isinstance(p.get("type"), str):
        raise _Unbuildable(at, "expected an object with a 'type'")
    d = _part_json(at, p)
    try:
        return _adapter("part").validate_python(d)
    except ValidationError as e:
        names = _CALL_FIELDS if p["type"] == "tool_call" else {}
        raise _Unbuildable(f"{at}.{_where(e, names, d['part_kind'])}", _first_error(e)) from None


def _part_json(at: str, p: dict[str, Any]) -> dict[str, Any]:
    """Neutral part ``p`` as pydantic-ai's JSON form of the part (checked field by field)."""
    kind = p["type"]
    if kind in ("text", "reasoning"):
        content = p.get("content", "")
        if not isinstance(content, str):
            raise _Unbuildable(f"{at}.content", f"expected text, got {type(content).__name__}")
        rest = {k: v for k, v in p.items() if k != "type"}
        return {**rest, "content": content, "part_kind": "text" if kind == "text" else "thinking"}
    if kind == "tool_call":
        name = p.get("name")
        if not isinstance(name, str) or not name:
            raise _Unbuildable(f"{at}.name", "expected the tool's name")
        ident = p.get("id")
        if ident is not None and not isinstance(ident, str):
            raise _Unbuildable(f"{at}.id", f"expected text or null, got {type(ident).__name__}")
        d: dict[str, Any] = {"part_kind": p.get("part_kind", "tool-call"), "tool_name": name, "args": _args(at, p)}
        if ident is not None:
            d["tool_call_id"] = ident
        if p.get("item_id") is not None:
            d["id"] = p["item_id"]
        for k, v in p.items():
            if k not in ("type", "id", "name", "arguments", "arguments_text", "item_id", "part_kind"):
                d[k] = v
        return d
    nested = p.get("fields")
    if isinstance(nested, dict) and len(p) == 2:  # a part with a field called "type" (see _typed)
        return {**nested, "part_kind": kind}
    return {**{k: v for k, v in p.items() if k != "type"}, "part_kind": kind}


def _args(at: str, p: dict[str, Any]) -> Any:
    """A tool call's ``args``: the text the model wrote when the tape has it and it still says the recorded
    ``arguments`` (an edited ``arguments`` replays edited), else ``arguments``."""
    text = p.get("arguments_text")
    arguments = p.get("arguments")
    if text is not None and not isinstance(text, str):
        raise _Unbuildable(f"{at}.arguments_text", f"expected text, got {type(text).__name__}")
    if isinstance(text, str) and ("arguments" not in p or json_arguments(text) == arguments):
        return text
    if arguments is not None and not isinstance(arguments, (dict, str)):
        raise _Unbuildable(f"{at}.arguments", f"expected an object, got {type(arguments).__name__}")
    return arguments


def _usage_json(response: dict[str, Any]) -> dict[str, Any]:
    usage = response.get("usage")
    details = response.get("usage_details")
    if usage is not None and not isinstance(usage, dict):
        raise _Unbuildable("usage", "expected an object of token counts")
    if details is not None and not isinstance(details, dict):
        raise _Unbuildable("usage_details", "expected an object")
    out: dict[str, Any] = dict(details or {})
    for pyd, neutral in _USAGE_MAIN.items():
        v = (usage or {}).get(neutral, 0)
        if type(v) is not int or v < 0:
            raise _Unbuildable(f"usage.{neutral}", f"expected a whole number of tokens, got {v!r}")
        out[pyd] = v
    return out


def _where(e: ValidationError, names: dict[str, str], tag: str | None = None) -> str:
    """The field of a validation error's first failure, by its name on the tape (``tag``: the union member a
    part was validated as, which pydantic puts first in the error's place; an error with no place is the
    part's ``type``, or the whole response's)."""
    errors = e.errors()
    loc = [x for x in (errors[0].get("loc", ()) if errors else ()) if isinstance(x, (str, int))]
    if tag is not None and loc[:1] == [tag]:
        loc = loc[1:]
    out = ""
    for x in loc:
        if isinstance(x, int):
            out += f"[{x}]"
        else:
            out += ("." if out else "") + names.get(x, x)
    return out or ("type" if tag is not None else "response")


def _first_error(e: ValidationError) -> str:
    errors = e.errors()
    return str(errors[0].get("msg")) if errors else str(e)


# ---- streams ------------------------------------------------------------------------------------------------


class _Recorder:
    """Records a live stream's events as they pass: pydantic-ai's own events, read where its ``StreamedResponse``
    makes them (``_get_event_iterator``, before the part-end and final-result events the stream adds)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.ended = False
        self.error: BaseException | None = None

    def attach(self, stream: StreamedResponse) -> None:
        source = stream._get_event_iterator  # the stream's own method, bound

        async def recording() -> AsyncIterator[ModelResponseStreamEvent]:
            self.events.append({"type": "start"})
            try:
                async for event in source():
                    self.events.extend(_neutral_events(event))
                    yield event
            except Exception as e:
                self.error = e
                raise
            self.events.append({"type": "end"})
            self.ended = True

        # an instance attribute, read by StreamedResponse.__aiter__ instead of the class's method (private to
        # pydantic-ai, as the parts manager is; the stream is the model's own, unchanged otherwise)
        stream._get_event_iterator = recording  # type: ignore[method-assign]

    def settle(self, turn: ModelTurn, stream: StreamedResponse) -> None:
        """When the stream is closed: what the model's stream raised recorded as the turn's error; a stream read
        to its end recorded (``stream.get()`` and the events); anything else (a reader that stopped early, a
        cancellation, an error of the reader's own) leaves no turn."""
        if self.error is not None:
            turn.fail(self.error)
        elif self.ended:
            try:
                response = _neutral_response(stream.get())
            except BaseException:
                turn.abandon()
                raise
            turn.finish(response, events=self.events)
        else:
            turn.abandon()


def _neutral_events(event: ModelResponseStreamEvent) -> list[dict[str, Any]]:
    """One pydantic-ai stream event as neutral events: a part's start as its ``part`` (without its text or
    argument text) and a ``delta`` holding them; a delta as a ``delta``."""
    if isinstance(event, PartStartEvent):
        p = _response_part(_adapter("part").dump_python(event.part, mode="json"))
        i = event.index
        if p["type"] in ("text", "reasoning"):
            head = {k: v for k, v in p.items() if k != "content"}
            content = p.get("content")
            return [{"type": "part", "index": i, "part": head}] + (
                [{"type": "delta", "index": i, "content": content}] if content else []
            )
        if p["type"] == "tool_call":
            head = {k: v for k, v in p.items() if k not in ("arguments", "arguments_text")}
            args = event.part.args if isinstance(event.part, ToolCallPart) else None
            if isinstance(args, dict):
                head["arguments_object"] = True
                args = json.dumps(args)
            return [{"type": "part", "index": i, "part": head}] + (
                [{"type": "delta", "index": i, "arguments": args}] if isinstance(args, str) and args else []
            )
        return [{"type": "part", "index": i, "part": p}]
    if isinstance(event, PartDeltaEvent):
        delta = event.delta
        out: dict[str, Any] = {"type": "delta", "index": event.index}
        extra: dict[str, Any]
        if isinstance(delta, TextPartDelta):
            out["content"] = delta.content_delta
            extra = {"provider_name": delta.provider_name, "provider_details": delta.provider_details}
            extra["citations"] = delta.citations_delta
        elif isinstance(delta, ThinkingPartDelta):
            if delta.content_delta is not None:
                out["content"] = delta.content_delta
            extra = {"signature": delta.signature_delta, "provider_name": delta.provider_name}
            if not callable(delta.provider_details):  # a function of the details so far: the response has its result
                extra["provider_details"] = delta.provider_details
        elif isinstance(delta, ToolCallPartDelta):
            if isinstance(delta.args_delta, str):
                out["arguments"] = delta.args_delta
            extra = {"name": delta.tool_name_delta, "id": delta.tool_call_id, "provider_name": delta.provider_name}
            extra["provider_details"] = delta.provider_details
            extra["arguments_object"] = delta.args_delta if isinstance(delta.args_delta, dict) else None
        else:
            extra = {"sdk": _json(delta)}
        out.update({k: _json(v) for k, v in extra.items() if v is not None})
        return [out]
    return [{"type": str(getattr(event, "event_kind", "event")), "sdk": _json(event)}]


@dataclass
class _ReplayedStream(StreamedResponse):
    """A recorded stream, replayed: each event goes through pydantic-ai's parts manager, as a model's own stream
    does, so the run sees the same parts, deltas and text in the same order; once read to its end, ``get()`` is the
    recorded response (its usage, ids and details as recorded)."""

    _ops: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    _response: ModelResponse | None = None
    _restore: bool = False

    def __post_init__(self) -> None:
        r = self._response
        assert r is not None
        self.provider_response_id = r.provider_response_id
        self.provider_details = r.provider_details
        self.canonical_system = r.canonical_system
        self.finish_reason = r.finish_reason
        self.metadata = r.metadata
        self._usage = r.usage
        if self._restore:
            self._parts_manager.special_token_restorer = StreamRestorer()

    async def _get_event_iterator(self) -> AsyncIterator[ModelResponseStreamEvent]:
        manager = self._parts_manager
        for op, index, kw in self._ops:
            if op == "part":
                yield manager.handle_part(vendor_part_id=index, part=kw["part"])
            elif op == "text":
                for event in manager.handle_text_delta(vendor_part_id=index, **kw):
                    yield event
            elif op == "reasoning":
                for event in manager.handle_thinking_delta(vendor_part_id=index, **kw):
                    yield event
            else:
                for event in manager.handle_tool_call_delta_events(vendor_part_id=index, **kw):
                    yield event

    def get(self) -> ModelResponse:
        if self._finished and self._response is not None:
            return self._response
        return super().get()

    async def close_stream(self) -> None:
        pass  # nothing runs: the events are on the tape

    @property
    def model_name(self) -> str:
        assert self._response is not None
        return self._response.model_name or ""

    @property
    def provider_name(self) -> str | None:
        assert self._response is not None
        return self._response.provider_name

    @property
    def provider_url(self) -> str | None:
        assert self._response is not None
        return self._response.provider_url

    @property
    def timestamp(self) -> datetime:
        assert self._response is not None
        return self._response.timestamp


def _replayed_stream(turn: ModelTurn, params: ModelRequestParameters, restore: bool) -> _ReplayedStream:
    """The served turn as a stream (every event rebuilt first: a bad recording fails before any event)."""
    try:
        response = _response_object(turn.response)
        ops = _ops(turn.events)
    except _Unbuildable as e:
        raise turn.cannot_rebuild(e.field, e.error) from None
    return _ReplayedStream(model_request_parameters=params, _ops=ops, _response=response, _restore=restore)


def _ops(events: list[Any]) -> list[tuple[str, int, dict[str, Any]]]:
    """Neutral events as the parts manager's calls: a part with the delta right after it (its first text, as a
    model's stream starts a part with its first chunk), then one call per delta."""
    ops: list[tuple[str, int, dict[str, Any]]] = []
    kinds: dict[int, str] = {}
    n = 0
    while n < len(events):
        e = events[n]
        at = f"events[{n}]"
        if not isinstance(e, dict) or not isinstance(e.get("type"), str):
            raise _Unbuildable(at, "expected an object with a 'type'")
        kind = e["type"]
        index = e.get("index")
        if kind in ("part", "delta") and (type(index) is not int or index < 0):
            raise _Unbuildable(f"{at}.index", f"expected a part's index, got {index!r}")
        if kind == "part":
            assert isinstance(index, int)
            head = e.get("part")
            if not isinstance(head, dict) or not isinstance(head.get("type"), str):
                raise _Unbuildable(f"{at}.part", "expected an object with a 'type'")
            nxt = events[n + 1] if n + 1 < len(events) else None
            first = None
            if (
                isinstance(nxt, dict)
                and nxt.get("type") == "delta"
                and nxt.get("index") == index
                and set(nxt) <= {"type", "index", "content", "arguments"}
            ):
                first = (f"events[{n + 1}]", nxt)
                n += 1
            ops.append(("part", index, {"part": _streamed_part(at, head, first)}))
            kinds[index] = head["type"]
        elif kind == "delta":
            assert isinstance(index, int)
            ops.append(_delta_op(at, e, kinds.get(index)))
        n += 1
    return ops


def _streamed_part(at: str, head: dict[str, Any], first: tuple[str, dict[str, Any]] | None) -> Any:
    """A part's start: its head with the text or argument text of the delta right after it (``first``)."""
    p = dict(head)
    as_object = p.pop("arguments_object", False)
    if p["type"] == "tool_call":
        recorded = p.pop("arguments_text", None)  # a plain turn's events: the text the model wrote, when it did
        text = first[1].get("arguments", "") if first is not None else None
        if first is not None and not isinstance(text, str):
            raise _Unbuildable(f"{first[0]}.arguments", f"expected text, got {type(text).__name__}")
        if text is None:
            p["arguments"] = None
        elif as_object:
            p["arguments"] = json_arguments(text)
        else:
            p["arguments"] = json_arguments(text)
            same = isinstance(recorded, str) and json_arguments(recorded) == p["arguments"]
            p["arguments_text"] = recorded if same else text
    elif first is not None:
        content = first[1].get("content", "")
        if not isinstance(content, str):
            raise _Unbuildable(f"{first[0]}.content", f"expected text, got {type(content).__name__}")
        p["content"] = content
    try:
        return _part_object(0, p)
    except _Unbuildable as e:
        raise _Unbuildable(f"{at}.part" + e.field.removeprefix("parts[0]"), e.error) from None


def _delta_op(at: str, e: dict[str, Any], kind: str | None) -> tuple[str, int, dict[str, Any]]:
    index = e["index"]
    if kind is None:
        raise _Unbuildable(f"{at}.index", f"a delta of part {index}, which no 'part' event started")
    text_field = "arguments" if kind == "tool_call" else "content"
    text = e.get(text_field)
    if text is not None and not isinstance(text, str):
        raise _Unbuildable(f"{at}.{text_field}", f"expected text, got {type(text).__name__}")
    if kind == "text":
        kw: dict[str, Any] = {"content": text or ""}
        names = {"provider_name": "provider_name", "provider_details": "provider_details", "citations": "citations"}
        op = "text"
    elif kind == "reasoning":
        kw = {"content": text}
        names = {"signature": "signature", "provider_name": "provider_name", "provider_details": "provider_details"}
        op = "reasoning"
    elif kind == "tool_call":
        kw = {"args": e.get("arguments_object", text)}
        names = {"name": "tool_name", "id": "tool_call_id", "provider_name": "provider_name"}
        names["provider_details"] = "provider_details"
        op = "tool_call"
    else:
        raise _Unbuildable(at, f"a delta of a {kind!r} part, which has no deltas")
    for neutral, pyd in names.items():
        if e.get(neutral) is not None:
            kw[pyd] = e[neutral]
    if kind == "text" and "citations" in kw:
        try:
            kw["citations"] = TypeAdapter(list[Citation]).validate_python(kw["citations"])
        except ValidationError as err:
            raise _Unbuildable(f"{at}.citations", _first_error(err)) from None
    return op, index, kw
