"""Model turns through the core API: ``Tape.model`` / ``amodel`` / ``model_turn`` (tapetui.core.modelserving),
the neutral schema (tapetui.core.turns), and what check and diff say of turns (tapetui.review.turns)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

import tapetui
from tapetui import ModelDrift, Tape, TapeError, TapeMiss, ToolDriftError
from tapetui.core.config import load_config
from tapetui.core.redact import Redactor
from tapetui.core.tapefile import read_index
from tapetui.core.turns import redact_events, stable_ids, stream_events, turn_key
from tapetui.review.findings import check

MODEL = "openai:gpt-4o"


def _check(root: Path) -> list[Any]:
    config = load_config(root / "tapes.toml")
    return check(config.tapes_dir, config)


SEARCH = {"name": "search", "description": "search the docs", "parameters": {"type": "object"}}
DELETE = {"name": "delete_file", "description": "delete a file", "parameters": {"type": "object"}}


def _request(instructions: str = "Be brief.", messages: list[Any] | None = None, **kw: Any) -> dict[str, Any]:
    msgs = messages if messages is not None else [{"role": "user", "parts": [{"type": "text", "content": "find x"}]}]
    return {
        "instructions": instructions,
        "messages": msgs,
        "tools": [SEARCH, DELETE],
        "settings": {"temperature": 0},
        **kw,
    }


class Calls:
    """Counts the live model and tool calls; ``boom`` makes them raise (a replay must not call them)."""

    def __init__(self, boom: bool = False, tool: str = "search") -> None:
        self.model = self.tools = 0
        self.boom = boom
        self.tool = tool

    def first(self) -> dict[str, Any]:
        self.model += 1
        if self.boom:
            raise RuntimeError("the model API was called during replay")
        call = {"type": "tool_call", "id": "call_9f", "name": self.tool, "arguments": {"q": "x"}}
        return {"parts": [call], "finish_reason": "tool_calls", "usage": {"input": 1000, "output": 40}}

    def second(self) -> dict[str, Any]:
        self.model += 1
        if self.boom:
            raise RuntimeError("the model API was called during replay")
        return {
            "parts": [{"type": "text", "content": "x is in chapter 2"}],
            "finish_reason": "stop",
            "usage": {"input": 1100, "output": 12},
        }

    def run_tool(self) -> str:
        self.tools += 1
        if self.boom:
            raise RuntimeError("a tool ran during replay")
        return "chapter 2"


def agent(tape: Tape, calls: Calls, instructions: str = "Be brief.") -> str:
    """A two-turn agent: the model asks for a tool, the harness runs it, the model answers."""
    msgs: list[Any] = [{"role": "user", "parts": [{"type": "text", "content": "find x"}]}]
    r = tape.model(_request(instructions, msgs), live=calls.first, model=MODEL)
    call = r["parts"][0]
    result = tape.call(call["name"], call["arguments"], live=calls.run_tool, call_id=call["id"])
    msgs += [
        {"role": "assistant", "parts": [call]},
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": call["id"], "name": call["name"], "response": result}],
        },
    ]
    r = tape.model(_request(instructions, msgs), live=calls.second, model=MODEL)
    return str(r["parts"][0]["content"])


@pytest.fixture
def tapes(tmp_path: Path) -> Path:
    (tmp_path / "tapes").mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    return tmp_path


def _record(path: Path, **kw: Any) -> str:
    with Tape(path, "record") as t:
        return agent(t, Calls(**kw))


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def test_record_then_replay_serves_every_turn_with_zero_live_calls(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    assert _record(path) == "x is in chapter 2"
    kinds = [(x["type"], x.get("seq")) for x in _lines(path)]
    assert [k for k in kinds if k[0] in ("model", "call")] == [("model", 1), ("call", 2), ("model", 3)]
    turn = next(x for x in _lines(path) if x["type"] == "model")
    assert turn["key"].startswith("model:") and len(turn["key"]) == len("model:") + 12
    assert turn["request"]["tools"] == ["search", "delete_file"]  # names; definitions are tool lines
    assert set(turn["offered"]) == {"search", "delete_file"}
    assert {x["name"] for x in _lines(path) if x["type"] == "tool"} == {"search", "delete_file"}
    assert turn["usage"] == {"input": 1000, "output": 40} and turn["source"] == "core" and turn["stream"] is False

    calls = Calls(boom=True)
    with Tape(path, "replay") as t:
        assert agent(t, calls) == "x is in chapter 2"
        stats = t.stats()
    assert calls.model == calls.tools == 0
    assert stats["model_hits"] == 2 and stats["live_model_calls"] == 0 and stats["tokens_live"] == 0
    assert stats["tokens_saved"] == 1000 + 40 + 1100 + 12
    assert stats["steps"] == 3 and stats["tape_hits"] == 1 and stats["statuses"] == {"hit": 3}
    assert _check(tapes)[0].ok


def test_two_recordings_of_the_same_run_give_the_same_keys(tapes: Path) -> None:
    a, b = tapes / "tapes" / "a.jsonl", tapes / "tapes" / "b.jsonl"
    _record(a)
    _record(b)
    keys = lambda p: [x["key"] for x in _lines(p) if x["type"] in ("model", "call")]  # noqa: E731
    assert keys(a) == keys(b)
    assert keys(a)[0] == turn_key(MODEL, {**_request(), "tools": ["search", "delete_file"]})


def test_an_edited_system_prompt_is_model_drift_naming_the_instructions(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    with Tape(path, "replay") as t, pytest.raises(ModelDrift) as e:
        agent(t, Calls(boom=True), instructions="Be brief. Always answer in French.")
    assert isinstance(e.value, tapetui.TapeDrift)
    assert e.value.turn == 1 and e.value.seq == 1 and e.value.model == MODEL
    assert 'instructions "Be brief." → "Be brief. Always answer in French."' in str(e.value)
    report = _check(tapes)[0]
    assert not report.ok
    texts = [f.text for f in report.findings]
    assert any("instructions" in t and "French" in t for t in texts), texts


def test_another_model_and_another_setting_are_drift_by_path(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    with Tape(path, "replay") as t, pytest.raises(ModelDrift) as e:
        t.model({**_request(), "settings": {"temperature": 0.7}}, live=Calls(boom=True).first, model="openai:gpt-4.1")
    text = str(e.value)
    assert "model openai:gpt-4o → openai:gpt-4.1" in text and "settings.temperature 0 → 0.7" in text


def test_a_changed_description_of_a_tool_never_called_is_tool_drift_first(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    changed = {**_request(), "tools": [SEARCH, {**DELETE, "description": "delete ANY file"}]}
    with Tape(path, "replay") as t, pytest.raises(ToolDriftError) as e:
        t.model(changed, live=Calls(boom=True).first, model=MODEL)
    assert e.value.tool == "delete_file"
    assert any("description" in line for line in e.value.explanation)
    # check_fingerprint = false for that tool: the turn is served, the change reported
    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[tools.delete_file]\ncheck_fingerprint = false\n')
    with Tape(path, "replay") as t:
        assert t.model(changed, live=Calls(boom=True).first, model=MODEL)["parts"][0]["name"] == "search"
        assert t.stats()["fingerprint_checks_off"] == ["delete_file"]


def test_a_request_past_the_recorded_turns_is_a_miss_naming_the_nearest(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    with Tape(path, "replay") as t:
        agent(t, Calls(boom=True))
        with pytest.raises(TapeMiss) as e:
            t.model(_request("Another question"), live=Calls(boom=True).first, model=MODEL)
    assert e.value.tool == "model" and e.value.nearest_seq == 3
    assert "request.instructions" in str(e.value)


def test_a_tape_without_turns_says_record_or_fill(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    with Tape(path, "record") as t:
        t.call("search", {"q": "x"}, live=lambda: "r")
    with Tape(path, "replay") as t, pytest.raises(TapeMiss, match="recorded without model turns: record or fill"):
        t.model(_request(), live=Calls(boom=True).first, model=MODEL)


def test_a_turn_never_requested_is_unused(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    with Tape(path, "replay") as t:
        t.model(_request(), live=Calls(boom=True).first, model=MODEL)
        t.call("search", {"q": "x"})
    assert t.stats()["unused"] == 1 and t.stats()["statuses"]["unused"] == 1
    texts = [f.text for f in _check(tapes)[0].findings]
    assert any("turn 2" in x and "unused" in x for x in texts), texts


def test_fill_runs_only_the_missing_turn_into_a_candidate(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    golden = path.read_bytes()
    calls = Calls()
    with Tape(path, "fill") as t:
        agent(t, calls)
        t.model(_request("And then?"), live=calls.second, model=MODEL)
    assert calls.model == 1 and calls.tools == 0
    assert path.read_bytes() == golden
    cand = _lines(tapes / "tapes" / "a.candidate.jsonl")
    assert [x["seq"] for x in cand if x["type"] == "model"] == [1, 3, 4]
    assert t.stats()["live_model_calls"] == 1 and t.stats()["model_hits"] == 2


def test_a_fill_after_an_unreviewed_fill_pays_no_model_again(tapes: Path) -> None:
    """The next fill replays what an earlier, unreviewed (or killed) fill ran live: its tool calls, and its model
    turns too (a turn was paid again at every fill, and its candidate mixed the earlier tool results with new
    answers)."""
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    golden = path.read_bytes()
    first = Calls()
    with Tape(path, "fill") as t:
        agent(t, first)
        t.model(_request("And then?"), live=first.second, model=MODEL)
    assert first.model == 1
    ran = [x for x in _lines(tapes / "tapes" / "a.candidate.jsonl") if x["type"] == "model"][-1]
    again = Calls(boom=True)  # neither the model nor a tool may run: all of it is on the golden or the candidate
    with Tape(path, "fill") as t:
        agent(t, again)
        assert t.model(_request("And then?"), live=again.second, model=MODEL)["parts"] == ran["response"]["parts"]
        stats = t.stats()
    assert stats["live_model_calls"] == 0 and stats["model_hits"] == 3 and stats["model_misses"] == 0
    assert path.read_bytes() == golden
    cand = [x for x in _lines(tapes / "tapes" / "a.candidate.jsonl") if x["type"] == "model"]
    assert [x["seq"] for x in cand] == [1, 3, 4] and cand[-1]["response"] == ran["response"]
    assert len(list((tapes / "tapes" / "a.samples").iterdir())) == 1  # the earlier candidate: kept, never lost
    with Tape(tapes / "tapes" / "a.candidate.jsonl", "replay") as t:  # the new candidate replays whole
        agent(t, Calls(boom=True))
        t.model(_request("And then?"), live=again.second, model=MODEL)


def test_an_earlier_fills_failed_turn_or_one_offered_other_contracts_is_asked_again(tapes: Path) -> None:
    """An earlier fill's turn serves a later fill only as the model would answer now: a transient error (a rate
    limit) is asked again, and so is a turn whose offered tools had other contracts (it was served with the answer
    to a description the model never saw)."""
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    send = {"name": "send_email", "description": "send an e-mail to a colleague", "parameters": {"type": "object"}}

    def fill(live: Any, tool: dict[str, Any] = send) -> None:
        with Tape(path, "fill") as t:
            agent(t, Calls(boom=True))  # the golden's two turns and its call: served
            t.model(_request("And then?", tools=[SEARCH, DELETE, tool]), live=live, model=MODEL)

    def limited() -> dict[str, Any]:
        raise RuntimeError("429 rate limited")

    with pytest.raises(RuntimeError, match="429"):
        fill(limited)
    calls = Calls()
    fill(calls.second)
    assert calls.model == 1  # asked again, not the 429 served
    fill(Calls(boom=True).second)  # the same request under the same contracts: served
    wider = {**send, "description": "send an e-mail to any address, outside ones too"}
    fill(calls.second, wider)
    assert calls.model == 2  # the earlier fill's answer was to another contract of send_email
    fill(Calls(boom=True).second, wider)


def test_on_drift_live_rebaselines_from_the_first_drifted_turn(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    golden = path.read_bytes()
    calls = Calls()
    with Tape(path, "fill", on_drift="live") as t:
        agent(t, calls, instructions="Answer in French.")
    assert calls.model == 2 and calls.tools == 1  # everything from the first drifted turn on ran live
    assert path.read_bytes() == golden  # never over the golden
    cand = _lines(tapes / "tapes" / "a.candidate.jsonl")
    assert [x["request"]["instructions"] for x in cand if x["type"] == "model"] == ["Answer in French."] * 2
    with pytest.raises(tapetui.InvalidValue):
        Tape(path, "replay", on_drift="sometimes")


def test_cut_point_tool_live_reports_its_changed_result_by_path(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    with Tape(path, "record") as t:
        t.model(_request(), live=Calls().first, model=MODEL)
        t.call("get_price", {"symbol": "ACME"}, live=lambda: {"price": 109.35})
    runs = []
    with Tape(path, "replay", live=["get_price"]) as t:
        t.model(_request(), live=Calls(boom=True).first, model=MODEL)
        runs.append(t.call("get_price", {"symbol": "ACME"}, live=lambda: {"price": 111.38}))
    assert runs == [{"price": 111.38}]
    assert t.stats()["live_tool_calls"] == 1 and t.stats()["unused"] == 0
    report = _check(tapes)[0]
    texts = [f.text for f in report.findings]
    assert "behaviour drift: get_price result.price 109.35 → 111.38 (step 2)" in texts, texts
    assert report.ok  # a warning unless live_results = "must_match"
    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare]\nlive_results = "must_match"\n')
    assert not _check(tapes)[0].ok


def test_live_model_in_replay_compares_its_response(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    calls = Calls(tool="delete_file")
    with Tape(path, "replay", live=["model"]) as t:
        r = t.model(_request(), live=calls.first, model=MODEL)
    assert r["parts"][0]["name"] == "delete_file" and calls.model == 1
    texts = [f.text for f in _check(tapes)[0].findings]
    assert any(x.startswith("behaviour drift: model response.parts[0].name") and "delete_file" in x for x in texts), (
        texts
    )


def test_model_requested_tools_and_tokens_in_a_candidate(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    (tapes / "tapes.toml").write_text(
        '[tapes]\ndir = "tapes"\n[compare]\ntokens = "+20%"\n'
        '[models."openai:gpt-4o"]\nprice = { input = 2.5, output = 10.0 }\n'
    )

    class Hungry(Calls):
        def second(self) -> dict[str, Any]:
            out = super().second()
            out["usage"] = {"input": 5000, "output": 100}
            return out

    with Tape(path, "record") as t:  # a golden exists: this records a candidate
        agent(t, Hungry(tool="delete_file"))
    report = _check(tapes)[0]
    texts = [f.text for f in report.findings]
    assert "[MODEL TOOLS] model-requested sequence changed (edit distance 1): ['search'] → ['delete_file']" in texts
    assert any(x.startswith("[COST] 2,152 ($0.0058) → 6,140") and "(+185%" in x for x in texts), texts
    assert report.comparison is not None and not report.comparison.passed
    assert report.comparison.verdict("requested").judged  # never n/a on a tape with turns


def test_tools_named_model_are_refused(tapes: Path) -> None:
    with Tape(tapes / "tapes" / "a.jsonl", "record") as t:
        with pytest.raises(TapeError, match="may not be called 'model'"):
            t.call("model", {}, live=lambda: 1)
        with pytest.raises(tapetui.InvalidValue, match="may not be called 'model'"):
            t.model({"messages": [], "tools": [{"name": "model"}]}, live=lambda: {}, model=MODEL)
    with pytest.raises(TapeError, match="may not be called 'model'"):
        tapetui.ToolRegistry().contract("model")


@pytest.mark.parametrize(
    ("request_", "problem"),
    [
        ("hello", "must be an object"),
        ({"messages": "hi"}, "request.messages must be a list"),
        ({"messages": [{"role": "user"}]}, "request.messages[0] must be an object with 'role'"),
        ({"messages": [{"role": "user", "parts": ["hi"]}]}, "request.messages[0].parts[0]"),
        ({"messages": [], "tools": [SEARCH, SEARCH]}, "offered twice"),
    ],
)
def test_a_bad_request_is_refused_naming_the_field(tapes: Path, request_: Any, problem: str) -> None:
    path = tapes / "tapes" / "a.jsonl"
    pattern = problem.replace("[", r"\[").replace("]", r"\]")
    with Tape(path, "record") as t, pytest.raises(tapetui.InvalidValue, match=pattern):
        t.model(request_, live=lambda: {}, model=MODEL)
    assert [x["type"] for x in _lines(path)] == ["session"]


def test_a_bad_response_is_refused_and_nothing_is_written(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    call = {"type": "tool_call", "name": "search", "arguments": {}}
    with Tape(path, "record") as t:
        with pytest.raises(tapetui.InvalidValue, match="response.parts"):
            t.model(_request(), live=lambda: {"parts": "text"}, model=MODEL)
        for bad in ({"parts": [{**call, "id": {"n": 1}}]}, {"tool_calls": [{**call, "id": ["1"]}]}):
            with pytest.raises(tapetui.InvalidValue, match="a tool call's 'id' must be text"):
                t.model(_request(), live=lambda bad=bad: bad, model=MODEL)  # never a TypeError (unhashable)
        t.model(_request(), live=Calls().first, model=MODEL)  # the tape goes on
    assert [x["type"] for x in _lines(path) if x["type"] == "model"] == ["model"]


def test_a_hand_edited_turn_is_a_key_finding(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    path.write_bytes(path.read_bytes().replace(b'"instructions":"Be brief."', b'"instructions":"Be evil."', 1))
    texts = [f.text for f in _check(tapes)[0].findings]
    assert any("model" in x and "key" in x for x in texts), texts


def test_secrets_in_prompts_settings_and_responses_never_reach_disk(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    req = _request(f"Use the key {secret}", settings={"temperature": 0, "api_key": "hunter2hunter2"})
    events = [{"type": "start"}, {"type": "delta", "index": 0, "content": "the key is sk-proj-A1b2C3d4E5"}]
    events += [{"type": "delta", "index": 0, "content": "f6G7h8I9j0A1b2C3d4E5f6G7h8I9j0 ok"}, {"type": "end"}]
    with Tape(path, "record") as t:
        turn = t.model_turn(req, model=MODEL, stream=True)
        assert not turn.served
        turn.finish({"parts": [{"type": "text", "content": f"the key is {secret} ok"}]}, events=events)
    data = path.read_bytes()
    assert secret.encode() not in data and b"hunter2" not in data and b"A1b2C3d4E5f6G7h8I9j0A1b2" not in data
    assert b'sk-proj-A1b2C3d4E5"' not in data  # the first chunk alone is no secret, the joined text is


def test_streams_replay_verbatim_and_plain_turns_serve_streams(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    events = [{"type": "start"}, {"type": "delta", "index": 0, "content": "x is "}]
    events += [{"type": "delta", "index": 0, "content": "in chapter 2"}, {"type": "end"}]
    with Tape(path, "record") as t:
        turn = t.model_turn(_request(), model=MODEL, stream=True)
        turn.finish({"parts": [{"type": "text", "content": "x is in chapter 2"}]}, events=events)
        t.model(_request("plain"), live=Calls().second, model=MODEL)
    with Tape(path, "replay") as t:
        streamed = t.model_turn(_request(), model=MODEL, stream=True)
        plain = t.model_turn(_request("plain"), model=MODEL, stream=True)
    assert streamed.served and streamed.events == events
    assert plain.events == [
        {"type": "start"},
        {"type": "part", "index": 0, "part": {"type": "text"}},
        {"type": "delta", "index": 0, "content": "x is in chapter 2"},
        {"type": "end"},
    ]
    assert stream_events({"parts": []}) == [{"type": "start"}, {"type": "end"}]


def test_a_recorded_model_error_is_raised_again(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"

    def limited() -> dict[str, Any]:
        raise TimeoutError("rate limited, retry in 20s")

    with Tape(path, "record") as t, pytest.raises(TimeoutError):
        t.model(_request(), live=limited, model=MODEL)
    with Tape(path, "replay") as t, pytest.raises(TimeoutError, match="rate limited"):
        t.model(_request(), live=Calls(boom=True).first, model=MODEL)


def test_amodel_awaits_an_async_live_and_replays(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"

    async def live() -> dict[str, Any]:
        await asyncio.sleep(0)
        return {"parts": [{"type": "text", "content": "hi"}], "usage": {"input_tokens": 3, "output_tokens": 1}}

    async def run(mode: str) -> dict[str, Any]:
        with Tape(path, mode) as t:
            return await t.amodel(_request(), live=live, model=MODEL)

    assert asyncio.run(run("record"))["parts"] == [{"type": "text", "content": "hi"}]
    assert asyncio.run(run("replay"))["usage"] == {"input": 3, "output": 1}
    with Tape(path, "replay") as t, pytest.raises(TapeError, match="amodel"):
        t.close()
        t.model(_request(), live=live, model=MODEL)


def test_by_place_serves_over_a_changed_tool_result_with_a_warning(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare]\nmodel_turns = "by_place"\n')

    class NewTool(Calls):
        def run_tool(self) -> str:
            self.tools += 1
            return "chapter 3"

    calls = NewTool()
    with Tape(path, "replay", live=["search"]) as t:
        assert agent(t, calls) == "x is in chapter 2"  # the recorded answer, over the new result
    assert calls.model == 0 and calls.tools == 1
    report = _check(tapes)[0]
    texts = [f.text for f in report.findings]
    assert any("served over a changed input" in x for x in texts), texts
    assert report.ok


def test_model_names_any_serves_another_model_and_says_so(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare]\nmodel_names = "any"\n')
    with Tape(path, "replay") as t:
        t.model(_request(), live=Calls(boom=True).first, model="openai:gpt-4.1")
    texts = [f.text for f in _check(tapes)[0].findings]
    assert any("model openai:gpt-4o → openai:gpt-4.1" in x for x in texts), texts


def test_a_turn_from_another_adapter_is_refused_naming_both(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    with Tape(path, "record") as t:
        t.model(_request(), live=Calls().first, model=MODEL, source="pydantic-ai")
    with Tape(path, "replay") as t, pytest.raises(TapeError, match="'pydantic-ai'.*'langchain'"):
        t.model(_request(), live=Calls(boom=True).first, model=MODEL, source="langchain")


def test_the_index_keeps_turns_and_helpers(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    idx = read_index(path, validate=True)
    assert [(t.seq, t.requested, t.tokens) for t in idx.turns] == [(1, ("search",), 1040), (3, (), 1112)]
    assert len(idx) == 1 and idx.key_mismatches == []
    msgs = [{"role": "assistant", "parts": [{"type": "tool_call", "id": "pyd_ai_1a", "name": "s", "arguments": {}}]}]
    msgs += [{"role": "tool", "parts": [{"type": "tool_call_response", "id": "pyd_ai_1a", "response": 1}]}]
    out = stable_ids(msgs, lambda i: i.startswith("pyd_ai_"))
    assert [p["id"] for m in out for p in m["parts"]] == ["call_1", "call_1"]
    assert redact_events([{"type": "delta", "index": 0, "content": "a"}], Redactor(), "x") == [
        {"type": "delta", "index": 0, "content": "a"}
    ]


def test_scrub_re_redacts_a_turn_and_recomputes_its_key(tapes: Path) -> None:
    from tapetui.review.scrub import scrub

    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    # a secret the rules of its day let through: tapes.toml now redacts the word "brief"
    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[redact]\npatterns = ["brief"]\n')
    config = load_config(tapes / "tapes.toml")
    before = [x["key"] for x in _lines(path) if x["type"] == "model"]
    report = scrub(config)
    assert not report.errors, report.errors
    after = [x for x in _lines(path) if x["type"] == "model"]
    assert b"brief" not in path.read_bytes()
    assert [x["key"] for x in after] != before
    assert read_index(path, validate=True).key_mismatches == []  # the new keys are the keys of the new requests


def test_accept_a_turn_step_then_the_rest_then_undo(tapes: Path) -> None:
    from tapetui.review.actions import accept
    from tapetui.review.revert import undo

    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    golden = path.read_bytes()
    with Tape(path, "record") as t:  # a candidate whose prompt changed
        agent(t, Calls(), instructions="Answer in French.")
    config = load_config(tapes / "tapes.toml")
    accept(config, path, "the prompt is French now", steps=[1])
    assert 'instructions "Be brief." → "Answer in French."' in config.changelog.read_text()
    turns = [x for x in _lines(path) if x["type"] == "model"]
    assert [x["request"]["instructions"] for x in turns] == ["Answer in French.", "Be brief."]
    assert (tapes / "tapes" / "a.candidate.jsonl").exists()  # turn 2 still differs
    accept(config, path, "all of it")
    assert [x["request"]["instructions"] for x in _lines(path) if x["type"] == "model"] == ["Answer in French."] * 2
    assert not (tapes / "tapes" / "a.candidate.jsonl").exists()
    undo(config, path)
    undo(config, path)
    assert path.read_bytes() == golden
    with Tape(path, "replay") as t:
        agent(t, Calls(boom=True))


def test_a_tools_only_replay_of_a_tape_with_turns_warns_once(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    with Tape(path, "replay") as t:  # a tools-only adapter: the model is not taped
        t.call("search", {"q": "x"})
    report = _check(tapes)[0]
    texts = [f.text for f in report.findings]
    assert report.ok, texts
    assert texts == [
        "model turns: this run requested none of the 2 recorded (it replayed the tool calls only; "
        "put the model through the tape too, e.g. TapeCapability(models=True))"
    ]


def test_rerecording_a_turn_says_to_rerun_the_agent(tapes: Path) -> None:
    from tapetui.review.rerecording import rerecord

    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    with pytest.raises(TapeError, match="step 1 is a model turn .*rerun the agent in record mode"):
        rerecord(load_config(tapes / "tapes.toml"), path, 1)


GOOD_TURN = {
    "type": "model",
    "seq": 1,
    "model": MODEL,
    "key": "model:000000000000",
    "source": "core",
    "request": {"messages": []},
    "response": {"parts": []},
    "usage": None,
    "stream": False,
}


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        ({"seq": "one"}, "model turn has no valid 'seq'"),
        ({"model": ""}, "model turn has no valid 'model'"),
        ({"key": "search:0"}, "model turn has no valid 'key'"),
        ({"request": ["hi"]}, "model turn 'request' must be an object"),
        ({"response": None}, "model turn 'response' must be an object with 'parts'"),
        ({"error": "boom"}, "model turn 'error' must be an object"),
        ({"usage": 12}, "model turn 'usage' must be an object"),
        ({"events": {"a": 1}}, "model turn 'events' must be a list"),
        ({"source": 3}, "model turn 'source' must be a string"),
        ({"events": [{"type": "start"}, 7]}, r"model turn 'events\[1\]' must be an object with a 'type'"),
        ({"response": {"parts": ["hello"]}}, r"model turn 'response.parts\[0\]' must be an object"),
        ({"usage": {"input": "100"}}, "model turn 'usage.input' must be a whole number"),
        ({"usage": {"output": -5}}, "model turn 'usage.output' must be a whole number"),
    ],
)
def test_a_malformed_turn_line_is_an_error_naming_the_file_and_line(
    tapes: Path, edit: dict[str, Any], problem: str
) -> None:
    path = tapes / "tapes" / "a.jsonl"
    line = orjson.dumps({**GOOD_TURN, **edit})
    path.write_bytes(b'{"type":"session","v":1}\n' + line + b"\n")
    before = path.read_bytes()
    with pytest.raises(TapeError, match=f"a.jsonl:2: {problem}"):
        Tape(path, "replay")
    report = _check(tapes)[0]
    assert report.error is not None and "a.jsonl:2:" in report.error and re.search(problem, report.error)
    assert path.read_bytes() == before


def test_a_turn_of_megabytes_records_and_replays(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    long = [{"role": "user", "parts": [{"type": "text", "content": f"{i} " + "x" * 20_000}]} for i in range(100)]
    with Tape(path, "record") as t:
        t.model(_request(messages=long), live=Calls().second, model=MODEL)
    assert path.stat().st_size > 2_000_000
    with Tape(path, "replay") as t:
        assert t.model(_request(messages=long), live=Calls(boom=True).second, model=MODEL)["finish_reason"] == "stop"


def test_an_expired_turn_is_run_again_by_fill(tapes: Path) -> None:
    from tapetui.review.actions import expire

    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\nstale_policy = "miss"\n')
    config = load_config(tapes / "tapes.toml")
    expire(config, path, steps=[3], why="the model was upgraded")
    assert "step 3 model turn (openai:gpt-4o): marked expired" in config.changelog.read_text()
    with Tape(path, "replay") as t, pytest.raises(TapeMiss, match="expired"):
        agent(t, Calls(boom=True))
    calls = Calls()
    with Tape(path, "fill") as t:
        agent(t, calls)
    assert calls.model == 1 and calls.tools == 0 and t.stats()["stale"] == 1


def test_turns_added_to_a_golden_without_them_and_lost_by_a_candidate(tapes: Path) -> None:
    from tapetui.review.comparison import compare

    plain, turned = tapes / "tapes" / "plain.jsonl", tapes / "tapes" / "turned.jsonl"
    with Tape(plain, "record") as t:
        t.call("search", {"q": "x"}, live=lambda: "chapter 2")
    _record(turned)
    config = load_config(tapes / "tapes.toml")
    added = compare(plain, turned, config)
    assert "[MODEL] 2 model turns added (the golden was recorded without model turns)" in added.lines()
    assert added.verdict("prompts").passed and added.edit_distance == 0  # the tool calls align, turns aside
    lost = compare(turned, plain, config)
    assert "[MODEL] the candidate lost its golden's 2 model turns" in lost.lines()
    assert not lost.passed


class Issued(Calls):
    """A live provider: a new response id and a new tool-call id at every call."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.n = n

    def first(self) -> dict[str, Any]:
        out = super().first()
        out["parts"][0]["id"] = f"call_{self.n}AbC"
        return {**out, "id": f"resp_{self.n}a"}

    def second(self) -> dict[str, Any]:
        return {**super().second(), "id": f"resp_{self.n}b"}


