"""The verdict cache: a session whose files have not changed since the last ``check`` is not judged again.

``tapetui check`` on a laptop, or on a CI runner that keeps its cache folder between runs, reads the same
unchanged sessions every time. What it found is kept in the user's own cache, one file per tapes folder
(``<cache>/check/<hash of the folder's path>.json``), never in the tapes folder, where a pull request could
plant one. A session's report is taken from there only when every one of these holds:

- its golden's and its run log's bytes hash (sha256) to what the entry says: the files are read and
  hashed each time, their size and time are never trusted alone;
- the entry was made by this tapetui (a digest of the package's source files) under this tapes.toml (a
  digest of its bytes) for this tapes folder;
- the session has no candidate, journal or parked candidate, none of its files is a symlink, and its
  ``[compare]`` settings run no hook of the user's (a hook's code is outside what the digest covers);
- the report it made had no error.

Entries are by the golden's path (a folder moved, or checked out elsewhere, is judged afresh: findings name
their files). Anything else is checked as if there were no cache, and a report is kept only when the
session's files have the same inode, size, mtime and ctime after it was made as before the hashing read
(a rewrite can set mtime back, never ctime), from longer ago than the file system's timestamps could hide
a write (git's "racy clean"): it is then the report of the bytes hashed. Entries are data, checked
against the files, never code (nothing is pickled); only a file this user owns and nobody else can write is
read. ``TAPETUI_CACHE_DIR=off`` turns it off (as the ``check`` benchmark's cold figure has it).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from functools import lru_cache
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.cachedir import cache_dir
from tapetui.core.config import Config
from tapetui.core.files import atomic_write, regular_or_none
from tapetui.core.listing import SessionFiles
from tapetui.review.finding import Finding
from tapetui.review.verdicts import Verdict

__all__ = ["CheckCache", "Key", "Lookup"]

FORMAT = 1
MAX_FILE = 64 * 1024 * 1024  # bytes: a file bigger than this is not hashed for the cache (checked as usual)

Key = tuple[str, str | None]
"""The sha256 of a session's golden and of its run log (None: it has none)."""
Stamp = tuple[int, int, int, int]  # inode, size, mtime and ctime in ns (a rewrite can set mtime back, not ctime)
Lookup = tuple[Key, tuple[Stamp, ...]]
RACY_NS = 2_000_000_000  # a file written less than this long ago is not kept yet (as in the index cache)


def _paths(golden: Path, files: SessionFiles) -> list[str]:
    """The golden's path, and its run log's when the listing saw one."""
    g = str(golden)
    return [g, g[: -len(".jsonl")] + ".run.jsonl"] if files.run_log else [g]


def _stamps(paths: list[str]) -> tuple[Stamp, ...] | None:
    try:
        sts = [os.stat(p, follow_symlinks=False) for p in paths]
    except OSError:
        return None
    return tuple((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns) for st in sts)


@lru_cache(maxsize=1)
def code_digest() -> str:
    """A digest of this tapetui's own source files: an entry another version (or an edited checkout) made is
    not trusted."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent  # the package (its __init__ names the version)
    for path in sorted(root.rglob("*.py")):
        with contextlib.suppress(OSError):
            h.update(os.fsencode(path.relative_to(root)) + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def _read(path: str) -> bytes | None:
    """A regular file's bytes (no symlink followed, no FIFO waited on), or None."""
    opened = regular_or_none(path, follow_symlinks=False)
    if opened is None:
        return None
    fd, st = opened
    try:
        if st.st_size > MAX_FILE:
            return None
        parts = []
        while chunk := os.read(fd, max(st.st_size + 1, 65536)):
            parts.append(chunk)
        return b"".join(parts)
    except OSError:
        return None
    finally:
        os.close(fd)


