"""LangChain: ``BaseTool``s and chat-model turns that go through a tape.

``taped(tool)`` (or ``taped([tool, ...])``) returns copies of LangChain tools — the same class and fields —
whose calls go through the tape: ``invoke``/``run`` with ``tape.call``, ``ainvoke``/``arun`` with ``await
tape.acall``. Everything LangChain does around the tool stays LangChain's: argument validation, callbacks,
``handle_tool_error``, building the ``ToolMessage``; only the tool's own work (its ``_run``/``_arun``) is
recorded, replayed with no tool run, or reported as drift. Without ``tape=``, the tape current when the call
is made is used (``with tapetui.use_tape(...)``, the pytest ``tape`` fixture). Written against langchain-core
1.x.

``TapedChatModel(chat_model)`` is a ``BaseChatModel`` whose requests go through the tape as model turns
(:meth:`Tape.model_turn <tapetui.core.tape.Tape.model_turn>`): ``model = TapedChatModel(ChatOpenAI(...))``, then
``model.bind_tools(taped(tools))`` as before. Together they rerun a whole agent offline: no model call, no tool
run, no token; a changed prompt, tool menu, setting or model is a ``ModelDrift``.

LangChain's agent middleware (``wrap_tool_call`` in the ``langchain`` package's ``create_agent``) is not
offered here: wrap the tools and the model you hand the agent instead.

What goes on the tape for one call:

- **tool**: the tool's ``name``.
- **args**: what the model passed — the ``ToolCall``'s ``args`` (or the dict given to ``invoke``), without the
  arguments LangChain injects (``InjectedToolArg``, ``InjectedToolCallId``, ``ToolRuntime``, callbacks);
  not the validated ones the tool receives. A string input is recorded under the tool's first argument, as
  LangChain passes it.
- **order**: LangChain's ``ToolCall`` carries no place in the model's message and the agent loop is the
  caller's, so the place is what the caller gives as ``config={"metadata": {"tapetui_order": (turn,
  index)}}`` (:data:`ORDER_KEY`), e.g. ``(the loop's model turn, the call's index in
  AIMessage.tool_calls)``, and none otherwise. Without it the tape matches by content and step: right for a
  loop that runs one message's calls one after the other; calls of one message run at once (``asyncio.gather``
  of ``ainvoke``, threads) reach the tape in no fixed order and should carry it. The model's call ids are not
  places: a live model makes new ones each run.
- **call_id**: the ``ToolCall``'s ``id`` when the tool is invoked with one (``tool_call_id`` of ``run``).
- **contract**: the tool as the model sees it, from ``convert_to_openai_tool(tool)``: its ``description`` and
  its parameters (the ``tool_call_schema``: the args schema without injected arguments) as the schema,
  registered with :meth:`Tape.contract <tapetui.core.tape.Tape.contract>` at each call. A changed
  description or schema is a ``ToolDriftError`` in replay, explained field by field. The declared return
  type of the tool's function (``func``, ``coroutine``, or a subclass's ``_run``) is passed as ``returns``, so
  a tool returning a pydantic model, a dataclass or a ``(content, artifact)`` tuple returns that type in
  record and replay alike; other values come back in their JSON form (a ``(content, artifact)`` pair of a
  ``response_format="content_and_artifact"`` tool as a tuple).
- **errors**: what the tool's ``_run`` raised, recorded and raised again in replay (as its own class when the
  tape's rules allow, README "A recorded error is data"), so ``ToolException`` comes back as itself and
  ``handle_tool_error`` turns it into the same ``ToolMessage`` (``status="error"``) in both modes. Invalid
  arguments fail in LangChain's validation before the tool runs, and are never on the tape.

``TapedChatModel(chat_model, tape=None)`` wraps any chat model: LangChain's own ``invoke``/``ainvoke``/
``stream``/``astream``/``batch`` and callbacks run on the taped model; what it taped is one call of the wrapped
model's ``_generate``/``_agenerate``/``_stream``/``_astream`` (its rate limiter, when it has one, is waited for
only when the call runs live). ``bind_tools`` is the wrapped model's (it formats the tools and ``tool_choice`` its
way), bound on the taped model, which passes the bound ``tools=`` on to the wrapped model's ``_generate``; a model
without ``bind_tools`` gets them in OpenAI's format (``convert_to_openai_tool``). ``with_structured_output`` is
the wrapped model's too, each chat model in what it makes bound on the taped model. The taped model takes the
wrapped one's ``disable_streaming``, ``output_version``, ``profile``, ``callbacks``, ``tags`` and ``metadata``, and
``cache=False`` (an LLM cache would answer before the tape and leave no turn).

What goes on the tape for one model turn (a ``"type": "model"`` line, ``source`` ``"langchain"``; see
``docs/format.md``, "Model turns"):

- **model**: ``"{_llm_type}:{name}"`` of the wrapped model, the name its ``model_name`` (else ``model``)
  attribute, when it has one (``openai-chat:gpt-4o``); else its ``_llm_type`` alone.
- **request.instructions**: the leading ``SystemMessage``s, their text joined with a blank line; their parts (a
  list) when any holds more than text (a block with ``cache_control``).
- **request.messages**: every other message, in order, as the model sees it. ``HumanMessage``: ``user``;
  ``AIMessage`` (and ``AIMessageChunk``): ``assistant``, its content's parts then a ``tool_call`` part per
  ``tool_calls`` entry (``id``, ``name``, ``arguments``: its ``args``) and an ``invalid_tool_call`` part per
  invalid one (``arguments_text``, ``error``); ``ToolMessage``: ``tool``, one ``tool_call_response`` part
  (``id``: its ``tool_call_id``; ``name``: its ``name``, else the name of the call it answers; ``response``: its
  content, text as text; ``status`` when not ``"success"``); a ``SystemMessage`` after another message:
  ``system``; a ``ChatMessage``: its role (``human``, ``ai``, ``developer`` as ``user``, ``assistant``,
  ``system``). Content: text is a ``text`` part; a ``text``, ``reasoning`` or ``thinking`` block a ``text`` or
  ``reasoning`` part (``content`` its text) with the block's other fields as ``block`` when it has any; any other
  block a part of its own ``type`` holding it as ``block`` (``content_block`` when its type is a neutral part's;
  v1 ``tool_call`` blocks that repeat ``tool_calls`` are left out). A message's ``name`` and non-None
  ``additional_kwargs`` (without the provider's raw ``tool_calls``, which repeat ``tool_calls``) go on it.
- **request.tools**: the ``tools=`` the call got (from ``bind_tools``), each ``{name, description,
  parameters}``: OpenAI's function format, Anthropic's (``input_schema``) or a plain ``{name, parameters}``;
  anything else (a provider's own tool: a web search) by its ``name`` or ``type``, the definition as
  ``annotations``. They become contracts (tool lines, checked first on replay: a changed one is a
  ``ToolDriftError`` even for a tool the model never calls); a tool :func:`taped` wraps is the same contract
  (``convert_to_openai_tool`` both ways), so it has one tool line. The request holds their names.
- **request.output_schema**: the JSON schema of ``response_format=`` (its ``json_schema.schema``, or a pydantic
  class's schema); None without one.
- **request.settings**: the wrapped model's ``_identifying_params`` (its ``temperature``, ``max_tokens``...,
  without the model's name when it is the one in **model**), then the call's keyword arguments (``tool_choice``,
  ``parallel_tool_calls``, ``stream_options``...) but ``tools`` and ``response_format``; ``stop``; the rest of a
  ``response_format`` (``type``, ``name``, ``strict``) as ``response_format``; what a tool definition holds besides
  its name, description and parameters (``strict``, ``cache_control``) as ``tool_options`` by tool name. As JSON:
  None values dropped, pydantic values dumped, any other object (a client, a secret) as ``"<TypeName>"``.
- **never in the request**: message ``id``s (LangChain's ``lc_run-…``/``run-…``, the provider's, LangGraph's
  uuids), ``response_metadata`` (ids, timestamps, fingerprints, token counts), ``usage_metadata``, a
  ``ToolMessage``'s ``artifact``; a content block's ``id`` that LangChain made up (``lc_…``). Tool-call ids that
  LangChain or an offline model made up (starting with ``lc_`` or ``run-``) become ``call_1``, ``call_2``... by
  first appearance (:func:`~tapetui.core.turns.stable_ids`); a provider's call ids stay (on replay they come
  back from the tape, so the next request carries them again).
- **response.parts**: the message's content parts (as in a request, every block's fields kept, its LangChain
  ids too), then a ``tool_call`` part per ``tool_calls`` entry, then an ``invalid_tool_call`` part per invalid
  one. **response.content_form**: ``"list"`` when the content was a list (else it was text).
- **response.finish_reason**: ``response_metadata["finish_reason"]``; else the ``stop_reason`` (Anthropic's
  ``end_turn``/``stop_sequence``/``tool_use``/``max_tokens`` as ``stop``/``stop``/``tool_calls``/``length``) or
  ``done_reason``, read from there (``finish_reason_from`` names it). **response.model_name**: the metadata's
  ``model_name``, else its ``model`` (``model_name_from``). **response.id**: the message's ``id`` when the
  provider gave it (not ``lc_…``/``run-…``). **response.response_metadata**: the rest of the metadata, as it
  was; **response.additional_kwargs**, **name**, and the generation's **generation_info** and the result's
  **llm_output**, when there are any.
- **usage**: ``usage_metadata``'s ``input_tokens`` (cache included) as ``input``, ``output_tokens`` as
  ``output``, ``input_token_details.cache_read`` as ``cache_read`` and ``cache_creation`` as ``cache_write`` (when
  reported); none when the model reported none. **response.usage_details**: what else rebuilds it —
  ``total_tokens`` when not input + output, the other ``input_token_details`` (``input_details``),
  ``output_token_details`` (``output_details``).
- **response.counts**: the tape's redaction blanks the value of a key whose words hold ``token`` (a secret's
  name), and providers put token counts under such keys (OpenAI's ``token_usage``). A field of the response
  (not of its parts) holding only numbers under such a key is moved here, ``[path, number]`` per number, and
  put back on replay. Any other field the redaction blanks (a thinking block's ``signature``) replays blanked.
- **errors**: what the model call raised is the turn's error, raised again on replay (as its own class when the
  tape's rules allow). A stream the caller stops reading (a closed generator, a cancellation) leaves no turn.

Replay rebuilds the ``ChatResult`` — the ``AIMessage`` with its content, ``tool_calls``,
``invalid_tool_calls``, ``usage_metadata``, ``response_metadata`` (``finish_reason`` and ``model_name`` back in
it), ``additional_kwargs``, ``id``; the ``generation_info`` and ``llm_output`` — equal to the recorded one, and
LangChain's own run around it merges them as it does live. A turn that no longer rebuilds (a field edited or
missing, another adapter version) raises ``TapeError`` naming the tape, the step and the field
(``parts[1].content``). One generation per request is taped (a model asked for ``n > 1`` fails the turn).

Streams: LangChain streams through ``_stream``/``_astream`` when the caller streams (``stream``, ``astream``,
``astream_events``, a streaming callback handler); each is a turn with ``stream: true`` (a model that does not
stream answers it in one chunk). Its chunks pass through as they come, joined into the response, and each
becomes neutral events at the part its text goes to (LangChain's merging: a content block's ``index``, a
tool-call chunk's ``index``): ``start``; a ``part`` (the part without its text) before its first delta; a
``delta`` per chunk's text or reasoning text (``content``) and per tool-call chunk's argument text
(``arguments``); ``end``. **Exact**: replay yields a chunk per recorded delta, in order — the same text chunks,
and tool-call chunks with the same argument text (name and id in the first) — then one last chunk carrying the
``usage_metadata``, ``response_metadata``, ``additional_kwargs`` and ``id`` (``chunk_position="last"``), so the
joined message is the recorded one. **Rebuilt**: a content block's other fields (``index``, a ``signature``)
come in its first chunk; a block without an ``index`` comes in one chunk; another block and an invalid tool call
come whole, in one chunk each; the metadata and usage of the chunks that carried them come in the last one. A
turn recorded without streaming serves a stream: a chunk per part (its whole text or arguments), then the last
one. A recorded stream serves a plain request with its joined response.
"""

