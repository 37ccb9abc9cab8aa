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

The pieces: the JSON form of a value with no codec (:mod:`tapetui.core.jsonform`), which declared types
need a codec (:mod:`tapetui.core.codectypes`), the standard library's codec (:mod:`tapetui.core.stdcodec`).
"""

from __future__ import annotations

from typing import Any

import orjson

from tapetui.core.codectypes import Decode, Encode, needs_codec
from tapetui.core.errors import TooDeep
from tapetui.core.jsonform import Unrecordable, Where, form_at, json_form, unwritable
from tapetui.core.stdcodec import stdlib_pair

__all__ = ["Codec", "CodecWarning", "Unrecordable", "codec_for", "json_form"]


class CodecWarning(UserWarning):
    """Replay could not rebuild a tool's declared return type from what the tape holds (a redacted field,
    a changed type): the JSON form was returned instead."""


class Codec:
    """Writes values of one declared type as JSON and reads them back as that type.

    Attributes:
        tp: the declared type.
    """

    __slots__ = ("_decode", "_encode", "tp")

    def __init__(self, tp: Any, encode: Encode, decode: Decode) -> None:
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
    if not needs_codec(tp):
        return None
    pydantic = _import_pydantic()
    codec = _pydantic_codec(pydantic, tp) if pydantic is not None else None
    if codec is not None:
        return codec
    pair = stdlib_pair(tp, {})  # also for what pydantic cannot build (a typing.TypedDict before Python 3.12)
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

    def encode(value: Any, where: Where) -> Any:
        try:
            # warnings=False: a value that does not have the declared type is written as what it is
            data = dump(value, mode="json", warnings=False)
        except Exception as e:  # noqa: BLE001 - pydantic's serialisation error, or a custom serializer's
            raise unwritable(value, where, e) from None
        return form_at(data, where)  # JSON has no NaN: what the tape will hold

    def decode(data: Any) -> Any:
        # JSON mode: the data came from JSON, so a strict model still takes an ISO string for a datetime
        return validate_json(orjson.dumps(data))

    return Codec(tp, encode, decode)
