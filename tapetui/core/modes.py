"""A tape's modes: ``record``, ``replay``, ``fill`` (``docs/format.md``, "Modes")."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["MODES", "Mode"]


class Mode(StrEnum):
    """A tape's mode; each equals its string (``Mode.REPLAY == "replay"``), and a tape takes either."""

    RECORD = "record"  # run every call live, write a fresh tape (a candidate when a golden exists)
    REPLAY = "replay"  # recorded outcomes only: never runs a tool
    FILL = "fill"  # replay, and run only what is missing live, into a candidate


MODES = tuple(m.value for m in Mode)
