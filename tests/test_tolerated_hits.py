"""Tolerated hits: a replayed call whose key misses is served the recording at its place when tapes.toml's
``[compare.rules]`` and ``[diff] ignore`` excuse every difference of its arguments; anything else stays drift."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Config, Tape, TapeDrift, TapeMiss, ToolRegistry
from tapetui.core.runlog import RunSummary, event_problem, read_run_log
from tapetui.core.store import candidate_path, runlog_path


class Lookup:
    """A tool whose arguments select data (``query``, ``date``) or only tune it (``limit``, ``trace``)."""

    def __init__(self) -> None:
        self.runs = 0
        self.registry = ToolRegistry()

        @self.registry.tool(version="1")
        def lookup(query: str, limit: float = 10, trace: str = "", date: str = "") -> dict[str, Any]:
            self.runs += 1
            return {"rows": [query, date], "limit": limit}

        @self.registry.tool(version="1")
        def fail(query: str, limit: float = 10) -> None:
            self.runs += 1
            raise LookupError(f"no {query}")


@pytest.fixture
def tool() -> Lookup:
    return Lookup()


def project(tmp_path: Path, toml: str) -> Path:
    """A tapes.toml (tapes in ``tapes/``) with ``toml`` after its ``[tapes]`` table."""
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n\n' + toml)
    (tmp_path / "tapes").mkdir()
    return tmp_path / "tapes"


RULES = """
[diff]
ignore = ["trace"]

