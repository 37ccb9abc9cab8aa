"""Values that are not plain JSON: what a tape holds for them, and how replay rebuilds them.

A tape holds JSON. A tool's result is either JSON already, or it has a **codec**, built from the tool's
declared return type (:func:`codec_for`), that writes it as JSON and reads it back as the same type: a
pydantic model, a dataclass, ``datetime``/``date``/``time``/``UUID``/``Decimal``, an ``Enum``, a tuple
(``NamedTuple`` too), a set, or a container of them (``list[...]``, ``dict[str, ...]``, ``tuple[...]``,
``X | None``...). A value with no codec goes on the tape as its JSON form (:func:`json_form`), which is
also what a recording hands back, so record and replay return the same thing.

Where pydantic is installed its ``TypeAdapter`` is the codec. It is not a dependency of tapetui: without
it a small codec of the standard library's types writes the same JSON (a tape recorded with pydantic
replays without it and the other way round); it rebuilds dataclasses, the types above and their
containers, ``X | None`` but no other union.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import sys
import types
import typing
from collections.abc import Callable
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

import orjson

from tapetui.core.errors import TooDeep

__all__ = ["Codec", "CodecWarning", "Unrecordable", "codec_for", "json_form"]

# Where a value sits, for messages: the root's name ("result"), or (parent, dict key or list index). Built as
# tuples on the way down (cheaper than a string per level) and rendered only when something is wrong.
_Where = str | tuple[Any, str | int]
_Encode = Callable[[Any, _Where], Any]
_Decode = Callable[[Any], Any]

_NONE = type(None)


class Unrecordable(TypeError):
    """A value that has no JSON form and no codec: ``str(e)`` says where and what it is,
    e.g. ``result.items[2].when is a datetime, not a JSON value``.

    Attributes:
        path: where the value sits (``result.items[2].when``).
        type_name: the name of its type.
    """

    def __init__(self, path: str, type_name: str, message: str = "") -> None:
        self.path = path
        self.type_name = type_name
        super().__init__(message or f"{path} is a {type_name}, not a JSON value")


class CodecWarning(UserWarning):
    """Replay could not rebuild a tool's declared return type from what the tape holds (a redacted field,
    a changed type): the JSON form was returned instead."""


class Codec:
    """Writes values of one declared type as JSON and reads them back as that type.

    Attributes:
        tp: the declared type.
    """

    __slots__ = ("_decode", "_encode", "tp")

    def __init__(self, tp: Any, encode: _Encode, decode: _Decode) -> None:
        self.tp = tp
        self._encode = encode
        self._decode = decode

    def __repr__(self) -> str:
        return f"Codec({self.tp!r})"

    def encode(self, value: Any, path: str = "result") -> Any:
        """The JSON form of ``value`` as a tape holds it (a value that does not have the declared type: its
        plain JSON form).

        Raises:
            Unrecordable: naming the first path that has no JSON form, and its type.
            TooDeep: a value nested deeper than Python's recursion limit allows.
        """
        try:
            return self._encode(value, path)
        except RecursionError:
            raise TooDeep(path) from None

    def decode(self, data: Any) -> Any:
        """The declared type rebuilt from its JSON form. Raises whatever the rebuild raises (a validation
        error, a ``TypeError``...): the caller falls back on ``data`` itself."""
        return self._decode(data)


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
        return _form(value, path)
    except RecursionError:
        raise TooDeep(path) from None


def _form(value: Any, where: _Where) -> Any:
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


def _form_dict(d: dict[Any, Any], where: _Where) -> dict[str, Any]:
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
            nv = _form(v, (where, k))
        if nv is not v:
            if out is None:
                out = dict(d)  # every key is a plain str: the copy's keys are final, values are replaced
            out[k] = nv
    return d if out is None else out


def _form_list(items: list[Any], where: _Where) -> list[Any]:
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
            nv = _form(v, (where, i))
        if nv is not v:
            if out is None:
                out = list(items)
            out[i] = nv
    return items if out is None else out


def _rebuild_dict(d: dict[Any, Any], where: _Where) -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        if not isinstance(k, str):
            key = repr(k)
            key = key if len(key) <= 40 else key[:37] + "..."
            path = _render(where)
            raise Unrecordable(
                path, type(k).__name__, f"{path} has a key {key} that is a {type(k).__name__}, not a JSON key (text)"
            )
        out[str.__str__(k)] = _form(v, (where, k))
    return out


def _form_other(value: Any, where: _Where) -> Any:
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
    model = _pydantic_model_class()
    if model is not None and isinstance(value, model):
        instance: Any = value
        try:
            dumped = instance.model_dump(mode="json")
        except Exception as e:  # noqa: BLE001 - pydantic's own error for a field it cannot serialise
            raise _located(value, where, e) from None
        return _form(dumped, where)
    raise Unrecordable(_render(where), type(value).__name__)


def _pydantic_model_class() -> type | None:
    """pydantic's ``BaseModel`` when pydantic is loaded (a value cannot be a model otherwise): no import."""
    module = sys.modules.get("pydantic")
    model = getattr(module, "BaseModel", None) if module is not None else None
    return model if isinstance(model, type) else None


