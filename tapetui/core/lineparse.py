"""The parser of tape lines: what one scan of a tape's bytes adds to its :class:`~tapetui.core.index.TapeIndex`.

A line in the writer's own layout (:func:`tapetui.core.tapefile.call_line`) is indexed from its leading
fields without a JSON parse (:data:`_FAST`); anything else, and every line of a validating scan
(``check``), is parsed whole, every stored key checked against its arguments. The lines of a validating
scan are decoded in one pass and their calls checked a column at a time (:func:`_slow`): ``check`` reads
every golden of a folder, and this is most of its time.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from itertools import accumulate
from operator import attrgetter, itemgetter
from typing import Any

import orjson

from tapetui.core.canon import canon, canonical_json
from tapetui.core.errors import TapeError
from tapetui.core.extralines import extra_line
from tapetui.core.fingerprint import ToolManifest
from tapetui.core.freshstack import on_fresh_stack
from tapetui.core.index import TapeIndex, _call_from_obj, _json_problem, note_traced
from tapetui.core.keys import key_of_json
from tapetui.core.turns import TURN
from tapetui.core.typedlines import CALL_PREFIX, DECODE_ERRORS, decode_call, fits

__all__ = ["scan_lines"]

# The fields call_line writes first, in this order. Lines that do not match (hand
# written, escaped names, older writers) take the slow path: a full parse.
_FAST = re.compile(  # anchored at a line start: a '{' earlier on the line must not hide a malformed line
    rb'(?m)^\{"type":"call","seq":(\d{1,18}),"tool":"([^"\\\n]*)","key":"([^"\\\n]*)","fingerprint":"([^"\\\n]*)",'
    rb'"side_effect":(true|false),"ms":(-?[0-9.eE+-]+),"expires_at":(null|"[^"\\\n]*"),[^\n]*\}\n'
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
    """Parse whole lines in ``buf[start:stop]`` (``stop`` just after a newline) with a full JSON decode.

    Every line of a validating scan (``check``) comes here. The lines are decoded in one pass; when every
    call line among them has the fields the writer gives it, with their types, the calls are checked and
    indexed a column at a time (:func:`_call_columns`, :func:`_add_columns`) and only the other lines (header,
    tools, notes, model turns) one by one, in file order; anything else (a malformed or blank line, a call
    missing a field) goes line by line through :func:`_parse_line`, which names the first problem. Both ways
    index the same.
    """
    chunk = buf[start:stop]
    raws = chunk.split(b"\n")
    raws.pop()
    if idx.verify_keys and fits(chunk):
        done = _typed(idx, raws, base + start, line_no)
        if done is not None:
            return done
    try:
        objs = list(map(orjson.loads, raws))
    except orjson.JSONDecodeError:
        return _line_by_line(idx, raws, base + start, line_no)
    kinds = [o.get("type") if type(o) is dict else None for o in objs]
    calls = [i for i, k in enumerate(kinds) if k == "call"]
    columns = _call_columns([objs[i] for i in calls]) if calls else None
    if (calls and columns is None) or None in kinds:  # an odd call, or a line that may be one (no type)
        return _line_by_line(idx, raws, base + start, line_no, objs)
    lengths = [len(r) + 1 for r in raws]
    offsets = list(accumulate(lengths, initial=base + start))
    for i, kind in enumerate(kinds):  # the other lines, in file order (a later tool line overrides an earlier)
        if kind != "call":
            _parse_line(idx, raws[i], offsets[i], lengths[i], line_no + 1 + i, objs[i])
    if columns is not None:
        _add_columns(
            idx, columns, [offsets[i] for i in calls], [lengths[i] for i in calls], [line_no + 1 + i for i in calls]
        )
    return line_no + len(raws)


_CALL_COLUMNS = attrgetter("seq", "tool", "key", "fingerprint", "side_effect", "ms", "expires_at", "args")


def _typed(idx: TapeIndex, raws: list[bytes], offset: int, line_no: int) -> int | None:
    """:func:`_slow` of a validating scan through typed call lines (:mod:`tapetui.core.typedlines`): each call line
    in the writer's layout decoded and type-checked by msgspec as it is read, any other line by orjson. None, with
    ``idx`` untouched, unless every line is one the dict path would index as it stands (a call line of the writer's
    fields and types, its stored key that of its arguments; any other line an object with a ``type`` other than
    ``"call"``): the dict path then reads them all again, and names what it finds."""
    try:
        decoded = _decode_typed(raws)
    except (*DECODE_ERRORS, orjson.JSONDecodeError):
        return None
    if decoded is None:
        return None
    calls, at, others = decoded
    columns: tuple[Any, ...] = ()
    if calls:
        columns = tuple(zip(*map(_CALL_COLUMNS, calls), strict=True))
        seqs, tools, keys, _, _, _, _, argss = columns
        if min(seqs) < 1 or max(seqs) >= 2**63 or "" in tools:
            return None
        # a stored key that is not its arguments' (the dict path notes which), or arguments holding an integer past
        # 64 bits, which orjson decodes as a float and msgspec as an int (the dict path keys what orjson decodes)
        if not _stored_keys_hold(tools, keys, argss):
            return None
    lengths = [len(r) + 1 for r in raws]
    offsets = list(accumulate(lengths, initial=offset))
    for i, obj in others:  # in file order, before the calls (as the dict path: a later tool line overrides)
        _parse_line(idx, raws[i], offsets[i], lengths[i], line_no + 1 + i, obj)
    if calls:
        offs, lens, nos = [offsets[i] for i in at], [lengths[i] for i in at], [line_no + 1 + i for i in at]
        _add_columns(idx, columns, offs, lens, nos, keys_hold=True)
    return line_no + len(raws)


def _decode_typed(raws: list[bytes]) -> tuple[list[Any], list[int], list[tuple[int, Any]]] | None:
    """``(calls, their line positions, [(position, object)] of the other lines)``, the calls typed; None when a
    line may be a call that is not in the writer's layout. Raises what a decoder raises for a line it refuses."""
    if len(raws) > 1 and not raws[0].startswith(CALL_PREFIX):  # most tapes: a header, then call lines only
        with contextlib.suppress(*DECODE_ERRORS):
            calls = list(map(decode_call, raws[1:]))
            header = orjson.loads(raws[0])
            kind = header.get("type") if type(header) is dict else None
            return (calls, list(range(1, len(raws))), [(0, header)]) if kind is not None and kind != "call" else None
    calls, at, others = [], [], []
    for i, raw in enumerate(raws):
        if raw.startswith(CALL_PREFIX):
            calls.append(decode_call(raw))
            at.append(i)
        else:
            obj = orjson.loads(raw)
            kind = obj.get("type") if type(obj) is dict else None
            if kind is None or kind == "call":  # a call in another layout, or a line that may be one
                return None
            others.append((i, obj))
    return calls, at, others


