"""What the app knows of a session: paths, latest run summary, candidate, load errors.

Pure data over the core; no widgets here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tapetui.errors import TapeError
from tapetui.runlog import RunSummary
from tapetui.store import candidate_path, refuse_links_out
from tapetui.tapefile import TapeIndex, read_index

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

    def index(self) -> TapeIndex:
        """The golden's index, re-read only when the file changed (size or mtime)."""
        path = self.golden if self.golden.exists() else candidate_path(self.golden)
        try:
            if self.tapes_dir is not None:
                refuse_links_out(self.tapes_dir, path)
            st = path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
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

    @property
    def statuses(self) -> set[str]:
        s = self.summary
        out = set()
        if s.drift:
            out.add("drift")
        if s.misses:
            out.add("miss")
        if s.stale:
            out.add("stale")
        if self.pending:
            out.add("pending")
        if self.error:
            out.add("error")
        if s.unused:
            out.add("unused")
        return out

    @property
    def needs_review(self) -> bool:
        return bool(self.statuses - {"stale", "unused"}) or bool(self.error)
