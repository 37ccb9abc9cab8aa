"""The index of a tape: what one scan knows (header, tool manifests, and per call what replay needs), and
the parser of tape lines that fills it.

A line in the writer's own layout (:func:`tapetui.core.tapefile.call_line`) is indexed from its leading
fields without a JSON parse; anything else is parsed whole. The arguments and result of a call are decoded
when they are asked for (:meth:`TapeIndex.record`, :meth:`TapeIndex.outcome`), and checked against the
index then. Files are read by :mod:`tapetui.core.tapefile`.
"""

from __future__ import annotations

import hashlib
import os
import re
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.cachedir import forget
from tapetui.core.canon import canon, canonical_json, dumps
from tapetui.core.errors import TapeError
from tapetui.core.extralines import NoteRecord, PhaseRecord, TurnRecord, extra_line, reindex_extra
from tapetui.core.files import file_sha256, open_regular
from tapetui.core.fingerprint import ToolManifest
from tapetui.core.keys import call_key, key_of_json
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
    "scan_lines",
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


def scan_lines(idx: TapeIndex, buf: bytes, end: int, base: int, line_no: int, validate: bool) -> int:
    """Index the complete lines in ``buf[:end]`` (``buf`` starts at file offset ``base``, after line ``line_no``);
    returns the number of the last line indexed. ``validate``: parse every line fully."""
    pos = 0
    idx.verify_keys = validate
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
        stored = key
        assert isinstance(stored, str)  # checked above, or taken from the record
        if stored is obj.get("key"):  # a stored key, not one filled in: it must be the key of the stored arguments
            args = obj.get("args")
            try:  # as the writer stores them, arguments are canonical already: their JSON hashes to the key
                same = key_of_json(tool, canonical_json({} if args is None else args)) == stored
            except TypeError:
                same = False
            if not same:
                _verify_key(idx, seq, tool, stored, args, line_no)
        idx._add(
            seq,
            tool,
            stored,
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
        note_traced(idx, name, obj)
        if form != 1:
            idx.fp_forms[manifest.fingerprint] = form
    elif kind == "session":
        if idx.header is None:
            idx.header = obj
    elif kind == "note" or kind == "phase" or kind == TURN:
        extra_line(idx, obj, kind, line_no, offset, length)
        idx.extra_spans.append((offset, length, line_no))
    elif kind is None:
        raise TapeError(f"{path}:{line_no}: line has no 'type' and is not a call (needs 'seq' and 'tool')")
    elif isinstance(kind, str):
        idx.unknown_lines += 1  # a line kind from a newer format: kept on disk, ignored here
    else:
        raise TapeError(f"{path}:{line_no}: 'type' must be a string, got {type(kind).__name__}")


def note_traced(idx: TapeIndex, name: str, rec: dict[str, Any]) -> None:
    """A tool line's ``from_trace`` (the contract fields a trace held: its tape was imported), kept by ``idx``;
    a newer line of the tool without it (recorded again, a whole contract accepted) ends it."""
    held = rec.get("from_trace")
    if isinstance(held, list) and all(isinstance(f, str) for f in held):
        idx.traced[name] = tuple(held)
    else:
        idx.traced.pop(name, None)
