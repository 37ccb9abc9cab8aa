"""Undo from any process: revert the newest accept, reject or expire of a session.

What a change replaced is kept by the commit protocol under ``.tapetui/history/``
(:mod:`tapetui.review.history`); the changelog says which changes were made and which were
undone already. An undo is itself a change: it is journaled, kept as history and logged as an
``undo`` entry that names the entry it reverts, so a second undo reverts the change before.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import tapetui.review.history as history
import tapetui.review.journal as journal
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import atomic_write, read_regular
from tapetui.core.store import candidate_path, refuse_links_out, rotate_candidate, session_name
from tapetui.review.changelog import Entry, Logged, logged_entries, rendered_session
from tapetui.review.history import HistoryRecord

__all__ = ["UNDOABLE", "undo", "undo_target"]

UNDOABLE = frozenset(("accept", "accept (new session)", "reject", "expire"))
"""The actions :func:`undo` reverts (an undo is not undone: the next undo reverts the change before)."""


def undo_target(config: Config, golden: Path) -> HistoryRecord | None:
    """The change :func:`undo` would revert now, or None when there is none.

    Raises:
        TapeError: the newest change the changelog names has no history record (made before
            history was kept, or its history was removed), so nothing older may be undone either.
    """
    golden = Path(golden)
    logged = logged_entries(config.changelog)
    ids = {e.id for e in logged}
    recs = history.records(config, golden)
    by_id = {r.id: r for r in recs}
    reverted = {r.reverts for r in recs if r.action == "undo" and r.id in ids and r.reverts}
    name = rendered_session(session_name(golden, config.tapes_dir))
    mine = [e for e in logged if e.session == name]
    reverted |= {e.reverts for e in mine if e.action == "undo" and e.reverts}
    target = None
    for r in reversed(recs):
        if r.action in UNDOABLE and r.id not in reverted and _done(r, ids, golden):
            target = r
            break
    newest = next((e for e in reversed(mine) if e.action in UNDOABLE and e.id not in reverted), None)
    if newest is not None and newest.id not in by_id and (target is None or target.logged):
        raise TapeError(_gone(config, golden, newest))
    return target


def undo(config: Config, golden: Path, *, expect: str | None = None) -> Entry:
    """Revert the newest accept, reject or expire of a session that is not undone yet.

    The golden (and the candidate, when the change removed it) get back the exact bytes they had
    before it; the ``undo`` changelog entry names the entry it reverts.

    Args:
        expect: the changelog entry id the caller asked a person about (:func:`undo_target` before a
            confirmation): when the newest change is another one by now, nothing is undone.

    Raises:
        TapeError: nothing to undo, the history is gone, the newest change is not ``expect``, or the files
            changed since in a way an undo would lose (a newer candidate, a golden changed outside the changelog).
    """
    golden = Path(golden)
    cand = candidate_path(golden)
    refuse_links_out(config.tapes_dir, golden, cand)
    with journal.session(config, golden):
        target = undo_target(config, golden)
        if target is None:
            raise TapeError(
                f"{session_name(golden, config.tapes_dir)}: nothing to undo (no accept, reject or expire of it "
                f"in {config.changelog.name} that is not undone already)"
            )
        if expect is not None and target.id != expect:
            raise TapeError(
                f"{session_name(golden, config.tapes_dir)}: its newest change is {_named(target)} now, not changelog "
                f"entry {expect} (another process changed the session meanwhile); nothing was undone"
            )
        return _revert(config, golden, cand, target)


def _revert(config: Config, golden: Path, cand: Path, rec: HistoryRecord) -> Entry:
    what = f"the {rec.action} of {rec.session} ({_named(rec)}, {rec.when})"
    if rec.action == "accept (new session)":
        raise TapeError(f"cannot undo {what}: there was no golden before it (reject-style undo would delete it)")
    old_cand = history.read_bytes(rec, "candidate") if rec.before.touches_candidate else None
    old_golden = history.read_bytes(rec, "golden") if rec.before.touches_golden else None
    if (old_cand is None and not rec.before.touches_golden) or (rec.before.touches_golden and old_golden is None):
        raise TapeError(f"{rec.folder}/{rec.stem}.json: this record keeps nothing to put back; not undone")
    now_cand = read_regular(cand, "candidate") if os.path.lexists(cand) else None
    details = [f"reverts {_named(rec)} ({rec.action} of {rec.when})"]
    now_golden = read_regular(golden) if golden.exists() else None
    if old_golden is not None:
        now_sha = hashlib.sha256(now_golden).hexdigest() if now_golden is not None else None
        if rec.after_sha256 is not None and now_sha != rec.after_sha256:
            raise TapeError(
                f"cannot undo {what}: the golden changed since outside the changelog's history "
                "(a scrub, a hand edit); nothing was changed"
            )
    restore_cand = old_cand is not None and now_cand != old_cand
    if restore_cand and now_cand is not None:  # another candidate is pending: kept beside, never overwritten
        moved = rotate_candidate(golden)
        details.append(f"the candidate pending then was moved to {moved} (never replaced silently)")
    entry = journal.new_entry("undo", config, golden, [], details, f"undo of {rec.action} {rec.id}")
    if restore_cand:
        assert old_cand is not None  # for mypy: restore_cand says so
        atomic_write(cand, old_cand)  # first: a crash before the entry leaves it, and undo again finds it
    before = history.Before(old_golden is not None, now_golden, restore_cand, None)
    try:
        journal.commit(config, golden, old_golden, entry, before=before, reverts=rec.id)
    except TapeError as e:
        if restore_cand:
            raise TapeError(
                f"{e} (the candidate of {what} is back already; run tapetui undo again to finish)"
            ) from None
        raise
    return entry


def _named(rec: HistoryRecord) -> str:
    """How the reverted change is named: its changelog entry, or what it was when it wrote none."""
    return f"changelog entry {rec.id}" if rec.logged else "a reject without a reason (no changelog entry)"


def _done(rec: HistoryRecord, ids: set[str], golden: Path) -> bool:
    """Whether a kept change was made: its changelog entry is there (the commit protocol writes the
    entry before the golden changes, and recover finishes it); a reject without a reason writes no
    entry: it was made when its candidate is gone (or is another one by now)."""
    if rec.logged:
        return rec.id in ids
    try:
        kept = history.read_bytes(rec, "candidate")
    except TapeError:
        return False
    cand = candidate_path(golden)
    if not os.path.lexists(cand):
        return True
    try:
        return read_regular(cand, "candidate") != kept
    except TapeError:
        return True


def _gone(config: Config, golden: Path, newest: Logged) -> str:
    folder = history.history_dir(config, golden)
    try:
        kept = sorted(folder.glob(f"*-{newest.id}.json")) if folder.is_dir() and not folder.is_symlink() else []
    except OSError:
        kept = []
    name = session_name(golden, config.tapes_dir)
    if kept:  # the record is there but could not be read as one tapetui wrote
        return (
            f"{name}: cannot undo the {newest.action} of changelog entry {newest.id}: its history record {kept[0]} "
            "is not one tapetui wrote (unreadable, too big, not a plain file, or changed by hand); nothing was changed"
        )
    return (
        f"{name}: cannot undo the {newest.action} of changelog entry {newest.id}: "
        f"its history is gone ({config.root / history.HISTORY_DIR} keeps the last {history.KEEP} changes of a "
        "session; changes made before tapetui kept history have none); nothing was changed"
    )
