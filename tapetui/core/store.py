"""The tapes folder: which file is a golden, a candidate, a run log; safe paths within it.

Beside a golden ``name.jsonl`` live its pending candidate ``name.candidate.jsonl``, the
latest run log ``name.run.jsonl``, older candidates that a newer recording displaced
(``name.samples/<time>.jsonl``), the session's lock files (``.name.jsonl.gate`` and
``.name.jsonl.lock``, see :mod:`tapetui.core.locks`) and, after a crash, ``name.jsonl.torn``
(torn bytes kept for forensics) or a commit journal ``name.jsonl.journal``.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from tapetui.core.errors import TapeError
from tapetui.core.files import STATE_DIR, atomic_write
from tapetui.core.listing import Listing

__all__ = [
    "MAX_NAME",
    "candidate_path",
    "golden_of",
    "inside",
    "has_golden",
    "is_golden",
    "iter_goldens",
    "journal_path",
    "prepare_recording",
    "recording_target",
    "refuse_links_out",
    "rotate_candidate",
    "runlog_path",
    "safe_path",
    "samples_dir",
    "samples_of",
    "session_name",
]

_AUX = (".candidate.jsonl", ".run.jsonl")
# The longest tape file name a recording creates: the names beside it (".NAME.jsonl.journal.XXXXXXXX.tmp",
# the longest) must stay within the 255 bytes file systems allow.
MAX_NAME = 220
SAMPLES_SUFFIX = ".samples"


def _base(tape: Path) -> str:
    name = tape.name
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else name


def candidate_path(tape: Path) -> Path:
    tape = tape if isinstance(tape, Path) else Path(tape)
    return tape.with_name(_base(tape) + ".candidate.jsonl")


def runlog_path(tape: Path) -> Path:
    tape = tape if isinstance(tape, Path) else Path(tape)
    return tape.with_name(_base(tape) + ".run.jsonl")


def journal_path(tape: Path) -> Path:
    tape = tape if isinstance(tape, Path) else Path(tape)
    return tape.with_name(tape.name + ".journal")


def samples_dir(tape: Path) -> Path:
    """``name.samples/``: older candidates of a session, each named by the time it was displaced."""
    tape = tape if isinstance(tape, Path) else Path(tape)
    return tape.with_name(_base(tape) + SAMPLES_SUFFIX)


def samples_of(tape: Path) -> list[Path]:
    """The session's older candidates, oldest first (empty when there are none)."""
    folder = samples_dir(tape)
    try:
        names = sorted(
            e.name
            for e in os.scandir(folder)
            if e.name.endswith(".jsonl") and not e.name.startswith(".") and e.is_file(follow_symlinks=False)
        )
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [folder / n for n in names]


def rotate_candidate(tape: Path) -> Path | None:
    """Move a pending candidate into ``name.samples/`` (never replace it silently); returns where it went.

    The caller holds the session's gate (:mod:`tapetui.core.locks`). A process still appending to the
    candidate keeps writing into the moved file (its descriptor follows the file), so nothing is lost.
    """
    cand = candidate_path(tape)
    try:
        st = os.lstat(cand)
    except FileNotFoundError:
        return None
    dest = _sample_name(tape, st.st_mtime)
    os.rename(cand, dest)
    return dest


def keep_sample(tape: Path, data: bytes) -> Path:
    """Keep ``data``, a pending candidate about to be rewritten in place (a re-record of one of its steps), in
    ``name.samples/`` as a displaced candidate is: the candidate is never replaced silently. Returns where it went.
    The caller holds the session's gate."""
    dest = _sample_name(tape, datetime.now(UTC).timestamp())
    atomic_write(dest, data)
    return dest