from __future__ import annotations

import contextlib
import copy
import enum
import functools
import inspect
import re
import typing
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, cast, overload

import orjson
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import LangSmithParams, LanguageModelInput
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    FunctionMessage,
    HumanMessage,
    InvalidToolCall,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from langchain_core.messages.ai import UsageMetadata
from langchain_core.messages.tool import invalid_tool_call as create_invalid_tool_call
from langchain_core.messages.tool import tool_call as create_tool_call
from langchain_core.messages.tool import tool_call_chunk as create_tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import (
    Runnable,
    RunnableBinding,
    RunnableConfig,
    RunnableParallel,
    RunnableSequence,
    RunnableWithFallbacks,
)
from langchain_core.runnables.passthrough import RunnableAssign
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_core.utils.json import parse_partial_json
from pydantic import BaseModel, Field

from tapetui.core.errors import InvalidValue
from tapetui.core.modelturn import ModelTurn
from tapetui.core.tape import Tape
from tapetui.core.turns import stable_ids, stream_events
from tapetui.integrations._common import resolve_tape

__all__ = ["ORDER_KEY", "SOURCE", "TapedChatModel", "taped"]

ORDER_KEY = "tapetui_order"
"""The ``RunnableConfig`` metadata key that gives a call its place: ``config={"metadata": {ORDER_KEY: (turn,
index)}}``."""

# Keyword arguments LangChain passes to a tool's _run besides the model's (when _run is called directly).
_NOT_ARGS = frozenset({"run_manager", "callbacks", "config"})
_UNKNOWN: Any = object()
# a tool function's declared return type, read once per function (typing.get_type_hints is not cheap)
_RETURNS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


@dataclass
class _Call:
    """One call of a taped tool, from its ``run``/``arun`` down to its ``_run``/``_arun``."""

    tool: BaseTool
    tool_input: Any
    call_id: str | None
    order: Any
    taken: bool = False  # on the tape already: a _run reached through the default _arun runs as it is


_CALL: ContextVar[_Call | None] = ContextVar("tapetui_langchain_call", default=None)


@overload
def taped(tool_or_tools: Sequence[BaseTool], tape: Tape | None = None) -> list[BaseTool]: ...
@overload
def taped(tool_or_tools: BaseTool, tape: Tape | None = None) -> BaseTool: ...
def taped(tool_or_tools: BaseTool | Sequence[BaseTool], tape: Tape | None = None) -> BaseTool | list[BaseTool]:
    """Copies of LangChain tools whose calls go through ``tape`` (the current tape at each call when None).

    One tool gives one tool, a list a list; the originals are left as they are. A tool taped before is taped
    again (the new tape replaces the old).

    Raises:
        TypeError: something that is not a LangChain ``BaseTool``.
    """
    if isinstance(tool_or_tools, BaseTool):
        return _taped(tool_or_tools, tape)
    return [_taped(t, tape) for t in tool_or_tools]


