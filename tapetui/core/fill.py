"""A fill's second source: the calls an earlier fill ran live, from its pending (unreviewed) candidate.

A fill that was never reviewed, or was killed, already ran its misses live; the next fill replays those
too, so that a side effect runs once, not at every fill. The calls copied into that candidate from the
golden are not a second source (the golden serves them), only the ones the fill ran.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.errors import TapeError
from tapetui.core.index import TapeIndex
from tapetui.core.tapefile import read_index

__all__ = ["Filled"]


_SEQ = re.compile(rb'^(\{"type":"call",)"seq":\d+,')


def _sans_seq(line: bytes) -> bytes:
    """A call line without its ``seq``: how a hit carried into a fill's candidate is told from its golden line."""
    out, n = _SEQ.subn(rb"\1", line, count=1)
    if n:
        return out
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    if isinstance(obj, dict):
        obj.pop("seq", None)
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


class Filled:
    """The calls an earlier fill ran live, from its pending candidate: those not copied from the golden."""

    def __init__(self, index: TapeIndex, fh: Any, usable: list[int]) -> None:
        self.index, self.fh = index, fh
        self._by_key: dict[str, list[int]] = {}
        for i in usable:
            self._by_key.setdefault(index.keys[i], []).append(i)

    @classmethod
    def open(cls, cand: Path, golden: TapeIndex, golden_fh: Any) -> Filled | None:
        try:
            index = read_index(cand)
            if (index.header or {}).get("origin") != "fill":
                return None
            fh = open(cand, "rb")  # noqa: SIM115 -- handed to the Filled source, which closes it
        except (TapeError, OSError):
            return None  # an unreadable candidate is check's to report; this fill just runs its misses
        try:
            from_golden = {_sans_seq(golden.raw_line(i, golden_fh)) for i in range(len(golden))}
            usable = [i for i in range(len(index)) if _sans_seq(index.raw_line(i, fh)) not in from_golden]
        except BaseException:
            fh.close()
            raise
        return cls(index, fh, usable)

    def take(self, key: str, expired: Callable[[str], bool], fingerprint: str | None) -> int | None:
        """The first unused call with ``key`` that is still fresh and was recorded with the live contract."""
        calls = self._by_key.get(key)
        if not calls:
            return None
        for n, i in enumerate(calls):
            exp = self.index.expires.get(i)
            if (exp is None or not expired(exp)) and (fingerprint is None or self.index.fingerprints[i] == fingerprint):
                del calls[n]
                return i
        return None

    def close(self) -> None:
        self.fh.close()
