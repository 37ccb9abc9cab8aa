"""Escapes a secret may hide behind in text: percent escapes (``sk%2Dproj…`` in a URL) and JSON's ``\\uXXXX`` (in
JSON text held inside a string), decoded for :mod:`tapetui.core.redact` to look through."""

from __future__ import annotations

import re

__all__ = ["ESCAPE_LEVELS", "plain", "unescaped"]

_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2})+")
_UNICODE_ESCAPE = re.compile(r"\\u([0-9A-Fa-f]{4})")
ESCAPE_LEVELS = 4  # escapes of escapes decoded this many times over, at most


def plain(text: str) -> str:
    """``text`` with its escapes decoded to the end (``%252D`` is ``-``, :data:`ESCAPE_LEVELS` over at most): what
    a redaction of it returns then has no secret left for a second redaction to find. ``text`` itself (the same
    object) when it holds no escape: the common case costs two substring tests."""
    if "%" not in text and "\\u" not in text:
        return text
    for _ in range(ESCAPE_LEVELS):
        again = unescaped(text)
        if again == text:
            break
        text = again
    return text


def unescaped(text: str) -> str:
    """``text`` with its percent escapes (as UTF-8, a byte that is not left as it was) and its JSON ``\\uXXXX``
    escapes (but surrogates, which are no characters alone) decoded once."""

    def percent(m: re.Match[str]) -> str:
        try:
            return bytes.fromhex(m.group(0).replace("%", "")).decode("utf-8")
        except UnicodeDecodeError:  # not UTF-8 text: left as written
            return m.group(0)

    def unicode(m: re.Match[str]) -> str:
        c = int(m.group(1), 16)
        return m.group(0) if 0xD800 <= c <= 0xDFFF else chr(c)

    return _UNICODE_ESCAPE.sub(unicode, _PERCENT.sub(percent, text))