def _taped(tool: Any, tape: Tape | None) -> BaseTool:
    if not isinstance(tool, BaseTool):
        raise InvalidValue(f"taped() takes LangChain BaseTool objects, not {type(tool).__name__}")
    copied = tool.model_copy()
    cls = type(copied)
    # The class's own methods, bound to the copy (a tool taped before has its patches in the instance dict).
    run = cls.run.__get__(copied, cls)
    arun = cls.arun.__get__(copied, cls)
    own_run = cls._run.__get__(copied, cls)
    own_arun = cls._arun.__get__(copied, cls)
    contract = _Contract(copied)

    # functools.wraps keeps each method's signature (LangChain reads _run's to pass run_manager and config).
    @functools.wraps(run)
    def run_(tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _CALL.set(_Call(copied, tool_input, kwargs.get("tool_call_id"), _order(kwargs)))
        try:
            return run(tool_input, *args, **kwargs)
        finally:
            _CALL.reset(token)

    @functools.wraps(arun)
    async def arun_(tool_input: Any, *args: Any, **kwargs: Any) -> Any:
        token = _CALL.set(_Call(copied, tool_input, kwargs.get("tool_call_id"), _order(kwargs)))
        try:
            return await arun(tool_input, *args, **kwargs)
        finally:
            _CALL.reset(token)

    @functools.wraps(own_run)
    def _run_(*args: Any, **kwargs: Any) -> Any:
        call = _claim(copied)
        if call is None:
            return own_run(*args, **kwargs)
        the_tape = resolve_tape(tape)
        contract.register(the_tape)
        result = the_tape.call(
            copied.name,
            _model_args(copied, call, args, kwargs),
            live=lambda: own_run(*args, **kwargs),
            order=call.order,
            call_id=call.call_id,
        )
        return _shaped(copied, result)

    @functools.wraps(own_arun)
    async def _arun_(*args: Any, **kwargs: Any) -> Any:
        call = _claim(copied)
        if call is None:
            return await own_arun(*args, **kwargs)
        the_tape = resolve_tape(tape)
        contract.register(the_tape)
        result = await the_tape.acall(
            copied.name,
            _model_args(copied, call, args, kwargs),
            live=lambda: own_arun(*args, **kwargs),
            order=call.order,
            call_id=call.call_id,
        )
        return _shaped(copied, result)

    patches: dict[str, Any] = {"run": run_, "arun": arun_, "_run": _run_}
    if cls._arun is BaseTool._arun:
        # LangChain's default _arun runs _run in a thread (and checks the class, not the instance, to decide
        # what to pass it): leave it, the taped _run records the call there.
        copied.__dict__.pop("_arun", None)
    else:
        patches["_arun"] = _arun_
    for attr, fn in patches.items():
        object.__setattr__(copied, attr, fn)  # an instance attribute: not a pydantic field
    return copied


def _claim(tool: BaseTool) -> _Call | None:
    """This call's record, marked as on the tape; None when it is on the tape already (the default ``_arun``
    running ``_run``). A ``_run`` called without ``run`` gets a record of its own, with no call id or place."""
    call = _CALL.get()
    if call is None or call.tool is not tool:
        return _Call(tool, None, None, None, taken=True)
    if call.taken:
        return None
    call.taken = True
    return call


def _order(kwargs: dict[str, Any]) -> Any:
    """The place the caller gave in the call's metadata (``ORDER_KEY``), else None."""
    metadata = kwargs.get("metadata")
    if metadata is None:
        config = kwargs.get("config")
        metadata = config.get("metadata") if isinstance(config, dict) else None
    return metadata.get(ORDER_KEY) if isinstance(metadata, dict) else None


def _model_args(tool: BaseTool, call: _Call, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments the model passed (see the module's docstring)."""
    given = call.tool_input
    if given is None:  # _run called directly: its keyword arguments, without what LangChain injects
        given = {k: v for k, v in kwargs.items() if k not in _NOT_ARGS}
        if len(args) == 1 and not given:
            given = args[0]
        elif args:
            given = {**given, "args": list(args)}
    if isinstance(given, dict):
        drop = getattr(tool, "_filter_injected_args", None)
        return dict(drop(given)) if callable(drop) else dict(given)
    return {_first_arg(tool): given}


def _first_arg(tool: BaseTool) -> str:
    """The argument a string input goes to (LangChain's rule: the args schema's first field)."""
    try:
        return next(iter(tool.args), "input")
    except Exception:  # noqa: BLE001 - a tool whose schema cannot be read: a name of our own
        return "input"


def _shaped(tool: BaseTool, result: Any) -> Any:
    """A ``(content, artifact)`` pair back as the tuple LangChain expects (its JSON form is a list)."""
    if tool.response_format == "content_and_artifact" and isinstance(result, list) and len(result) == 2:
        return tuple(result)
    return result


class _Contract:
    """A tool's definition as the model sees it, registered on the tape at each call; computed again only when
    the tool's name, description or args schema changed."""

    def __init__(self, tool: BaseTool) -> None:
        self.tool = tool
        self.ident: Any = None
        self.fields: dict[str, Any] = {}

    def register(self, tape: Tape) -> None:
        tool = self.tool
        schema = tool.args_schema
        # a pydantic class is fixed once made; a dict may be edited in place, so it is read again every time
        ident = (tool.name, tool.description, schema) if isinstance(schema, type) else None
        if ident is None or ident != self.ident:
            function = convert_to_openai_tool(tool).get("function", {})
            self.fields = {
                "schema": function.get("parameters"),
                "description": function.get("description", tool.description),
                "returns": _declared_return(tool),
            }
            self.ident = ident
        tape.contract(tool.name, **self.fields)


def _declared_return(tool: BaseTool) -> Any:
    """The return annotation of the tool's function, or None (undeclared, or not readable)."""
    fn: Callable[..., Any] | None = getattr(tool, "func", None) or getattr(tool, "coroutine", None)
    if fn is None:
        fn = type(tool)._run
    try:
        known = _RETURNS.get(fn, _UNKNOWN)
    except TypeError:  # not weakly referenceable
        known = _UNKNOWN
    if known is not _UNKNOWN:
        return known
    try:
        declared = typing.get_type_hints(fn).get("return")
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: no codec
        declared = None
    with contextlib.suppress(TypeError):  # not weakly referenceable: read again next time
        _RETURNS[fn] = declared
    return declared


# ---- model turns --------------------------------------------------------------------------------------------------

SOURCE = "langchain"
"""The ``source`` of the model turns this adapter writes."""

_LOCAL_PREFIXES = ("lc_", "run-")  # LangChain's own ids: "lc_…" (made up), "lc_run-…" (a run's), "run-…" (before 1.0)
_TEXT_KEYS = {"text": "text", "reasoning": "reasoning", "thinking": "thinking"}  # a text-like block's type → its text
_NEUTRAL_TYPES = frozenset({"text", "reasoning", "tool_call", "tool_call_response", "invalid_tool_call"})
_NOT_SETTINGS = frozenset({"tools", "response_format", "stop"})
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls", "max_tokens": "length"}
_KEY_WORDS = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z0-9])(?=[A-Z])")  # a key's words, split as the redaction splits them
_MIRRORED = ("disable_streaming", "output_version", "profile", "callbacks", "tags", "metadata")


def _is_local(ident: str) -> bool:
    """An id LangChain made up (new at each run), not one a provider issued."""
    return ident.startswith(_LOCAL_PREFIXES)


class TapedChatModel(BaseChatModel):  # type: ignore[misc]
    """A chat model whose requests go through a tape as model turns (see the module's docstring).

    ``TapedChatModel(ChatOpenAI(model="gpt-4o"))`` (``tape=`` a tape, else the tape current at each request) is a
    ``BaseChatModel`` that calls the wrapped model's own ``_generate``/``_agenerate``/``_stream``/``_astream``
    when the tape runs it live, and rebuilds its ``ChatResult`` or chunks from the tape when it does not.
    ``bind_tools`` is the wrapped model's (its own tool format), bound on the taped model.
    """

    chat_model: BaseChatModel
    """The model the requests go to when they run live."""
    tape: Tape | None = Field(default=None, exclude=True)
    """The tape; None: the tape current at each request."""

    def __init__(self, chat_model: BaseChatModel, tape: Tape | None = None, **kwargs: Any) -> None:
        if not isinstance(chat_model, BaseChatModel):
            raise InvalidValue(f"TapedChatModel() takes a LangChain BaseChatModel, not {type(chat_model).__name__}")
        kwargs.setdefault("cache", False)  # the tape answers: an LLM cache would answer before it, and leave no turn
        for name in _MIRRORED:  # how the wrapped model streams, its output format, profile and callbacks
            if name not in kwargs and name in type(chat_model).model_fields:
                value = getattr(chat_model, name, None)
                kwargs[name] = copy.copy(value) if isinstance(value, (dict, list)) else value
        super().__init__(chat_model=chat_model, tape=tape, **kwargs)

    @property
    def _llm_type(self) -> str:
        return "taped-" + str(self.chat_model._llm_type)

    @property
    def _identifying_params(self) -> Mapping[str, Any]:
        return dict(self.chat_model._identifying_params)

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        return self.chat_model._get_ls_params(stop=stop, **kwargs)

    @property
    def tape_model_name(self) -> str:
        """The model's name on the tape: ``"{_llm_type}:{model_name or model}"``, or ``_llm_type`` alone."""
        return _model_name(self.chat_model)

    # ---- tools ---------------------------------------------------------------------------------------------------
    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """The wrapped model's ``bind_tools`` (its format for the tools, its ``tool_choice``), with the taped model
        as what the binding calls. A model without ``bind_tools`` gets the tools in OpenAI's format
        (``convert_to_openai_tool``) as ``tools=``, and ``tool_choice=`` when given.

        Raises:
            InvalidValue: the wrapped model's ``bind_tools`` returned something other than a binding of a chat model.
        """
        choice = {"tool_choice": tool_choice} if tool_choice is not None else {}
        try:
            bound = self.chat_model.bind_tools(tools, **choice, **kwargs)
        except NotImplementedError:
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **choice, **kwargs)
        return self._rebound(bound)

    def _rebound(self, bound: Any) -> Runnable[LanguageModelInput, AIMessage]:
        """What the wrapped model bound, bound on a taped model instead."""
        bound_kwargs: dict[str, Any] = {}
        config: dict[str, Any] = {}
        while isinstance(bound, RunnableBinding):  # outermost first: its kwargs and config win
            bound_kwargs = {**bound.kwargs, **bound_kwargs}
            config = {**bound.config, **config}
            bound = bound.bound
        if not isinstance(bound, BaseChatModel):
            raise InvalidValue(
                f"{type(self.chat_model).__name__}.bind_tools returned a {type(bound).__name__}, not a binding of a "
                "chat model: TapedChatModel cannot call through it"
            )
        target = self if bound is self.chat_model else self.model_copy(update={"chat_model": bound})
        out: Runnable[LanguageModelInput, AIMessage] = target.bind(**bound_kwargs)
        return out.with_config(cast("RunnableConfig", config)) if config else out

    def with_structured_output(
        self, schema: dict[str, Any] | type, *, include_raw: bool = False, **kwargs: Any
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """The wrapped model's ``with_structured_output`` (its own method: a JSON schema as ``response_format``,
        tool calling...), with every binding of a chat model in it bound on the taped model; for a model without
        one, LangChain's (tool calling, through :meth:`bind_tools`).

        Raises:
            InvalidValue: what the wrapped model made calls no chat model this adapter can find in it.
        """
        try:
            made = self.chat_model.with_structured_output(schema, include_raw=include_raw, **kwargs)
        except NotImplementedError:
            made = None
        if made is None:
            out: Runnable[LanguageModelInput, dict[str, Any] | BaseModel] = super().with_structured_output(
                schema, include_raw=include_raw, **kwargs
            )
            return out
        found: list[Any] = []
        retargeted = self._retargeted(made, found)
        if not found:
            raise InvalidValue(
                f"{type(self.chat_model).__name__}.with_structured_output made a {type(made).__name__} in which "
                "TapedChatModel finds no chat model to call through"
            )
        return cast("Runnable[LanguageModelInput, dict[str, Any] | BaseModel]", retargeted)

    def _retargeted(self, runnable: Any, found: list[Any]) -> Any:
        """``runnable`` with each chat model in it (bound or not) replaced by a taped one; ``found`` gets each."""
        inner = runnable
        while isinstance(inner, RunnableBinding):
            inner = inner.bound
        if isinstance(inner, BaseChatModel):
            found.append(inner)
            return self._rebound(runnable)
        if isinstance(runnable, RunnableBinding):
            return runnable.model_copy(update={"bound": self._retargeted(runnable.bound, found)})
        if isinstance(runnable, RunnableSequence):
            return RunnableSequence(*(self._retargeted(s, found) for s in runnable.steps), name=runnable.name)
        if isinstance(runnable, RunnableParallel):
            return RunnableParallel({k: self._retargeted(v, found) for k, v in runnable.steps__.items()})
        if isinstance(runnable, RunnableAssign):
            return RunnableAssign(self._retargeted(runnable.mapper, found))
        if isinstance(runnable, RunnableWithFallbacks):
            return runnable.model_copy(
                update={
                    "runnable": self._retargeted(runnable.runnable, found),
                    "fallbacks": [self._retargeted(f, found) for f in runnable.fallbacks],
                }
            )
        return runnable

    # ---- the model's methods ---------------------------------------------------------------------------------------
    def _turn(
        self, messages: list[BaseMessage], stop: list[str] | None, kwargs: dict[str, Any], stream: bool
    ) -> ModelTurn:
        name = self.tape_model_name
        request = _request(self.chat_model, messages, stop, kwargs, name)
        return resolve_tape(self.tape).model_turn(request, model=name, source=SOURCE, stream=stream)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = self._turn(messages, stop, kwargs, stream=False)
        if turn.served:
            return _rebuilt_result(turn)
        inner = self.chat_model
        try:
            if inner.rate_limiter is not None:
                inner.rate_limiter.acquire(blocking=True)
            result = inner._generate(messages, stop, **_with_run_manager(inner._generate, run_manager), **kwargs)
        except BaseException as e:
            turn.fail(e)
            raise
        _finish(turn, result)
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        turn = self._turn(messages, stop, kwargs, stream=False)
        if turn.served:
            return _rebuilt_result(turn)
        inner = self.chat_model
        try:
            if inner.rate_limiter is not None:
                await inner.rate_limiter.aacquire(blocking=True)
            result = await inner._agenerate(
                messages, stop, **_with_run_manager(inner._agenerate, run_manager), **kwargs
            )
        except BaseException as e:
            turn.fail(e)
            raise
        _finish(turn, result)
        return result

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        turn = self._turn(messages, stop, kwargs, stream=True)
        if turn.served:
            yield from _replayed_chunks(turn)
            return
        inner = self.chat_model
        seen = _StreamSeen()
        try:
            if inner.rate_limiter is not None:
                inner.rate_limiter.acquire(blocking=True)
            if type(inner)._stream is BaseChatModel._stream:  # a model that does not stream: one chunk
                result = inner._generate(messages, stop, **_with_run_manager(inner._generate, run_manager), **kwargs)
                chunks: Iterable[ChatGenerationChunk] = [_chunk_of(result)]
            else:
                chunks = inner._stream(messages, stop, **_with_run_manager(inner._stream, run_manager), **kwargs)
            for chunk in chunks:
                seen.add(chunk)
                yield chunk
        except BaseException as e:
            turn.fail(e)  # an Exception is recorded; a closed generator or a cancellation leaves no turn
            raise
        seen.finish(turn)

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        turn = self._turn(messages, stop, kwargs, stream=True)
        if turn.served:
            for chunk in _replayed_chunks(turn):
                yield chunk
            return
        inner = self.chat_model
        cls = type(inner)
        seen = _StreamSeen()
        try:
            if inner.rate_limiter is not None:
                await inner.rate_limiter.aacquire(blocking=True)
            if cls._astream is BaseChatModel._astream and cls._stream is BaseChatModel._stream:
                options = _with_run_manager(inner._agenerate, run_manager)
                result = await inner._agenerate(messages, stop, **options, **kwargs)
                chunk = _chunk_of(result)
                seen.add(chunk)
                yield chunk
            else:  # BaseChatModel's own _astream runs a sync-only model's _stream in a thread
                options = _with_run_manager(inner._astream, run_manager)
                async for chunk in inner._astream(messages, stop, **options, **kwargs):
                    seen.add(chunk)
                    yield chunk
        except BaseException as e:
            turn.fail(e)
            raise
        seen.finish(turn)


def _model_name(model: BaseChatModel) -> str:
    """``"{_llm_type}:{model_name or model}"``, or ``_llm_type`` for a model with neither."""
    provider = str(model._llm_type)
    own, cls = {**(getattr(model, "__pydantic_extra__", None) or {}), **vars(model)}, type(model)
    for attr in ("model_name", "model"):
        # a field is in the instance's dict (an extra in pydantic's), anything else only as a class attribute (a
        # property): asking a pydantic model for a name it lacks costs an exception each turn
        name = own[attr] if attr in own else getattr(model, attr, None) if hasattr(cls, attr) else None
        if isinstance(name, str) and name:
            return f"{provider}:{name}"
    return provider


def _with_run_manager(fn: Callable[..., Any], run_manager: Any) -> dict[str, Any]:
    """``{"run_manager": run_manager}`` for a method that takes one (LangChain's own check), else nothing."""
    try:
        takes = "run_manager" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes = True
    return {"run_manager": run_manager} if takes else {}


# ---- JSON forms ---------------------------------------------------------------------------------------------------
def _json(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON: pydantic models dumped, tuples and sets as lists, enums as their values; anything else
    (a client, a secret) as ``"<TypeName>"`` — never its repr, which may hold an address or a key."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if depth > 200:
        return "<too deep>"
    if isinstance(value, Mapping):
        return {str(k): _json(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_json(v, depth + 1) for v in items]
    if isinstance(value, enum.Enum):
        return _json(value.value, depth + 1)
    if isinstance(value, type):
        if issubclass(value, BaseModel):
            return _json(value.model_json_schema(), depth + 1)
        return f"{value.__module__}.{value.__qualname__}"
    if isinstance(value, BaseModel) and not isinstance(value, BaseChatModel):
        try:
            return _json(value.model_dump(mode="json"), depth + 1)
        except Exception:  # noqa: BLE001 - a model that does not dump: its type's name
            pass
    return f"<{type(value).__name__}>"


def _drop_none(d: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# ---- the request --------------------------------------------------------------------------------------------------
def _request(
    model: BaseChatModel, messages: Sequence[BaseMessage], stop: Any, kwargs: dict[str, Any], name: str | None = None
) -> dict[str, Any]:
    """The neutral request of one call of ``model._generate(messages, stop, **kwargs)`` (``name``: the model's name
    on the tape, when the caller has it)."""
    instructions, neutral = _conversation(messages)
    tools, tool_options = _tools(kwargs.get("tools"))
    output_schema, response_format = _output_schema(kwargs.get("response_format"))
    name = name or _model_name(model)
    settings: dict[str, Any] = {}
    try:
        params = dict(model._identifying_params)
    except Exception:  # noqa: BLE001 - a model whose parameters cannot be read: the call's own settings only
        params = {}
    for k, v in params.items():
        if k in ("model", "model_name") and isinstance(v, str) and name.endswith(":" + v):
            continue  # in the model's name already
        settings[k] = v
    settings.update((k, v) for k, v in kwargs.items() if k not in _NOT_SETTINGS)
    if stop is not None:
        settings["stop"] = stop
    if tool_options:
        settings["tool_options"] = tool_options
    if response_format is not None:
        settings["response_format"] = response_format
    return {
        "instructions": instructions,
        "messages": stable_ids(neutral, _is_local),
        "tools": tools,
        "output_schema": output_schema,
        "settings": _json(_drop_none(settings)),
    }


def _conversation(messages: Sequence[BaseMessage]) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """The leading system messages as the instructions (their text joined with a blank line; their parts when
    any is more than text), and every other message as a neutral one."""
    lead = 0
    while lead < len(messages) and isinstance(messages[lead], SystemMessage):
        lead += 1
    instructions: str | list[dict[str, Any]] | None = None
    if lead:
        parts = [p for m in messages[:lead] for p in _content_parts(m.content, request=True)]
        if all(p.get("type") == "text" and set(p) == {"type", "content"} for p in parts):
            instructions = "\n\n".join(p["content"] for p in parts)
        else:
            instructions = parts
    names: dict[Any, str] = {}  # a tool call's id → the tool's name (a ToolMessage without a name)
    return instructions, [_message(m, names) for m in messages[lead:]]


def _role(message: BaseMessage) -> str:
    if isinstance(message, HumanMessage):
        return "user"
    if isinstance(message, AIMessage):
        return "assistant"
    if isinstance(message, (ToolMessage, FunctionMessage)):
        return "tool"
    if isinstance(message, SystemMessage):
        return "system"
    role = str(getattr(message, "role", None) or message.type)
    return {"human": "user", "ai": "assistant", "developer": "system"}.get(role, role)


def _message(message: BaseMessage, names: dict[Any, str]) -> dict[str, Any]:
    """One message as the model sees it (see the module's docstring): no id, no response metadata, no usage."""
    role = _role(message)
    parts: list[dict[str, Any]]
    extra = {k: v for k, v in (message.additional_kwargs or {}).items() if v is not None}
    if isinstance(message, ToolMessage):
        name = message.name or names.get(message.tool_call_id)
        part = {
            "type": "tool_call_response",
            "id": message.tool_call_id,
            "name": name,
            "response": _json(message.content),
        }
        if message.status != "success":
            part["status"] = message.status
        parts = [part]
    elif isinstance(message, FunctionMessage):
        parts = [{"type": "tool_call_response", "id": None, "name": message.name, "response": _json(message.content)}]
    elif isinstance(message, AIMessage):
        calls = message.tool_calls
        ids = {c.get("id") for c in calls}
        parts = [
            p
            for p in _content_parts(message.content, request=True)
            if not (
                p.get("type") == "content_block"
                and p["block"].get("type") == "tool_call"
                and p["block"].get("id") in ids
            )
        ]
        for c in calls:
            names[c.get("id")] = c["name"]
            parts.append({"type": "tool_call", "id": c.get("id"), "name": c["name"], "arguments": _json(c["args"])})
        for c in message.invalid_tool_calls:
            parts.append(_invalid_part(c))
        if calls:
            extra.pop("tool_calls", None)  # the provider's raw form of the same calls
    else:
        parts = _content_parts(message.content, request=True)
    out: dict[str, Any] = {"role": role, "parts": parts}
    if message.name and not isinstance(message, (ToolMessage, FunctionMessage)):
        out["name"] = message.name
    if extra:
        out["additional_kwargs"] = _json(extra)
    return out


def _invalid_part(call: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "type": "invalid_tool_call",
        "id": call.get("id"),
        "name": call.get("name"),
        "arguments_text": call.get("args"),
        "error": call.get("error"),
    }


def _content_parts(content: Any, *, request: bool) -> list[dict[str, Any]]:
    """A message's content as parts. Text, a text block, a reasoning or a thinking block: a ``text`` or
    ``reasoning`` part, ``content`` its text, and its block without the text as ``block`` (in a request, only
    when it says more than its type). Any other block: ``{"type": its type, "block": it}`` (``content_block``
    when its type is a neutral part's). A request leaves out the ids LangChain made up."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}] if content else []
    parts: list[dict[str, Any]] = []
    for item in content if isinstance(content, list) else [content]:
        if isinstance(item, str):
            parts.append({"type": "text", "content": item})
            continue
        if not isinstance(item, Mapping):
            parts.append({"type": "content_block", "block": _json(item)})
            continue
        block = {
            k: _json(v) for k, v in item.items() if not (request and k == "id" and isinstance(v, str) and _is_local(v))
        }
        kind = block.get("type")
        key = _TEXT_KEYS.get(kind) if isinstance(kind, str) else None
        if key is not None and isinstance(block.get(key), str):
            text = block.pop(key)
            part: dict[str, Any] = {"type": "text" if kind == "text" else "reasoning", "content": text}
            if not request or set(block) - {"type"} or kind == "thinking":
                part["block"] = block
            parts.append(part)
        elif isinstance(kind, str) and kind not in _NEUTRAL_TYPES and kind != "content_block":
            parts.append({"type": kind, "block": block})
        else:
            parts.append({"type": "content_block", "block": block})
    return parts


# the last bound tools converted, by the list's identity (a binding passes the same list at every call); the list
# is kept with its result, so its id cannot be reused while the entry stands
_TOOLS_SEEN: dict[int, tuple[Any, bytes, tuple[list[dict[str, Any]], dict[str, Any]]]] = {}


def _tools(given: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The offered tools, from the call's ``tools`` (as the model's ``bind_tools`` formatted them): each
    ``{name, description, parameters}``; what else a definition holds (``strict``, ``cache_control``...) by name.
    A binding's tools are converted once while they stay as they were (checked by their JSON)."""
    if not given:
        return [], {}
    try:
        raw = orjson.dumps(given, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # tool objects, not dicts: converted every time
        return _tools_of(given)
    hit = _TOOLS_SEEN.get(id(given))
    if hit is not None and hit[0] is given and hit[1] == raw:
        return hit[2]  # read only: the request is built from it, nothing downstream changes it
    out = _tools_of(given)
    if len(_TOOLS_SEEN) > 64:
        _TOOLS_SEEN.clear()
    _TOOLS_SEEN[id(given)] = (given, raw, out)
    return out


def _tools_of(given: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """:func:`_tools`, converted."""
    defs: list[dict[str, Any]] = []
    options: dict[str, Any] = {}
    listed: list[Any] = []
    for t in given if isinstance(given, (list, tuple)) else [given]:
        group = t.get("function_declarations") if isinstance(t, Mapping) else None
        listed.extend(group if isinstance(group, list) else [t])  # Gemini's: a group of declarations
    for n, t in enumerate(listed):
        if not isinstance(t, Mapping):
            t = convert_to_openai_tool(t)
        t = dict(t)
        if not (t.get("type") == "function" or "input_schema" in t or "parameters" in t) and "toolSpec" in t:
            with contextlib.suppress(Exception):  # Bedrock's: LangChain reads it
                t = dict(convert_to_openai_tool(t))
        if t.get("type") == "function" and isinstance(t.get("function"), Mapping):
            fn = dict(t.pop("function"))
            t.pop("type")
            rest = {**t, **{k: v for k, v in fn.items() if k not in ("name", "description", "parameters")}}
            name, description, parameters = fn.get("name"), fn.get("description"), fn.get("parameters")
        elif isinstance(t.get("name"), str) and ("input_schema" in t or "parameters" in t):
            parameters = t.pop("input_schema", None) or t.pop("parameters", None)
            name, description = t.pop("name"), t.pop("description", None)
            rest = t
        else:  # a provider's own tool (a web search, a code interpreter): by its name or type, its definition kept
            name = t.get("name") or t.get("type") or f"tool_{n + 1}"
            defs.append({"name": str(name), "description": None, "parameters": None, "annotations": _json(t)})
            continue
        defs.append({"name": name, "description": description, "parameters": _json(parameters)})
        if rest:
            options[str(name)] = _json(rest)
    return defs, options


def _output_schema(given: Any) -> tuple[Any, Any]:
    """A ``response_format``'s JSON schema (the output schema) and the rest of it (a setting)."""
    if given is None:
        return None, None
    if isinstance(given, type) and issubclass(given, BaseModel):
        return _json(given.model_json_schema()), None
    if isinstance(given, Mapping):
        spec = given.get("json_schema")
        if isinstance(spec, Mapping) and "schema" in spec:
            rest = {**given, "json_schema": {k: v for k, v in spec.items() if k != "schema"}}
            return _json(spec["schema"]), _json(rest)
    return None, _json(given)


# ---- the response -------------------------------------------------------------------------------------------------
def _finish(turn: ModelTurn, result: ChatResult) -> None:
    """A live result written as the turn's response (what cannot be converted: nothing is written)."""
    try:
        if len(result.generations) != 1:
            raise InvalidValue(
                f"TapedChatModel tapes one generation per request; {type(result).__name__} has "
                f"{len(result.generations)} (n > 1 is not supported)"
            )
        generation = result.generations[0]
        response = _response(generation.message, generation.generation_info, result.llm_output)
    except BaseException:
        turn.abandon()
        raise
    turn.finish(response)


def _response(message: BaseMessage, generation_info: Any, llm_output: Any) -> dict[str, Any]:
    """The neutral response of the model's message (see the module's docstring)."""
    if not isinstance(message, AIMessage):
        raise InvalidValue(f"the model answered with a {type(message).__name__}, not an AIMessage")
    metadata = _json(dict(message.response_metadata or {}))
    parts = _content_parts(message.content, request=False)
    parts += [
        {"type": "tool_call", "id": c.get("id"), "name": c["name"], "arguments": _json(c["args"])}
        for c in message.tool_calls
    ]
    parts += [_invalid_part(c) for c in message.invalid_tool_calls]
    out: dict[str, Any] = {"parts": parts}
    finish = metadata.get("finish_reason")
    if isinstance(finish, str):
        del metadata["finish_reason"]
    else:
        finish = None
        for key in ("stop_reason", "done_reason"):
            if isinstance(metadata.get(key), str):
                finish = _STOP_REASONS.get(metadata[key], metadata[key])
                out["finish_reason_from"] = key
                break
    out["finish_reason"] = finish
    model_name = metadata.get("model_name")
    if isinstance(model_name, str):
        del metadata["model_name"]
    else:
        model_name = metadata.get("model") if isinstance(metadata.get("model"), str) else None
        if model_name is not None:
            out["model_name_from"] = "model"
    out["model_name"] = model_name
    ident = message.id
    out["id"] = ident if isinstance(ident, str) and not _is_local(ident) else None
    out["usage"], details = _usage(message.usage_metadata)
    if details:
        out["usage_details"] = details
    if isinstance(message.content, list):
        out["content_form"] = "list"
    if metadata:
        out["response_metadata"] = metadata
    if message.additional_kwargs:
        out["additional_kwargs"] = _json(message.additional_kwargs)
    if message.name is not None:
        out["name"] = message.name
    if generation_info:
        out["generation_info"] = _json(generation_info)
    if llm_output:
        out["llm_output"] = _json(llm_output)
    return _lifted(out)


def _usage(given: Any) -> tuple[dict[str, int] | None, dict[str, Any]]:
    """``usage_metadata`` as the neutral usage (``input_tokens`` with cache, ``output_tokens``, the cache reads
    and writes of ``input_token_details``), and what else rebuilds it exactly."""
    if not given:
        return None, {}
    rest = dict(given)
    usage: dict[str, int] = {}
    for key, name in (("input_tokens", "input"), ("output_tokens", "output")):
        value = rest.pop(key, None)
        if value is not None:
            usage[name] = value
    details: dict[str, Any] = {}
    total = rest.pop("total_tokens", None)
    if total != usage.get("input", 0) + usage.get("output", 0):
        details["total_tokens"] = total
    if "input_token_details" in rest:
        inputs = dict(rest.pop("input_token_details") or {})
        cached = False
        for key, name in (("cache_read", "cache_read"), ("cache_creation", "cache_write")):
            if inputs.get(key) is not None:
                usage[name] = inputs.pop(key)
                cached = True
        if inputs or not cached:
            details["input_details"] = inputs
    if "output_token_details" in rest:
        details["output_details"] = rest.pop("output_token_details")
    details.update(rest)
    return usage or None, _json(details)


def _names_a_token(key: Any) -> bool:
    """A key the tape's redaction takes for a secret's (its words hold ``token``: ``token_usage``,
    ``input_token_details``), though LangChain's providers put token counts under it."""
    return isinstance(key, str) and "token" in (w.lower() for w in _KEY_WORDS.split(key) if w)


def _counts_only(value: Any) -> bool:
    if isinstance(value, dict):
        return all(_counts_only(v) for v in value.values())
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool))


def _lifted(response: dict[str, Any]) -> dict[str, Any]:
    """``response`` with each field holding only token counts under a key the redaction would blank (see
    ``_names_a_token``) moved to ``counts``: ``[path, value]`` per number (or empty object), so the numbers
    reach the tape; :func:`_restored` puts them back. Parts and usage are left as they are."""
    counts: list[list[Any]] = []

    def walk(value: Any, path: list[str]) -> Any:
        if not isinstance(value, dict):
            return value
        kept = {}
        for k, v in value.items():
            if _names_a_token(k) and _counts_only(v):
                leaves(v, [*path, k])
            else:
                kept[k] = walk(v, [*path, k])
        return kept

    def leaves(value: Any, path: list[str]) -> None:
        if isinstance(value, dict) and value:
            for k, v in value.items():
                leaves(v, [*path, str(k)])
        else:
            counts.append([path, value])

    out = {k: v if k in ("parts", "usage") else walk(v, [k]) for k, v in response.items()}
    if counts:
        out["counts"] = counts
    return out


def _copied(response: dict[str, Any]) -> dict[str, Any]:
    """A copy of a served response the message may own: through orjson, a tenth of ``deepcopy``'s time on a tape's
    JSON (a value orjson cannot write, an integer past 64 bits, is copied by ``deepcopy``)."""
    try:
        return cast(dict[str, Any], orjson.loads(orjson.dumps(response)))
    except TypeError:
        return copy.deepcopy(response)


def _restored(turn: ModelTurn) -> dict[str, Any]:
    """The served response with its ``counts`` back in their places.

    Raises:
        TapeError: a ``counts`` entry that is not ``[path, value]``.
    """
    response = _copied(turn.response or {})
    counts = response.pop("counts", None)
    if counts is None:
        return response
    if not isinstance(counts, list):
        raise turn.cannot_rebuild("counts", "a list of [path, value] expected")
    for n, entry in enumerate(counts):
        path = entry[0] if isinstance(entry, list) and len(entry) == 2 else None
        if not isinstance(path, list) or not path or not all(isinstance(k, str) for k in path):
            raise turn.cannot_rebuild(f"counts[{n}]", "[path, value] expected, the path a list of keys")
        at = response
        for k in path[:-1]:
            nxt = at.setdefault(k, {})
            if not isinstance(nxt, dict):
                raise turn.cannot_rebuild(f"counts[{n}]", f"{k!r} is not an object")
            at = nxt
        at[path[-1]] = entry[1]
    return response


# ---- rebuilding -----------------------------------------------------------------------------------------------------
def _rebuilt_result(turn: ModelTurn) -> ChatResult:
    """The served response as the wrapped model's ``ChatResult``.

    Raises:
        TapeError: naming the tape, the step and the field, for a response that no longer rebuilds.
    """
    response = _restored(turn)
    content, calls, invalid = _rebuilt_parts(turn, response)
    fields = _message_fields(turn, response)
    try:
        message = AIMessage(content=content, tool_calls=calls, invalid_tool_calls=invalid, **fields)
        generation = ChatGeneration(message=message, generation_info=_object(turn, response, "generation_info"))
        return ChatResult(generations=[generation], llm_output=_object(turn, response, "llm_output"))
    except Exception as e:  # noqa: BLE001 - LangChain's validation, whatever it raises
        raise turn.cannot_rebuild("response", e) from e


def _object(turn: ModelTurn, response: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    value = response.get(key)
    if value is not None and not isinstance(value, dict):
        raise turn.cannot_rebuild(key, f"an object expected, got {type(value).__name__}")
    return value


def _rebuilt_parts(
    turn: ModelTurn, response: Mapping[str, Any]
) -> tuple[str | list[str | dict[str, Any]], list[ToolCall], list[InvalidToolCall]]:
    """The message's content, tool calls and invalid tool calls, from the response's parts."""
    parts = response.get("parts")
    if not isinstance(parts, list):
        raise turn.cannot_rebuild("parts", "a list of parts expected")
    as_list = response.get("content_form") == "list"
    items: list[str | dict[str, Any]] = []
    texts: list[str] = []
    calls: list[ToolCall] = []
    invalid: list[InvalidToolCall] = []
    for i, p in enumerate(parts):
        kind = p.get("type") if isinstance(p, dict) else None
        if kind in ("text", "reasoning"):
            text = p.get("content")
            if not isinstance(text, str):
                raise turn.cannot_rebuild(f"parts[{i}].content", f"text expected, got {type(text).__name__}")
            block = p.get("block")
            if block is None and kind == "text":
                (items if as_list else texts).append(text)
                continue
            items.append(_block_with_text(turn, i, block, text))
        elif kind == "tool_call":
            name, args = p.get("name"), p.get("arguments")
            if not isinstance(name, str):
                raise turn.cannot_rebuild(f"parts[{i}].name", "a tool's name expected")
            if not isinstance(args, dict):
                raise turn.cannot_rebuild(f"parts[{i}].arguments", f"an object expected, got {type(args).__name__}")
            calls.append(create_tool_call(name=name, args=args, id=_text_or_none(turn, p, i, "id")))
        elif kind == "invalid_tool_call":
            invalid.append(
                create_invalid_tool_call(
                    name=_text_or_none(turn, p, i, "name"),
                    args=_text_or_none(turn, p, i, "arguments_text"),
                    id=_text_or_none(turn, p, i, "id"),
                    error=_text_or_none(turn, p, i, "error"),
                )
            )
        elif isinstance(kind, str) and isinstance(p.get("block"), dict):
            items.append(p["block"])
        else:
            raise turn.cannot_rebuild(f"parts[{i}]", f"a part this adapter does not write: {_short(p)}")
    if not as_list:
        if items:
            raise turn.cannot_rebuild("content_form", "blocks in a text content (content_form 'list' missing)")
        return "".join(texts), calls, invalid
    return items, calls, invalid


def _block_with_text(turn: ModelTurn, i: int, block: Any, text: str) -> dict[str, Any]:
    if not isinstance(block, dict):
        raise turn.cannot_rebuild(f"parts[{i}].block", "an object expected")
    key = _TEXT_KEYS.get(str(block.get("type")))
    if key is None:
        raise turn.cannot_rebuild(f"parts[{i}].block.type", f"not a text block: {block.get('type')!r}")
    return {**block, key: text}


def _text_or_none(turn: ModelTurn, part: Mapping[str, Any], i: int, key: str) -> str | None:
    value = part.get(key)
    if value is not None and not isinstance(value, str):
        raise turn.cannot_rebuild(f"parts[{i}].{key}", f"text expected, got {type(value).__name__}")
    return value


def _message_fields(turn: ModelTurn, response: Mapping[str, Any]) -> dict[str, Any]:
    """The message's other fields: ``response_metadata`` (with ``finish_reason`` and ``model_name`` back),
    ``usage_metadata``, ``additional_kwargs``, ``id``, ``name``."""
    metadata = dict(_object(turn, response, "response_metadata") or {})
    for key in ("finish_reason", "model_name"):
        value = response.get(key)
        if value is not None and not response.get(f"{key}_from"):
            if not isinstance(value, str):
                raise turn.cannot_rebuild(key, f"text expected, got {type(value).__name__}")
            metadata[key] = value
    fields: dict[str, Any] = {
        "response_metadata": metadata,
        "additional_kwargs": dict(_object(turn, response, "additional_kwargs") or {}),
        "usage_metadata": _rebuilt_usage(turn, response),
    }
    ident, name = response.get("id"), response.get("name")
    for key, value in (("id", ident), ("name", name)):
        if value is not None:
            if not isinstance(value, str):
                raise turn.cannot_rebuild(key, f"text expected, got {type(value).__name__}")
            fields[key] = value
    return fields


def _rebuilt_usage(turn: ModelTurn, response: Mapping[str, Any]) -> UsageMetadata | None:
    usage = response.get("usage")
    if usage is None:
        return None
    if not isinstance(usage, dict):
        raise turn.cannot_rebuild("usage", "an object expected")
    details = dict(_object(turn, response, "usage_details") or {})
    counts: dict[str, int] = {}
    for name in ("input", "output", "cache_read", "cache_write"):
        value = usage.get(name, 0 if name in ("input", "output") else None)
        if value is None:
            continue
        if type(value) is not int:
            raise turn.cannot_rebuild(f"usage.{name}", f"a whole number expected, got {value!r}")
        counts[name] = value
    out: dict[str, Any] = {
        "input_tokens": counts["input"],
        "output_tokens": counts["output"],
        "total_tokens": details.pop("total_tokens", counts["input"] + counts["output"]),
    }
    inputs = details.pop("input_details", None)
    if inputs is not None and not isinstance(inputs, dict):
        raise turn.cannot_rebuild("usage_details.input_details", "an object expected")
    cache = {k: counts[n] for k, n in (("cache_read", "cache_read"), ("cache_creation", "cache_write")) if n in counts}
    if inputs is not None or cache:
        out["input_token_details"] = {**(inputs or {}), **cache}
    if "output_details" in details:
        out["output_token_details"] = details.pop("output_details")
    out.update(details)
    return cast("UsageMetadata", out)


def _short(value: Any) -> str:
    text = orjson.dumps(value, default=str).decode()
    return text if len(text) <= 80 else text[:77] + "..."


# ---- streams --------------------------------------------------------------------------------------------------------
def _chunk_of(result: ChatResult) -> ChatGenerationChunk:
    """The one chunk of a model that does not stream (its whole message)."""
    generation = result.generations[0]
    m = generation.message
    if not isinstance(m, AIMessage):
        raise InvalidValue(f"the model answered with a {type(m).__name__}, not an AIMessage")
    chunk = AIMessageChunk(
        content=m.content,
        additional_kwargs=m.additional_kwargs,
        response_metadata=m.response_metadata,
        usage_metadata=m.usage_metadata,
        tool_calls=m.tool_calls,
        invalid_tool_calls=m.invalid_tool_calls,
        id=m.id,
        name=m.name,
        chunk_position="last",
    )
    return ChatGenerationChunk(message=chunk, generation_info=generation.generation_info)


class _StreamSeen:
    """A live stream's chunks as they pass: joined into the response, and each text and argument chunk noted, at
    the place LangChain's merging gives it (a content block's ``index``, a tool-call chunk's ``index``)."""

    def __init__(self) -> None:
        self.joined: ChatGenerationChunk | None = None
        self.noted: list[tuple[tuple[str, int], str | None]] = []  # (("c"|"t", position), text or None), in order
        self._blocks: dict[Any, int] = {}
        self._length = 0
        self._calls: dict[Any, int] = {}
        self._count = 0

    def add(self, chunk: ChatGenerationChunk) -> None:
        # the first chunk copied: LangChain sets the id and metadata of each chunk it yields, in place
        self.joined = chunk.model_copy(deep=True) if self.joined is None else self.joined + chunk
        message = chunk.message
        content = message.content
        if isinstance(content, str):
            if content:
                self.noted.append((("c", 0), content))
        else:
            for item in content:
                pos = self._place(item)
                if isinstance(item, str):
                    self.noted.append((("c", pos), item))
                    continue
                key = _TEXT_KEYS.get(str(item.get("type"))) if isinstance(item, dict) else None
                text = item.get(key) if key is not None and isinstance(item, dict) else None
                self.noted.append((("c", pos), text if isinstance(text, str) else None))
        for c in getattr(message, "tool_call_chunks", None) or []:
            index = c.get("index")
            if isinstance(index, int):
                if index not in self._calls:
                    self._calls[index] = self._count
                    self._count += 1
                pos = self._calls[index]
            else:
                pos = self._count
                self._count += 1
            self.noted.append((("t", pos), c.get("args") or ""))

    def _place(self, item: Any) -> int:
        """Where LangChain's merging puts a content item: with the block of the same ``index``, else at the end."""
        index = item.get("index") if isinstance(item, dict) else None
        if isinstance(index, int) or (isinstance(index, str) and index.startswith("lc_")):
            if index not in self._blocks:
                self._blocks[index] = self._length
                self._length += 1
            return self._blocks[index]
        self._length += 1
        return self._length - 1

    def finish(self, turn: ModelTurn) -> None:
        """The joined response and the stream's events written as the turn."""
        try:
            response, events = self.response_and_events()
        except BaseException:
            turn.abandon()
            raise
        turn.finish(response, events=events)

    def response_and_events(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        joined = self.joined
        if joined is None:
            return {"parts": [], "finish_reason": None, "usage": None}, [{"type": "start"}, {"type": "end"}]
        message = joined.message
        response = _response(message, joined.generation_info, None)
        parts = response["parts"]
        content = message.content
        places: dict[tuple[str, int], int] = {}
        n_content = (1 if content else 0) if isinstance(content, str) else len(content)
        for pos in range(n_content):
            places[("c", pos)] = pos
        valid, bad = n_content, n_content + len(message.tool_calls)
        for pos, c in enumerate(getattr(message, "tool_call_chunks", None) or []):
            if _parses(c.get("args")):
                places[("t", pos)], valid = valid, valid + 1
            else:
                places[("t", pos)], bad = bad, bad + 1
        events: list[dict[str, Any]] = [{"type": "start"}]
        opened: set[int] = set()
        for place, text in self.noted:
            i = places.get(place)
            if i is None or i >= len(parts):
                continue
            part = parts[i]
            if i not in opened:
                opened.add(i)
                events.append({"type": "part", "index": i, "part": _head(part)})
            if text is None:
                continue
            if part["type"] in ("text", "reasoning") and place[0] == "c":
                events.append({"type": "delta", "index": i, "content": text})
            elif part["type"] == "tool_call" and place[0] == "t":
                events.append({"type": "delta", "index": i, "arguments": text})
        for i, part in enumerate(parts):  # a part no chunk announced (none should be): whole, at the end
            if i not in opened:
                events.extend({**e, "index": i} for e in stream_events({"parts": [part]})[1:-1])
        events.append({"type": "end"})
        return response, events


def _parses(args: Any) -> bool:
    """LangChain's rule for a tool-call chunk's arguments: a valid call when they parse to an object."""
    if not args:
        return True
    try:
        return isinstance(parse_partial_json(args), dict)
    except Exception:  # noqa: BLE001 - as LangChain: not a valid call
        return False


def _head(part: Mapping[str, Any]) -> dict[str, Any]:
    """A part without its text or argument text (a ``part`` event's)."""
    return {k: v for k, v in part.items() if k not in ("content", "arguments")}


def _replayed_chunks(turn: ModelTurn) -> list[ChatGenerationChunk]:
    """The served turn's stream as LangChain chunks: one per text or argument delta, a part with no text (another
    content block, an invalid tool call) as one chunk, then a last chunk with the response's metadata and usage.
    Every chunk is made before the first is yielded.

    Raises:
        TapeError: naming the tape, the step and the field, for events or a response that no longer rebuild.
    """
    response = _restored(turn)
    as_list = response.get("content_form") == "list"
    _rebuilt_parts(turn, response)  # the parts checked, as a plain request would
    fields = _message_fields(turn, response)
    parts: dict[Any, dict[str, Any]] = {}
    calls: dict[Any, int] = {}  # a tool-call part's index → its tool-call chunks' index
    called: set[Any] = set()  # the tool-call parts whose first chunk is made
    opened: dict[Any, dict[str, Any]] = {}  # a block part's first chunk's block (a block without an index goes on)
    specs: list[tuple[str, dict[str, Any]]] = []  # (where, the AIMessageChunk's fields)

    for n, e in enumerate(turn.events):
        where = f"events[{n}]"
        kind = e.get("type") if isinstance(e, dict) else None
        if kind == "part":
            part, index = e.get("part"), e.get("index")
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise turn.cannot_rebuild(f"{where}.part", "a part with a type expected")
            parts[index] = part
            if part["type"] in ("tool_call", "invalid_tool_call"):
                calls[index] = len(calls)
            if part["type"] == "invalid_tool_call":  # no argument deltas: the whole call in one chunk
                tcc = create_tool_call_chunk(
                    name=part.get("name"), args=part.get("arguments_text"), id=part.get("id"), index=calls[index]
                )
                specs.append((where, {"tool_call_chunks": [tcc]}))
            elif part["type"] not in ("text", "reasoning", "tool_call"):  # another content block: whole
                if not as_list or not isinstance(part.get("block"), dict):
                    raise turn.cannot_rebuild(f"{where}.part", f"a part this adapter does not write: {_short(part)}")
                specs.append((where, {"content": [part["block"]]}))
        elif kind == "delta":
            index = e.get("index")
            part = parts.get(index)
            if part is None:
                raise turn.cannot_rebuild(f"{where}.index", f"no part event before this delta (index {index!r})")
            if isinstance(e.get("content"), str):
                specs.extend(_text_spec(turn, where, part, index, e["content"], as_list, opened))
            elif isinstance(e.get("arguments"), str):
                if part["type"] != "tool_call":
                    raise turn.cannot_rebuild(f"{where}.arguments", f"arguments for a {part['type']} part")
                first = index not in called
                called.add(index)
                tcc = create_tool_call_chunk(
                    name=part.get("name") if first else None,
                    args=e["arguments"],
                    id=part.get("id") if first else None,
                    index=calls[index],
                )
                specs.append((where, {"tool_call_chunks": [tcc]}))
            else:
                raise turn.cannot_rebuild(where, "a delta with neither content nor arguments")
        elif not isinstance(kind, str):
            raise turn.cannot_rebuild(where, "an event with a type expected")
    specs.append(("response", {**fields, "chunk_position": "last"}))
    info = _object(turn, response, "generation_info")
    out: list[ChatGenerationChunk] = []
    for n, (where, spec) in enumerate(specs):
        spec.setdefault("content", [] if as_list else "")
        try:
            message = AIMessageChunk(**spec)
            out.append(ChatGenerationChunk(message=message, generation_info=info if n == len(specs) - 1 else None))
        except Exception as e:  # noqa: BLE001 - LangChain's validation, whatever it raises
            raise turn.cannot_rebuild(where, e) from e
    return out


def _text_spec(
    turn: ModelTurn,
    where: str,
    part: dict[str, Any],
    index: Any,
    text: str,
    as_list: bool,
    opened: dict[Any, dict[str, Any]],
) -> list[tuple[str, dict[str, Any]]]:
    """The chunk of one text delta: the text itself, or its block (the whole block at its first delta; then
    the text alone with the block's ``index``, which LangChain merges into it)."""
    if part["type"] not in ("text", "reasoning"):
        raise turn.cannot_rebuild(f"{where}.content", f"text for a {part['type']} part")
    block = part.get("block")
    if block is None:
        if part["type"] != "text":
            raise turn.cannot_rebuild(f"{where}.part", "a reasoning part without its block")
        return [(where, {"content": [text] if as_list else text})] if text or as_list else []
    if not as_list:
        raise turn.cannot_rebuild("content_form", "blocks in a text content (content_form 'list' missing)")
    if index not in opened:
        whole = opened[index] = _block_with_text(turn, index, block, text)
        return [(where, {"content": [whole]})]
    key = _TEXT_KEYS[block["type"]]
    if "index" in block:
        return [(where, {"content": [{"type": block["type"], key: text, "index": block["index"]}]})]
    opened[index][key] += text  # no index to merge by: the text goes on in the block's first chunk
    return []
