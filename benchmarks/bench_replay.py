"""Replay and record costs, and opening a 1,000,000-call tape, against a plain-json reference.

Run: python benchmarks/bench_replay.py [--calls 1000000] [--big-value-only]
Targets: hit ≤ 10 µs, record ≤ 40 µs (no fsync), 1M-call open ≤ 2 s and ≤ 400 MB peak RSS.
The open is measured twice: a first open, which scans the tape, and the opens after it,
which load the index from the index cache (tapetui/indexcache.py) and scan only what was
appended since; each is followed by building the key table, which a replay needs only
once a call comes out of recorded order. Per-call figures come from interleaved rounds,
each also as a ratio to the plain-json reference's hit in the same round. A 1 MB result (a
fetched page: mostly text, some structure) is recorded and replayed against orjson's own
dumps and loads of the same value in the same rounds: what tapetui adds to a big value.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: hand-made tapes from tests.builders
from tapetui import Tape, ToolRegistry
from tests import builders  # noqa: E402


def registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    def lookup(query: str, page: int = 1) -> dict:
        return {"query": query, "hits": [{"id": page, "title": "result"}]}

    return reg


ROUNDS = 15  # these machines are noisy: the median is the figure, the best round shows the floor
N_CALLS = 2000  # calls per round


class JsonReplayer:
    """The plain-json reference: every line parsed into dicts up front, looked up by key, nothing deep-copied."""

    def __init__(self, tape_path: Path) -> None:
        self.index: dict[str, list[dict]] = {}
        with open(tape_path) as fh:
            for line in fh:
                rec = json.loads(line)
                if rec.get("type") == "call":
                    self.index.setdefault(rec["key"], []).append(rec)

    def call(self, tool: str, args: dict) -> object:
        canonical = json.dumps(args, sort_keys=True, separators=(",", ":")).encode()
        key = f"{tool}:" + hashlib.sha256(canonical).hexdigest()[:12]
        recs = self.index.get(key)
        return recs[0]["result"] if recs else None


def bench_calls(d: Path) -> dict[str, list[float]]:
    """µs per call in each round: a hit (in recorded order, out of order, with the run log on), a record,
    and the json reference's hit. The rounds interleave, so a slow phase of the machine slows all alike."""
    reg = registry()
    tape_path = d / "calls.jsonl"
    calls = [{"query": f"q{i}", "page": i} for i in range(N_CALLS)]
    with Tape(tape_path, "record", reg, run_log=False) as t:
        for args in calls:
            t.call("lookup", args)
    reference = JsonReplayer(tape_path)
    assert reference.call("lookup", calls[0]) is not None
    plans = {"hit": (calls, False), "hit_reversed": (calls[::-1], False), "hit_log": (calls, True)}
    rounds: dict[str, list[float]] = {"record": [], "reference": [], **{name: [] for name in plans}}

    def timed(call: Any, order: list[dict]) -> float:
        t0 = time.perf_counter()
        for args in order:
            call("lookup", args)
        return (time.perf_counter() - t0) / len(order) * 1e6

    async def atimed(acall: Any, order: list[dict]) -> float:
        t0 = time.perf_counter()
        for args in order:
            await acall("lookup", args)
        return (time.perf_counter() - t0) / len(order) * 1e6

    has_acall = hasattr(Tape, "acall")  # the same script measures a checkout from before acall
    if has_acall:
        rounds["acall_hit"] = []

    for r in range(ROUNDS):
        with Tape(d / f"rec{r}.jsonl", "record", reg, run_log=False) as t:  # a fresh tape per round
            rounds["record"].append(timed(t.call, calls))
        for name, (order, log) in plans.items():
            with Tape(tape_path, "replay", reg, run_log=log) as t:  # opened outside the timing
                rounds[name].append(timed(t.call, order))
        if has_acall:
            with Tape(tape_path, "replay", reg, run_log=False) as t:
                rounds["acall_hit"].append(asyncio.run(atimed(t.acall, calls)))
        rounds["reference"].append(timed(reference.call, calls))
    return rounds


LEAVE_CHILD = r"""
import os, sys
from pathlib import Path
from tapetui.core.tapefile import leave_index
path = Path(sys.argv[1])
leave_index(path, path.stat().st_size)  # what SessionFiles.release does at a recording's close
"""

