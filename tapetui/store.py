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

__all__ = ["candidate_path", "golden_of", "is_golden", "iter_goldens", "journal_path", "refuse_links_out", "runlog_path",
           "safe_path", "session_name"]

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
    t, d = str(tape), str(tapes_dir).rstrip("/") + "/"
    if t.startswith(d) and "/../" not in t and "/./" not in t:  # paths from iter_goldens: string work only
        rel_s = t[len(d):]
        return rel_s[: -len(".jsonl")] if rel_s.endswith(".jsonl") else rel_s
    tape, tapes_dir = Path(tape), Path(tapes_dir)
    try:
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


def refuse_links_out(tapes_dir: Path, *paths: Path) -> None:
    """Raise TapeError for any of ``paths`` that is a symlink leading out of the tapes folder.

    Goldens, candidates and run logs are read through this check, so a planted
    ``x.candidate.jsonl -> ~/.ssh/id_rsa`` is never read, shown or accepted into a golden.
    """
    for p in paths:
        if os.path.islink(p):
            root = Path(tapes_dir).resolve()
            target = Path(p).resolve()
            if target != root and root not in target.parents:
                raise TapeError(f"{p}: a symlink to {target}, outside the tapes folder {root}; not followed")


def iter_goldens(tapes_dir: Path) -> Iterator[Path]:
    """Every golden under ``tapes_dir`` (also ones whose only file so far is a candidate), sorted.

    Symlinks that lead out of the folder are skipped; hidden files and folders are not read.
    One ``scandir`` per folder and string work per name: 10,000 sessions list in tens of ms.
    """
    root = Path(tapes_dir).resolve()
    found: set[tuple[str, ...]] = set()
    stack: list[tuple[str, tuple[str, ...]]] = [(str(root), ())]
    while stack:
        folder, rel = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for e in entries:
            name = e.name
            if name.startswith("."):
                continue
            try:
                if e.is_dir(follow_symlinks=False):
                    stack.append((e.path, (*rel, name)))
                    continue
                if not name.endswith(".jsonl"):
                    continue
                if e.is_symlink():
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