def _render(where: _Where) -> str:
    parts = []
    while isinstance(where, tuple):
        where, key = where
        parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
    return str(where) + "".join(reversed(parts))


def _located(value: Any, where: _Where, error: BaseException) -> Unrecordable:
    """The Unrecordable for a value a codec could not write: the first path in it that has no JSON form."""
    try:
        found = _first_bad(value, where, 0)
    except RecursionError:
        found = None
    if found is not None:
        return Unrecordable(_render(found[0]), found[1])
    path, name = _render(where), type(value).__name__
    return Unrecordable(path, name, f"{path} (a {name}) cannot be written as JSON: {type(error).__name__}: {error}")


_WRITABLE = (str, int, float, bool, _NONE, datetime, date, time, UUID, Decimal)


def _first_bad(value: Any, where: _Where, depth: int) -> tuple[_Where, str] | None:
    """Where a value that a codec (or pydantic's inference) could not write holds something no codec knows."""
    if isinstance(value, _WRITABLE) or depth > 200:
        return None
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return where, "bytes"
        return None
    if isinstance(value, enum.Enum):
        return _first_bad(value.value, where, depth + 1)
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = enumerate(value)
    elif (model := _pydantic_model_class()) is not None and isinstance(value, model):
        items = vars(value).items()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        items = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    else:
        return where, type(value).__name__
    for k, v in items:
        found = _first_bad(v, (where, k if isinstance(k, int) else str(k)), depth + 1)
        if found is not None:
            return found
    return None


# ---- which declared types need a codec -------------------------------------------------------------

_JSON_TYPES = frozenset({str, int, float, bool, _NONE, dict, list, object})
_VALUE_TYPES = (datetime, date, time, UUID, Decimal, enum.Enum)  # rebuilt from a string (an Enum from its value)
_UNIONS = (typing.Union, types.UnionType)
# not Iterable: pydantic validates one into a lazy iterator, which is not what the tool returned
_SEQUENCES = frozenset({list, collections.abc.Sequence, collections.abc.MutableSequence})
_SETS = frozenset({set, frozenset, collections.abc.Set, collections.abc.MutableSet})
_MAPPINGS = frozenset({dict, collections.abc.Mapping, collections.abc.MutableMapping})