OPEN_CHILD = r"""
import sys, time, resource

def peak_mb():  # this process's own peak: ru_maxrss keeps the forking parent's across exec
    try:
        with open("/proc/self/status") as fh:
            return next(int(l.split()[1]) for l in fh if l.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

t0 = time.perf_counter()
if sys.argv[2] == "tapetui":
    from tapetui.core.tapefile import read_index
    idx = read_index(sys.argv[1])
    dt, peak = time.perf_counter() - t0, peak_mb()
    t1 = time.perf_counter()
    idx.key_first  # the key table: built at a replay's first call out of recorded order
    dt_keys, peak_keys = time.perf_counter() - t1, peak_mb()
else:
    import json
    index = {}
    with open(sys.argv[1]) as fh:
        for line in fh:
            rec = json.loads(line)
            if rec.get("type") == "call":
                index.setdefault(rec["key"], []).append(rec)
    dt, peak = time.perf_counter() - t0, peak_mb()
    dt_keys, peak_keys = 0.0, peak
print(dt, peak, dt_keys, peak_keys)
"""


def make_big(path: Path, n: int) -> None:
    from tapetui.core.tapefile import dump_line

    reg = registry()
    tool = reg["lookup"]

    with open(path, "wb") as fh:
        fh.write(dump_line({"type": "session", "v": 1}))
        fh.write(dump_line(tool.manifest.to_record(False)))
        buf = []
        for i in range(n):
            args = {"page": i, "query": f"q{i}"}
            result = {"query": f"q{i}", "hits": [{"id": i, "title": "result"}]}
            buf.append(
                builders.call_line(
                    seq=i + 1, tool="lookup", args=args, result=result, fingerprint=tool.fingerprint, ms=1.25
                )
            )
            if len(buf) == 10000:
                fh.write(b"".join(buf))
                buf = []
        fh.write(b"".join(buf))


def bench_open(path: Path, impl: str, cache: str = "off") -> list[float]:
    """Medians of 3 opens in fresh processes, the index cache in ``cache`` (or off):
    seconds, peak RSS MB, then seconds and peak RSS MB once the key table is built too."""
    runs = []
    for _ in range(3):
        env = {**os.environ, "TAPETUI_CACHE_DIR": cache}
        out = subprocess.run(
            [sys.executable, "-c", OPEN_CHILD, str(path), impl], capture_output=True, text=True, check=True, env=env
        ).stdout.split()
        runs.append([float(x) for x in out])
    return [statistics.median(col) for col in zip(*runs, strict=True)]


BIG_ROUNDS, BIG_CALLS = 9, 10


def big_value() -> dict[str, Any]:
    words = [f"word{i % 997}" for i in range(150_000)]
    text = " ".join(words)[:1_000_000]
    return {
        "url": "https://example.org/page",
        "status": 200,
        "text": text,
        "links": [{"href": f"/p/{i}", "title": f"page {i}"} for i in range(200)],
    }


def bench_big_value(d: Path) -> dict[str, list[float]]:
    """ms per call for a 1 MB result: record, replay hit, and orjson dumps / loads of the same value."""
    import orjson

    value = big_value()
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    def fetch(url: str, n: int = 0) -> dict[str, Any]:
        return value

    out: dict[str, list[float]] = {"record": [], "replay": [], "dumps": [], "loads": []}
    encoded = orjson.dumps(value)
    for r in range(BIG_ROUNDS):
        tape = d / f"big-value-{r}.jsonl"
        t0 = time.perf_counter()
        with Tape(tape, "record", reg, run_log=False) as t:
            for i in range(BIG_CALLS):
                t.call("fetch", {"url": "https://example.org/page", "n": i})
        out["record"].append((time.perf_counter() - t0) * 1000 / BIG_CALLS)
        t0 = time.perf_counter()
        with Tape(tape, "replay", reg, run_log=False) as t:
            for i in range(BIG_CALLS):
                t.call("fetch", {"url": "https://example.org/page", "n": i})
        out["replay"].append((time.perf_counter() - t0) * 1000 / BIG_CALLS)
        t0 = time.perf_counter()
        for _ in range(BIG_CALLS):
            orjson.dumps(value)
        out["dumps"].append((time.perf_counter() - t0) * 1000 / BIG_CALLS)
        t0 = time.perf_counter()
        for _ in range(BIG_CALLS):
            orjson.loads(encoded)
        out["loads"].append((time.perf_counter() - t0) * 1000 / BIG_CALLS)
        tape.unlink()
    return out


def print_big_value(big: dict[str, list[float]]) -> None:
    med = {k: statistics.median(v) for k, v in big.items()}
    print(f"1 MB result, ms per call: median of {BIG_ROUNDS} rounds of {BIG_CALLS} calls (best round)")
    print(
        f"  record               : {med['record']:7.2f} ms ({min(big['record']):.2f})  "
        f"{med['record'] / med['dumps']:5.1f}× orjson.dumps of the value ({med['dumps']:.2f} ms)"
    )
    print(
        f"  replay hit           : {med['replay']:7.2f} ms ({min(big['replay']):.2f})  "
        f"{med['replay'] / med['loads']:5.1f}× orjson.loads of the value ({med['loads']:.2f} ms)"
    )


