"""The index cache: a big tape is scanned once, not on every open.

Scanning a 1,000,000-call tape line by line costs seconds in Python; loading the columns
of its index from a binary file costs a fraction of a second. :func:`read_index` looks
here first for tapes of at least :data:`MIN_BYTES` and saves what it scanned.

An entry is trusted only for the same file (device and inode) and only for the bytes
it covers, which must end exactly as they did (a hash of the last 64 KiB). A tape only
grows by appends, so a longer file is fine: the rest is scanned. A same-sized file with
another modification time is a rewrite: scanned again; a tape written in the last
:data:`RACY_NS` is not saved, since a rewrite within the file system's timestamp
granularity could keep its mtime (git's "racy clean" problem). Three call lines are decoded
and checked against the entry on load, and every decoded line is checked against its
indexed key afterwards (``TapeIndex.outcome``), so a stale entry is an error that
names the line, never a wrong result; the entry is dropped then.

The cache never changes what an open returns, only how fast. It holds what the index
holds (keys, tool names, fingerprints, expiry times, where each line is), no arguments,
results or note values (note and phase lines are read again from the tape on load), the
session header and tool lines with secret-looking values redacted, and
only an entry the user owns and no one else can write is read.
Where it lives: ``$TAPETUI_CACHE_DIR`` (``off`` turns it off), else
``$XDG_CACHE_HOME/tapetui/index``, else ``~/.cache/tapetui/index``; at most
:data:`MAX_ENTRIES` files, the least recently used go first. Nothing here is pickled: a
planted entry is data that is checked, not code.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import time
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.cachedir import cache_dir, entry_path
from tapetui.core.files import atomic_write
from tapetui.core.fingerprint import ToolManifest, redact_manifest_line
from tapetui.core.index import TapeIndex, note_traced, reindex_extra
from tapetui.core.redact import DEFAULT_REDACTOR

__all__ = ["MAX_ENTRIES", "MIN_BYTES", "RACY_NS", "drop_where", "load", "save"]

MIN_BYTES = 8 * 1024 * 1024  # below this a scan takes a fraction of a second: not worth a file
MAX_ENTRIES = 32
RACY_NS = 2_000_000_000  # a tape written less than this long ago is not saved yet
_MAGIC = b"tapetui index v4\n"  # v3: where note and phase lines are; v4: and model turn lines
_HEAD = "<QQI"  # meta length, keys length, CRC-32 of everything after the head
_TAIL = 65536
_COLUMNS = ("seqs", "offsets", "lengths", "lines", "ms")  # array columns, stored raw in this order


def _tail_hash(fd: int, end: int) -> str:
    start = max(0, end - _TAIL)
    return hashlib.blake2b(os.pread(fd, end - start, start), digest_size=16).hexdigest()


# ---- saving ------------------------------------------------------------------------
def save(idx: TapeIndex, before: os.stat_result, after: os.stat_result, fd: int, *, own: bool = False) -> None:
    """Keep ``idx`` for the next open. ``before``/``after``: the tape's stat around the scan; ``fd``: the tape, open.

    ``own``: the bytes scanned are the ones this process has just written (a recording at its close, no other
    writer since its first line): the entry is kept at once, with no wait out of the racy window.
    Best effort: a read-only or full disk only means the next open scans again.
    """
    if (before.st_ino, before.st_mtime_ns, before.st_size) != (after.st_ino, after.st_mtime_ns, after.st_size):
        return  # written to while we scanned: what we read may be either version
    if not own and time.time_ns() - after.st_mtime_ns < RACY_NS:
        # Written a moment ago: a same-sized rewrite within the file system's mtime granularity would
        # leave size and mtime as they are now (git's "racy clean" problem). The next open saves it.
        return
    entry = entry_path(idx.path)
    if entry is None or idx.scanned == 0:
        return
    try:
        tail = _tail_hash(fd, idx.scanned)
        tools = sorted(set(idx.tools))
        fps = sorted(set(idx.fingerprints))
        tool_ids, fp_ids = {t: n for n, t in enumerate(tools)}, {f: n for n, f in enumerate(fps)}
        columns = [getattr(idx, name) for name in _COLUMNS]
        meta = orjson.dumps(
            {
                "tape": {
                    "dev": before.st_dev,
                    "ino": before.st_ino,
                    "size": before.st_size,
                    "mtime_ns": before.st_mtime_ns,
                    "scanned": idx.scanned,
                    "tail": tail,
                },
                "calls": len(idx),
                "line_count": idx.line_count,
                "unknown_lines": idx.unknown_lines,
                "header": _safe_header(idx.header),
                "manifest_lines": [_safe_manifest_line(line).decode() for line in idx.manifest_lines.values()],
                "fp_forms": idx.fp_forms,
                "columns": [
                    [name, col.typecode, col.itemsize, len(col)] for name, col in zip(_COLUMNS, columns, strict=True)
                ],
                "tools": tools,
                "fingerprints": fps,
                "expires": [[i, e] for i, e in idx.expires.items()],
                "extra_spans": idx.extra_spans,
            }
        )
        keys = orjson.dumps(idx.keys)
        ids = array("I", map(tool_ids.__getitem__, idx.tools))
        ids.extend(map(fp_ids.__getitem__, idx.fingerprints))
        body: list[Any] = [meta, keys, *columns, idx.side_effects, ids]
        crc = 0
        for part in body:
            crc = zlib.crc32(part, crc)
        parts = [_MAGIC, struct.pack(_HEAD, len(meta), len(keys), crc), *body]
        entry.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(entry, parts, mode=0o600)
        _evict(entry.parent)
    except (OSError, TypeError, ValueError, KeyError):
        return


def _safe_header(header: dict[str, Any] | None) -> dict[str, Any] | None:
    return DEFAULT_REDACTOR.redact(header) if header is not None else None


def _safe_manifest_line(line: bytes) -> bytes:
    """A tool line as the cache keeps it: an old form-1 line's verbatim secrets redacted, its fingerprint kept."""
    return redact_manifest_line(line)