def _line_by_line(idx: TapeIndex, raws: list[bytes], offset: int, line_no: int, objs: list[Any] | None = None) -> int:
    """Index ``raws`` (whole lines from file offset ``offset``, after line ``line_no``) one at a time."""
    for n, raw in enumerate(raws):
        line_no += 1
        length = len(raw) + 1
        if objs is not None:
            _parse_line(idx, raw, offset, length, line_no, objs[n])
        elif raw.strip():
            _parse_line(idx, raw, offset, length, line_no)
        offset += length
    return line_no


_CALL_FIELDS = itemgetter("seq", "tool", "key", "fingerprint", "side_effect", "ms", "expires_at", "args")
_INT, _STR, _NUMBERS, _FLAGS = {int}, {str}, {int, float}, {bool}
_MAYBE_STR, _MAYBE_DICT = {str, type(None)}, {dict, type(None)}


def _call_columns(calls: list[dict[str, Any]]) -> tuple[tuple[Any, ...], ...] | None:
    """The fields of call lines as columns, when every line has each field the writer writes, of its type
    (else None: the lines are read one by one, and the first odd one named)."""
    try:
        seqs, tools, keys, fps, ses, mss, exps, argss = zip(*map(_CALL_FIELDS, calls), strict=True)
    except KeyError:
        return None
    if (
        set(map(type, seqs)) != _INT
        or min(seqs) < 1
        or max(seqs) >= 2**63
        or set(map(type, tools)) != _STR
        or "" in tools
        or set(map(type, keys)) != _STR
        or set(map(type, fps)) != _STR
        or not set(map(type, ses)) <= _FLAGS
        or not set(map(type, mss)) <= _NUMBERS
        or not set(map(type, exps)) <= _MAYBE_STR
        or not {type(c.get("error")) for c in calls} <= _MAYBE_DICT
    ):
        return None
    return seqs, tools, keys, fps, ses, mss, exps, argss


