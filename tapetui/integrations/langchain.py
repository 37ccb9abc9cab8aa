"""LangChain: ``BaseTool``s whose calls go through a tape.

``taped(tool)`` (or ``taped([tool, ...])``) returns copies of LangChain tools — the same class and fields —
whose calls go through the tape: ``invoke``/``run`` with ``tape.call``, ``ainvoke``/``arun`` with ``await
tape.acall``. Everything LangChain does around the tool stays LangChain's: argument validation, callbacks,
``handle_tool_error``, building the ``ToolMessage``; only the tool's own work (its ``_run``/``_arun``) is
recorded, replayed with no tool run, or reported as drift. Without ``tape=``, the tape current when the call
is made is used (``with tapetui.use_tape(...)``, the pytest ``tape`` fixture). Written against langchain-core
1.x.

LangChain's agent middleware (``wrap_tool_call`` in the ``langchain`` package's ``create_agent``) is not
offered here: wrap the tools you hand the agent instead.

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
"""

from __future__ import annotations

import contextlib
import functools
import typing
import weakref
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, overload

from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from tapetui.core.errors import InvalidValue
from tapetui.core.tape import Tape
from tapetui.integrations._common import resolve_tape

__all__ = ["ORDER_KEY", "taped"]

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
