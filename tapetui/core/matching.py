"""Which recorded call a replayed call is: a hit, a drift against one recording, or a miss.

The rules (README "Async agents and parallel tool calls"):

1. A call that carries its place in the model's request (``order=``), on a tape whose calls carry places,
   is judged against the recordings at that place, whatever order the calls start in: one with its key is
   a hit, else one of the same tool is a drift, else (another tool there) a miss. A place the tape does not
   hold is never matched to a recording that carries another place: only recordings without a place
   remain for the rules below.
2. Otherwise a call hits the earliest unconsumed recording with its key.
3. A call that hits nothing, made while no other call on the tape is in flight and without ``order=``,
   keeps the step-position rule of a sequential session: a drift against the recording of its tool at its
   step (the n-th by step number, so a step a cancelled call left out does not shift the ones after it),
   a miss when that step holds another tool or there is none. When that recording was used already, or
   other calls are in flight, the call is compared with the unconsumed recordings of its tool instead: a
   drift against the nearest one (fewest differing argument paths; ties go to the earliest), a miss when
   none is left.
4. A drift accounts for the recording it names, but a later call with exactly that recording's key still
   hits it: a call that drifted against the wrong recording (content could not tell) never makes the
   call that owns it drift too.

A :class:`Matcher` is not thread-safe on its own: the ``Tape`` calls it under its lock.
"""

from __future__ import annotations

from typing import Any

import orjson

from tapetui.core.canon import canon, canonical_json
from tapetui.core.changes import Change
from tapetui.core.index import Consumed, TapeIndex
from tapetui.core.jsondiff import diff_values
from tapetui.core.redact import Redactor

__all__ = ["DRIFT", "HIT", "MISS", "OPEN", "OPEN_UNPLACED", "Matcher"]

_ORDER_FIELD = b'"order":'
HIT, DRIFT, MISS = 0, 1, 2  # the verdicts of Matcher.judge
OPEN, OPEN_UNPLACED = 3, 4  # no hit: the drift target is Matcher.drift_target's (only unplaced recordings)


class Matcher:
    """Matching a run's calls to a golden's recordings (see the module doc)."""

    __slots__ = ("_orders", "_placed", "_rank", "drifted", "fh", "index", "redactor", "used")

    def __init__(self, index: TapeIndex, used: Consumed, fh: Any, redactor: Redactor) -> None:
        self.index = index
        self.used = used
        self.fh = fh
        self.redactor = redactor
        self.drifted: set[int] = set()  # recordings a drift accounted for (rule 4)
        self._orders: dict[bytes, list[int]] | None = None  # place → the calls recorded there; built on first use
        self._placed: set[int] = set()  # the calls that carry a place
        self._rank: list[int] | None = None  # the calls by step number, when they are not 1..n in file order

    def judge(self, tool: str, key: str, order_json: bytes | None) -> tuple[int, int]:
        """Rules 1, 2 and 4: ``(HIT, i)``, ``(DRIFT, j)``, ``(MISS, -1)``, or ``(OPEN, -1)`` /
        ``(OPEN_UNPLACED, -1)`` when :meth:`drift_target` decides. Consumes nothing: the caller does."""
        if order_json is not None:
            places = self._places()
            if places:
                index, flags = self.index, self.used.flags
                at = places.get(order_json)
                if at:
                    free = [i for i in at if not flags[i]]
                    for i in free:
                        if index.keys[i] == key:
                            return HIT, i
                    for i in at:
                        if i in self.drifted and index.keys[i] == key:
                            self.drifted.discard(i)
                            return HIT, i
                    for i in free:
                        if index.tools[i] == tool:
                            return DRIFT, i
                    if free:
                        return MISS, -1  # another tool at its place
                found = self._take(key, unplaced=True)
                return (HIT, found) if found is not None else (OPEN_UNPLACED, -1)
        found = self.used.take(key)
        if found is None:
            found = self._take(key, unplaced=False, drifted_only=True)
        return (HIT, found) if found is not None else (OPEN, -1)

    def _take(self, key: str, *, unplaced: bool, drifted_only: bool = False) -> int | None:
        """The earliest recording with ``key`` that is unconsumed (and carries no place, with ``unplaced``), else
        one a drift accounted for (rule 4)."""
        index = self.index
        if not drifted_only:
            i = index.key_first.get(key)
            following, flags = index.key_next, self.used.flags
            while i is not None and i >= 0:
                if not flags[i] and not (unplaced and i in self._placed):
                    return i
                i = following[i]
        for i in sorted(self.drifted):
            if index.keys[i] == key and not (unplaced and i in self._placed):
                self.drifted.discard(i)
                return i
        return None

    def _places(self) -> dict[bytes, list[int]]:
        if self._orders is None:
            self._orders = {}
            index = self.index
            data = index.data
            if data is not None and _ORDER_FIELD not in data:
                return self._orders  # no call of this tape carries a place: nothing to parse
            for i in range(len(index)):
                line = index.raw_line(i, self.fh)
                if _ORDER_FIELD not in line:
                    continue
                obj = orjson.loads(line)
                order = obj.get("order") if isinstance(obj, dict) else None
                if order is not None:
                    self._orders.setdefault(canonical_json(order), []).append(i)
                    self._placed.add(i)
        return self._orders

    def drift_target(self, tool: str, seq: int, redacted: Any, *, alone: bool, unplaced: bool) -> int | None:
        """Rule 3: the unconsumed recording of ``tool`` this call (``redacted``: canonical, redacted arguments)
        drifted from, or None (a miss)."""
        index, flags = self.index, self.used.flags
        candidates = [
            i for i, t in enumerate(index.tools) if t == tool and not flags[i] and not (unplaced and i in self._placed)
        ]
        if not candidates:
            return None
        if alone:  # a sequential session: the step-position rule
            at_step = self.at_rank(seq)
            if at_step is None or index.tools[at_step] != tool:
                return None
            if not flags[at_step]:
                return at_step
            # that step was used already (a hit, a drift): by content below
        if len(candidates) == 1:
            return candidates[0]
        distance = {i: len(self.changes(i, redacted)) for i in candidates}
        return min(candidates, key=lambda i: (distance[i], i))

    def at_rank(self, seq: int) -> int | None:
        """The ``seq``-th recording by step number (the recording at step ``seq`` when steps run 1..n)."""
        index = self.index
        n = len(index)
        if not 1 <= seq <= n:
            return None
        if self._rank is None:
            seqs = index.seqs
            if all(seqs[i] == i + 1 for i in range(n)):
                self._rank = []
            else:
                self._rank = sorted(range(n), key=lambda i: (seqs[i], i))
        return self._rank[seq - 1] if self._rank else seq - 1

    def changes(self, i: int, redacted: Any) -> list[Change]:
        """How ``redacted`` (canonical) differs from recording ``i``'s arguments, as the run's rules redact them
        (a tape written under older rules: what they let through stays out of every report)."""
        rec = self.index.record(i, self.fh)
        return diff_values(canon(self.redactor.redact(rec.args)), redacted)
