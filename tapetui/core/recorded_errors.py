"""A recorded error, raised again on replay — as data, never as code.

A tape's ``error`` stores what the tool raised (:func:`error_record`, every field redacted):

- ``type``: the class's ``__qualname__`` (``Outer.QuotaError`` for a nested class) and ``module``;
- ``message``: ``str(error)``;
- ``args``: the exception's ``args`` when every one is a JSON value (a tuple becomes a list); absent otherwise,
  and when they are just ``[message]`` (the common ``ValueError("text")``, replayed with ``(message,)`` anyway);
- ``attrs``: the entries of the instance's ``__dict__`` under plain, non-underscore names whose values are JSON
  (``retry_after``, ``status``...); the others are skipped.

Error lines of older tapes hold only ``type`` (the bare class name), ``module`` and ``message``; they replay
as they always did.

Replaying an error raises that class only when all of these hold:

- the module is already in ``sys.modules`` (a tape never makes tapetui import anything) and the name is found
  in its ``__dict__``, a nested class in its outer class's own namespace (no module ``__getattr__`` or
  metaclass hook runs);
- the class is an ``Exception`` subclass, so never a ``BaseException``-only class
  (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, ``asyncio.CancelledError``,
  pytest's ``OutcomeException`` family);
- neither it nor a base is a control-flow or test-outcome class (:data:`REFUSED`):
  ``StopIteration``, ``StopAsyncIteration``, ``unittest.SkipTest`` and unittest's internal
  outcome classes, pytest's outcome exceptions whatever their base (``Exit`` is an
  ``Exception``), hypothesis's ``UnsatisfiedAssumption``, ``concurrent.futures``'
  ``CancelledError``, and tapetui's own errors (a tape may not claim a drift or a miss);
- no class in its MRO has a custom metaclass (whose ``__instancecheck__``/``__subclasscheck__`` an ``except``
  clause or ``isinstance`` would run) or defines ``__del__`` (run when the error is dropped).

The instance is built without running a constructor: the nearest C-level ``__new__`` in the class's MRO
(``BaseException.__new__`` for most), then ``args`` set through ``BaseException``'s own setter — so
``class QuotaError(Exception): def __init__(self, status, detail)`` comes back with ``args == (429, "slow")``.
The recorded ``args`` are used when the instance's text then equals the recorded message and no text in them
needs escaping; else ``args = (message,)`` (the message with control characters escaped, as every text from a
tape that may reach a terminal). A class whose C-level ``__str__`` would lose the message either way
(``SyntaxError``, ``UnicodeDecodeError``) is not raised as itself. A ``__str__`` written in Python (the
class's own, already imported code) is run once on the rebuilt instance, to check it does not fail there.
Attributes are restored when they are JSON values under plain, non-underscore names that no class in the MRO
defines other than as a plain JSON default (``retry_after: int = 0``), written straight into the instance's
``__dict__`` (no property or ``__setattr__`` runs): ``err.retry_after == 30`` on replay as on record.

Everything else — an unknown module or name, a refused class, a class that cannot be built
this way — raises :class:`~tapetui.core.errors.TapeReplayedError` (a ``TapeError``) carrying
the recorded type name, module, message, args and attributes.
"""

from __future__ import annotations

import sys
import types
from typing import Any, NoReturn

from tapetui.core.errors import TapeReplayedError
from tapetui.core.redact import Redactor
from tapetui.core.textsafe import safe_text

__all__ = ["REFUSED", "build_error", "error_record", "raise_recorded", "refusal"]

