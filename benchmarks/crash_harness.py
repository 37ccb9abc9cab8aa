"""The full crash harness: SIGKILL children at random moments of record, fill, accept, reject,
expire and re-record, and check after each kill that nothing is broken or lost.

Run: python benchmarks/crash_harness.py [--trials-per-op 20] [--seed 1]
Prints trials and failures per operation; exits 1 if any trial found a problem (its folder is
kept for inspection). The CI-sized subset is tests/test_crash.py.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.crash_harness import OPS, Trial, run  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials-per-op", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tapetui-crash-"))
    t0 = time.perf_counter()
    done: list[Trial] = []

    def progress(t: Trial) -> None:
        done.append(t)
        if t.problems:
            print(f"  FAIL {t.op} killed at {t.delay_ms:.0f} ms after {t.acked} acks: {t.problems}", flush=True)
        elif len(done) % 30 == 0:
            print(f"  {len(done)} trials…", flush=True)

    trials = run(a.trials_per_op, work, seed=a.seed, progress=progress)
    failed = [t for t in trials if t.problems]
    print(f"\n{len(trials)} trials in {time.perf_counter() - t0:.0f} s (seed {a.seed}), {len(failed)} with problems")
    print(f"{'operation':<10} {'trials':>6} {'failed':>6} {'killed mid-work':>16} {'acks before kill (median)':>26}")
    for op in OPS:
        mine = [t for t in trials if t.op == op]
        print(f"{op:<10} {len(mine):>6} {sum(1 for t in mine if t.problems):>6} "
              f"{sum(1 for t in mine if t.acked):>16} {statistics.median(t.acked for t in mine):>26.0f}")
    if failed:
        print(f"folders of failed trials kept under {work}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