def drop_where(predicate: Callable[[dict[str, Any]], bool]) -> int:
    """Remove every entry (of this user's cache folder) whose meta ``predicate`` accepts; returns how many.

    ``tapetui scrub`` drops the entries whose tool lines or header hold what the current rules redact.
    An entry that cannot be read is left to eviction.
    """
    folder = cache_dir()
    if folder is None or not folder.is_dir():
        return 0
    dropped = 0
    with os.scandir(folder) as it:
        for e in it:
            if not (e.name.endswith(".idx") and e.is_file(follow_symlinks=False)):
                continue
            try:
                with open(e.path, "rb") as fh:
                    head = fh.read(len(_MAGIC) + struct.calcsize(_HEAD))
                    if not head.startswith(_MAGIC):
                        continue
                    meta_len = struct.unpack_from(_HEAD, head, len(_MAGIC))[0]
                    meta = orjson.loads(fh.read(meta_len))
            except (OSError, orjson.JSONDecodeError, struct.error):
                continue
            if isinstance(meta, dict) and predicate(meta):
                with contextlib.suppress(OSError):
                    os.unlink(e.path)
                    dropped += 1
    return dropped


def _evict(folder: Path) -> None:
    entries = []
    with os.scandir(folder) as it:
        for e in it:
            if e.name.endswith(".idx") and e.is_file(follow_symlinks=False):
                with contextlib.suppress(OSError):
                    entries.append((e.stat(follow_symlinks=False).st_mtime_ns, e.path))
    entries.sort()
    for _, p in entries[: max(0, len(entries) - MAX_ENTRIES)]:
        with contextlib.suppress(OSError):
            os.unlink(p)


# ---- loading -----------------------------------------------------------------------
def load(path: Path, st: os.stat_result, fd: int) -> TapeIndex | None:
    """The cached index of the tape open on ``fd`` (stat ``st``), covering ``idx.scanned`` bytes; None on any doubt."""
    if st.st_size < MIN_BYTES:
        return None
    entry = entry_path(path)
    if entry is None:
        return None
    try:
        with open(entry, "rb") as fh:
            idx = _read_entry(path, st, fd, fh)
        if idx is not None:
            os.utime(entry)  # recently used: kept by eviction
        return idx
    except Exception:  # noqa: BLE001 - a damaged or foreign entry only means a scan
        return None


