"""Which declared return types need a codec (:func:`needs_codec`): those whose values are not plain JSON but
can be rebuilt from it; the type families the codecs tell apart, and the shape of a codec's two functions.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from tapetui.core.jsonform import Where, pydantic_model_class

__all__ = [
    "MAPPINGS",
    "SEQUENCES",
    "SETS",
    "UNIONS",
    "VALUE_TYPES",
    "Decode",
    "Encode",
    "needs_codec",
    "type_hints",
]

Encode = Callable[[Any, Where], Any]
"""A codec's writer: a value, and where it sits (named in errors), to its JSON form."""
Decode = Callable[[Any], Any]
"""A codec's reader: a JSON form to the declared type (raising what the rebuild raises)."""

_JSON_TYPES = frozenset({str, int, float, bool, types.NoneType, dict, list, object})
VALUE_TYPES = (datetime, date, time, UUID, Decimal, enum.Enum)  # rebuilt from a string (an Enum from its value)
UNIONS = (typing.Union, types.UnionType)
# not Iterable: pydantic validates one into a lazy iterator, which is not what the tool returned
SEQUENCES = frozenset({list, collections.abc.Sequence, collections.abc.MutableSequence})
SETS = frozenset({set, frozenset, collections.abc.Set, collections.abc.MutableSet})
MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})


def needs_codec(tp: Any, seen: frozenset[int] = frozenset()) -> bool:
    """Whether values of the declared type ``tp`` are not plain JSON but can be rebuilt from it."""
    if tp is None or tp is Any or _is_json_type(tp):
        return False
    if id(tp) in seen:  # a recursive dataclass or TypedDict: its other fields decide
        return False
    seen = seen | {id(tp)}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return needs_codec(args[0], seen)
    supertype = getattr(tp, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return needs_codec(supertype, seen)
    if origin is None:
        if not isinstance(tp, type):
            return False  # Any, a TypeVar, an unresolved annotation string: nothing to rebuild
        if issubclass(tp, (tuple, set, frozenset)) or issubclass(tp, VALUE_TYPES) or dataclasses.is_dataclass(tp):
            return True
        model = pydantic_model_class()
        if model is not None and issubclass(tp, model):
            return True
        if typing.is_typeddict(tp):
            hints = type_hints(tp)
            return hints is not None and any(needs_codec(h, seen) for h in hints.values())
        return False
    if origin in (tuple, set, frozenset) or origin in SETS:
        return True
    if origin is typing.Literal:
        return any(isinstance(a, enum.Enum) for a in args)
    if origin in MAPPINGS and args:
        return args[0] not in (str, Any) or needs_codec(args[1], seen)
    if origin in UNIONS or origin in SEQUENCES or origin in MAPPINGS:
        return any(needs_codec(a, seen) for a in args)
    return False


def _is_json_type(tp: Any) -> bool:
    try:
        return tp in _JSON_TYPES
    except TypeError:  # unhashable (an Annotated with a dict in its metadata): not one of them
        return False


def type_hints(tp: Any) -> dict[str, Any] | None:
    try:
        return typing.get_type_hints(tp, include_extras=True)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: nothing to rebuild from
        return None
