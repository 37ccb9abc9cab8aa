"""What the command line prints: escaped text with colour on a terminal, JSON, a progress bar, plurals."""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from tapetui.core.changes import json_text, shown_doc
from tapetui.core.textsafe import inert_commands, inert_json_commands, safe_json_text, safe_text

__all__ = ["Out", "ProgressBar", "plural", "print_json"]


class Out:
    """Human output: escaped text, colour only on a terminal without NO_COLOR."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.color = stream.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"

    def line(self, text: str = "", style: str | None = None) -> None:
        # escaped, and no line a CI runner reads as a workflow command (a session named "::error …::"); what a tape
        # holds is redacted as it is shown already (tapetui.core.changes)
        text = inert_commands(safe_text(text, newlines=False))
        if self.color and style:
            code = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "dim": "2", "cyan": "36"}[style]
            text = f"\x1b[{code}m{text}\x1b[0m"
        self.stream.write(text + "\n")


def print_json(obj: Any) -> None:
    """``--json``: indented; a tape's value nested past what JSON text shows is cut there (``"…(deeper)"``)."""
    # values from tapes redacted, names kept (tapetui.core.changes.shown_doc)
    text = safe_json_text(json_text(shown_doc(obj), indent=True, default=str, redact=False))
    sys.stdout.write(inert_json_commands(text) + "\n")  # a CI job's log runs no command from a tape's text


class ProgressBar:
    """``check``'s progress callback: a rich progress bar on a terminal, for a folder of more than 50 sessions."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.progress: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.progress is None:
            if not self.enabled or total <= 50:
                return
            # deferred: rich's console and progress bar are needed only for a big folder on a terminal
            from rich.console import Console  # deferred (see above)
            from rich.progress import Progress  # deferred (see above)

            self.progress = Progress(console=Console(stderr=True), transient=True)
            self.progress.start()
            self.task = self.progress.add_task("checking tapes", total=total)
        self.progress.update(self.task, completed=done)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


def plural(count: int, word: str, *, name_only: bool = False) -> str:
    """``1 step``, ``2 steps``, ``1 miss``, ``3 misses``, ``2 entries`` (``name_only``: the word alone)."""
    if count == 1:
        plural = word
    elif word.endswith(("s", "sh", "ch", "x")):
        plural = word + "es"
    elif word.endswith("y") and word[-2:-1] not in "aeiou":
        plural = word[:-1] + "ies"
    else:
        plural = word + "s"
    return plural if name_only else f"{count} {plural}"
