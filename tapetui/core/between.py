"""What a session records between its calls: notes (``Tape.note``) and phases (``Tape.phase``).

Neither is a call: no key, no step of its own. A recording writes its line after the calls so far; a replay
logs an event instead; a fill does both, the line going into its candidate.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tapetui.core.clock import Clock, iso
from tapetui.core.codecs import json_form
from tapetui.core.errors import TapeError
from tapetui.core.fill import FillCandidate
from tapetui.core.redact import Redactor
from tapetui.core.runlog import EventKind
from tapetui.core.session import SessionFiles
from tapetui.core.tapefile import dump_line

__all__ = ["BetweenCalls"]


class BetweenCalls:
    """``note`` and ``phase`` for :class:`~tapetui.core.tape.Tape` (its base class: the attributes below are the
    tape's)."""

    path: Path
    _redactor: Redactor
    _clock: Clock
    _mu: threading.Lock
    _closed: bool
    _after: int
    _phase: str | None
    _files: SessionFiles
    _fill: FillCandidate | None
    _emit: Callable[..., None]  # the tape's (ToolServing)

    def note(self, kind: str, value: Any) -> None:
        """Record a labelled value of the session that is not a tool call: a model response, the final output.

        Its value is redacted like a call's arguments. Recording writes a ``note`` line after the calls so far
        (``after``: the step of the last one, 0 when none; ``phase``: the current phase); a replay never writes
        the golden and logs a ``note`` event instead; a fill does both, the line going into its candidate.
        Notes are no calls: they have no key and do not count in ``steps``.

        Args:
            kind: the note's label (``"final"``, ``"response"``...): notes are compared by kind and by their
                position among notes.
            value: any JSON value (a pydantic model as its JSON dump).

        Raises:
            TapeError: ``kind`` is not a non-empty string, ``value`` has no JSON form, or the tape is closed;
                nothing is written then.
        """
        kind = self._check_label(kind, "note kind")
        try:
            # redacted as the value of a key named ``kind``: note("api_key", ...) is a secret by its name too
            data = self._redactor.redact({kind: json_form(value, "value")})[kind]
        except (TypeError, TapeError) as e:  # Unrecordable is a TypeError, TooDeep a TapeError
            raise TapeError(f"{self.path}: note {kind!r}: its value cannot be recorded: {e}") from None
        with self._mu:
            after, phase = self._after, self._phase
            fields = {"kind": kind, "value": data, "after": after, "phase": phase}
            self._write_between("note", fields)

    def phase(self, name: str) -> None:
        """Mark the start of phase ``name`` of the session (``gather``, ``answer``...): the calls after it, up to
        the next phase, belong to it, and so do the notes.

        Recording writes a ``phase`` line (``after``: the step of the last call, 0 when none); a replay logs a
        ``phase`` event instead; a fill does both. Not a call: no key, not counted in ``steps``.

        Raises:
            TapeError: ``name`` is not a non-empty string, or the tape is closed; nothing is written then.
        """
        name = self._check_label(name, "phase name")
        with self._mu:
            self._write_between("phase", {"name": name, "after": self._after})
            self._phase = name

    def _check_label(self, text: Any, what: str) -> str:
        """A note kind or phase name, checked, and redacted as any text is (a label is no place for a secret)."""
        if type(text) is not str or not text.strip():
            got = "a blank string" if isinstance(text, str) else type(text).__name__
            raise TapeError(f"{self.path}: a {what} must be a non-blank string, got {got}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise TapeError(f"{self.path}: {what} is not valid UTF-8 text ({e.reason})") from None
        return self._redactor.redact_text(text)

    def _write_between(self, kind: EventKind, fields: dict[str, Any]) -> None:
        """Write a note or phase line where this run's lines go (between its calls), and log it; the caller holds
        the lock."""
        if self._closed:
            raise TapeError(f"{self.path}: tape is closed")
        try:
            line = dump_line({"type": kind, **fields, "recorded_at": iso(self._clock())})
        except (TypeError, TapeError) as e:  # an integer beyond 64 bits, a string that is not text...
            raise TapeError(f"{self.path}: this {kind} cannot be recorded: {e}") from None
        writer = self._files.writer
        if writer is not None:
            writer.append(line)
        elif self._fill is not None:
            self._fill.hold(line)  # the candidate, if a miss opens one, starts with the hits and these
        self._emit(kind, **fields)
