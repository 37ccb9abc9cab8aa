"""`tapetui check` on a folder whose only golden is a sparse file with no newline (256 MiB and 2 GiB).

Such a file is one torn line: the scan must answer in time linear in its size and with memory
bounded by a few read chunks (tapetui/tapefile.py ``_scan_file``), not hold it or copy it anew
at each chunk (the old ``carry + chunk``: 256 MiB took 3.2 s and 0.57 GB, 1 GiB 36 s and 2.1 GB,
2 GiB did not finish in 120 s).

Run: python benchmarks/bench_hostile.py [--sizes 256M,2G] [--rounds 3] [--timeout 300]
Prints, per size, the median wall time of the whole `tapetui check` process and its peak RSS
(VmHWM, read by the child itself at exit: ru_maxrss would keep the forking parent's across exec).
Target: time linear in the size, peak RSS flat (well under 200 MB) whatever the size.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, os, sys
from tapetui.cli import main

rc = main(["check", sys.argv[1]])
with open("/proc/self/status") as fh:
    peak_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM:"))
os.write(int(sys.argv[2]), json.dumps({"rc": rc, "peak_mb": peak_kb / 1024}).encode())
sys.exit(rc)
"""

UNITS = {"K": 1024, "M": 1024**2, "G": 1024**3}


def parse_size(text: str) -> int:
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    return int(float(text[:-1]) * UNITS[text[-1]]) if text[-1] in UNITS else int(text)


def human(n: int) -> str:
    return f"{n / 1024**3:g} GiB" if n >= 1024**3 else f"{n / 1024**2:g} MiB"


def check_once(folder: Path, timeout: float) -> tuple[float, int, float, str]:
    """(wall s, exit code, peak RSS MB, stdout) of one `tapetui check` child."""
    r_fd, w_fd = os.pipe()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, str(folder), str(w_fd)],
            capture_output=True,
            text=True,
            pass_fds=(w_fd,),
            timeout=timeout,
            env={**os.environ, "NO_COLOR": "1"},
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        os.close(w_fd)
        os.close(r_fd)
        return time.perf_counter() - t0, -1, float("nan"), f"(still running after {timeout:g} s: killed)"
    wall = time.perf_counter() - t0
    os.close(w_fd)
    with os.fdopen(r_fd, "rb") as fh:
        report = fh.read()
    if not report:
        raise SystemExit(f"the child reported nothing (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    doc = json.loads(report)
    if "Traceback" in proc.stderr:
        raise SystemExit(f"traceback from tapetui check:\n{proc.stderr[-2000:]}")
    return wall, int(doc["rc"]), float(doc["peak_mb"]), proc.stdout + proc.stderr


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="256M,2G", help="comma-separated sizes of the no-newline golden")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds before a check is killed")
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="tapetui-hostile-"))
    try:
        for size in [parse_size(s) for s in a.sizes.split(",")]:
            folder = root / f"tapes-{size}"
            folder.mkdir()
            golden = folder / "no_newline.jsonl"
            with open(golden, "wb") as fh:
                fh.truncate(size)  # sparse: NUL bytes, no newline anywhere
            walls, peaks = [], []
            out = ""
            for _ in range(a.rounds):
                wall, rc, peak, out = check_once(folder, a.timeout)
                walls.append(wall)
                peaks.append(peak)
                if rc == -1:
                    break
                assert rc == 1 and f"torn last line 1 ({size} bytes)" in out.replace(",", ""), (rc, out[-500:])
            print(
                f"tapetui check, one golden of {human(size)} with no newline: median {statistics.median(walls):.2f} s "
                f"wall (min {min(walls):.2f} s) over {len(walls)} run(s), peak RSS {max(peaks):.0f} MB "
                f"({size / 1024**2 / statistics.median(walls):,.0f} MiB/s)"
            )
            print(
                "  said: " + next((ln.strip() for ln in out.splitlines() if "torn" in ln or "killed" in ln), out[-200:])
            )
            golden.unlink()
    finally:
        shutil.rmtree(root)


if __name__ == "__main__":
    main()
