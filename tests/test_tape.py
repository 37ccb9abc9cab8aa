from __future__ import annotations

import contextlib
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapetui import Config, Tape, TapeDrift, TapeError, TapeMiss, TapeStale, ToolDriftError, ToolRegistry
from tapetui.core.clock import ManualClock
from tapetui.core.config import ToolPolicy
from tapetui.core.runlog import read_run_log
from tapetui.core.store import candidate_path, runlog_path

from .conftest import Calls


def record(path: Path, registry: ToolRegistry, calls: list[tuple[str, dict[str, Any]]], **kw: Any) -> None:
    with Tape(path, "record", registry, **kw) as t:
        for tool, args in calls:
            with contextlib.suppress(ValueError):
                t.call(tool, args)


BASIC = [
    ("search", {"query": "tapes"}),
    ("summarize", {"text": "a b c d", "max_words": 120}),
    ("send_email", {"to": "ops@example.com", "body": "done"}),
]


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def events(path: Path) -> list[str]:
    return [e["event"] for e in read_run_log(runlog_path(path))]


def test_unknown_mode_lists_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="record, replay, fill"):
        Tape(tmp_path / "t.jsonl", "playback")


def test_record_writes_header_manifests_and_calls(tmp_path: Path, registry: ToolRegistry, calls: Calls) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    recs = lines(tape)
    assert recs[0]["type"] == "session" and recs[0]["v"] == 1
    assert [r["name"] for r in recs if r["type"] == "tool"] == ["search", "summarize", "send_email"]
    cs = [r for r in recs if r["type"] == "call"]
    assert [c["seq"] for c in cs] == [1, 2, 3]
    assert cs[2]["side_effect"] is True and cs[0]["side_effect"] is False
    assert cs[1]["fingerprint"] == registry["summarize"].fingerprint
    assert cs[1]["recorded_at"].endswith("Z") and cs[1]["ms"] >= 0
    assert calls.n == {"search": 1, "summarize": 1, "send_email": 1}


def test_replay_hits_with_zero_live_calls(tmp_path: Path, registry: ToolRegistry, calls: Calls) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    calls.n.clear()
    with Tape(tape, "replay", registry) as t:
        assert t.call("search", {"query": "tapes"}) == ["hit for tapes"]
        assert t.call("summarize", {"max_words": 120, "text": " a b c d "}) == {"summary": "a b c d"}
        assert t.call("send_email", {"to": "ops@example.com", "body": "done"}) == {"sent": True}
        s = t.stats()
    assert calls.n == {}
    assert not (tmp_path / "outbox.txt").read_text().count("\n") > 1  # only the recording sent mail
    for k, v in {
        "mode": "replay",
        "steps": 3,
        "tape_hits": 3,
        "tape_misses": 0,
        "live_tool_calls": 0,
        "real_side_effects": 0,
        "drift_events": 0,
    }.items():
        assert s[k] == v
    assert events(tape) == ["start", "hit", "hit", "hit", "end"]


