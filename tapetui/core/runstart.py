"""Starting a run log: a run replaces ``NAME.run.jsonl``, or joins the runs of its group there.

A run outside a group replaces the file atomically with its ``start`` event, as it always has: the file holds the
latest run. The runs of one **group** keep every run of the group in the file: a test session (the pytest plugin
sets :data:`GROUP_ENV` for the session, its xdist workers and the processes its tests start) whose tests share a
tape leaves each test's run there, so ``check`` judges them all and the last test to replay a shared tape never
hides an earlier one's drift. Runs join when they are of one group and played one golden (its sha256), whatever
their mode (a fill between two replays keeps both): a run of another group (the next test session) or against
another golden (a recording that made it, then its replay; a replay after an accept: the runs before it are
history) replaces the file. Every event of a
grouped run carries its run's id (``run``): runs of a group that overlap (xdist workers) interleave their lines,
and readers tell them apart by it (:func:`runs_of`).

Processes starting runs at once agree through an exclusive ``flock`` of a lock file beside the run log
(``.NAME.run.jsonl.lock``: created on first use, never replaced or deleted, so every starter locks the same file):
the holder decides (join, or replace) and replaces by renaming its new file over the path before it lets go. The
lock is held for that decision only, never while waiting for another lock. Each run then appends through its own
descriptor, opened by the run log's name, to the file it joined or made, never to another file by its name. A
symlink or anything but a regular file in the run log's place is replaced, never followed or joined. Where the lock
file cannot be made (a read-only checkout) the run replaces the file unlocked, as a run outside a group does.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import secrets
import stat
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.files import temp_beside
from tapetui.core.redact import DEFAULT_REDACTOR
from tapetui.core.tapefile import Appender

__all__ = ["GROUP_ENV", "Joining", "joining", "new_run_id", "open_run", "run_group", "runs_of"]

GROUP_ENV = "TAPETUI_RUN_GROUP"
_MAX_GROUP = 200  # characters of a group's name as it is (it is an id); a longer one is hashed


def run_group() -> str | None:
    """The group this process's runs belong to (:data:`GROUP_ENV`), or None (unset or blank). A value that is not
    short printable text (an id), or that holds a secret, is its sha256: two values never name one group, and any
    value can be written."""
    group = os.environ.get(GROUP_ENV, "")
    if not group.strip():
        return None
    plain = len(group) <= _MAX_GROUP and group.isprintable() and group.isascii()
    if plain and DEFAULT_REDACTOR.redact_text(group) == group:  # one holding a secret is never written as it is
        return group
    return "sha256:" + hashlib.sha256(group.encode("utf-8", "surrogateescape")).hexdigest()


def new_run_id() -> str:
    return secrets.token_hex(6)


Joining = tuple[str, Any]  # what runs that join share: (group, golden_sha256) of their start events


def joining(start: dict[str, Any]) -> Joining | None:
    """What a run with this ``start`` event joins on, or None for a run of no group."""
    group = start.get("group")
    return (group, start.get("golden_sha256")) if type(group) is str else None


def open_run(path: Path, start: bytes, join: Joining | None, *, fsync: bool = False) -> Appender:
    """The appender of a run that begins with the line ``start`` (its ``start`` event): in a new file that replaced
    ``path``, or, for a run that joins on ``join`` (:func:`joining`) when the file's runs do too, at its end.

    Raises:
        OSError: the file cannot be written (the caller's run goes on without a log).
    """
    lock = _lock(path)
    try:
        held = _current(path) if join is not None else None
        if held is not None and _joining_of(held) == join:
            joined = Appender(path, fsync=fsync, fd=held)
            joined.append(start)
            return joined
        if held is not None:
            os.close(held)
        fd, tmp = _fresh(path, start, fsync)
        try:
            os.replace(tmp, path)  # over the file (or a symlink, a FIFO...: replaced, never followed)
        except BaseException:
            os.close(fd)
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise
        # the descriptor was opened by the temp name, and a rename keeps the one name the file has: a watcher names
        # its changes by the run log's
        return Appender(path, fsync=fsync, fd=fd, end=len(start))
    finally:
        if lock >= 0:
            os.close(lock)  # and its lock with it


def _lock(path: Path) -> int:
    """A descriptor holding the exclusive lock of the run log's lock file, or -1 where none can be made (a read-only
    checkout: the caller replaces the run log unlocked)."""
    name = path.with_name(f".{path.name}.lock")
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError:
        return -1
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return -1
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _current(path: Path) -> int | None:
    """A descriptor of the regular file at ``path``, opened by that name; None when there is no such file (none, a
    symlink, a FIFO, a folder...)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None  # missing, a symlink (ELOOP), a FIFO with no reader, a folder, unreadable: replaced
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        return None
    return fd


def _joining_of(fd: int) -> Joining | None:
    """What the runs a run log holds join on: its first line's (a start event's), or None."""
    head = os.pread(fd, 64 * 1024, 0)
    line = head.split(b"\n", 1)[0] if b"\n" in head else b""
    try:
        ev = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return joining(ev) if type(ev) is dict and ev.get("event") == "start" else None


def _fresh(path: Path, data: bytes, fsync: bool) -> tuple[int, str]:
    """A new file beside ``path`` (named as :func:`~tapetui.core.files.atomic_write` names its temps, so ``recover``
    knows it) holding ``data``: its descriptor, open for appending, and its name. Made with mode 0o666 for the
    kernel to apply the umask (reading it would set it, for a moment, in every thread)."""
    fd, tmp = temp_beside(path, 0o666, os.O_RDWR | os.O_APPEND)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    return fd, tmp


def runs_of(events: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """A run log's events, run by run in the order the runs started: each grouped run's events by its id
    (``run``: overlapping runs interleave), else each ``start`` begins the next run."""
    runs: list[list[dict[str, Any]]] = []
    by_id: dict[str, list[dict[str, Any]]] = {}
    for ev in events:
        rid = ev.get("run") if type(ev) is dict else None
        if type(rid) is str:
            run = by_id.get(rid)
            if run is None:
                run = by_id[rid] = []
                runs.append(run)
            run.append(ev)
        elif not runs or (type(ev) is dict and ev.get("event") == "start"):
            runs.append([ev])
        else:
            runs[-1].append(ev)
    return runs
