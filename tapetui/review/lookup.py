"""Which tape a command line's ``TAPE`` names: a path (``.jsonl`` may be left out), else a session name.

The one lookup of every ``tapetui`` command that takes a tape: the review commands (:func:`session_tape`,
the golden of a session) and ``tapetui mcp`` (:func:`tape_file`, the file itself). A name that is not a path
to an existing file is looked up in the tapes folder and must stay inside it: ``../`` escapes and symlinks
leading out are refused (:func:`tapetui.core.store.safe_path`).
"""

from __future__ import annotations

from pathlib import Path

from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.store import candidate_path, golden_of, resolved, safe_path

__all__ = ["session_tape", "tape_file", "tape_path"]


def tape_path(tapes_dir: Path, name: str, *, anywhere: bool = False) -> Path:
    """The path ``name`` names: itself when it exists as given (relative to the current folder), else the name
    in ``tapes_dir``; resolved inside the tapes folder.

    Args:
        anywhere: a path that exists as given, or an absolute one, is taken as it is, wherever it is (a tape
            read with its own tapes.toml, as ``tapetui mcp`` reads one); a name looked up in the tapes folder
            must still stay inside it.

    Raises:
        TapeError: the path leads out of the tapes folder, or names no file (empty, ``.``, ``/``).
    """
    p = Path(name)
    if not p.name or p.name == "..":
        raise TapeError(f"{name!r}: not a tape's name (a session name, or a path to its .jsonl file)")
    if not p.suffix:
        p = p.with_suffix(".jsonl")
    if not p.is_absolute() and not p.exists():
        p = tapes_dir / p
    elif anywhere:
        return p
    return safe_path(tapes_dir, resolved(p))  # ../ escapes, absolute paths elsewhere, symlinks out: refused


def session_tape(config: Config, name: str) -> Path:
    """The golden of the session ``name`` names (a golden, its candidate or its run log; or a session name) in
    the tapes folder: the tape of ``tapetui diff``, ``accept``, ``reject``, ``undo``...

    Raises:
        TapeError: outside the tapes folder, or neither the golden nor a candidate exists.
    """
    full = tape_path(config.tapes_dir, name)
    g = golden_of(full) or full
    if not g.exists() and not candidate_path(g).exists():
        raise TapeError(f"{name}: no such tape (looked for {g}; the tapes folder is {config.tapes_dir})")
    return g


def tape_file(tapes_dir: Path, name: str) -> Path:
    """The tape file ``name`` names, read as it is (``tapetui mcp serve`` and ``verify``): a path to an existing
    file anywhere (see :func:`tape_path`'s ``anywhere``), else a session name in the tapes folder.

    Raises:
        TapeError: a name that leads out of the tapes folder, no such file, or not a regular file.
    """
    t = tape_path(tapes_dir, name, anywhere=True)
    if t.is_file():
        return t
    if t.exists():
        raise TapeError(f"{t}: not a tape (it is not a regular file)")
    raise TapeError(f"{name}: no such tape (looked for {t}; the tapes folder is {tapes_dir})")
