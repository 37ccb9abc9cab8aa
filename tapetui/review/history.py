"""History of review actions: the bytes a change replaced, so any process can undo it later.

Before an accept, reject, expire or undo changes a session, the commit protocol
(:mod:`tapetui.review.journal`) keeps what it replaces here, under the session lock:

    <project root>/.tapetui/history/<session>/<n>-<entry id>.golden      the golden before (if it had one)
    <project root>/.tapetui/history/<session>/<n>-<entry id>.candidate   the candidate before (if touched)
    <project root>/.tapetui/history/<session>/<n>-<entry id>.json        what the record is (written last)

``<n>`` orders the records of a session (nanoseconds, strictly increasing); ``<entry id>`` is the
id of the changelog entry the change writes. The ``.json`` file is written last, atomically: a
record without it is the leftover of a crash and is removed by :func:`prune`. The last
:data:`KEEP` records of a session are kept. The project root is where ``tapes.toml`` is (like
``.pytest_cache``); the folder is hidden, so it is never taken for tapes.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import orjson

from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import atomic_write, real_folder
from tapetui.core.store import session_name
from tapetui.review.changelog import Entry

__all__ = [
    "HISTORY_DIR",
    "KEEP",
    "Before",
    "HistoryRecord",
    "forget",
    "history_dir",
    "prune",
    "read_bytes",
    "records",
    "save",
]

HISTORY_DIR = Path(".tapetui") / "history"
KEEP = 20
"""Records kept per session (the oldest go first)."""

_ACTIONS: frozenset[str] = frozenset(("accept", "accept (new session)", "reject", "expire", "undo"))
_MAX_FILE = 1 << 30  # a record's bytes are read whole to restore them
_MAX_META = 1 << 16  # a record's description: a few hundred bytes


@dataclass(frozen=True, slots=True)
class Before:
    """What a change replaces: the bytes of the files it touches, as they were.

    ``touches_golden`` / ``touches_candidate``: whether the change rewrites that file (an expire
    leaves the candidate alone, a reject the golden). ``golden`` / ``candidate``: their bytes
    before the change, None when the file did not exist.
    """

    touches_golden: bool
    golden: bytes | None
    touches_candidate: bool = False
    candidate: bytes | None = None


@dataclass(frozen=True, slots=True)
class HistoryRecord:
    """One kept change of a session (read from its ``.json`` file)."""

    id: str  # the changelog entry id of the change
    n: int  # orders the records of a session
    action: str
    session: str
    when: str
    logged: bool  # the change wrote a changelog entry (a reject without a reason writes none)
    reverts: str | None  # for an undo: the entry id it reverts
    after_sha256: str | None  # the golden's sha256 after the change, when the change wrote one
    before: Before
    folder: Path

    @property
    def stem(self) -> str:
        return f"{self.n:020d}-{self.id}"


def history_dir(config: Config, golden: Path) -> Path:
    """The folder of a session's history records."""
    return config.root / HISTORY_DIR / session_name(golden, config.tapes_dir)


def _folder(config: Config, golden: Path, *, create: bool) -> Path | None:
    """The session's history folder, each part of it below the project root a real folder (never a symlink,
    so nothing is read or written outside the project); created (private) when ``create``, else None if missing.

    Raises:
        TapeError: a part of the path is a symlink, a file or anything but a folder.
    """
    rel = history_dir(config, golden).relative_to(config.root)
    return real_folder(config.root, rel, create=create, what="history for undo")


def save(
    config: Config,
    golden: Path,
    entry: Entry,
    before: Before,
    *,
    after_sha256: str | None,
    logged: bool = True,
    reverts: str | None = None,
) -> HistoryRecord:
    """Keep what a change replaces, before it is made (the caller holds the session lock).

    Raises:
        OSError: the record cannot be written (the caller changes nothing then).
    """
    folder = _folder(config, golden, create=True)
    assert folder is not None
    existing = records(config, golden)
    n = max(time.time_ns(), existing[-1].n + 1 if existing else 0)
    rec = HistoryRecord(
        entry.id, n, entry.action, entry.session, entry.when, logged, reverts, after_sha256, before, folder
    )
    if before.touches_golden and before.golden is not None:
        atomic_write(folder / f"{rec.stem}.golden", before.golden, mode=0o600)
    if before.touches_candidate and before.candidate is not None:
        atomic_write(folder / f"{rec.stem}.candidate", before.candidate, mode=0o600)
    meta = {
        "id": rec.id,
        "action": rec.action,
        "session": rec.session,
        "when": rec.when,
        "logged": logged,
        "reverts": reverts,
        "after_sha256": after_sha256,
        "touches_golden": before.touches_golden,
        "had_golden": before.golden is not None,
        "touches_candidate": before.touches_candidate,
        "had_candidate": before.candidate is not None,
    }
    atomic_write(folder / f"{rec.stem}.json", orjson.dumps(meta), mode=0o600)
    prune(folder)
    return rec