def print_calls(rounds: dict[str, list[float]]) -> dict[str, float]:
    med = {k: statistics.median(v) for k, v in rounds.items()}
    ratio = {
        k: statistics.median(x / ref for x, ref in zip(v, rounds["reference"], strict=True)) for k, v in rounds.items()
    }
    print(
        f"per call: median of {ROUNDS} interleaved rounds of {N_CALLS:,} calls (best round); "
        "× the json reference's hit in the same round"
    )
    for key, label, note in (
        ("hit", "replay hit", "in recorded order, run log off   target ≤ 10 µs"),
        ("acall_hit", "replay hit, acall", "await tape.acall   target ≤ 1.5× call's hit"),
        ("hit_reversed", "replay hit, reversed", "each call looked up by key"),
        ("hit_log", "replay hit + run log", "one locked append per event"),
        ("record", "record per call", "no fsync   target ≤ 40 µs"),
        ("reference", "plain-json ref. hit", "lookup only: no canon, redaction or fingerprint check"),
    ):
        if key in med:
            print(f"{label:22}: {med[key]:7.2f} µs ({min(rounds[key]):5.2f})  {ratio[key]:5.2f}×   {note}")
    if "acall_hit" in rounds:
        per_round = statistics.median(a / h for a, h in zip(rounds["acall_hit"], rounds["hit"], strict=True))
        print(f"acall hit / call hit  : {per_round:5.2f}× (median of per-round ratios)")
    return ratio


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=1_000_000)
    ap.add_argument("--big-value-only", action="store_true", help="only the 1 MB result figures")
    ap.add_argument("--calls-only", action="store_true", help="only the per-call figures (no 1 MB value, no open)")
    a = ap.parse_args()
    if a.calls_only:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["TAPETUI_CACHE_DIR"] = "off"
            print_calls(bench_calls(Path(tmp)))
        return
    if a.big_value_only:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["TAPETUI_CACHE_DIR"] = "off"
            print_big_value(bench_big_value(Path(tmp)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        os.environ["TAPETUI_CACHE_DIR"] = str(d / "calls-cache")  # not the user's cache
        rounds = bench_calls(d)
        big_value_rounds = bench_big_value(d)
        big = d / "big.jsonl"
        make_big(big, a.calls)
        past = time.time_ns() - 60 * 10**9  # written a minute ago: past the index cache's racy window
        os.utime(big, ns=(past, past))
        size_mb = big.stat().st_size / 1e6
        cold = bench_open(big, "tapetui")  # the index cache off: every open scans
        recorded = d / "recorded-cache"  # what a recording of this tape leaves at its close (Tape.close)
        subprocess.run(
            [sys.executable, "-c", LEAVE_CHILD, str(big)],
            check=True,
            env={**os.environ, "TAPETUI_CACHE_DIR": str(recorded)},
        )
        first_recorded = bench_open(big, "tapetui", str(recorded))
        cache = d / "cache"
        subprocess.run(
            [sys.executable, "-c", OPEN_CHILD, str(big), "tapetui"],
            check=True,
            capture_output=True,
            env={**os.environ, "TAPETUI_CACHE_DIR": str(cache)},
        )  # the first open saves the entry
        entry_mb = sum(f.stat().st_size for f in cache.glob("*.idx")) / 1e6
        warm = bench_open(big, "tapetui", str(cache))
        t_ref, rss_ref = bench_open(big, "json")[:2]
    ratio = print_calls(rounds)
    print(f"open {a.calls:,}-call tape ({size_mb:.0f} MB), target ≤ 2 s and ≤ 400 MB peak RSS (medians of 3):")
    source = f"from a {entry_mb:.0f} MB index-cache entry" if entry_mb else "no entry: tapes under 8 MB are not cached"
    for label, (t, rss, t_keys, rss_keys) in (("first open (scan)", cold), ("next opens (cached)", warm)):
        print(
            f"  {label:20} : {t:5.2f} s, peak RSS {rss:.0f} MB"
            f"{'   index cache off' if label.startswith('first') else '   ' + source}"
        )
        print(
            f"    + key table        : {t_keys:5.2f} s more, peak RSS {rss_keys:.0f} MB   "
            "built at a replay's first call out of recorded order"
        )
    print(
        f"  first open, recorded : {first_recorded[0]:5.2f} s, peak RSS {first_recorded[1]:.0f} MB   a tape tapetui "
        "recorded: the index its recorder left at close   target ≤ 0.5 s"
    )
    print(f"plain-json reference  : {t_ref:5.2f} s, peak RSS {rss_ref:.0f} MB")
    print_big_value(big_value_rounds)
    print(
        f"ratios tapetui/json   : first open {cold[0] / t_ref:.2f}×, cached open {warm[0] / t_ref:.2f}×, "
        f"peak RSS {cold[3] / rss_ref:.2f}× (key table built), hit {ratio['hit']:.2f}× (per round)"
    )


if __name__ == "__main__":
    main()
