"""Parking a session's pending candidate and run log while ``check --samples N`` records new samples.

The samples' own recordings would move a pending (unreviewed) candidate into ``NAME.samples/`` and replace the
run log, and a ``record_command`` may prune ``NAME.samples/`` as it likes. So before the first run the pending
candidate and the run log are moved *out of the session* to ``<tapes>/.tapetui/parked/<session>/`` and put back
afterwards, byte for byte. The protocol (the session lock protocol of :mod:`tapetui.core.locks` plus the park
lock):

1. ``check --samples`` takes the session's park lock (``.NAME.jsonl.park``) and holds it until the end;
2. under the gate and lock: a journal ``parked.json`` (the sha256 of the candidate and of the run log, or null
   when there is none) is written atomically into the parked folder, then the candidate and the run log are
   renamed into it;
3. the commands run, without the session lock (their ``Tape`` takes it);
4. under the gate and lock (:func:`unpark`): what the runs left as the candidate is a sample and joins
   ``NAME.samples/``; the parked files are checked against the journal and renamed back (a session that had no
   run log gets none); the journal and the folder are removed.

A kill at any point leaves the journal: :func:`recover_parked` (run by ``recover``, which every command and the
app run first) does step 4 for every session whose park lock nobody holds. A file that was never moved is told
from one a sample run wrote by its sha256, so nothing pending is taken for a sample and nothing is lost.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.clock import now_iso
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import atomic_write, file_sha256, fsync_dir, read_regular
from tapetui.core.locks import park_lock, session_lock, try_park_lock, try_session_lock
from tapetui.core.store import candidate_path, inside, rotate_candidate, runlog_path, session_name

__all__ = ["PARKED_DIR", "PARKED_JOURNAL", "parked", "parked_dir", "recover_parked", "unpark"]

PARKED_DIR = Path(".tapetui") / "parked"
PARKED_JOURNAL = "parked.json"
_CANDIDATE = "candidate.jsonl"
_RUN_LOG = "run.jsonl"


def parked_dir(config: Config, golden: Path) -> Path:
    """Where the session's pending candidate and run log wait: ``<tapes>/.tapetui/parked/<session>/``."""
    return config.tapes_dir / PARKED_DIR / session_name(golden, config.tapes_dir)


@contextmanager
def parked(config: Config, golden: Path) -> Iterator[None]:
    """Park the session's pending candidate and run log for the body, then put them back (steps 1–4).

    Raises:
        LockBusy: another process has parked this session, or holds it for longer than the usual wait.
        TapeError: the parked files cannot be written or put back (naming them; nothing is deleted).
    """
    with park_lock(golden):
        with session_lock(golden):
            unpark(config, golden)  # what a dead process left, first
            _park(config, golden)
        try:
            yield
        finally:
            with session_lock(golden):
                unpark(config, golden)


def _park(config: Config, golden: Path) -> None:
    """Step 2; the caller holds the park lock and the session lock."""
    folder = parked_dir(config, golden)
    cand, log = candidate_path(golden), runlog_path(golden)
    journal = {
        "v": 1,
        "session": session_name(golden, config.tapes_dir),
        "parked_at": now_iso(),
        "candidate": _sha(cand),
        "run_log": _sha(log),
    }
    folder.mkdir(parents=True, exist_ok=True)
    if inside(config.tapes_dir, folder) != folder.resolve() or folder.is_symlink():
        raise TapeError(f"{folder}: leads out of the tapes folder (a symlink); cannot park the pending candidate there")
    atomic_write(folder / PARKED_JOURNAL, orjson.dumps(journal) + b"\n")
    if journal["candidate"] is not None:
        os.rename(cand, folder / _CANDIDATE)
    if journal["run_log"] is not None:
        os.rename(log, folder / _RUN_LOG)
    fsync_dir(folder)
    fsync_dir(golden.parent)


def _sha(path: Path) -> str | None:
    if not os.path.lexists(path):
        return None
    sha = file_sha256(path)
    if sha is None:
        raise TapeError(f"{path}: not a regular file; cannot set it aside while samples are recorded")
    return sha


def unpark(config: Config, golden: Path) -> list[str]:
    """Step 4: put a parked candidate and run log back; returns what it did, a line each (nothing parked: []).

    The caller holds the session lock (and the park lock, or knows its holder died).

    Raises:
        TapeError: the journal or a parked file is not what it should be; everything is left in place.
    """
    folder = parked_dir(config, golden)
    jp = folder / PARKED_JOURNAL
    if not os.path.lexists(jp):
        return []
    journal = _read_journal(jp)
    cand, log = candidate_path(golden), runlog_path(golden)
    done: list[str] = []
    want_cand, want_log = journal["candidate"], journal["run_log"]
    parked_cand, parked_log = folder / _CANDIDATE, folder / _RUN_LOG
    for path, want in ((parked_cand, want_cand), (parked_log, want_log)):
        if os.path.lexists(path) and file_sha256(path) != want:
            raise TapeError(f"{path}: does not match {jp} (sha256); left in place, nothing was changed")
    # a candidate that is not the parked one was recorded by a sample run: it is a sample
    moved = os.path.lexists(parked_cand)
    if os.path.lexists(cand) and (moved or _sha(cand) != want_cand):
        rotate_candidate(golden)
    if moved:
        os.rename(parked_cand, cand)
        done.append(f"{cand}: put the pending candidate back")
    if os.path.lexists(parked_log):
        os.replace(parked_log, log)
    elif want_log is None:
        log.unlink(missing_ok=True)  # the session had no run log: the samples' own is not its
    elif _sha(log) != want_log:
        raise TapeError(f"{jp}: the run log it parked is neither parked nor in place; left in place")
    fsync_dir(golden.parent)
    jp.unlink()
    _remove_empty(folder, config.tapes_dir / PARKED_DIR)
    return done


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


def recover_parked(config: Config) -> list[str]:
    """Put back what an interrupted ``check --samples`` left parked (step 4), for every session whose park
    lock and session lock nobody holds; a line per repair or problem."""
    top = config.tapes_dir / PARKED_DIR
    if not top.is_dir():
        return []
    notes: list[str] = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames.sort()
        if PARKED_JOURNAL not in filenames:
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
                    notes += [f"{n} (after an interrupted check --samples)" for n in unpark(config, golden)]
        except (TapeError, OSError) as e:
            notes.append(f"{golden}: cannot put back its parked candidate: {e}")
    return notes
