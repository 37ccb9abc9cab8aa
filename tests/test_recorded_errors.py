"""A tape is data: a recorded error never makes a replay raise a control-flow or test-outcome
class, never runs a constructor, and never makes tapetui import anything."""

from __future__ import annotations

import sys
import types
import unittest
from pathlib import Path
from typing import Any

import pytest

from tapetui import Tape, TapeError, TapeReplayedError
from tapetui.core.recorded_errors import build_error, restorable
from tests.builders import HEADER, call_line

pytest_plugins = ["pytester"]

SIDE_EFFECTS: list[str] = []


class NoisyError(Exception):
    """Its constructor has side effects: replay must not run them."""

    def __new__(cls, *args: Any) -> NoisyError:
        SIDE_EFFECTS.append("__new__")
        return super().__new__(cls, *args)

    def __init__(self, *args: Any) -> None:
        SIDE_EFFECTS.append("__init__")
        super().__init__(*args)


class NeedsArgsError(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code


class MySkip(unittest.SkipTest):
    """A subclass of a refused class is refused too."""


class ArgsProperty(Exception):
    @property  # type: ignore[override]
    def args(self) -> Any:  # pragma: no cover - must never run
        SIDE_EFFECTS.append("args")
        return ()

    @args.setter
    def args(self, value: Any) -> None:  # pragma: no cover - must never run
        SIDE_EFFECTS.append("args=")


@pytest.fixture(autouse=True)
def _clear() -> None:
    SIDE_EFFECTS.clear()


def replay_error(tmp_path: Path, type_name: str, module: str, message: str = "recorded message") -> BaseException:
    """Write a one-call tape whose call raised ``module.type_name`` and replay it; what it raised."""
    tape = tmp_path / "s.jsonl"
    args = {"n": 1}
    error = {"type": type_name, "module": module, "message": message}
    tape.write_bytes(HEADER + call_line(seq=1, tool="t", args=args, error=error))
    with Tape(tape, "replay", None, run_log=False) as t:
        try:
            t.call("t", args)
        except BaseException as e:  # noqa: BLE001 - what a replay raises is the point
            return e
    raise AssertionError("the replay raised nothing")


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("unittest", "SkipTest"),
        ("unittest.case", "SkipTest"),
        ("unittest.case", "_ShouldStop"),
        ("unittest.case", "_UnexpectedSuccess"),
        ("_pytest.outcomes", "Skipped"),
        ("_pytest.outcomes", "Failed"),
        ("_pytest.outcomes", "XFailed"),
        ("_pytest.outcomes", "Exit"),  # an Exception subclass: refused by identity
        ("builtins", "Skipped"),  # pytest's classes claim module "builtins"; not there, so unknown
        ("builtins", "StopIteration"),
        ("builtins", "StopAsyncIteration"),
        ("builtins", "SystemExit"),
        ("builtins", "KeyboardInterrupt"),
        ("builtins", "GeneratorExit"),
        ("builtins", "BaseException"),
        ("asyncio.exceptions", "CancelledError"),
        ("asyncio", "CancelledError"),
        ("concurrent.futures._base", "CancelledError"),
        ("hypothesis.errors", "UnsatisfiedAssumption"),
        ("tapetui.core.errors", "TapeDrift"),  # a tape may not claim a drift this replay did not see
        (__name__, "MySkip"),
        ("builtins", "object"),
        ("builtins", "type"),
        ("builtins", "__class__"),
        ("sys", "modules"),
        ("not.loaded.anywhere", "GoneError"),
    ],
)
def test_control_flow_and_test_outcome_classes_come_back_as_tape_errors(tmp_path: Path, module: str, name: str) -> None:
    import asyncio  # noqa: F401 - loaded, so only the rule refuses its CancelledError
    import concurrent.futures  # noqa: F401

    import hypothesis.errors  # noqa: F401

    exc = replay_error(tmp_path, name, module, "upstream said no")
    assert type(exc) is TapeReplayedError, type(exc)
    assert isinstance(exc, TapeError)
    assert str(exc) == f"t (step 1) raised {name} when recorded: upstream said no"
    assert (exc.type_name, exc.module, exc.message, exc.attributes) == (name, module, "upstream said no", {})
    assert exc.reason


def test_a_module_that_is_not_loaded_is_not_imported(tmp_path: Path) -> None:
    name = "tapetui_never_imported_module"
    assert name not in sys.modules
    exc = replay_error(tmp_path, "ValueError", name)
    assert isinstance(exc, TapeReplayedError) and "not a loaded class" in exc.reason
    assert name not in sys.modules


