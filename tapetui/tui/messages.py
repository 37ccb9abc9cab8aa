"""App-wide messages."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.message import Message


@dataclass
class FilesChanged(Message):
    """The watcher saw files change under the tapes folder (one batch)."""

    paths: frozenset[Path]


@dataclass
class RunEvents(Message):
    """New run-log events, read incrementally: per session (golden, events, whether the log restarted).

    One message per watcher batch, however many sessions it touched, so a burst of runs costs one
    screen update instead of one per session.
    """

    updates: list[tuple[Path, list[dict[str, Any]], bool]]


@dataclass
class SummariesReady(Message):
    """Session summaries (RunSummary, candidate pending) computed in a worker, in a batch."""

    summaries: dict[Path, Any]


@dataclass
class ConfigFileChanged(Message):
    """The project's tapes.toml changed on disk (seen by the watcher: its size, time or inode moved)."""

    path: Path
