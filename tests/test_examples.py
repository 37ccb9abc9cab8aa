"""Every script under examples/ runs as a newcomer would run it: offline, from any folder, exit 0.

Each example records a session, replays it and asserts itself that the replay ran no tool; this test runs
them all, so an example that stops working fails CI instead of a reader's first try."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


def test_there_are_examples() -> None:
    assert EXAMPLES, "examples/ holds no script"


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
@pytest.mark.slow
def test_the_example_runs_offline(script: Path, tmp_path: Path) -> None:
    env = {**os.environ, "TAPETUI_CACHE_DIR": "off", "OPENAI_API_KEY": "", "NO_NETWORK": "1"}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip(), "an example says what it did"