# (module, class name) of control-flow and test-outcome classes; each counts when its module is loaded.
REFUSED: tuple[tuple[str, str], ...] = (
    ("builtins", "StopIteration"),
    ("builtins", "StopAsyncIteration"),
    ("unittest.case", "SkipTest"),
    ("unittest.case", "_ShouldStop"),
    ("unittest.case", "_UnexpectedSuccess"),
    ("_pytest.outcomes", "OutcomeException"),
    ("_pytest.outcomes", "Skipped"),
    ("_pytest.outcomes", "Failed"),
    ("_pytest.outcomes", "XFailed"),
    ("_pytest.outcomes", "Exit"),
    ("hypothesis.errors", "UnsatisfiedAssumption"),
    ("hypothesis.errors", "StopTest"),
    ("concurrent.futures._base", "CancelledError"),
    ("bdb", "BdbQuit"),  # the debugger's quit: pytest treats it as an outcome
    ("tapetui.core.errors", "TapeError"),
)
# Modules whose classes are all outcomes: refused by the module a class names (pytest's classes
# claim ``__module__ = "builtins"``, so identity, above, is what catches those).
_REFUSED_MODULES = frozenset({"_pytest.outcomes", "unittest.case", "tapetui.core.errors"})

_MODULE_DICT = vars(types.ModuleType)["__dict__"]
_TYPE_DICT = type.__dict__["__dict__"]
_TYPE_MRO = type.__dict__["__mro__"]
_ARGS = BaseException.__dict__["args"]
_INSTANCE_DICT = BaseException.__dict__["__dict__"]
_JSON_SCALARS = (str, int, float, bool, type(None))
_MAX_DEPTH = 50  # nesting of a recorded arg or attribute that a replay restores
_NOT_JSON: Any = object()


# Checks on what a tape names use the real type of an object only: isinstance() would fall back on an
# object's ``__class__`` attribute and == on a metaclass's ``__eq__``, both code the object controls.
def _is_module(obj: Any) -> bool:
    return issubclass(type(obj), types.ModuleType)


def _is_class(obj: Any) -> bool:
    return issubclass(type(obj), type)


def _module_of(cls: type) -> str | None:
    name = _vars(cls).get("__module__")
    return name if type(name) is str else None


def _vars(cls: type) -> Any:
    return _TYPE_DICT.__get__(cls, type)  # the class's own namespace, read without any metaclass hook


def _mro(cls: type) -> tuple[type, ...]:
    return _TYPE_MRO.__get__(cls, type)  # type: ignore[no-any-return]


def _refused_classes() -> tuple[type, ...]:
    out = []
    for module_name, name in REFUSED:
        module = sys.modules.get(module_name)
        if _is_module(module):
            cls = _MODULE_DICT.__get__(module).get(name)
            if _is_class(cls):
                out.append(cls)
    return tuple(out)


def lookup(module_name: str, type_name: str) -> type | None:
    """The class a tape names, if its module is loaded: ``type_name`` is a qualified name, a nested class found
    in its outer class's own namespace. No import, no module ``__getattr__``, no metaclass hook runs."""
    module = sys.modules.get(module_name)
    parts = type_name.split(".")
    if not _is_module(module) or not all(part.isidentifier() for part in parts):
        return None  # a class defined in a function (``f.<locals>.E``) is not reachable: never looked for
    obj = _MODULE_DICT.__get__(module).get(parts[0])
    for part in parts[1:]:
        if not _is_class(obj):
            return None
        obj = _vars(obj).get(part)
    return obj if _is_class(obj) else None


def refusal(cls: type) -> str | None:
    """Why ``cls`` may not be raised from a tape, or None when it may."""
    if not issubclass(cls, BaseException):
        return "not an exception class"
    if not issubclass(cls, Exception):
        return "a BaseException outside Exception (control flow: exit, interrupt, cancellation, test outcome)"
    mro = _mro(cls)
    refused = {id(k) for k in _refused_classes()}  # by identity: a metaclass __eq__ is never called
    if any(id(k) in refused for k in mro) or any(_module_of(k) in _REFUSED_MODULES for k in mro):
        return "a control-flow or test-outcome class"
    # code of the class that raising or dropping the instance would run: a metaclass's hooks (an `except`
    # clause's subclass check, isinstance) and a finaliser
    if any(type(k) is not type for k in mro):
        return "a class with a custom metaclass (its hooks would run)"
    if any("__del__" in _vars(k) for k in mro):
        return "a class with a __del__ (it would run when the error is dropped)"
    return None


