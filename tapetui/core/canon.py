"""Canonical form of tool arguments, and the call key derived from it."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import orjson

from tapetui.core.errorbase import InvalidValue, TooDeep

__all__ = ["canon", "canonical_json", "dumps"]


def canon(value: Any) -> Any:
    """Return the stable normal form of a JSON-like value.

    Dict keys are sorted, strings stripped of surrounding (Unicode) whitespace,
    ``None`` values dropped from dicts, floats rounded to 6 places. ``3`` and
    ``"3"``, ``True`` and ``1`` stay distinct.

    Raises:
        TypeError: a value that has no JSON form (a set of mixed types, an object).
        TooDeep: a value nested deeper than Python's recursion limit allows.
    """
    try:
        return _canon(value)
    except RecursionError:
        raise TooDeep("value") from None


def _canon(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip()
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return round(value, 6) if math.isfinite(value) else value
    # loops, not comprehensions: one frame a level, as the recorder's one-pass form (Redactor.canon_form) takes, so
    # whatever depth a recording keys, check keys again
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in sorted(value.items(), key=lambda kv: str(kv[0])):
            if v is not None:
                out[str(k)] = _canon(v)
        return out
    if isinstance(value, (list, tuple)):
        items = []
        for v in value:
            items.append(_canon(v))
        return items
    if isinstance(value, (set, frozenset)):
        return sorted((_canon(v) for v in value), key=canonical_json)
    raise InvalidValue(f"{type(value).__name__} is not a JSON value")


def canonical_json(value: Any) -> bytes:
    """Compact JSON with sorted keys: the bytes that keys and fingerprints hash."""
    return dumps(value, sort_keys=True)


def dumps(
    value: Any, *, sort_keys: bool = False, newline: bool = False, default: Callable[[Any], Any] | None = None
) -> bytes:
    """Compact UTF-8 JSON: what every tape, run log and key is written with.

    orjson, except for a value nested deeper than the 254 levels orjson serialises: the standard
    library's encoder then writes the same compact form (it goes as deep as the recursion limit,
    where canon and redaction stop anyway), instead of the value being refused as "not JSON".

    Raises:
        TypeError: a value that has no JSON form.
        TooDeep: nested deeper than Python's recursion limit allows.
    """
    option = (orjson.OPT_SORT_KEYS if sort_keys else 0) | (orjson.OPT_APPEND_NEWLINE if newline else 0)
    try:
        return orjson.dumps(value, option=option, default=default)
    except TypeError as e:
        if "Recursion limit" not in str(e):
            raise
    try:
        out = _dumps_deep(value, sort_keys, default)
    except RecursionError:
        raise TooDeep("value") from None
    return out + b"\n" if newline else out


def _dumps_deep(value: Any, sort_keys: bool, default: Callable[[Any], Any] | None) -> bytes:
    """A record one member at a time: orjson for each (it writes a pre-encoded ``orjson.Fragment``, such as
    a call line's arguments, which nothing else can read), the standard library for the one too deep."""
    if not isinstance(value, dict):
        return _stdlib(value, sort_keys, default)
    parts = []
    for k, v in sorted(value.items()) if sort_keys else value.items():
        try:
            enc = orjson.dumps(v, option=orjson.OPT_SORT_KEYS if sort_keys else 0, default=default)
        except TypeError as e:
            if "Recursion limit" not in str(e):
                raise
            enc = _stdlib(v, sort_keys, default)
        parts.append(_stdlib(str(k), False, None) + b":" + enc)
    return b"{" + b",".join(parts) + b"}"


def _stdlib(value: Any, sort_keys: bool, default: Callable[[Any], Any] | None) -> bytes:
    try:
        return json.dumps(
            value, sort_keys=sort_keys, separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=default
        ).encode()
    except ValueError as e:  # NaN or infinity (orjson would have written null): refused, not written as invalid JSON
        raise InvalidValue(str(e)) from None
