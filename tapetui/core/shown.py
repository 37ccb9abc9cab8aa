"""How comparison messages show what they name: a number, a value from a tape or a user's hook, an exception
a user's hook raised — short, and running as little of the user's code as can be.
"""

from __future__ import annotations

from typing import Any

__all__ = ["described", "shown_number", "shown_value"]


def shown_number(x: float) -> str:
    """A number as messages show it (``0.01``, ``1e+20``): at most ten significant digits."""
    return f"{x:.10g}"


def shown_value(value: Any) -> str:
    """``repr(value)``, cut to 60 characters (a ``repr`` that raises: the value's type named)."""
    try:
        text = repr(value)
    except Exception:
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


def described(e: BaseException) -> str:
    """``Name: message`` of an exception a user's function raised, never running a metaclass's code for the
    name; the name alone when its ``__str__`` fails."""
    try:
        name = str(type.__dict__["__name__"].__get__(type(e)))  # type's own: never a metaclass property's code
    except Exception:
        name = "an exception"
    try:
        return f"{name}: {e}"
    except Exception:  # an exception whose __str__ fails
        return name
