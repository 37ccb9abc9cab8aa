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
    """New run-log events of one session, read incrementally."""

    golden: Path
    events: list[dict[str, Any]]
    reset: bool
    appended_at: float  # monotonic time the batch was read (for latency figures)


@dataclass
class SummariesReady(Message):
    """Session summaries (RunSummary, candidate pending) computed in a worker, in a batch."""

    summaries: dict[Path, Any]
