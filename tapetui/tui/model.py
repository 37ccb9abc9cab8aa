"""What the app knows of a session: paths, latest run summary, candidate, load errors.

Pure data over the core; no widgets here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tapetui.config import Config
from tapetui.errors import TapeError
from tapetui.golden import Comparison, compare
from tapetui.runlog import RunSummary
from tapetui.store import candidate_path, refuse_links_out
from tapetui.tapefile import TapeIndex, read_index

def _stamp(path: Path) -> tuple[int, int]:
    """What tells that a file changed: its mtime and size."""
    st = path.stat()
    return st.st_mtime_ns, st.st_size


GLYPH = {"hit": "✓", "drift": "≠", "miss": "?", "stale": "⌛", "unused": "∅", "contract": "⚡", "error": "✗",
         "pending": "●", "": "·"}


@dataclass(eq=False)  # identity: two sessions are never equal by value
class Session:
    golden: Path
    name: str
    tapes_dir: Path | None = field(default=None, repr=False)  # symlinks leading out of it are not followed
    summary: RunSummary = field(default_factory=RunSummary, repr=False)
    pending: bool = False
    error: str | None = None
    loaded: bool = False
    marked: bool = False
    _idx: tuple[tuple[int, int], TapeIndex] | None = field(default=None, repr=False)
    _cmp: tuple[tuple[tuple[int, int], tuple[int, int]], Comparison] | None = field(default=None, repr=False)

    def index(self) -> TapeIndex:
        """The golden's index, re-read only when the file changed (size or mtime)."""
        path = self.golden if self.golden.exists() else candidate_path(self.golden)
        try:
            if self.tapes_dir is not None:
                refuse_links_out(self.tapes_dir, path)
            stamp = _stamp(path)
            if self._idx is not None and self._idx[0] == stamp:
                return self._idx[1]
            idx = read_index(path)
        except TapeError as e:
            self.error = str(e)
            raise
        except OSError as e:
            self.error = f"{path}: {e.strerror}"
            raise TapeError(self.error) from None
        self.error = None
        self._idx = (stamp, idx)
        return idx

    def comparison(self, config: Config) -> Comparison:
        """The golden against its pending candidate, compared again only when either file changed
        (moving over the steps of a session would otherwise re-read both tapes at every key)."""
        cand = candidate_path(self.golden)
        try:
            stamp = (_stamp(self.golden), _stamp(cand))
        except OSError as e:
            raise TapeError(f"{e.filename}: {e.strerror}") from None
        if self._cmp is not None and self._cmp[0] == stamp:
            return self._cmp[1]
        cmp = compare(self.golden, cand, config)
        self._cmp = (stamp, cmp)
        return cmp

    @property
    def statuses(self) -> set[str]:
        s = self.summary
        flags = {"drift": s.drift, "miss": s.misses, "stale": s.stale, "pending": self.pending, "error": self.error,
                 "unused": s.unused}
        return {name for name, on in flags.items() if on}

    @property
    def needs_review(self) -> bool:
        return bool(self.statuses - {"stale", "unused"}) or bool(self.error)
