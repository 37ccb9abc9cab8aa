"""`tapetui check` over a generated folder of 10,000 sessions × 20 steps, one of them drifted.

Run: python benchmarks/bench_check.py [--sessions 10000 --steps 20] [--baseline DIR]
Target: ≤ 5 s wall. ``--baseline DIR`` also times the tapetui package found in DIR (e.g. an older
checkout's root) on the same folder, its rounds interleaved with this one's, so that a before/after
comparison sees the same machine load; each median is printed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

from tapetui.core.keys import key_of
from tapetui.core.tapefile import call_line, dump_line


def generate(d: Path, sessions: int, steps: int) -> None:
    tools = ["fetch", "search", "summarize", "write"]
    for s in range(sessions):
        folder = d / f"suite{s // 1000:02d}"
        folder.mkdir(exist_ok=True)
        lines = [dump_line({"type": "session", "v": 1})]
        events = [dump_line({"event": "start", "mode": "replay"})]
        for i in range(steps):
            tool = tools[i % 4]
            args = {"n": i, "q": f"s{s}"}
            key = key_of(tool, args)
            lines.append(
                call_line(
                    seq=i + 1,
                    tool=tool,
                    key=key,
                    fingerprint="0123456789abcdef",
                    side_effect=False,
                    ms=1.0,
                    expires_at=None,
                    recorded_at="2026-01-01T00:00:00Z",
                    args=args,
                    result={"ok": i},
                )
            )
            if s == sessions // 2 and i == 7:
                new = {"n": i + 1, "q": f"s{s}"}
                events.append(
                    dump_line(
                        {
                            "event": "drift",
                            "seq": i + 1,
                            "tool": tool,
                            "key": key_of(tool, new),
                            "recorded_key": key,
                            "recorded_args": args,
                            "args": new,
                            "changes": [["n", i, i + 1]],
                        }
                    )
                )
                break
            events.append(dump_line({"event": "hit", "seq": i + 1, "tool": tool, "key": key, "step": i + 1}))
        events.append(orjson.dumps({"event": "end", "stats": {}}) + b"\n")
        (folder / f"session{s:05d}.jsonl").write_bytes(b"".join(lines))
        (folder / f"session{s:05d}.run.jsonl").write_bytes(b"".join(events))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="a folder holding another tapetui package, timed in the same rounds")
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="tapetui-bench-"))
    variants = {"this": None} | ({"baseline": str(Path(a.baseline).resolve())} if a.baseline else {})
    try:
        generate(d, a.sessions, a.steps)
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(a.rounds):
            for name, path in variants.items():
                env = {**os.environ, "NO_COLOR": "1"}
                if path is not None:
                    env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
                t0 = time.perf_counter()
                r = subprocess.run(
                    [sys.executable, "-m", "tapetui", "check", str(d)], capture_output=True, text=True, cwd=d, env=env
                )
                times[name].append(time.perf_counter() - t0)
                assert r.returncode == 1, r.stderr
                assert r.stdout.count("args.n") == 1, r.stdout[:500]
                if name == "this":
                    found = [ln for ln in r.stdout.splitlines() if "args.n" in ln][0].strip()
        for name, ts in times.items():
            label = "" if name == "this" else f" [baseline {variants[name]}]"
            print(
                f"tapetui check{label}, {a.sessions:,} sessions × {a.steps} steps, 1 drifted: "
                f"median {statistics.median(ts):.2f} s wall over {a.rounds} runs (min {min(ts):.2f} s)   "
                "target ≤ 5 s"
            )
        print("  found: " + found)
    finally:
        shutil.rmtree(d)


if __name__ == "__main__":
    main()
