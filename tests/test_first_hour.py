"""A new user's first hour (issue 12): the README's first example, honest state after an accept."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from tapetui import Tape, ToolRegistry
from tapetui.core.runlog import read_run_log
from tapetui.core.store import runlog_path
from tests.conftest import tapetui_cli


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    def summarize(text: str, max_words: int = 120) -> dict[str, object]:
        return {"words": min(len(text.split()), max_words)}

    return reg


def test_the_readme_example_records_into_a_folder_that_does_not_exist_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with Tape("tapes/demo.jsonl", mode="record", registry=_registry()) as tape:
        assert tape.call("summarize", {"text": "a b c"}) == {"words": 3}
    assert (tmp_path / "tapes" / "demo.jsonl").exists()


def test_a_run_log_names_the_golden_it_ran_against(tmp_path: Path) -> None:
    golden = tmp_path / "tapes" / "s.jsonl"
    with Tape(golden, "record", _registry()) as tape:
        tape.call("summarize", {"text": "a b c"})
    with Tape(golden, "replay", _registry()) as tape:
        tape.call("summarize", {"text": "a b c"})
    (start,) = [e for e in read_run_log(runlog_path(golden)) if e["event"] == "start"]
    assert start["golden_sha256"] == hashlib.sha256(golden.read_bytes()).hexdigest()


def test_a_rerecord_that_only_refreshes_an_expiry_is_a_difference(tmp_path: Path) -> None:
    from tapetui import Config, review
    from tapetui.core.store import candidate_path

    tapes = tmp_path / "tapes"
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1", ttl=3600)
    def quote(sym: str) -> dict[str, object]:
        return {"price": 10}

    cfg = Config.for_dir(tapes)
    golden = tapes / "q.jsonl"
    with Tape(golden, "record", reg, config=cfg, run_log=False) as t:
        t.call("quote", {"sym": "X"})
    review.rerecord(cfg, golden, 1, registry=reg)
    cmp = review.compare(golden, candidate_path(golden), cfg)
    (step,) = cmp.changed_steps
    assert step.expiry is not None and step.expiry[0] != step.expiry[1]
    assert any("expires_at" in line for line in cmp.lines())
    entry = review.accept(cfg, golden, "fresh quote")
    assert any("expires_at" in d for d in entry.details)


@pytest.mark.slow
def test_session_names_round_trip_between_commands(tmp_path: Path) -> None:
    """No tapes.toml, tapes recorded where the pytest plugin puts them (./tapes): every command names a
    session the same way, and that name is what the other commands take."""
    import subprocess

    import orjson

    from tapetui.core.store import candidate_path

    golden = tmp_path / "tapes" / "test_agent" / "test_report.jsonl"
    for text in ("a b c", "a b c d"):
        with Tape(golden, "record", _registry(), run_log=False) as tape:
            tape.call("summarize", {"text": text})
    assert candidate_path(golden).exists()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return tapetui_cli(tmp_path, *args)

    checked = {r["session"] for r in orjson.loads(run("check", "--json").stdout)["reports"]}
    pending = {p["session"] for p in orjson.loads(run("pending", "--json").stdout)}
    assert checked == pending == {"test_agent/test_report"}
    assert run("diff", "test_agent/test_report").returncode == 1  # found, and it differs
    assert run("accept", "test_agent/test_report", "--why", "longer text").returncode == 0


def test_after_an_accept_check_says_the_last_run_predates_the_golden(tmp_path: Path) -> None:
    from tapetui import Config, TapeDrift, review

    tapes = tmp_path / "tapes"
    cfg = Config.for_dir(tapes)
    golden = tapes / "s.jsonl"
    with Tape(golden, "record", _registry(), config=cfg, run_log=False) as t:
        t.call("summarize", {"text": "a b", "max_words": 120})
    with pytest.raises(TapeDrift), Tape(golden, "replay", _registry(), config=cfg) as t:  # the agent moved on
        t.call("summarize", {"text": "a b", "max_words": 80})
    (rep,) = review.check(tapes, cfg)
    assert [f.kind for f in rep.findings if not f.warning][:1] == ["drift"]
    with Tape(golden, "record", _registry(), config=cfg, run_log=False) as t:  # the new behaviour, accepted
        t.call("summarize", {"text": "a b", "max_words": 80})
    review.accept(cfg, golden, "shorter summaries are intended")
    diff = subprocess_run("diff", str(golden), cwd=tmp_path)
    assert diff.returncode == 1 and "predates the golden" in diff.stdout and "max_words" not in diff.stdout
    (rep,) = review.check(tapes, cfg)
    kinds = [f.kind for f in rep.findings]
    assert kinds == ["stale_run"] and "predates the golden" in rep.findings[0].text  # not current drift
    with Tape(golden, "replay", _registry(), config=cfg) as t:  # run again: green
        t.call("summarize", {"text": "a b", "max_words": 80})
    (rep,) = review.check(tapes, cfg)
    assert rep.ok and not rep.findings
    diff = subprocess_run("diff", str(golden), cwd=tmp_path)
    assert diff.returncode == 0, diff.stdout  # the current run matches the golden


def subprocess_run(*args: str, cwd: Path) -> Any:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parent.parent
    return subprocess.run(
        [sys.executable, "-m", "tapetui", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(root)},
        timeout=60,
    )


@pytest.mark.parametrize("depth", [254, 300, 900])
def test_values_nested_hundreds_deep_record_and_replay(tmp_path: Path, depth: int) -> None:
    reg = ToolRegistry()
    deep: Any = "leaf"
    for _ in range(depth):
        deep = {"a": deep}

    @reg.tool(schema={"type": "object"}, version="1")
    def nest(n: int) -> Any:
        return deep

    golden = tmp_path / "deep.jsonl"
    with Tape(golden, "record", reg) as t:
        assert t.call("nest", {"n": 1}) == deep
    with Tape(golden, "replay", reg) as t:
        assert t.call("nest", {"n": 1}) == deep
    with Tape(golden, "replay", reg) as t, pytest.raises(Exception) as err:
        t.call("nest", {"n": 2})
    assert "not a JSON value" not in str(err.value)


def test_a_value_deeper_than_the_recursion_limit_is_named_as_such(tmp_path: Path) -> None:
    from tapetui import TapeError

    reg = ToolRegistry()
    deep: Any = "leaf"
    for _ in range(20_000):
        deep = [deep]

    @reg.tool(schema={"type": "object"}, version="1")
    def nest() -> Any:
        return deep

    with (
        Tape(tmp_path / "deep.jsonl", "record", reg, run_log=False) as t,
        pytest.raises(TapeError, match="nested too deeply") as err,
    ):
        t.call("nest", {})
    assert "not a JSON value" not in str(err.value)


def test_a_line_nested_10000_deep_is_named_and_the_rest_of_the_tape_opens(tmp_path: Path) -> None:
    from tapetui import TapeError
    from tapetui.core.keys import key_of
    from tapetui.core.tapefile import call_line, read_index

    deep = "[" * 10_000 + "1" + "]" * 10_000
    first = (
        '{{"type":"call","seq":1,"tool":"t","key":"{}","fingerprint":"x","side_effect":false,"ms":1.0,'
        '"expires_at":null,"recorded_at":"2026-01-01T00:00:00Z","args":{{}},"result":{}}}\n'.format(
            key_of("t", {}), deep
        )
    )
    second = call_line(
        seq=2,
        tool="u",
        key=key_of("u", {}),
        fingerprint="x",
        side_effect=False,
        ms=1.0,
        expires_at=None,
        recorded_at="2026-01-01T00:00:00Z",
        args={},
        result=1,
    )
    tape = tmp_path / "deep.jsonl"
    tape.write_bytes(first.encode() + second)
    idx = read_index(tape)  # what the app and replay open: both steps are there
    assert len(idx) == 2 and idx.record(1).result == 1
    with pytest.raises(TapeError, match=r"deep\.jsonl:1: nested more than 1,024 levels deep") as err:
        idx.record(0)
    assert "invalid JSON" not in str(err.value)


def test_a_wrong_folder_says_where_tapetui_looked(tmp_path: Path) -> None:
    r = subprocess_run(str(tmp_path / "nope"), cwd=tmp_path)
    assert r.returncode == 2 and "no tapes found in" in r.stderr and "tapes.toml: none found" in r.stderr
    assert "Traceback" not in r.stderr
