"""Parallel tool calls against one tape: throughput of 1,000 calls from asyncio tasks and from threads.

Run: python benchmarks/bench_parallel.py [--calls 1000] [--rounds 9]
Target: parallel throughput ≥ 50% of sequential throughput (no lock-contention collapse), record and replay.

Each round records a fresh tape with N calls, then replays it, both ways: one ``await tape.acall`` after
the other (sequential), and all N at once (``asyncio.gather``); then the same replay from 8 threads. A
gather of N tasks costs asyncio itself more than N awaits (a replay hit never awaits, so its tasks are
all overhead): the same two shapes with a coroutine that does nothing are measured too, and the last
lines compare tapetui's own cost per call, that overhead taken out. The
tool is async and yields once (``await asyncio.sleep(0)``), as a real one awaiting I/O would, so parallel
calls really interleave. Figures are calls per second, medians of the rounds (best round in brackets), and
the per-round ratio parallel / sequential.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tapetui import Tape, ToolRegistry


def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    async def lookup(query: str, page: int = 1) -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"query": query, "hits": [{"id": page, "title": "result"}]}

    return reg


def calls_of(n: int) -> list[dict[str, Any]]:
    return [{"query": f"q{i}", "page": i} for i in range(n)]


async def sequential(tape: Tape, calls: list[dict[str, Any]]) -> None:
    for args in calls:
        await tape.acall("lookup", args)


async def parallel(tape: Tape, calls: list[dict[str, Any]]) -> None:
    await asyncio.gather(*(tape.acall("lookup", args) for args in calls))


def threaded(tape: Tape, calls: list[dict[str, Any]], n_threads: int = 8) -> None:
    """Replay from threads: the sync tool path (hits never run the tool)."""
    barrier = threading.Barrier(n_threads)

    def work(part: list[dict[str, Any]]) -> None:
        barrier.wait()
        for args in part:
            tape.call("lookup", args)

    threads = [threading.Thread(target=work, args=(calls[k::n_threads],)) for k in range(n_threads)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


async def plain_lookup(args: dict[str, Any]) -> dict[str, Any]:
    """The asyncio reference: a coroutine that does nothing (what gather costs by itself)."""
    return args


def asyncio_reference(calls: list[dict[str, Any]]) -> tuple[float, float]:
    """Calls/s of awaiting ``plain_lookup`` one after the other, and of gathering them all."""

    async def seq() -> None:
        for args in calls:
            await plain_lookup(args)

    async def par() -> None:
        await asyncio.gather(*(plain_lookup(args) for args in calls))

    out = []
    for run in (seq, par):
        t0 = time.perf_counter()
        asyncio.run(run())
        out.append(rate(len(calls), time.perf_counter() - t0))
    return out[0], out[1]


def rate(n: int, seconds: float) -> float:
    return n / seconds


def one_round(d: Path, r: int, calls: list[dict[str, Any]]) -> dict[str, float]:
    reg = registry()
    out: dict[str, float] = {}
    for how, run in (("sequential", sequential), ("parallel", parallel)):
        path = d / f"{how}-{r}.jsonl"
        with Tape(path, "record", reg, run_log=False) as t:
            t0 = time.perf_counter()
            asyncio.run(run(t, calls))
            out[f"record {how}"] = rate(len(calls), time.perf_counter() - t0)
        with Tape(path, "replay", reg, run_log=False) as t:
            t0 = time.perf_counter()
            asyncio.run(run(t, calls))
            out[f"replay {how}"] = rate(len(calls), time.perf_counter() - t0)
            assert t.stats()["tape_hits"] == len(calls)
        if how == "sequential":
            with Tape(path, "replay", reg, run_log=False) as t:
                t0 = time.perf_counter()
                threaded(t, calls)
                out["replay 8 threads"] = rate(len(calls), time.perf_counter() - t0)
                assert t.stats()["tape_hits"] == len(calls)
        path.unlink()
    out["asyncio sequential"], out["asyncio gather"] = asyncio_reference(calls)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=9)
    a = ap.parse_args()
    calls = calls_of(a.calls)
    rounds: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["TAPETUI_CACHE_DIR"] = "off"
        for r in range(a.rounds):
            rounds.append(one_round(Path(tmp), r, calls))
    print(f"{a.calls:,} calls against one tape, calls/s: median of {a.rounds} rounds (best round)")
    for name in rounds[0]:
        values = [x[name] for x in rounds]
        print(f"  {name:20}: {statistics.median(values):9,.0f}/s ({max(values):,.0f})")
    for mode in ("record", "replay"):
        ratio = statistics.median(x[f"{mode} parallel"] / x[f"{mode} sequential"] for x in rounds)
        print(f"  {mode} parallel / sequential: {ratio:4.2f}×   target ≥ 0.50×")
    ratio = statistics.median(x["replay 8 threads"] / x["replay sequential"] for x in rounds)
    print(f"  replay 8 threads / sequential acall: {ratio:4.2f}×")

    def own(x: dict[str, float], mode: str, how: str) -> float:
        """µs per call tapetui adds beyond what asyncio itself costs for the same shape of run."""
        ref = "asyncio gather" if how == "parallel" else "asyncio sequential"
        return (1 / x[f"{mode} {how}"] - 1 / x[ref]) * 1e6

    for mode in ("record", "replay"):
        ratio = statistics.median(own(x, mode, "sequential") / own(x, mode, "parallel") for x in rounds)
        print(
            f"  {mode}: tapetui's own cost per call, sequential / parallel (asyncio's gather overhead taken out): "
            f"{ratio:4.2f}×   target ≥ 0.50×"
        )


if __name__ == "__main__":
    main()
