"""Bounded diffs of long texts and long line lists: exact where cheap, coarser (and said so) beyond.

``difflib.SequenceMatcher`` is exact but quadratic: about 50 ms for two strings of 1,000
characters, 1.1 s for 5,000, minutes for 100,000. Tool results of a megabyte (a fetched page,
a file) are ordinary, so a diff here is built in three passes, each bounded:

1. **Anchors in linear time.** The common prefix and suffix are cut (compared in chunks, at C
   speed); the middle is walked greedily: a run of equal units is followed to its end, and at a
   mismatch the walk looks for the nearest place where both sides agree again (a window of
   ``window`` units of one side found in the other with ``str.find``, within a search radius).
   What lies between two anchors is a *changed region*.
2. **Exact inside small regions.** A changed region whose two sides multiply to at most
   :data:`EXACT_BUDGET` units is aligned with ``SequenceMatcher`` (exact, and cheap at that size).
3. **Coarser inside big ones.** A bigger region of characters is aligned by words (each distinct
   word one unit, same two passes); a region still too big after that is shown whole, as one
   replaced block.

A deadline (``time.monotonic()`` value) and a ``stop`` callable (a cancelled worker) end the
work early: what is left is one replaced block. :attr:`TextDiff.level` says how fine the result
is, so a screen can mark a coarsened diff. Nothing here imports a UI.

Opcodes are ``difflib``'s: ``(tag, i1, i2, j1, j2)`` with tag ``equal``, ``replace``,
``delete`` or ``insert``; applying them to ``a`` always gives ``b``.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["CHAR_LEVELS", "EXACT_BUDGET", "Op", "TextDiff", "common_prefix", "diff_lines", "diff_text"]

Op = tuple[str, int, int, int, int]

# A changed region is aligned exactly when len(a) * len(b) is at most this: SequenceMatcher's
# cost grows with that product (about 50 ms at 1,000 × 1,000 characters of prose). Words (a word
# and the spaces after it are one unit) and lines repeat far less than characters: a bigger budget
# costs about as much (30-50 ms at 2,000 × 2,000 words of English).
EXACT_BUDGET = 1_000_000
UNIT_BUDGET = 4_000_000
CHAR_WINDOW = 32  # characters of one side looked up in the other to re-synchronise
WORD_WINDOW = 8  # words, likewise
LINE_WINDOW = 3  # lines, likewise
RADIUS = 1 << 15  # how far ahead (in units) a re-synchronisation is looked for
CHAR_LEVELS = ("chars", "words", "blocks")  # finest first
_TOKEN = re.compile(r"\w+\s*|[^\w\s]\s*|\s+")
_FIRST_CODE = 0x100  # units are coded as characters from here on (surrogates skipped)


@dataclass(frozen=True, slots=True)
class TextDiff:
    """Opcodes turning ``a`` into ``b`` and how fine they are.

    ``level`` is the coarsest alignment any changed part needed: for characters ``chars``
    (exact), ``words`` or ``blocks``; for lines ``lines`` (exact) or ``blocks``.
    ``timed_out`` is true when the deadline (or a stop) ended the work early.
    """

    opcodes: tuple[Op, ...]
    level: str
    timed_out: bool = False


class _Budget:
    """The deadline and stop request of one diff; ``out`` once either is reached."""

    __slots__ = ("deadline", "hit", "stop")

    def __init__(self, deadline: float | None, stop: Callable[[], bool] | None) -> None:
        self.deadline = deadline
        self.stop = stop
        self.hit = False

    @property
    def out(self) -> bool:
        if not self.hit and (
            (self.deadline is not None and time.monotonic() > self.deadline) or (self.stop is not None and self.stop())
        ):
            self.hit = True
        return self.hit


def _prefix(a: str, i: int, b: str, j: int) -> int:
    """Length of the common prefix of ``a[i:]`` and ``b[j:]``, compared in growing chunks."""
    n = min(len(a) - i, len(b) - j)
    k, step = 0, 64
    while k < n:
        s = min(step, n - k)
        if a[i + k : i + k + s] == b[j + k : j + k + s]:
            k += s
            step = min(step * 2, 1 << 16)
            continue
        lo, hi = k, k + s  # a[i:i+lo] == b[j:j+lo]; the first mismatch is in [lo, hi)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[i + lo : i + mid] == b[j + lo : j + mid]:
                lo = mid
            else:
                hi = mid
        return lo
    return n


def common_prefix(a: str, b: str) -> int:
    """Length of the common prefix of ``a`` and ``b``, found at C speed (chunks compared, then halved):
    a megabyte in well under a millisecond, where a character loop in Python takes tens of them."""
    return _prefix(a, 0, b, 0)


def _suffix(a: str, i1: int, i2: int, b: str, j1: int, j2: int) -> int:
    """Length of the common suffix of ``a[i1:i2]`` and ``b[j1:j2]``."""
    n = min(i2 - i1, j2 - j1)
    k, step = 0, 64
    while k < n:
        s = min(step, n - k)
        if a[i2 - k - s : i2 - k] == b[j2 - k - s : j2 - k]:
            k += s
            step = min(step * 2, 1 << 16)
            continue
        lo, hi = k, k + s
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if a[i2 - mid : i2 - lo] == b[j2 - mid : j2 - lo]:
                lo = mid
            else:
                hi = mid
        return lo
    return n


def _resync(a: str, i: int, b: str, j: int, window: int, budget: _Budget) -> tuple[int, int] | None:
    """The nearest ``(i2, j2)`` past a mismatch at ``(i, j)`` where both sides agree again.

    Windows of ``window`` units are taken at every unit for the first ``4 * window`` units past
    ``i`` in ``a``, then every ``window`` units, and looked up in ``b`` (and the other way round),
    within :data:`RADIUS`; the pair with the smallest ``(i2 - i) + (j2 - j)`` wins (a small
    substitution in repetitive text is found as one, not as an insertion and a deletion). When nothing is found
    near, the two windows right at the
    mismatch are looked up anywhere ahead (one big insertion or deletion).
    """
    n, m = len(a), len(b)
    best: tuple[int, int] | None = None
    best_sum = RADIUS * 4
    d = 0
    while d <= RADIUS and d < best_sum:
        if d % (16 * window) == 0 and budget.out:
            return None
        if i + d + window <= n:  # a's window at d, looked up in b
            pos = b.find(a[i + d : i + d + window], j, min(m, j + best_sum - d - 1 + window, j + RADIUS + window))
            if pos >= 0 and d + pos - j < best_sum and (d, pos) != (0, j):
                best, best_sum = (i + d, pos), d + pos - j
        if j + d + window <= m and d < best_sum:  # b's window at d, looked up in a
            pos = a.find(b[j + d : j + d + window], i, min(n, i + best_sum - d - 1 + window, i + RADIUS + window))
            if pos >= 0 and d + pos - i < best_sum and (pos, d) != (i, 0):
                best, best_sum = (pos, j + d), d + pos - i
        if i + d + window > n and j + d + window > m:
            break
        d += 1 if d < 4 * window else window
    if best is None:
        ins = b.find(a[i : i + window], j) if i + window <= n else -1
        dele = a.find(b[j : j + window], i) if j + window <= m else -1
        if ins > j and (dele <= i or ins - j <= dele - i):
            best = (i, ins)
        elif dele > i:
            best = (dele, j)
    return best


def _exact(a: str, b: str, i0: int, j0: int) -> list[Op]:
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(t, i1 + i0, i2 + i0, j1 + j0, j2 + j0) for t, i1, i2, j1, j2 in sm.get_opcodes()]


def _changed(i1: int, i2: int, j1: int, j2: int) -> Op:
    return ("replace" if i1 < i2 and j1 < j2 else "delete" if i1 < i2 else "insert", i1, i2, j1, j2)


def _align(
    a: str,
    b: str,
    window: int,
    budget: _Budget,
    exact_budget: int,
    refine: Callable[[int, int, int, int], list[Op] | None],
) -> tuple[list[Op], bool]:
    """Opcodes for ``a`` → ``b`` (strings of units) and whether some changed region was left whole.

    ``refine(i1, i2, j1, j2)`` aligns a region too big for :func:`_exact`; None leaves it whole.
    """
    ops: list[Op] = []
    whole = False

    def region(i1: int, i2: int, j1: int, j2: int) -> None:
        nonlocal whole
        if i1 == i2 and j1 == j2:
            return
        if i1 == i2 or j1 == j2:
            ops.append(_changed(i1, i2, j1, j2))
        elif (i2 - i1) * (j2 - j1) <= exact_budget and not budget.out:
            ops.extend(_exact(a[i1:i2], b[j1:j2], i1, j1))
        else:
            got = None if budget.out else refine(i1, i2, j1, j2)
            if got is None:
                whole = True
                ops.append(_changed(i1, i2, j1, j2))
            else:
                ops.extend(got)

    i = j = 0
    n, m = len(a), len(b)
    while i < n and j < m:
        k = _prefix(a, i, b, j)
        if k:
            ops.append(("equal", i, i + k, j, j + k))
            i, j = i + k, j + k
            continue
        if budget.out:
            break
        found = _resync(a, i, b, j, window, budget)
        if found is None:
            break
        i2, j2 = found
        t = _suffix(a, i, i2, b, j, j2)  # the anchor may reach back into what looked changed
        region(i, i2 - t, j, j2 - t)
        i, j = i2 - t, j2 - t
    if i < n or j < m:
        tail_i, tail_j = i, j
        t = _suffix(a, tail_i, n, b, tail_j, m)
        region(tail_i, n - t, tail_j, m - t)
        if t:
            ops.append(("equal", n - t, n, m - t, m))
    return _merge(ops), whole


def _merge(ops: list[Op]) -> list[Op]:
    """Adjacent opcodes of one tag joined; adjacent changes joined into one replace."""
    out: list[Op] = []
    for op in ops:
        if op[1] == op[2] and op[3] == op[4]:
            continue
        if out:
            t0, a1, _, b1, _ = out[-1]
            if t0 == op[0] == "equal" or (t0 != "equal" and op[0] != "equal"):
                tag = "equal" if t0 == "equal" else _changed(a1, op[2], b1, op[4])[0]
                out[-1] = (tag, a1, op[2], b1, op[4])
                continue
        out.append(op)
    return out


def _encode(units: Sequence[str], table: dict[str, str]) -> str | None:
    """Each distinct unit as one character (shared ``table`` across both sides); None when there
    are more distinct units than characters to code them."""
    out = []
    get = table.get
    for u in units:
        c = get(u)
        if c is None:
            code = _FIRST_CODE + len(table)
            if code >= 0xD800:
                code += 0x800  # skip the surrogates
            if code > 0x10FFFF:
                return None
            c = table[u] = chr(code)
        out.append(c)
    return "".join(out)


def _words(a: str, b: str, i0: int, j0: int, budget: _Budget) -> tuple[list[Op], bool] | None:
    """Character opcodes for ``a`` → ``b`` aligned by words (offsets shifted by i0, j0)."""
    ta, tb = _TOKEN.findall(a), _TOKEN.findall(b)
    table: dict[str, str] = {}
    ca, cb = _encode(ta, table), _encode(tb, table)
    if ca is None or cb is None:
        return None
    pa, pb = [0], [0]
    for t in ta:
        pa.append(pa[-1] + len(t))
    for t in tb:
        pb.append(pb[-1] + len(t))
    ops, whole = _align(ca, cb, WORD_WINDOW, budget, UNIT_BUDGET, lambda *_: None)
    return [(t, pa[i1] + i0, pa[i2] + i0, pb[j1] + j0, pb[j2] + j0) for t, i1, i2, j1, j2 in ops], whole


def diff_text(a: str, b: str, *, deadline: float | None = None, stop: Callable[[], bool] | None = None) -> TextDiff:
    """Character opcodes for ``a`` → ``b``: exact for small strings and small changed parts, by words
    for big changed parts, whole blocks beyond (see the module docstring)."""
    budget = _Budget(deadline, stop)
    if len(a) * len(b) <= EXACT_BUDGET:
        return TextDiff(tuple(_merge(_exact(a, b, 0, 0))), "chars")
    by_words = False

    def refine(i1: int, i2: int, j1: int, j2: int) -> list[Op] | None:
        nonlocal by_words
        got = _words(a[i1:i2], b[j1:j2], i1, j1, budget)
        if got is None or got[1]:
            return None
        by_words = True
        return got[0]

    ops, whole = _align(a, b, CHAR_WINDOW, budget, EXACT_BUDGET, refine)
    level = "blocks" if whole else "words" if by_words else "chars"
    return TextDiff(tuple(ops), level, budget.hit)


def diff_lines(
    a: Sequence[str], b: Sequence[str], *, deadline: float | None = None, stop: Callable[[], bool] | None = None
) -> TextDiff:
    """Line opcodes for ``a`` → ``b``: exact (``lines``) unless a changed part was too big to
    align, then that part is one replaced block (``blocks``)."""
    budget = _Budget(deadline, stop)
    table: dict[str, str] = {}
    ca, cb = _encode(a, table), _encode(b, table)
    if ca is None or cb is None:
        return TextDiff((_changed(0, len(a), 0, len(b)),) if (a or b) else (), "blocks")
    if len(ca) * len(cb) <= UNIT_BUDGET:
        return TextDiff(tuple(_merge(_exact(ca, cb, 0, 0))), "lines")
    ops, whole = _align(ca, cb, LINE_WINDOW, budget, UNIT_BUDGET, lambda *_: None)
    return TextDiff(tuple(ops), "blocks" if whole else "lines", budget.hit)
