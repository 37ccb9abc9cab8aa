"""JSON paths: how a place in a value is written (``args.query``, ``result.items[2]``, ``result["my key"]``),
read back, and found.

One vocabulary for every message, diff and rule: a path printed by :func:`join` is read back by :func:`split`
to the same segments, and a ``[compare.rules]`` or ``[diff] ignore`` pattern is written the same way
(see ``docs/format.md``). A key that is an identifier follows a dot, a list index is in brackets, and any
other key is quoted in brackets as a JSON string (dots and all: one segment).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

import orjson

__all__ = ["JsonPath", "NonJson", "first_non_json", "join", "json_leaf", "prefixed", "split"]

JsonPath = tuple[str | int, ...]
"""A JSON path as its segments: ``("items", 0, "id")``."""

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def join(parts: Iterable[str | int], prefix: str = "") -> str:
    """``["opts", "a", 2]`` → ``opts.a[2]``; keys that are not identifiers are quoted: ``["my key"]``.

    Args:
        prefix: a printed path the segments are below (``result`` + ``["a", 0]`` → ``result.a[0]``).
    """
    out = prefix
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif _IDENT.match(p):
            out += f".{p}" if out else p
        else:
            out += f"[{orjson.dumps(p).decode()}]"
    return out


def prefixed(prefix: str, path: str) -> str:
    """A printed path below another: ``result`` + ``price`` → ``result.price``; ``args`` + ``[0]`` →
    ``args[0]``; either one empty: the other."""
    if not prefix:
        return path
    return prefix + ("" if not path or path.startswith("[") else ".") + path


_TOKEN = re.compile(r'\["((?:[^"\\]|\\.)*)"\]|\[([^\]"]*)\]|([^.\[\]"]+)|(\.)')
_GLOB = re.compile(r"([*?\[])")


def split(path: str, *, glob: bool = False) -> tuple[str, ...]:
    """A printed path (``args["a.b"][0]``, as :func:`join` writes it) back into its segments
    (``("args", "a.b", "0")``; an index as its digits).

    Args:
        glob: ``path`` is a pattern (fnmatch segments): a quoted key's ``*`` ``?`` ``[`` are escaped so that
            they match only themselves. Without it a quoted key is returned as it is.

    Raises:
        ValueError: a character out of place (an unclosed bracket or quote), or an empty segment.
    """
    segs: list[str] = []
    pos, dot = 0, True  # dot: a segment may start here (at the start, or after a dot)
    while pos < len(path):
        m = _TOKEN.match(path, pos)
        if m is None:
            raise ValueError(f"cannot read the path from {path[pos : pos + 12]!r} on")
        quoted, bracket, plain, sep = m.groups()
        if sep is not None:
            if dot:
                raise ValueError("an empty segment")
            dot = True
        elif plain is not None:
            if not dot:
                raise ValueError(f"a dot is missing before {plain!r}")
            segs.append(plain)
            dot = False
        elif quoted is not None:
            key = orjson.loads(f'"{quoted}"')  # a bad escape: orjson.JSONDecodeError, a ValueError
            # a quoted key is that key, never a glob: in a pattern its * ? [ are escaped for fnmatch
            segs.append(_GLOB.sub(r"[\1]", key) if glob else key)
            dot = False
        else:
            segs.append(bracket)
            dot = False
        pos = m.end()
    if dot and segs:
        raise ValueError("an empty segment at the end")
    return tuple(segs)


# ---- the first place in a value that is not JSON -------------------------------------------------


class NonJson(NamedTuple):
    """A place in a value that is not JSON (:func:`first_non_json`).

    Attributes:
        path: where, as :func:`join` writes it (``result.items[2].when``).
        value: what is there; with ``key``, the key itself.
        key: ``value`` is a key of the object at ``path`` that is not text.
    """

    path: str
    value: Any
    key: bool = False


Leaf = Callable[[Any], bool | Iterable[tuple[str | int | None, Any]]]
"""What :func:`first_non_json` makes of a value that is not a dict, list or tuple: True (it is JSON), False (it
is not), or its parts as ``(segment, value)`` pairs, walked as an object's are (a None segment: the same place,
as an ``Enum``'s value)."""


def json_leaf(value: Any) -> bool:
    """Whether a value that is not a container is a JSON value: text, a number, a bool or None."""
    return isinstance(value, (str, int, float, bool)) or value is None


def first_non_json(
    value: Any, at: str = "result", *, leaf: Leaf = json_leaf, text_keys: bool = True, depth: int | None = None
) -> NonJson | None:
    """The first place in ``value``, in order (an object's keys, a list's items), that is not JSON; None when
    there is none.

    Args:
        at: the printed path of ``value`` itself.
        leaf: what a value other than a dict, list or tuple is (see :data:`Leaf`).
        text_keys: a key that is not text is not JSON; without it a key is a segment (an ``int`` as an index,
            anything else as its ``str``).
        depth: how many levels below ``value`` are looked at; what is deeper is taken as JSON.

    Raises:
        RecursionError: ``value`` is nested deeper than Python's recursion limit allows (or, with no
            ``depth``, holds itself).
    """
    return _first(value, at, leaf, text_keys, depth, 0)


def _first(value: Any, at: str, leaf: Leaf, text_keys: bool, limit: int | None, depth: int) -> NonJson | None:
    if limit is not None and depth > limit:
        return None
    parts: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        parts = value.items()
    elif isinstance(value, (list, tuple)):
        parts = enumerate(value)
    else:
        verdict = leaf(value)
        if isinstance(verdict, bool):
            return None if verdict else NonJson(at, value)
        parts = verdict
    is_object = isinstance(value, dict)
    for k, v in parts:
        if is_object and not isinstance(k, str):
            if text_keys:
                return NonJson(at, k, key=True)
            k = k if isinstance(k, int) else str(k)
        found = _first(v, at if k is None else join((k,), at), leaf, text_keys, limit, depth + 1)
        if found is not None:
            return found
    return None
