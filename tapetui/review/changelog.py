"""The changelog of goldens: a Markdown file, appended to, one entry per decision.

Every change of a golden (accept, expire, undo) has an entry naming when, which
session and steps, what drifted and the rationale the person gave. Entries carry an
id in an HTML comment so that crash recovery can tell whether one was written.
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import stat
from dataclasses import dataclass, replace
from pathlib import Path

from tapetui.core.changes import json_name
from tapetui.core.errors import TapeError
from tapetui.core.locks import unlock_close
from tapetui.core.redact import DEFAULT_REDACTOR, Redactor
from tapetui.core.textsafe import safe_text

__all__ = [
    "Entry",
    "Logged",
    "append_entries",
    "append_entry",
    "has_entry",
    "logged_entries",
    "read_entries",
    "rendered_session",
]

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

    def redacted(self, redactor: Redactor = DEFAULT_REDACTOR) -> Entry:
        """The entry with its details and rationale redacted (what any file may hold of it)."""
        return replace(
            self,
            details=tuple(redactor.redact_text(d) for d in self.details),
            rationale=None if self.rationale is None else redactor.redact_text(self.rationale),
        )

    def render(self, redactor: Redactor = DEFAULT_REDACTOR) -> str:
        """The entry as Markdown. Text from tapes and people (session names, tool names in the details,
        the rationale) is redacted, then its control, C1 and bidi characters are written as visible
        escapes (``\\x1b``): ``cat CHANGELOG.md`` cannot retitle a terminal, and a session name cannot
        break its heading onto a line of its own."""
        word = "step" if len(self.steps) == 1 else "steps"
        steps = f" — {word} {', '.join(map(str, self.steps))}" if self.steps else ""
        head = f"{_line(self.when)} — {_line(self.action)} `{rendered_session(self.session)}`{steps}"
        lines = [f"## {head}", f"{_MARK}{self.id} -->", ""]
        for d in self.details:
            lines.append(f"- {safe_text(_one_line(redactor.redact_text(d)))}")
        if self.rationale is not None:
            why = redactor.redact_text(self.rationale.strip().replace("\r\n", "\n"))
            why = safe_text(why)  # after this, only "\n" splits lines
            lines.append("")
            lines.append("Rationale:")
            lines.extend(f"> {line}" if line else ">" for line in why.splitlines())
        return "\n".join(lines) + "\n\n"


def _line(text: str) -> str:
    return safe_text(text, newlines=False)


def _session_code(session: str) -> str:
    """A (UTF-8) session name in its heading's code span, one for one: a backslash doubled, then every control, bidi
    character and backtick an escape (``\\x0a``, ``\\x60``): two sessions never share a heading (``x`y`` and
    ``x'y``, a newline and the text ``\\x0a``), so an entry always says which golden changed and ``undo`` finds
    its own."""
    return _line(session.replace("\\", "\\\\")).replace("`", "\\x60")


def _one_line(text: str) -> str:
    return " ".join(text.split("\n"))


def _open_changelog(changelog: Path, flags: int) -> int:
    """Open the changelog itself: never through a symlink, never a FIFO or a folder."""
    try:
        fd = os.open(changelog, flags | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TapeError(
                f"{changelog}: the changelog is a symlink; tapetui does not write through links "
                "(point tapes.toml's 'changelog' at the real file)"
            ) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise TapeError(f"{changelog}: the changelog must be a regular file")
    return fd


def ensure_writable(changelog: Path) -> None:
    """Refuse a changelog no entry can be appended to (a symlink, a FIFO, a folder) before a change is journaled:
    a change whose entry cannot be written is not made.

    Raises:
        TapeError: the changelog is there and is not a regular file.
    """
    try:
        os.close(_open_changelog(Path(changelog), os.O_RDONLY))
    except FileNotFoundError:  # made by the first entry
        return


def has_entry(changelog: Path, entry_id: str) -> bool:
    try:
        fd = _open_changelog(Path(changelog), os.O_RDONLY)
    except FileNotFoundError:
        return False
    with os.fdopen(fd, "rb") as fh:
        return f"{_MARK}{entry_id} -->".encode() in fh.read()


def append_entry(changelog: Path, entry: Entry, redactor: Redactor = DEFAULT_REDACTOR) -> None:
    """Append one entry (creating the file with a title), under a lock, fsynced.

    All or nothing: a failed write (a full disk) is cut off again, so a half entry never
    counts as written.
    """
    append_entries(changelog, [entry], redactor)


def append_entries(
    changelog: Path, entries: list[Entry], redactor: Redactor = DEFAULT_REDACTOR, *, sync: bool = True
) -> None:
    """Append ``entries`` in one write under one lock, all or none; fsynced unless ``sync=False`` (an import of
    thousands of traces syncs everything it wrote once, at its end)."""
    if not entries:
        return
    changelog = Path(changelog)
    try:
        fd = _open_changelog(changelog, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    except FileNotFoundError:  # its folder is not there yet
        changelog.parent.mkdir(parents=True, exist_ok=True)
        fd = _open_changelog(changelog, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        size = os.fstat(fd).st_size
        text = "".join(e.render(redactor) for e in entries)
        if size == 0:
            text = _HEADER + "\n" + text
        elif os.pread(fd, 1, size - 1) != b"\n":
            text = "\n" + text
        view = memoryview(text.encode("utf-8"))
        try:
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        except OSError:
            os.ftruncate(fd, size)
            raise
    finally:
        unlock_close(fd)


def read_entries(changelog: Path) -> list[str]:
    """The rendered entries, oldest first (for display)."""
    try:
        fd = _open_changelog(Path(changelog), os.O_RDONLY)
    except FileNotFoundError:
        return []
    with os.fdopen(fd, "rb") as fh:
        text = fh.read().decode("utf-8", errors="replace")
    parts = text.split("\n## ")
    return ["## " + p.strip() for p in parts[1:]]


_HEAD = re.compile(r"^\S+ — (?P<action>.+?) `(?P<session>[^`]*)`(?: — steps? [0-9, ]+)?$")
_REVERTS = re.compile(r"reverts changelog entry ([0-9a-f]{1,64})\b")


@dataclass(frozen=True, slots=True)
class Logged:
    """What :func:`logged_entries` reads back of an entry: enough to tell what changed and what was undone."""

    id: str
    action: str
    session: str  # as rendered in the heading (see :func:`rendered_session`)
    reverts: str | None  # an undo entry: the id of the entry it reverts


def rendered_session(session: str) -> str:
    """A session name as an entry's heading shows it (to compare with :attr:`Logged.session`); a name that is not
    UTF-8 (a lone surrogate) as JSON output shows it (``\\udcff``), as its entry holds it."""
    return _session_code(json_name(session))


def logged_entries(changelog: Path) -> list[Logged]:
    """The entries of the changelog, oldest first, read back from their headings and id markers.

    Text a person wrote around the entries is skipped; an entry without an id marker is not one of ours.
    """
    out: list[Logged] = []
    for part in read_entries(changelog):
        head, _, body = part[3:].partition("\n")
        m = _HEAD.match(head)
        start = body.find(_MARK)
        if m is None or start < 0:
            continue
        eid = body[start + len(_MARK) :].split(" ", 1)[0]
        reverts = _REVERTS.search(body)
        out.append(Logged(eid, m["action"], m["session"], reverts[1] if reverts else None))
    return out