def _needs_codec(tp: Any, seen: frozenset[int] = frozenset()) -> bool:
    """Whether values of the declared type ``tp`` are not plain JSON but can be rebuilt from it."""
    if tp is None or tp is Any or _is_json_type(tp):
        return False
    if id(tp) in seen:  # a recursive dataclass or TypedDict: its other fields decide
        return False
    seen = seen | {id(tp)}
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _needs_codec(args[0], seen)
    supertype = getattr(tp, "__supertype__", None)  # typing.NewType
    if supertype is not None:
        return _needs_codec(supertype, seen)
    if origin is None:
        if not isinstance(tp, type):
            return False  # Any, a TypeVar, an unresolved annotation string: nothing to rebuild
        if issubclass(tp, (tuple, set, frozenset)) or issubclass(tp, _VALUE_TYPES) or dataclasses.is_dataclass(tp):
            return True
        model = _pydantic_model_class()
        if model is not None and issubclass(tp, model):
            return True
        if typing.is_typeddict(tp):
            hints = _hints(tp)
            return hints is not None and any(_needs_codec(h, seen) for h in hints.values())
        return False
    if origin in (tuple, set, frozenset) or origin in _SETS:
        return True
    if origin is typing.Literal:
        return any(isinstance(a, enum.Enum) for a in args)
    if origin in _MAPPINGS and args:
        return args[0] not in (str, Any) or _needs_codec(args[1], seen)
    if origin in _UNIONS or origin in _SEQUENCES or origin in _MAPPINGS:
        return any(_needs_codec(a, seen) for a in args)
    return False


def _is_json_type(tp: Any) -> bool:
    try:
        return tp in _JSON_TYPES
    except TypeError:  # unhashable (an Annotated with a dict in its metadata): not one of them
        return False


def _hints(tp: Any) -> dict[str, Any] | None:
    try:
        return typing.get_type_hints(tp, include_extras=True)
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: nothing to rebuild from
        return None


# ---- codec_for --------------------------------------------------------------------------------------

_CACHE: dict[Any, Codec | None] = {}
_CACHE_LIMIT = 4096  # types are few in any program; the bound only stops a generator of classes growing it


def codec_for(tp: Any) -> Codec | None:
    """The codec for values of the declared type ``tp``, or None when they need none.

    None for an undeclared type (``None``), ``Any``, a JSON type (``str``, ``int``, ``float``, ``bool``,
    ``dict``/``list`` of those...), and for a type nothing here can rebuild (an arbitrary class): such a
    value goes on the tape as its :func:`json_form`. Codecs are cached per type (an unhashable type, such as
    an ``Annotated`` with unhashable metadata, is built every time).
    """
    if tp is None or tp is Any:
        return None
    try:
        return _CACHE[tp]
    except KeyError:
        pass
    except TypeError:  # unhashable
        return _build(tp)
    codec = _build(tp)
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[tp] = codec
    return codec


def _build(tp: Any) -> Codec | None:
    if not _needs_codec(tp):
        return None
    pydantic = _import_pydantic()
    codec = _pydantic_codec(pydantic, tp) if pydantic is not None else None
    if codec is not None:
        return codec
    pair = _stdlib_pair(tp, {})  # also for what pydantic cannot build (a typing.TypedDict before Python 3.12)
    return Codec(tp, pair[0], pair[1]) if pair is not None else None


def _import_pydantic() -> Any:
    try:
        # deferred and optional: pydantic is not a dependency of tapetui, only used when the program has it
        import pydantic
    except ImportError:
        return None
    return pydantic


def _pydantic_codec(pydantic: Any, tp: Any) -> Codec | None:
    try:
        adapter = pydantic.TypeAdapter(tp)
    except Exception:  # noqa: BLE001 - a type pydantic cannot build a schema for: no codec
        return None
    dump, validate_json = adapter.dump_python, adapter.validate_json

    def encode(value: Any, where: _Where) -> Any:
        try:
            # warnings=False: a value that does not have the declared type is written as what it is
            data = dump(value, mode="json", warnings=False)
        except Exception as e:  # noqa: BLE001 - pydantic's serialisation error, or a custom serializer's
            raise _located(value, where, e) from None
        return _form(data, where)  # JSON has no NaN: what the tape will hold

    def decode(data: Any) -> Any:
        # JSON mode: the data came from JSON, so a strict model still takes an ISO string for a datetime
        return validate_json(orjson.dumps(data))

    return Codec(tp, encode, decode)


# ---- the standard library's codec (pydantic not installed) ----------------------------------------


def _same(data: Any) -> Any:
    return data


