"""Reading files that a tape folder may hold, whatever they turn out to be.

A file named like a tape, a run log or ``tapes.toml`` may be a FIFO (an open would block
for ever), a folder, a device or a socket. Every reader opens through :func:`open_regular`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tapetui.core.errors import TapeError

__all__ = ["file_kind", "open_regular", "read_regular"]


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


def file_kind(mode: int) -> str:
    """What a non-regular file is, for a message: "a FIFO", "a folder"..."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a file"
