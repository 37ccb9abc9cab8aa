"""Hostile files: FIFOs and folders named like tapes, files without newlines, malformed run logs,
names too long for the file system, tapes that vanish mid-read, bytes that are not UTF-8, and a
run log that cannot be written. The answer is always a TapeError naming the file (and line), or,
from the command line, one line on stderr and exit 2 — never a hang, a traceback or a silent green."""

from __future__ import annotations

import errno
import importlib
import os
import shutil
import subprocess
import tracemalloc
import warnings
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Tape, TapeError, ToolRegistry, load_config, review
from tapetui.core import runlog, tapefile
from tapetui.core.runlog import RunLogReader, RunLogWarning, RunSummary, read_run_log
from tapetui.core.store import runlog_path
from tapetui.core.tapefile import Appender, read_index
from tests.builders import HEADER, call_line
from tests.conftest import tapetui_cli

from .conftest import Calls

ROOT = Path(__file__).resolve().parent.parent


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tapetui_cli(cwd, *args, env={"NO_COLOR": "1"})


def answered_cleanly(r: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stdout[-500:], r.stderr[-500:])
    assert "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


def call(seq: int, tool: str, args: dict[str, Any], result: Any = None) -> bytes:
    return call_line(seq=seq, tool=tool, args=args, result=result)


# ---- FIFOs and folders named like tapes and run logs ---------------------------------------------
@pytest.mark.parametrize(
    "name,kind",
    [
        ("zz.jsonl", "fifo"),
        ("clean.candidate.jsonl", "fifo"),
        ("clean.run.jsonl", "fifo"),
        ("clean.run.jsonl", "dir"),
    ],
)
def test_a_fifo_or_folder_named_like_a_tape_never_hangs_check(sample_dir: Path, name: str, kind: str) -> None:
    target = sample_dir / "sample_tapes" / name
    target.unlink(missing_ok=True)
    os.mkfifo(target) if kind == "fifo" else target.mkdir()
    r = run(sample_dir, "check")
    answered_cleanly(r, f"{target}: not a regular file ({'a FIFO' if kind == 'fifo' else 'a folder'})")


def test_readers_refuse_non_regular_files_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "s.jsonl"
    os.mkfifo(fifo)  # with no writer, a blocking open would wait for ever
    with pytest.raises(TapeError, match=r"s\.jsonl: not a regular file \(a FIFO\); a tape"):
        read_index(fifo)
    with pytest.raises(TapeError, match="not a regular file"):
        review.load(fifo)
    log = tmp_path / "s.run.jsonl"
    os.mkfifo(log)
    with pytest.raises(TapeError, match=r"s\.run\.jsonl: not a regular file \(a FIFO\); a run log"):
        read_run_log(log)
    with pytest.raises(TapeError, match="not a regular file"):
        RunLogReader(log).poll()
    folder = tmp_path / "d.run.jsonl"
    folder.mkdir()
    with pytest.raises(TapeError, match=r"d\.run\.jsonl: not a regular file \(a folder\)"):
        read_run_log(folder)
    with pytest.raises(TapeError, match=r"a tape must be a plain file"):
        read_index(folder)


def test_a_tape_swapped_for_a_fifo_after_the_scan_is_an_error(tmp_path: Path) -> None:
    tape = tmp_path / "s.jsonl"
    tape.write_bytes(HEADER + call(1, "t", {"a": 1}, 1) + call(2, "t", {"a": 2}, 2))
    idx = read_index(tape, validate=True)
    tape.unlink()
    os.mkfifo(tape)
    with pytest.raises(TapeError, match="not a regular file"):
        list(idx.records())
    with pytest.raises(TapeError, match="not a regular file"):
        idx.raw_line(0)


