from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

CONFTEST = """
import pytest
from tapetui import ToolRegistry

@pytest.fixture
def tape_registry():
    reg = ToolRegistry()
    @reg.tool(version="1")
    def add(a: int, b: int) -> int:
        return a + b
    return reg
"""

TEST = """
def test_agent(tape):
    assert tape.call("add", {"a": 1, "b": B}) == 1 + B
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    # The inner run needs none of the outer suite's plugins (pytest-asyncio warns when unconfigured).
    return pytester.runpytest("-p", "no:asyncio", "-p", "no:textual-snapshot", *args)


def test_record_then_replay_then_drift_report(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(test_agent=TEST.replace("B", "2"))
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    tape = pytester.path / "tapes" / "test_agent" / "test_agent.jsonl"
    assert tape.exists()
    run(
        pytester,
    ).assert_outcomes(passed=1)  # default mode is replay
    pytester.makepyfile(test_agent=TEST.replace("B", "5"))
    res = run(
        pytester,
    )
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*argument drift at step 1 (add)*", "*args.b  2 → 5*"])


def test_replay_without_tape_fails_clearly(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_agent=TEST.replace("B", "2"))
    res = run(
        pytester,
    )
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines(["*no tape to replay*"])
