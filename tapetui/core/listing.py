"""What one look at a folder saw of its sessions' files.

``check`` reads every session of a folder; asking the file system, for each of them, whether its
candidate, run log, journal and lock file exist and whether any is a symlink costs half a dozen system
calls a session, more than reading it. One ``scandir`` per folder answers them all (a symlink is told
by the entry's type, no ``lstat``). A listing is a hint taken just before the read: a file that appears
after it is not seen (as if the check had run a moment earlier), one that went away fails its open and
the session is read again without the hint (:func:`tapetui.review.findings.check_session`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Listing", "SessionFiles"]

_NONE: frozenset[str] = frozenset()
_NAME_MAX = 255  # bytes in a file name, on every file system tapes live on


@dataclass(frozen=True, slots=True)
class SessionFiles:
    """Which of one session's files a listing saw, and which of those are symlinks (their names)."""

    golden: bool
    candidate: bool
    run_log: bool
    journal: bool
    lock: bool
    links: frozenset[str]


class Listing:
    """The names in each folder looked at, and which of them are symlinks."""

    __slots__ = ("_folders",)

    def __init__(self) -> None:
        self._folders: dict[str, tuple[frozenset[str], frozenset[str]] | None] = {}

    def note(self, folder: str, entries: list[os.DirEntry[str]]) -> None:
        """Keep what a ``scandir`` of ``folder`` returned."""
        names, links = set(), set()
        for e in entries:
            names.add(e.name)
            try:
                if e.is_symlink():
                    links.add(e.name)
            except OSError:
                links.add(e.name)  # cannot tell: treated as a link, so it is checked the slow way
        self._folders[folder] = (frozenset(names), frozenset(links))

    def files(self, golden: Path) -> SessionFiles | None:
        """What the listing of the golden's folder says of its session (the folder is listed on first use);
        None when it cannot be listed (the caller then asks the file system itself)."""
        folder, name = os.path.split(str(golden))
        if folder not in self._folders:
            try:
                with os.scandir(folder) as it:
                    self.note(folder, list(it))
            except OSError:
                self._folders[folder] = None
        seen = self._folders[folder]
        if seen is None:
            return None
        names, links = seen
        base = name[: -len(".jsonl")] if name.endswith(".jsonl") else name
        own = (name, base + ".candidate.jsonl", base + ".run.jsonl", name + ".journal")
        if len(os.fsencode(own[1])) > _NAME_MAX or len(os.fsencode(own[3])) > _NAME_MAX:
            return None  # a name no file system takes: asking it says so, as a check must (never a silent pass)
        return SessionFiles(
            golden=own[0] in names,
            candidate=own[1] in names,
            run_log=own[2] in names,
            journal=own[3] in names,
            lock=f".{name}.lock" in names,
            links=frozenset(n for n in own if n in links) if links else _NONE,
        )
