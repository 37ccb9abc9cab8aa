"""Parking a session's pending candidate and run log while ``check --samples N`` records new samples.

The samples' own recordings would move a pending (unreviewed) candidate into ``NAME.samples/`` and replace the
run log, and a ``record_command`` may prune ``NAME.samples/`` as it likes. So before the first run the pending
candidate and the run log are moved *out of the session* to ``<tapes>/.tapetui/parked/<session>/`` and put back
afterwards, byte for byte. The protocol (the session lock protocol of :mod:`tapetui.core.locks` plus the park
lock):

1. ``check --samples`` takes the session's park lock (``.NAME.jsonl.park``) and holds it until the end;
2. under the gate and lock: a random token is kept on this machine, outside the repository (``TAPETUI_STATE_DIR``,
   else ``~/.local/state/tapetui/parked/``); a journal ``parked.json`` (the sha256 of the candidate and of the
   run log, or null when there is none, and the token) is written atomically into the parked folder, then the
   candidate and the run log are renamed into it; the parking process keeps their bytes in memory too;
3. the commands run, without the session lock (their ``Tape`` takes it);
4. under the gate and lock (:func:`unpark`): what the runs left as the candidate is a sample and joins
   ``NAME.samples/``; the parked files are checked against the journal and renamed back (a session that had no
   run log gets none), except a run log in place that holds a replay another process made meanwhile (the samples
   record or fill, never replay): it is newer, and kept; the journal and the folder are removed.

A kill at any point leaves the journal: :func:`recover_parked` (run by ``recover``, which every command and the
app run first) does step 4 for every session whose park lock nobody holds — and only for a journal whose token
this machine kept: one committed to a repository (which could otherwise move a pending candidate away or
delete a run log, and turn ``check`` green) is left alone, and ``check`` reports it. A file that was never
moved is told from one a sample run wrote by its sha256, so nothing pending is taken for a sample and nothing
is lost. A ``record_command`` that deletes the parked folder does not lose the candidate: the parking process
puts it back from memory (after a kill too, only if the folder is still there).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.cachedir import state_dir
from tapetui.core.clock import now_iso
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import STATE_DIR, atomic_write, file_sha256, fsync_dir, read_regular, real_folder
from tapetui.core.locks import park_lock, session_lock, try_park_lock, try_session_lock
from tapetui.core.store import candidate_path, inside, is_golden, rotate_candidate, runlog_path, session_name

__all__ = [
    "PARKED_DIR",
    "PARKED_JOURNAL",
    "LeftInPlace",
    "is_parked",
    "parked",
    "parked_dir",
    "parked_sessions",
    "recover_parked",
    "unpark",
]


class LeftInPlace(str):
    """A line ``recover`` reports that is a problem it could not repair: what it found is left in place for a
    person (``tapetui recover`` prints it as an error and exits 2). Every other line is a repair done, or a
    session left for the process that holds it."""

    __slots__ = ()


PARKED_DIR = Path(STATE_DIR) / "parked"
PARKED_JOURNAL = "parked.json"
_CANDIDATE = "candidate.jsonl"
_TEMP = re.compile(r"\.parked\.json\.\w+\.tmp")  # atomic_write's temp file of a journal
_RUN_LOG = "run.jsonl"


def parked_dir(config: Config, golden: Path) -> Path:
    """Where the session's pending candidate and run log wait: ``<tapes>/.tapetui/parked/<session>/``."""
    return config.tapes_dir / PARKED_DIR / session_name(golden, config.tapes_dir)


def is_parked(config: Config, golden: Path) -> bool:
    """Whether a parked journal of this session is there (a cheap test, before any lock is taken)."""
    return os.path.lexists(parked_dir(config, golden) / PARKED_JOURNAL)


@dataclass(frozen=True)
class _Kept:
    """What the parking process itself keeps of the parked files, in memory: put back from here when the
    ``record_command`` deleted the parked folder (``git clean -fdx``, ``rm -rf .tapetui``)."""

    candidate: bytes | None
    run_log: bytes | None
    token: str


