"""The index of a tape: what one scan knows (header, tool manifests, and per call what replay needs).

Lines are parsed into it by :mod:`tapetui.core.lineparse`. The arguments and result of a call are decoded
when they are asked for (:meth:`TapeIndex.record`, :meth:`TapeIndex.outcome`), and checked against the
index then. Files are read by :mod:`tapetui.core.tapefile`.
"""

from __future__ import annotations

import hashlib
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.cachedir import forget
from tapetui.core.canon import dumps
from tapetui.core.errors import TapeError
from tapetui.core.extralines import NoteRecord, PhaseRecord, TurnRecord, reindex_extra
from tapetui.core.files import file_sha256, open_regular
from tapetui.core.fingerprint import ToolManifest
from tapetui.core.keys import call_key
from tapetui.core.turns import TURN

__all__ = [
    "CallRecord",
    "Consumed",
    "NoteRecord",
    "PhaseRecord",
    "TapeIndex",
    "TornTail",
    "TurnRecord",
    "reindex_extra",
]


def _json_problem(e: Exception) -> str:
    """What is wrong with a line orjson refused: too deep is not "invalid" (the value may be valid JSON)."""
    if "depth limit" in str(e):
        return "nested more than 1,024 levels deep, beyond what tapetui reads; this line cannot be shown or replayed"
    return f"invalid JSON: {e}"


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


class TapeIndex:
    """What one scan of a tape knows: header, manifests, and per call the fields replay needs."""

    def __init__(self, path: Path) -> None:
        self.path = path if isinstance(path, Path) else Path(path)
        self.header: dict[str, Any] | None = None
        self.manifests: dict[str, ToolManifest] = {}
        self.manifest_lines: dict[str, bytes] = {}
        self.traced: dict[str, tuple[str, ...]] = {}  # tool → the contract fields a trace held (its "from_trace")
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
        self._key_next: array[int] | None = None
        self._strings: dict[bytes, str] = {}  # tool names and fingerprints, decoded once each
        self.torn: TornTail | None = None
        self.unknown_lines = 0
        self.notes: list[NoteRecord] = []
        self.phases: list[PhaseRecord] = []
        self.turns: list[TurnRecord] = []  # the model turns, in file order
        # a model line's stored key is checked against its request on a validating scan (check, review) only: it
        # costs a dump and a hash of the whole request, as a call line's check does on the slow path
        self.verify_keys = False
        # (offset, length, line) of every note and phase line, in file order: what the index cache keeps of them
        # (their values stay out of it; a cached index reads these lines again)
        self.extra_spans: list[tuple[int, int, int]] = []
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
        order never needs it (see :meth:`Consumed.take`), and for a million calls it costs most of a second."""
        return self._chains()[0]

    @property
    def key_next(self) -> array[int]:
        """Call → the next call recorded with the same key, or -1."""
        return self._chains()[1]

    def _chains(self) -> tuple[dict[str, int], array[int]]:
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
            data: bytes = fh.read(n)
            return data
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
            forget(self.path)
        return TapeError(f"{self.path}:{self.lines[i]}: {_json_problem(e)}")

    def _changed(self, i: int) -> TapeError:
        forget(self.path)
        return TapeError(
            f"{self.path}:{self.lines[i]}: the tape changed after it was opened (this line is not "
            f"the call indexed there); open it again"
        )

    def turn(self, k: int, fh: Any = None) -> dict[str, Any]:
        """Model turn ``k`` (0-based, in file order) decoded whole: its line as an object.

        Raises:
            TapeError: the line is no longer the turn indexed there.
        """
        t = self.turns[k]
        if self.data is not None:
            raw = self.data[t.offset : t.offset + t.length]
        elif isinstance(fh, int):
            raw = os.pread(fh, t.length, t.offset)
        elif fh is not None:
            fh.seek(t.offset)
            raw = fh.read(t.length)
        else:
            fd = open_regular(self.path)
            try:
                raw = os.pread(fd, t.length, t.offset)
            finally:
                os.close(fd)
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            obj = None
        if type(obj) is not dict or obj.get("key") != t.key or obj.get("type") != TURN:
            forget(self.path)
            raise TapeError(
                f"{self.path}:{t.line}: the tape changed after it was opened (this line is not the model turn "
                "indexed there); open it again"
            )
        return obj

    def turn_renumbered(self, k: int, seq: int, fh: Any = None) -> bytes:
        """Model turn ``k``'s line as recorded, with ``seq`` as its step (carried into a fill's candidate)."""
        obj = dict(self.turn(k, fh))
        obj["seq"] = seq
        return dumps(obj, newline=True)

    def renumbered(self, i: int, seq: int, fh: Any = None) -> bytes:
        """Call ``i``'s line as recorded, unknown fields kept, with ``seq`` as its step (carried into a fill)."""
        raw = dict(self.record(i, fh).raw)
        raw["seq"] = seq
        return dumps(raw, newline=True)

    def sha256(self) -> str | None:
        """The sha256 of the tape's bytes: the kept ones when they are the whole file as scanned, else read
        again (None when it cannot be)."""
        if self.data is not None and len(self.data) == self.size:
            return hashlib.sha256(self.data).hexdigest()
        return file_sha256(self.path, follow_symlinks=True)

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


class Consumed:
    """Which recorded calls of an index a run has used: a replay serves each recorded call once."""

    __slots__ = ("_low", "flags", "index")

    def __init__(self, index: TapeIndex) -> None:
        self.index = index
        self.flags = bytearray(len(index))  # call → 1 once used; the caller sets it
        self._low = 0  # no call before this one is unused

    def take(self, key: str) -> int | None:
        """The first unused recorded call with ``key`` (not marked used: the caller does, once it serves it)."""
        index = self.index
        consumed = self.flags
        # A replay that follows the tape's order finds its call first in line: the lowest unused call,
        # which, if it has this key, is the first unused one with it (no key table needed).
        low = consumed.find(0, self._low)
        if low < 0:  # every call used
            self._low = len(consumed)
            return None
        self._low = low
        if index.keys[low] == key:
            return low
        i = index.key_first.get(key)
        if i is None:
            return None
        following = index.key_next
        while consumed[i]:
            i = following[i]
            if i < 0:
                return None
        return i

    def unused(self) -> list[int]:
        """The calls not used so far, in file order."""
        flags = self.flags
        return [i for i, used in enumerate(flags) if not used] if 0 in flags else []

    def nearest(self, tool: str, seq: int) -> int | None:
        """The recorded call of ``tool`` nearest to step ``seq``, unused ones first; None when there is none."""
        idx, flags = self.index, self.flags
        best: int | None = None
        best_d: tuple[int, int] | None = None
        for i, t in enumerate(idx.tools):
            if t != tool:
                continue
            d = (flags[i], abs(idx.seqs[i] - seq))
            if best_d is None or d < best_d:
                best, best_d = i, d
        return best


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


def note_traced(idx: TapeIndex, name: str, rec: dict[str, Any]) -> None:
    """A tool line's ``from_trace`` (the contract fields a trace held: its tape was imported), kept by ``idx``;
    a newer line of the tool without it (recorded again, a whole contract accepted) ends it."""
    held = rec.get("from_trace")
    if isinstance(held, list) and all(isinstance(f, str) for f in held):
        idx.traced[name] = tuple(held)
    else:
        idx.traced.pop(name, None)
