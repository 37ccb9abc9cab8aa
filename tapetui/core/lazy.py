"""Names a package exports, imported on first use (PEP 562): ``import tapetui`` costs nothing until a name is used.

A package sets ``__getattr__, __dir__ = lazy_names(__name__, globals(), WHERE, __all__)`` with ``WHERE`` mapping
each name to the module that defines it (and imports the same names under ``TYPE_CHECKING`` for type checkers).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    package: str, namespace: dict[str, Any], where: Mapping[str, str], exported: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package whose names ``where`` says the modules of."""

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # the next lookup is a plain one
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *exported})

    return __getattr__, __dir__