def test_a_module_getattr_hook_never_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mod = types.ModuleType("tapetui_lazy_module")

    def __getattr__(name: str) -> Any:  # noqa: N807
        SIDE_EFFECTS.append(f"getattr {name}")
        return ValueError

    mod.__getattr__ = __getattr__  # type: ignore[method-assign]
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    exc = replay_error(tmp_path, "LazyError", mod.__name__)
    assert isinstance(exc, TapeReplayedError)
    assert SIDE_EFFECTS == []


def test_builtin_value_error_comes_back_as_itself(tmp_path: Path) -> None:
    exc = replay_error(tmp_path, "ValueError", "builtins", "upstream said no")
    assert type(exc) is ValueError and exc.args == ("upstream said no",) and str(exc) == "upstream said no"


def test_a_constructor_with_side_effects_never_runs(tmp_path: Path) -> None:
    exc = replay_error(tmp_path, "NoisyError", __name__, "boom")
    assert type(exc) is NoisyError and str(exc) == "boom"
    assert SIDE_EFFECTS == []


def test_a_class_with_required_constructor_arguments_comes_back_as_itself(tmp_path: Path) -> None:
    exc = replay_error(tmp_path, "NeedsArgsError", __name__, "404: not found")
    assert type(exc) is NeedsArgsError and exc.args == ("404: not found",) and str(exc) == "404: not found"
    assert not hasattr(exc, "code")  # its __init__ did not run; nothing but the message is recorded


def test_an_args_property_is_not_run(tmp_path: Path) -> None:
    exc = replay_error(tmp_path, "ArgsProperty", __name__, "m")
    assert type(exc) is ArgsProperty
    assert BaseException.__dict__["args"].__get__(exc) == ("m",)
    assert SIDE_EFFECTS == []


@pytest.mark.parametrize(
    ("module", "name", "itself"),
    [
        ("builtins", "ConnectionRefusedError", True),
        ("builtins", "OSError", True),
        ("builtins", "KeyError", True),
        ("builtins", "TimeoutError", True),
        ("json", "JSONDecodeError", True),
        # their C __str__ reads fields only the constructor sets: the message would vanish, so a TapeError says it
        ("builtins", "UnicodeDecodeError", False),
        ("builtins", "SyntaxError", False),
        ("builtins", "ExceptionGroup", False),
    ],
)
def test_library_exceptions_with_c_constructors(tmp_path: Path, module: str, name: str, itself: bool) -> None:
    import json  # noqa: F401

    exc = replay_error(tmp_path, name, module, "said no")
    if itself:
        assert type(exc).__name__ == name and exc.args == ("said no",) and "said no" in str(exc)
    else:
        assert isinstance(exc, TapeReplayedError) and exc.type_name == name and "said no" in str(exc)


def test_attributes_are_restored_only_as_plain_json_values() -> None:
    exc = build_error(
        NeedsArgsError,
        "m",
        {
            "code": 404,
            "detail": {"a": [1, "x", None]},
            "__class__": "x",
            "__dict__": {},
            "_private": 1,
            "args": ["x"],
            "with_traceback": 1,
            "obj": object(),
            "bad name": 1,
        },
    )
    assert type(exc) is NeedsArgsError and exc.args == ("m",)
    assert vars(exc) == {"code": 404, "detail": {"a": [1, "x", None]}}
    assert not restorable(NeedsArgsError, "__init__", 1)
    assert not restorable(ArgsProperty, "args", 1)


def test_a_skip_recorded_on_a_tape_fails_the_test_instead_of_skipping_it(pytester: pytest.Pytester) -> None:
    """The attack as it was: a replayed test turned into a skip by a tape naming unittest.SkipTest."""
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    pytester.makepyfile(test_agent="def test_agent(tape):\n    tape.call('add', {'a': 1})\n")
    tape = pytester.path / "tapes" / "test_agent" / "test_agent.jsonl"
    tape.parent.mkdir(parents=True)
    args = {"a": 1}
    error = {"type": "SkipTest", "module": "unittest.case", "message": "looks fine"}
    tape.write_bytes(HEADER + call_line(seq=1, tool="add", args=args, error=error))
    res = pytester.runpytest("-p", "no:asyncio", "-p", "no:textual-snapshot")
    res.assert_outcomes(failed=1)
    res.stdout.fnmatch_lines(["*add (step 1) raised SkipTest when recorded: looks fine*"])
