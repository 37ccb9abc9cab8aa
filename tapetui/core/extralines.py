"""The lines of a tape that are not calls: notes, phases and model turns, as the index keeps them.

Each is parsed whole and checked field by field when a tape is scanned (and again when the index cache is
used: the cache keeps where these lines are, not what they hold).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from tapetui.core.errors import TapeError
from tapetui.core.turns import TURN, turn_key_of

if TYPE_CHECKING:
    from tapetui.core.index import TapeIndex

__all__ = ["NoteRecord", "PhaseRecord", "TurnRecord", "extra_line", "reindex_extra"]


@dataclass(frozen=True, slots=True)
class NoteRecord:
    """One ``note`` line: a labelled value (a model response, the final output) recorded between calls.

    Attributes:
        kind: its label (``"final"``, ``"response"``...); notes are compared by kind and position among notes.
        value: the value as recorded (redacted), any JSON value.
        after: the step of the last call line before it (0 when none).
        phase: the phase it was recorded in, or None.
        line: its line number in the tape.
    """

    kind: str
    value: Any
    after: int
    phase: str | None
    line: int


@dataclass(frozen=True, slots=True)
class PhaseRecord:
    """One ``phase`` line: the start of a named phase of the session, after step ``after`` (0 when none)."""

    name: str
    after: int
    line: int


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """One ``model`` line as the index keeps it (its request and response are read again when asked for:
    :meth:`TapeIndex.turn`).

    Attributes:
        seq: its step, in the session's one sequence of tool calls and turns.
        model: the model's name as the framework names it.
        key: its stored key (``model:`` + 12 hex chars).
        source: the adapter or importer that wrote it.
        stream: recorded from a streamed response.
        tokens: the tokens its usage counts (input + output), 0 without usage.
        has_usage: the turn records usage.
        requested: the tools its response asked for, in order.
        error: the turn records an error (the model call raised) instead of a response.
        line / offset / length: where it is in the tape.
    """

    seq: int
    model: str
    key: str
    source: str
    stream: bool
    tokens: int
    has_usage: bool
    requested: tuple[str, ...]
    error: bool
    line: int
    offset: int
    length: int


def extra_line(idx: TapeIndex, obj: dict[str, Any], kind: str, line_no: int, offset: int, length: int) -> None:
    """Index a ``note``, ``phase`` or ``model`` line (see :class:`NoteRecord`, :class:`PhaseRecord`,
    :class:`TurnRecord`)."""
    where = f"{idx.path}:{line_no}"
    if kind == TURN:
        _turn_line(idx, obj, where, line_no, offset, length)
        return
    after = obj.get("after", 0)
    if type(after) is not int or not 0 <= after < 2**63:
        raise TapeError(f"{where}: {kind} 'after' must be a step number (an integer >= 0), got {repr(after)[:40]}")
    if kind == "phase":
        name = obj.get("name")
        if type(name) is not str or not name:
            raise TapeError(f"{where}: phase has no valid 'name' (a non-empty string), got {repr(name)[:40]}")
        idx.phases.append(PhaseRecord(name, after, line_no))
        return
    label, phase = obj.get("kind"), obj.get("phase")
    if type(label) is not str or not label:
        raise TapeError(f"{where}: note has no valid 'kind' (a non-empty string), got {repr(label)[:40]}")
    if phase is not None and (type(phase) is not str or not phase):
        raise TapeError(f"{where}: note 'phase' must be a non-empty string or null, got {repr(phase)[:40]}")
    idx.notes.append(NoteRecord(label, obj.get("value"), after, phase, line_no))


def _turn_line(idx: TapeIndex, obj: dict[str, Any], where: str, line_no: int, offset: int, length: int) -> None:
    """Index a ``model`` line, checked field by field (``docs/format.md``, "Model turns")."""
    seq, model, key, source = obj.get("seq"), obj.get("model"), obj.get("key"), obj.get("source")
    if type(seq) is not int or not 1 <= seq < 2**63:
        raise TapeError(f"{where}: model turn has no valid 'seq' (a positive 64-bit integer), got {repr(seq)[:40]}")
    if type(model) is not str or not model:
        raise TapeError(f"{where}: model turn has no valid 'model' (the model's name, a non-empty string)")
    if type(key) is not str or not key.startswith(TURN + ":"):
        raise TapeError(f"{where}: model turn has no valid 'key' ('model:' and 12 hex characters)")
    if source is not None and type(source) is not str:
        raise TapeError(f"{where}: model turn 'source' must be a string")
    request = obj.get("request")
    if type(request) is not dict or type(request.get("messages", [])) is not list:
        raise TapeError(f"{where}: model turn 'request' must be an object with 'messages' (a list)")
    response, error = obj.get("response"), obj.get("error")
    if error is not None and type(error) is not dict:
        raise TapeError(f"{where}: model turn 'error' must be an object with 'type' and 'message'")
    if error is None and (type(response) is not dict or type(response.get("parts", [])) is not list):
        raise TapeError(f"{where}: model turn 'response' must be an object with 'parts' (a list)")
    if type(response) is dict:
        for n, p in enumerate(response.get("parts", [])):
            if type(p) is not dict or type(p.get("type")) is not str:
                raise TapeError(f"{where}: model turn 'response.parts[{n}]' must be an object with a 'type'")
    usage = obj.get("usage")
    if usage is not None and type(usage) is not dict:
        raise TapeError(f"{where}: model turn 'usage' must be an object of token counts")
    for name in ("input", "output", "cache_read", "cache_write"):
        v = usage.get(name) if usage else None
        if v is not None and (type(v) is not int or v < 0):
            raise TapeError(f"{where}: model turn 'usage.{name}' must be a whole number of tokens (at least 0)")
    events = obj.get("events")
    if events is not None and type(events) is not list:
        raise TapeError(f"{where}: model turn 'events' must be a list")
    for n, e in enumerate(events or ()):
        if type(e) is not dict or type(e.get("type")) is not str:
            raise TapeError(f"{where}: model turn 'events[{n}]' must be an object with a 'type'")
    if idx.verify_keys:
        try:
            computed: str | None = turn_key_of(model, request)
        except (TypeError, TapeError):
            computed = None
        if computed != key:
            idx.key_mismatches.append((line_no, seq, TURN, key, computed))
    calls = response.get("parts", []) if type(response) is dict else []
    requested = tuple(
        str(p.get("name")) for p in calls if type(p) is dict and p.get("type") == "tool_call" and p.get("name")
    )
    total = 0
    if usage:
        for k in ("input", "output"):
            v = usage.get(k)
            if type(v) is int and v >= 0:
                total += v
    idx.turns.append(
        TurnRecord(
            seq=seq,
            model=model,
            key=key,
            source=source or "",
            stream=obj.get("stream") is True,
            tokens=total,
            has_usage=bool(usage),
            requested=requested,
            error=error is not None,
            line=line_no,
            offset=offset,
            length=length,
        )
    )


def reindex_extra(idx: TapeIndex, raw: bytes, offset: int, line_no: int) -> bool:
    """Index the note, phase or model line ``raw`` (ending with its newline, at file offset ``offset``) again: the index
    cache keeps where these lines are, not what they hold. False when ``raw`` is not such a line.

    Raises:
        TapeError: the line is one, but malformed (as a scan would say).
    """
    if not raw.endswith(b"\n"):
        return False
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return False
    kind = obj.get("type") if isinstance(obj, dict) else None
    if kind != "note" and kind != "phase" and kind != TURN:
        return False
    extra_line(idx, obj, kind, line_no, offset, len(raw))
    idx.extra_spans.append((offset, len(raw), line_no))
    return True
