"""Typed decoding of the two lines ``check`` reads most: a golden's call lines and a run log's ``hit`` events.

A validating read (``check``) has to parse every line of every golden and run log and check the type of each
field it relies on. Decoded into dicts by orjson, that type check is Python work per field; decoded by msgspec
into a :class:`msgspec.Struct` of the fields' types, it is done in C as the bytes are read, and a line costs
less than orjson's decode alone. That is the whole purpose of this module: the readers that use it
(:func:`tapetui.core.lineparse.scan_lines` on a validating scan, :mod:`tapetui.review.plainrun`) take a typed
line only as a faster way to reach the answer the dict path gives, and fall back to that path, from the start,
whenever a line is anything else.

**The contract** (``tests/test_typed_lines.py`` holds it against orjson with generated and mutated lines): a line
these decoders accept is a line orjson accepts, and each field has the value orjson gives it, so the reader
concludes what the dict path concludes. Where msgspec and orjson differ, the typed path is not taken:

- an integer outside 64 bits: orjson makes a float of it (or refuses it, past a double's range), msgspec an int of
  any size. Every such integer is written with at least 19 digits: bytes holding a run of 19 digits are read the
  dict way (:func:`fits`). In the typed fields a reader wants an int, the Struct takes an int64 only (:data:`Int64`);
- nesting past the 1,024 levels orjson decodes, which msgspec decodes where its own limit allows (on Python 3.11
  the recursion limit, raised by a caller past 1,024; from 3.12 a limit of its own, thousands deep): bytes that
  may be nested so deep are read the dict way (:func:`fits`);
- a field the Struct does not name: refused (``forbid_unknown_fields``), never skipped, since msgspec's skipping
  of a value does not validate it as a decode does (it passes bytes that are not UTF-8).

The fields are those the writers write (:func:`tapetui.core.tapefile.call_line`; a replay's ``hit``), each of
the type its reader requires (:func:`tapetui.core.lineparse._call_columns`,
:func:`tapetui.core.runlog.event_problem`); values the readers never type-check are ``Any``, decoded in full.
"""

from __future__ import annotations

import sys
from typing import Annotated, Any

import msgspec

__all__ = ["CALL_PREFIX", "DECODE_ERRORS", "CallLine", "HitEvent", "Int64", "decode_call", "decode_hit", "fits"]

# the start of a call line as call_line writes it: only lines that start so are tried typed (any other line goes to
# orjson directly, without a failed attempt first)
CALL_PREFIX = b'{"type":"call",'

# what a typed decode raises for a line it does not take (the reader then takes the dict path)
DECODE_ERRORS = (msgspec.DecodeError, msgspec.ValidationError, RecursionError)

_ORJSON_DEPTH = 1024  # orjson refuses a document nested this deep


# an integer orjson decodes as an int (beyond 64 bits it makes a float of it, which a reader refuses where it wants an
# int, as msgspec would take it as one); int64 only, as msgspec bounds go: an unsigned one past it is read as a dict
Int64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]


class CallLine(msgspec.Struct, tag_field="type", tag="call", forbid_unknown_fields=True):
    """A call line: the fields a validating scan requires, of their types, and every other field a writer puts
    on a call line (decoded in full, as orjson decodes them)."""

    seq: Int64
    tool: str
    key: str
    fingerprint: str
    side_effect: bool
    ms: float  # an integer in JSON too: the index keeps it as a float
    expires_at: str | None
    args: Any
    recorded_at: Any = None
    result: Any = None
    error: dict[str, Any] | None = None
    requested_tool: Any = None
    order: Any = None
    call_id: Any = None
    rerecorded: Any = None


class HitEvent(msgspec.Struct, tag_field="event", tag="hit", forbid_unknown_fields=True):
    """A plain ``hit`` event, as a replay writes it: the fields :func:`~tapetui.core.runlog.event_problem` types,
    of those types, and the time (any value: no reader types it). A hit with anything more (``tolerated``,
    ``source``, ``override``...) is not one."""

    seq: Int64 | None = None
    tool: str | None = None
    key: str | None = None
    step: Int64 | None = None
    run: str | None = None
    group: str | None = None
    at: Any = None


decode_call = msgspec.json.Decoder(CallLine).decode
decode_hit = msgspec.json.Decoder(HitEvent).decode


def fits(chunk: bytes) -> bool:
    """Whether msgspec decodes the lines in ``chunk`` as orjson does (see the module doc), so that a typed read may
    stand in for the dict read: no run of 19 digits (no integer outside 64 bits), and no nesting orjson refuses that
    msgspec would decode: none can be on Python 3.11 with the recursion limit at most 1,024 (msgspec stops short of
    orjson's depth there), nor in a line of fewer than 1,024 brackets and braces. One pass over the bytes (a line at
    a time only when the chunk holds 1,024 brackets and braces or more)."""
    shape = chunk.translate(_SHAPE)
    if _DIGITS_19 in shape:
        return False
    if _DEPTH_BOUNDED_BY_RECURSION and sys.getrecursionlimit() <= _ORJSON_DEPTH or shape.count(b"[") < _ORJSON_DEPTH:
        return True
    # each line is decoded on its own: bracket by bracket, a line of fewer than 1,024 is nested less deep
    return max(line.count(b"[") for line in shape.split(b"\n")) < _ORJSON_DEPTH


# every digit as "0", every bracket and brace as "[", a newline as itself, anything else as a space: what fits() reads
_SHAPE = bytes(
    0x30 if 0x30 <= b <= 0x39 else 0x5B if b in (0x5B, 0x7B) else b if b == 0x0A else 0x20 for b in range(256)
)
_DIGITS_19 = b"0" * 19
# before 3.12, msgspec's nesting is bounded by the recursion limit (Py_EnterRecursiveCall); from 3.12 it is not
_DEPTH_BOUNDED_BY_RECURSION = sys.version_info < (3, 12)