def test_two_recordings_that_differ_only_in_the_ids_a_provider_issued_compare_equal(tapes: Path) -> None:
    """Every live sample of a tool-using agent differed from its golden in the ids a provider makes anew at each
    call (``check --samples`` failed them all); the ids are numbered by first appearance to compare, and kept."""
    from tapetui.review.comparison import compare

    golden, again = tapes / "tapes" / "a.jsonl", tapes / "tapes" / "b.jsonl"
    for path, n in ((golden, 1), (again, 2)):
        with Tape(path, "record") as t:
            agent(t, Issued(n))
    config = load_config(tapes / "tapes.toml")
    same = compare(golden, again, config)
    assert same.clean and same.passed, same.lines()
    assert "call_2AbC" in again.read_text() and "resp_2b" in again.read_text()  # the tape keeps what was issued
    # an answer given to another call than the one the model asked for is still a difference
    lines = [orjson.loads(x) for x in again.read_bytes().splitlines()]
    for line in lines:
        for message in line.get("request", {}).get("messages", []) if line.get("type") == "model" else []:
            for part in message["parts"]:
                if part.get("type") == "tool_call_response":
                    part["id"] = "call_other"
    again.write_bytes(b"".join(orjson.dumps(x) + b"\n" for x in lines))
    other = compare(golden, again, config)
    assert not other.passed and any("messages[2].parts[0].id" in x for x in other.lines()), other.lines()