@contextmanager
def parked(config: Config, golden: Path, notes: list[str] | None = None) -> Iterator[None]:
    """Park the session's pending candidate and run log for the body, then put them back (steps 1–4);
    ``notes`` gets a line for anything out of the ordinary (a parked folder deleted meanwhile).

    Raises:
        LockBusy: another process has parked this session, or holds it for longer than the usual wait.
        TapeError: the parked files cannot be written or put back (naming them; nothing is deleted).
    """
    with park_lock(golden):
        with session_lock(golden):
            unpark(config, golden)  # what a dead process left, first
            kept = _park(config, golden)
        try:
            yield
        finally:
            with session_lock(golden):
                said = unpark(config, golden, kept)
            if notes is not None:
                notes += [n for n in said if "put the pending candidate back" not in n]


def _token_path(golden: Path) -> Path:
    """Where this machine keeps the token of a session's parked journal (outside the repository)."""
    name = hashlib.sha256(os.fsencode(os.path.abspath(golden))).hexdigest()[:32]
    return state_dir() / "parked" / name


def _park(config: Config, golden: Path) -> _Kept:
    """Step 2; the caller holds the park lock and the session lock."""
    folder = parked_dir(config, golden)
    cand, log = candidate_path(golden), runlog_path(golden)
    data_cand = read_regular(cand, "candidate") if os.path.lexists(cand) else None
    data_log = read_regular(log, "run log") if os.path.lexists(log) else None
    token = secrets.token_hex(16)
    journal = {
        "v": 1,
        "session": session_name(golden, config.tapes_dir),
        "parked_at": now_iso(),
        "candidate": _sha_of(data_cand),
        "run_log": _sha_of(data_log),
        "token": token,
    }
    # the token is kept on this machine too, where no repository reaches: a journal committed to a repository
    # (or written by anything but tapetui here) has none, and is never acted on
    tp = _token_path(golden)
    try:
        tp.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        atomic_write(tp, token.encode(), mode=0o600)
    except OSError as e:
        raise TapeError(f"{tp}: cannot keep the parking token: {e.strerror or e}; nothing was parked") from None
    real_folder(config.tapes_dir, folder.relative_to(config.tapes_dir), create=True, what="a parked candidate")
    atomic_write(folder / PARKED_JOURNAL, orjson.dumps(journal) + b"\n")
    if data_cand is not None:
        os.rename(cand, folder / _CANDIDATE)
    if data_log is not None:
        os.rename(log, folder / _RUN_LOG)
    fsync_dir(folder)
    fsync_dir(golden.parent)
    return _Kept(data_cand, data_log, token)


def _sha_of(data: bytes | None) -> str | None:
    return None if data is None else hashlib.sha256(data).hexdigest()


def _sha(path: Path) -> str | None:
    if not os.path.lexists(path):
        return None
    sha = file_sha256(path)
    if sha is None:
        raise TapeError(f"{path}: not a regular file; cannot set it aside while samples are recorded")
    return sha


