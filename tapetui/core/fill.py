"""A fill's candidate (:class:`FillCandidate`) and its second source (:class:`Filled`).

A fill replays the golden and runs only what is missing live; what it writes is a candidate for review:
the session as played, opened at the first miss with the hits and notes so far, then every hit carried
over (renumbered to its step in this run) and every live call appended.

A fill that was never reviewed, or was killed, already ran its misses live; the next fill replays those
too, so that a side effect runs once and a model is paid once, not at every fill. The calls and model turns
copied into that candidate from the golden are not a second source (the golden serves them), only the ones the
fill ran.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.errors import TapeError
from tapetui.core.index import TapeIndex
from tapetui.core.tapefile import read_index

__all__ = ["FillCandidate", "Filled"]


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


def _turn_sans_seq(turn: dict[str, Any]) -> bytes:
    """A model turn's line without its ``seq``: how a turn carried into a fill's candidate is told from its golden
    line."""
    return orjson.dumps({k: v for k, v in turn.items() if k != "seq"}, option=orjson.OPT_SORT_KEYS)


class Filled:
    """The calls and model turns an earlier fill ran live, from its pending candidate: those not copied from the
    golden."""

    def __init__(self, index: TapeIndex, fh: Any, usable: list[int], turns: Sequence[int] = ()) -> None:
        self.index, self.fh = index, fh
        self._by_key: dict[str, list[int]] = {}
        for i in usable:
            self._by_key.setdefault(index.keys[i], []).append(i)
        self._turns: dict[str, list[int]] = {}
        for j in turns:
            self._turns.setdefault(index.turns[j].key, []).append(j)

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
            golden_turns = {_turn_sans_seq(golden.turn(j, golden_fh)) for j in range(len(golden.turns))}
            turns = [j for j in range(len(index.turns)) if _turn_sans_seq(index.turn(j, fh)) not in golden_turns]
        except BaseException:
            fh.close()
            raise
        return cls(index, fh, usable, turns)

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

    def take_turn(self, key: str, usable: Callable[[dict[str, Any]], bool]) -> tuple[int, dict[str, Any]] | None:
        """The first unused model turn with ``key`` that ``usable`` takes (given its line decoded): its index among
        the candidate's turns and its line; None when there is none."""
        turns = self._turns.get(key) or []
        for n, j in enumerate(turns):
            rec = self.index.turn(j, self.fh)
            if usable(rec):
                del turns[n]
                return j, rec
        return None

    def close(self) -> None:
        self.fh.close()


class FillCandidate:
    """What a fill writes, before and after its first miss opens the candidate file.

    Until then nothing is written: the hits (``(run seq, index, from the earlier fill)``) and the note and
    phase lines among them are held, then become the candidate's first lines (:meth:`opening`). After that,
    hits are carried straight into it.

    Args:
        golden / golden_fh: the golden's index and open file.
        earlier: the earlier fill's calls (the second source), if any.
        tool_line: the tool line to write before a name's first call line (empty once it is written), for a
            call of ``index``.
    """

    __slots__ = ("_golden", "_golden_fh", "_held", "_tool_line", "earlier")

    def __init__(
        self,
        golden: TapeIndex,
        golden_fh: Any,
        earlier: Filled | None,
        tool_line: Callable[[str, TapeIndex], bytes],
    ) -> None:
        self._golden = golden
        self._golden_fh = golden_fh
        self.earlier = earlier
        self._tool_line = tool_line
        self._held: list[tuple[int, int, bool] | bytes] = []

    def hold(self, line: bytes) -> None:
        """A note or phase line before the candidate is open: it goes in with the hits around it."""
        self._held.append(line)

    def carry(self, writer: Any, seq: int, i: int, earlier: bool = False) -> None:
        """Recording ``i`` (of the golden, or with ``earlier`` of the earlier fill) served as step ``seq``: held
        until the candidate opens (``writer`` None), else appended to it."""
        if writer is None:
            self._held.append((seq, i, earlier))
        else:
            writer.append(self.carried_line(seq, i, earlier))

    def carry_line(self, writer: Any, line: bytes) -> None:
        """A served line that is not a call (a model turn, its tool lines): held until the candidate opens, else
        appended to it."""
        if writer is None:
            self._held.append(line)
        else:
            writer.append(line)

    def carried_line(self, seq: int, i: int, earlier: bool) -> bytes:
        """Recording ``i`` renumbered to ``seq``, after its tool line when the candidate has none yet."""
        if earlier:
            assert self.earlier is not None
            index, fh = self.earlier.index, self.earlier.fh
        else:
            index, fh = self._golden, self._golden_fh
        return self._tool_line(index.tools[i], index) + index.renumbered(i, seq, fh)

    def opening(self) -> bytes:
        """The candidate's first lines after its header: everything held so far (then nothing is held)."""
        body = b"".join(p if isinstance(p, bytes) else self.carried_line(*p) for p in self._held)
        self._held = []
        return body
