"""The registry of live tools: callables with a schema, a pinned version and a fingerprint, and
contracts registered from a framework's own tool definition, without a Python function."""

from __future__ import annotations

import functools
import inspect
import math
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, TypeVar, Unpack

from tapetui.core.config import ttl_problem
from tapetui.core.declared import CONTRACT, Contract, ContractFields, Kind
from tapetui.core.errors import TapeError
from tapetui.core.fingerprint import LATEST_FORM, ToolManifest, contract_manifest, in_form
from tapetui.core.paths import first_non_json
from tapetui.core.redact import Redactor

__all__ = ["Contract", "Tool", "ToolRegistry", "make_contract"]

F = TypeVar("F", bound=Callable[..., Any])

_FROM_FN: Any = object()  # ``returns=`` not given: the function's return annotation


@dataclass(frozen=True, slots=True)
class Tool:
    """A registered tool. The manifests (and so the fingerprints) are computed once, at registration.

    ``manifest`` is the form-3 manifest under the default redaction rules (the whole contract:
    name, version, description, input and output schema, annotations, title, and the signature of
    a tool registered from a function), secret-looking values redacted, safe to write to a tape;
    ``fingerprint`` is its fingerprint. ``raw_manifest`` (form 1, values verbatim: never written
    anywhere) makes every form: it verifies tapes recorded in form 1 and is what
    :func:`tapetui.tool_fingerprint` hashes. See :mod:`tapetui.core.fingerprint`.

    The fields of its :attr:`contract` (:class:`~tapetui.core.declared.Contract`) are attributes of the
    same names, checked (``schema`` ``{}`` when undeclared, ``version`` a string, ``ttl`` a float).

    Attributes:
        fn: the function, or None for a contract registered without one (:meth:`ToolRegistry.contract`).
        description: what the model reads about the tool (by default the function's docstring).
        returns: the declared return type (the function's return annotation, or ``returns=``), None
            when undeclared; for a coroutine function, the type it returns when awaited.
        is_async: ``fn`` is a coroutine function (through ``functools.partial`` and ``__call__``).
    """

    name: str
    fn: Callable[..., Any] | None
    schema: dict[str, Any]
    version: str
    side_effect: bool
    ttl: float | None
    manifest: ToolManifest
    raw_manifest: ToolManifest | None = None
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    title: str | None = None
    returns: Any = None
    is_async: bool = False

    @property
    def fingerprint(self) -> str:
        return self.manifest.fingerprint

    @property
    def contract(self) -> Contract:
        """What the tool declares, as checked at registration."""
        return Contract(**{k: getattr(self, k) for k in CONTRACT})

    def manifest_for(self, form: int = LATEST_FORM, redactor: Redactor | None = None) -> ToolManifest:
        """This tool's manifest in fingerprint form ``form``, forms 2 and 3 redacted by ``redactor``'s rules.

        Raises:
            ValueError: a form this version does not know.
        """
        raw = self.raw_manifest or self.manifest
        if form == 1:
            return raw
        if form == LATEST_FORM and (redactor is None or redactor.is_default):
            return self.manifest
        return in_form(raw, form, redactor)

    def __call__(self, args: dict[str, Any]) -> Any:
        if self.fn is None:
            raise TapeError(
                f"tool {self.name!r} is a contract without a function: pass live= to run it "
                f"(or register the function with registry.register)"
            )
        return self.fn(**args)


def make_contract(
    name: str | Contract,
    **fields: Unpack[ContractFields],
) -> Tool:
    """A tool contract from a framework's own definition, without a Python function (not registered).

    Its manifest has no params: only what the model sees (name, description, schemas, annotations,
    title) and the pinned version. Keywords as :meth:`ToolRegistry.contract`; or ``name`` is a
    :class:`~tapetui.core.declared.Contract` declaring it all, and no keyword is given.

    Raises:
        TapeError: a value that is not what the keyword takes (see :meth:`ToolRegistry.register`);
            a Contract and keywords.
    """
    declared = Contract.of(name, fields)
    if not isinstance(declared.name, str) or not declared.name:
        raise TapeError(f"a tool contract needs a name (a non-empty string), got {declared.name!r}")
    return _build(None, declared)


class ToolFields(ContractFields, total=False):
    """The keywords of :meth:`ToolRegistry.register` (and its decorator form): a contract's, and its ``name``
    (the function's by default)."""

    name: str | None


