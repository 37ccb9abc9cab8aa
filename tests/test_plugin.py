from __future__ import annotations

import sys

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
    # The inner run needs none of the outer suite's plugins (pytest-asyncio warns when unconfigured), and
    # caches no test module: the tests rewrite test_agent.py within a second at the same size, which a
    # cached copy (keyed by mtime and size) would hide.
    dont_write = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        return pytester.runpytest("-p", "no:asyncio", "-p", "no:textual-snapshot", *args)
    finally:
        sys.dont_write_bytecode = dont_write


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


MODEL_TEST = """
PRICE = {"v": __P__}

def test_agent(tape):
    req = {"instructions": "__I__", "messages": [{"role": "user", "parts": [{"type": "text", "content": "price?"}]}]}
    r = tape.model(req, live=lambda: {"parts": [{"type": "text", "content": "ask"}]}, model="m:1")
    assert tape.call("get_price", {"s": "A"}, live=lambda: PRICE) == PRICE
"""


@pytest.mark.slow  # six inner pytest runs
def test_tape_live_runs_the_named_tool_and_reports_its_changed_result(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(test_agent=MODEL_TEST.replace("__P__", "1").replace("__I__", "a"))
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    pytester.makepyfile(test_agent=MODEL_TEST.replace("__P__", "2").replace("__I__", "a"))
    run(pytester).assert_outcomes(failed=1)  # replay serves the recorded price, not the new one
    run(pytester, "--tape-live=get_price").assert_outcomes(passed=1)
    log = (pytester.path / "tapes" / "test_agent" / "test_agent.run.jsonl").read_text()
    assert '"event":"behaviour"' in log and '"result.v",1,2' in log.replace(" ", "")


@pytest.mark.slow
def test_tape_on_drift_live_rebaselines_into_a_candidate(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(test_agent=MODEL_TEST.replace("__P__", "1").replace("__I__", "a"))
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    pytester.makepyfile(test_agent=MODEL_TEST.replace("__P__", "1").replace("__I__", "b"))
    run(pytester, "--tape-mode=fill").assert_outcomes(failed=1)  # a ModelDrift
    run(pytester, "--tape-mode=fill", "--tape-on-drift=live").assert_outcomes(passed=1)
    assert (pytester.path / "tapes" / "test_agent" / "test_agent.candidate.jsonl").exists()


CUT_SHORT = """
def test_agent(tape):
    assert tape.call("add", {"a": 1, "b": 1}) == 2
    assert tape.call("add", {"a": 1, "b": 2}) == 3
    raise KIND("the agent stopped here")
    tape.call("add", {"a": 1, "b": 3})
"""


@pytest.mark.parametrize(
    "kind",
    ["RuntimeError", pytest.param("KeyboardInterrupt", marks=pytest.mark.slow)],  # slow: a pytest process
)
def test_a_recording_a_test_cut_short_is_a_run_that_ended_with_its_error(pytester: pytest.Pytester, kind: str) -> None:
    """A test that fails or is interrupted mid-recording leaves half a session: its run log says how it ended (as
    ``with Tape(...)`` does), so ``check`` reports it instead of a clean end."""
    from tapetui.cli import main

    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(test_agent=CUT_SHORT.replace("KIND", kind))
    if kind == "KeyboardInterrupt":  # it ends the pytest it is raised in: that one is a process of its own
        pytester.runpytest_subprocess("-p", "no:asyncio", "-p", "no:textual-snapshot", "--tape-mode=record")
    else:
        run(pytester, "--tape-mode=record")
    log = pytester.path / "tapes" / "test_agent" / "test_agent.run.jsonl"
    end = log.read_text().splitlines()[-1]
    assert '"event":"end"' in end and f'"type":"{kind}"' in end
    assert main(["--config", str(pytester.path / "tapes.toml"), "check"]) == 1
