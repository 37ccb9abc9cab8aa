"""Time to first screen (10,000 sessions; one 100,000-step session) and append-to-screen latency.

Run: python benchmarks/bench_tui.py
Targets: first screen ≤ 1 s in both cases; run-log event to screen p95 ≤ 150 ms.
The app runs headless (Textual's run_test) at 140×44, with the index cache off.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

os.environ["TAPETUI_CACHE_DIR"] = "off"  # a first open: every tape is scanned
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_check import generate  # noqa: E402

from tapetui.config import Config  # noqa: E402
from tapetui.tui.app import TapeApp  # noqa: E402
from textual.widgets import Log  # noqa: E402


async def first_screen(d: Path, expand: bool) -> tuple[float, float]:
    """Seconds from creating the app to its first drawn screen, and to every session's counts shown."""
    t0 = time.monotonic()
    app = TapeApp(Config.for_dir(d), watch=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        if expand:
            await pilot.press("enter")
            await pilot.pause()
            assert app.tree.cursor_node is not None and app.tree.cursor_node.children
        while app.first_paint is None:
            await asyncio.sleep(0.01)
        paint = (time.monotonic() if expand else app.first_paint) - t0
        while not all(s.loaded for s in app.sessions.values()):
            await asyncio.sleep(0.01)
        await pilot.pause()
        app.screen._compositor.render_strips()
        settled = time.monotonic() - t0
    return paint, settled


async def latency(d: Path, events: int = 200) -> list[float]:
    app = TapeApp(Config.for_dir(d), watch=True)
    out = []
    async with app.run_test(size=(140, 44)) as pilot:
        t_wait = time.perf_counter()
        while not all(x.loaded for x in app.sessions.values()):  # watching starts after the first read
            await asyncio.sleep(0.05)
            if time.perf_counter() - t_wait > 60:
                raise SystemExit("sessions never loaded")
        log = app.query_one("#live", Log)
        golden = sorted(d.rglob("session00000.jsonl"))[0]
        run = golden.with_name("session00000.run.jsonl")
        await pilot.pause(0.5)
        for i in range(events):
            before = len(log.lines)
            line = orjson.dumps({"event": "hit", "seq": i + 1, "tool": "fetch", "key": f"k{i}"}) + b"\n"
            t0 = time.perf_counter()
            with run.open("ab") as fh:
                fh.write(line)
            while len(log.lines) <= before:
                await asyncio.sleep(0.002)
                if time.perf_counter() - t0 > 5:
                    raise SystemExit("event never reached the screen")
            out.append(time.perf_counter() - t0)
            await asyncio.sleep(0.01)
    return out


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="tapetui-tui-"))
    try:
        many = base / "many"
        many.mkdir()
        generate(many, 10_000, 20)
        big = base / "big"
        big.mkdir()
        generate(big, 1, 100_000)
        many_runs = [asyncio.run(first_screen(many, False)) for _ in range(5)]
        big_runs = [asyncio.run(first_screen(big, True)) for _ in range(5)]
        for label, runs in (("10,000 sessions", many_runs), ("100,000-step session, opened", big_runs)):
            paint = statistics.median(r[0] for r in runs)
            settled = statistics.median(r[1] for r in runs)
            print(f"first screen, {label:<30}: {paint:.2f} s (every count shown {settled:.2f} s), median of 5"
                  "   target ≤ 1 s", flush=True)
        lat = asyncio.run(latency(many))
        q = statistics.quantiles(lat, n=100)
        print(f"run-log event → screen ({len(lat)} events) : p50 {statistics.median(lat) * 1000:.0f} ms, "
              f"p95 {q[94] * 1000:.0f} ms   target p95 ≤ 150 ms")
    finally:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
