"""Starting a run log: a run replaces ``NAME.run.jsonl``, or joins the runs of its group there.

A run outside a group replaces the file atomically with its ``start`` event, as it always has: the file holds the
latest run. The runs of one **group** keep every run of the group in the file: a test session (the pytest plugin
sets :data:`GROUP_ENV` for the session, its xdist workers and the processes its tests start) whose tests share a
tape leaves each test's run there, so ``check`` judges them all and the last test to replay a shared tape never
hides an earlier one's drift. Runs join when they are of one group, in one mode, against one golden (its sha256):
a run of another group (the next test session), another mode (a recording, then its replay) or another golden
(after an accept) replaces the file. Every event of a
grouped run carries its run's id (``run``): runs of a group that overlap (xdist workers) interleave their lines,
and readers tell them apart by it (:func:`runs_of`).

Processes starting runs at once agree through an exclusive ``flock`` of the file as it is: the holder decides
(join, or replace), and replaces by renaming its new file over the path before it lets go; one that waited finds
the path no longer names the file it locked, and starts over. Each run then appends through its own descriptor to
the file it joined or made, never to another file by its name. A symlink or anything but a regular file in the
run log's place is replaced, never followed or joined.
"""

from __future__ import annotations

import errno
import fcntl
import os
import secrets
import stat
import tempfile
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.tapefile import Appender

__all__ = ["GROUP_ENV", "Joining", "joining", "new_run_id", "open_run", "run_group", "runs_of"]

GROUP_ENV = "TAPETUI_RUN_GROUP"
_MAX_GROUP = 200  # characters of a group's name kept (it is an id)
_TRIES = 1000  # starts over while other processes keep replacing the file: each try is one of them having done it


def run_group() -> str | None:
    """The group this process's runs belong to (:data:`GROUP_ENV`), or None."""
    group = os.environ.get(GROUP_ENV, "")
    return group[:_MAX_GROUP] if group.strip() else None


def new_run_id() -> str:
    return secrets.token_hex(6)


Joining = tuple[str, Any, Any]  # what runs that join share: (group, mode, golden_sha256) of their start events


def joining(start: dict[str, Any]) -> Joining | None:
    """What a run with this ``start`` event joins on, or None for a run of no group."""
    group = start.get("group")
    return (group, start.get("mode"), start.get("golden_sha256")) if type(group) is str else None


def open_run(path: Path, start: bytes, join: Joining | None, *, fsync: bool = False) -> Appender:
    """The appender of a run that begins with the line ``start`` (its ``start`` event): in a new file that replaced
    ``path``, or, for a run that joins on ``join`` (:func:`joining`) when the file's runs do too, at its end.

    Raises:
        OSError: the file cannot be written (the caller's run goes on without a log).
    """
    for _ in range(_TRIES):
        held = _locked(path)
        try:
            if held is not None and join is not None and _joining_of(held) == join:
                joined = Appender.of_fd(path, held, fsync=fsync)
                held = None  # the appender's now
                joined.append(start)
                return joined
            fd, tmp = _fresh(path, start, fsync)
            try:
                if held is None and not os.path.lexists(path):
                    try:
                        os.link(tmp, path)  # only if there is still nothing there: another start may have made one
                    except FileExistsError:
                        os.close(fd)
                        continue
                    except OSError:  # a file system without hard links: the rename (a start at once may win)
                        os.replace(tmp, path)
                    finally:
                        if os.path.lexists(tmp):
                            os.unlink(tmp)
                    fd = _by_name(path, fd)  # a watcher names a file's changes by the name it was opened by
                    if fd < 0:
                        continue  # replaced the moment it was made: start over
                else:  # over the file held (or a symlink, a FIFO...: replaced, never followed)
                    os.replace(tmp, path)
            except BaseException:
                os.close(fd)
                if os.path.lexists(tmp):
                    os.unlink(tmp)
                raise
            return Appender.of_fd(path, fd, fsync=fsync, end=len(start))
        finally:
            if held is not None:
                os.close(held)  # and its lock with it
    raise OSError(errno.EAGAIN, "other runs kept replacing the run log", str(path))


def _by_name(path: Path, fd: int) -> int:
    """A descriptor of the file ``fd`` is open on, opened by ``path`` (``fd`` closed), or -1 when ``path`` names
    another file now."""
    try:
        named = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        os.close(fd)
        return -1
    a, b = os.fstat(fd), os.fstat(named)
    os.close(fd)
    if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
        os.close(named)
        return -1
    return named


def _locked(path: Path) -> int | None:
    """A descriptor of the regular file at ``path``, locked exclusively and still at ``path``; None when there is no
    such file (none, a symlink, a FIFO, a folder...)."""
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR, errno.EWOULDBLOCK):
                return None  # a symlink, a FIFO with no reader, a folder: not a run log to join
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                os.close(fd)
                return None
            fcntl.flock(fd, fcntl.LOCK_EX)
            now = os.lstat(path)
        except FileNotFoundError:
            os.close(fd)
            continue  # replaced, then gone, while we waited: look again
        except BaseException:
            os.close(fd)
            raise
        if (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino):
            return fd
        os.close(fd)  # replaced while we waited for its lock: the new file is the one to lock


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
    """A new file beside ``path`` (named as :func:`~tapetui.core.files.atomic_write` names its temps) holding
    ``data``: its descriptor, open for appending, and its name."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
        appending = os.open(tmp, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)  # read too: a torn tail is healed
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    return appending, tmp


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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
