"""Tape files on disk: JSONL v1, appended under a lock, read into a lazy index.

Writers: every record is one ``write`` on an ``O_APPEND`` descriptor while holding an
exclusive ``flock``, so concurrent appenders never interleave. Before writing, the
writer checks (under the lock) that the file ends with a newline; bytes after the last
newline can only be a crashed writer's torn line (a live writer's line is complete
before it unlocks), so they are moved to ``<tape>.torn`` and cut off.

Readers: :func:`read_index` scans a tape once, in chunks, keeping per call only what
replay needs (seq, tool, key, fingerprint, duration, expiry, where the line is). The
arguments and result of a call are decoded when they are asked for, and checked against
the index then. A big tape's index is kept in the index cache (:mod:`tapetui.core.indexcache`):
the next open loads it and scans only the lines appended since.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import Any

from tapetui.core import indexcache
from tapetui.core.cachedir import entry_path
from tapetui.core.canon import dumps
from tapetui.core.errors import TapeError
from tapetui.core.files import open_regular
from tapetui.core.index import TapeIndex, TornTail
from tapetui.core.lineparse import scan_lines

__all__ = [
    "FORMAT_VERSION",
    "MAX_LINE",
    "Appender",
    "call_line",
    "dump_line",
    "leave_index",
    "read_index",
    "session_line",
    "torn_path",
]

FORMAT_VERSION = 1  # the tape format (docs/format.md, "The session header"): the ``v`` of a session header
_CHUNK = 16 * 1024 * 1024
# The longest line a reader keeps: a longer complete line is a TapeError naming it, and a longer tail
# without a newline is a torn tail reported by its size, never held in memory (a hostile file of gigabytes
# without a newline is scanned in linear time with memory bounded by a few chunks).
MAX_LINE = 256 * 1024 * 1024


def torn_path(path: Path) -> Path:
    """Where torn bytes cut from ``path`` are kept for forensics."""
    return path.with_name(path.name + ".torn")


def dump_line(record: dict[str, Any]) -> bytes:
    """One JSONL line. Raises TypeError for values JSON cannot hold, TooDeep beyond the recursion limit."""
    return dumps(record, newline=True)


def call_line(
    *,
    seq: int,
    tool: str,
    key: str,
    fingerprint: str,
    side_effect: bool,
    ms: float,
    expires_at: str | None,
    recorded_at: str,
    args: Any,
    result: Any = None,
    error: dict[str, Any] | None = None,
    requested_tool: str | None = None,
    extra: dict[str, Any] | None = None,
) -> bytes:
    """Serialise a call record. The leading fields keep a fixed order: the index reads them without a parse.

    ``extra`` adds fields after the others: ``order`` (the call's place in the model's request),
    ``call_id`` (the model's id of the tool call), ``rerecorded``..."""
    rec: dict[str, Any] = {
        "type": "call",
        "seq": seq,
        "tool": tool,
        "key": key,
        "fingerprint": fingerprint,
        "side_effect": side_effect,
        "ms": ms,
        "expires_at": expires_at,
        "recorded_at": recorded_at,
        "args": args,
    }
    if error is not None:
        rec["error"] = error
    else:
        rec["result"] = result
    if requested_tool is not None:
        rec["requested_tool"] = requested_tool
    if extra:
        for k, v in extra.items():
            rec.setdefault(k, v)
    return dump_line(rec)


def session_line(*, created_at: str, origin: str, labels: dict[str, Any] | None = None) -> bytes:
    """A session header (the optional first line of a tape, in :data:`FORMAT_VERSION`): when the recording began,
    what made it (``record``, ``fill``, ``rerecord``...) and its labels, which the caller has redacted."""
    header: dict[str, Any] = {"type": "session", "v": FORMAT_VERSION, "created_at": created_at, "origin": origin}
    if labels:
        header["labels"] = labels
    return dump_line(header)


class Appender:
    """An append-only writer for one JSONL file, safe across threads and processes."""

    def __init__(self, path: Path, *, fsync: bool = False, fd: int | None = None, end: int = -1) -> None:
        """``fd``: write through this descriptor (open for appending; the appender's from now on), to the file it was
        opened on whatever ``path`` names later, instead of opening ``path``. ``end``: the file's size, when this
        process wrote all of it."""
        self.path = Path(path)
        self.fsync = fsync
        self.healed: list[int] = []  # offsets where torn tails were cut, for reporting
        self._fd = (
            fd if fd is not None else os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        )
        self._end = end  # the file's size right after our last append (-1: unknown)
        self.sole = True  # no other writer appended between two of our appends

    def append(self, data: bytes) -> None:
        """Append complete lines (``data`` ends with a newline) as one write under the lock."""
        fd = self._fd
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)  # the size, cheaper than fstat; O_APPEND writes at the end anyway
            if size != self._end:  # someone else wrote since our last line: check their tail
                self.sole = self.sole and self._end < 0
                size = self._heal(fd, size)
            n = os.write(fd, data)
            if n != len(data):  # a short write (a full disk, a signal): finish the line
                view = memoryview(data)[n:]
                while view:
                    view = view[os.write(fd, view) :]
            self._end = size + len(data)  # under the lock, with O_APPEND, our bytes end the file
            if self.fsync:
                os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _heal(self, fd: int, size: int) -> int:
        """Set a torn last line aside (into ``<tape>.torn``); returns the file's size after."""
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return size
        cut = _last_newline(fd, size) + 1
        torn = os.pread(fd, size - cut, cut)
        with os.fdopen(_torn_file(torn_path(self.path)), "ab") as fh:
            fh.write(torn + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.ftruncate(fd, cut)
        self.healed.append(cut)
        return cut

    @property
    def end(self) -> int:
        """The file's size right after this appender's last append (-1: it has appended nothing)."""
        return self._end

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _torn_file(path: Path) -> int:
    """A descriptor appending to ``path``, the file torn tails are set aside in: a symlink or anything but a regular
    file in its place (planted, never made by tapetui) is removed first, never followed."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    for _ in range(2):
        try:
            fd = os.open(path, flags, 0o644)
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                raise
        else:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                return fd
            os.close(fd)
        os.unlink(path)  # a symlink, a FIFO: not ours (a folder: unlink fails, and says so)
    raise OSError(errno.EEXIST, "something keeps taking the place of the torn-tail file", str(path))


def _last_newline(fd: int, size: int) -> int:
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        block = os.pread(fd, pos - start, start)
        i = block.rfind(b"\n")
        if i >= 0:
            return start + i
        pos = start
    return -1


def read_index(path: Path | str, *, validate: bool = False, keep_bytes: bool = False) -> TapeIndex:
    """Scan a tape once and index it.

    Args:
        path: the tape.
        validate: parse every line fully (``check`` does); by default lines in the
            writer's own layout are indexed without a parse and decoded on use, and the
            index of a big tape is kept in the index cache (:mod:`tapetui.core.indexcache`)
            so the next open scans only what was appended since.
        keep_bytes: keep a tape of up to 16 MB in memory as it was scanned (``idx.data``), so a
            replay decodes its calls without a read each (a tape from the index cache is read).

    Raises:
        TapeError: the file cannot be read, or a line (other than a torn last line)
            is malformed; the message names the file, the line and the problem.
    """
    path = path if isinstance(path, Path) else Path(path)
    fd = open_regular(path)  # a FIFO or folder named like a tape: a TapeError, never a hang
    if validate:  # check's read of every golden: most are small, read in one piece (no file object, no cache)
        try:
            idx = _scan_small(path, fd, keep_bytes)
        except BaseException:
            os.close(fd)
            raise
        if idx is not None:
            os.close(fd)
            return idx
    fh = os.fdopen(fd, "rb")
    with fh:
        before = os.fstat(fh.fileno())
        idx = None if validate else indexcache.load(path, before, fh.fileno())
        if idx is None:
            idx = TapeIndex(path)
        start = idx.scanned
        _scan_file(idx, fh, before.st_size, validate, keep_bytes)
        if not validate and idx.scanned - start >= indexcache.MIN_BYTES:
            indexcache.save(idx, before, os.fstat(fh.fileno()), fh.fileno())
    return idx


_SMALL = 1 << 20  # bytes: a tape up to this size is validated from one read


def _scan_small(path: Path, fd: int, keep_bytes: bool) -> TapeIndex | None:
    """A validating scan of a tape of up to :data:`_SMALL` bytes from one read of ``fd`` (left open), as
    :func:`_scan_file` would make it; None, ``fd`` back at its start, when the file is bigger or grows."""
    try:
        size = os.fstat(fd).st_size
        if size > _SMALL:
            return None
        data = os.read(fd, size + 1)  # one byte more: a file that grew is seen
        if len(data) != size:  # changing as it is read: read in chunks, to its end
            os.lseek(fd, 0, os.SEEK_SET)
            return None
    except OSError as e:
        raise TapeError(f"{path}: cannot read tape: {e.strerror or e}") from None
    idx = TapeIndex(path)
    end = data.rfind(b"\n") + 1
    line_no = scan_lines(idx, data, end, 0, 0, True) if end else 0
    idx.scanned, idx.line_count, idx.size = end, line_no, len(data)
    idx.torn = TornTail(line_no + 1, end, len(data) - end) if data[end:].strip() else None
    if keep_bytes:
        idx.data = data
    return idx


def leave_index(path: Path, size: int) -> None:
    """Keep the index of a tape this process has just finished writing, ``size`` bytes all its own (a recording at
    its close): the first replay of a big recording then loads it from the index cache instead of scanning.
    Only a tape of at least :data:`~tapetui.core.indexcache.MIN_BYTES` that is still exactly that size; best
    effort (a tape it cannot read is left to the next open)."""
    if size < indexcache.MIN_BYTES or entry_path(path) is None:
        return
    try:
        with os.fdopen(open_regular(path), "rb") as fh:
            before = os.fstat(fh.fileno())
            if before.st_size != size:
                return  # written by someone else too: the next open scans it
            idx = TapeIndex(path)
            _scan_file(idx, fh, size, False)
            if idx.torn is None:
                indexcache.save(idx, before, os.fstat(fh.fileno()), fh.fileno(), own=True)
    except (OSError, TapeError):
        return


def _scan_file(idx: TapeIndex, fh: Any, size: int, validate: bool, keep_bytes: bool = False) -> None:
    """Index the lines from ``idx.scanned`` to the end of the file.

    Linear in the file's size, with memory for a chunk or two plus the longest complete line: the
    bytes after the last newline are held only while they fit in a chunk (each byte is copied at
    most twice). A line growing past a chunk is not held: its start is noted and, when its newline
    comes, it is read again in one piece (a TapeError beyond :data:`MAX_LINE`); with no newline it
    is a torn tail, reported by its size.
    """
    base, line_no = idx.scanned, idx.line_count
    fh.seek(base)
    size -= base
    carry = b""  # the incomplete line after the last newline, while it is no longer than a chunk
    long_from = -1  # where a line longer than a chunk began (its bytes are not held), or -1
    long_blank = True  # that line's bytes so far are all whitespace
    read_to = base  # the offset after the last byte read
    keep = keep_bytes and base == 0 and size < _CHUNK  # a small tape is read in one piece: keep that
    reads = 0
    while True:
        # a small tape in one read of its size: asking for a 16 MB chunk costs a 16 MB allocation each time
        chunk = fh.read(_CHUNK if size > _CHUNK else size + 1)
        if not chunk:
            break
        reads += 1
        if keep:
            idx.data = chunk if reads == 1 else None  # grown since the stat: not one piece, not kept
        chunk_at = read_to
        read_to += len(chunk)
        if long_from >= 0:
            nl = chunk.find(b"\n")
            if nl < 0:
                long_blank = long_blank and chunk.isspace()
                continue
            length = chunk_at + nl + 1 - long_from
            if length > MAX_LINE:
                raise TapeError(
                    f"{idx.path}:{line_no + 1}: line is {length:,} bytes long, more than the "
                    f"{MAX_LINE:,} a tapetui file line may have"
                )
            line = _read_at(fh, idx.path, long_from, length)
            if not line.endswith(b"\n"):
                raise TapeError(f"{idx.path}:{line_no + 1}: the file changed while it was read; open it again")
            line_no = scan_lines(idx, line, length, long_from, line_no, validate)
            del line
            base, long_from, long_blank = long_from + length, -1, True
            chunk = chunk[nl + 1 :]
            if not chunk:
                continue
        buf = carry + chunk if carry else chunk
        end = buf.rfind(b"\n") + 1
        if end == 0:
            if len(buf) > _CHUNK:  # longer than a chunk and no end in sight: stop holding it
                long_from, long_blank, carry = base, buf.isspace(), b""
            else:
                carry = buf
            continue
        line_no = scan_lines(idx, buf, end, base, line_no, validate)
        base += end
        carry = buf[end:]  # after the buffer's last newline: within this chunk, so at most a chunk
    idx.scanned, idx.line_count = base, line_no
    if long_from >= 0:
        idx.size = read_to
        idx.torn = None if long_blank else TornTail(line_no + 1, long_from, read_to - long_from)
        return
    idx.size = base + len(carry)
    idx.torn = TornTail(line_no + 1, base, len(carry)) if carry.strip() else None


def _read_at(fh: Any, path: Path, offset: int, length: int) -> bytes:
    """``length`` bytes at ``offset``, without moving ``fh``'s position (a long line, read again whole)."""
    parts = []
    fd = fh.fileno()
    got = 0
    while got < length:
        part = os.pread(fd, min(length - got, 1 << 30), offset + got)
        if not part:
            raise TapeError(f"{path}: the file shrank while it was read; open it again")
        parts.append(part)
        got += len(part)
    return parts[0] if len(parts) == 1 else b"".join(parts)