# ---- no newline: linear time, bounded memory -------------------------------------------------------
@pytest.fixture
def small_limits(monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """The scanners' chunk and longest kept line, made small so the test runs on kilobytes."""
    chunk, limit = 64 * 1024, 1024 * 1024
    monkeypatch.setattr(tapefile, "_CHUNK", chunk)
    monkeypatch.setattr(tapefile, "MAX_LINE", limit)
    monkeypatch.setattr(runlog, "_CHUNK", chunk)
    monkeypatch.setattr(runlog, "MAX_LINE", limit)
    return chunk, limit


def test_a_tail_without_newline_is_torn_and_never_held(tmp_path: Path, small_limits: tuple[int, int]) -> None:
    chunk, limit = small_limits
    tape = tmp_path / "s.jsonl"
    head = HEADER + call(1, "t", {"a": 1}, 1)
    tail = 8 * limit  # far past the longest kept line, and no newline: a torn tail of that size
    with open(tape, "wb") as fh:
        fh.write(head)
        fh.truncate(len(head) + tail)  # sparse: NUL bytes
    tracemalloc.start()
    try:
        idx = read_index(tape, validate=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(idx) == 1 and idx.scanned == len(head)
    assert idx.torn is not None and (idx.torn.line, idx.torn.offset, idx.torn.size) == (3, len(head), tail)
    assert idx.size == len(head) + tail
    assert peak < 6 * chunk, peak  # a few chunks, not the tail (the old scan held all of it, and copied it anew)
    assert len(read_index(tape)) == 1  # the replay path too


def test_a_long_line_of_whitespace_without_newline_is_not_torn(tmp_path: Path, small_limits: tuple[int, int]) -> None:
    tape = tmp_path / "s.jsonl"
    tape.write_bytes(HEADER + b" " * (3 * small_limits[0]))
    idx = read_index(tape)
    assert idx.torn is None and idx.scanned == len(HEADER)


def test_lines_longer_than_a_chunk_still_read_and_longer_than_the_limit_are_named(
    tmp_path: Path, small_limits: tuple[int, int]
) -> None:
    chunk, limit = small_limits
    blob = "x" * (3 * chunk)  # spans chunks: read again whole when its newline comes
    tape = tmp_path / "s.jsonl"
    tape.write_bytes(HEADER + call(1, "t", {"blob": blob}, 1) + call(2, "t", {"a": 2}, 2))
    for validate in (True, False):
        idx = read_index(tape, validate=validate)
        assert list(idx.seqs) == [1, 2] and idx.torn is None
        assert idx.record(0).args["blob"] == blob and idx.record(1).result == 2
    huge = call(2, "t", {"blob": "y" * (limit + 10)}, 2)
    tape.write_bytes(HEADER + call(1, "t", {"a": 1}, 1) + huge + call(3, "t", {"a": 3}, 3))
    with pytest.raises(TapeError, match=rf"s\.jsonl:3: line is {len(huge):,} bytes long, more than the {limit:,}"):
        read_index(tape, validate=True)


def test_run_log_reader_is_bounded_on_long_lines(tmp_path: Path, small_limits: tuple[int, int]) -> None:
    chunk, limit = small_limits
    log = tmp_path / "s.run.jsonl"
    pad = "p" * (2 * chunk)
    long_ok = orjson.dumps({"event": "hit", "seq": 1, "tool": "t", "pad": pad}) + b"\n"
    log.write_bytes(b'{"event":"start"}\n' + long_ok + b"z" * (limit + 5) + b"\n" + b'{"event":"end"}\n')
    reader = RunLogReader(log)
    events = reader.poll()[1]
    assert [e["event"] for e in events] == ["start", "hit", "invalid", "end"]
    assert events[1]["pad"] == pad and events[2]["line"] == 3 and "bytes long" in events[2]["problem"]
    # a growing tail without newline is not held past a chunk, and becomes events once it ends
    with open(log, "ab") as fh:
        fh.write(b'{"event":"hit","seq":2,"pad":"' + b"q" * (3 * chunk))
    assert reader.poll()[1] == [] and reader._partial == b""
    with open(log, "ab") as fh:
        fh.write(b'"}\n')
    (ev,) = reader.poll()[1]
    assert ev["seq"] == 2 and ev["line"] == 5 and len(ev["pad"]) == 3 * chunk


# ---- malformed run logs ------------------------------------------------------------------------
MALFORMED = {
    "changes_ints": ({"event": "drift", "seq": 3, "tool": "summarize", "changes": [1, 2]}, "'changes' must be a list"),
    "changes_text": ({"event": "drift", "seq": 3, "tool": "summarize", "changes": "x"}, "'changes' must be a list"),
    "changes_short": ({"event": "drift", "seq": 3, "tool": "s", "changes": [["a", 1]]}, "'changes' must be a list"),
    "end_error_text": ({"event": "end", "error": "boom"}, "'error' must be an object"),
    "end_error_type_int": ({"event": "end", "error": {"type": 5, "message": "m"}}, "'error' must be an object"),
    "nearest_object": ({"event": "miss", "seq": 2, "tool": "x", "nearest": {}}, "'nearest' must be an integer"),
    "not_an_object": ([1, 2], "an event must be a JSON object"),
    "stats_text": ({"event": "end", "stats": "x"}, "'stats' must be an object"),
    "explanation_int": ({"event": "fingerprint", "seq": 1, "tool": "x", "explanation": 5}, "'explanation' must be"),
    "seq_text": ({"event": "hit", "seq": "3", "tool": "x"}, "'seq' must be an integer"),
    "tool_object": ({"event": "hit", "seq": 1, "tool": {"a": 1}}, "'tool' must be a string"),
    "event_number": ({"event": 5}, "'event' must be a string"),
}


@pytest.mark.parametrize("shape", MALFORMED)
def test_a_malformed_run_log_is_an_error_naming_file_and_line(sample_dir: Path, shape: str) -> None:
    event, problem = MALFORMED[shape]
    log = sample_dir / "sample_tapes" / "clean.run.jsonl"
    log.write_bytes(b'{"event":"start","mode":"replay"}\n' + orjson.dumps(event) + b"\n" + b'{"event":"end"}\n')
    r = run(sample_dir, "check")
    answered_cleanly(r, f"{log}:2: ", problem)
    answered_cleanly(run(sample_dir, "diff", "clean", str(log)), f"{log}:2: ", problem)
    # the app's summariser: counted as invalid, said with its line, the rest of the run still summed up
    events = RunLogReader(log).poll()[1]
    summary = RunSummary.of(events)
    assert summary.invalid == 1 and summary.ended and summary.problems[0].startswith("line 2: ")
    assert problem in summary.problems[0]
    raw = RunSummary()  # events handed over as they are, not from the reader: no exception either
    raw.add(event)  # type: ignore[arg-type]
    assert raw.invalid == 1
    cfg = load_config(sample_dir / "tapes.toml")
    with pytest.raises(TapeError, match=f"event 1: .*{problem[:12]}"):
        review.compare_run(read_index(cfg.tapes_dir / "clean.jsonl"), [event], cfg)  # type: ignore[list-item]


@pytest.mark.slow
def test_a_run_log_that_is_a_directory_or_has_bad_json(sample_dir: Path) -> None:
    log = sample_dir / "sample_tapes" / "clean.run.jsonl"
    log.write_bytes(b'{"event":"start"}\n{"event": nope}\n{"event":"end"}\n')
    answered_cleanly(run(sample_dir, "check"), f"{log}:2: invalid JSON")
    log.unlink()
    log.mkdir()
    answered_cleanly(run(sample_dir, "check"), f"{log}: not a regular file (a folder)")
    answered_cleanly(run(sample_dir, "stats"), f"{log}: not a regular file (a folder)")


# ---- names too long, tapes that vanish, bytes that are not UTF-8 ------------------------------------
@pytest.mark.slow
def test_a_name_too_long_for_the_file_system(sample_dir: Path, registry: ToolRegistry) -> None:
    name = "x" * 300
    for args in (("accept", name, "--why", "w"), ("diff", name), ("expire", name, "--step", "1"), ("stats", name)):
        answered_cleanly(run(sample_dir, *args), "File name too long")
    # a golden whose own name fits but whose candidate's name does not
    g = sample_dir / "sample_tapes" / ("y" * 245 + ".jsonl")
    shutil.copy(sample_dir / "sample_tapes" / "clean.jsonl", g)
    answered_cleanly(run(sample_dir, "check"), ".candidate.jsonl: File name too long")
    with pytest.raises(TapeError, match="too long"):  # refused before anything, with the limit named
        Tape(sample_dir / "sample_tapes" / (name + ".jsonl"), "record", registry)


def test_a_tape_deleted_between_scan_and_decode(sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"  # has a candidate: check decodes the golden after scanning it
    idx = read_index(g, validate=True)
    g.unlink()
    with pytest.raises(TapeError, match=r"drift_summarize\.jsonl: cannot read tape: No such file"):
        list(idx.records())
    shutil.copy(ROOT / "sample_tapes" / "drift_summarize.jsonl", g)
    scan = read_index
    deleted = []

    def scan_then_delete(path: Path, **kw: Any) -> Any:
        out = scan(path, **kw)
        if Path(path) == g and not deleted:  # once: gone between the scan and the decode of its calls
            deleted.append(g.read_bytes())
            g.unlink()
        return out

    for module in ("tapetui.review.comparison", "tapetui.review.findings"):  # load, and check_session's golden
        monkeypatch.setattr(importlib.import_module(module), "read_index", scan_then_delete)
    with pytest.raises(TapeError, match=r"drift_summarize\.jsonl: cannot read tape: No such file"):
        review.load(g)
    g.write_bytes(deleted.pop())
    rep = review.check_session(g, cfg)  # no traceback: the session is read again as it now is
    assert rep.error is None and [f.kind for f in rep.findings] == ["pending"]
    assert "pending new session" in rep.findings[0].text


def _bad_utf8_tape(path: Path) -> None:
    line = call(1, "tool\xff", {"a": 1}, 1).replace("tool\xff".encode(), b"tool\xff")  # a raw 0xFF byte
    path.write_bytes(HEADER + call(1, "ok", {"a": 1}, 1).replace(b'"seq":1', b'"seq":2') + line)


@pytest.mark.parametrize("mode", ["replay", "fill"])
def test_invalid_utf8_in_a_tool_name_is_an_error_naming_the_line(
    tmp_path: Path, registry: ToolRegistry, calls: Calls, mode: str
) -> None:
    tape = tmp_path / "s.jsonl"
    _bad_utf8_tape(tape)
    with pytest.raises(TapeError, match=r"s\.jsonl:3: invalid JSON: .*UTF-8"):
        Tape(tape, mode, registry)
    with pytest.raises(TapeError, match=r"s\.jsonl:3: invalid JSON"):
        read_index(tape)
    assert calls.n == {}


def test_a_tool_name_that_is_not_utf8_text_is_refused_before_anything(
    tmp_path: Path, registry: ToolRegistry, calls: Calls
) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        t.call("search", {"query": "q"})
    with Tape(tape, "replay", registry) as t:
        with pytest.raises(TapeError, match="is not valid UTF-8 text"):
            t.call("search\udcff", {"query": "q"})
        assert t.call("search", {"query": "q"}) == ["hit for q"] and t.stats()["steps"] == 1
    assert calls.n == {"search": 1}


# ---- a run log that cannot be written --------------------------------------------------------------
def test_replay_on_a_read_only_checkout_goes_on_without_its_run_log(
    tmp_path: Path, registry: ToolRegistry, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry, run_log=False) as t:
        t.call("search", {"query": "q"})
        t.call("send_email", {"to": "a@example.com", "body": "b"})
    before, outbox = dict(calls.n), (tmp_path / "outbox.txt").read_text()

    def read_only(path: Path, *a: Any, **kw: Any) -> None:
        raise OSError(errno.EROFS, "Read-only file system", str(path))

    monkeypatch.setattr(runlog, "open_run", read_only)
    with pytest.warns(RunLogWarning, match=r"s\.run\.jsonl: Read-only file system.*goes on without it"):
        t = Tape(tape, "replay", registry)
    with t, warnings.catch_warnings():
        warnings.simplefilter("error")  # said once, not at every event
        assert t.call("search", {"query": "q"}) == ["hit for q"]
        assert t.call("send_email", {"to": "a@example.com", "body": "b"}) == {"sent": True}
        stats = t.stats()
    assert stats["run_log"] == f"failed: {runlog_path(tape)}: Read-only file system"
    assert stats["tape_hits"] == 2 and stats["live_tool_calls"] == 0 and stats["real_side_effects"] == 0
    assert calls.n == before and (tmp_path / "outbox.txt").read_text() == outbox  # no tool ran, no side effect
    assert not runlog_path(tape).exists()


def test_a_folder_in_place_of_the_run_log_and_a_disk_that_fills_mid_run(
    tmp_path: Path, registry: ToolRegistry, calls: Calls, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry, run_log=False) as t:
        t.call("search", {"query": "q"})
        t.call("search", {"query": "r"})
    runlog_path(tape).mkdir()
    with pytest.warns(RunLogWarning, match="cannot write the run log"), Tape(tape, "replay", registry) as t:
        assert t.call("search", {"query": "q"}) == ["hit for q"]
    assert t.stats()["run_log"].startswith("failed: ")
    runlog_path(tape).rmdir()

    def full(self: Appender, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.warns(RunLogWarning, match="No space left on device"), Tape(tape, "replay", registry) as t:
        monkeypatch.setattr(Appender, "append", full)
        assert t.call("search", {"query": "q"}) == ["hit for q"]
        assert t.call("search", {"query": "r"}) == ["hit for r"]
    assert t.stats()["run_log"] == f"failed: {runlog_path(tape)}: No space left on device"
    assert calls.n == {"search": 2}  # the two recorded calls, nothing since
    with Tape(tape, "replay", registry, run_log=False) as t:
        assert t.stats()["run_log"] == "off"
