"""Where the index cache (:mod:`tapetui.core.indexcache`) keeps its entries, and dropping one tape's entry.

Apart from the cache itself so that the index (:mod:`tapetui.core.index`), which drops an entry it finds
stale, does not import the cache that builds indexes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

__all__ = ["cache_dir", "entry_path", "forget", "state_dir"]


def cache_dir() -> Path | None:
    """The cache folder, or None when the cache is off."""
    env = os.environ.get("TAPETUI_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "no", "false") else Path(env)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "tapetui" / "index"
    try:
        return Path.home() / ".cache" / "tapetui" / "index"
    except RuntimeError:  # no home folder: no cache
        return None


def state_dir() -> Path:
    """This user's own folder for what tapetui must know across processes on this machine and that no
    repository may forge (the tokens of parked candidates): ``$TAPETUI_STATE_DIR``, else
    ``$XDG_STATE_HOME/tapetui``, else ``~/.local/state/tapetui``, else a private folder in the temp folder."""
    env = os.environ.get("TAPETUI_STATE_DIR")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "tapetui"
    try:
        return Path.home() / ".local" / "state" / "tapetui"
    except RuntimeError:  # no home folder
        return Path(tempfile.gettempdir()) / f"tapetui-{os.getuid()}"


def entry_path(tape: Path) -> Path | None:
    """The cache file for a tape (by its absolute path), or None when the cache is off."""
    folder = cache_dir()
    if folder is None:
        return None
    name = hashlib.sha256(os.fsencode(os.path.abspath(tape))).hexdigest()[:32]
    return folder / f"{name}.idx"


def forget(tape: Path) -> None:
    """Drop a tape's entry (it was found stale)."""
    entry = entry_path(tape)
    if entry is not None:
        with contextlib.suppress(OSError):
            entry.unlink()
