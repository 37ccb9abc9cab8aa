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

import contextlib
import fcntl
import os
import re
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tapetui.core import indexcache
from tapetui.core.canon import canon, canonical_json, dumps, key_of_json
from tapetui.core.errors import TapeError
from tapetui.core.files import open_regular, read_regular
from tapetui.core.fingerprint import ToolManifest

__all__ = [
    "MAX_LINE",
    "Appender",
    "CallRecord",
    "TapeIndex",
    "TornTail",
    "atomic_write",
    "call_line",
    "dump_line",
    "open_regular",
    "read_index",
    "read_regular",
    "torn_path",
]

FORMAT_VERSION = 1
_CHUNK = 16 * 1024 * 1024
# The longest line a reader keeps: a longer complete line is a TapeError naming it, and a longer tail
# without a newline is a torn tail reported by its size, never held in memory (a hostile file of gigabytes
# without a newline is scanned in linear time with memory bounded by a few chunks).
MAX_LINE = 256 * 1024 * 1024


def _json_problem(e: Exception) -> str:
    """What is wrong with a line orjson refused: too deep is not "invalid" (the value may be valid JSON)."""
    if "depth limit" in str(e):
        return "nested more than 1,024 levels deep, beyond what tapetui reads; this line cannot be shown or replayed"
    return f"invalid JSON: {e}"


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
    """Serialise a call record. The leading fields keep a fixed order: the index reads them without a parse."""
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