def unpark(config: Config, golden: Path, kept: _Kept | None = None) -> list[str]:
    """Step 4: put a parked candidate and run log back; returns what it did, a line each (nothing parked: []).

    The caller holds the session lock (and the park lock, or knows its holder died). ``kept``: the parking
    process's own copy (its own run: what it parked is put back from memory when the files are gone).

    A journal is acted on only when its token is the one this machine kept when it parked (a journal from a
    repository is refused, and ``check`` reports it). Then a candidate in place that is not the parked one
    was recorded by a sample run and joins ``NAME.samples/``, and a run log the session did not have before is
    the samples' own and is removed.

    Raises:
        TapeError: the journal or a parked file is not what it should be, or not this machine's; everything is
            left in place.
    """
    folder = parked_dir(config, golden)
    there = real_folder(config.tapes_dir, folder.relative_to(config.tapes_dir), create=False, what="parking")
    jp = folder / PARKED_JOURNAL
    if kept is None and (there is None or not os.path.lexists(jp)):
        return []  # nothing parked (and nothing read through a symlink planted on the way)
    done: list[str] = []
    if there is not None and os.path.lexists(jp):
        journal = _read_journal(jp)
        if kept is not None and journal.get("token") != kept.token:
            raise TapeError(f"{jp}: not the journal this process wrote; left in place, nothing was changed")
        token = journal.get("token")
        if kept is None and (not isinstance(token, str) or not token or token != _local_token(golden)):
            raise TapeError(
                f"{jp}: not written by tapetui on this machine (a file from the repository?); nothing was changed. "
                "Remove the folder if nothing in it is yours"
            )
    elif kept is not None:  # the record_command deleted the parked folder: what this process kept
        journal = {"candidate": _sha_of(kept.candidate), "run_log": _sha_of(kept.run_log)}
        done.append(f"{folder}: deleted while the samples recorded; put back from memory")
    else:
        return []
    cand, log = candidate_path(golden), runlog_path(golden)
    want_cand, want_log = journal["candidate"], journal["run_log"]
    parked_cand, parked_log = folder / _CANDIDATE, folder / _RUN_LOG
    for path, want in ((parked_cand, want_cand), (parked_log, want_log)):
        if os.path.lexists(path) and file_sha256(path) != want:
            raise TapeError(f"{path}: does not match {jp} (sha256); left in place, nothing was changed")
    cand_now = _sha(cand)
    if want_cand is not None and cand_now != want_cand:
        source = _source(parked_cand, kept.candidate if kept else None, want_cand)
        if source is None:
            raise TapeError(f"{jp}: the pending candidate it parked is gone (neither parked nor kept); left in place")
        if cand_now is not None:  # recorded by a sample run: a sample
            rotate_candidate(golden)
        _put(source, cand)
        done.append(f"{cand}: put the pending candidate back")
    elif want_cand is None and cand_now is not None:  # a sample's, pending when the run was stopped
        rotate_candidate(golden)
    log_now = _sha(log)
    if log_now is not None and log_now == want_log:
        pass  # put back already (a recover after a kill)
    elif _replayed_meanwhile(log):  # a run another process made meanwhile: newer than the parked one, and kept
        done.append(f"{log}: a replay made while the samples recorded is kept (it is newer than the parked run log)")
    elif want_log is not None:
        source = _source(parked_log, kept.run_log if kept else None, want_log)
        if source is None:
            raise TapeError(f"{jp}: the run log it parked is gone (neither parked nor kept); left in place")
        _put(source, log)
    else:
        log.unlink(missing_ok=True)  # the session had no run log: the samples' own is not its
    fsync_dir(golden.parent)
    if there is not None:
        for leftover in (parked_cand, parked_log):
            leftover.unlink(missing_ok=True)  # a copy the file in place matched already
        jp.unlink(missing_ok=True)
        _remove_empty(folder, config.tapes_dir / PARKED_DIR)
    _token_path(golden).unlink(missing_ok=True)
    return done


def _replayed_meanwhile(log: Path) -> bool:
    """The run log in place holds a replay: one another process made while the samples recorded (a sample records,
    or fills: never a plain replay, which writes no candidate). Put the parked run log back over it and its drift is
    lost, and check green; it is the latest run, as any newer run is."""
    try:
        data = read_regular(log)
    except (OSError, TapeError):
        return False
    for line in data.splitlines():
        if line.startswith(b'{"event":"start"'):
            with contextlib.suppress(orjson.JSONDecodeError):
                start = orjson.loads(line)
                if type(start) is dict and start.get("mode") == "replay":
                    return True
    return False


def _local_token(golden: Path) -> str | None:
    try:
        return _token_path(golden).read_text().strip() or None
    except OSError:
        return None


