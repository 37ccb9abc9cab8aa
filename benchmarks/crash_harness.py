"""The full crash harness: SIGKILL children at random moments of record, fill, accept, reject,
expire and re-record, and check after each kill that nothing is broken or lost.

Run: python benchmarks/crash_harness.py [--trials-per-op 20] [--seed 1] [--concurrent 200]
Prints trials and failures per operation; exits 1 if any trial found a problem (its folder is
kept for inspection). ``--concurrent N`` runs N trials of three children each working on one
session at once (accept, expire, reject, fill, check, recover, the app's start), all SIGKILLed at
random moments. The CI-sized subset is tests/test_crash.py.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.crash_harness import MIXED, OPS, run, run_mixed  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials-per-op", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--concurrent",
        type=int,
        default=0,
        metavar="N",
        help="run N concurrent trials (three commands on one session) instead of the per-op trials",
    )
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tapetui-crash-"))
    if a.concurrent:
        return concurrent(a.concurrent, a.seed, work)
    t0 = time.perf_counter()
    progress = _progress(lambda t: f"{t.op} killed at {t.delay_ms:.0f} ms after {t.acked} acks")
    trials = run(a.trials_per_op, work, seed=a.seed, progress=progress)
    failed = [t for t in trials if t.problems]
    print(f"\n{len(trials)} trials in {time.perf_counter() - t0:.0f} s (seed {a.seed}), {len(failed)} with problems")
    print(f"{'operation':<10} {'trials':>6} {'failed':>6} {'killed mid-work':>16} {'acks before kill (median)':>26}")
    for op in OPS:
        mine = [t for t in trials if t.op == op]
        print(
            f"{op:<10} {len(mine):>6} {sum(1 for t in mine if t.problems):>6} "
            f"{sum(1 for t in mine if t.acked):>16} {statistics.median(t.acked for t in mine):>26.0f}"
        )
    if failed:
        print(f"folders of failed trials kept under {work}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


def _progress(describe: Callable[[Any], str], every: int = 25) -> Callable[[Any], None]:
    """Print each failed trial as it happens, and a count every ``every`` trials."""
    done = [0]

    def progress(t: Any) -> None:
        done[0] += 1
        if t.problems:
            print(f"  FAIL {describe(t)}: {t.problems}", flush=True)
        elif done[0] % every == 0:
            print(f"  {done[0]} trials…", flush=True)

    return progress


def concurrent(n: int, seed: int, work: Path) -> int:
    t0 = time.perf_counter()
    progress = _progress(lambda t: f"{t.ops} killed at {[round(d) for d in t.delays_ms]} ms")
    trials = run_mixed(n, work, seed=seed, progress=progress)
    failed = [t for t in trials if t.problems]
    print(
        f"\n{len(trials)} concurrent trials (3 children each) in {time.perf_counter() - t0:.0f} s (seed {seed}), "
        f"{len(failed)} with problems; {sum(t.acked for t in trials)} commands acknowledged before the kills"
    )
    print(f"{'command':<10} {'in trials':>9} {'failed':>6}")
    for op in MIXED:
        mine = [t for t in trials if op in t.ops]
        print(f"{op:<10} {len(mine):>9} {sum(1 for t in mine if t.problems):>6}")
    kinds: dict[str, int] = {}
    for t in failed:
        for p in t.problems:
            kinds[p.split(":")[0]] = kinds.get(p.split(":")[0], 0) + 1
    for k, v in sorted(kinds.items()):
        print(f"  {v:>4}  {k}")
    if failed:
        print(f"folders of failed trials kept under {work}")
        return 1
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
