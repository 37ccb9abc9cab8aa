"""Starting a run log: a run replaces ``NAME.run.jsonl``, or joins the runs there.

A run replaces the file atomically with its ``start`` event when it is alone: the file holds the latest run. It
**joins** the runs in the file instead (appends its own to them) in two cases:

- the runs of one **group** keep every run of the group in the file: a test session (the pytest plugin sets
  :data:`GROUP_ENV` for the session, its xdist workers and the processes its tests start) whose tests share a
  tape leaves each test's run there, so ``check`` judges them all and the last test to replay a shared tape never
  hides an earlier one's drift;
- a run that starts while a run in the file is **still running** (another process replaying the same tape, two
  ``pytest`` sessions at once) joins it, whatever its group: replacing the file would cut the running one off, and
  its drift, written to a file no longer there, would be lost while ``check`` judged the other. It keeps its own
  group, so the later runs of its group join the file too (one of them finds its group among the file's runs). A
  group's run keeps its tape running until its test session ends (:func:`end_group`, or the process's end): two
  sessions at once whose runs of a shared tape only take turns join each other's runs too.

Runs join only when they played one golden (the ``golden_sha256`` of their ``start``): a run of a group with no
run in the file once the file's runs ended (the next test session), or a run against another golden (a recording
that made it, then its replay; a replay after an accept: the runs before it are history) replaces the file. A
joining run's events carry its run's id (``run``), as every event of a group's run does: runs that overlap
interleave their lines, and readers tell them apart by it (:func:`runs_of`; a run outside a group that started
alone writes no id, and its events are the ones without one; a start without an id begins a file).

Processes starting runs at once agree through an exclusive ``flock`` of a lock file beside the run log
(``.NAME.run.jsonl.lock``: created on first use, never replaced or deleted, so every starter locks the same file):
the holder decides (join, or replace) and replaces by renaming its new file over the path before it lets go. The
lock is held for that decision only, never while waiting for another lock. A run says it is running by holding a
shared ``flock`` of a second file (``.NAME.run.jsonl.live``, made the same way) from its start to its end (a run
that dies lets go with its process); the decider sees whether any run holds it by trying it exclusively without
waiting; where that file cannot be made (anything but a file in its place) the run replaces the file and says it
could not tell (``Run.guarded``). Each run then appends through its own descriptor, opened by the run log's name,
to the file it joined or made, never to another file by its name. A symlink or anything but a regular file in the
run log's place is replaced, never followed or joined. Where the lock files cannot be made (a read-only checkout)
the run replaces the file unlocked.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.files import temp_beside
from tapetui.core.locks import unlock_close
from tapetui.core.redact import DEFAULT_REDACTOR
from tapetui.core.tapefile import Appender, dump_line

__all__ = ["GROUP_ENV", "Joining", "Run", "end_group", "joining", "new_run_id", "open_run", "run_group", "runs_of"]

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


Joining = tuple[str | None, Any]
"""What runs that join share: (group, golden_sha256) of their start events; a run outside a group is of group None."""


def joining(start: dict[str, Any]) -> Joining:
    """What a run with this ``start`` event joins on."""
    group = start.get("group")
    return (group if type(group) is str else None, start.get("golden_sha256"))


@dataclass
class Run:
    """A started run: its appender, the ``start`` event as written (with its run id when it joined others), and the
    descriptor holding the run's live lock (-1: none)."""

    out: Appender
    start: dict[str, Any]
    live: int = -1
    guarded: bool = True  # False: whether another run was running could not be told (no live lock could be made)

    def close(self) -> None:
        """The run's end: no more appends, and it no longer runs; a group's run (a test session's) keeps its tape
        running until the session ends (:func:`end_group`), so that another session's run joins the file."""
        self.out.close()
        if self.live >= 0:
            group, key = self.start.get("group"), str(self.out.path)
            if type(group) is str and key not in _SESSION and len(_SESSION) < _SESSION_MAX:
                _SESSION[key] = (group, self.live)
            else:
                unlock_close(self.live)  # and its shared lock with it, even where a forked child keeps a copy
            self.live = -1


# A test session's runs of a tape run, for the others, until the session ends: two sessions at once whose runs of a
# shared tape take turns (one run ends before the next starts) each join the file, and neither replaces the other's
# drift. Kept per run log (its live lock, shared), at most _SESSION_MAX in one process; a process's end lets go.
_SESSION: dict[str, tuple[str, int]] = {}
_SESSION_MAX = 256


def end_group(but: str | None = None) -> None:
    """The test session ended (the pytest plugin says so at its end; a process's end does the same): its tapes no
    longer run. ``but``: keep the tapes of this group (a run of it starting in this process)."""
    for key, (group, fd) in list(_SESSION.items()):
        if group != but:
            del _SESSION[key]
            with contextlib.suppress(OSError):
                unlock_close(fd)