def _native_new(cls: type) -> Any:
    """The nearest ``__new__`` implemented in C in ``cls``'s MRO (Python-level ones are skipped: never run)."""
    for k in _mro(cls):
        new = _vars(k).get("__new__")
        if type(new) is types.BuiltinFunctionType:  # a C type's; a Python one (a staticmethod) is skipped
            return new
    return None


_C_FUNCTIONS = (types.WrapperDescriptorType, types.MethodDescriptorType, types.BuiltinFunctionType)


def _shows(cls: type, exc: BaseException, message: str, *, exact: bool) -> bool:
    """Whether the instance's text is the message (``exact``: equal to it, for restored args; else holding it,
    for ``args = (message,)``). A ``__str__`` written in C that reads fields only its constructor sets
    (``SyntaxError``, ``UnicodeDecodeError``, ``OSError``'s errno) would lose it. One written in Python (the
    class's own, already imported code, which showing the error runs anyway) must at least not fail on the
    rebuilt instance — one that reads a field only its constructor sets would make ``str(err)`` raise in
    replay where it worked in record — and may word the message its own way."""
    for k in _mro(cls):
        method = _vars(k).get("__str__")
        if method is None:
            continue
        if type(method) not in _C_FUNCTIONS:
            try:
                return isinstance(method(exc), str)
            except Exception:  # noqa: BLE001 - it needs what the constructor sets: not raised as itself
                return False
        try:
            text = method(exc)
        except Exception:  # noqa: BLE001 - a C __str__ that needs what the constructor sets
            return False
        return text == message if exact else message in text
    return True


def _is_json(value: Any, depth: int = 0) -> bool:
    if depth > _MAX_DEPTH:
        return False
    if isinstance(value, _JSON_SCALARS):
        return True
    if isinstance(value, list):
        return all(_is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in value.items())
    return False


def _as_json(value: Any, depth: int = 0, inside: frozenset[int] = frozenset()) -> Any:
    """``value`` as a JSON value (a tuple as a list, a ``str``/``int``/``float`` subclass as its plain type), or
    :data:`_NOT_JSON` when it has none (an object, a non-finite float, a cycle, deeper than a replay restores)."""
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return value
    if isinstance(value, float):
        f = float.__float__(value)
        return f if f - f == 0 else _NOT_JSON  # NaN and infinity have no JSON form
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    if depth >= _MAX_DEPTH or id(value) in inside or not isinstance(value, (list, tuple, dict)):
        return _NOT_JSON
    inside = inside | {id(value)}
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            item = _as_json(v, depth + 1, inside) if type(k) is str else _NOT_JSON
            if item is _NOT_JSON:
                return _NOT_JSON
            out[k] = item
        return out
    items = []
    for v in value:
        item = _as_json(v, depth + 1, inside)
        if item is _NOT_JSON:
            return _NOT_JSON
        items.append(item)
    return items


def _plain_name(name: Any) -> bool:
    return isinstance(name, str) and name.isidentifier() and not name.startswith("_") and name != "args"


def _left_to_instance(namespace: Any, name: str) -> bool:
    """Whether a class's namespace leaves ``name`` to the instance: it does not define it, or defines it only as
    a plain JSON default (``retry_after: int = 0``); never a property, slot, method or other descriptor."""
    if name not in namespace:
        return True
    t = type(namespace[name])
    return any(t is s for s in _JSON_SCALARS)  # by identity: a metaclass __eq__ is never called


def restorable(cls: type, name: Any, value: Any) -> bool:
    """Whether a recorded attribute may be set on an instance of ``cls``: a plain public name that no class in
    the MRO defines other than as a plain JSON default (so no property, slot or method is shadowed or run) and
    a JSON value."""
    return _plain_name(name) and all(_left_to_instance(_vars(k), name) for k in _mro(cls)) and _is_json(value)


def _has_unsafe_text(value: Any) -> bool:
    if isinstance(value, str):
        return safe_text(value) != value
    if isinstance(value, list):
        return any(_has_unsafe_text(v) for v in value)
    if isinstance(value, dict):
        return any(_has_unsafe_text(k) or _has_unsafe_text(v) for k, v in value.items())
    return False