def test_token_counts_are_not_secrets_but_tokens_are() -> None:
    r = Redactor()
    usage = {"input_token_details": {"cache_read": 10}, "token_usage": {"total": 5}, "access_token": "abc"}
    assert r.redact(usage) == {
        "input_token_details": {"cache_read": 10},
        "token_usage": {"total": 5},
        "access_token": "[REDACTED]",
    }


def test_order_is_recorded_and_sub_agents_get_their_own_turns(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare.rules]\n"request.instructions" = "ignore"\n')

    def answer(text: str) -> Any:
        return lambda: {"parts": [{"type": "text", "content": text}]}

    with Tape(path, "record") as t:
        t.model(_request("agent A v1"), live=answer("for A"), model=MODEL, order="A")
        t.model(_request("agent B v1"), live=answer("for B"), model=MODEL, order="B")
    assert [x.get("order") for x in _lines(path) if x["type"] == "model"] == ["A", "B"]
    with Tape(path, "replay") as t:  # the other order this time, prompts reworded (excused by the rule)
        b = t.model(_request("agent B v2"), live=Calls(boom=True).second, model=MODEL, order="B")
        a = t.model(_request("agent A v2"), live=Calls(boom=True).second, model=MODEL, order="A")
    assert (a["parts"][0]["content"], b["parts"][0]["content"]) == ("for A", "for B")
    texts = [f.text for f in _check(tapes)[0].findings]
    assert any("excused" in x and "agent B v2" in x for x in texts), texts  # never silent


