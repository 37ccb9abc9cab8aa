"""`tapetui check` over a generated folder of 10,000 sessions × 20 steps, one of them drifted.

Run: python benchmarks/bench_check.py [--sessions 10000 --steps 20] [--baseline DIR] [--comparators]
Target: within 1.5x of the floor measured in the same rounds: a plain Python process that reads every
file of the folder and ``orjson.loads`` every line (FLOOR below). ``check`` runs with the index cache
off (``TAPETUI_CACHE_DIR=off``, as a CI clone has it: "cold") and on, with an entry already made
("warm"); both with the operating system's file cache warm, as the floor is. ``--baseline DIR`` also
times the tapetui package found in DIR (e.g. an older checkout's root) on the same folder, its rounds
interleaved with this one's, so that a before/after comparison sees the same machine load; each median
is printed.

``--comparators`` then times the comparators of ``[compare.rules]`` (issue 16): another folder of the
same shape, where every session also has a pending candidate whose every step differs from the golden on
one path of its result — a price by 0.001 (a tolerance rule covers it), a list of tags in another order
(an unordered rule), a sentence reworded (a similarity rule) — so the comparators really run on every
step. ``check`` is timed with those rules (every candidate passes, each difference excused) and without
them (every candidate fails), its rounds interleaved on the same data. Target: on ≤ 1.5 × off.
"""

from __future__ import annotations

import argparse
import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository: hand-made tapes from tests.builders
from tapetui.core.keys import key_of
from tapetui.core.tapefile import dump_line
from tests import builders  # noqa: E402

RULES = """
[compare.rules]
"result.price" = { tolerance = 0.01 }
"result.tags" = "unordered"
"result.text" = { similarity = 0.6 }
"""
SENTENCES = [
    (
        "the quarterly report lists every tool call the agent made",
        "every tool call the agent made is listed in the quarterly report",
    ),
    ("prices moved a little since the last recording", "since the last recording, prices moved a little"),
    ("the summary keeps the first sentences of each document", "the summary keeps each document's first sentences"),
]


FLOOR = """
import os, sys, orjson
for root, dirs, files in os.walk(sys.argv[1]):
    for name in files:
        with open(os.path.join(root, name), "rb") as f:
            for line in f.read().splitlines():
                orjson.loads(line)
"""


# The floor's work split over N processes (every N-th file from the K-th, in sorted order), all at once: what N
# processes gain on this machine for work of the floor's kind (two vCPUs may share one physical core).
FLOOR_SHARD = """
import os, sys, orjson
names = sorted(os.path.join(root, name) for root, dirs, files in os.walk(sys.argv[1]) for name in files)
for path in names[int(sys.argv[2])::int(sys.argv[3])]:
    with open(path, "rb") as f:
        for line in f.read().splitlines():
            orjson.loads(line)
"""


