"""The session lock: one protocol that every writer of a session's files follows.

A session (golden ``D/NAME.jsonl``) owns these files: the golden, its candidate, its run
log, its commit journal and temp files, and ``NAME.samples/``. Two lock files beside the
golden (hidden, created on first use, never deleted, so a lock is never taken on a file
that another process is about to unlink) guard them with ``flock(2)``:

``.NAME.jsonl.gate``
    held exclusively for a short *change of state*: picking and creating a recording's
    target file, rotating a pending candidate into ``NAME.samples/``, and for the whole
    of a review action (accept, reject, expire, undo, re-record, scrub, recover).
``.NAME.jsonl.lock``
    held *shared* by every open ``Tape`` for its whole life (a recording in progress; a
    replay too, where the checkout is writable) and by ``check`` while it reads a session
    (:func:`reading`), and *exclusively* by a review action, which therefore never reads or
    replaces a candidate that is still being written, nor changes a session mid-read.

Order: gate before lock, always; a holder of the lock alone never waits for the gate
while a review action could be waiting for its lock, except a fill taking the gate at
its first miss, which waits with a deadline (no deadlock: one side times out).

``.NAME.jsonl.park``
    held exclusively by ``check --samples N`` for as long as it has the session's pending candidate
    parked (:mod:`tapetui.review.parking`): the recordings it starts take the gate and lock
    themselves, so the park lock is what tells ``recover`` the parked candidate is not a dead
    process's. Taken before the gate, never while holding it.

``recover`` takes both without waiting and leaves a session alone when either is held:
a file another live process owns is never touched, and every temp file or journal it
does find belongs to a process that died holding them. Appends to one tape are
additionally serialised by a per-write ``flock`` on the tape itself (see
:class:`tapetui.core.tapefile.Appender`), so lines never interleave.

Locks are re-entrant within one process (per thread): a review action that calls
another under the same session lock does not deadlock on itself. A holder unlocks before it
closes (:func:`unlock_close`): a flock belongs to the open file, which a child forked meanwhile
shares, and a close alone would leave it held for as long as the child lives. The park lock alone
is closed without unlocking: its descriptor is handed to commands that must keep it held.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from tapetui.core.errors import TapeError

__all__ = [
    "LockBusy",
    "gate_path",
    "held_park_fd",
    "lock_path",
    "park_lock",
    "park_lock_path",
    "reading",
    "recording_lock",
    "session_lock",
    "try_park_lock",
    "try_session_lock",
    "unlock_close",
]

DEFAULT_WAIT = 10.0  # seconds a review action waits for a session another process holds


class LockBusy(TapeError):
    """The session is held by another process (a review action or a recording in progress)."""


def gate_path(golden: Path) -> Path:
    return golden.with_name(f".{golden.name}.gate")


def lock_path(golden: Path) -> Path:
    return golden.with_name(f".{golden.name}.lock")


def park_lock_path(golden: Path) -> Path:
    return golden.with_name(f".{golden.name}.park")


_held = threading.local()


def unlock_close(fd: int) -> None:
    """Let go of a lock held on ``fd``, then close it. The unlock first: a flock belongs to the open file, which a
    child forked meanwhile (a worker pool, a daemon) shares, and a close alone left the lock held for as long as the
    child lived (every later run of the tape, every review action of the session waited on it)."""
    with suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


def _held_map() -> dict[tuple[str, str], tuple[int, int, int]]:
    """(lock file, kind) → (fd, flock mode, depth) held by this thread."""
    m = getattr(_held, "m", None)
    if m is None:
        m = _held.m = {}
    return m


def _open(path: Path) -> int:
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise TapeError(f"{path}: a lock file must not be a symlink; remove it") from None
        raise TapeError(
            f"{path}: cannot create the session's lock file: {e.strerror} (is the tapes folder writable?)"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise TapeError(f"{path}: a lock file must be a regular file; remove it")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _acquire(path: Path, mode: int, wait: float | None, what: str) -> int | None:
    """flock ``path`` in ``mode``; None when ``wait`` is 0 and it is held elsewhere. Raises LockBusy on timeout."""
    fd = _open(path)
    deadline = None if wait is None else time.monotonic() + wait
    pause = 0.002
    try:
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                pass
            if deadline is not None and time.monotonic() >= deadline:
                if wait == 0:
                    os.close(fd)
                    return None
                raise LockBusy(
                    f"{what} is in use by another tapetui process (a recording, a replay or a review "
                    f"action); waited {wait:g} s. Try again when it has finished."
                )
            time.sleep(pause)  # lock hand-over between processes: flock has no timed wait
            pause = min(pause * 2, 0.05)
    except BaseException:
        if fd >= 0:
            with suppress(OSError):
                os.close(fd)
        raise


@contextmanager
def _hold(path: Path, mode: int, wait: float | None, what: str, *, shared: bool = False) -> Iterator[bool]:
    """Hold ``path``'s flock in ``mode`` (re-entrant in this thread); ``shared``: the descriptor is handed to
    commands that must keep the lock held while they live, even after this process let go (closed, not unlocked)."""
    let_go = os.close if shared else unlock_close
    m = _held_map()
    slot = (str(path), "ex" if mode == fcntl.LOCK_EX else "sh")
    other = (str(path), "sh" if mode == fcntl.LOCK_EX else "ex")
    if slot in m or (mode == fcntl.LOCK_SH and other in m):  # re-entry (an exclusive hold covers shared)
        key = slot if slot in m else other
        fd, held_mode, depth = m[key]
        m[key] = (fd, held_mode, depth + 1)
        try:
            yield True
        finally:
            fd, held_mode, depth = m[key]
            if depth > 1:
                m[key] = (fd, held_mode, depth - 1)
            else:
                del m[key]
                let_go(fd)
        return
    got = _acquire(path, mode, wait, what)
    if got is None:
        yield False
        return
    m[slot] = (got, mode, 1)
    try:
        yield True
    finally:
        fd, _, depth = m.pop(slot)
        let_go(fd)


@contextmanager
def session_lock(golden: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold a session exclusively (gate, then lock) for a review action.

    Raises:
        LockBusy: another process held it for ``wait`` seconds.
        TapeError: the lock files cannot be created (a read-only folder, a planted symlink).
    """
    golden = Path(golden)
    what = f"session {golden}"
    wait = DEFAULT_WAIT if wait is None else wait
    with _hold(gate_path(golden), fcntl.LOCK_EX, wait, what), _hold(lock_path(golden), fcntl.LOCK_EX, wait, what):
        yield