def test_a_candidate_with_a_turn_less_fails_and_so_does_a_replay_that_skips_one(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"
    _record(path)
    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare]\nmax_tool_edits = 1\n')
    with Tape(path, "record") as t:  # the candidate stops after the tool call: no final turn
        r = t.model(_request(), live=Calls().first, model=MODEL)
        t.call("search", r["parts"][0]["arguments"], live=lambda: "chapter 2", call_id="call_9f")
    report = _check(tapes)[0]
    assert report.comparison is not None and not report.comparison.verdict("prompts").passed
    assert not report.ok
    candidate_path = tapes / "tapes" / "a.candidate.jsonl"
    candidate_path.unlink()
    with Tape(path, "replay") as t:  # a replay that never asks for the final turn
        r = t.model(_request(), live=Calls(boom=True).first, model=MODEL)
        t.call("search", r["parts"][0]["arguments"])
    report = _check(tapes)[0]
    assert not report.ok, [f.text for f in report.findings]


def test_secrets_stay_out_of_names_and_refusals(tapes: Path) -> None:
    secret = "sk-proj-" + "Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2" * 2
    path = tapes / "tapes" / "a.jsonl"
    with Tape(path, "record") as t:
        t.model(_request(), live=Calls().second, model=f"openai:{secret}", source=f"core-{secret}")
        refusals = []
        for bad in (
            lambda: t.model(_request(), live=Calls().second, model=MODEL, order=(secret, object())),
            lambda: t.model({"messages": [], "tools": [secret, secret]}, live=Calls().second, model=MODEL),
            lambda: t.model(_request(), live=lambda: {"parts": [], "usage": {"input": secret}}, model=MODEL),
            lambda: t.model(_request(), live=lambda: {"parts": [], "x": {secret: object()}}, model=MODEL),
            lambda: t.model(_request(), live=Calls().second, model=[secret]),  # type: ignore[arg-type]
        ):
            with pytest.raises(TapeError) as e:
                bad()
            refusals.append(str(e.value))
    assert not [r for r in refusals if secret in r], refusals
    assert secret.encode() not in path.read_bytes()
    assert secret.encode() not in (tapes / "tapes" / "a.run.jsonl").read_bytes()


