"""Tapes written by hand for tests: a session line and call lines in the writer's own layout
(:func:`tapetui.core.tapefile.call_line`), with the fields every such tape fixes filled in.

``call_line(seq=1, tool="t", args=args, result=...)`` is the writer's ``call_line`` with its key
(``key_of(tool, args)``), fingerprint, timing and dates defaulted; any of them can be passed to override it
(``error=...``, ``fingerprint=...``, ``key=...``).
"""

from __future__ import annotations

from typing import Any

from tapetui.core import tapefile
from tapetui.core.keys import key_of
from tapetui.core.tapefile import dump_line

__all__ = ["CALL_FIELDS", "HEADER", "call_line", "session_line"]

HEADER = dump_line({"type": "session", "v": 1})
"""The shortest session line a tape starts with."""

CALL_FIELDS: dict[str, Any] = {
    "fingerprint": "0123456789abcdef",
    "side_effect": False,
    "ms": 1.0,
    "expires_at": None,
    "recorded_at": "2026-01-01T00:00:00Z",
}
"""What a hand-made call line holds unless told otherwise, besides its key."""


def session_line(**fields: Any) -> bytes:
    """A session line: ``{"type": "session", "v": 1}`` and ``fields`` (``labels=...``, ``created_at=...``)."""
    return dump_line({"type": "session", "v": 1, **fields})


def call_line(*, seq: int, tool: str, args: Any, result: Any = None, **fields: Any) -> bytes:
    """A call line as the writer writes it; its key is ``key_of(tool, args)`` and the rest :data:`CALL_FIELDS`,
    unless ``fields`` says otherwise."""
    given: dict[str, Any] = {"key": key_of(tool, args), **CALL_FIELDS, **fields}
    return tapefile.call_line(seq=seq, tool=tool, args=args, result=result, **given)


def refuse_listing(monkeypatch: Any, folder: str) -> None:
    """``os.scandir`` of any folder named ``folder`` fails as it does for a user without the right to list it (these
    tests may run as root, who may list anything)."""
    import os

    scandir = os.scandir

    def refused(path: Any = ".") -> Any:
        if os.fspath(path).rstrip("/").endswith("/" + folder):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refused)