@contextmanager
def try_session_lock(golden: Path) -> Iterator[bool]:
    """Hold a session exclusively if nobody else does, without waiting; yields whether it is held."""
    golden = Path(golden)
    what = f"session {golden}"
    with _hold(gate_path(golden), fcntl.LOCK_EX, 0, what) as gate:
        if not gate:
            yield False
            return
        with _hold(lock_path(golden), fcntl.LOCK_EX, 0, what) as lock:
            yield lock


@contextmanager
def park_lock(golden: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold a session's park lock: its pending candidate is parked by this process (``check --samples N``).

    Raises:
        LockBusy: another process has parked it (another ``check --samples``) for ``wait`` seconds.
    """
    golden = Path(golden)
    what = f"the pending candidate of session {golden} (parked by another check --samples)"
    # handed to the commands (held_park_fd): a command still running after tapetui stopped keeps it held
    with _hold(park_lock_path(golden), fcntl.LOCK_EX, DEFAULT_WAIT if wait is None else wait, what, shared=True):
        yield


def held_park_fd(golden: Path) -> int | None:
    """The descriptor of the park lock this thread holds on ``golden`` (None when it holds none): handed to the
    commands ``check --samples`` runs, so the lock stays held for as long as one of them lives — a command left
    running after tapetui was killed keeps ``recover`` from putting the candidate back under it."""
    held = _held_map().get((str(park_lock_path(Path(golden))), "ex"))
    return held[0] if held is not None else None


@contextmanager
def try_park_lock(golden: Path) -> Iterator[bool]:
    """Hold a session's park lock if nobody else does, without waiting; yields whether it is held."""
    golden = Path(golden)
    with _hold(park_lock_path(golden), fcntl.LOCK_EX, 0, f"session {golden}") as held:
        yield held


@contextmanager
def gate(golden: Path, *, wait: float | None = None) -> Iterator[None]:
    """Hold a session's gate alone: a short change of state by a recording (pick and create its file)."""
    golden = Path(golden)
    with _hold(gate_path(golden), fcntl.LOCK_EX, DEFAULT_WAIT if wait is None else wait, f"session {golden}"):
        yield


@contextmanager
def reading(golden: Path, *, lock_file: bool = True) -> Iterator[None]:
    """Hold a session's lock shared while reading it, so no review action changes it mid-read.

    A reader never creates a lock file (``check`` writes nothing): where there is none, no
    tapetui writer has used this session yet and the read goes unlocked; the caller reads
    again if the files changed under it. A lock held elsewhere for longer than the usual
    wait is not an error either: the read goes ahead unlocked. ``lock_file=False``: the caller's
    listing of the folder, just taken, has no lock file for the session (not looked for again).
    """
    if not lock_file:
        yield
        return
    path = lock_path(Path(golden))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
    except OSError:
        yield
        return
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            deadline = time.monotonic() + DEFAULT_WAIT
            pause = 0.002
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        break
                    time.sleep(pause)
                    pause = min(pause * 2, 0.05)
        yield
    finally:
        unlock_close(fd)


class RecordingLock:
    """The shared lock a recording holds for its whole life; :meth:`release` is idempotent."""

    def __init__(self, golden: Path, wait: float | None = None) -> None:
        self.golden = Path(golden)
        self._fd: int | None = _acquire(
            lock_path(self.golden), fcntl.LOCK_SH, DEFAULT_WAIT if wait is None else wait, f"session {self.golden}"
        )

    def release(self) -> None:
        if self._fd is not None:
            unlock_close(self._fd)
            self._fd = None


def recording_lock(golden: Path, wait: float | None = None) -> RecordingLock:
    """Take a recording's shared lock (waits while a review action holds the session)."""
    return RecordingLock(golden, wait)
