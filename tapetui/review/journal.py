"""The commit protocol: a golden never changes without its changelog entry (nor its history record).

Every action that changes a golden goes through :func:`commit`, a small journaled protocol so
that the golden never changes without its changelog entry, even if the process dies half way:

0. the bytes the change replaces (golden and candidate) are kept under ``.tapetui/history/``
   (:mod:`tapetui.review.history`), so ``tapetui undo`` can revert it from any process later;
1. the new golden is written to a hidden temp file beside it and fsynced;
2. a journal (``name.jsonl.journal``) naming the temp file, the changelog entry and
   its id is written atomically — from here on the change rolls forward;
3. the entry is appended to the changelog (skipped when its id is already there);
4. the temp file is renamed over the golden; the candidate is removed if accepted whole;
5. the journal is removed.

A crash before 2 leaves the golden as it was (a history record with no changelog entry is
never undone: :func:`tapetui.review.revert.undo` only reverts changes the changelog names).
:func:`recover` (run first by every command and by the app) finishes any journal it finds,
after checking the temp golden against the journal's sha256, and deletes temp files that
never got a journal, so an interrupted accept is either fully done or never happened.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

import tapetui.review.history as history
from tapetui.core.changes import json_name
from tapetui.core.clock import now_iso
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import atomic_write, file_sha256, fsync_dir
from tapetui.core.locks import session_lock, try_park_lock, try_session_lock
from tapetui.core.store import candidate_path, golden_of, journal_path, runlog_path, session_name
from tapetui.review.changelog import Entry, append_entry, ensure_writable, has_entry
from tapetui.review.parking import LeftInPlace, is_parked, recover_parked, unpark

__all__ = ["commit", "new_entry", "recover", "session", "tmp_of", "write_new"]


def tmp_of(golden: Path) -> Path:
    """The hidden temp golden a commit writes before it renames it over the golden."""
    return golden.with_name(f".{golden.name}.next")


def new_entry(
    action: str, config: Config, golden: Path, steps: Iterable[int], details: list[str], rationale: str | None
) -> Entry:
    """A changelog entry for a change of ``golden`` made now, with a fresh id. A byte of the rationale or of the
    session's name that is not UTF-8 (typed in another encoding, a file name: a lone surrogate here) is kept as its
    escape (``\\udcff``), as JSON output shows it: the journal, the history and the changelog hold UTF-8."""
    return Entry(
        secrets.token_hex(6),
        now_iso(),
        action,
        json_name(session_name(golden, config.tapes_dir)),
        tuple(sorted(set(steps))),
        tuple(details),
        None if rationale is None else json_name(rationale),
    )


@contextmanager
def session(config: Config, golden: Path) -> Iterator[None]:
    """Hold a session for a review action: its lock, then what a dead process left of it finished.

    Every action reads the files it changes inside this, after the recovery: reading first
    would compute the change from a golden that the recovery then replaces (a lost update).
    This is the one recovery of the session per action: :func:`commit` relies on it.
    """
    with session_lock(golden):
        _recover_session(config, golden, strict=True)
        if is_parked(config, golden):  # a pending candidate an interrupted check --samples parked
            with try_park_lock(golden) as free:  # never waits: the park lock comes before the gate otherwise
                if free:
                    unpark(config, golden)
        yield


def commit(
    config: Config,
    golden: Path,
    data: bytes | None,
    entry: Entry,
    *,
    before: history.Before | None,
    remove_candidate: bool = False,
    reverts: str | None = None,
) -> None:
    """Change a golden and write its changelog entry, crash-safely (see the module doc).

    The caller holds :func:`session` and computed ``data`` inside it.

    Args:
        data: the new golden, or None to leave it (an entry alone, or only the candidate removed).
        before: what the change replaces, kept as history first so the change can be undone;
            None keeps no history (scrub: the old bytes hold what it removes).
        remove_candidate: remove the candidate once the change is made (accepted whole, rejected).
        reverts: an undo: the id of the entry it reverts (kept in its history record).

    Raises:
        TapeError: the history, the new golden or its journal cannot be written (nothing changed),
            or the change is journaled but cannot be finished now (``recover`` finishes it).
    """
    golden = Path(golden)
    with session_lock(golden):  # re-entrant: the caller holds it already
        tmp = tmp_of(golden)
        entry = entry.redacted(config.redactor())  # the journal is on disk too: no secret in it either
        sha = hashlib.sha256(data).hexdigest() if data is not None else None
        journal = {
            "id": entry.id,
            "golden": json_name(golden.name),  # a name that is not UTF-8: as JSON output shows it (checked, not used)
            "tmp": json_name(tmp.name) if data is not None else None,
            "sha256": sha,
            "remove_candidate": remove_candidate,
            "entry": {
                "when": entry.when,
                "action": entry.action,
                "session": entry.session,
                "steps": list(entry.steps),
                "details": list(entry.details),
                "rationale": entry.rationale,
            },
        }
        ensure_writable(config.changelog)  # a change whose entry cannot be written is not made
        try:
            if before is not None:  # before anything changes: no change without its history record
                history.save(config, golden, entry, before, after_sha256=sha, reverts=reverts)
            if data is not None:
                write_new(tmp, data)
            atomic_write(journal_path(golden), orjson.dumps(journal))
        except OSError as e:
            tmp.unlink(missing_ok=True)
            raise TapeError(f"{e.filename or golden}: cannot write: {e.strerror}; nothing was changed") from None
        try:
            _finish(config, golden, journal)
        except (OSError, TapeError) as e:
            why = f"{e.filename or golden}: {e.strerror}" if isinstance(e, OSError) else str(e)
            raise TapeError(
                f"{why}: the change of {golden.name} is journaled but not finished; run `tapetui recover` once this "
                "is fixed"
            ) from None


def write_new(path: Path, data: bytes) -> None:
    """Write a temp golden (never through a planted symlink), fsynced."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