def _read_entry(path: Path, st: os.stat_result, fd: int, fh: Any) -> TapeIndex | None:
    own = os.fstat(fh.fileno())
    if own.st_uid != os.getuid() or own.st_mode & 0o022:
        return None  # only an entry this user wrote, that nobody else can have changed
    head = fh.read(len(_MAGIC) + struct.calcsize(_HEAD))
    if not head.startswith(_MAGIC):
        return None
    meta_len, keys_len, crc = struct.unpack_from(_HEAD, head, len(_MAGIC))
    raw = fh.read()
    data = memoryview(raw)
    if zlib.crc32(data) != crc or meta_len + keys_len > len(data):
        return None  # torn or damaged
    meta = orjson.loads(data[:meta_len])
    tape = meta["tape"]
    scanned = tape["scanned"]
    if (tape["dev"], tape["ino"]) != (st.st_dev, st.st_ino) or not 0 < scanned <= st.st_size:
        return None
    if st.st_size == tape["size"] and st.st_mtime_ns != tape["mtime_ns"]:
        return None  # the same size, written since: rewritten in place, not appended to
    if _tail_hash(fd, scanned) != tape["tail"]:
        return None
    idx = TapeIndex(path)
    n = meta["calls"]
    pos = meta_len + keys_len
    keys = orjson.loads(data[meta_len:pos])
    if type(keys) is not list or len(keys) != n or (n and set(map(type, keys)) != {str}):
        return None
    for (name, typecode, itemsize, count), attr in zip(meta["columns"], _COLUMNS, strict=True):
        col = array(typecode)
        if name != attr or col.itemsize != itemsize or count != n:
            return None
        col.frombytes(data[pos : pos + count * itemsize])
        pos += count * itemsize
        setattr(idx, attr, col)
    side_effects = bytearray(data[pos : pos + n])
    ids = array("I")
    ids.frombytes(data[pos + n :])
    data.release()
    del raw  # the entry's bytes are copied into the columns: free them
    if len(side_effects) != n or len(ids) != 2 * n:
        return None
    tools, fps = meta["tools"], meta["fingerprints"]
    if set(map(type, tools + fps)) - {str}:
        return None
    idx.keys = keys
    idx.side_effects = side_effects
    idx.tools = _expand(tools, ids[:n])
    idx.fingerprints = _expand(fps, ids[n:])
    idx._strings = {s.encode(): s for s in tools + fps}
    idx.expires = {int(i): str(e) for i, e in meta["expires"]}
    idx.header = meta["header"] if isinstance(meta["header"], dict) else None
    for line in meta["manifest_lines"]:
        raw = line.encode()
        rec = orjson.loads(raw)
        manifest = ToolManifest.from_record(rec)
        idx.manifests[manifest.name] = manifest
        idx.manifest_lines[manifest.name] = raw
        note_traced(idx, manifest.name, rec)
    fp_forms = meta.get("fp_forms")
    if not isinstance(fp_forms, dict) or not all(type(k) is str and type(v) is int for k, v in fp_forms.items()):
        return None  # an entry from before fingerprint forms: scan
    idx.fp_forms = fp_forms
    idx.unknown_lines = int(meta["unknown_lines"])
    idx.scanned, idx.size, idx.line_count = scanned, scanned, int(meta["line_count"])
    idx.from_cache = True
    if not _spot_check(idx, fd) or not _extras(idx, meta["extra_spans"], fd):
        return None
    return idx


def _expand(table: list[str], ids: array[int]) -> list[str]:
    if len(table) == 1 and (not ids or max(ids) == 0):
        return [table[0]] * len(ids)  # one tool: one list repeat, no per-call lookup
    return list(map(table.__getitem__, ids))


def _spot_check(idx: TapeIndex, fd: int) -> bool:
    """Decode the first, middle and last call: each must be where the entry says, with its key and seq."""
    n = len(idx)
    for i in {0, n // 2, n - 1} if n else ():
        off, length = idx.offsets[i], idx.lengths[i]
        if not 0 <= off < off + length <= idx.scanned:
            return False
        raw = os.pread(fd, length, off)
        if not raw.endswith(b"\n") or (off and os.pread(fd, 1, off - 1) != b"\n"):
            return False
        obj = orjson.loads(raw)
        if type(obj) is not dict or obj.get("seq") != idx.seqs[i] or obj.get("key", idx.keys[i]) != idx.keys[i]:
            return False
    return True


def _extras(idx: TapeIndex, spans: Any, fd: int) -> bool:
    """Read the note and phase lines again from where the entry says they are (it keeps no values)."""
    if type(spans) is not list:
        return False
    for span in spans:
        if type(span) is not list or len(span) != 3 or set(map(type, span)) != {int}:
            return False
        off, length, line = span
        if not 0 <= off < off + length <= idx.scanned or (off and os.pread(fd, 1, off - 1) != b"\n"):
            return False
        if not reindex_extra(idx, os.pread(fd, length, off), off, line):
            return False
    return True
