"""The clock: "now", and the UTC ISO-8601 text that tapes, run logs and the changelog hold.

Everything that stamps a time takes a :data:`Clock` (``Tape(clock=...)``, ``expire(now=...)``), so a test or
the sample agent can fix it; :class:`ManualClock` is one that says what it is told.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

__all__ = ["Clock", "ManualClock", "Timer", "event_clock", "iso", "now_iso", "parse_iso", "perf_timer", "utcnow"]

Clock = Callable[[], datetime]  # the wall clock: an aware datetime
Timer = Callable[[], float]  # a monotonic timer in seconds: how long a live call took
perf_timer: Timer = time.perf_counter


def utcnow() -> datetime:
    """The current time, in UTC."""
    return datetime.now(UTC)


def iso(dt: datetime) -> str:
    """UTC ISO-8601 with a ``Z``: ``2026-11-30T16:49:00Z`` (microseconds only when there are some)."""
    if dt.tzinfo is not UTC:
        dt = dt.astimezone(UTC)
    return dt.isoformat()[:-6] + "Z"  # without its "+00:00"


def now_iso(clock: Clock = utcnow) -> str:
    """``clock``'s time to the whole second, as :func:`iso` writes it (changelog entries, session headers)."""
    return iso(clock().replace(microsecond=0))


def event_clock(clock: Clock) -> Callable[[], float]:
    """Seconds since the epoch with 6 decimals, from ``clock``: the time of a run-log event. The real clock's
    path avoids building a datetime and rounding (an event is written per call)."""
    if clock is utcnow:
        return lambda: time.time_ns() // 1000 / 1e6
    return lambda: round(clock().timestamp(), 6)


def parse_iso(text: str) -> datetime | None:
    """The aware datetime of an ISO-8601 text (naive means UTC), or None when it is not one."""
    try:
        dt = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


class ManualClock:
    """A :data:`Clock` that says what it is told: ``clock.now``, moved with :meth:`advance` or set outright."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> datetime:
        """Move the clock on by ``seconds``; returns the new time."""
        self.now += timedelta(seconds=seconds)
        return self.now
