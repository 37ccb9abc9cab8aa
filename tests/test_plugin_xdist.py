"""The pytest plugin under pytest-xdist: record, replay and fill across 4 worker processes into one tapes folder,
8 of the 40 tests sharing one tape, and every tape whole, every run log finished, no recording lost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tapetui.core.runlog import read_run_log
from tapetui.core.runstart import GROUP_ENV, runs_of
from tapetui.core.tapefile import read_index

pytest_plugins = ["pytester"]

TESTS = """
import pytest


def add(a: int, b: int) -> int:
    return a + b


@pytest.mark.parametrize("i", range(32))
def test_own_tape(tape, i):
    for j in range(5):
        assert tape.call("add", {"a": i, "b": j}, live=lambda i=i, j=j: add(i, j)) == i + j


@pytest.mark.parametrize("i", range(8))
@pytest.mark.tape(path="shared.jsonl")
def test_shared_tape(tape, i):
    assert tape.call("add", {"a": 100, "b": 1}, live=lambda: add(100, 1)) == 101
"""


def _ended(run_log: Path) -> dict[str, object]:
    last = orjson.loads(run_log.read_bytes().splitlines()[-1])
    assert last["event"] == "end", f"{run_log}: the run log has no end"
    return last


@pytest.mark.slow
def test_record_replay_and_fill_across_four_workers_lose_nothing(tmp_path: Path) -> None:
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    (tmp_path / "test_many.py").write_text(TESTS)
    tapes = tmp_path / "tapes"
    for mode in ("record", "replay", "fill"):
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-n", "4", "-q", "-p", "no:cacheprovider", f"--tape-mode={mode}"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{mode}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
        assert "40 passed" in done.stdout, done.stdout[-500:]
        own = sorted((tapes / "test_many").glob("test_own_tape-*.jsonl"))
        own = [p for p in own if not p.name.endswith((".run.jsonl", ".candidate.jsonl"))]
        assert len(own) == 32
        for tape in own:
            idx = read_index(tape, validate=True)  # whole: every line parses, every stored key checks
            assert len(idx) == 5
            end = _ended(tape.with_name(tape.name.replace(".jsonl", ".run.jsonl")))
            stats = end["stats"]
            assert isinstance(stats, dict)
            assert stats["tape_hits" if mode != "record" else "live_tool_calls"] == 5, (mode, tape, stats)
        _ended(tapes / "shared.run.jsonl")
        if mode == "replay":  # the 8 tests' runs of the shared tape, each whole in its run log (one run group)
            runs = runs_of(read_run_log(tapes / "shared.run.jsonl"))
            assert len(runs) == 8 and all([e["event"] for e in r] == ["start", "hit", "end"] for r in runs), runs
    # the shared tape: 8 recordings, one golden, a candidate and the older ones kept in shared.samples/
    kept = [tapes / "shared.jsonl", tapes / "shared.candidate.jsonl", *sorted((tapes / "shared.samples").iterdir())]
    assert len(kept) == 8 and all(len(read_index(p, validate=True)) == 1 for p in kept)


def test_a_pytest_started_by_a_test_under_xdist_is_a_run_group_of_its_own(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """xdist gives its workers' environment PYTEST_XDIST_TESTRUNUID, which a pytest a test starts inherits: that
    session is not the outer run, and its runs must not join the outer run's group."""
    monkeypatch.delenv(GROUP_ENV, raising=False)
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", "outer-run")
    pytester.makepyfile(
        f"""
import os

def test_group():
    group = os.environ[{GROUP_ENV!r}]
    assert group and group != "outer-run"
"""
    )
    args = ("-p", "no:xdist", "-p", "no:cacheprovider", "-p", "no:asyncio", "-p", "no:textual-snapshot")
    pytester.runpytest(*args).assert_outcomes(passed=1)
    assert GROUP_ENV not in os.environ  # the session's group is gone with it