def _stdlib_pair(tp: Any, building: dict[int, list[Any]]) -> tuple[_Encode, _Decode] | None:
    """``(encode, decode)`` for ``tp`` without pydantic, writing what pydantic writes; None when unsupported.
    ``building`` holds the classes being built, so a recursive dataclass refers to itself lazily."""
    if not _needs_codec(tp):
        return _form, _same
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is typing.Annotated:
        return _stdlib_pair(args[0], building)
    supertype = getattr(tp, "__supertype__", None)
    if supertype is not None:
        return _stdlib_pair(supertype, building)
    if origin in _UNIONS:
        members = [a for a in args if a is not _NONE]
        inner = _stdlib_pair(members[0], building) if len(members) == 1 else None
        return _optional(*inner) if inner is not None else None
    if origin in _SEQUENCES or origin in _SETS or origin is tuple:
        return _collection(origin, args, building)
    if origin in _MAPPINGS:
        if args and args[0] not in (str, Any):
            return None
        item = _stdlib_pair(args[1], building) if args else (_form, _same)
        return _mapping(*item) if item is not None else None
    if origin is not None or not isinstance(tp, type):
        return None
    if id(tp) in building:  # recursive: refer to the codec being built, filled in when it is done
        cell = building[id(tp)]
        return (lambda v, w: cell[0](v, w)), (lambda d: cell[1](d))
    if issubclass(tp, _VALUE_TYPES):
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


def _value_pair(tp: type) -> tuple[_Encode, _Decode]:
    if issubclass(tp, enum.Enum):
        members: Any = tp

        def enc_enum(v: Any, w: _Where) -> Any:
            return _form(v.value if isinstance(v, members) else v, w)

        return enc_enum, lambda d: members(d)
    kind: Any = tp
    if issubclass(tp, (date, time)):
        to_text: Callable[[Any], str] = _iso
        parse: Callable[[str], Any] = kind.fromisoformat
    else:  # UUID, Decimal: their str() is their JSON form
        to_text, parse = str, kind

    def enc(v: Any, w: _Where) -> Any:
        return to_text(v) if isinstance(v, kind) else _form(v, w)

    def dec(d: Any) -> Any:
        if not isinstance(d, str):
            raise TypeError(f"{kind.__name__} from a {type(d).__name__}: expected a string")
        return parse(d)

    return enc, dec


def _optional(enc: _Encode, dec: _Decode) -> tuple[_Encode, _Decode]:
    return (lambda v, w: None if v is None else enc(v, w)), (lambda d: None if d is None else dec(d))


def _collection(origin: Any, args: tuple[Any, ...], building: dict[int, list[Any]]) -> tuple[_Encode, _Decode] | None:
    make: Callable[[list[Any]], Any] = list
    if _subclass(origin, tuple):
        make = tuple
    elif _subclass(origin, frozenset):
        make = frozenset
    elif origin in _SETS or _subclass(origin, set):
        make = set
    if origin is tuple and args and args[-1] is not Ellipsis:  # fixed length: one codec per place
        if args == ((),):
            args = ()
        pairs = [_stdlib_pair(a, building) for a in args]
        if any(p is None for p in pairs):
            return None
        encs = [p[0] for p in pairs if p is not None]
        decs = [p[1] for p in pairs if p is not None]

        def enc_fixed(v: Any, w: _Where) -> Any:
            if not isinstance(v, (tuple, list)) or len(v) != len(encs):
                return _form(v, w)
            return [e(x, (w, i)) for i, (e, x) in enumerate(zip(encs, v, strict=True))]

        def dec_fixed(d: Any) -> Any:
            if not isinstance(d, list) or len(d) != len(decs):
                raise ValueError(f"expected a list of {len(decs)} items")
            return tuple(f(x) for f, x in zip(decs, d, strict=True))

        return enc_fixed, dec_fixed
    item = _stdlib_pair(args[0], building) if args else (_form, _same)
    if item is None:
        return None
    enc_item, dec_item = item

    def enc(v: Any, w: _Where) -> Any:
        if not isinstance(v, (list, tuple, set, frozenset)):
            return _form(v, w)
        return [enc_item(x, (w, i)) for i, x in enumerate(v)]

    def dec(d: Any) -> Any:
        if not isinstance(d, list):
            raise TypeError(f"expected a list, got a {type(d).__name__}")
        return make([dec_item(x) for x in d])

    return enc, dec


