"""SIGKILL at random moments of record, fill, accept, reject, expire and re-record (CI-sized).

The full run (≥ 100 trials): python benchmarks/crash_harness.py
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.crash_harness import OPS, run, run_mixed

pytestmark = pytest.mark.slow  # `pytest -m "not slow"` skips the harnesses for a quick loop

TRIALS_PER_OP = 4  # 24 kills in CI


def test_random_kills_leave_nothing_broken_or_lost(tmp_path: Path) -> None:
    trials = run(TRIALS_PER_OP, tmp_path, seed=2026)
    failed = [(t.op, round(t.delay_ms), t.problems) for t in trials if t.problems]
    assert not failed, failed
    assert {t.op for t in trials} == set(OPS)
    assert sum(1 for t in trials if t.acked) >= len(OPS)  # kills landed mid-work, not only before it began


MIXED_TRIALS = 6  # CI-sized; the full run (≥ 200 trials): python benchmarks/crash_harness.py --concurrent 200


def test_concurrent_commands_killed_at_random_keep_golden_changelog_and_calls(tmp_path: Path) -> None:
    trials = run_mixed(MIXED_TRIALS, tmp_path, seed=11)
    failed = [(t.ops, [round(d) for d in t.delays_ms], t.problems) for t in trials if t.problems]
    assert not failed, failed
    assert sum(t.acked for t in trials) > 0  # the children did work before they were killed
