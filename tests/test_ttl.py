"""Absurd TTLs are refused up front, and a tool that ran never loses its call."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Config, ConfigError, Tape, TapeError, ToolRegistry, load_config
from tapetui.core.clock import ManualClock
from tapetui.core.config import MAX_TTL, ToolPolicy

HUGE = 10**400
ABSURD_TOML = [
    "nan",
    "+nan",
    "inf",
    "-inf",
    "-1",
    "0",
    "-0.5",
    "1e300",
    '"99999999999d"',
    '"0s"',
    '"' + "9" * 400 + 's"',
    str(HUGE),
    "3153600001",
    '"36501d"',
    '"5300w"',
]


def calls_of(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [r for r in map(orjson.loads, path.read_bytes().splitlines()) if r.get("type") == "call"]


@pytest.mark.parametrize("value", ABSURD_TOML)
def test_tapes_toml_refuses_absurd_ttls_naming_file_and_key(tmp_path: Path, value: str) -> None:
    cfg = tmp_path / "tapes.toml"
    cfg.write_text(f"[tools.quote]\nttl = {value}\n")
    with pytest.raises(ConfigError) as info:
        load_config(cfg)
    text = str(info.value)
    assert str(cfg) in text and "'tools.quote.ttl'" in text
    assert len(text) < 400  # a huge value is described, not printed
    if value not in ("nan", "+nan", "-1", "0", "-0.5", '"0s"', "-inf"):
        assert "at most 100 years" in text


@pytest.mark.parametrize(
    ("value", "seconds"), [("3153600000", MAX_TTL), ('"36500d"', MAX_TTL), ('"1h"', 3600), ("0.5", 0.5)]
)
def test_tapes_toml_accepts_up_to_100_years(tmp_path: Path, value: str, seconds: float) -> None:
    cfg = tmp_path / "tapes.toml"
    cfg.write_text(f"[tools.quote]\nttl = {value}\n")
    assert load_config(cfg).policy("quote").ttl == seconds


@pytest.mark.parametrize(
    "ttl", [float("nan"), float("inf"), -float("inf"), -1, 0, 1e300, HUGE, MAX_TTL + 1, True, "1h", [60]]
)
def test_registration_refuses_absurd_ttls_naming_the_tool(ttl: Any) -> None:
    reg = ToolRegistry()

    def quote() -> int:
        return 1

    with pytest.raises(TapeError, match="tool 'quote': a ttl must"):
        reg.register(quote, ttl=ttl)
    with pytest.raises(TapeError, match="tool 'quote': a ttl must"):
        reg.tool(ttl=ttl)(quote)
    assert "quote" not in reg
    reg.register(quote, ttl=MAX_TTL)  # the maximum itself is fine


def _registry(ran: list[str]) -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(version="1", side_effect=True, ttl=60)
    def pay(amount: int) -> dict[str, Any]:
        ran.append(f"pay {amount}")
        return {"paid": amount}

    return reg


@pytest.mark.parametrize("ttl", [1e300, float("nan"), float("inf"), -5.0, 0.0, HUGE])
def test_an_absurd_ttl_in_a_config_built_in_code_stops_the_call_before_the_tool_runs(
    tmp_path: Path, ttl: float
) -> None:
    ran: list[str] = []
    cfg = replace(Config.for_dir(tmp_path), tools={"pay": ToolPolicy(ttl=ttl)})  # no validation on this path
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", _registry(ran), config=cfg) as t:
        with pytest.raises(TapeError, match=r"pay \(step 1\): a ttl must.*the tool was not run"):
            t.call("pay", {"amount": 5})
        assert t.stats()["live_tool_calls"] == 0 and t.stats()["real_side_effects"] == 0
    assert ran == [] and calls_of(tape) == []


def test_an_expiry_past_year_9999_stops_the_call_before_the_tool_runs(tmp_path: Path) -> None:
    ran: list[str] = []
    tape = tmp_path / "s.jsonl"
    clock = ManualClock(datetime(9999, 12, 31, 23, 59, 30, tzinfo=UTC))
    with (
        Tape(tape, "record", _registry(ran), clock=clock) as t,
        pytest.raises(TapeError, match=r"pay \(step 1\): cannot compute .*expires_at.*the tool was not run"),
    ):
        t.call("pay", {"amount": 5})
    assert ran == [] and calls_of(tape) == []


def test_a_requested_tool_that_is_not_valid_text_stops_the_call_before_the_tool_runs(tmp_path: Path) -> None:
    ran: list[str] = []
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", _registry(ran)) as t:
        with pytest.raises(TapeError, match="the tool was not run"):
            t.call("pay", {"amount": 5}, requested_tool="pa\ud800y")
        assert t.call("pay", {"amount": 6}) == {"paid": 6}
    assert ran == ["pay 6"]
    assert [c["args"] for c in calls_of(tape)] == [{"amount": 6}]


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@pytest.mark.parametrize(
    ("outcome", "problem"),
    [
        ("set", "returned a value that cannot be recorded: result.s is a set"),
        ("deep", "returned a value nested too deeply to record"),
        ("bigint", "returned a value that cannot be recorded (TypeError: Integer exceeds 64-bit range)"),
        ("surrogate", "returned a value that cannot be recorded (TypeError"),
        ("unprintable", "raised Unprintable, whose message cannot be recorded (RuntimeError)"),
    ],
)
def test_a_tool_that_ran_never_loses_its_call(tmp_path: Path, outcome: str, problem: str) -> None:
    """What cannot be recorded after the tool ran becomes the line's error; the call is written."""
    ran: list[str] = []
    reg = ToolRegistry()

    @reg.tool(version="1", side_effect=True, ttl=60)
    def act(kind: str) -> Any:
        ran.append(kind)
        if kind == "set":
            return {"s": {1, 2}}
        if kind == "deep":
            v: Any = 1
            for _ in range(5000):
                v = [v]
            return v
        if kind == "bigint":
            return 2**70
        if kind == "surrogate":
            return "lone \ud800"
        raise Unprintable()

    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", reg, clock=ManualClock(datetime(2026, 1, 1, tzinfo=UTC))) as t:
        with pytest.raises(TapeError, match="the call was recorded with this as its error") as info:
            t.call("act", {"kind": outcome})
        assert problem in str(info.value)
        assert t.stats()["real_side_effects"] == 1
    assert ran == [outcome]
    (rec,) = calls_of(tape)
    assert rec["args"] == {"kind": outcome} and "result" not in rec
    assert rec["expires_at"] == "2026-01-01T00:01:00Z" and rec["recorded_at"] == "2026-01-01T00:00:00Z"
    assert rec["error"]["type"] == "TapeError" and problem in rec["error"]["message"]
    with Tape(tape, "replay", reg) as t, pytest.raises(TapeError, match="raised TapeError when recorded"):
        t.call("act", {"kind": outcome})
    assert ran == [outcome]  # the replay ran nothing


def test_an_interrupted_tool_leaves_its_manifest_for_the_next_call(tmp_path: Path) -> None:
    """The manifest line is prepared before the tool runs; an interrupt writes no call, so no manifest either,
    and the next call of the tool still writes it."""
    reg = ToolRegistry()
    state = {"n": 0}

    @reg.tool(version="1")
    def slow() -> int:
        state["n"] += 1
        if state["n"] == 1:
            raise KeyboardInterrupt
        return state["n"]

    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", reg) as t:
        with pytest.raises(KeyboardInterrupt):
            t.call("slow", {})
        assert t.call("slow", {}) == 2
    recs = [orjson.loads(x) for x in tape.read_bytes().splitlines()]
    assert [r.get("type") for r in recs] == ["session", "tool", "call"]
    assert recs[1]["name"] == "slow"
