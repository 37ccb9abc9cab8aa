"""Time to first screen (10,000 sessions; one 100,000-step session), append-to-screen latency, and
big values: the diff of two 1 MB results and the keys while it is computed.

Run: python benchmarks/bench_tui.py   (python benchmarks/bench_tui.py big: the big-value part only)
Targets: first screen ≤ 1 s in both cases; run-log event to screen p95 ≤ 150 ms; two 1 MB results that
differ in a few places: the diff shown ≤ 0.5 s after the step is selected, key → screen p95 ≤ 100 ms
while a diff is computed.
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
from textual.widgets import Log  # noqa: E402

from tapetui.core.config import Config  # noqa: E402
from tapetui.tui.app import TapeApp  # noqa: E402


async def first_screen(d: Path, expand: bool) -> tuple[float, float]:
    """Seconds from creating the app to its first drawn screen, and to every session's counts shown."""
    t0 = time.monotonic()
    app = TapeApp(Config.for_dir(d), watch=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await pilot.pause()
        if expand:
            await pilot.press("enter")
            await pilot.pause()
            assert app.session_tree.cursor_node is not None and app.session_tree.cursor_node.children
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


def big_values(d: Path, size: int = 1_000_000, places: int = 3) -> str:
    """A session whose step 1 result is ``size`` characters of prose, changed in ``places`` places by the
    candidate; step 2 is small. Returns the session's name."""
    import random

    from tapetui.core.keys import key_of
    from tapetui.core.tapefile import call_line, dump_line

    rnd = random.Random(7)
    vocab = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 10))) for _ in range(2000)]
    text = " ".join(rnd.choice(vocab) for _ in range(size // 5 + 10))[: size - 11]
    chars = list(text)
    for k in range(1, places + 1):
        p = len(chars) * k // (places + 1)
        chars[p : p + 8] = "CHANGED!"
    new = "".join(chars)
    common = {
        "fingerprint": "0123456789abcdef",
        "side_effect": False,
        "ms": 1.0,
        "expires_at": None,
        "recorded_at": "2026-01-01T00:00:00Z",
    }

    def tape(value: str) -> bytes:
        return (
            dump_line({"type": "session", "v": 1})
            + call_line(
                seq=1,
                tool="fetch_page",
                key=key_of("fetch_page", {"url": "u"}),
                args={"url": "u"},
                result={"text": value},
                **common,
            )
            + call_line(
                seq=2, tool="summarize", key=key_of("summarize", {"n": 1}), args={"n": 1}, result="ok", **common
            )
        )

    (d / "big.jsonl").write_bytes(tape(text))
    (d / "big.candidate.jsonl").write_bytes(tape(new))
    return "big"


def send_key(app: TapeApp, key: str, char: str | None) -> None:
    """A key as the terminal driver delivers it. (Pilot.press also waits until the whole process is idle,
    which a diff computed in a worker thread delays by design: that would measure the worker, not the key.)"""
    from textual import events

    ev = events.Key(key, char)
    ev.set_sender(app)
    assert app._driver is not None
    app._driver.send_message(ev)


async def big_diff(d: Path, rounds: int = 30) -> tuple[list[float], list[tuple[str, float]], int]:
    """Seconds from selecting the step to its diff on screen (each round); key → screen seconds of the
    keys pressed while a diff was being computed; how many of the diffs were coarsened."""
    from tapetui.tui.widgets.session_tree import StepRef

    app = TapeApp(Config.for_dir(d), watch=False)
    shown: list[float] = []
    keys: list[tuple[str, float]] = []
    coarse = 0
    async with app.run_test(size=(140, 44)) as pilot:
        while not all(s.loaded for s in app.sessions.values()):
            await asyncio.sleep(0.01)
        await pilot.press("enter", "j", "j")  # open the session; the cursor on step 2

        def on_step(seq: int) -> bool:
            """The cursor is on step ``seq`` and the detail pane shows it."""
            node = app.session_tree.cursor_node
            return (
                node is not None
                and isinstance(node.data, StepRef)
                and node.data.seq == seq
                and app.detail.subject[-1:] == (seq,)
            )

        async def until(cond, what: str, t0: float) -> float:  # type: ignore[no-untyped-def]
            while not cond():
                await asyncio.sleep(0.001)
                if time.perf_counter() - t0 > 60:
                    raise SystemExit(f"{what}: never reached the screen")
            app.screen._compositor.render_strips()
            return time.perf_counter() - t0

        async def settled() -> None:
            await until(
                lambda: on_step(2) and not app.detail.computing and all(w.is_finished for w in app.workers),
                "settle",
                time.perf_counter(),
            )

        for _ in range(rounds):  # the diff on screen after the step is selected
            await settled()
            t0 = time.perf_counter()
            send_key(app, "k", "k")  # select step 1: its diff starts in a worker
            shown.append(await until(lambda: on_step(1) and bool(app.detail.diffs), "the diff", t0))
            coarse += any(diff.note is not None for _, diff in app.detail.diffs)
            send_key(app, "j", "j")
            await until(lambda: on_step(2), "step 2", t0)
        for _ in range(rounds):  # keys while a diff is computed: j and k, each answered by its step's detail
            await settled()
            send_key(app, "k", "k")
            await until(
                lambda: on_step(1) and (app.detail.computing or bool(app.detail.diffs)),
                "the diff starts",
                time.perf_counter(),
            )
            for key, seq in (("j", 2), ("k", 1), ("j", 2), ("k", 1), ("j", 2)):
                if not app.detail.computing and seq == 2:
                    break
                computing = app.detail.computing
                t = time.perf_counter()
                send_key(app, key, key)
                took = await until(lambda: on_step(seq), key, t)  # noqa: B023
                if computing:
                    keys.append((key, took))
            if not on_step(2):
                send_key(app, "j", "j")
                await until(lambda: on_step(2), "step 2", time.perf_counter())
        for _ in range(rounds):  # the same keys with no diff being computed: what a key costs anyway
            for key, seq in (("k", 1), ("j", 2)):
                await settled() if seq == 1 else await until(
                    lambda: not app.detail.computing and all(w.is_finished for w in app.workers),
                    "settle",
                    time.perf_counter(),
                )
                t = time.perf_counter()
                send_key(app, key, key)
                keys.append(("idle " + key, await until(lambda: on_step(seq), key, t)))  # noqa: B023
    return shown, keys, coarse


def report_big() -> None:
    base = Path(tempfile.mkdtemp(prefix="tapetui-tui-big-"))
    try:
        name = big_values(base)
        shown, timed, coarse = asyncio.run(big_diff(base))
        keys = [t for k, t in timed if not k.startswith("idle")]
        idle = [t for k, t in timed if k.startswith("idle")]
        q = statistics.quantiles(keys, n=100) if len(keys) >= 2 else (keys or [0.0]) * 99
        print(
            f"diff of two 1 MB results differing in 3 places ({name}): shown {statistics.median(shown):.2f} s "
            f"median, {max(shown):.2f} s max after the step is selected ({len(shown)} rounds, {coarse} coarsened)"
            "   target ≤ 0.5 s",
            flush=True,
        )
        print(
            f"key → screen while that diff is computed ({len(keys)} keys): p50 {statistics.median(keys) * 1000:.0f} ms,"
            f" p95 {q[94] * 1000:.0f} ms   target p95 ≤ 100 ms",
            flush=True,
        )
        qi = statistics.quantiles(idle, n=100)
        print(
            f"key → screen, same keys, no diff computed ({len(idle)} keys): "
            f"p50 {statistics.median(idle) * 1000:.0f} ms,"
            f" p95 {qi[94] * 1000:.0f} ms   (what a key costs on this machine anyway)",
            flush=True,
        )
    finally:
        shutil.rmtree(base)


def main() -> None:
    if sys.argv[1:] == ["big"]:
        report_big()
        return
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
            print(
                f"first screen, {label:<30}: {paint:.2f} s (every count shown {settled:.2f} s), median of 5"
                "   target ≤ 1 s",
                flush=True,
            )
        lat = asyncio.run(latency(many))
        q = statistics.quantiles(lat, n=100)
        print(
            f"run-log event → screen ({len(lat)} events) : p50 {statistics.median(lat) * 1000:.0f} ms, "
            f"p95 {q[94] * 1000:.0f} ms   target p95 ≤ 150 ms"
        )
    finally:
        shutil.rmtree(base)
    report_big()


if __name__ == "__main__":
    main()