def records(config: Config, golden: Path) -> list[HistoryRecord]:
    """A session's history records, oldest first (without their bytes: see :func:`read_bytes`)."""
    folder = _folder(config, golden, create=False)
    if folder is None:
        return []
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out = []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        rec = _read_meta(folder, name[: -len(".json")])
        if rec is not None:
            out.append(rec)
    out.sort(key=lambda r: r.n)
    return out


def read_bytes(rec: HistoryRecord, which: Literal["golden", "candidate"]) -> bytes | None:
    """The kept bytes of the golden or candidate before ``rec``'s change, None when there were none.

    Raises:
        TapeError: the record says there were bytes, but they are gone or are not a regular file.
    """
    had = rec.before.golden if which == "golden" else rec.before.candidate
    if had is None:  # the record's meta says the file did not exist (bytes are read on demand)
        return None
    path = rec.folder / f"{rec.stem}.{which}"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        raise TapeError(f"{path}: the kept {which} of changelog entry {rec.id} is gone ({e.strerror})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_FILE:
            raise TapeError(f"{path}: not a regular file of a size tapetui writes; not restored")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _read_small(path: Path) -> bytes:
    """A record's description: a regular file (never through a symlink, never a FIFO) of the size tapetui writes.

    Raises:
        OSError: anything else.
    """
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_META:
            raise OSError(f"{path}: not a history record tapetui wrote")
        return os.read(fd, _MAX_META + 1)
    finally:
        os.close(fd)


_PRESENT = b""  # stands for "there were bytes" in a record read from disk (they are read on demand)


def _read_meta(folder: Path, stem: str) -> HistoryRecord | None:
    n_text, _, rid = stem.partition("-")
    try:
        n = int(n_text)
        meta: Any = orjson.loads(_read_small(folder / f"{stem}.json"))
    except (ValueError, OSError):
        return None
    if not isinstance(meta, dict) or meta.get("id") != rid or meta.get("action") not in _ACTIONS:
        return None
    for k in ("session", "when"):
        if not isinstance(meta.get(k), str):
            return None
    before = Before(
        bool(meta.get("touches_golden")),
        _PRESENT if meta.get("had_golden") else None,
        bool(meta.get("touches_candidate")),
        _PRESENT if meta.get("had_candidate") else None,
    )
    reverts, after = meta.get("reverts"), meta.get("after_sha256")
    return HistoryRecord(
        rid,
        n,
        meta["action"],
        meta["session"],
        meta["when"],
        meta.get("logged") is not False,
        reverts if isinstance(reverts, str) else None,
        after if isinstance(after, str) else None,
        before,
        folder,
    )


def prune(folder: Path, keep: int | None = None) -> None:
    """Keep the newest ``keep`` changes an undo can revert (and the undo records among them, which say what
    was reverted already); drop older records, and bytes a crash left without their ``.json``."""
    keep = KEEP if keep is None else keep
    try:
        names = os.listdir(folder)
    except OSError:
        return
    stems = sorted(n[: -len(".json")] for n in names if n.endswith(".json") and not n.startswith("."))
    metas = {stem: _read_meta(folder, stem) for stem in stems}
    changes = [stem for stem in stems if (m := metas[stem]) is not None and m.action != "undo"]
    oldest = changes[-keep] if keep and len(changes) >= keep else (changes[0] if keep and changes else None)
    kept = {stem for stem in stems if oldest is not None and stem >= oldest and metas[stem] is not None}
    for name in names:
        if name.startswith(".") or os.path.isdir(folder / name):
            continue  # temp files of atomic writes in flight; sub-sessions' folders
        stem = name.rpartition(".")[0]
        if stem not in kept:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(folder / name)


def forget(config: Config, golden: Path) -> None:
    """Remove a session's history records (scrub: the kept bytes may hold what it removed)."""
    folder = _folder(config, golden, create=False)
    if folder is None:
        return
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        p = folder / name
        if not os.path.isdir(p) or os.path.islink(p):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(p)
