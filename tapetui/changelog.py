"""The changelog of goldens: a Markdown file, appended to, one entry per decision.

Every change of a golden (accept, expire, undo) has an entry naming when, which
session and steps, what drifted and the rationale the person gave. Entries carry an
id in an HTML comment so that crash recovery can tell whether one was written.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tapetui.redact import DEFAULT_REDACTOR, Redactor

__all__ = ["Entry", "append_entry", "has_entry", "read_entries"]

_HEADER = "# Tape changelog\n\nEvery change to a golden tape, newest last, with the reason it was accepted.\n"
_MARK = "<!-- tapetui:entry "


@dataclass(frozen=True, slots=True)
class Entry:
    """One changelog entry, before it is rendered to Markdown."""

    id: str
    when: str
    action: str
    session: str
    steps: tuple[int, ...]
    details: tuple[str, ...]
    rationale: str | None

    def render(self, redactor: Redactor = DEFAULT_REDACTOR) -> str:
        steps = f" — steps {', '.join(map(str, self.steps))}" if self.steps else ""
        lines = [f"## {self.when} — {self.action} `{_code(self.session)}`{steps}", f"{_MARK}{self.id} -->", ""]
        for d in self.details:
            lines.append(f"- {_one_line(redactor.redact_text(d))}")
        if self.rationale is not None:
            why = redactor.redact_text(self.rationale.strip())
            lines.append("")
            lines.append("Rationale:")
            lines.extend(f"> {line}" if line else ">" for line in why.splitlines())
        return "\n".join(lines) + "\n\n"


def _code(text: str) -> str:
    return text.replace("`", "'")


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


def has_entry(changelog: Path, entry_id: str) -> bool:
    try:
        return f"{_MARK}{entry_id} -->" in Path(changelog).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return False


def append_entry(changelog: Path, entry: Entry, redactor: Redactor = DEFAULT_REDACTOR) -> None:
    """Append one entry (creating the file with a title), under a lock, fsynced."""
    changelog = Path(changelog)
    changelog.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(changelog, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        text = entry.render(redactor)
        if size == 0:
            text = _HEADER + "\n" + text
        elif os.pread(fd, 1, size - 1) != b"\n":
            text = "\n" + text
        os.write(fd, text.encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)


def read_entries(changelog: Path) -> list[str]:
    """The rendered entries, oldest first (for display)."""
    try:
        text = Path(changelog).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    parts = text.split("\n## ")
    return ["## " + p.strip() for p in parts[1:]]