_HEX = frozenset("0123456789abcdef")


def _journal_problem(golden: Path, j: Any) -> str | None:
    """What is wrong with a journal, or None: it is data from disk and is checked before anything is done."""
    if not isinstance(j, dict):
        return f"expected a JSON object, got {type(j).__name__}"
    jid = j.get("id")
    if not isinstance(jid, str) or not 1 <= len(jid) <= 64 or not set(jid) <= _HEX:
        return "'id' must be a hex string"
    if j.get("golden") != json_name(golden.name):
        return f"'golden' must be {json_name(golden.name)!r}"
    tmp, sha = j.get("tmp"), j.get("sha256")
    if tmp is not None and tmp != json_name(tmp_of(golden).name):
        return f"'tmp' must be null or {json_name(tmp_of(golden).name)!r}"
    if tmp is not None and not (isinstance(sha, str) and len(sha) == 64 and set(sha) <= _HEX):
        return "'sha256' must be the 64-hex sha256 of the temp golden"
    if not isinstance(j.get("remove_candidate"), bool):
        return "'remove_candidate' must be true or false"
    e = j.get("entry")
    if not isinstance(e, dict):
        return "'entry' must be an object"
    for k in ("when", "action", "session"):
        if not isinstance(e.get(k), str):
            return f"'entry.{k}' must be a string"
    steps, details = e.get("steps"), e.get("details")
    if not isinstance(steps, list) or not all(type(s) is int for s in steps):
        return "'entry.steps' must be a list of integers"
    if not isinstance(details, list) or not all(isinstance(d, str) for d in details):
        return "'entry.details' must be a list of strings"
    if e.get("rationale") is not None and not isinstance(e.get("rationale"), str):
        return "'entry.rationale' must be a string or null"
    return None


def _finish(config: Config, golden: Path, journal: dict[str, Any], *, verify: bool = False) -> None:
    """Roll a journaled change forward: changelog entry, rename, candidate, journal. Idempotent.

    ``verify``: check the temp golden (or, after the rename, the golden) against the journal's sha256
    first: ``recover`` does, since it finishes what another process wrote.

    Raises:
        TapeError: the files do not match the journal (nothing is done; the journal is left in place).
    """
    e = journal["entry"]
    entry = Entry(
        journal["id"], e["when"], e["action"], e["session"], tuple(e["steps"]), tuple(e["details"]), e["rationale"]
    )
    tmp = tmp_of(golden) if journal.get("tmp") else None  # the one name it may have (_journal_problem)
    rename = tmp is not None and os.path.lexists(tmp)
    if verify and tmp is not None:
        want = journal["sha256"]
        if rename and file_sha256(tmp) != want:
            raise TapeError(
                f"{tmp}: does not match its journal's sha256; the golden was not changed "
                f"(inspect {journal_path(golden).name}, then remove it and {tmp.name})"
            )
        if not rename and file_sha256(golden) != want:
            raise TapeError(
                f"{journal_path(golden)}: its temp golden is gone and the golden is not the journaled "
                "one; nothing was done (inspect and remove the journal)"
            )
    if not has_entry(config.changelog, entry.id):
        append_entry(config.changelog, entry, config.redactor())
    if tmp is not None and rename:
        os.replace(tmp, golden)
        fsync_dir(golden.parent)
    if journal.get("remove_candidate"):
        candidate_path(golden).unlink(missing_ok=True)
    journal_path(golden).unlink(missing_ok=True)
    fsync_dir(golden.parent)