class ToolRegistry:
    """Tools an agent may call, by name."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def register(
        self,
        fn: Callable[..., Any],
        *,
        schema: dict[str, Any] | None = None,
        version: str = "0",
        side_effect: bool = False,
        name: str | None = None,
        ttl: float | None = None,
        description: str | None = None,
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        title: str | None = None,
        returns: Any = _FROM_FN,
    ) -> Tool:
        """Register ``fn`` as a tool.

        Args:
            fn: the callable (a function, coroutine function, ``functools.partial`` or callable
                object); it is called with the arguments as keywords.
            schema: the JSON schema the model sees for its arguments.
            version: the pinned version of the tool's contract.
            side_effect: whether calling it changes the world (it never runs in ``replay``).
            name: the tool name; the function's name by default.
            ttl: seconds a recorded result stays fresh (declares the tool time-sensitive).
            description: what the model reads about the tool; the docstring by default
                (``inspect.getdoc``; ``""`` for none).
            output_schema: the JSON schema of its result, as the framework declares it.
            annotations: behaviour hints, such as MCP's ``readOnlyHint`` and ``destructiveHint``.
            title: a human-readable name.
            returns: the declared return type; ``fn``'s return annotation by default.

        Raises:
            TapeError: a tool of that name is already registered; ``ttl`` is not a finite,
                positive number of seconds of at most 100 years; a schema, output schema or
                annotations that is not a dict of JSON values; a description or title that is
                not a string; a callable whose signature cannot be read.
        """
        if not callable(fn):
            raise TapeError(f"register takes a callable, got {type(fn).__name__}; for a contract use registry.contract")
        if name is not None and (not isinstance(name, str) or not name):
            raise TapeError(f"a tool name must be a non-empty string, got {name!r}")
        tool_name = name if name is not None else getattr(fn, "__name__", None)
        if not isinstance(tool_name, str) or not tool_name:
            raise TapeError(f"{fn!r} has no usable __name__: pass name=")
        if tool_name in self._tools:
            raise TapeError(f"tool {tool_name!r} is already registered")
        declared = Contract(
            tool_name,
            version,
            description=_docstring(fn) if description is None else description,
            schema=schema,
            output_schema=output_schema,
            annotations=annotations,
            title=title,
            side_effect=side_effect,
            ttl=ttl,
            returns=_return_type(fn) if returns is _FROM_FN else returns,
        )
        tool = _build(fn, declared)
        self._tools[tool_name] = tool
        return tool

    def contract(
        self,
        name: str | Contract,
        **fields: Unpack[ContractFields],
    ) -> Tool:
        """Register a tool's contract from a framework's own definition, without a Python function.

        The tape checks it as any tool (its fingerprint covers what the model sees, with no params:
        there is no signature); to run it live, pass the call's ``live=``. ``name`` may be a
        :class:`~tapetui.core.declared.Contract` declaring it all (then no keyword is given).

        Raises:
            TapeError: a tool of that name is already registered, or a value that is not what its
                keyword takes (see :meth:`register`); a Contract and keywords.
        """
        declared = Contract.of(name, fields)
        if isinstance(declared.name, str) and declared.name in self._tools:
            raise TapeError(f"tool {declared.name!r} is already registered")
        tool = make_contract(declared)
        self._tools[tool.name] = tool
        return tool

    def put(self, tool: Tool) -> Tool:
        """Add ``tool``, or replace the tool of its name (a framework redefined it); returns it."""
        self._tools[tool.name] = tool
        return tool

    def tool(self, **fields: Unpack[ToolFields]) -> Callable[[F], F]:
        """Decorator form of :meth:`register` (the same keywords); returns the function unchanged."""

        def deco(fn: F) -> F:
            self.register(fn, **fields)
            return fn

        return deco

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __getitem__(self, name: str) -> Tool:
        try:
            return self._tools[name]
        except KeyError:
            known = ", ".join(sorted(self._tools)) or "none"
            raise TapeError(f"no tool {name!r} in the registry (registered: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


# ---- building a tool ----------------------------------------------------------------
def _build(fn: Callable[..., Any] | None, declared: Contract) -> Tool:
    """A checked :class:`Tool` (its manifests computed) of ``fn`` and what ``declared`` says; nothing registered."""
    if declared.name == "model":
        raise TapeError(
            "a tool may not be called 'model': the name belongs to model turns (their 'model:' keys, live=['model'])"
        )
    contract = _checked(declared)
    try:
        raw = contract_manifest(contract, fn)
    except (ValueError, TypeError) as e:  # inspect.signature: a builtin without one
        raise TapeError(
            f"tool {contract.name!r}: cannot read the signature of {fn!r} ({e}); register it with "
            f"registry.contract(...) and run it with live="
        ) from None
    return Tool(
        fn=fn,
        manifest=in_form(raw, LATEST_FORM),
        raw_manifest=raw,
        is_async=_is_async(fn) if fn is not None else False,
        **{k: getattr(contract, k) for k in CONTRACT},
    )


# the order a contract's values are checked in (the first problem is the one reported)
_CHECKED: tuple[Kind, ...] = ("schema", "object", "text", "seconds", "version", "flag")


def _checked(c: Contract) -> Contract:
    """``c`` with each value checked by its declared kind, as a :class:`Tool` holds it (``schema`` ``{}``
    when None, ``version`` a string, ``side_effect`` a bool, ``ttl`` a float).

    Raises:
        TapeError: the first value that is not what its kind takes.
    """
    fixed: dict[str, Any] = {}
    for kind in _CHECKED:
        for k in (k for k, d in CONTRACT.items() if d.kind == kind):
            fixed[k] = _value(c.name, k, kind, getattr(c, k))
    return replace(c, **fixed)


def _value(name: str, key: str, kind: Kind, value: Any) -> Any:
    """``value`` as a tool holds a value of ``kind``; a TapeError naming tool ``name`` when it is not one."""
    if kind == "version":
        return str(value)
    if kind == "flag":
        return bool(value)
    if kind == "schema" or (kind == "object" and value is not None):
        value = {} if value is None else value
        _check_dict(name, key, value)
    elif kind == "text" and value is not None:
        bad = _text_problem(value) if isinstance(value, str) else f"must be a string, got {type(value).__name__}"
        if bad:
            raise TapeError(f"tool {name!r}: {key} {bad}")
    elif kind == "seconds" and value is not None:
        problem = ttl_problem(value)  # finite, positive, at most 100 years: checked here, not mid-recording
        if problem:
            raise TapeError(f"tool {name!r}: {problem}")
        return float(value)
    return value


def _check_dict(tool: str, key: str, value: Any) -> None:
    """A dict of JSON values (string keys, finite numbers, valid UTF-8 text), or a TapeError naming the path."""
    if not isinstance(value, dict):
        raise TapeError(f"tool {tool!r}: {key} must be a dict (a JSON object), got {type(value).__name__}")
    try:
        problem = _json_problem(value, key)
    except RecursionError:
        problem = f"{key} is nested too deeply (or contains itself)"
    if problem:
        raise TapeError(f"tool {tool!r}: {problem}")


def _json_problem(value: Any, path: str) -> str | None:
    found = first_non_json(value, path, leaf=_json_leaf)
    if found is None:
        return None
    at, bad = found.path, found.value
    if found.key:
        return f"{at} has a key {bad!r} that is not a string"
    if isinstance(bad, str):
        return f"{at} {_text_problem(bad)}"
    if isinstance(bad, float):
        return f"{at} is {bad!r}, not a JSON number"
    return f"{at} is a {type(bad).__name__}, not a JSON value"


def _json_leaf(value: Any) -> bool:
    """Whether a value that is not a container is JSON a manifest takes: valid UTF-8 text, a finite number."""
    if isinstance(value, str):
        return not _text_problem(value)
    if isinstance(value, float):
        return math.isfinite(value)
    return value is None or isinstance(value, (bool, int))


def _text_problem(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        return f"is not valid UTF-8 text ({e.reason} at character {e.start})"
    return ""


def _unpartial(fn: Any) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def _runs(fn: Any) -> Any:
    """What runs when ``fn`` is called: through partials, a callable object's ``__call__``."""
    f = _unpartial(fn)
    if inspect.isroutine(f) or isinstance(f, type):
        return f
    return getattr(f, "__call__", f)  # noqa: B004 (a callable object's method, not a callability test)


def _docstring(fn: Any) -> str | None:
    """The description a function gives itself: its docstring, cleaned (``inspect.getdoc``).

    A partial's is its function's (not ``functools.partial``'s); a callable object's is its class's,
    else its ``__call__``'s.
    """
    f = _unpartial(fn)
    doc = inspect.getdoc(f)
    if doc is None and not (inspect.isroutine(f) or isinstance(f, type)):
        doc = inspect.getdoc(_runs(f))
    return doc


def _return_type(fn: Any) -> Any:
    """The return annotation, resolved (``typing.get_type_hints``), else as written; None when undeclared."""
    f = _runs(fn)
    try:
        hints = typing.get_type_hints(f)
    except Exception:  # an unresolvable forward reference, an object typing cannot read: the raw annotation
        hints = getattr(f, "__annotations__", None) or {}
    return hints.get("return") if isinstance(hints, dict) else None


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(_runs(fn))