def test_a_response_nested_too_deeply_is_refused_naming_the_tape_and_step(tapes: Path) -> None:
    deep: Any = "x"
    for _ in range(2000):
        deep = [deep]
    path = tapes / "tapes" / "a.jsonl"
    with Tape(path, "record") as t, pytest.raises(TapeError, match=r"a\.jsonl: step 1 \(model turn 1\)"):
        t.model(_request(), live=lambda: {"parts": [], "x": deep}, model=MODEL)


def test_a_call_of_a_tool_never_offered_stays_on_the_tape_and_is_reported(tapes: Path) -> None:
    path = tapes / "tapes" / "a.jsonl"

    def hallucinate() -> dict[str, Any]:
        return {"parts": [{"type": "tool_call", "id": "c1", "name": "rm_rf", "arguments": {"path": "/"}}]}

    with Tape(path, "record") as t:  # the harness refuses the call: it never runs, and the turn keeps it
        t.model(_request(), live=hallucinate, model=MODEL)
    with Tape(path, "replay") as t:
        r = t.model(_request(), live=Calls(boom=True).first, model=MODEL)
    assert r["parts"][0]["name"] == "rm_rf"  # served as recorded: the framework handles it
    report = _check(tapes)[0]
    texts = [f.text for f in report.findings]
    assert any("asked for 'rm_rf', a tool it was not offered" in x for x in texts), texts
    assert report.ok  # a warning: the same call as the golden's


