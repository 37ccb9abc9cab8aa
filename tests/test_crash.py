"""SIGKILL at random moments of record, fill, accept, reject, expire and re-record (CI-sized).

The full run (≥ 100 trials): python benchmarks/crash_harness.py
"""

from __future__ import annotations

from pathlib import Path

from tests.crash_harness import OPS, run

TRIALS_PER_OP = 4  # 24 kills in CI


def test_random_kills_leave_nothing_broken_or_lost(tmp_path: Path) -> None:
    trials = run(TRIALS_PER_OP, tmp_path, seed=2026)
    failed = [(t.op, round(t.delay_ms), t.problems) for t in trials if t.problems]
    assert not failed, failed
    assert {t.op for t in trials} == set(OPS)
    assert sum(1 for t in trials if t.acked) >= len(OPS)  # kills landed mid-work, not only before it began
