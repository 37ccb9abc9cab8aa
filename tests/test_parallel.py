"""Async and parallel tool calls: ``acall``, ``live=``, ``order=``, and one lock around every decision and write."""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Tape, TapeDrift, TapeError, TapeMiss, ToolRegistry, call_key
from tapetui.core.config import Config


def _config(tmp_path: Path) -> Config:
    return Config.for_dir(tmp_path)


def _calls(path: Path) -> list[dict[str, Any]]:
    return [r for r in map(orjson.loads, path.read_bytes().splitlines()) if r.get("type") == "call"]


def _registry(counter: dict[str, int] | None = None) -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object", "properties": {"x": {"type": "integer"}}})
    def square(x: int) -> dict[str, int]:
        if counter is not None:
            counter["square"] = counter.get("square", 0) + 1
        return {"x": x, "y": x * x}

    @reg.tool()
    async def fetch(url: str) -> dict[str, str]:
        await asyncio.sleep(0)  # yields: parallel acalls interleave here
        if counter is not None:
            counter["fetch"] = counter.get("fetch", 0) + 1
        return {"url": url, "body": f"<{url}>"}

    return reg


# ---- acall -------------------------------------------------------------------------------------------------
def test_acall_records_and_replays_async_and_sync_tools(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    runs: dict[str, int] = {}

    async def agent(tape: Tape) -> list[Any]:
        return [await tape.acall("fetch", {"url": "a"}), await tape.acall("square", {"x": 3})]

    with Tape(path, "record", _registry(runs), config=_config(tmp_path)) as tape:
        recorded = asyncio.run(agent(tape))
    assert runs == {"fetch": 1, "square": 1}
    runs.clear()
    with Tape(path, "replay", _registry(runs), config=_config(tmp_path)) as tape:
        replayed = asyncio.run(agent(tape))
        stats = tape.stats()
    assert replayed == recorded == [{"url": "a", "body": "<a>"}, {"x": 3, "y": 9}]
    assert runs == {}
    assert (stats["tape_hits"], stats["live_tool_calls"], stats["tape_misses"]) == (2, 0, 0)


def test_acall_drift_and_miss_are_those_of_call(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Tape(path, "record", _registry(), config=_config(tmp_path)) as tape:
        tape.call("square", {"x": 2})
    with Tape(path, "replay", _registry(), config=_config(tmp_path)) as tape:
        with pytest.raises(TapeDrift) as drift:
            asyncio.run(tape.acall("square", {"x": 5}))
        with pytest.raises(TapeMiss):
            asyncio.run(tape.acall("fetch", {"url": "b"}))
    assert drift.value.changes == [("x", 2, 5)]


def test_sync_call_runs_an_async_tool_outside_a_loop_and_refuses_inside_one(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    runs: dict[str, int] = {}
    with Tape(path, "record", _registry(runs), config=_config(tmp_path)) as tape:
        assert tape.call("fetch", {"url": "a"}) == {"url": "a", "body": "<a>"}

        async def inside() -> None:
            tape.call("fetch", {"url": "b"})

        with pytest.raises(TapeError, match="acall"):
            asyncio.run(inside())
    assert runs == {"fetch": 1}  # the refused call never ran
    assert [c["args"] for c in _calls(path)] == [{"url": "a"}]


def test_live_callable_runs_instead_of_the_function_and_never_on_replay(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    executed: list[dict[str, Any]] = []

    async def executor(args: dict[str, Any]) -> dict[str, Any]:  # a framework's own tool executor
        executed.append(args)
        await asyncio.sleep(0)
        return {"ok": args["q"]}

    async def agent(tape: Tape) -> Any:
        args = {"q": "weather"}
        return await tape.acall("search", args, live=lambda: executor(args), call_id="call_1", order=(0, 0))

    with Tape(path, "record", None, config=_config(tmp_path)) as tape:  # no registry: the tool is only a name
        assert asyncio.run(agent(tape)) == {"ok": "weather"}
    (line,) = _calls(path)
    assert (line["call_id"], line["order"], line["result"]) == ("call_1", [0, 0], {"ok": "weather"})
    with Tape(path, "replay", None, config=_config(tmp_path)) as tape:
        assert asyncio.run(agent(tape)) == {"ok": "weather"}
        assert tape.stats()["live_tool_calls"] == 0
    assert len(executed) == 1


def test_cancelled_acall_writes_nothing_and_the_tape_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    async def agent(tape: Tape) -> None:
        ev = asyncio.Event()

        async def slow() -> str:
            ev.set()
            await asyncio.Event().wait()  # never set: only a cancellation ends it
            return "never"

        task = asyncio.create_task(tape.acall("slow", {}, live=slow))
        await ev.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await tape.acall("square", {"x": 1}) == {"x": 1, "y": 1}

    with Tape(path, "record", _registry(), config=_config(tmp_path)) as tape:
        asyncio.run(agent(tape))
    assert [c["tool"] for c in _calls(path)] == ["square"]


def test_a_call_still_running_when_the_tape_closes_is_an_error_not_a_silent_loss(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    tape = Tape(path, "record", None, config=_config(tmp_path))
    release = threading.Event()
    entered = threading.Event()
    errors: list[BaseException] = []

    def slow() -> str:
        entered.set()
        release.wait()
        return "late"

    def worker() -> None:
        try:
            tape.call("slow", {}, live=slow)
        except TapeError as e:
            errors.append(e)

    th = threading.Thread(target=worker)
    th.start()
    entered.wait()
    tape.close()
    release.set()
    th.join()
    assert len(errors) == 1 and "closed while slow" in str(errors[0])


# ---- the stored arguments --------------------------------------------------------------------------------
def test_the_tape_keeps_the_arguments_as_passed_and_the_key_is_canonical(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    reg = ToolRegistry()

    @reg.tool()
    def echo(text: str, opt: Any = None, api_key: str = "") -> int:
        return len(text)

    args = {"text": "  hello world \n", "opt": None, "api_key": "sk-live-123456789012345678901234"}
    with Tape(path, "record", reg, config=_config(tmp_path)) as tape:
        assert tape.call("echo", args) == 15
    (line,) = _calls(path)
    assert line["args"] == {"text": "  hello world \n", "opt": None, "api_key": "[REDACTED]"}
    assert list(line["args"]) == ["text", "opt", "api_key"]  # the order passed, not sorted
    assert line["key"] == call_key("echo", {"text": "hello world", "api_key": "x"})  # canon: stripped, None dropped
    with Tape(path, "replay", reg, config=_config(tmp_path)) as tape:
        assert tape.call("echo", {"api_key": "other", "text": "hello world"}) == 15  # same canonical key: a hit


# ---- parallel matching -----------------------------------------------------------------------------------
def _record_twenty(path: Path, tmp_path: Path) -> None:
    async def run(tape: Tape) -> None:
        calls = [tape.acall("square", {"x": i}, order=(0, i)) for i in range(20)]
        random.Random(0).shuffle(calls)  # started in another order than the model asked
        await asyncio.gather(*calls)

    with Tape(path, "record", _registry(), config=_config(tmp_path)) as tape:
        asyncio.run(run(tape))


@pytest.mark.slow
def test_twenty_parallel_calls_with_order_name_the_right_recording_every_time(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _record_twenty(path, tmp_path)
    rng = random.Random(14)
    for run in range(200):
        changed = rng.randrange(20)
        order = list(range(20))
        rng.shuffle(order)
        found: list[TapeDrift] = []
        unexpected: list[BaseException] = []
        barrier = threading.Barrier(4)
        with Tape(path, "replay", _registry(), config=_config(tmp_path), run_log=False) as tape:

            def worker(
                part: list[int],
                tape: Tape = tape,
                changed: int = changed,
                barrier: threading.Barrier = barrier,
                found: list[TapeDrift] = found,
                unexpected: list[BaseException] = unexpected,
            ) -> None:
                barrier.wait()
                for i in part:
                    try:
                        out = tape.call("square", {"x": 99 if i == changed else i}, order=(0, i))
                        assert out == {"x": i, "y": i * i}
                    except TapeDrift as e:
                        found.append(e)
                    except BaseException as e:  # noqa: BLE001 - reported below
                        unexpected.append(e)

            threads = [threading.Thread(target=worker, args=(order[k::4],)) for k in range(4)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
        assert not unexpected, (run, unexpected)
        assert len(found) == 1, run
        assert found[0].recorded_args == {"x": changed}, (run, changed, str(found[0]))
        assert found[0].changes == [("x", changed, 99)]


def test_order_judges_at_the_place_even_when_the_content_hits_elsewhere(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    _record_twenty(path, tmp_path)
    with Tape(path, "replay", _registry(), config=_config(tmp_path)) as tape, pytest.raises(TapeDrift) as e:
        tape.call("square", {"x": 4}, order=(0, 3))  # x=4 is recorded, but at (0, 4)
    assert e.value.recorded_args == {"x": 3}


def test_one_turns_parallel_calls_give_a_drift_never_a_miss(tmp_path: Path) -> None:
    """asyncio runs a turn's calls in the order the model asked for them: one changed argument is a drift
    against the recording at its place, whichever of the turn's calls changed (60 runs)."""
    path = tmp_path / "s.jsonl"

    async def turn(tape: Tape, url: str, x: int) -> list[Any]:
        return await asyncio.gather(
            tape.acall("fetch", {"url": url}), tape.acall("square", {"x": x}), return_exceptions=True
        )

    with Tape(path, "record", _registry(), config=_config(tmp_path)) as tape:
        asyncio.run(turn(tape, "a", 2))
    for run in range(60):
        url, x = ("b", 2) if run % 2 else ("a", 3)
        with Tape(path, "replay", _registry(), config=_config(tmp_path), run_log=False) as tape:
            out = asyncio.run(turn(tape, url, x))
        (drift,) = [o for o in out if isinstance(o, BaseException)]
        assert isinstance(drift, TapeDrift), out
        assert drift.recorded_args == ({"url": "a"} if run % 2 else {"x": 2})


def test_nearest_by_content_is_the_fewest_differing_paths_then_the_earliest(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    reg = ToolRegistry()

    @reg.tool()
    def book(city: str, day: str, seats: int) -> str:
        return f"{city}/{day}/{seats}"

    with Tape(path, "record", reg, config=_config(tmp_path)) as tape:
        tape.call("book", {"city": "Oslo", "day": "mon", "seats": 1})
        tape.call("book", {"city": "Rome", "day": "tue", "seats": 2})
        tape.call("book", {"city": "Rome", "day": "wed", "seats": 2})
    with Tape(path, "replay", reg, config=_config(tmp_path)) as tape, pytest.raises(TapeDrift) as e:
        tape.call("book", {"city": "Rome", "day": "thu", "seats": 2}, order="elsewhere")  # not on the tape
    assert e.value.recorded_args == {"city": "Rome", "day": "tue", "seats": 2}  # 1 path; ties: the earliest


def test_order_must_be_a_json_value(tmp_path: Path) -> None:
    with Tape(tmp_path / "s.jsonl", "record", _registry(), config=_config(tmp_path)) as tape:
        with pytest.raises(TapeError, match="order="):
            tape.call("square", {"x": 1}, order=object())
        assert tape.call("square", {"x": 1}, order=("turn", 1)) == {"x": 1, "y": 1}


# ---- stress: nothing lost, nothing mismatched ----------------------------------------------------------
def test_parallel_record_and_replay_from_threads_loses_no_line_and_never_mismatches(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    n_threads, per_thread = 8, 150
    barrier = threading.Barrier(n_threads)

    def work(tape: Tape, t: int) -> None:
        barrier.wait()
        for k in range(per_thread):
            x = t * 1000 + k
            assert tape.call("square", {"x": x}) == {"x": x, "y": x * x}

    for mode in ("record", "replay"):
        with Tape(path, mode, _registry(), config=_config(tmp_path)) as tape:
            threads = [threading.Thread(target=work, args=(tape, t)) for t in range(n_threads)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            stats = tape.stats()
        assert stats["steps"] == n_threads * per_thread
        if mode == "replay":
            assert (stats["tape_hits"], stats["live_tool_calls"], stats["unused"]) == (n_threads * per_thread, 0, 0)
    calls = _calls(path)
    assert len(calls) == n_threads * per_thread
    assert sorted(c["seq"] for c in calls) == list(range(1, n_threads * per_thread + 1))
    assert all(c["result"] == {"x": c["args"]["x"], "y": c["args"]["x"] ** 2} for c in calls)


def test_parallel_record_and_replay_from_asyncio_tasks_loses_no_line_and_never_mismatches(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    n = 500

    async def agent(tape: Tape) -> list[Any]:
        return await asyncio.gather(*(tape.acall("fetch", {"url": f"u{i}"}) for i in range(n)))

    runs: dict[str, int] = {}
    for mode in ("record", "replay"):
        with Tape(path, mode, _registry(runs), config=_config(tmp_path)) as tape:
            out = asyncio.run(agent(tape))
            stats = tape.stats()
        assert out == [{"url": f"u{i}", "body": f"<u{i}>"} for i in range(n)]
        assert stats["steps"] == n
    assert runs == {"fetch": n}  # the replay ran nothing
    lines = path.read_bytes().splitlines()
    kinds = [orjson.loads(x)["type"] for x in lines]
    assert kinds.count("call") == n and kinds.count("tool") == 1
    assert kinds.index("tool") < kinds.index("call")  # the tool line comes before its first call line


# ---- what a hostile tester found: each would fail without its fix ----------------------------------------
def _f_registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool()
    def f(a: int, b: int) -> int:
        return a * 10 + b

    return reg


def test_a_used_step_is_not_drifted_against_the_unused_one_is(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Tape(path, "record", _f_registry(), config=_config(tmp_path)) as tape:
        tape.call("f", {"a": 1, "b": 1})
        tape.call("f", {"a": 2, "b": 2})
    with Tape(path, "replay", _f_registry(), config=_config(tmp_path)) as tape:
        assert tape.call("f", {"a": 2, "b": 2}) == 22  # step 2's recording, used first
        with pytest.raises(TapeDrift) as e:
            tape.call("f", {"a": 1, "b": 9})  # step 2 is used: step 1 is what it changed
    assert e.value.recorded_args == {"a": 1, "b": 1} and e.value.changes == [("b", 1, 9)]


def test_a_drift_against_the_wrong_recording_does_not_make_its_owner_drift_too(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Tape(path, "record", _f_registry(), config=_config(tmp_path)) as tape:
        tape.call("f", {"a": 1, "b": 1})
        tape.call("f", {"a": 2, "b": 2})
    with Tape(path, "replay", _f_registry(), config=_config(tmp_path)) as tape:
        with pytest.raises(TapeDrift) as e:
            tape.call("f", {"a": 2, "b": 3})  # started first: step 1's place, by step position
        assert e.value.recorded_args == {"a": 1, "b": 1}
        assert tape.call("f", {"a": 1, "b": 1}) == 11  # still a hit, though the drift named it
        assert tape.call("f", {"a": 2, "b": 2}) == 22


@pytest.mark.parametrize("starts", [(1, 2, 3), (3, 1, 2), (2, 3, 1)])
def test_a_place_the_tape_does_not_hold_never_takes_another_places_recording(
    tmp_path: Path, starts: tuple[int, ...]
) -> None:
    path = tmp_path / "s.jsonl"
    with Tape(path, "record", _f_registry(), config=_config(tmp_path)) as tape:
        tape.call("f", {"a": 1, "b": 0}, order=(0, 1))
        tape.call("f", {"a": 2, "b": 0}, order=(0, 2))
    with Tape(path, "replay", _f_registry(), config=_config(tmp_path)) as tape:
        out = {}
        for n in starts:
            try:
                out[n] = tape.call("f", {"a": n, "b": 0}, order=(0, n))
            except TapeError as e:
                out[n] = type(e).__name__
    assert out == {1: 10, 2: 20, 3: "TapeMiss"}


def test_two_recordings_at_one_place_both_hit_in_either_order(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Tape(path, "record", _f_registry(), config=_config(tmp_path)) as tape:
        tape.call("f", {"a": 1, "b": 0}, order=(1, 0))
        tape.call("f", {"a": 2, "b": 0}, order=(1, 0))  # a retry at the same place
    with Tape(path, "replay", _f_registry(), config=_config(tmp_path)) as tape:
        assert tape.call("f", {"a": 2, "b": 0}, order=[1, 0]) == 20
        assert tape.call("f", {"a": 1, "b": 0}, order=(1, 0)) == 10


def test_a_cancelled_call_leaves_no_gap_in_the_step_positions(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"

    async def agent(tape: Tape, words: int) -> Any:
        async def hang() -> str:
            await asyncio.Event().wait()
            return "never"

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tape.acall("fetch", {"url": "a"}, live=hang), 0.01)
        await tape.acall("fetch", {"url": "a"})  # the retry
        return await tape.acall("square", {"x": words})

    with Tape(path, "record", _registry(), config=_config(tmp_path)) as tape:
        asyncio.run(agent(tape, 120))
    assert [c["seq"] for c in _calls(path)] == [2, 3]  # step 1 was cancelled
    with Tape(path, "replay", _registry(), config=_config(tmp_path)) as tape:

        async def replay() -> None:
            await tape.acall("fetch", {"url": "a"})
            await tape.acall("square", {"x": 80})

        with pytest.raises(TapeDrift) as e:
            asyncio.run(replay())
    assert e.value.changes == [("x", 120, 80)]


def test_order_is_redacted_like_every_written_field(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    secret = "sk-ant-" + "a1" * 20
    with Tape(path, "record", _registry(), config=_config(tmp_path)) as tape:
        tape.call("square", {"x": 1}, order={"turn": 1, "api_key": "hunter2", "note": secret})
    text = path.read_text()
    assert secret not in text and "hunter2" not in text
    with Tape(path, "replay", _registry(), config=_config(tmp_path)) as tape:  # the same place, redacted alike
        assert tape.call("square", {"x": 1}, order={"turn": 1, "api_key": "other", "note": secret}) == {"x": 1, "y": 1}


def test_live_must_be_callable_and_nothing_is_recorded_otherwise(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    with Tape(path, "record", None, config=_config(tmp_path)) as tape, pytest.raises(TapeError, match="live="):
        tape.call("h", {}, live=3)  # type: ignore[arg-type]
    assert _calls(path) == []
