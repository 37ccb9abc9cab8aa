"""The pytest plugin: the drift report through wrappers, the default registry, and the ``tape`` marker."""

from __future__ import annotations

import pytest

from tapetui.core.errors import TapeError
from tapetui.pytest_plugin import tape_errors

from .test_plugin import CONFTEST, TEST, run

pytest_plugins = ["pytester"]

DRIFTING = """
import pytest

def drift(tape):
    tape.call("add", {"a": 1, "b": 5})  # recorded with b=2

def test_group(tape):
    try:
        drift(tape)
    except Exception as e:
        raise ExceptionGroup("agent run failed", [ValueError("other"), ExceptionGroup("turn 2", [e])])

def test_cause(tape):
    try:
        drift(tape)
    except Exception as e:
        raise RuntimeError("tool call failed") from e

def test_context(tape):
    try:
        drift(tape)
    except Exception:
        raise RuntimeError("tool call failed, and so did the handler")
"""


def recorded(pytester: pytest.Pytester) -> None:
    """A project whose test_agent.py recorded ``add(a=1, b=2)`` for each test in DRIFTING."""
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    names = ("test_group", "test_cause", "test_context")
    pytester.makepyfile(
        test_agent="".join(f"def {n}(tape):\n    tape.call('add', {{'a': 1, 'b': 2}})\n" for n in names)
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=3)


@pytest.mark.parametrize("name", ["test_group", "test_cause", "test_context"])
def test_a_wrapped_drift_still_shows_the_readable_report(pytester: pytest.Pytester, name: str) -> None:
    recorded(pytester)
    pytester.makepyfile(test_agent=DRIFTING)
    res = run(pytester, f"test_agent.py::{name}")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*tapetui: *argument drift at step 1 (add)*", "*args.b  2 → 5*"])
    wrapper = {"test_group": "*agent run failed*", "test_cause": "*tool call failed*"}.get(name, "*so did the handler*")
    res.stdout.fnmatch_lines([wrapper])  # the test's own traceback stays


def test_the_walk_finds_every_tape_error_once_and_ends_on_cycles() -> None:
    a, b = TapeError("a"), TapeError("b")
    outer = RuntimeError("outer")
    outer.__cause__ = ExceptionGroup("g", [ValueError("v"), a, ExceptionGroup("inner", [b, a])])
    loop1, loop2 = ValueError("1"), ValueError("2")
    loop1.__context__, loop2.__context__ = loop2, loop1
    outer.__context__ = loop1
    assert tape_errors(outer) == [a, b]
    assert tape_errors(loop1) == []
    assert tape_errors(a) == [a]


def test_an_unrelated_failure_keeps_its_usual_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_other="""
def test_x():
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    raise a
"""
    )
    res = run(pytester)
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["E       ValueError: a"])
    assert "tapetui: " not in res.stdout.str() and "TapeError inside" not in res.stdout.str()


def test_the_default_registry_is_a_fresh_tool_registry(pytester: pytest.Pytester) -> None:
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(
        test_agent="""
from tapetui import ToolRegistry

def test_one(tape, tape_registry):
    assert isinstance(tape_registry, ToolRegistry) and tape.registry is tape_registry
    @tape_registry.tool(version="1")
    def add(a: int, b: int) -> int:
        return a + b
    assert tape.call("add", {"a": 1, "b": 2}) == 3

def test_two(tape_registry):
    assert "add" not in tape_registry  # a fresh one: test_one's tool is not in it
"""
    )
    run(pytester, "--tape-mode=record").assert_outcomes(passed=2)
    run(pytester, "test_agent.py::test_one").assert_outcomes(passed=1)  # and it replays


def test_the_marker_sets_path_and_mode_per_test(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(
        test_agent="""
import pytest

@pytest.mark.tape(path="shared/add.jsonl", mode="record")
def test_records(tape):
    assert tape.mode == "record"
    assert tape.call("add", {"a": 1, "b": 2}) == 3

@pytest.mark.tape(path="shared/add.jsonl", mode="replay")
def test_replays_the_same_tape(tape):
    assert tape.mode == "replay"
    assert tape.call("add", {"a": 1, "b": 2}) == 3
    assert tape.stats()["tape_hits"] == 1

@pytest.mark.tape(path="only_the_path.jsonl")
def test_path_only(tape):
    assert tape.mode == "fill" and tape.path.name == "only_the_path.jsonl"

def test_unmarked(tape):
    assert tape.mode == "fill" and tape.path.name == "test_unmarked.jsonl"
"""
    )
    run(pytester, "--tape-mode=fill").assert_outcomes(passed=4)  # the marker's mode wins over the command line
    assert (pytester.path / "tapes" / "shared" / "add.jsonl").is_file()
    assert not (pytester.path / "tapes" / "test_agent" / "test_records.jsonl").exists()


@pytest.mark.parametrize("where", ["absolute", "../outside/t.jsonl", "."])
def test_a_marker_path_stays_inside_the_tapes_folder(pytester: pytest.Pytester, where: str) -> None:
    pytester.makeconftest(CONFTEST)
    target = str(pytester.path / "elsewhere" / "t.jsonl") if where == "absolute" else where
    pytester.makepyfile(
        test_agent=f"""
import pytest

@pytest.mark.tape(path={target!r}, mode="record")
def test_agent(tape):
    tape.call("add", {{"a": 1, "b": 2}})
"""
    )
    result = run(pytester)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*test_agent.py::test_agent: @pytest.mark.tape(path=*must name a file inside*"])
    assert not (pytester.path / "elsewhere").exists() and not (pytester.path / "outside").exists()


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('mode="recrod"', "*test_agent.py::test_agent: @pytest.mark.tape(mode='recrod') is not a tape mode*"),
        ('"x.jsonl"', "*test_agent.py::test_agent: @pytest.mark.tape takes only path= and mode= (got 'x.jsonl')*"),
        ("paht='x'", "*test_agent.py::test_agent: @pytest.mark.tape takes only path= and mode= (got paht)*"),
        ("path=3", "*test_agent.py::test_agent: @pytest.mark.tape(path=...) must be a str or a Path, not int*"),
    ],
)
def test_a_bad_marker_is_a_clear_error_naming_the_test(pytester: pytest.Pytester, marker: str, message: str) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(
        test_agent=f"""
import pytest

@pytest.mark.tape({marker})
def test_agent(tape):
    pass
"""
    )
    res = run(pytester, "--strict-markers")
    res.assert_outcomes(errors=1)
    res.stdout.fnmatch_lines([message])


def test_the_marker_is_registered(pytester: pytest.Pytester) -> None:
    res = run(pytester, "--markers")
    res.stdout.fnmatch_lines(["@pytest.mark.tape(path=None, mode=None):*"])


def test_the_plain_drift_report_is_unchanged(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(test_agent=TEST.replace("B", "2"))
    run(pytester, "--tape-mode=record").assert_outcomes(passed=1)
    pytester.makepyfile(test_agent=TEST.replace("B", "5"))
    res = run(pytester)
    res.stdout.fnmatch_lines(["tapetui: *argument drift at step 1 (add)*"])
    assert "a TapeError inside what the test raised" not in res.stdout.str()
