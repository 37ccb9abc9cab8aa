"""The JSON form of a value that has no codec, exactly as a tape holds it (:func:`json_form`), and the
:class:`Unrecordable` error naming the first path in a value that has none. The codecs of
:mod:`tapetui.core.codecs` end in it: whatever a codec writes is walked once more here.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
from collections.abc import Iterable
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from tapetui.core.errors import TapeError, TooDeep
from tapetui.core.paths import first_non_json, join

__all__ = ["Unrecordable", "Where", "form_at", "json_form", "json_key", "pydantic_model_class", "unwritable"]

# Where a value sits, for messages: the root's name ("result"), or (parent, dict key or list index). Built as
# tuples on the way down (cheaper than a string per level) and rendered only when something is wrong.
Where = str | tuple[Any, str | int]


class Unrecordable(TapeError, TypeError):
    """A value that has no JSON form and no codec: ``str(e)`` says where and what it is,
    e.g. ``result.items[2].when is a datetime, not a JSON value``. A :class:`TypeError` too, as it always was.

    Attributes:
        path: where the value sits (``result.items[2].when``).
        type_name: the name of its type.
    """

    def __init__(self, path: str, type_name: str, message: str = "") -> None:
        self.path = path
        self.type_name = type_name
        super().__init__(message or f"{path} is a {type_name}, not a JSON value")


# ---- the JSON form of a value with no codec --------------------------------------------------------


def json_form(value: Any, path: str = "result") -> Any:
    """The JSON form of a value that has no codec, exactly as a tape holds it.

    JSON values come back as they are: the very same object when nothing in it needs converting. A tuple
    becomes a list, a subclass of ``str``/``int``/``float``/``dict``/``list`` (a ``StrEnum``, an
    ``OrderedDict``) its plain type, a float that is not finite ``None`` (JSON has no NaN: the tape writes
    null), and a pydantic model its ``model_dump(mode="json")``.

    Raises:
        Unrecordable: anything else (a ``datetime``, a dataclass, a set, an object), naming the first path
            that holds it and its type.
        TooDeep: a value nested deeper than Python's recursion limit allows.
    """
    try:
        return form_at(value, path)
    except RecursionError:
        raise TooDeep(path) from None


def form_at(value: Any, where: Where) -> Any:
    """:func:`json_form` of a value that sits at ``where`` (a part of a bigger value: named in errors).

    Raises:
        Unrecordable: as :func:`json_form`; RecursionError: nested too deeply.
    """
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return value
    if t is dict:
        return _form_dict(value, where)
    if t is list:
        return _form_list(value, where)
    if t is float:
        return value if value - value == 0 else None  # inf - inf and nan - nan are nan
    return _form_other(value, where)


def _form_dict(d: dict[Any, Any], where: Where) -> dict[str, Any]:
    out = None
    for k, v in d.items():
        if type(k) is not str:
            return _rebuild_dict(d, where)
        tv = type(v)
        if tv is str or tv is int or tv is bool or v is None or (tv is float and v - v == 0):
            continue  # the common case, inline: no call per leaf
        if tv is dict:  # one frame per level, as redaction takes: a value ~900 levels deep is still recorded
            nv: Any = _form_dict(v, (where, k))
        elif tv is list:
            nv = _form_list(v, (where, k))
        else:
            nv = form_at(v, (where, k))
        if nv is not v:
            if out is None:
                out = dict(d)  # every key is a plain str: the copy's keys are final, values are replaced
            out[k] = nv
    return d if out is None else out


def _form_list(items: list[Any], where: Where) -> list[Any]:
    out = None
    for i, v in enumerate(items):
        tv = type(v)
        if tv is str or tv is int or tv is bool or v is None or (tv is float and v - v == 0):
            continue
        if tv is dict:
            nv: Any = _form_dict(v, (where, i))
        elif tv is list:
            nv = _form_list(v, (where, i))
        else:
            nv = form_at(v, (where, i))
        if nv is not v:
            if out is None:
                out = list(items)
            out[i] = nv
    return items if out is None else out


def _rebuild_dict(d: dict[Any, Any], where: Where) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if not isinstance(k, str):
            key = repr(k)
            key = key if len(key) <= 40 else key[:37] + "..."
            path = _render(where)
            raise Unrecordable(
                path, type(k).__name__, f"{path} has a key {key} that is a {type(k).__name__}, not a JSON key (text)"
            )
        out[str.__str__(k)] = form_at(v, (where, k))
    return out


def _form_other(value: Any, where: Where) -> Any:
    if isinstance(value, str):  # a StrEnum, a str subclass: the text itself, as the tape will hold it
        return str.__str__(value)
    if isinstance(value, int):  # an IntEnum, an int subclass (bool is final)
        return int.__int__(value)
    if isinstance(value, float):
        f = float.__float__(value)
        return f if f - f == 0 else None
    if isinstance(value, dict):
        return _rebuild_dict(value, where)
    if isinstance(value, (list, tuple)):
        return _form_list(list(value), where)
    model = pydantic_model_class()
    if model is not None and isinstance(value, model):
        instance: Any = value
        try:
            dumped = instance.model_dump(mode="json")
        except Exception as e:  # noqa: BLE001 - pydantic's own error for a field it cannot serialise
            raise unwritable(value, where, e) from None
        return form_at(dumped, where)
    raise Unrecordable(_render(where), type(value).__name__)


def pydantic_model_class() -> type | None:
    """pydantic's ``BaseModel`` when pydantic is loaded (a value cannot be a model otherwise): no import."""
    module = sys.modules.get("pydantic")
    model = getattr(module, "BaseModel", None) if module is not None else None
    return model if isinstance(model, type) else None


def _render(where: Where) -> str:
    parts: list[str | int] = []
    while isinstance(where, tuple):
        where, key = where
        parts.append(key if isinstance(key, int) else str(key))
    return join(reversed(parts), str(where))


def unwritable(value: Any, where: Where, error: BaseException) -> Unrecordable:
    """The Unrecordable for a value a codec could not write: the first path in it that has no JSON form."""
    path, name = _render(where), type(value).__name__
    try:
        found = first_non_json(value, path, leaf=_codec_leaf, text_keys=False, depth=200)
    except RecursionError:
        found = None
    if found is not None:
        return Unrecordable(found.path, "bytes" if isinstance(found.value, bytes) else type(found.value).__name__)
    return Unrecordable(path, name, f"{path} (a {name}) cannot be written as JSON: {type(error).__name__}: {error}")


_WRITABLE = (str, int, float, bool, types.NoneType, datetime, date, time, UUID, Decimal)


def _codec_leaf(value: Any) -> bool | Iterable[tuple[str | int | None, Any]]:
    """What a value that a codec (or pydantic's inference) could not write is, for :func:`first_non_json`: a
    value some codec writes (True), one none does (False), or its parts."""
    if isinstance(value, _WRITABLE):
        return True
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True
    if isinstance(value, enum.Enum):
        return ((None, value.value),)
    if isinstance(value, (set, frozenset)):
        return enumerate(value)
    if (model := pydantic_model_class()) is not None and isinstance(value, model):
        return vars(value).items()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    return False


def json_key(k: Any, where: Where) -> str:
    """A dict key as the JSON form writes it: a ``str`` (a subclass's text) as it is.

    Raises:
        Unrecordable: any other key, naming it and where its dict sits.
    """
    if isinstance(k, str):
        return str.__str__(k)
    return _rebuild_dict({k: None}, where).popitem()[0]  # raises the Unrecordable that names the key
