"""Work done on a whole stack of its own, so that its answer depends on the data alone.

Python's recursion limit counts the frames below the caller too: a value nested about as deep as Python walks is
keyed or redacted from a shallow stack (a script) and not from a deep one (a test under pytest and an agent
framework), or in one process and not in a ``check --jobs`` process (which runs under its pool's frames). Work whose
answer is written down (a call key, a redacted text) is therefore redone, when the caller's stack ran out, on a
fresh thread's stack: every caller gets the answer that stack gives.

A check process raises its recursion limit so that it has as many frames left as its parent where the parent checks
sessions (:func:`lift_recursion_limit`); a fresh stack there first spends as many frames, so it holds what a fresh
stack holds in the parent.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

__all__ = ["frames_left", "lift_recursion_limit", "lifted", "on_fresh_stack"]

_T = TypeVar("_T")
_LIFTED = [0]  # frames this process added to its recursion limit (lift_recursion_limit)


def frames_left() -> int:
    """How many frames the caller may still push before a RecursionError, found by pushing them: exact, whatever
    the stack below holds (a check process runs under its pool's frames, which one process has not)."""

    def down(n: int) -> int:
        if n >= _FRAMES_PROBED:  # a limit raised far past the default: plenty, found without pushing them all
            return n
        try:
            return down(n + 1)
        except RecursionError:
            return n

    return down(0)


_FRAMES_PROBED = 20_000


def lift_recursion_limit(frames: int) -> None:
    """Raise the recursion limit by ``frames`` (none when not positive) for the stack this thread has below it;
    :func:`on_fresh_stack` spends as many before its work, so a fresh stack holds what it held."""
    if frames > 0:
        sys.setrecursionlimit(sys.getrecursionlimit() + frames)
        _LIFTED[0] += frames


@contextmanager
def lifted(frames: int) -> Iterator[None]:
    """:func:`lift_recursion_limit` for the ``with`` block, then as it was."""
    limit, before = sys.getrecursionlimit(), _LIFTED[0]
    lift_recursion_limit(frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(limit)
        _LIFTED[0] = before


def _spend(frames: int, fn: Callable[[], _T]) -> _T:
    return fn() if frames <= 0 else _spend(frames - 1, fn)


def on_fresh_stack(fn: Callable[[], _T]) -> _T:
    """``fn()`` on a new thread's stack, waited for: its value, or what it raised raised here."""
    box: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            box.append((True, _spend(_LIFTED[0], fn)))
        except BaseException as e:  # handed to the caller
            box.append((False, e))

    worker = threading.Thread(target=run, name="tapetui fresh stack", daemon=True)
    worker.start()
    worker.join()
    ok, value = box[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]
