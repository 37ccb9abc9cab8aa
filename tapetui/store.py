"""The tapes folder: which file is a golden, a candidate, a run log; safe paths within it.

Beside a golden ``name.jsonl`` live its pending candidate ``name.candidate.jsonl``, the
latest run log ``name.run.jsonl`` and, after a crash, ``name.jsonl.torn`` (torn bytes
kept for forensics) or an accept journal ``name.jsonl.journal``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

from tapetui.errors import TapeError

__all__ = ["candidate_path", "golden_of", "is_golden", "iter_goldens", "journal_path", "runlog_path", "safe_path",
           "session_name"]

_AUX = (".candidate.jsonl", ".run.jsonl")


def _base(tape: Path) -> str:
    name = tape.name
    return name[: -len(".jsonl")] if name.endswith(".jsonl") else name


def candidate_path(tape: Path) -> Path:
    tape = Path(tape)
    return tape.with_name(_base(tape) + ".candidate.jsonl")


def runlog_path(tape: Path) -> Path:
    tape = Path(tape)
    return tape.with_name(_base(tape) + ".run.jsonl")


def journal_path(tape: Path) -> Path:
    tape = Path(tape)
    return tape.with_name(tape.name + ".journal")


def is_golden(path: Path) -> bool:
    name = path.name
    return name.endswith(".jsonl") and not name.endswith(_AUX) and not name.startswith(".")


def golden_of(path: Path) -> Path | None:
    """The golden a tapes-folder file belongs to (itself for a golden), or None."""
    name = path.name
    for suffix in _AUX:
        if name.endswith(suffix):
            return path.with_name(name[: -len(suffix)] + ".jsonl")
    for suffix in (".torn", ".journal"):
        if name.endswith(".jsonl" + suffix):
            return path.with_name(name[: -len(suffix)])
    return path if is_golden(path) else None


def session_name(tape: Path, tapes_dir: Path) -> str:
    """``folder/name`` of a golden relative to the tapes folder."""
    tape, tapes_dir = Path(tape), Path(tapes_dir)
    try:  # paths from iter_goldens are already absolute and resolved: no system calls needed
        rel = tape.relative_to(tapes_dir)
    except ValueError:
        try:
            rel = tape.resolve().relative_to(tapes_dir.resolve())
        except ValueError:
            rel = Path(tape.name)
    return str(rel)[: -len(".jsonl")] if str(rel).endswith(".jsonl") else str(rel)


def safe_path(tapes_dir: Path, name: str | Path) -> Path:
    """Resolve ``name`` inside ``tapes_dir``; refuse anything that leads out of it.

    Raises:
        TapeError: ``../`` escapes, absolute paths elsewhere, symlinks pointing out.
    """
    root = Path(tapes_dir).resolve()
    p = Path(name)
    full = (p if p.is_absolute() else root / p).resolve()
    if full != root and root not in full.parents:
        raise TapeError(f"{name}: outside the tapes folder {root}")
    return full


def iter_goldens(tapes_dir: Path) -> Iterator[Path]:
    """Every golden under ``tapes_dir`` (also ones whose only file so far is a candidate), sorted.

    Symlinks that lead out of the folder are skipped; hidden folders are not entered.
    """
    root = Path(tapes_dir).resolve()
    found: set[Path] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in filenames:
            p = Path(dirpath) / fn
            g = golden_of(p)
            if g is None or not (fn.endswith(".jsonl")):
                continue
            if p.is_symlink():
                try:
                    safe_path(root, p)
                except TapeError:
                    continue
            found.add(g)
    yield from sorted(found)