def floor_in(d: Path, n: int) -> float:
    """Seconds for the floor's work split over ``n`` processes running at once."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-c", FLOOR_SHARD, str(d), str(k), str(n)]) for k in range(n)]
    if any(p.wait() for p in procs):
        raise SystemExit("the split floor failed")
    return time.perf_counter() - t0


def generate(d: Path, sessions: int, steps: int) -> None:
    tools = ["fetch", "search", "summarize", "write"]
    for s in range(sessions):
        folder = d / f"suite{s // 1000:02d}"
        folder.mkdir(exist_ok=True)
        lines = [dump_line({"type": "session", "v": 1})]
        events = [dump_line({"event": "start", "mode": "replay", "at": 1767614401.0})]
        for i in range(steps):
            tool = tools[i % 4]
            args = {"n": i, "q": f"s{s}"}
            key = key_of(tool, args)
            lines.append(_call(i + 1, tool, args, {"ok": i}))
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
            hit = {"event": "hit", "seq": i + 1, "tool": tool, "key": key, "step": i + 1, "at": 1767614402.0 + i}
            events.append(dump_line(hit))  # as the replay writes it
        events.append(orjson.dumps({"event": "end", "stats": {}, "at": 1767614430.0}) + b"\n")
        (folder / f"session{s:05d}.jsonl").write_bytes(b"".join(lines))
        (folder / f"session{s:05d}.run.jsonl").write_bytes(b"".join(events))


def _call(seq: int, tool: str, args: dict[str, object], result: object) -> bytes:
    return builders.call_line(seq=seq, tool=tool, args=args, result=result)


def generate_compared(d: Path, sessions: int, steps: int) -> None:
    """Goldens, clean run logs and a candidate per session whose every step differs on one path a rule covers."""
    tools = ["fetch", "search", "summarize", "write"]
    for s in range(sessions):
        folder = d / f"suite{s // 1000:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        golden = [dump_line({"type": "session", "v": 1})]
        candidate = [dump_line({"type": "session", "v": 1})]
        events = [dump_line({"event": "start", "mode": "replay"})]
        for i in range(steps):
            tool = tools[i % 4]
            args = {"n": i, "q": f"s{s}"}
            old_text, new_text = SENTENCES[(s + i) % len(SENTENCES)]
            old = {"ok": i, "price": 100 + i + 0.25, "tags": ["a", "b", f"t{i}"], "text": old_text}
            new = dict(old)
            which = i % 3  # one path per step differs, each covered by one rule
            if which == 0:
                new["price"] = old["price"] + 0.001
            elif which == 1:
                new["tags"] = list(reversed(old["tags"]))
            else:
                new["text"] = new_text
            golden.append(_call(i + 1, tool, args, old))
            candidate.append(_call(i + 1, tool, args, new))
            events.append(
                dump_line({"event": "hit", "seq": i + 1, "tool": tool, "key": key_of(tool, args), "step": i + 1})
            )
        events.append(orjson.dumps({"event": "end", "stats": {}}) + b"\n")
        (folder / f"session{s:05d}.jsonl").write_bytes(b"".join(golden))
        (folder / f"session{s:05d}.candidate.jsonl").write_bytes(b"".join(candidate))
        (folder / f"session{s:05d}.run.jsonl").write_bytes(b"".join(events))


def bench_comparators(sessions: int, steps: int, rounds: int) -> None:
    """``check`` with the comparators on and off, on the same folder, rounds interleaved."""
    d = Path(tempfile.mkdtemp(prefix="tapetui-bench-cmp-"))
    try:
        generate_compared(d / "tapes", sessions, steps)
        base = '[tapes]\ndir = "tapes"\n'
        (d / "on.toml").write_text(base + RULES)
        (d / "off.toml").write_text(base)
        times: dict[str, list[float]] = {"on": [], "off": []}
        env = {**os.environ, "NO_COLOR": "1"}
        for _ in range(rounds):
            for name in ("off", "on"):
                argv = [sys.executable, "-m", "tapetui", "--config", str(d / f"{name}.toml"), "check", "--json"]
                t0 = time.perf_counter()
                r = subprocess.run(argv, capture_output=True, cwd=d, env=env)
                times[name].append(time.perf_counter() - t0)
                report = orjson.loads(r.stdout)
                # on: every candidate passes, only a warning; off: every candidate fails on results
                assert r.returncode == (0 if name == "on" else 1), r.stderr[-500:]
                assert report["sessions"] == sessions and report["failing"] == (0 if name == "on" else sessions)
                if name == "on":
                    dims = report["reports"][0]["candidate"]["dimensions"]["results"]
                    assert dims["passed"] and dims["value"] == 0 and dims["excused"] >= steps, dims
        on, off = statistics.median(times["on"]), statistics.median(times["off"])
        print(
            f"tapetui check --json, {sessions:,} sessions × {steps} steps, each candidate differing on one path per "
            f"step (tolerance, unordered, similarity): comparators on median {on:.2f} s, off median {off:.2f} s "
            f"over {rounds} runs; on/off {on / off:.2f}×   target ≤ 1.5×"
        )
    finally:
        shutil.rmtree(d)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", help="a folder holding another tapetui package, timed in the same rounds")
    ap.add_argument(
        "--comparators",
        action="store_true",
        help="also time check with [compare.rules] comparators on and off on a folder of candidates (issue 16)",
    )
    ap.add_argument(
        "--jobs", nargs="*", default=["1"], help="check --jobs values to time in the same rounds (e.g. --jobs 1 2)"
    )
    a = ap.parse_args()
    d = Path(tempfile.mkdtemp(prefix="tapetui-bench-"))
    cache = Path(tempfile.mkdtemp(prefix="tapetui-bench-cache-"))
    variants: dict[str, tuple[str | None, str, str]] = {f"--jobs {j}, cold": (None, j, "off") for j in a.jobs}
    variants["--jobs 1, warm"] = (None, "1", str(cache))
    if a.baseline:
        variants["baseline, cold"] = (str(Path(a.baseline).resolve()), "1", "off")
    for path, _, _ in variants.values():  # as a user's install has them (PYTHONDONTWRITEBYTECODE or not)
        compileall.compile_dir(Path(path or Path(__file__).resolve().parent.parent) / "tapetui", quiet=2)
    try:
        generate(d, a.sessions, a.steps)
        then = time.time() - 3600  # written an hour ago, as a checkout's files are by the time check runs:
        for p in d.rglob("*"):  # the cache keeps nothing written in the last 2 s (racy clean)
            os.utime(p, (then, then))
        time.sleep(2.5)  # nor anything changed then (a file's ctime, which utime sets to now)
        env = {**os.environ, "NO_COLOR": "1", "TAPETUI_CACHE_DIR": str(cache)}
        subprocess.run([sys.executable, "-m", "tapetui", "check", str(d)], capture_output=True, env=env)  # warm it
        times: dict[str, list[float]] = {name: [] for name in variants}
        floor: list[float] = []
        split: dict[str, list[float]] = {j: [] for j in a.jobs[1:]}  # the floor over --jobs processes
        outputs: dict[str, str] = {}
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", FLOOR, str(d)], check=True)
            floor.append(time.perf_counter() - t0)
            for j in split:
                split[j].append(floor_in(d, int(j)))
            for name, (path, jobs, cache_dir) in variants.items():
                env = {**os.environ, "NO_COLOR": "1", "TAPETUI_CACHE_DIR": cache_dir}
                if path is not None:
                    env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
                argv = [sys.executable, "-m", "tapetui", "check", str(d), "--jobs", jobs]  # a baseline with --jobs
                t0 = time.perf_counter()
                r = subprocess.run(argv, capture_output=True, text=True, cwd=d, env=env)
                times[name].append(time.perf_counter() - t0)
                assert r.returncode == 1, r.stderr
                assert r.stdout.count("args.n") == 1, r.stdout[:500]
                outputs.setdefault(name, r.stdout)
                found = [ln for ln in r.stdout.splitlines() if "args.n" in ln][0].strip()
        base = statistics.median(floor)
        print(
            f"FLOOR: read every file of the folder ({a.sessions:,} sessions × {a.steps} steps) and orjson.loads every "
            f"line, one process: median {base:.2f} s over {a.rounds} runs (min {min(floor):.2f} s)"
        )
        for name, ts in times.items():
            label = name if variants[name][0] is None else f"{name} [{variants[name][0]}]"
            med = statistics.median(ts)
            print(
                f"tapetui check {label}, 1 drifted: median {med:.2f} s wall over {a.rounds} runs "
                f"(min {min(ts):.2f} s); {med / base:.2f}x the floor   target ≤ 1.5x (cold, one process)"
            )
        if a.baseline:
            ratio = statistics.median(times["baseline, cold"]) / statistics.median(times["--jobs 1, cold"])
            print(f"  this check is {ratio:.2f}x as fast as the baseline's (cold, --jobs 1)")
        if len(a.jobs) > 1:
            one = statistics.median(times[f"--jobs {a.jobs[0]}, cold"])
            for j in a.jobs[1:]:
                ratio = one / statistics.median(times[f"--jobs {j}, cold"])
                ceiling = base / statistics.median(split[j])
                print(
                    f"  --jobs {j}: {ratio:.2f}x faster than --jobs {a.jobs[0]} (target ≥ 1.5x for 2); the floor's own "
                    f"work split over {j} processes: {ceiling:.2f}x faster than in one (what this machine gives)"
                )
        same = len(set(outputs.values())) == 1
        print(f"  output identical across every variant: {same}")
        print("  found: " + found)
    finally:
        shutil.rmtree(d)
        shutil.rmtree(cache)
    if a.comparators:
        bench_comparators(a.sessions, a.steps, a.rounds)


if __name__ == "__main__":
    main()