def test_a_candidates_changed_answer_or_failed_turn_fails_results_unless_a_rule_excuses_it(tapes: Path) -> None:
    """A model's response is its result: a candidate whose final answer changed (no later request shows it) or
    whose turn failed is a finding by default, and a ``response.…`` rule excuses it as a tool result's is."""
    path = tapes / "tapes" / "a.jsonl"
    _record(path)

    class Reworded(Calls):
        def second(self) -> dict[str, Any]:
            out = super().second()
            out["parts"] = [{"type": "text", "content": "Yes, delete every file now."}]
            return out

    with Tape(path, "record") as t:  # beside the golden: a candidate, the same requests, another answer
        agent(t, Reworded())
    report = _check(tapes)[0]
    assert report.comparison is not None and not report.ok
    results = report.comparison.verdict("results")
    assert (results.value, results.passed) == (1, False)
    assert report.comparison.verdict("prompts").passed  # the requests are the golden's
    assert any("response.parts[0].content" in f.text and "delete every file" in f.text for f in report.findings)
    rule = '"response.parts[*].content" = "ignore"'
    (tapes / "tapes.toml").write_text(f'[tapes]\ndir = "tapes"\n[compare.rules]\n{rule}\n')
    report = _check(tapes)[0]
    assert report.comparison is not None and report.comparison.passed
    assert report.comparison.verdict("results").excused == 1
    assert any("excused" in f.text or "ignore" in f.text for f in report.findings), [f.text for f in report.findings]

    class Failing(Calls):
        def second(self) -> dict[str, Any]:
            raise RuntimeError("429 rate limited")

    (tapes / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    with Tape(path, "record") as t, pytest.raises(RuntimeError):
        agent(t, Failing())
    report = _check(tapes)[0]
    assert report.comparison is not None and not report.comparison.verdict("results").passed


def test_a_response_is_judged_as_a_tool_result_is_volatile_fields_errors_and_depth(tapes: Path) -> None:
    """What hides a result's volatile field hides a response's; a turn's error is compared by path, under
    ``response.error.…`` rules; a response too deep to compare is that session's error, never the whole check's."""
    (tapes / "tapes.toml").write_text(
        '[tapes]\ndir = "tapes"\n[diff]\nignore = ["*.request_id"]\n'
        '[compare]\nmax_result_changes = 0\n[compare.rules]\n"response.error.message" = { similarity = 0.5 }\n'
    )
    path = tapes / "tapes" / "a.jsonl"
    runs = (("req_1", "2026-01-01T00:00:00Z", "by the provider"), ("req_2", "2026-02-02T11:11:11Z", "by provider"))
    for rid, ts, said in runs:

        def answer(rid: str = rid, ts: str = ts) -> dict[str, Any]:
            return {"parts": [{"type": "text", "content": "same"}], "request_id": rid, "timestamp": ts}

        def failed(said: str = said) -> Any:
            raise RuntimeError(f"upstream failed: rate limited {said}")

        with Tape(path, "record") as t:  # the second time, beside the golden: a candidate
            t.model(_request(), live=answer, model=MODEL)
            with pytest.raises(RuntimeError):
                t.model(_request("again"), live=failed, model=MODEL)
    report = _check(tapes)[0]
    assert report.comparison is not None and report.comparison.passed, [f.text for f in report.findings]
    assert report.comparison.verdict("results").excused == 1  # the error's message, by its similarity rule
    assert any("response.error.message" in f.text and "similarity" in f.text for f in report.findings)
    lines = path.with_name("a.candidate.jsonl").read_bytes().splitlines()
    at = next(i for i, line in enumerate(lines) if orjson.loads(line).get("type") == "model")
    turn = orjson.loads(lines[at])
    turn["response"]["parts"][0]["content"] = "€"  # replaced below: nested past what Python compares, not JSON reads
    lines[at] = orjson.dumps(turn).replace('"€"'.encode(), b"[" * 1010 + b'"x"' + b"]" * 1010)
    path.with_name("a.candidate.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    (tapes / "tapes" / "b.jsonl").write_bytes(path.read_bytes())  # another session, which is still checked
    reports = {r.session: r for r in _check(tapes)}
    assert reports["a"].error is not None and "nested too deeply" in reports["a"].error
    assert reports["b"].error is None


def test_a_turn_that_answered_and_now_fails_is_a_difference_no_rule_excuses(tapes: Path) -> None:
    """As a tool call whose result became an error: the outcome kind changed, whatever an ``ignore`` says."""
    rules = '"**" = "ignore"\n"response" = "ignore"\n'
    (tapes / "tapes.toml").write_text(f'[tapes]\ndir = "tapes"\n[compare.rules]\n{rules}')
    path = tapes / "tapes" / "a.jsonl"
    with Tape(path, "record") as t:
        t.model(_request(), live=lambda: {"parts": [{"type": "text", "content": "ok"}]}, model=MODEL)

    def limited() -> Any:
        raise RuntimeError("429 rate limited")

    with Tape(path, "record") as t, pytest.raises(RuntimeError):  # beside the golden: a candidate that failed
        t.model(_request(), live=limited, model=MODEL)
    report = _check(tapes)[0]
    assert report.comparison is not None and not report.comparison.verdict("results").passed
    assert not report.ok


def test_a_turns_row_names_the_golden_step_that_accept_step_takes(tapes: Path) -> None:
    """A candidate that dropped its first turn: its turn 1 is compared with the golden's turn 1 (by place), and the
    row names the golden's step, the number ``accept --step`` takes (as a call's row does)."""
    from tapetui.review import accept

    path = tapes / "tapes" / "a.jsonl"

    def answer(text: str) -> Any:
        return lambda: {"parts": [{"type": "text", "content": text}]}

    with Tape(path, "record") as t:  # turn, call, turn: steps 1, 2, 3
        t.model(_request("plan"), live=answer("planned"), model=MODEL)
        t.call("search", {"q": "x"}, live=lambda: "hits")
        t.model(_request("summarise"), live=answer("summary"), model=MODEL)
    with Tape(path, "record") as t:  # call, turn: its only turn is step 2
        t.call("search", {"q": "x"}, live=lambda: "hits")
        t.model(_request("summarise briefly"), live=answer("brief"), model=MODEL)
    texts = [f.text for f in _check(tapes)[0].findings]
    assert any(x.startswith(f"[MODEL] turn 1 ({MODEL}) step 1  request") for x in texts), texts
    accept(load_config(tapes / "tapes.toml"), path, "the briefer plan", steps=[1])
    first = next(x for x in _lines(path) if x.get("type") == "model")
    assert first["seq"] == 1 and first["request"]["instructions"] == "summarise briefly"
