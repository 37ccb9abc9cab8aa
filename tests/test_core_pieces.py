"""The engine's pieces that the review layer builds on: running a tool live, the clock, "stays inside the root",
the session header, run-log event kinds, which recorded calls a run has used, contract checks."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, get_args

import orjson
import pytest

from tapetui import Redactor, Tape, TapeError, ToolRegistry
from tapetui.core.clock import ManualClock, iso, now_iso, parse_iso
from tapetui.core.config import Config, ToolPolicy
from tapetui.core.contract import contract_change
from tapetui.core.files import atomic_write, file_sha256
from tapetui.core.index import Consumed
from tapetui.core.keys import call_key
from tapetui.core.live import record_live
from tapetui.core.runlog import CALL_EVENTS, EVENT_KINDS, EXECUTED_EVENTS, EventKind, event_kind, read_run_log
from tapetui.core.store import inside, recording_target, refuse_links_out, runlog_path, safe_path
from tapetui.core.tapefile import FORMAT_VERSION, read_index, session_line

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1", ttl=60)
    def quote(symbol: str, token: str = "") -> dict[str, Any]:
        if symbol == "BOOM":
            raise ValueError(f"no quote for {symbol} (token={token})")
        if symbol == "SET":
            return {"values": {1, 2}}
        return {"symbol": symbol, "price": 10}

    return reg


def _ticks() -> Any:
    times = iter([1.0, 1.25])
    return lambda: next(times)


def test_record_live_builds_the_line_a_recording_writes(tmp_path: Path) -> None:
    reg = _registry()
    clock = ManualClock(T0)
    with Tape(tmp_path / "s.jsonl", "record", reg, clock=clock, timer=_ticks(), config=Config.for_dir(tmp_path)) as t:
        t.call("quote", {"symbol": " ACME ", "token": "sk-live-123"})
    recorded = [orjson.loads(line) for line in (tmp_path / "s.jsonl").read_bytes().splitlines()][-1]

    lc = record_live(
        reg["quote"],
        {"symbol": " ACME ", "token": "sk-live-123"},
        seq=1,
        redactor=Redactor(),
        policy=ToolPolicy(),
        clock=clock,
        timer=_ticks(),
    )
    assert orjson.loads(lc.line) == recorded  # byte for byte what Tape wrote, secrets redacted
    assert lc.key == call_key("quote", {"symbol": "ACME", "token": "sk-live-123"}) == recorded["key"]
    assert lc.result == {"symbol": " ACME ", "price": 10}  # the tool gets the arguments as given
    assert (lc.error, lc.recorded_error, lc.problem, lc.ms) == (None, False, "", 250.0)
    assert recorded["expires_at"] == iso(T0.replace(minute=1))
    assert b"sk-live-123" not in lc.line


def test_record_live_records_what_the_tool_raised_and_what_cannot_be_recorded() -> None:
    reg = _registry()
    raised = record_live(
        reg["quote"], {"symbol": "BOOM", "token": "sk-live-123"}, seq=3, redactor=Redactor(), policy=ToolPolicy()
    )
    line = orjson.loads(raised.line)
    assert isinstance(raised.error, ValueError) and raised.recorded_error and raised.problem == ""
    assert line["error"]["type"] == "ValueError" and "result" not in line and line["seq"] == 3

    odd = record_live(reg["quote"], {"symbol": "SET"}, seq=1, redactor=Redactor(), policy=ToolPolicy(), extra={"x": 1})
    line = orjson.loads(odd.line)
    assert odd.recorded_error and "result.values is a set" in odd.problem
    assert line["error"]["type"] == "TapeError" and line["x"] == 1


def test_record_live_refuses_before_the_tool_runs() -> None:
    ran: list[int] = []
    reg = ToolRegistry()

    @reg.tool(version="1")
    def pay(amount: Any) -> int:
        ran.append(amount)
        return 1

    with pytest.raises(TapeError, match="arguments cannot be recorded"):
        record_live(reg["pay"], {"amount": object()}, seq=1, redactor=Redactor(), policy=ToolPolicy())
    with pytest.raises(TapeError, match="ttl"):
        record_live(reg["pay"], {"amount": 1}, seq=1, redactor=Redactor(), policy=ToolPolicy(ttl=-1.0))
    assert ran == []


def test_clock() -> None:
    clock = ManualClock(T0.replace(microsecond=5))
    assert iso(clock()) == "2026-03-01T12:00:00.000005Z"
    assert now_iso(clock) == "2026-03-01T12:00:00Z"
    assert clock.advance(90) == T0.replace(minute=1, second=30, microsecond=5)
    assert parse_iso("2026-03-01T12:00:00Z") == T0 and parse_iso("2026-03-01T12:00:00") == T0
    assert parse_iso("yesterday") is None


def test_inside_is_the_one_test_of_staying_in_the_root(tmp_path: Path) -> None:
    root = tmp_path / "tapes"
    (root / "a").mkdir(parents=True)
    (root / "out").symlink_to(tmp_path)
    (root / "in").symlink_to(root / "a")
    assert inside(root, "a/x.jsonl") == root.resolve() / "a" / "x.jsonl"
    assert inside(root, ".") == root.resolve()
    assert inside(root, "../x") is None
    assert inside(root, "/etc/passwd") is None
    assert inside(root, "out/x") is None
    assert inside(root, root / "in") == (root / "a").resolve()
    with pytest.raises(TapeError, match="outside the tapes folder"):
        safe_path(root, "../x")
    with pytest.raises(TapeError, match="a symlink to"):
        refuse_links_out(root, root / "out")
    refuse_links_out(root, root / "in", root / "a")  # links inside, and plain paths, pass


def test_session_line_and_recording_target(tmp_path: Path) -> None:
    head = orjson.loads(session_line(created_at="2026-03-01T12:00:00Z", origin="rerecord", labels={"model": "m"}))
    assert head == {
        "type": "session",
        "v": FORMAT_VERSION,
        "created_at": "2026-03-01T12:00:00Z",
        "origin": "rerecord",
        "labels": {"model": "m"},
    }
    assert "labels" not in orjson.loads(session_line(created_at="x", origin="record"))

    tape = tmp_path / "s.jsonl"
    assert recording_target(tape) == (tape, None)
    tape.write_bytes(session_line(created_at="x", origin="record"))
    cand = tmp_path / "s.candidate.jsonl"
    assert recording_target(tape) == (cand, None)
    cand.write_bytes(b"pending\n")
    target, moved = recording_target(tape)
    assert target == cand and moved is not None and moved.read_bytes() == b"pending\n" and not cand.exists()


def test_file_sha256(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    (tmp_path / "link").symlink_to(f)
    want = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    assert file_sha256(f) == want
    assert file_sha256(tmp_path / "link") is None  # not followed by default
    assert file_sha256(tmp_path / "link", follow_symlinks=True) == want
    assert file_sha256(tmp_path) is None and file_sha256(tmp_path / "missing") is None
    os.mkfifo(tmp_path / "fifo")
    assert file_sha256(tmp_path / "fifo") is None  # never blocks


def test_atomic_write_gives_a_new_file_the_umasks_mode_and_keeps_an_existing_ones(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        new = tmp_path / "new.jsonl"
        atomic_write(new, b"a\n", sync=False)
        assert new.read_bytes() == b"a\n"
        assert new.stat().st_mode & 0o7777 == 0o640  # 0o666 less the umask, as any new file
        new.chmod(0o604)
        atomic_write(new, b"b\n")
        assert (new.read_bytes(), new.stat().st_mode & 0o7777) == (b"b\n", 0o604)  # replaced, its mode kept
        atomic_write(new, [b"c", b"\n"], mode=0o600)
        assert (new.read_bytes(), new.stat().st_mode & 0o7777) == (b"c\n", 0o600)
    finally:
        os.umask(old)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new.jsonl"]  # no temp file left


def test_event_kinds_are_one_vocabulary(tmp_path: Path) -> None:
    assert frozenset(get_args(EventKind)) == EVENT_KINDS
    assert EXECUTED_EVENTS < CALL_EVENTS < EVENT_KINDS
    assert event_kind({"event": "hit"}) == "hit" and event_kind({"event": "from-the-future"}) is None
    reg = _registry()
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", reg) as t:
        t.call("quote", {"symbol": "A"})
    with Tape(tape, "replay", reg) as t:
        t.call("quote", {"symbol": "A"})
    kinds = {ev["event"] for ev in read_run_log(runlog_path(tape))}
    assert kinds == {"start", "hit", "end"} and kinds <= EVENT_KINDS


def test_consumed_serves_each_recorded_call_once(tmp_path: Path) -> None:
    reg = _registry()
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", reg) as t:
        for s in ("A", "B", "A"):
            t.call("quote", {"symbol": s})
    used = Consumed(read_index(tape))
    a, b = call_key("quote", {"symbol": "A"}), call_key("quote", {"symbol": "B"})
    assert used.take(b) == 1
    used.flags[1] = 1
    assert used.take(a) == 0
    used.flags[0] = 1
    assert used.take(a) == 2 and used.take(b) is None
    assert used.unused() == [2]
    assert used.nearest("quote", 1) == 2 and used.nearest("other", 1) is None


def test_contract_change_explains_a_changed_tool() -> None:
    old, new = ToolRegistry(), ToolRegistry()

    @old.tool(schema={"type": "object", "properties": {"n": {"maximum": 500}}}, version="1")
    def summarize(n: int) -> int:
        return n

    new.register(summarize, schema={"type": "object", "properties": {"n": {"maximum": 200}}}, version="1")
    r = Redactor()
    before = old["summarize"]
    assert contract_change(before, before.fingerprint, form=3, old=before.manifest, redactor=r, where="t:1") is None
    change = contract_change(new["summarize"], before.fingerprint, form=3, old=before.manifest, redactor=r, where="t:1")
    assert change is not None and change.live == new["summarize"].fingerprint and change.form == 3
    assert any("maximum" in line and "500 → 200" in line for line in change.explanation)
    with pytest.raises(TapeError, match="fingerprint form 9"):
        contract_change(before, before.fingerprint, form=9, old=None, redactor=r, where="t:1")


def test_a_shortened_string_keeps_both_its_quotes() -> None:
    from tapetui.core.changes import short

    old, new = "Agents call tools. " * 10 + "old end.", "Agents call tools. " * 10 + "new end."
    for text in (short(old, 40), short(old, 40, around=new), short("x" * 30 + '\\"' + "y" * 30, 40)):
        assert text.startswith('"') and text.endswith('"') and "…" in text, text
    assert "old end" in short(old, 40, around=new)  # the window is at the change
    assert short("short", 40) == '"short"'
