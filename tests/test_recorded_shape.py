"""Recorded exceptions keep their shape: class (qualified name), args and JSON attributes, through a real Tape.

``except QuotaError`` and ``err.retry_after == 30`` behave the same in record and replay; error lines of older
tapes (a bare class name, no args, no attributes) replay as they always did (tests/test_recorded_errors.py has
the rules that keep a tape from raising what it should not).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Tape, TapeReplayedError, ToolRegistry
from tests.builders import HEADER, call_line

SIDE_EFFECTS: list[str] = []


class QuotaError(Exception):
    def __init__(self, status: int, detail: str) -> None:
        SIDE_EFFECTS.append("QuotaError.__init__")
        super().__init__(status, detail)
        self.status = status
        self.detail = detail


class RateLimited(Exception):
    retry_after: int = 0  # a plain class default: the instance's value is restored over it

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"retry after {retry_after}")
        self.retry_after = retry_after
        self.headers = {"x-request": "r1", "api_key": "sk-live-0123456789abcdef"}
        self.when = object()  # not JSON: skipped
        self._private = 1  # not a plain name: skipped


class Upstream:
    class Timeout(Exception):
        """A nested class: found again through its qualified name."""


class Pretty(Exception):
    """Its text is written in Python from its args: the args it reads are restored."""

    def __str__(self) -> str:
        return f"code {self.args[0]}"


class NeedsResponse(Exception):
    """Its text reads a private field only its constructor sets: it cannot come back as itself."""

    def __init__(self, resp: Any) -> None:
        super().__init__("upstream down")
        self._resp = resp

    def __str__(self) -> str:
        return f"upstream down ({self._resp.status})"


class WithProperty(Exception):
    @property
    def code(self) -> int:
        return 1


class TupleArg(Exception):
    pass


def record_and_replay(
    tmp_path: Path, error: Callable[[], Exception]
) -> tuple[BaseException, BaseException, dict[str, Any]]:
    """Record a tool that raises ``error()``, then replay it: ``(recorded, replayed, the line's error field)``."""
    reg = ToolRegistry()

    @reg.tool()
    def fetch(n: int) -> int:
        raise error()

    path = tmp_path / "s.jsonl"
    raised = []
    for mode in ("record", "replay"):
        with Tape(path, mode, reg, run_log=False) as t:
            try:
                t.call("fetch", {"n": 1})
            except Exception as e:  # noqa: BLE001 - what each mode raises is the point
                raised.append(e)
    calls = [orjson.loads(x) for x in path.read_bytes().splitlines() if b'"fetch"' in x and b'"key"' in x]
    return raised[0], raised[1], calls[0]["error"]


@pytest.fixture(autouse=True)
def _clear() -> None:
    SIDE_EFFECTS.clear()


def test_a_constructor_with_required_arguments_comes_back_with_its_args(tmp_path: Path) -> None:
    recorded, replayed, line = record_and_replay(tmp_path, lambda: QuotaError(429, "slow"))
    assert line == {
        "type": "QuotaError",
        "module": __name__,
        "message": "(429, 'slow')",
        "args": [429, "slow"],
        "attrs": {"status": 429, "detail": "slow"},
    }
    assert type(replayed) is QuotaError and isinstance(replayed, QuotaError)
    assert replayed.args == recorded.args == (429, "slow")
    assert (replayed.status, replayed.detail) == (429, "slow")
    assert str(replayed) == str(recorded)
    assert SIDE_EFFECTS == ["QuotaError.__init__"]  # recording ran it; replay did not


def test_attributes_keep_their_json_type_and_secrets_stay_redacted(tmp_path: Path) -> None:
    recorded, replayed, line = record_and_replay(tmp_path, lambda: RateLimited(30))
    assert "args" not in line  # just [message]: the common case keeps the line as it was
    assert line["attrs"] == {"retry_after": 30, "headers": {"x-request": "r1", "api_key": "[REDACTED]"}}
    assert type(replayed) is RateLimited
    assert replayed.retry_after == 30 and type(replayed.retry_after) is int
    assert str(replayed) == str(recorded) == "retry after 30" and replayed.args == ("retry after 30",)
    assert replayed.headers == {"x-request": "r1", "api_key": "[REDACTED]"}
    assert not hasattr(replayed, "when") and not hasattr(replayed, "_private")
    try:
        raise replayed
    except RateLimited as e:  # the agent's own handler catches it, as it caught the live one
        assert e.retry_after == 30


def test_a_nested_class_is_found_by_its_qualified_name(tmp_path: Path) -> None:
    _recorded, replayed, line = record_and_replay(tmp_path, lambda: Upstream.Timeout("took 30s"))
    assert (line["type"], line["module"]) == ("Upstream.Timeout", __name__)
    assert type(replayed) is Upstream.Timeout and replayed.args == ("took 30s",)


def test_a_python_str_that_fails_on_the_rebuilt_instance_is_replayed_as_data(tmp_path: Path) -> None:
    resp = types.SimpleNamespace(status=503)
    recorded, replayed, line = record_and_replay(tmp_path, lambda: NeedsResponse(resp))
    assert str(recorded) == line["message"] == "upstream down (503)"
    assert isinstance(replayed, TapeReplayedError) and "upstream down (503)" in str(replayed)  # never str() failing


def test_the_debuggers_quit_is_never_raised_from_a_tape(tmp_path: Path) -> None:
    import bdb

    _recorded, replayed, line = record_and_replay(tmp_path, lambda: bdb.BdbQuit("q"))
    assert line["type"] == "BdbQuit" and isinstance(replayed, TapeReplayedError)


def test_a_python_str_runs_on_the_rebuilt_instance_and_its_args_come_back(tmp_path: Path) -> None:
    recorded, replayed, line = record_and_replay(tmp_path, lambda: Pretty(7))
    assert line["message"] == "code 7" and line["args"] == [7]
    assert type(replayed) is Pretty and replayed.args == (7,) and str(replayed) == str(recorded)


def test_a_tuple_arg_is_recorded_as_a_list_and_the_text_is_kept(tmp_path: Path) -> None:
    _recorded, replayed, line = record_and_replay(tmp_path, lambda: TupleArg((1, 2), "x"))
    assert line["args"] == [[1, 2], "x"]
    # its text changes with the list ("([1, 2], 'x')" is not the recorded "((1, 2), 'x')"): the message is kept
    assert type(replayed) is TupleArg and replayed.args == ("((1, 2), 'x')",)


def test_args_that_are_not_json_are_left_out(tmp_path: Path) -> None:
    marker = object()
    recorded, replayed, line = record_and_replay(tmp_path, lambda: QuotaError(marker, "slow"))  # type: ignore[arg-type]
    assert "args" not in line and line["attrs"] == {"detail": "slow"}
    assert type(replayed) is QuotaError and replayed.args == (str(recorded),) and replayed.detail == "slow"


def test_args_whose_text_needs_escaping_give_the_escaped_message(tmp_path: Path) -> None:
    _recorded, replayed, line = record_and_replay(tmp_path, lambda: QuotaError(500, "bad\x1b]0;title\x07"))
    assert line["args"] == [500, "bad\x1b]0;title\x07"]
    assert type(replayed) is QuotaError and "\x1b" not in str(replayed) and "\x1b" not in repr(replayed.args)


def test_an_attribute_a_class_defines_as_a_property_is_not_restored(tmp_path: Path) -> None:
    def make() -> Exception:
        e = WithProperty("m")
        vars(e)["code"] = 5  # shadowed by the property on the instance that ran
        return e

    _recorded, replayed, line = record_and_replay(tmp_path, make)
    assert line["attrs"] == {"code": 5}
    assert type(replayed) is WithProperty and replayed.code == 1 and "code" not in vars(replayed)


def test_an_os_error_keeps_its_message(tmp_path: Path) -> None:
    recorded, replayed, line = record_and_replay(tmp_path, lambda: FileNotFoundError(2, "No such file"))
    assert line["args"] == [2, "No such file"] and line["message"] == "[Errno 2] No such file"
    # OSError's C text reads fields only its constructor sets: the message is what it shows
    assert type(replayed) is FileNotFoundError and str(replayed) == str(recorded)


def test_a_class_that_is_gone_comes_back_as_tape_replayed_error_with_everything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mod = types.ModuleType("tapetui_gone_errors")
    exec(  # noqa: S102 - a module of its own, removed before the replay
        "class Gone(Exception):\n"
        "    def __init__(self, status, detail):\n"
        "        super().__init__(status, detail)\n"
        "        self.status = status\n",
        mod.__dict__,
    )
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    gone = mod.__dict__["Gone"]
    reg = ToolRegistry()

    @reg.tool()
    def fetch(n: int) -> int:
        raise gone(503, "down")

    path = tmp_path / "s.jsonl"
    with Tape(path, "record", reg, run_log=False) as t, pytest.raises(gone):
        t.call("fetch", {"n": 1})
    monkeypatch.delitem(sys.modules, mod.__name__)
    with Tape(path, "replay", reg, run_log=False) as t, pytest.raises(TapeReplayedError) as e:
        t.call("fetch", {"n": 1})
    err = e.value
    assert (err.type_name, err.module, err.message) == ("Gone", "tapetui_gone_errors", "(503, 'down')")
    assert err.recorded_args == (503, "down") and err.attributes == {"status": 503}
    assert "not a loaded class" in err.reason


def old_line(tmp_path: Path, error: dict[str, Any]) -> Path:
    path = tmp_path / "old.jsonl"
    args = {"n": 1}
    path.write_bytes(HEADER + call_line(seq=1, tool="fetch", args=args, error=error))
    return path


def test_an_older_error_line_replays_as_it_always_did(tmp_path: Path) -> None:
    path = old_line(tmp_path, {"type": "QuotaError", "module": __name__, "message": "429: slow"})
    with Tape(path, "replay", None, run_log=False) as t, pytest.raises(QuotaError) as e:
        t.call("fetch", {"n": 1})
    assert e.value.args == ("429: slow",) and str(e.value) == "429: slow"
    assert vars(e.value) == {} and SIDE_EFFECTS == []


def test_a_hand_written_line_cannot_smuggle_attributes_or_args(tmp_path: Path) -> None:
    path = old_line(
        tmp_path,
        {
            "type": "RateLimited",
            "module": __name__,
            "message": "retry after 30",
            "args": ["retry", {"a": 1}],  # its text would not be the message: (message,) instead
            "attrs": {"__class__": "x", "args": [1], "with_traceback": 1, "retry_after": 30, "ok": [1]},
        },
    )
    with Tape(path, "replay", None, run_log=False) as t, pytest.raises(RateLimited) as e:
        t.call("fetch", {"n": 1})
    assert e.value.args == ("retry after 30",)
    assert vars(e.value) == {"retry_after": 30, "ok": [1]}