def _restorable_args(recorded: Any) -> tuple[Any, ...] | None:
    """The recorded ``args`` to set on a replayed instance, or None (then it gets ``(message,)``): a list of JSON
    values holding no text that needs escaping (such text reaches a terminal only through the escaped message)."""
    if type(recorded) is not list or not _is_json(recorded) or _has_unsafe_text(recorded):
        return None
    return tuple(recorded)


def build_error(
    cls: type, message: str, attributes: dict[str, Any] | None = None, args: tuple[Any, ...] | None = None
) -> BaseException | None:
    """An instance of ``cls`` holding ``args`` (when its text is then ``message``, else ``(message,)``) and the
    restorable ``attributes``, built without running any Python-level ``__new__`` or ``__init__``; None when
    ``cls`` cannot be built that way or would not show the message."""
    new = _native_new(cls)
    if new is None:
        return None
    try:
        exc: BaseException = new(cls)
    except (TypeError, ValueError):  # a C base that refuses to build this class without its arguments
        return None
    if not any(k is cls for k in _mro(type(exc))):
        return None
    shown = False
    if args is not None:
        _ARGS.__set__(exc, args)
        shown = _shows(cls, exc, message, exact=True)
    if not shown:
        _ARGS.__set__(exc, (message,))
        if not _shows(cls, exc, message, exact=False):
            return None
    if attributes:
        d = _INSTANCE_DICT.__get__(exc)
        for name, value in attributes.items():
            if restorable(cls, name, value):
                d[name] = value
    return exc


def error_record(error: BaseException, redactor: Redactor) -> dict[str, Any]:
    """How a call line stores what its tool raised, every field redacted (the message, and what may join it):
    ``{"type": qualified name, "module", "message": str(error), "args": [...], "attrs": {...}}``, ``args`` only
    when all of them are JSON values and they are more than ``[message]``, ``attrs`` the instance's plain public
    attributes that are JSON (if any).
    A call's outcome is this or its result, never both (:func:`tapetui.core.tapefile.call_line`);
    :func:`raise_recorded` raises it again on replay."""
    cls = type(error)
    record: dict[str, Any] = {"type": str(cls.__qualname__), "module": str(cls.__module__), "message": str(error)}
    args = _as_json(_ARGS.__get__(error))  # BaseException's own args: an ``args`` property is not run
    if args is not _NOT_JSON:
        record["args"] = args
    attrs = {}
    for name, value in list(_INSTANCE_DICT.__get__(error).items()):
        if _plain_name(name):
            v = _as_json(value)
            if v is not _NOT_JSON:
                attrs[name] = v
    if attrs:
        record["attrs"] = attrs
    redacted = dict(redactor.redact(record))
    if redacted.get("args") == [redacted["message"]]:
        del redacted["args"]  # the common ``Error("text")``: replay gives ``(message,)`` all the same
    return redacted


def raise_recorded(error: dict[str, Any], tool: str, seq: int) -> NoReturn:
    """Raise a recorded error again: its own class when the rules above allow it, else TapeReplayedError."""
    type_name = str(error.get("type", "Exception"))
    module_name = str(error.get("module", "builtins"))
    message = str(error.get("message", ""))
    recorded_args = error.get("args")
    attrs = error.get("attrs")
    attributes = dict(attrs) if type(attrs) is dict and all(type(k) is str for k in attrs) else {}
    cls = lookup(module_name, type_name)
    if cls is None:
        reason = f"{module_name}.{type_name} is not a loaded class (a tape never makes tapetui import anything)"
    else:
        reason = refusal(cls) or ""
        if not reason:
            # its text may reach a terminal: escaped
            exc = build_error(cls, safe_text(message), attributes, _restorable_args(recorded_args))
            if exc is not None:
                raise exc
            reason = "it cannot be built without running its constructor"
    raise TapeReplayedError(
        tool=tool,
        seq=seq,
        type_name=type_name,
        module=module_name,
        message=message,
        recorded_args=tuple(recorded_args) if type(recorded_args) is list else None,
        attributes=attributes,
        reason=reason,
    )
