"""Which recorded call a replayed call is: a hit, a drift against one recording, or a miss.

The rules (README "Parallel tool calls"):

1. A call that carries its place in the model's request (``order=``) is judged against the recording at
   that place, whatever order the calls start in: the same key is a hit, the same tool with another key
   is a drift, another tool there is a miss. A place the tape does not hold falls through to the content
   rules below.
2. Otherwise a call hits the earliest unconsumed recording with its key.
3. A call that hits nothing, made while no other call on the tape is in flight, keeps the step-position
   rule of a sequential session: a recording of the same tool at its step with another key is a drift,
   anything else a miss.
4. A call that hits nothing while other calls are in flight (or one with an ``order=`` the tape does not
   hold) is compared with the unconsumed recordings of its tool: a drift against the nearest one (fewest
   differing argument paths; ties go to the earliest), a miss when none is left.

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

__all__ = ["Matcher"]

_ORDER_FIELD = b'"order":'


class Matcher:
    """Matching a run's calls to a golden's recordings (see the module doc)."""

    __slots__ = ("_orders", "fh", "index", "redactor", "used")

    def __init__(self, index: TapeIndex, used: Consumed, fh: Any, redactor: Redactor) -> None:
        self.index = index
        self.used = used
        self.fh = fh
        self.redactor = redactor
        self._orders: dict[bytes, list[int]] | None = None  # place → the calls recorded there; built on first use

    # ---- rule 1: a call's place ---------------------------------------------------
    def at_place(self, order_json: bytes) -> int | None:
        """The first unconsumed recording at ``order_json`` (canonical JSON of an ``order`` value), or None."""
        calls = self._places().get(order_json)
        if not calls:
            return None
        flags = self.used.flags
        for i in calls:
            if not flags[i]:
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
        return self._orders

    # ---- rules 3 and 4: what a call that hit nothing drifted from ----------------
    def at_step(self, tool: str, key: str, seq: int) -> int | None:
        """Rule 3: the recording of ``tool`` at step ``seq`` when it has another key, else None."""
        index = self.index
        j = index.at_seq(seq)
        if j is not None and index.tools[j] == tool and index.keys[j] != key:
            return j
        return None

    def nearest_unconsumed(self, tool: str, redacted: Any) -> int | None:
        """Rule 4: the unconsumed recording of ``tool`` whose arguments differ from ``redacted`` (canonical,
        redacted) in the fewest paths, the earliest of those; None when none is left."""
        index, flags = self.index, self.used.flags
        best: int | None = None
        best_n = -1
        for i, t in enumerate(index.tools):
            if t != tool or flags[i]:
                continue
            n = len(self.changes(i, redacted))
            if best is None or n < best_n:
                best, best_n = i, n
                if n == 0:
                    break
        return best

    def changes(self, i: int, redacted: Any) -> list[Change]:
        """How ``redacted`` (canonical) differs from recording ``i``'s arguments, as the run's rules redact them
        (a tape written under older rules: what they let through stays out of every report)."""
        rec = self.index.record(i, self.fh)
        return diff_values(canon(self.redactor.redact(rec.args)), redacted)