def _sample_name(tape: Path, when: float) -> Path:
    """A free name in ``name.samples/`` (made if need be) for a candidate displaced at ``when``."""
    folder = samples_dir(tape)
    folder.mkdir(exist_ok=True)
    stamp = datetime.fromtimestamp(when, UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    dest = folder / f"{stamp}.jsonl"
    n = 1
    while os.path.lexists(dest):
        n += 1
        dest = folder / f"{stamp}-{n}.jsonl"
    return dest


def prepare_recording(tape: Path) -> None:
    """Make sure a recording of ``tape`` can start: its name leaves room for the files beside it, and its
    folder exists (a recording makes it, as the README's first example expects).

    Raises:
        TapeError: the name is longer than :data:`MAX_NAME` bytes, or the folder cannot be made.
    """
    tape = tape if isinstance(tape, Path) else Path(tape)
    if not is_golden(tape) or any(part.endswith(SAMPLES_SUFFIX) or part == STATE_DIR for part in tape.parts[:-1]):
        # a run log's or a candidate's name, a samples or state folder: tapetui's own files, which a recording
        # there would be taken for (and overwritten as)
        raise TapeError(
            f"{tape}: a recording needs a tape's own name, NAME.jsonl (not NAME.run.jsonl, NAME.candidate.jsonl, a "
            f"hidden name, or a file in a NAME{SAMPLES_SUFFIX}/ or {STATE_DIR}/ folder: those are tapetui's own)"
        )
    size = len(os.fsencode(tape.name))
    if size > MAX_NAME:
        raise TapeError(
            f"{tape}: a tape name of {size} bytes is too long: its candidate, journal and lock files "
            f"need room beside it; keep it within {MAX_NAME} bytes"
        )
    try:
        tape.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise TapeError(f"{tape.parent}: cannot make the tape's folder: {e.strerror or e}") from None


def has_golden(tape: Path) -> bool:
    """Whether the session has a golden: a non-empty file at ``tape``.

    Raises:
        TapeError: the path cannot be looked at (a name too long for the file system, a folder that cannot be
            searched).
    """
    try:
        return Path(tape).stat().st_size > 0
    except FileNotFoundError:
        return False
    except OSError as e:
        raise TapeError(f"{tape}: {e.strerror or e}") from None


def recording_target(tape: Path, *, golden_in_use: bool = False) -> tuple[Path, Path | None]:
    """Where a new recording of the session goes, and where a pending candidate was moved (or None).

    The first recording of a session creates the golden; any later one (while a golden exists, or
    ``golden_in_use``: a fill plays against it) writes the candidate, moving a pending candidate into
    ``NAME.samples/`` first (:func:`rotate_candidate`). The caller holds the session's gate.
    """
    tape = tape if isinstance(tape, Path) else Path(tape)
    if not golden_in_use and not has_golden(tape):
        return tape, None
    moved = rotate_candidate(tape)
    return candidate_path(tape), moved


def is_golden(path: Path) -> bool:
    name = path.name
    return name.endswith(".jsonl") and not name.endswith(_AUX) and not name.startswith(".")


def golden_of(path: Path) -> Path | None:
    """The golden a tapes-folder file belongs to (itself for a golden), or None."""
    name = path.name
    parent = path.parent.name
    if parent.endswith(SAMPLES_SUFFIX) and len(parent) > len(SAMPLES_SUFFIX):  # name.samples/<time>.jsonl
        return path.parent.with_name(parent[: -len(SAMPLES_SUFFIX)] + ".jsonl") if name.endswith(".jsonl") else None
    for suffix in _AUX:
        if name.endswith(suffix):
            return path.with_name(name[: -len(suffix)] + ".jsonl")
    for suffix in (".torn", ".journal"):
        if name.endswith(".jsonl" + suffix):
            return path.with_name(name[: -len(suffix)])
    return path if is_golden(path) else None


def session_name(tape: Path, tapes_dir: Path) -> str:
    """``folder/name`` of a golden relative to the tapes folder."""
    t, d = str(tape), str(tapes_dir).rstrip("/") + "/"
    if t.startswith(d) and "/../" not in t and "/./" not in t:  # paths from iter_goldens: string work only
        rel_s = t[len(d) :]
        return rel_s[: -len(".jsonl")] if rel_s.endswith(".jsonl") else rel_s
    tape, tapes_dir = Path(tape), Path(tapes_dir)
    try:
        rel = tape.relative_to(tapes_dir)
    except ValueError:
        try:
            rel = resolved(tape).relative_to(resolved(tapes_dir))
        except ValueError:
            rel = Path(tape.name)
    return str(rel)[: -len(".jsonl")] if str(rel).endswith(".jsonl") else str(rel)


def inside(root: Path, path: str | os.PathLike[str]) -> Path | None:
    """``path`` resolved (symlinks followed; relative to ``root`` unless absolute) when it stays inside ``root``
    or is ``root`` itself, else None: the one test of "stays inside the root".

    Raises:
        OSError, ValueError: the path cannot be resolved (a symlink loop, a NUL byte).
    """
    base = resolved(Path(root))
    full = resolved(base / path)
    return full if full == base or base in full.parents else None


def resolved(path: Path) -> Path:
    """``path.resolve()``, a symlink loop an ``OSError`` (ELOOP) naming it, as Python 3.13 raises it (before, a
    ``RuntimeError``): the error every reader turns into a message naming the file.

    Raises:
        OSError: a symlink loop, a NUL byte.
    """
    try:
        return path.resolve()
    except RuntimeError:  # a symlink loop, as Python before 3.13 reports it
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), os.fspath(path)) from None