class CheckCache:
    """The kept reports of one tapes folder (see the module doc)."""

    def __init__(self, path: Path, salt: str, entries: dict[str, Any]) -> None:
        self.path, self.salt, self.entries = path, salt, entries
        self.changed = False

    @classmethod
    def open(cls, config: Config, tapes_dir: Path) -> CheckCache | None:
        """The cache of the folder ``tapes_dir`` checked under ``config``, or None when the cache is off."""
        folder = cache_dir()
        if folder is None:
            return None
        where = os.path.abspath(tapes_dir)
        path = folder / "check" / (hashlib.sha256(os.fsencode(where)).hexdigest()[:32] + ".json")
        settings = hashlib.sha256(os.fsencode(where) + b"\0" + os.fsencode(str(config.root)) + b"\0")
        if config.path is not None:
            settings.update(_read(str(config.path)) or b"(unreadable)")
        salt = hashlib.sha256(f"{FORMAT}:{code_digest()}:{settings.hexdigest()}".encode()).hexdigest()
        return cls(path, salt, _load(path, salt))

    def key(self, golden: Path, files: SessionFiles | None, config: Config, session: str) -> Lookup | None:
        """The session's key, its files read and hashed now, with their stamps taken before the read; None when
        it may not be served from, or kept in, the cache."""
        if files is None or files.links or files.candidate or files.journal or not files.golden:
            return None
        if config.compare_for(session).rules.needs_hooks() or not _encodable(str(golden)):
            return None
        paths = _paths(golden, files)
        stamps = _stamps(paths)
        if stamps is None:
            return None
        hashes = []
        for p in paths:
            data = _read(p)
            if data is None:
                return None
            hashes.append(hashlib.sha256(data).hexdigest())
        return (hashes[0], hashes[1] if len(hashes) > 1 else None), stamps

    def keep(self, golden: Path, files: SessionFiles | None, lookup: Lookup, report: Any, now_ns: int) -> None:
        """Keep ``report`` (made after ``lookup``) when it is the report of the bytes ``lookup`` hashed: it had no
        error, no candidate or samples, and the files' stamps are as they were before the read, from longer ago
        than the file system's timestamps could hide a rewrite (git's "racy clean")."""
        if report.error is not None or report.comparison is not None or report.samples is not None or files is None:
            return
        stamps = _stamps(_paths(golden, files))
        if stamps != lookup[1] or any(now_ns - max(mtime, ctime) < RACY_NS for _, _, mtime, ctime in lookup[1]):
            return
        self.put(golden, lookup[0], report.findings, report.run_verdicts)

    def get(self, golden: Path, key: Key | None) -> tuple[list[Finding], tuple[Verdict, ...]] | None:
        """The findings and run verdicts kept for the session of ``golden`` under ``key``, or None (also for an
        entry that is not what :meth:`put` writes)."""
        entry = self.entries.get(str(golden)) if key is not None else None
        if key is None or type(entry) is not dict or entry.get("g") != key[0] or entry.get("r") != key[1]:
            return None
        found, verdicts = entry.get("f"), entry.get("v")
        if type(found) is not list or type(verdicts) is not list:
            return None
        if not all(type(f) is list and len(f) == 7 and [type(x) for x in f] in _FINDING for f in found):
            return None
        if not all(type(v) is list and len(v) == 7 and [type(x) for x in v] in _VERDICT for v in verdicts):
            return None
        return [Finding(*f) for f in found], tuple(Verdict(*v) for v in verdicts)

    def put(self, golden: Path, key: Key, findings: list[Finding], verdicts: tuple[Verdict, ...]) -> None:
        """Keep a report that had no error, of the bytes ``key`` names."""
        entry = {
            "g": key[0],
            "r": key[1],
            "f": [[f.kind, f.text, f.seq, f.tool, f.data, f.warning, f.level] for f in findings],
            "v": [[v.dimension, v.value, v.threshold, v.excused, v.errors, v.mode, v.judged] for v in verdicts],
        }
        try:  # as deep in the file as it will be: what cannot be written there is not kept
            orjson.dumps({"sessions": {str(golden): entry}})
        except TypeError:  # no JSON form (orjson.JSONEncodeError is one), or nested too deep
            return
        if not self._round_trips(entry):
            return
        self.entries[str(golden)] = entry
        self.changed = True

    @staticmethod
    def _round_trips(entry: dict[str, Any]) -> bool:
        """Whether :meth:`get` would take the entry back (a finding's seq a bool, say, would not be)."""
        return all([type(x) for x in f] in _FINDING for f in entry["f"]) and all(
            [type(x) for x in v] in _VERDICT for v in entry["v"]
        )

    def save(self) -> None:
        """Write the entries back (when something changed); a cache that cannot be written is no cache."""
        if not self.changed:
            return
        try:
            data = orjson.dumps({"format": FORMAT, "salt": self.salt, "sessions": self.entries})
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            atomic_write(self.path, data, mode=0o600, sync=False)
        except (OSError, TypeError):
            return


def _encodable(text: str) -> bool:
    """Whether ``text`` is valid UTF-8 (a file name that is not holds surrogates, which JSON cannot write)."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _types(*columns: tuple[type, ...]) -> list[list[type]]:
    """Every list of types one value of each column may have."""
    out: list[list[type]] = [[]]
    for options in columns:
        out = [[*row, t] for row in out for t in options]
    return out


_NONE = type(None)
_FINDING = _types((str,), (str,), (int, _NONE), (str, _NONE), (dict,), (bool,), (str, _NONE))
_VERDICT = _types((str,), (int,), (int,), (int,), (int,), (str, _NONE), (bool,))


def _load(path: Path, salt: str) -> dict[str, Any]:
    """The entries of ``path`` when this user wrote it under the same salt; else none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return {}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
            return {}  # only a file this user wrote, that nobody else can have changed
        with os.fdopen(os.dup(fd), "rb") as fh:
            doc = orjson.loads(fh.read())
    except (OSError, orjson.JSONDecodeError):
        return {}
    finally:
        os.close(fd)
    if type(doc) is not dict or doc.get("format") != FORMAT or doc.get("salt") != salt:
        return {}
    sessions = doc.get("sessions")
    return sessions if type(sessions) is dict else {}
