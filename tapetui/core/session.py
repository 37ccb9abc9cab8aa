"""A session's files and locks: the golden it reads, the file it records into, the locks it holds.

:class:`SessionFiles` is what a :class:`~tapetui.core.tape.Tape` opens before its first call and
releases at close, whatever the boundary kinds it serves. The files and the order the locks are taken
in are written up in ``docs/format.md`` ("Files of a session", "The lock protocol"):

- ``record`` takes the session's gate, then its recording lock, and claims a target (the golden when
  there is none, else a fresh candidate: :func:`~tapetui.core.store.recording_target`);
- ``fill`` takes the recording lock under the gate and reads the golden; its target is claimed at the
  first miss (:meth:`SessionFiles.claim_target`), when the candidate starts with the hits so far;
- ``replay`` takes the recording lock when it can (a read-only checkout replays unlocked) and never
  writes the golden.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from tapetui.core.clock import Clock, iso
from tapetui.core.errors import TapeError
from tapetui.core.files import atomic_write
from tapetui.core.fill import Filled
from tapetui.core.index import TapeIndex
from tapetui.core.locks import LockBusy, RecordingLock, gate, recording_lock
from tapetui.core.redact import Redactor
from tapetui.core.store import candidate_path, prepare_recording, recording_target
from tapetui.core.tapefile import Appender, leave_index, read_index, session_line

__all__ = ["DraftFiles", "SessionFiles"]

_log = logging.getLogger("tapetui")


class SessionFiles:
    """The files and locks of one session as a tape run holds them.

    Attributes:
        index: the golden's index (None when there is no golden yet).
        fh / fd: the golden, held open for the run (recorded outcomes are read from it).
        earlier_fill: fill only, the calls an earlier unreviewed fill already ran live (see :class:`Filled`).
        target: the file this run records into, once claimed.
        writer: the appender of ``target``.
        notices: what opening did that a person should hear of (a pending candidate moved aside).
    """

    def __init__(self, path: Path, *, redactor: Redactor, clock: Clock, labels: dict[str, Any], fsync: bool) -> None:
        self.path = path
        self._redactor = redactor
        self._clock = clock
        self._labels = labels
        self._fsync = fsync
        self.lock: RecordingLock | None = None
        self.index: TapeIndex | None = None
        self.fh: Any = None
        self.fd = -1
        self.earlier_fill: Filled | None = None
        self.target: Path | None = None
        self.writer: Appender | None = None
        self.notices: list[str] = []

    def open(self, mode: str) -> None:
        """Take the session's locks (see :mod:`tapetui.core.locks`) and open or claim its files."""
        if mode != "replay":
            prepare_recording(self.path)
        if mode == "record":
            with gate(self.path):
                self.lock = recording_lock(self.path)
                self.claim_target("record")
            return
        if mode == "fill":
            with gate(self.path):
                self.lock = recording_lock(self.path)
        else:
            try:  # a replay writes only its run log; on a read-only checkout it runs unlocked
                self.lock = recording_lock(self.path)
            except LockBusy:
                raise
            except TapeError:
                self.lock = None
        try:
            exists = self.path.exists()
        except OSError as e:  # a name too long for the file system
            raise TapeError(f"{self.path}: {e.strerror or e}") from None
        if exists:
            self.index = read_index(self.path, keep_bytes=True)
            self.fh = open(self.path, "rb")  # noqa: SIM115 -- held for the run, closed by release
            self.fd = self.fh.fileno()
            cand = candidate_path(self.path)
            if mode == "fill" and os.path.lexists(cand):
                # An earlier fill that was never reviewed (or was killed) ran its misses live: replay those
                # too, so a side effect runs once, not at every fill.
                self.earlier_fill = Filled.open(cand, self.index, self.fh)
        elif mode == "replay":
            raise TapeError(f"{self.path}: no tape to replay (record it first: mode='record')")
        else:
            with gate(self.path):
                self.claim_target("fill")

    def claim_target(self, origin: str, body: bytes = b"") -> None:
        """Pick this recording's file (:func:`~tapetui.core.store.recording_target`) and start it with a session
        header and ``body``; the caller holds the session's gate."""
        self.target, moved = recording_target(self.path, golden_in_use=origin == "fill" and self.index is not None)
        if moved is not None:
            note = f"{self.path}: a pending candidate nobody reviewed was moved to {moved}"
            self.notices.append(note)
            _log.warning("%s", note)
        # fsynced as the recording's lines are (Tape's fsync=): the rename alone never shows a torn header
        atomic_write(self.target, self._header(origin) + body, sync=self._fsync)
        self.writer = Appender(self.target, fsync=self._fsync)

    def _header(self, origin: str) -> bytes:
        """The session line a recording starts with: its time, its origin, its labels redacted."""
        labels = self._redactor.redact(self._labels) if self._labels else None
        return session_line(created_at=iso(self._clock()), origin=origin, labels=labels)

    def claim_fill_target(self, body: bytes) -> None:
        """A fill's first miss over a golden: its candidate starts with ``body`` (the hits so far)."""
        with gate(self.path):
            self.claim_target("fill", body)

    def release(self) -> None:
        """Close every file and lock this session holds (idempotent; also after a failed open). A big recording
        that no other process appended to leaves its index in the index cache (:func:`leave_index`), while it
        still holds the session's lock: no review action can have changed it since its last line."""
        if self.writer is not None and self.target is not None and self.writer.sole and self.writer.end > 0:
            leave_index(self.target, self.writer.end)
        for res in (self.writer, self.fh):
            if res is not None:
                res.close()
        self.writer = self.fh = None
        if self.lock is not None:
            self.lock.release()
            self.lock = None
        if self.earlier_fill is not None:
            self.earlier_fill.close()
            self.earlier_fill = None


class DraftFiles(SessionFiles):
    """A recording held in memory, for a writer that puts it in place itself, under the session's locks, once
    it is whole (``tapetui import otlp``: a trace that fails half-way leaves nothing). Record mode only: no
    golden is read, no lock is taken and nothing is written until the caller takes :attr:`data`."""

    def open(self, mode: str) -> None:
        if mode != "record":
            raise TapeError(f"{self.path}: a draft is recorded, not played (mode {mode!r})")
        self.target = self.path
        self.writer = _Held(self._header("record"))

    @property
    def data(self) -> bytes:
        """The recording's bytes: its header and every line appended so far."""
        assert isinstance(self.writer, _Held)
        return bytes(self.writer.buf)

    def release(self) -> None:
        pass  # no file, no lock: the bytes stay until the caller has taken them


class _Held(Appender):
    """:class:`~tapetui.core.tapefile.Appender`'s part a recording uses, appending to memory."""

    def __init__(self, header: bytes) -> None:  # no file: Appender's own setup (an open) is not run
        self.buf = bytearray(header)
        self.sole = True

    def append(self, data: bytes) -> None:
        self.buf += data

    @property
    def end(self) -> int:
        return len(self.buf)

    def close(self) -> None:
        pass
