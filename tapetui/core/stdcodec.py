"""The standard library's codec, used where pydantic is not installed (and for what pydantic cannot build):
per type family — ``datetime``/``date``/``time``/``UUID``/``Decimal`` and ``Enum`` values, ``X | None``,
lists, tuples and sets, ``dict[str, ...]``, dataclasses, ``NamedTuple`` and ``TypedDict`` — writing the
JSON pydantic writes, so a tape recorded with either replays with the other.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from datetime import date, time
from typing import Any

from tapetui.core.codectypes import (
    MAPPINGS,
    SEQUENCES,
    SETS,
    UNIONS,
    VALUE_TYPES,
    Decode,
    Encode,
    needs_codec,
    type_hints,
)
from tapetui.core.jsonform import Where, form_at, json_key

__all__ = ["stdlib_pair"]


def _same(data: Any) -> Any:
    return data


def stdlib_pair(tp: Any, building: dict[int, list[Any]]) -> tuple[Encode, Decode] | None:
    """``(encode, decode)`` for ``tp`` without pydantic, writing what pydantic writes; None when unsupported.
    ``building`` holds the classes being built, so a recursive dataclass refers to itself lazily."""
    if not needs_codec(tp):
        return form_at, _same
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return stdlib_pair(args[0], building)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return stdlib_pair(supertype, building)
    if origin in UNIONS:
        members = [a for a in args if a is not types.NoneType]
        inner = stdlib_pair(members[0], building) if len(members) == 1 else None
        return _optional(*inner) if inner is not None else None
    if origin in SEQUENCES or origin in SETS or origin is tuple:
        return _collection(origin, args, building)
    if origin in MAPPINGS:
        if args and args[0] not in (str, Any):
            return None
        item = stdlib_pair(args[1], building) if args else (form_at, _same)
        return _mapping(*item) if item is not None else None
    if origin is not None or not isinstance(tp, type):
        return None
    if id(tp) in building:  # recursive: refer to the codec being built, filled in when it is done
        cell = building[id(tp)]
        return (lambda v, w: cell[0](v, w)), (lambda d: cell[1](d))
    if issubclass(tp, VALUE_TYPES):
        return _value_pair(tp)
    building[id(tp)] = cell = [None, None]
    try:
        if issubclass(tp, tuple) and hasattr(tp, "_fields"):
            pair = _named_tuple(tp, building)
        elif issubclass(tp, (tuple, set, frozenset)):
            pair = _collection(tp, (), building)
        elif dataclasses.is_dataclass(tp):
            pair = _dataclass(tp, building)
        elif typing.is_typeddict(tp):
            pair = _typed_dict(tp, building)
        else:
            pair = None
    finally:
        del building[id(tp)]
    if pair is not None:
        cell[:] = pair
    return pair


def _iso(value: date | time) -> str:
    text = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text  # as pydantic writes UTC


def _value_pair(tp: type) -> tuple[Encode, Decode]:
    if issubclass(tp, enum.Enum):
        members: Any = tp

        def enc_enum(v: Any, w: Where) -> Any:
            return form_at(v.value if isinstance(v, members) else v, w)

        return enc_enum, lambda d: members(d)
    kind: Any = tp
    if issubclass(tp, (date, time)):
        to_text: Callable[[Any], str] = _iso
        parse: Callable[[str], Any] = kind.fromisoformat
    else:  # UUID, Decimal: their str() is their JSON form
        to_text, parse = str, kind

    def enc(v: Any, w: Where) -> Any:
        return to_text(v) if isinstance(v, kind) else form_at(v, w)

    def dec(d: Any) -> Any:
        if not isinstance(d, str):
            raise TypeError(f"{kind.__name__} from a {type(d).__name__}: expected a string")
        return parse(d)

    return enc, dec


def _optional(enc: Encode, dec: Decode) -> tuple[Encode, Decode]:
    return (lambda v, w: None if v is None else enc(v, w)), (lambda d: None if d is None else dec(d))


def _collection(origin: Any, args: tuple[Any, ...], building: dict[int, list[Any]]) -> tuple[Encode, Decode] | None:
    make: Callable[[list[Any]], Any] = list
    if _subclass(origin, tuple):
        make = tuple
    elif _subclass(origin, frozenset):
        make = frozenset
    elif origin in SETS or _subclass(origin, set):
        make = set
    if origin is tuple and args and args[-1] is not Ellipsis:  # fixed length: one codec per place
        if args == ((),):
            args = ()
        pairs = [stdlib_pair(a, building) for a in args]
        if any(p is None for p in pairs):
            return None
        encs = [p[0] for p in pairs if p is not None]
        decs = [p[1] for p in pairs if p is not None]

        def enc_fixed(v: Any, w: Where) -> Any:
            if not isinstance(v, (tuple, list)) or len(v) != len(encs):
                return form_at(v, w)
            return [e(x, (w, i)) for i, (e, x) in enumerate(zip(encs, v, strict=True))]

        def dec_fixed(d: Any) -> Any:
            if not isinstance(d, list) or len(d) != len(decs):
                raise ValueError(f"expected a list of {len(decs)} items")
            return tuple(f(x) for f, x in zip(decs, d, strict=True))

        return enc_fixed, dec_fixed
    item = stdlib_pair(args[0], building) if args else (form_at, _same)
    if item is None:
        return None
    enc_item, dec_item = item

    def enc(v: Any, w: Where) -> Any:
        if not isinstance(v, (list, tuple, set, frozenset)):
            return form_at(v, w)
        return [enc_item(x, (w, i)) for i, x in enumerate(v)]

    def dec(d: Any) -> Any:
        if not isinstance(d, list):
            raise TypeError(f"expected a list, got a {type(d).__name__}")
        return make([dec_item(x) for x in d])

    return enc, dec


def _subclass(origin: Any, base: type) -> bool:
    return isinstance(origin, type) and issubclass(origin, base)


def _mapping(enc_item: Encode, dec_item: Decode) -> tuple[Encode, Decode]:
    def enc(v: Any, w: Where) -> Any:
        if not isinstance(v, dict):
            return form_at(v, w)
        return {json_key(k, w): enc_item(x, (w, k)) for k, x in v.items()}

    def dec(d: Any) -> Any:
        if not isinstance(d, dict):
            raise TypeError(f"expected an object, got a {type(d).__name__}")
        return {k: dec_item(x) for k, x in d.items()}

    return enc, dec


def _fields_pairs(
    hints: dict[str, Any], names: list[str], building: dict[int, list[Any]]
) -> dict[str, tuple[Encode, Decode]] | None:
    pairs = {}
    for name in names:
        pair = stdlib_pair(hints.get(name, Any), building)
        if pair is None:
            return None
        pairs[name] = pair
    return pairs


def _dataclass(tp: type, building: dict[int, list[Any]]) -> tuple[Encode, Decode] | None:
    hints = type_hints(tp)
    if hints is None:
        return None
    fields = dataclasses.fields(tp)
    pairs = _fields_pairs(hints, [f.name for f in fields], building)
    if pairs is None:
        return None
    init = {f.name for f in fields if f.init}
    cls: Any = tp

    def enc(v: Any, w: Where) -> Any:
        if not isinstance(v, cls):
            return form_at(v, w)
        return {name: e(getattr(v, name), (w, name)) for name, (e, _d) in pairs.items()}

    def dec(d: Any) -> Any:
        if not isinstance(d, dict):
            raise TypeError(f"{cls.__name__} from a {type(d).__name__}: expected an object")
        return cls(**{name: pairs[name][1](d[name]) for name in pairs if name in init and name in d})

    return enc, dec


def _named_tuple(tp: type, building: dict[int, list[Any]]) -> tuple[Encode, Decode] | None:
    names = list(getattr(tp, "_fields", ()))
    pairs = _fields_pairs(type_hints(tp) or {}, names, building)
    if pairs is None:
        return None
    cls: Any = tp
    encs = [pairs[n][0] for n in names]
    decs = [pairs[n][1] for n in names]

    def enc(v: Any, w: Where) -> Any:
        if not isinstance(v, tuple) or len(v) != len(encs):
            return form_at(v, w)
        return [e(x, (w, i)) for i, (e, x) in enumerate(zip(encs, v, strict=True))]

    def dec(d: Any) -> Any:
        if not isinstance(d, list):
            raise TypeError(f"{cls.__name__} from a {type(d).__name__}: expected a list")
        return cls(*(f(x) for f, x in zip(decs, d, strict=False)))

    return enc, dec


def _typed_dict(tp: type, building: dict[int, list[Any]]) -> tuple[Encode, Decode] | None:
    hints = type_hints(tp)
    if hints is None:
        return None
    pairs = _fields_pairs(hints, list(hints), building)
    if pairs is None:
        return None

    def enc(v: Any, w: Where) -> Any:
        if not isinstance(v, dict):
            return form_at(v, w)
        return {json_key(k, w): (pairs[k][0] if k in pairs else form_at)(x, (w, k)) for k, x in v.items()}

    def dec(d: Any) -> Any:
        if not isinstance(d, dict):
            raise TypeError(f"expected an object, got a {type(d).__name__}")
        return {k: pairs[k][1](x) if k in pairs else x for k, x in d.items()}

    return enc, dec
