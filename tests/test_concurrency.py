"""Eight processes append to one tape and one run log while a reader (the app's) keeps reading."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import orjson
import pytest

from tapetui.core.runlog import RunLog, RunLogReader, read_run_log
from tapetui.core.tapefile import Appender, call_line, dump_line, read_index

pytestmark = pytest.mark.slow  # `pytest -m "not slow"` skips the harnesses for a quick loop

WRITERS = 8
PER_WRITER = 150


def _writer(tape: str, runlog: str, w: int, go: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    go.wait(30)
    with Appender(Path(tape)) as t, Appender(Path(runlog)) as log:
        for i in range(PER_WRITER):
            # sizes straddle PIPE_BUF and the reader's chunk size: 200 B … 70 KB
            pad = "x" * (200 if i % 3 else 5_000 if i % 2 else 70_000)
            t.append(
                call_line(
                    seq=w * 1000 + i + 1,
                    tool=f"w{w}",
                    key=f"w{w}:{i}",
                    fingerprint="0" * 16,
                    side_effect=False,
                    ms=1.0,
                    expires_at=None,
                    recorded_at="2026-01-01T00:00:00Z",
                    args={"i": i, "pad": pad},
                    result={"w": w, "i": i},
                )
            )
            log.append(
                orjson.dumps({"event": "hit", "seq": i + 1, "tool": f"w{w}", "key": f"w{w}:{i}", "pad": pad}) + b"\n"
            )


def test_eight_appenders_and_a_reader(tmp_path: Path) -> None:
    tape, runlog = tmp_path / "s.jsonl", tmp_path / "s.run.jsonl"
    tape.write_bytes(dump_line({"type": "session", "v": 1}))
    RunLog(runlog, {"mode": "record"}).close()
    ctx = mp.get_context("spawn")
    go = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(tape), str(runlog), w, go)) for w in range(WRITERS)]
    for p in procs:
        p.start()
    reader = RunLogReader(runlog)
    events: list[dict[str, object]] = []
    reads = 0
    go.set()
    deadline = time.monotonic() + 120
    while any(p.is_alive() for p in procs):
        assert time.monotonic() < deadline, "writers did not finish"
        events += reader.poll()[1]  # incremental, as the app reads: partial lines wait for their newline
        idx = read_index(tape, validate=True)  # a line being written shows as a torn tail, never as an error
        reads += 1
        seen = len(idx)
        assert seen <= WRITERS * PER_WRITER
    for p in procs:
        p.join(10)
        assert p.exitcode == 0
    events += reader.poll()[1]
    assert reads > 5  # the reader really ran alongside the writers

    idx = read_index(tape, validate=True)
    assert idx.torn is None
    assert len(idx) == WRITERS * PER_WRITER
    assert len(set(idx.keys)) == WRITERS * PER_WRITER
    for w in range(WRITERS):  # each writer's lines are whole and in its own order
        mine = [i for i in range(len(idx)) if idx.tools[i] == f"w{w}"]
        assert [idx.record(i).args["i"] for i in mine] == list(range(PER_WRITER))

    hits = [e for e in events if e["event"] == "hit"]
    assert not [e for e in events if e["event"] == "invalid"]
    assert len(hits) == WRITERS * PER_WRITER
    assert len({e["key"] for e in hits}) == WRITERS * PER_WRITER
    assert [e["event"] for e in read_run_log(runlog)].count("hit") == WRITERS * PER_WRITER