[compare.rules]
"args.limit" = { tolerance = 0.5 }
"""

RECORDED = {"query": "weather", "limit": 10, "trace": "t-1", "date": "2024-05-01"}


def record(tape: Path, tool: Lookup, *calls: dict[str, Any], name: str = "lookup", **kw: Any) -> None:
    with Tape(tape, "record", tool.registry, **kw) as t:
        for args in calls or (RECORDED,):
            with contextlib.suppress(LookupError):
                t.call(name, args)


def events(tape: Path, kind: str) -> list[dict[str, Any]]:
    return [e for e in read_run_log(runlog_path(tape)) if e["event"] == kind]


def test_a_difference_within_tolerance_is_a_tolerated_hit(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    record(tape, tool)
    golden = tape.read_bytes()
    with Tape(tape, "replay", tool.registry) as t:
        got = t.call("lookup", {**RECORDED, "limit": 10.4})
        s = t.stats()
    assert got == {"rows": ["weather", "2024-05-01"], "limit": 10}  # the recording, exactly
    assert (s["tape_hits"], s["tolerated_hits"], s["drift_events"], s["tape_misses"], s["unused"]) == (1, 1, 0, 0, 0)
    assert tool.runs == 1 and tape.read_bytes() == golden
    (hit,) = events(tape, "hit")
    recorded_key = orjson.loads(golden.splitlines()[-1])["key"]
    assert hit["tolerated"] == [{"path": "args.limit", "rule": "tolerance", "text": "within tolerance ±0.5"}]
    assert hit["recorded_key"] == recorded_key and hit["key"] != recorded_key and hit["step"] == 1
    assert event_problem(hit) is None
    summary = RunSummary.of(read_run_log(runlog_path(tape)))
    assert (summary.hits, summary.tolerated, summary.drift, summary.status) == (1, 1, 0, {1: "hit"})


def test_a_path_in_diff_ignore_is_a_tolerated_hit(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, '[diff]\nignore = ["trace"]\n') / "s.jsonl"
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t:
        t.call("lookup", {**RECORDED, "trace": "t-2"})
        assert t.stats()["tolerated_hits"] == 1
    (hit,) = events(tape, "hit")
    assert hit["tolerated"] == [{"path": "args.trace", "rule": "ignore", "text": "ignored ([diff] ignore)"}]


def test_several_excused_paths_are_listed(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t:
        t.call("lookup", {**RECORDED, "trace": "t-2", "limit": 9.8})
    (hit,) = events(tape, "hit")
    assert [(e["path"], e["rule"]) for e in hit["tolerated"]] == [("args.limit", "tolerance"), ("args.trace", "ignore")]


def test_a_difference_outside_the_rules_is_still_drift(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t:
        with pytest.raises(TapeDrift) as e:
            t.call("lookup", {**RECORDED, "limit": 12})  # beyond the tolerance
        assert [c[0] for c in e.value.changes] == ["limit"]
        s = t.stats()
    assert (s["tolerated_hits"], s["drift_events"], s["tape_hits"]) == (0, 1, 0)


def test_drift_on_one_path_is_not_excused_by_rules_on_others(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t, pytest.raises(TapeDrift) as e:
        t.call("lookup", {**RECORDED, "query": "stocks", "limit": 10.2})
    assert sorted(c[0] for c in e.value.changes) == ["limit", "query"]  # as today: every changed path
    (drift,) = events(tape, "drift")
    assert drift["excused"] == [{"path": "args.limit", "rule": "tolerance", "text": "within tolerance ±0.5"}]
    assert event_problem(drift) is None


def test_volatile_defaults_never_make_a_tolerated_hit(tmp_path: Path, tool: Lookup) -> None:
    # `**.date` hides a date from diffs, but a `date` argument selects the data a tool returns
    tape = project(tmp_path, "[diff]\nvolatile_defaults = true\n") / "s.jsonl"
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t:
        with pytest.raises(TapeDrift):
            t.call("lookup", {**RECORDED, "date": "2024-05-02"})
        assert t.stats()["tolerated_hits"] == 0


def test_without_rules_a_changed_argument_is_drift_as_before(tmp_path: Path, tool: Lookup) -> None:
    tape = tmp_path / "s.jsonl"  # no tapes.toml at all
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t:
        with pytest.raises(TapeDrift):
            t.call("lookup", {**RECORDED, "limit": 10.1})
        assert t.stats()["tolerated_hits"] == 0


def test_a_tolerated_hit_raises_the_recorded_error(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    record(tape, tool, {"query": "x", "limit": 1}, name="fail")
    with Tape(tape, "replay", tool.registry) as t:
        with pytest.raises(LookupError, match="no x"):
            t.call("fail", {"query": "x", "limit": 1.3})
        assert t.stats()["tolerated_hits"] == 1


def test_a_tolerated_recording_is_consumed_once(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t:
        t.call("lookup", {**RECORDED, "limit": 10.3})
        with pytest.raises(TapeMiss):  # the recording is used: nothing left to tolerate
            t.call("lookup", {**RECORDED, "limit": 10.3})


def test_a_rule_scoped_to_another_tool_excuses_nothing(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, '[compare.rules]\n"other:args.limit" = { tolerance = 5 }\n') / "s.jsonl"
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t, pytest.raises(TapeDrift):
        t.call("lookup", {**RECORDED, "limit": 11})


def test_session_rules_apply_to_their_sessions_only(tmp_path: Path, tool: Lookup) -> None:
    tapes = project(tmp_path, '[compare.sessions."support/*".rules]\n"args.query" = { regex = "^weather" }\n')
    (tapes / "support").mkdir()
    for name in ("support/a.jsonl", "b.jsonl"):
        record(tapes / name, tool)
    with Tape(tapes / "support/a.jsonl", "replay", tool.registry) as t:
        t.call("lookup", {**RECORDED, "query": "weather in Oslo"})
        assert t.stats()["tolerated_hits"] == 1
    with Tape(tapes / "b.jsonl", "replay", tool.registry) as t, pytest.raises(TapeDrift):
        t.call("lookup", {**RECORDED, "query": "weather in Oslo"})


def test_calls_with_a_place_are_tolerated_at_their_place(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    with Tape(tape, "record", tool.registry) as t:
        t.call("lookup", {**RECORDED, "query": "a"}, order=(1, 0))
        t.call("lookup", {**RECORDED, "query": "b"}, order=(1, 1))
    with Tape(tape, "replay", tool.registry) as t:
        assert t.call("lookup", {**RECORDED, "query": "b", "limit": 10.1}, order=(1, 1))["rows"][0] == "b"
        assert t.call("lookup", {**RECORDED, "query": "a", "limit": 9.9}, order=(1, 0))["rows"][0] == "a"
        s = t.stats()
    assert (s["tolerated_hits"], s["tape_hits"], s["unused"]) == (2, 2, 0)


def test_fill_carries_the_recorded_line_of_a_tolerated_hit(tmp_path: Path, tool: Lookup) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    record(tape, tool)
    golden_line = orjson.loads(tape.read_bytes().splitlines()[-1])
    with Tape(tape, "fill", tool.registry) as t:
        t.call("lookup", {**RECORDED, "limit": 10.2})  # tolerated: served from the golden
        t.call("lookup", {**RECORDED, "query": "new"})  # a miss: runs live, opens the candidate
        s = t.stats()
    assert (s["tolerated_hits"], s["tape_misses"], s["live_tool_calls"]) == (1, 1, 1)
    assert tool.runs == 2  # the recording and the miss
    calls = [orjson.loads(x) for x in candidate_path(tape).read_bytes().splitlines()]
    calls = [c for c in calls if c["type"] == "call"]
    assert calls[0] == {**golden_line, "seq": 1}  # the recorded line as it is, not the call's arguments
    assert calls[1]["args"]["query"] == "new" and calls[1]["seq"] == 2


def test_rules_are_looked_up_once_per_tape_and_never_on_hits(
    tmp_path: Path, tool: Lookup, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = project(tmp_path, RULES) / "s.jsonl"
    record(tape, tool, RECORDED, {**RECORDED, "query": "b"}, {**RECORDED, "query": "c"})
    looked: list[str] = []
    real = Config.compare_for

    def counting(self: Config, session: str) -> Any:
        looked.append(session)
        return real(self, session)

    monkeypatch.setattr(Config, "compare_for", counting)
    with Tape(tape, "replay", tool.registry) as t:
        t.call("lookup", RECORDED)
        t.call("lookup", {**RECORDED, "query": "b"})
        t.call("lookup", {**RECORDED, "query": "c"})
    assert looked == []
    with Tape(tape, "replay", tool.registry) as t:
        t.call("lookup", {**RECORDED, "limit": 10.1})
        t.call("lookup", {**RECORDED, "query": "b", "limit": 10.2})
        t.call("lookup", {**RECORDED, "query": "c", "limit": 10.3})
        assert t.stats()["tolerated_hits"] == 3
    assert looked == ["s"]


def test_stats_always_list_tolerated_hits(tmp_path: Path, tool: Lookup) -> None:
    tape = tmp_path / "s.jsonl"
    record(tape, tool)
    with Tape(tape, "replay", tool.registry) as t:
        t.call("lookup", RECORDED)
        assert t.stats()["tolerated_hits"] == 0
    with Tape(tmp_path / "r.jsonl", "record", tool.registry) as t:
        assert t.stats()["tolerated_hits"] == 0


@pytest.mark.parametrize(
    "value",
    [5, "args.limit", [1], [{"path": "args.x", "rule": "tolerance"}], [{"path": 1, "rule": "ignore", "text": "x"}]],
)
@pytest.mark.parametrize(("kind", "name"), [("hit", "tolerated"), ("drift", "excused")])
def test_a_malformed_excuse_list_is_an_invalid_event(kind: str, name: str, value: Any) -> None:
    problem = event_problem({"event": kind, "seq": 1, "tool": "t", name: value})
    assert problem is not None and problem.startswith(f"{kind} event: '{name}' must be a list of")
    good = [{"path": "args.x", "rule": "ignore", "text": "ignored"}]
    assert event_problem({"event": kind, "seq": 1, "tool": "t", name: good}) is None
