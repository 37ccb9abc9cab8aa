"""The load script, CI-sized: runs stream events into the watched folder while keys are pressed;
every event must reach the app. The full run: python benchmarks/bench_load.py"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # `pytest -m "not slow"` skips the harnesses for a quick loop

ROOT = Path(__file__).resolve().parent.parent


def test_streaming_runs_every_event_shown_and_keys_answered() -> None:
    r = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_load.py"),
            "--runs",
            "5",
            "--events",
            "30",
            "--interval-ms",
            "20",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "events shown: 150 of 150" in r.stdout
    keys = next(line for line in r.stdout.splitlines() if line.startswith("key press"))
    assert "(0 keys)" not in keys
