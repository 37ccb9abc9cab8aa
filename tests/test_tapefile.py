from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import orjson
import pytest

from tapetui import Tape, TapeError, ToolRegistry
from tapetui.core import tapefile
from tapetui.core.tapefile import Appender, call_line, read_index, torn_path


def _lines(n: int, tag: str) -> list[bytes]:
    return [
        orjson.dumps(
            {"type": "call", "seq": i + 1, "tool": "t", "key": f"t:{tag}{i}", "args": {"pad": "x" * 500}, "result": i}
        )
        + b"\n"
        for i in range(n)
    ]


def _appender_proc(path: str, tag: str, n: int) -> None:
    with Appender(Path(path)) as out:
        for line in _lines(n, tag):
            out.append(line)


def test_two_processes_appending_never_interleave(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_appender_proc, args=(str(tape), tag, 400)) for tag in ("a", "b")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    idx = read_index(tape, validate=True)
    keys = sorted(idx.keys)
    assert len(keys) == 800 and len(set(keys)) == 800
    assert idx.torn is None


def test_torn_tail_is_reported_then_set_aside_on_next_append(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    good = _lines(2, "g")
    tape.write_bytes(b"".join(good) + b'{"type":"call","seq":3,"tool":"t","ke')
    before = tape.read_bytes()
    idx = read_index(tape)
    assert len(idx) == 2 and idx.torn is not None and idx.torn.line == 3
    assert tape.read_bytes() == before  # reading changes nothing
    with Appender(tape) as out:
        out.append(_lines(1, "n")[0])
    assert torn_path(tape).read_bytes() == b'{"type":"call","seq":3,"tool":"t","ke\n'
    idx = read_index(tape, validate=True)
    assert [k for k in idx.keys] == ["t:g0", "t:g1", "t:n0"] and idx.torn is None


def test_malformed_line_names_file_line_and_problem(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    tape.write_bytes(b"".join(_lines(2, "g")) + b"{not json}\n" + _lines(1, "z")[0])
    with pytest.raises(TapeError, match=r"t\.jsonl:3: invalid JSON"):
        read_index(tape)
    # the writer's own leading fields, then a line cut short: the fast path must not take it
    cut = (
        call_line(
            seq=3,
            tool="t",
            key="t:c",
            fingerprint="",
            side_effect=False,
            ms=1.0,
            expires_at=None,
            recorded_at="2026-01-01T00:00:00Z",
            args={"pad": "x" * 50},
            result=1,
        )[:-20]
        + b"\n"
    )
    tape.write_bytes(b"".join(_lines(2, "g")) + cut + _lines(1, "z")[0])
    with pytest.raises(TapeError, match=r"t\.jsonl:3: invalid JSON"):
        read_index(tape)
    tape.write_bytes(b'{"type":"call","tool":"t"}\n')
    with pytest.raises(TapeError, match=r"t\.jsonl:1: call has no valid 'seq'"):
        read_index(tape)
    tape.write_bytes(b"[1,2]\n")
    with pytest.raises(TapeError, match=r":1: expected a JSON object"):
        read_index(tape)
    tape.write_bytes(b'{"hello": 1}\n')
    with pytest.raises(TapeError, match=r":1: line has no 'type'"):
        read_index(tape)


def test_untyped_call_lines_future_types_and_unknown_fields(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    tape.write_bytes(b'{"seq":1,"tool":"t","args":{"a":1},"result":2,"extra":"kept"}\n{"type":"hologram","data":1}\n')
    idx = read_index(tape)
    assert len(idx) == 1 and idx.unknown_lines == 1
    rec = idx.record(0)
    assert rec.result == 2 and rec.raw["extra"] == "kept" and rec.key.startswith("t:")


def test_fast_and_validated_index_agree(tmp_path: Path) -> None:
    reg = ToolRegistry()

    @reg.tool(version="1", ttl=30)
    def f(x: int) -> dict[str, int]:
        return {"x": x}

    tape = tmp_path / "t.jsonl"
    with Tape(tape, "record", reg) as t:
        for i in range(50):
            t.call("f", {"x": i})
    a, b = read_index(tape), read_index(tape, validate=True)
    for attr in ("seqs", "tools", "keys", "fingerprints", "offsets", "lengths", "lines", "expires"):
        assert getattr(a, attr) == getattr(b, attr), attr
    assert a.record(10).result == {"x": 10}


def test_a_replay_keeps_a_small_tape_in_memory_as_scanned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tape = tmp_path / "t.jsonl"
    tape.write_bytes(b"".join(_lines(3, "g")) + b'{"type":"call","se')  # a torn tail is kept, not indexed
    assert read_index(tape).data is None  # the app's sessions are not held in memory
    idx = read_index(tape, keep_bytes=True)
    assert idx.data == tape.read_bytes() and len(idx) == 3
    tape.write_bytes(b"")  # what the replay decodes is what was indexed
    assert idx.outcome(2, -1) == (2, None) and idx.record(1).key == "t:g1"
    monkeypatch.setattr(tapefile, "_CHUNK", 1000)  # a tape read in more than one piece is not kept
    tape.write_bytes(b"".join(_lines(3, "g")))
    idx = read_index(tape, keep_bytes=True)
    assert idx.data is None and idx.record(2).key == "t:g2"