def safe_path(tapes_dir: Path, name: str | Path) -> Path:
    """Resolve ``name`` inside ``tapes_dir``; refuse anything that leads out of it.

    Raises:
        TapeError: ``../`` escapes, absolute paths elsewhere, symlinks pointing out.
    """
    full = inside(tapes_dir, name)
    if full is None:
        raise TapeError(f"{name}: outside the tapes folder {Path(tapes_dir).resolve()}")
    return full


def refuse_links_out(tapes_dir: Path, *paths: Path) -> None:
    """Raise TapeError for any of ``paths`` that is a symlink leading out of the tapes folder.

    Goldens, candidates and run logs are read through this check, so a planted
    ``x.candidate.jsonl -> ~/.ssh/id_rsa`` is never read, shown or accepted into a golden.
    """
    for p in paths:
        if os.path.islink(p) and inside(tapes_dir, os.path.abspath(p)) is None:
            raise TapeError(
                f"{p}: a symlink to {Path(p).resolve()}, outside the tapes folder {Path(tapes_dir).resolve()}; "
                "not followed"
            )


def _leads_to_folder(e: os.DirEntry[str]) -> bool:
    """Whether a symlink leads to a folder; False for one that loops (or whose target cannot be looked at): a loop
    named like a tape is then listed as a file, and its check says what it is, never passes over it."""
    try:
        return e.is_dir()
    except OSError:
        return False


def iter_goldens(
    tapes_dir: Path,
    listing: Listing | None = None,
    *,
    links_out: bool = False,
    unlisted: list[tuple[Path, str]] | None = None,
) -> Iterator[Path]:
    """Every golden under ``tapes_dir`` (also ones whose only file so far is a candidate), sorted.

    Symlinks that lead out of the folder are skipped (``links_out``: listed too, a folder by its own name, for the
    caller to refuse: ``check`` says so rather than pass over a session; so is a sub-folder that cannot be listed);
    hidden files and folders are not read. One ``scandir`` per folder and string work per name: 10,000 sessions list
    in tens of ms. ``listing``: keeps what each ``scandir`` saw (``check`` then asks the file system nothing more).
    ``unlisted``: gets each folder that cannot be listed (``tapes_dir`` too), and why.
    """
    root = resolved(Path(tapes_dir))
    found: set[tuple[str, ...]] = set()
    stack: list[tuple[str, tuple[str, ...]]] = [(str(root), ())]
    while stack:
        folder, rel = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError as err:
            if links_out and rel:  # a folder that cannot be listed is listed by its name, for check to say so
                found.add(rel)
            if unlisted is not None:  # the tapes folder itself too
                unlisted.append((Path(folder), err.strerror or type(err).__name__))
            continue
        if listing is not None:
            listing.note(folder, entries)
        for e in entries:
            name = e.name
            if name.startswith("."):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    if name.endswith(SAMPLES_SUFFIX):  # a session's older candidates, not sessions
                        continue
                    stack.append((e.path, (*rel, name)))
                    continue
                if links_out and e.is_symlink() and _leads_to_folder(e) and not name.endswith(SAMPLES_SUFFIX):
                    # a folder that leads out is listed by its name, for check to refuse (never to pass over the
                    # sessions it holds); one that stays inside is read where it is
                    try:
                        safe_path(root, e.path)
                    except TapeError:
                        found.add((*rel, name))
                    continue
                if not name.endswith(".jsonl"):
                    continue
                if e.is_symlink() and not links_out:
                    safe_path(root, e.path)
            except (OSError, TapeError):
                continue
            for suffix in _AUX:
                if name.endswith(suffix):
                    name = name[: -len(suffix)] + ".jsonl"
                    break
            found.add((*rel, name))
    for parts in sorted(found):
        yield root.joinpath(*parts)