def _source(parked: Path, kept: bytes | None, want: str) -> Path | bytes | None:
    """Where a parked file comes back from: the parked copy, else the parking process's own (sha checked)."""
    if os.path.lexists(parked):
        return parked  # its sha256 was checked against the journal
    if kept is not None and _sha_of(kept) == want:
        return kept
    return None


def _put(source: Path | bytes, dest: Path) -> None:
    if isinstance(source, Path):
        os.replace(source, dest)
    else:
        atomic_write(dest, source)


def _read_journal(jp: Path) -> dict[str, Any]:
    try:
        raw = orjson.loads(read_regular(jp, "parked journal"))
    except orjson.JSONDecodeError as e:
        raise TapeError(f"{jp}: unreadable: {e}; the parked files are left in place") from None
    ok = (
        type(raw) is dict
        and raw.get("v") == 1
        and all(raw.get(k) is None or (type(raw.get(k)) is str and len(raw[k]) == 64) for k in ("candidate", "run_log"))
    )
    if not ok:
        raise TapeError(f"{jp}: malformed; the parked files are left in place")
    return raw  # type: ignore[no-any-return]


def _remove_empty(folder: Path, top: Path) -> None:
    """Remove ``folder`` and its parents up to ``top``'s parent (``.tapetui``) while they are empty."""
    stop = top.parent
    here = folder
    while here != stop and stop in here.parents:
        try:
            here.rmdir()
        except OSError:  # not empty (another session parked there), or gone
            return
        here = here.parent


def parked_sessions(config: Config) -> list[str]:
    """The name of every session with a parked journal in the tapes folder (its pending candidate is away: a
    ``check --samples`` is recording, or ``recover`` could not put it back, or the journal was committed). A parked
    folder that is a symlink is not walked (``recover`` says what it is)."""
    top = config.tapes_dir / PARKED_DIR
    if os.path.islink(top) or not os.path.isdir(top):
        return []
    names = (
        Path(dirpath).relative_to(top).as_posix()
        for dirpath, _, filenames in os.walk(top)
        if PARKED_JOURNAL in filenames and dirpath != str(top)
    )
    return sorted(name for name in names if is_golden(Path(f"{name}.jsonl")))  # never a run log's or a temp's name


def recover_parked(config: Config) -> list[str]:
    """Put back what an interrupted ``check --samples`` left parked (step 4), for every session whose park
    lock and session lock nobody holds; a line per repair or problem."""
    top = config.tapes_dir / PARKED_DIR
    if not top.is_dir():
        return []
    notes: list[str] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        temps = [f for f in filenames if _TEMP.fullmatch(f)]  # a journal's atomic write a kill cut short
        cut_short = len(temps) == len(filenames) and (bool(temps) or not dirnames)  # temp files only, or empty
        if PARKED_JOURNAL not in filenames and not (cut_short and Path(dirpath) != top):
            continue
        rel = Path(dirpath).relative_to(top)
        golden = inside(config.tapes_dir, f"{rel}.jsonl")
        if golden is None or top in golden.parents:
            notes.append(f"{dirpath}: a parked session outside the tapes folder; left alone")
            continue
        try:
            with try_park_lock(golden) as free:
                if not free:
                    continue  # a check --samples is recording this session's samples now
                with try_session_lock(golden) as held:
                    if not held:
                        notes.append(f"{golden}: in use by another process; its parked candidate is left for later")
                        continue
                    if PARKED_JOURNAL not in filenames:  # killed before its journal: nothing was moved yet
                        for f in temps:
                            (Path(dirpath) / f).unlink(missing_ok=True)
                        _remove_empty(Path(dirpath), top)
                        continue
                    notes += [f"{n} (after an interrupted check --samples)" for n in unpark(config, golden)]
        except (TapeError, OSError) as e:
            notes.append(LeftInPlace(f"{golden}: cannot put back its parked candidate: {e}"))
    with contextlib.suppress(OSError):  # a kill between making it and a session's folder in it: empty
        top.rmdir()
    return notes
