"""The errors every other error of tapetui is made of: :class:`TapeError`, :class:`InvalidValue`, :class:`TooDeep`.

A leaf module (it imports only :mod:`tapetui.core.textsafe`), so that the modules below the messages of
:mod:`tapetui.core.errors` — canonical JSON, redaction — raise them without importing what shows a change.
Import them from :mod:`tapetui.core.errors`, their public home (``__module__`` says so).
"""

from __future__ import annotations

from typing import Any

from tapetui.core.textsafe import safe_text

__all__ = ["InvalidValue", "TapeError", "TooDeep"]


class TapeError(Exception):
    """Base class of every tapetui error: bad tapes, bad config, failed replays.

    Its text is safe on a terminal: control, C1 and bidi characters in the message (a tool
    name, an argument, a path or a recorded message from a tape) are written as visible
    escapes (``\\x1b``), so printing the error cannot clear a screen, retitle a terminal or
    write its clipboard. The attributes of subclasses keep the values as they are.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*(safe_text(a) if isinstance(a, str) else a for a in args))


class InvalidValue(TapeError, TypeError, ValueError):
    """A public call was given a value it does not take: a mode that does not exist, a value that is not JSON,
    a generator function to ``@use_tape``. A ``TypeError`` and a ``ValueError`` too, as these errors were."""


class TooDeep(TapeError):
    """A value nested more deeply than Python can walk (about 900 levels): refused, not crashed on."""

    def __init__(self, what: str = "value") -> None:
        super().__init__(f"{what} is nested too deeply (more than Python's ~900 levels)")


for _cls in (TapeError, InvalidValue, TooDeep):
    _cls.__module__ = "tapetui.core.errors"  # their public home: tracebacks, pickles and docs name it
