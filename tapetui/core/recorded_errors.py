"""A recorded error, raised again on replay — as data, never as code.

A tape's ``error`` (``{"type", "module", "message"}``) names a class. Replaying it raises
that class only when all of these hold:

- the module is already in ``sys.modules`` (a tape never makes tapetui import anything)
  and the name is found in its ``__dict__`` (no module ``__getattr__`` runs);
- the class is an ``Exception`` subclass, so never a ``BaseException``-only class
  (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit``, ``asyncio.CancelledError``,
  pytest's ``OutcomeException`` family);
- neither it nor a base is a control-flow or test-outcome class (:data:`REFUSED`):
  ``StopIteration``, ``StopAsyncIteration``, ``unittest.SkipTest`` and unittest's internal
  outcome classes, pytest's outcome exceptions whatever their base (``Exit`` is an
  ``Exception``), hypothesis's ``UnsatisfiedAssumption``, ``concurrent.futures``'
  ``CancelledError``, and tapetui's own errors (a tape may not claim a drift or a miss).

The instance is built without running a constructor: the nearest C-level ``__new__`` in
the class's MRO (``BaseException.__new__`` for most), then ``args = (message,)`` through
``BaseException``'s own setter (the message with control characters escaped, as every text
from a tape that may reach a terminal). A class whose C-level ``__str__`` would then lose
the message (``SyntaxError``, ``UnicodeDecodeError``) is not raised as itself. Attributes
(none are recorded today: :func:`build_error` takes them for the change that records them)
are restored only when they are JSON values under plain, non-underscore names that no class
in the MRO defines, written straight into the instance's ``__dict__`` (no property or
``__setattr__`` runs).

Everything else — an unknown module or name, a refused class, a class that cannot be built
this way — raises :class:`~tapetui.core.errors.TapeReplayedError` (a ``TapeError``) carrying
the recorded type name, module, message and attributes.
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
    """The class a tape names, if its module is loaded; no import, no module ``__getattr__``."""
    module = sys.modules.get(module_name)
    if not _is_module(module) or not type_name.isidentifier():
        return None
    cls = _MODULE_DICT.__get__(module).get(type_name)
    return cls if _is_class(cls) else None


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
    return None


def _native_new(cls: type) -> Any:
    """The nearest ``__new__`` implemented in C in ``cls``'s MRO (Python-level ones are skipped: never run)."""
    for k in _mro(cls):
        new = _vars(k).get("__new__")
        if type(new) is types.BuiltinFunctionType:  # a C type's; a Python one (a staticmethod) is skipped
            return new
    return None


_C_FUNCTIONS = (types.WrapperDescriptorType, types.MethodDescriptorType, types.BuiltinFunctionType)


def _shows(cls: type, exc: BaseException, message: str) -> bool:
    """Whether the instance's text still holds the message. A ``__str__`` written in C that reads fields only
    its constructor sets (``SyntaxError``, ``UnicodeDecodeError``) would lose it; one written in Python is
    not run here (it is the class's own business when the error is shown)."""
    for k in _mro(cls):
        method = _vars(k).get("__str__")
        if method is None:
            continue
        if type(method) not in _C_FUNCTIONS:
            return True
        try:
            return message in method(exc)
        except Exception:  # noqa: BLE001 - a C __str__ that needs what the constructor sets
            return False
    return True


def _is_json(value: Any, depth: int = 0) -> bool:
    if depth > 50:
        return False
    if isinstance(value, _JSON_SCALARS):
        return True
    if isinstance(value, list):
        return all(_is_json(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v, depth + 1) for k, v in value.items())
    return False


def restorable(cls: type, name: Any, value: Any) -> bool:
    """Whether a recorded attribute may be set on an instance of ``cls``: a plain public name that
    no class in the MRO defines (so no property, slot or method is shadowed or run) and a JSON value."""
    return (
        isinstance(name, str)
        and name.isidentifier()
        and not name.startswith("_")
        and name != "args"
        and not any(name in _vars(k) for k in _mro(cls))
        and _is_json(value)
    )


def build_error(cls: type, message: str, attributes: dict[str, Any] | None = None) -> BaseException | None:
    """An instance of ``cls`` holding ``message`` (and the restorable ``attributes``), built without running
    any Python-level ``__new__`` or ``__init__``; None when ``cls`` cannot be built that way."""
    new = _native_new(cls)
    if new is None:
        return None
    try:
        exc: BaseException = new(cls)
    except (TypeError, ValueError):  # a C base that refuses to build this class without its arguments
        return None
    if not any(k is cls for k in _mro(type(exc))):
        return None
    _ARGS.__set__(exc, (message,))
    if not _shows(cls, exc, message):
        return None
    if attributes:
        d = _INSTANCE_DICT.__get__(exc)
        for name, value in attributes.items():
            if restorable(cls, name, value):
                d[name] = value
    return exc


def error_record(error: BaseException, redactor: Redactor) -> dict[str, Any]:
    """How a call line stores what its tool raised: ``{"type", "module", "message"}``, every field redacted
    (the message, and what may join it). A call's outcome is this or its result, never both
    (:func:`tapetui.core.tapefile.call_line`); :func:`raise_recorded` raises it again on replay."""
    return dict(
        redactor.redact({"type": type(error).__name__, "module": type(error).__module__, "message": str(error)})
    )


def raise_recorded(error: dict[str, Any], tool: str, seq: int) -> NoReturn:
    """Raise a recorded error again: its own class when the rules above allow it, else TapeReplayedError."""
    type_name = str(error.get("type", "Exception"))
    module_name = str(error.get("module", "builtins"))
    message = str(error.get("message", ""))
    attributes: dict[str, Any] = {}  # recorded attributes: none are written today
    cls = lookup(module_name, type_name)
    if cls is None:
        reason = f"{module_name}.{type_name} is not a loaded class (a tape never makes tapetui import anything)"
    else:
        reason = refusal(cls) or ""
        if not reason:
            exc = build_error(cls, safe_text(message), attributes)  # its text may reach a terminal: escaped
            if exc is not None:
                raise exc
            reason = "it cannot be built without running its constructor"
    raise TapeReplayedError(
        tool=tool,
        seq=seq,
        type_name=type_name,
        module=module_name,
        message=message,
        attributes=attributes,
        reason=reason,
    )
