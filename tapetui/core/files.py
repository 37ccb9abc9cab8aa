"""Reading files that a tape folder may hold, whatever they turn out to be, and replacing one atomically.

A file named like a tape, a run log or ``tapes.toml`` may be a FIFO (an open would block
for ever), a folder, a device or a socket. Every reader opens through :func:`open_regular`.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tapetui.core.errors import TapeError

__all__ = [
    "atomic_write",
    "file_kind",
    "file_sha256",
    "file_stamp",
    "fsync_dir",
    "open_regular",
    "read_regular",
    "temp_beside",
]


def open_regular(path: Path | str, what: str = "tape") -> int:
    """Open ``path`` for reading, refusing anything but a regular file; returns the descriptor.

    ``O_NONBLOCK``: a FIFO named like a tape must not block the open (no writer would ever come);
    ``fstat``: a FIFO, socket, device or folder is refused before a byte is read.

    Raises:
        TapeError: the file cannot be opened, or it is not a regular file; the message names it.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise TapeError(f"{path}: cannot read {what}: {e.strerror or e}") from None
    try:
        mode = os.fstat(fd).st_mode
    except OSError as e:
        os.close(fd)
        raise TapeError(f"{path}: cannot read {what}: {e.strerror or e}") from None
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise TapeError(f"{path}: not a regular file ({file_kind(mode)}); a {what} must be a plain file")
    return fd


def read_regular(path: Path | str, what: str = "tape") -> bytes:
    """The whole of a regular file (see :func:`open_regular`: a FIFO or a folder is a TapeError, never a hang)."""
    with os.fdopen(open_regular(path, what), "rb") as fh:
        try:
            return fh.read()
        except OSError as e:
            raise TapeError(f"{path}: cannot read {what}: {e.strerror or e}") from None


def regular_or_none(path: Path | str, *, follow_symlinks: bool = True) -> tuple[int, os.stat_result] | None:
    """A descriptor open on ``path`` and its stat, when it is a regular file (the caller closes it); None when there is
    none, it cannot be opened, or it is not a regular file (a FIFO is never waited on: the open does not block; a
    symlink is followed only with ``follow_symlinks``)."""
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return None
    return fd, st


def read_small(path: Path | str, limit: int, *, follow_symlinks: bool = True) -> bytes | None:
    """The bytes of a regular file of at most ``limit`` bytes, as many as it held when opened (and one more, to see it
    grew); None where :func:`regular_or_none` is None, or it is bigger, or a read fails."""
    opened = regular_or_none(path, follow_symlinks=follow_symlinks)
    if opened is None:
        return None
    fd, st = opened
    try:
        return os.read(fd, st.st_size + 1) if st.st_size <= limit else None
    except OSError:
        return None
    finally:
        os.close(fd)


def file_sha256(path: Path | str, *, follow_symlinks: bool = False) -> str | None:
    """The sha256 of a regular file's bytes, or None when there is none (missing, unreadable, not a regular
    file). A FIFO is never opened for good; a symlink is followed only with ``follow_symlinks``."""
    opened = regular_or_none(path, follow_symlinks=follow_symlinks)
    if opened is None:
        return None
    fd = opened[0]
    try:
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None
    finally:
        os.close(fd)


def file_stamp(path: Path | str | None) -> tuple[int, int, int] | None:
    """What tells that a file changed without reading it: ``(inode, size, mtime_ns)``; None when there is none
    (or no path). A rename over it changes the inode even when size and time are the same."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a message: "a FIFO", "a folder"..."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symlink"),  # from lstat
        (stat.S_ISREG, "a file"),
    ):
        if test(mode):
            return name
    return "not a file"


def temp_beside(path: Path, mode: int = 0o666, flags: int = os.O_WRONLY) -> tuple[int, str]:
    """A new file beside ``path``, ``.NAME.<random>.tmp`` (the name ``recover`` knows a killed writer's temp by):
    its descriptor, opened with ``flags``, and its name. Created with ``mode`` for the kernel to apply the umask, so
    a new file gets the mode any other new file would, without reading the umask (reading it sets it, for a moment,
    in every thread)."""
    flags |= os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0)
    while True:
        tmp = str(path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp"))
        try:
            return os.open(tmp, flags, mode), tmp
        except FileExistsError:
            continue


def atomic_write(path: Path, data: bytes | Iterable[Any], *, mode: int | None = None, sync: bool = True) -> None:
    """Replace ``path`` with ``data`` (bytes, or buffers written in turn): temp file in the same folder,
    fsync, rename, fsync the folder. The file keeps its permissions, or gets ``mode`` (default: a new file's,
    the umask's). ``sync=False`` leaves out the two fsyncs: the rename still never shows a torn file to a reader
    or after a crash of the process, only a power loss may lose it (a recording that does not fsync its lines
    either)."""
    path = Path(path)
    if mode is None:
        with contextlib.suppress(FileNotFoundError):  # a new file: created with 0o666 less the umask
            mode = path.stat().st_mode & 0o7777
    fd, tmp = temp_beside(path, 0o666 if mode is None else 0o600)
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            parts: Iterable[Any] = (data,) if isinstance(data, bytes | bytearray) else data
            for part in parts:
                fh.write(part)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    if sync:
        fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


STATE_DIR = ".tapetui"
"""tapetui's own folder (undo history, parked candidates): hidden, and ignored by git from the start."""

_STATE_GITIGNORE = b"# tapetui's own state (undo history, parked candidates): never committed\n*\n"


def real_folder(root: Path, rel: Path, *, create: bool, what: str) -> Path | None:
    """``root / rel`` with each part below ``root`` a real folder (never a symlink, so nothing is read or
    written outside ``root``); created (private) when ``create``, else None when a part is missing. A
    :data:`STATE_DIR` it creates gets a ``.gitignore`` that ignores everything in it.

    Raises:
        TapeError: a part of the path is a symlink, a file or anything but a folder (``what`` names its use).
    """
    folder = Path(root)
    for part in Path(rel).parts:
        folder = folder / part
        try:
            st = os.lstat(folder)
        except FileNotFoundError:
            if not create:
                return None
            try:
                os.mkdir(folder, 0o700)
                if part == STATE_DIR:
                    atomic_write(folder / ".gitignore", _STATE_GITIGNORE)
            except FileExistsError:  # another process made it meanwhile: checked below
                pass
            st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode):
            raise TapeError(
                f"{folder}: not a folder tapetui made ({file_kind(st.st_mode)}); {what} is kept only in a plain "
                "folder inside the project; move it away"
            )
    return folder