def _stored_keys_hold(tools: tuple[str, ...], keys: tuple[str, ...], argss: tuple[Any, ...]) -> bool:
    """Whether each stored key is the key of its stored arguments as they stand (their JSON, sorted: the writer
    stores them canonical already). False when one is not, or cannot be written (:func:`_add_columns` then looks
    closer)."""
    dumps, sort_keys = orjson.dumps, orjson.OPT_SORT_KEYS
    try:
        computed = list(map(key_of_json, tools, [dumps({} if a is None else a, option=sort_keys) for a in argss]))
    except TypeError:  # nested past what orjson writes, or an integer past 64 bits
        return False
    return computed == list(keys)


def _add_columns(
    idx: TapeIndex,
    columns: tuple[tuple[Any, ...], ...],
    offsets: Sequence[int],
    lengths: Sequence[int],
    lines: Sequence[int],
    keys_hold: bool = False,
) -> None:
    """Append checked call columns to ``idx``, each stored key checked against its arguments as in
    :func:`_parse_line` (the canonical JSON of stored arguments hashes to the key; else :func:`_verify_key`).
    ``keys_hold``: the caller found every stored key its arguments' already (:func:`_stored_keys_hold`)."""
    seqs, tools, keys, fps, ses, mss, exps, argss = columns
    if not keys_hold and not _stored_keys_hold(tools, keys, argss):
        for i, (t, key, a) in enumerate(zip(tools, keys, argss, strict=True)):
            if key != _key_or_none(t, {} if a is None else a):
                _verify_key(idx, seqs[i], t, key, a, lines[i])
    first = len(idx.seqs)
    if exps.count(None) != len(exps):
        for i, e in enumerate(exps):
            if e is not None:
                idx.expires[first + i] = e
    idx.seqs.extend(seqs)
    idx.tools.extend(tools)
    idx.keys.extend(keys)
    idx.fingerprints.extend(fps)
    idx.side_effects.extend(ses)
    idx.ms.extend(mss)
    idx.offsets.extend(offsets)
    idx.lengths.extend(lengths)
    idx.lines.extend(lines)


_UNPARSED: Any = object()


def _key_or_none(tool: str, args: Any) -> str | None:
    """The key of arguments as stored (their JSON, sorted), or None when they have none (too deep)."""
    try:
        return key_of_json(tool, orjson.dumps({} if args is None else args, option=orjson.OPT_SORT_KEYS))
    except TypeError:
        return None


def _stored_key(tool: str, args: Any) -> str | None:
    """``key_of(tool, args)``, or None when the arguments cannot be encoded (nested past what this stack walks)."""
    try:
        return key_of_json(tool, canonical_json(canon(args)))
    except (TypeError, TapeError, RecursionError):
        return None


def _verify_key(idx: TapeIndex, seq: int, tool: str, key: str, args: Any, line_no: int) -> None:
    """Note a call whose stored key is not ``key_of(tool, args)`` of its stored arguments (edited by hand).

    Called when the arguments' JSON as stored does not hash to the key (``_parse_line`` tries that first:
    the writer stores canonical arguments, so that costs a dump and a hash); checked again through canon.
    """
    if args is None:
        args = {}  # as a call without arguments is recorded, and as a missing key is filled in
    computed = _stored_key(tool, args)
    if computed is None:
        # nested about as deep as Python walks: the recorder keyed it with the stack its caller left it, so it is keyed
        # again on a whole stack of its own (the same answer in one check process or several, at any call depth)
        computed = on_fresh_stack(lambda: _stored_key(tool, args))
    if computed != key:
        idx.key_mismatches.append((line_no, seq, tool, key, computed))


def _parse_line(idx: TapeIndex, raw: bytes, offset: int, length: int, line_no: int, obj: Any = _UNPARSED) -> None:
    """Index one line (``obj``: its decoded JSON, when the caller has it)."""
    path = idx.path
    if obj is _UNPARSED:
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