def _leftovers(golden: Path) -> list[Path]:
    """Temp files of a session's atomic writes (``.NAME….XXXXXXXX.tmp``) that a killed process left."""
    stems = {golden.name, golden.name + ".journal", candidate_path(golden).name, runlog_path(golden).name}
    out: list[Path] = []
    try:
        names = os.listdir(golden.parent)
    except OSError:
        return out
    for n in names:
        if n.startswith(".") and n.endswith(".tmp"):
            stem = n[1:-4].rpartition(".")[0]  # mkstemp: ".<name>.<random>.tmp"
            if stem in stems:
                out.append(golden.parent / n)
    return out


def _recover_session(config: Config, golden: Path, *, strict: bool = False) -> list[str]:
    """Finish or undo what a dead process left of one session. The caller holds the session lock.

    ``strict``: raise instead of noting a journal that cannot be finished (before a new commit,
    which must not overwrite it).
    """
    notes: list[str] = []
    jp = journal_path(golden)
    if os.path.lexists(jp):
        problem = None
        journal: Any = None
        try:
            if not stat.S_ISREG(os.lstat(jp).st_mode):
                problem = "not a regular file"
            else:
                journal = orjson.loads(jp.read_bytes())
        except (OSError, orjson.JSONDecodeError) as e:
            problem = f"unreadable: {e}"
        problem = problem or _journal_problem(golden, journal)
        if problem is None:
            try:
                _finish(config, golden, journal, verify=True)
                notes.append(
                    f"{golden}: completed an interrupted {journal['entry']['action']} (changelog entry {journal['id']})"
                )
            except TapeError as e:
                problem = f"{e} (the journal is left in place)"
        else:
            problem = f"{jp}: malformed journal ({problem}); left in place, the golden was not changed"
        if problem is not None:
            if strict:
                raise TapeError(problem)
            notes.append(LeftInPlace(problem))
    tmp = tmp_of(golden)
    if not os.path.lexists(jp) and os.path.lexists(tmp):
        tmp.unlink()
        notes.append(f"{tmp}: removed an unfinished temp golden (the golden was not changed)")
    for left in _leftovers(golden):
        left.unlink(missing_ok=True)
        notes.append(f"{left}: removed a temp file of an interrupted write")
    return notes


def recover(config: Config) -> list[str]:
    """Finish interrupted commits and drop temp files that a dead process left.

    A session another live process holds (:mod:`tapetui.core.locks`) is left alone: every file
    this finds in a session it could lock belongs to a process that died.

    Returns:
        One line per repair, for the caller to show; a problem left in place is a :class:`LeftInPlace`.
    """
    notes: list[str] = []
    root = config.tapes_dir
    if not root.is_dir():
        return notes
    notes += recover_parked(config)  # an interrupted check --samples: its parked candidate goes back first
    found: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".") and not d.endswith(".samples")]
        here = Path(dirpath)
        for f in filenames:
            if f.endswith(".jsonl.journal"):
                found.add(here / f[: -len(".journal")])
            elif f.startswith(".") and f.endswith(".jsonl.next"):
                found.add(here / f[1 : -len(".next")])
            elif f.startswith(".") and f.endswith(".tmp"):
                g = golden_of(here / f[1:-4].rpartition(".")[0])
                if g is not None:
                    found.add(g)
    for golden in sorted(found):
        try:
            with try_session_lock(golden) as held:
                if not held:
                    notes.append(f"{golden}: in use by another process; left alone")
                    continue
                notes += _recover_session(config, golden)
        except (TapeError, OSError) as e:
            notes.append(LeftInPlace(f"{golden}: cannot recover: {e}"))
    return notes