def _subclass(origin: Any, base: type) -> bool:
    return isinstance(origin, type) and issubclass(origin, base)


def _mapping(enc_item: _Encode, dec_item: _Decode) -> tuple[_Encode, _Decode]:
    def enc(v: Any, w: _Where) -> Any:
        if not isinstance(v, dict):
            return _form(v, w)
        return {_key(k, w): enc_item(x, (w, k)) for k, x in v.items()}

    def dec(d: Any) -> Any:
        if not isinstance(d, dict):
            raise TypeError(f"expected an object, got a {type(d).__name__}")
        return {k: dec_item(x) for k, x in d.items()}

    return enc, dec


def _key(k: Any, w: _Where) -> str:
    if isinstance(k, str):
        return str.__str__(k)
    return _rebuild_dict({k: None}, w).popitem()[0]  # raises the Unrecordable that names the key


def _fields_pairs(
    hints: dict[str, Any], names: list[str], building: dict[int, list[Any]]
) -> dict[str, tuple[_Encode, _Decode]] | None:
    pairs = {}
    for name in names:
        pair = _stdlib_pair(hints.get(name, Any), building)
        if pair is None:
            return None
        pairs[name] = pair
    return pairs


def _dataclass(tp: type, building: dict[int, list[Any]]) -> tuple[_Encode, _Decode] | None:
    hints = _hints(tp)
    if hints is None:
        return None
    fields = dataclasses.fields(tp)
    pairs = _fields_pairs(hints, [f.name for f in fields], building)
    if pairs is None:
        return None
    init = {f.name for f in fields if f.init}
    cls: Any = tp

    def enc(v: Any, w: _Where) -> Any:
        if not isinstance(v, cls):
            return _form(v, w)
        return {name: e(getattr(v, name), (w, name)) for name, (e, _d) in pairs.items()}

    def dec(d: Any) -> Any:
        if not isinstance(d, dict):
            raise TypeError(f"{cls.__name__} from a {type(d).__name__}: expected an object")
        return cls(**{name: pairs[name][1](d[name]) for name in pairs if name in init and name in d})

    return enc, dec


def _named_tuple(tp: type, building: dict[int, list[Any]]) -> tuple[_Encode, _Decode] | None:
    names = list(getattr(tp, "_fields", ()))
    pairs = _fields_pairs(_hints(tp) or {}, names, building)
    if pairs is None:
        return None
    cls: Any = tp
    encs = [pairs[n][0] for n in names]
    decs = [pairs[n][1] for n in names]

    def enc(v: Any, w: _Where) -> Any:
        if not isinstance(v, tuple) or len(v) != len(encs):
            return _form(v, w)
        return [e(x, (w, i)) for i, (e, x) in enumerate(zip(encs, v, strict=True))]

    def dec(d: Any) -> Any:
        if not isinstance(d, list):
            raise TypeError(f"{cls.__name__} from a {type(d).__name__}: expected a list")
        return cls(*(f(x) for f, x in zip(decs, d, strict=False)))

    return enc, dec


def _typed_dict(tp: type, building: dict[int, list[Any]]) -> tuple[_Encode, _Decode] | None:
    hints = _hints(tp)
    if hints is None:
        return None
    pairs = _fields_pairs(hints, list(hints), building)
    if pairs is None:
        return None

    def enc(v: Any, w: _Where) -> Any:
        if not isinstance(v, dict):
            return _form(v, w)
        return {_key(k, w): (pairs[k][0] if k in pairs else _form)(x, (w, k)) for k, x in v.items()}

    def dec(d: Any) -> Any:
        if not isinstance(d, dict):
            raise TypeError(f"expected an object, got a {type(d).__name__}")
        return {k: pairs[k][1](x) if k in pairs else x for k, x in d.items()}

    return enc, dec