def atomic_write(path: Path, data: bytes | Iterable[Any], *, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` (bytes, or buffers written in turn): temp file in the same folder,
    fsync, rename, fsync the folder. The file keeps its permissions, or gets ``mode`` (default: the umask's)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        if mode is None:
            try:
                mode = path.stat().st_mode & 0o7777
            except FileNotFoundError:
                mode = 0o666 & ~_umask()
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            parts: Iterable[Any] = (data,) if isinstance(data, bytes | bytearray) else data
            for part in parts:
                fh.write(part)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_dir(folder: Path) -> None:
    dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class Appender:
    """An append-only writer for one JSONL file, safe across threads and processes."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.healed: list[int] = []  # offsets where torn tails were cut, for reporting
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
        self._end = -1  # the file's size right after our last append (-1: unknown)

    def append(self, data: bytes) -> None:
        """Append complete lines (``data`` ends with a newline) as one write under the lock."""
        fd = self._fd
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.lseek(fd, 0, os.SEEK_END)  # the size, cheaper than fstat; O_APPEND writes at the end anyway
            if size != self._end:  # someone else wrote since our last line: check their tail
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
        with open(torn_path(self.path), "ab") as fh:
            fh.write(torn + b"\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.ftruncate(fd, cut)
        self.healed.append(cut)
        return cut

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Appender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


@dataclass(frozen=True, slots=True)
class TornTail:
    """An incomplete last line: where it starts and how many bytes it has."""

    line: int
    offset: int
    size: int


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One decoded call line."""

    seq: int
    tool: str
    key: str
    args: Any
    result: Any
    error: dict[str, Any] | None
    ms: float
    side_effect: bool
    fingerprint: str
    recorded_at: str | None
    expires_at: str | None
    requested_tool: str | None
    line: int
    raw: dict[str, Any] = field(repr=False)

    @property
    def executed_tool(self) -> str:
        return self.tool

    def as_record(self) -> dict[str, Any]:
        """The line as it is on disk, unknown fields included."""
        return self.raw


# The fields call_line writes first, in this order. Lines that do not match (hand
# written, escaped names, older writers) take the slow path: a full parse.
_FAST = re.compile(  # anchored at a line start: a '{' earlier on the line must not hide a malformed line
    rb'(?m)^\{"type":"call","seq":(\d{1,18}),"tool":"([^"\\\n]*)","key":"([^"\\\n]*)","fingerprint":"([^"\\\n]*)",'
    rb'"side_effect":(true|false),"ms":(-?[0-9.eE+-]+),"expires_at":(null|"[^"\\\n]*"),[^\n]*\}\n'
)


class TapeIndex:
    """What one scan of a tape knows: header, manifests, and per call the fields replay needs."""

    def __init__(self, path: Path) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self.header: dict[str, Any] | None = None
        self.manifests: dict[str, ToolManifest] = {}
        self.manifest_lines: dict[str, bytes] = {}
        # fingerprint → the form it was computed in, from every tool line that names a form other than 1
        # (see tapetui.core.fingerprint); a call whose fingerprint is not here was recorded in form 1
        self.fp_forms: dict[str, int] = {}
        self.seqs = array("q")
        self.offsets = array("q")
        self.lengths = array("l")
        self.lines = array("l")
        self.ms = array("d")
        self.side_effects = bytearray()
        self.tools: list[str] = []
        self.keys: list[str] = []
        self.fingerprints: list[str] = []
        self.expires: dict[int, str] = {}  # call index → expires_at, only for time-sensitive calls
        self._key_first: dict[str, int] | None = None  # built on first use: see key_first
        self._key_next: array | None = None
        self._strings: dict[bytes, str] = {}  # tool names and fingerprints, decoded once each
        self.torn: TornTail | None = None
        self.unknown_lines = 0
        # (line, seq, tool, stored key, key of the stored arguments or None): calls whose key does not match
        # their arguments, as a hand edit leaves them; noted by every full parse of a line (all with validate)
        self.key_mismatches: list[tuple[int, int, str, str, str | None]] = []
        self.size = 0  # bytes in the file when scanned, a torn tail included
        self.scanned = 0  # bytes of complete lines indexed
        self.line_count = 0  # complete lines indexed
        self.from_cache = False  # loaded from the index cache (then verified as each line is decoded)
        self.data: bytes | None = None  # the tape's bytes as scanned, when the open kept them (keep_bytes)
        self._seq_map: dict[int, int] | None = None

    def __len__(self) -> int:
        return len(self.seqs)

    # ---- lookups -----------------------------------------------------------------
    @property
    def key_first(self) -> dict[str, int]:
        """Key → the first call recorded with it. Built on first use: a replay that follows the tape's
        order never needs it (see ``Tape._take``), and for a million calls it costs most of a second."""
        return self._chains()[0]

    @property
    def key_next(self) -> array:
        """Call → the next call recorded with the same key, or -1."""
        return self._chains()[1]

    def _chains(self) -> tuple[dict[str, int], array]:
        if self._key_first is None or self._key_next is None or len(self._key_next) != len(self.keys):
            self._chain()
        assert self._key_first is not None and self._key_next is not None
        return self._key_first, self._key_next

    def _chain(self) -> None:
        keys = self.keys
        n = len(keys)
        first = dict(zip(reversed(keys), range(n - 1, -1, -1), strict=True))  # from the end: the first call wins
        following = array("l", [-1]) * n
        if len(first) != n:  # some call was recorded more than once: chain each to the next with its key
            last: dict[str, int] = {}
            for i, k in enumerate(keys):
                j = last.get(k)
                if j is not None:
                    following[j] = i
                last[k] = i
        self._key_first, self._key_next = first, following

    def at_seq(self, seq: int) -> int | None:
        """Index of the first call recorded at ``seq``, or None."""
        i = seq - 1
        if 0 <= i < len(self.seqs) and self.seqs[i] == seq:
            return i
        if self._seq_map is None:
            m: dict[int, int] = {}
            for idx, s in enumerate(self.seqs):
                m.setdefault(s, idx)
            self._seq_map = m
        return self._seq_map.get(seq)

    def raw_line(self, i: int, fh: Any = None) -> bytes:
        """Call ``i``'s line as it was indexed: from the kept bytes, else read from ``fh`` (a file or a
        descriptor) or the path."""
        off, n = self.offsets[i], self.lengths[i]
        if self.data is not None:
            return self.data[off : off + n]
        if isinstance(fh, int):
            return os.pread(fh, n, off)
        if fh is not None:
            fh.seek(off)
            return fh.read(n)
        fd = open_regular(self.path)  # gone, or not a file any more, since the scan: a TapeError naming it
        try:
            return os.pread(fd, n, off)
        finally:
            os.close(fd)

    def record(self, i: int, fh: Any = None) -> CallRecord:
        """Decode call ``i`` fully (arguments, result, unknown fields)."""
        try:
            obj = orjson.loads(self.raw_line(i, fh))
        except orjson.JSONDecodeError as e:
            raise self._invalid(i, e) from None
        rec = _call_from_obj(obj, self.path, self.lines[i])
        if rec.key != self.keys[i]:
            raise self._changed(i)
        return rec

    def outcome(self, i: int, fd: int) -> tuple[Any, dict[str, Any] | None]:
        """The recorded ``(result, error)`` of call ``i``: the replay hot path, no record built."""
        off, n = self.offsets[i], self.lengths[i]
        data = self.data
        try:
            obj = orjson.loads(data[off : off + n] if data is not None else os.pread(fd, n, off))
        except orjson.JSONDecodeError as e:
            raise self._invalid(i, e) from None
        if type(obj) is not dict:
            raise TapeError(f"{self.path}:{self.lines[i]}: a call line must be a JSON object")
        key = obj.get("key")
        if key is not None and key != self.keys[i]:
            raise self._changed(i)
        error = obj.get("error")
        if error is not None and type(error) is not dict:
            raise TapeError(f"{self.path}:{self.lines[i]}: call 'error' must be an object with 'type' and 'message'")
        return obj.get("result"), error

    def _invalid(self, i: int, e: Exception) -> TapeError:
        if self.from_cache:  # the entry may be what is wrong: the next open scans
            indexcache.forget(self.path)
        return TapeError(f"{self.path}:{self.lines[i]}: {_json_problem(e)}")

    def _changed(self, i: int) -> TapeError:
        indexcache.forget(self.path)
        return TapeError(
            f"{self.path}:{self.lines[i]}: the tape changed after it was opened (this line is not "
            f"the call indexed there); open it again"
        )

    def records(self) -> Iterator[CallRecord]:
        """Every call, decoded, in file order."""
        with os.fdopen(open_regular(self.path), "rb") as fh:  # deleted since the scan: a TapeError naming it
            for i in range(len(self)):
                yield self.record(i, fh)

    # ---- building ----------------------------------------------------------------
    def _add(
        self,
        seq: int,
        tool: str,
        key: str,
        fp: str,
        se: bool,
        ms: float,
        expires: str | None,
        offset: int,
        length: int,
        line: int,
    ) -> None:
        i = len(self.seqs)
        self.seqs.append(seq)
        self.tools.append(tool)
        self.keys.append(key)
        self.fingerprints.append(fp)
        self.side_effects.append(se)
        self.ms.append(ms)
        if expires is not None:
            self.expires[i] = expires
        self.offsets.append(offset)
        self.lengths.append(length)
        self.lines.append(line)


def _call_from_obj(obj: Any, path: Path, line: int) -> CallRecord:
    if not isinstance(obj, dict):
        raise TapeError(f"{path}:{line}: a call line must be a JSON object")
    seq, tool = obj.get("seq"), obj.get("tool")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 1 <= seq < 2**63:
        raise TapeError(f"{path}:{line}: call has no valid 'seq' (a positive 64-bit integer), got {repr(seq)[:40]}")
    if not isinstance(tool, str) or not tool:
        raise TapeError(f"{path}:{line}: call has no valid 'tool' (a non-empty string)")
    key = obj.get("key")
    if key is None:
        from tapetui.core.canon import call_key

        try:
            key = call_key(tool, obj.get("args") or {})
        except TapeError as e:
            raise TapeError(f"{path}:{line}: call args: {e}") from None
    elif not isinstance(key, str):
        raise TapeError(f"{path}:{line}: call 'key' must be a string")
    err = obj.get("error")
    if err is not None and not isinstance(err, dict):
        raise TapeError(f"{path}:{line}: call 'error' must be an object with 'type' and 'message'")
    ms = obj.get("ms", 0)
    exp = obj.get("expires_at")
    return CallRecord(
        seq=seq,
        tool=tool,
        key=key,
        args=obj.get("args"),
        result=obj.get("result"),
        error=err,
        ms=float(ms) if isinstance(ms, (int, float)) and not isinstance(ms, bool) else 0.0,
        side_effect=bool(obj.get("side_effect", False)),
        fingerprint=str(obj.get("fingerprint") or ""),
        recorded_at=obj.get("recorded_at") if isinstance(obj.get("recorded_at"), str) else None,
        expires_at=exp if isinstance(exp, str) else None,
        requested_tool=obj.get("requested_tool") if isinstance(obj.get("requested_tool"), str) else None,
        line=line,
        raw=obj,
    )


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
    fh = os.fdopen(open_regular(path), "rb")  # a FIFO or folder named like a tape: a TapeError, never a hang
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
            line_no = _scan(idx, line, length, long_from, line_no, validate)
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
        line_no = _scan(idx, buf, end, base, line_no, validate)
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


def _scan(idx: TapeIndex, buf: bytes, end: int, base: int, line_no: int, validate: bool) -> int:
    pos = 0
    if not validate:
        # The hot loop of opening a tape: one regex match per call line (measured faster than matching
        # at each line start found by memchr), columns appended in place, tool names and fingerprints
        # shared (one str per distinct value), no per-line method call, no key table (built on use).
        strings = idx._strings
        seqs, offsets, lengths, lines, ms_col = idx.seqs, idx.offsets, idx.lengths, idx.lines, idx.ms
        tools, keys, fps, side_effects, expires = idx.tools, idx.keys, idx.fingerprints, idx.side_effects, idx.expires
        for m in _FAST.finditer(buf, 0, end):
            start = m.start()
            if start != pos:
                line_no = _slow(idx, buf, pos, start, base, line_no)
            seq_b, tool_b, key_b, fp_b, se_b, ms_b, exp_b = m.groups()
            pos = m.end()
            try:
                ms = float(ms_b)
                # bytes that are not UTF-8 (the regex takes any byte but a quote): the full parse names the line
                key = key_b.decode()
                tool = strings.get(tool_b)
                if tool is None:
                    tool = strings[tool_b] = tool_b.decode()
                fp = strings.get(fp_b)
                if fp is None:
                    fp = strings[fp_b] = fp_b.decode()
                expiry = exp_b[1:-1].decode() if exp_b != b"null" else None
            except ValueError:  # UnicodeDecodeError is one
                line_no = _slow(idx, buf, start, pos, base, line_no)
                continue
            line_no += 1
            if expiry is not None:
                expires[len(seqs)] = expiry
            seqs.append(int(seq_b))
            tools.append(tool)
            fps.append(fp)
            keys.append(key)
            side_effects.append(se_b == b"true")
            ms_col.append(ms)
            offsets.append(base + start)
            lengths.append(pos - start)
            lines.append(line_no)
    if pos < end:
        line_no = _slow(idx, buf, pos, end, base, line_no)
    return line_no


def _slow(idx: TapeIndex, buf: bytes, start: int, stop: int, base: int, line_no: int) -> int:
    """Parse whole lines in ``buf[start:stop]`` with a full JSON decode."""
    pos = start
    while pos < stop:
        nl = buf.index(b"\n", pos, stop)
        line_no += 1
        raw = buf[pos:nl]
        if raw.strip():
            _parse_line(idx, raw, base + pos, nl + 1 - pos, line_no)
        pos = nl + 1
    return line_no


def _verify_key(idx: TapeIndex, seq: int, tool: str, key: str, args: Any, line_no: int) -> None:
    """Note a call whose stored key is not ``key_of(tool, args)`` of its stored arguments (edited by hand).

    Called when the arguments' JSON as stored does not hash to the key (``_parse_line`` tries that first:
    the writer stores canonical arguments, so that costs a dump and a hash); checked again through canon.
    """
    if args is None:
        args = {}  # as a call without arguments is recorded, and as a missing key is filled in
    try:
        computed: str | None = key_of_json(tool, canonical_json(canon(args)))
    except (TypeError, TapeError):  # nested past what JSON encoding allows: no writer made that key
        computed = None
    if computed != key:
        idx.key_mismatches.append((line_no, seq, tool, key, computed))


def _parse_line(idx: TapeIndex, raw: bytes, offset: int, length: int, line_no: int) -> None:
    path = idx.path
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise TapeError(f"{path}:{line_no}: {_json_problem(e)}") from None
    if not isinstance(obj, dict):
        raise TapeError(f"{path}:{line_no}: expected a JSON object, got {type(obj).__name__}")
    kind = obj.get("type")
    if kind == "call" or (kind is None and "seq" in obj and "tool" in obj):
        seq, tool, key, ms, exp = (
            obj.get("seq"),
            obj.get("tool"),
            obj.get("key"),
            obj.get("ms", 0),
            obj.get("expires_at"),
        )
        if (
            type(seq) is not int
            or not 1 <= seq < 2**63
            or type(tool) is not str
            or not tool
            or type(key) is not str
            or type(ms) not in (int, float)
            or (exp is not None and type(exp) is not str)
            or not isinstance(obj.get("error", {}), dict)
        ):
            rec = _call_from_obj(obj, path, line_no)  # names the problem, or fills in a missing key
            seq, tool, key, ms, exp = rec.seq, rec.tool, rec.key, rec.ms, rec.expires_at
        if key is obj.get("key"):  # a stored key, not one filled in: it must be the key of the stored arguments
            args = obj.get("args")
            try:  # as the writer stores them, arguments are canonical already: their JSON hashes to the key
                same = key_of_json(tool, canonical_json({} if args is None else args)) == key
            except TypeError:
                same = False
            if not same:
                _verify_key(idx, seq, tool, key, args, line_no)
        idx._add(
            seq,
            tool,
            key,
            str(obj.get("fingerprint") or ""),
            bool(obj.get("side_effect", False)),
            float(ms),
            exp,
            offset,
            length,
            line_no,
        )
    elif kind == "tool":
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise TapeError(f"{path}:{line_no}: tool manifest has no 'name'")
        form = obj.get("form", 1)
        if type(form) is not int or form < 1:
            raise TapeError(f"{path}:{line_no}: tool manifest 'form' must be a positive integer, got {repr(form)[:40]}")
        manifest = idx.manifests[name] = ToolManifest.from_record(obj)
        idx.manifest_lines[name] = raw + b"\n"
        if form != 1:
            idx.fp_forms[manifest.fingerprint] = form
    elif kind == "session":
        if idx.header is None:
            idx.header = obj
    elif kind is None:
        raise TapeError(f"{path}:{line_no}: line has no 'type' and is not a call (needs 'seq' and 'tool')")
    elif isinstance(kind, str):
        idx.unknown_lines += 1  # a line kind from a newer format: kept on disk, ignored here
    else:
        raise TapeError(f"{path}:{line_no}: 'type' must be a string, got {type(kind).__name__}")
