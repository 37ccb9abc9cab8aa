"""Load: many runs streaming events into the watched folder at once, while a person uses the app.

Run: python benchmarks/bench_load.py [--runs 50] [--events 300] [--interval-ms 50]

Writer processes (5 of them, each driving runs/5 runs through tapetui's RunLog writer) append
an event to every run every --interval-ms. Meanwhile the app (headless, 140×44, watching the
folder) gets a key press every 100 ms; the script prints key-press-to-screen latency (p50/p95/
max), the app's peak RSS and its growth, how long after the last append the last event showed,
and whether every event was shown (each session's counts match what was written).
Exit code 1 if any event was not shown.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: hand-made tapes from tests.builders
from tests import builders  # noqa: E402

WRITER = r"""
import sys, time
from pathlib import Path
from tapetui.core.runlog import RunLog
goldens = [Path(p) for p in sys.argv[3:]]
events, interval = int(sys.argv[1]), float(sys.argv[2])
logs = [RunLog(g.with_name(g.name[:-6] + ".run.jsonl"), {"mode": "replay", "tape": g.name}) for g in goldens]
print("started", flush=True)
next_at = time.monotonic()
for i in range(events):
    for log in logs:
        log.emit("hit", seq=i + 1, tool="fetch", key=f"fetch:{i:012d}", step=i + 1)
    next_at += interval
    time.sleep(max(0.0, next_at - time.monotonic()))
for log in logs:
    log.emit("end", stats={"tape_hits": events})
    log.close()
"""


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def make_sessions(d: Path, runs: int) -> list[Path]:
    from tapetui.core.tapefile import dump_line

    out = []
    for r in range(runs):
        g = d / f"run{r:02d}.jsonl"
        lines = [dump_line({"type": "session", "v": 1})]
        lines += [
            builders.call_line(seq=i + 1, tool="fetch", args={"i": i}, result={"ok": i}, key=f"fetch:{i:012d}")
            for i in range(20)
        ]
        g.write_bytes(b"".join(lines))
        out.append(g)
    return out


async def measure(d: Path, goldens: list[Path], events: int, interval: float) -> dict[str, object]:
    from textual.events import Key

    from tapetui.core.config import Config
    from tapetui.tui.app import TapeApp

    app = TapeApp(Config.for_dir(d), watch=True)
    latencies: list[float] = []
    samples: list[float] = []
    async with app.run_test(size=(140, 44)):
        driver = app._driver
        assert driver is not None
        while not (app.feed.watching.is_set() and app.feed.summarised.is_set()):
            await asyncio.sleep(0.05)
        base_rss = rss_mb()
        writers = []
        per = max(1, len(goldens) // 5)
        for k in range(0, len(goldens), per):
            writers.append(
                subprocess.Popen(
                    [sys.executable, "-c", WRITER, str(events), str(interval), *map(str, goldens[k : k + per])],
                    stdout=subprocess.PIPE,
                    env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
                )
            )
        for w in writers:
            assert w.stdout is not None and w.stdout.readline().strip() == b"started"
        t_start = time.monotonic()
        key = "j"
        while any(w.poll() is None for w in writers):
            before = app.session_tree.cursor_line
            drawn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            t0 = time.perf_counter()
            # as a terminal does: the driver hands the key to the app's queue, behind whatever is waiting there
            driver.send_message(Key(key, key))
            while app.session_tree.cursor_line == before:
                await asyncio.sleep(0.001)
            app.call_after_refresh(lambda f=drawn: f.done() or f.set_result(None))
            await drawn  # the moved cursor has been drawn
            latencies.append(time.perf_counter() - t0)
            key = "k" if key == "j" else "j"
            samples.append(rss_mb())
            await asyncio.sleep(0.1)
        t_written = time.monotonic()
        want = events
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
            s.summary.hits == want and s.summary.ended for s in app.sessions.values()
        ):
            await asyncio.sleep(0.01)
        t_shown = time.monotonic()
        shown = sum(s.summary.hits for s in app.sessions.values())
        complete = all(s.summary.hits == want and s.summary.ended for s in app.sessions.values())
        samples.append(rss_mb())
    q = statistics.quantiles(latencies, n=100, method="inclusive") if len(latencies) > 1 else latencies * 99
    return {
        "stream_s": t_written - t_start,
        "lag_s": t_shown - t_written,
        "events": len(goldens) * events,
        "shown": shown,
        "complete": complete,
        "keys": len(latencies),
        "p50_ms": statistics.median(latencies) * 1000,
        "p95_ms": q[94] * 1000,
        "max_ms": max(latencies) * 1000,
        "rss_start_mb": base_rss,
        "rss_peak_mb": max(samples),
        "rss_end_mb": samples[-1],
        "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--events", type=int, default=300, help="events per run")
    ap.add_argument("--interval-ms", type=float, default=50, help="time between one run's events")
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="tapetui-load-"))
    try:
        goldens = make_sessions(d, a.runs)
        r = asyncio.run(measure(d, goldens, a.events, a.interval_ms / 1000))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    rate = r["events"] / max(r["stream_s"], 1e-9)  # type: ignore[operator]
    print(f"{a.runs} runs × {a.events} events streamed in {r['stream_s']:.1f} s ({rate:,.0f} events/s)")
    print(
        f"key press → screen while streaming ({r['keys']} keys): p50 {r['p50_ms']:.0f} ms, "
        f"p95 {r['p95_ms']:.0f} ms, max {r['max_ms']:.0f} ms"
    )
    print(
        f"memory (RSS): {r['rss_start_mb']:.0f} MB before, peak {r['rss_peak_mb']:.0f} MB, "
        f"{r['rss_end_mb']:.0f} MB after (process max {r['maxrss_mb']:.0f} MB)"
    )
    print(
        f"events shown: {r['shown']:,} of {r['events']:,}; the last one {r['lag_s'] * 1000:.0f} ms after "
        f"the last append" + ("" if r["complete"] else "   NOT ALL SHOWN")
    )
    return 0 if r["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