def open_run(path: Path, start: dict[str, Any], *, fsync: bool = False) -> Run:
    """Start a run with the event ``start``: in a new file that replaced ``path``, or, where it joins the runs in the
    file (see the module doc), at its end.

    Raises:
        OSError: the file cannot be written (the caller's run goes on without a log).
    """
    group, golden = joining(start)
    if _SESSION:
        end_group(but=group)  # a run of another group in this process: the session before it ended
    lock = _lock(path, ".lock", fcntl.LOCK_EX)
    live = _lock(path, ".live", fcntl.LOCK_EX | fcntl.LOCK_NB) if lock >= 0 else -1
    try:
        running = live == _BUSY
        if running:  # a run holds the live lock shared: this one shares it too (nobody else takes it now)
            live = _lock(path, ".live", fcntl.LOCK_SH)
        elif live >= 0:
            fcntl.flock(live, fcntl.LOCK_SH)  # held alone, under the decision lock: no other starter sees it free
        held = _current(path) if group is not None or running else None
        if held is not None and _joins(held, group, golden, running):
            if type(start.get("run")) is not str:
                start = {**start, "run": new_run_id()}  # its events told apart from the others' by it
            joined = Appender(path, fsync=fsync, fd=held)
            joined.append(dump_line(start))
            return Run(joined, start, live, guarded=live >= 0)
        if held is not None:
            os.close(held)
        line = dump_line(start)
        fd, tmp = _fresh(path, line, fsync)
        try:
            os.replace(tmp, path)  # over the file (or a symlink, a FIFO...: replaced, never followed)
        except BaseException:
            os.close(fd)
            if os.path.lexists(tmp):
                os.unlink(tmp)
            raise
        # the descriptor was opened by the temp name, and a rename keeps the one name the file has: a watcher names
        # its changes by the run log's
        return Run(Appender(path, fsync=fsync, fd=fd, end=len(line)), start, live, guarded=live >= 0)
    except BaseException:
        if live >= 0:
            unlock_close(live)
        raise
    finally:
        if lock >= 0:
            unlock_close(lock)  # a child forked meanwhile must not keep the decision


_BUSY = -2


def _lock(path: Path, suffix: str, how: int) -> int:
    """A descriptor holding the ``flock`` ``how`` of the run log's lock file ``.NAME.run.jsonl{suffix}``; -1 where
    none can be made (a read-only checkout, anything but a file in its place: the caller replaces the run log
    unlocked), :data:`_BUSY` where, not waiting, another holds it."""
    name = path.with_name(f".{path.name}{suffix}")
    try:
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o644)
    except OSError:
        return -1
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return -1
        fcntl.flock(fd, how)
    except BlockingIOError:
        os.close(fd)
        return _BUSY
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


def _joins(fd: int, group: str | None, golden: Any, running: bool) -> bool:
    """Whether a run of ``group`` against ``golden`` joins the runs of the run log open on ``fd``: they played the same
    golden (its first start says), and one of them still runs, or the run is of a group that has runs there."""
    theirs = _joining_of(fd)
    if theirs is None or theirs[1] != golden:
        return False
    if running or (group is not None and theirs[0] == group):
        return True
    return group is not None and group in _groups(fd)  # it joined another group's running run once


def _groups(fd: int) -> set[str]:
    """The groups of every run in the run log open on ``fd``: read whole, its start lines only decoded (a grouped
    run that starts while the file's first group has no run running: once a test session)."""
    size = os.fstat(fd).st_size
    data = os.pread(fd, size, 0)
    out: set[str] = set()
    for line in data.split(b"\n"):
        if line.startswith(b'{"event":"start"') and b'"group"' in line:
            with contextlib.suppress(orjson.JSONDecodeError):
                ev = orjson.loads(line)
                if type(ev) is dict and type(ev.get("group")) is str:
                    out.add(ev["group"])
    return out


def _joining_of(fd: int) -> Joining | None:
    """What the runs a run log holds join on: its first line's (a start event's), or None (none to join)."""
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
    """A run log's events, run by run in the order the runs started: each run's events by its id (``run``:
    overlapping runs interleave), the events without one each of the run started last without one."""
    runs: list[list[dict[str, Any]]] = []
    by_id: dict[str, list[dict[str, Any]]] = {}
    plain: list[dict[str, Any]] | None = None  # the run of the events without an id: one that started alone
    for ev in events:
        rid = ev.get("run") if type(ev) is dict else None
        if type(rid) is str:
            run = by_id.get(rid)
            if run is None:
                run = by_id[rid] = []
                runs.append(run)
            run.append(ev)
        elif plain is None or (type(ev) is dict and ev.get("event") == "start"):
            plain = [ev]
            runs.append(plain)
        else:
            plain.append(ev)
    return runs
