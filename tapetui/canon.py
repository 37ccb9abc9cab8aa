"""Canonical form of tool arguments, and the call key derived from it."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import orjson

from tapetui.errors import TooDeep

__all__ = ["call_key", "canon", "canonical_json", "key_of_json"]


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
    if isinstance(value, dict):
        return {str(k): _canon(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0])) if v is not None}
    if isinstance(value, (list, tuple)):
        return [_canon(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_canon(v) for v in value), key=canonical_json)
    raise TypeError(f"{type(value).__name__} is not a JSON value")


def canonical_json(value: Any) -> bytes:
    """Compact JSON with sorted keys: the bytes that keys and fingerprints hash."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)


def call_key(tool: str, args: Any) -> str:
    """``"<tool>:" + sha256(canonical JSON of canon(redacted args))[:12]``.

    Arguments are redacted with the default rules first (idempotent, so keys of
    args that a tape already redacted with wider rules are unchanged).
    """
    from tapetui.redact import DEFAULT_REDACTOR

    return key_of_json(tool, canonical_json(canon(DEFAULT_REDACTOR.redact(args))))


def key_of_json(tool: str, args_json: bytes) -> str:
    """The call key of arguments already in canonical JSON: the one place the key's form is written."""
    return f"{tool}:{hashlib.sha256(args_json).hexdigest()[:12]}"