def test_drift_carries_position_keys_args_and_readable_paths(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    long_text = "x" * 300
    with Tape(tape, "replay", registry) as t:
        t.call("search", {"query": "tapes"})
        with pytest.raises(TapeDrift) as ei:
            t.call("summarize", {"text": "a b c d", "max_words": 80, "style": long_text})
        assert t.stats()["drift_events"] == 1
    d = ei.value
    assert d.seq == 2 and d.tool == "summarize"
    assert d.recorded_key != d.new_key
    assert d.recorded_args["max_words"] == 120 and d.new_args["max_words"] == 80
    msg = str(d)
    assert "args.max_words  120 → 80" in msg
    assert "args.style  (added)" in msg and len(msg) < 600  # long value shortened, path kept
    ev = [e for e in read_run_log(runlog_path(tape)) if e["event"] == "drift"][0]
    assert ev["seq"] == 2 and ev["recorded_key"] == d.recorded_key


def test_miss_names_nearest_call_and_differences(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    with Tape(tape, "replay", registry) as t:
        with pytest.raises(TapeMiss) as ei:
            t.call("summarize", {"text": "other", "max_words": 120})  # seq 1 is search: not drift
        assert t.stats()["tape_misses"] == 1
    assert ei.value.nearest_seq == 2
    assert 'args.text  "a b c d" → "other"' in str(ei.value)
    with Tape(tape, "replay", registry) as t, pytest.raises(TapeMiss, match="no recorded call of 'nope'"):
        t.call("nope", {})


def test_fill_runs_only_misses_and_writes_a_candidate(tmp_path: Path, registry: ToolRegistry, calls: Calls) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC[:2])
    golden_before = tape.read_bytes()
    calls.n.clear()
    with Tape(tape, "fill", registry) as t:
        t.call("search", {"query": "tapes"})
        t.call("search", {"query": "new"})  # miss: seq 2 is summarize
        t.call("summarize", {"text": "a b c d", "max_words": 120})
        s = t.stats()
    assert calls.n == {"search": 1}
    assert s["tape_hits"] == 2 and s["tape_misses"] == 1 and s["live_tool_calls"] == 1
    assert tape.read_bytes() == golden_before  # the golden never changes behind the reviewer's back
    cand = [r for r in lines(candidate_path(tape)) if r["type"] == "call"]
    assert [(c["seq"], c["tool"]) for c in cand] == [(1, "search"), (2, "search"), (3, "summarize")]
    # A second fill replays the filled miss from the candidate: it ran live once.
    calls.n.clear()
    with Tape(tape, "fill", registry) as t:
        t.call("search", {"query": "tapes"})
        t.call("search", {"query": "new"})
        t.call("summarize", {"text": "a b c d", "max_words": 120})
        assert t.stats()["live_tool_calls"] == 0
    assert calls.n == {}


def test_fill_drift_still_raises(tmp_path: Path, registry: ToolRegistry, calls: Calls) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    calls.n.clear()
    with Tape(tape, "fill", registry) as t:
        t.call("search", {"query": "tapes"})
        with pytest.raises(TapeDrift):
            t.call("summarize", {"text": "a b c d", "max_words": 1})
    assert calls.n == {}


def test_side_effects_never_run_in_replay_and_once_in_fill(
    tmp_path: Path, registry: ToolRegistry, calls: Calls
) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    calls.n.clear()
    with Tape(tape, "replay", registry) as t, pytest.raises(TapeMiss):
        t.call("send_email", {"to": "x@example.com", "body": "hi"})
    assert calls.n == {}
    with Tape(tape, "fill", registry) as t:
        t.call("send_email", {"to": "x@example.com", "body": "hi"})
        assert t.stats()["real_side_effects"] == 1
    assert calls.n == {"send_email": 1}


def test_fingerprint_change_raises_and_opt_out_is_visible(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    newer = ToolRegistry()

    def search(query: str, limit: int = 5) -> list[str]:
        return []

    newer.register(search, schema={"type": "object"}, version="2.0")
    with Tape(tape, "replay", newer) as t, pytest.raises(ToolDriftError) as ei:
        t.call("search", {"query": "tapes"})
    e = ei.value
    assert e.tool == "search" and e.recorded == registry["search"].fingerprint and e.live == newer["search"].fingerprint
    assert "version: 1.0 → 2.0" in str(e) and "params.limit  (added)" in str(e)
    cfg = replace(Config.for_dir(tmp_path), tools={"search": ToolPolicy(check_fingerprint=False)})
    with Tape(tape, "replay", newer, config=cfg) as t:
        assert t.call("search", {"query": "tapes"}) == ["hit for tapes"]
        assert t.stats()["fingerprint_checks_off"] == ["search"]
    fp = [e for e in read_run_log(runlog_path(tape)) if e["event"] == "fingerprint"]
    assert fp and fp[0]["allowed"] is True


def test_live_policy_always_runs(tmp_path: Path, registry: ToolRegistry, calls: Calls) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    calls.n.clear()
    cfg = replace(Config.for_dir(tmp_path), tools={"search": ToolPolicy(live=True)})
    with Tape(tape, "replay", registry, config=cfg) as t:
        assert t.call("search", {"query": "anything"}) == ["hit for anything"]
        assert t.call("summarize", {"text": "a b c d", "max_words": 120}) == {"summary": "a b c d"}
        assert t.stats()["live_tool_calls"] == 1
    assert calls.n == {"search": 1}
    live = [e for e in read_run_log(runlog_path(tape)) if e["event"] == "live"]
    assert live[0]["fingerprint"] == registry["search"].fingerprint


def test_override_replaces_a_recorded_result(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    with Tape(tape, "replay", registry) as t:
        t.override(1, error=RuntimeError("upstream 500"))
        t.override(2, {"summary": "fallback"})
        with pytest.raises(RuntimeError, match="upstream 500"):
            t.call("search", {"query": "tapes"})
        assert t.call("summarize", {"text": "a b c d", "max_words": 120}) == {"summary": "fallback"}
        assert t.stats()["overrides"] == 2


def test_recorded_error_is_raised_again(tmp_path: Path, registry: ToolRegistry, calls: Calls) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t, pytest.raises(ValueError):
        t.call("flaky", {"n": 1})
    rec = [r for r in lines(tape) if r.get("type") == "call"][0]
    assert rec["error"] == {"type": "ValueError", "module": "builtins", "message": "upstream said no to 1"}
    with Tape(tape, "replay", registry) as t, pytest.raises(ValueError, match="upstream said no to 1"):
        t.call("flaky", {"n": 1})
    # A type that is not importable becomes a TapeError naming it.
    text = tape.read_text().replace('"module":"builtins"', '"module":"not.loaded"').replace("ValueError", "GoneError")
    tape.write_text(text)
    with (
        Tape(tape, "replay", registry) as t,
        pytest.raises(TapeError, match="raised GoneError when recorded: upstream said no"),
    ):
        t.call("flaky", {"n": 1})


@pytest.mark.parametrize("policy", ["warn", "miss", "error"])
def test_expiry_policies(tmp_path: Path, registry: ToolRegistry, calls: Calls, policy: str) -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry, clock=clock) as t:
        t.call("quote", {"symbol": "ACME"})
    rec = [r for r in lines(tape) if r.get("type") == "call"][0]
    assert rec["expires_at"] == "2026-01-01T00:01:00Z"  # ttl 60 s
    clock.now += timedelta(minutes=5)
    cfg = replace(Config.for_dir(tmp_path), tools={"quote": ToolPolicy(stale_policy=policy)})
    calls.n.clear()
    if policy == "warn":
        with Tape(tape, "replay", registry, config=cfg, clock=clock) as t:
            assert t.call("quote", {"symbol": "ACME"})["price"] == 1.5
            assert t.stats()["stale"] == 1
        assert "stale" in events(tape)
    elif policy == "miss":
        with Tape(tape, "replay", registry, config=cfg, clock=clock) as t, pytest.raises(TapeMiss, match="expired"):
            t.call("quote", {"symbol": "ACME"})
        with Tape(tape, "fill", registry, config=cfg, clock=clock) as t:
            t.call("quote", {"symbol": "ACME"})
        assert calls.n == {"quote": 1}
        fresh = [r for r in lines(candidate_path(tape)) if r.get("type") == "call"][0]
        assert fresh["expires_at"] == "2026-01-01T00:06:00Z"
    else:
        with Tape(tape, "replay", registry, config=cfg, clock=clock) as t, pytest.raises(TapeStale):
            t.call("quote", {"symbol": "ACME"})


def test_unused_steps_reported_at_close(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    with Tape(tape, "replay", registry) as t:
        t.call("search", {"query": "tapes"})
    assert t.stats()["unused"] == 2
    evs = read_run_log(runlog_path(tape))
    assert [e["seq"] for e in evs if e["event"] == "unused"] == [2, 3]
    assert evs[-1]["event"] == "end" and evs[-1]["stats"]["unused"] == 2


def test_unserialisable_result_is_a_clear_error_and_tape_stays_valid(tmp_path: Path) -> None:
    reg = ToolRegistry()

    @reg.tool(version="1")
    def weird() -> dict[str, Any]:
        return {"ok": [1, {"when": object()}]}

    @reg.tool(version="1")
    def fine() -> int:
        return 1

    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", reg) as t:
        with pytest.raises(TapeError, match=r"weird \(step 1\).*result\.ok\[1\]\.when is a object"):
            t.call("weird", {})
        t.call("fine", {})
    recs = [r for r in lines(tape) if r.get("type") == "call"]  # every line still parses
    # The tool ran, so its call is not lost: it is written with an error naming what could not be recorded.
    assert [r["tool"] for r in recs] == ["weird", "fine"]
    assert recs[0]["error"]["type"] == "TapeError" and "result.ok[1].when is a object" in recs[0]["error"]["message"]
    with Tape(tape, "replay", reg) as t:
        with pytest.raises(TapeError, match=r"raised TapeError when recorded: .*result\.ok\[1\]\.when is a object"):
            t.call("weird", {})
        assert t.call("fine", {}) == 1


def test_record_over_a_golden_writes_a_candidate(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, registry, BASIC)
    before = tape.read_bytes()
    record(tape, registry, BASIC[:1])
    assert tape.read_bytes() == before
    assert len([r for r in lines(candidate_path(tape)) if r.get("type") == "call"]) == 1


def test_secrets_never_reach_the_tape_or_run_log(tmp_path: Path) -> None:
    reg = ToolRegistry()

    @reg.tool(version="1")
    def login(user: str, password: str, headers: dict[str, str]) -> dict[str, Any]:
        return {"token": "tok-123456789", "note": "use Bearer abcdefgh1jklmnop"}

    tape = tmp_path / "s.jsonl"
    args = {"user": "ann", "password": "hunter2", "headers": {"Authorization": "Basic dXNlcjpwYXNz"}}
    with Tape(tape, "record", reg) as t:
        assert t.call("login", args)["token"] == "tok-123456789"  # the caller still gets the real result
    with Tape(tape, "replay", reg) as t:
        t.call("login", {**args, "password": "rotated-secret"})  # a rotated secret is not drift
    for f in (tape, runlog_path(tape)):
        text = f.read_text()
        for secret in ("hunter2", "dXNlcjpwYXNz", "tok-123456789", "abcdefgh1jklmnop", "rotated-secret"):
            assert secret not in text, (f, secret)
    assert "[REDACTED]" in tape.read_text()


def test_replay_without_a_tape_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TapeError, match="no tape to replay"):
        Tape(tmp_path / "none.jsonl", "replay")


def test_labels_go_to_the_header(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry, labels={"model": "m-1", "api_key": "sk-abcdefghijklmnopqrstu"}) as t:
        t.call("search", {"query": "x"})
    head = lines(tape)[0]
    assert head["labels"] == {"model": "m-1", "api_key": "[REDACTED]"}


def _counting_tape(tmp_path: Path, names: list[str]) -> tuple[Path, ToolRegistry]:
    """A tape of one tool called with ``names`` in turn; call i returned i."""
    reg = ToolRegistry()
    counter = iter(range(10**6))

    @reg.tool(version="1")
    def tick(name: str) -> int:
        return next(counter)

    tape = tmp_path / "order.jsonl"
    tape.unlink(missing_ok=True)
    with Tape(tape, "record", reg, run_log=False) as t:
        assert [t.call("tick", {"name": n}) for n in names] == list(range(len(names)))
    return tape, reg


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), names=st.lists(st.sampled_from("abc"), min_size=1, max_size=10))
def test_each_call_replays_the_earliest_unreplayed_recording_of_its_key(
    tmp_path: Path, data: st.DataObject, names: list[str]
) -> None:
    tape, reg = _counting_tape(tmp_path, names)
    order = data.draw(st.permutations(range(len(names))))[: data.draw(st.integers(0, len(names)))]
    replayed = [names[i] for i in order]
    left = list(enumerate(names))
    expected = []  # the model: the first recorded call with that name not replayed yet
    for n in replayed:
        j = next(k for k, (_, m) in enumerate(left) if m == n)
        expected.append(left.pop(j)[0])
    with Tape(tape, "replay", reg, run_log=False) as t:
        assert [t.call("tick", {"name": n}) for n in replayed] == expected
    assert t.stats()["unused"] == len(names) - len(replayed)


def test_a_replay_in_recorded_order_needs_no_key_table(tmp_path: Path) -> None:
    names = ["a", "b", "a", "c", "a"]
    tape, reg = _counting_tape(tmp_path, names)
    with Tape(tape, "replay", reg, run_log=False) as t:
        assert [t.call("tick", {"name": n}) for n in names] == [0, 1, 2, 3, 4]
        assert t._index is not None and t._index._key_first is None  # each call was first in line
    with Tape(tape, "replay", reg, run_log=False) as t:
        assert t.call("tick", {"name": "c"}) == 3  # out of order: looked up by key
        assert t._index is not None and t._index._key_first == {
            t._index.keys[0]: 0,
            t._index.keys[1]: 1,
            t._index.keys[3]: 3,
        }
        assert list(t._index.key_next) == [2, -1, 4, -1, -1]
