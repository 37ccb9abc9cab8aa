"""The index cache changes how fast a tape opens, never what the open returns."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapetui import Tape, TapeError, ToolRegistry
from tapetui.core import indexcache
from tapetui.core.files import atomic_write
from tapetui.core.index import TapeIndex
from tapetui.core.keys import key_of
from tapetui.core.tapefile import Appender, read_index

FIELDS = (
    "seqs",
    "offsets",
    "lengths",
    "lines",
    "ms",
    "side_effects",
    "tools",
    "keys",
    "fingerprints",
    "expires",
    "key_next",
    "key_first",
    "header",
    "manifest_lines",
    "unknown_lines",
    "size",
    "scanned",
    "line_count",
    "torn",
    "fp_forms",
    "turns",
)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("TAPETUI_CACHE_DIR", str(folder))
    monkeypatch.setattr(indexcache, "MIN_BYTES", 0)  # every tape is big enough here
    monkeypatch.setattr(indexcache, "RACY_NS", 0)  # and old enough
    return folder


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(version="1", ttl=60)
    def quote(symbol: str) -> dict[str, Any]:
        return {"symbol": symbol, "price": len(symbol)}

    @reg.tool(version="2", side_effect=True)
    def write(path: str) -> bool:
        return True

    return reg


def _tape(path: Path, n: int = 40) -> Path:
    """Two tools, repeated keys, expiry times, then lines only the slow path reads; recorded with the cache off,
    as a tape some other writer made (a recording leaves its index: see the last tests)."""
    with _cache_off(), Tape(path, "record", _registry(), run_log=False) as t:
        for i in range(n):
            t.call("quote", {"symbol": f"S{i % 7}"})  # each key seven-ish times: chains
            if i % 5 == 0:
                t.call("write", {"path": f"out{i}"})
            if i % 9 == 0:  # a model turn among them: the cache keeps where it is, a warm open reads it again
                request = {"messages": [{"role": "user", "parts": [{"type": "text", "content": f"q{i}"}]}]}
                t.model(request, live=lambda: {"parts": [], "usage": {"input": 3, "output": 1}}, model="m:1")
    with Appender(path) as out:
        out.append(
            b'{"seq":900,"tool":"quote","args":{"symbol":"HAND"},"result":1}\n'  # no key: computed
            b'{"type":"hologram","v":9}\n'
        )
    return path


@contextlib.contextmanager
def _cache_off() -> Iterator[None]:
    before = os.environ.get("TAPETUI_CACHE_DIR")
    os.environ["TAPETUI_CACHE_DIR"] = "off"
    try:
        yield
    finally:
        if before is None:
            del os.environ["TAPETUI_CACHE_DIR"]
        else:
            os.environ["TAPETUI_CACHE_DIR"] = before


def _same(a: TapeIndex, b: TapeIndex) -> None:
    for name in FIELDS:
        assert getattr(a, name) == getattr(b, name), name
    assert {k: m.fingerprint for k, m in a.manifests.items()} == {k: m.fingerprint for k, m in b.manifests.items()}


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.idx")) if folder.exists() else []


def test_a_cached_index_is_the_scanned_index(tmp_path: Path, cache: Path) -> None:
    tape = _tape(tmp_path / "t.jsonl")
    cold = read_index(tape)
    assert not cold.from_cache and len(_entries(cache)) == 1
    warm = read_index(tape)
    assert warm.from_cache
    _same(warm, read_index(tape, validate=True))
    _same(warm, cold)
    assert warm.record(len(warm) - 1).args == {"symbol": "HAND"}


def test_appended_lines_are_scanned_on_top_of_the_entry(tmp_path: Path, cache: Path) -> None:
    tape = _tape(tmp_path / "t.jsonl")
    read_index(tape)
    line = (
        orjson.dumps(
            {
                "type": "call",
                "seq": 901,
                "tool": "quote",
                "key": read_index(tape).keys[0],
                "args": {"symbol": "S0"},
                "result": 7,
            }
        )
        + b"\n"
    )
    with Appender(tape) as out:
        out.append(line)  # the key of call 0 once more: its chain crosses the end of the entry
    warm = read_index(tape)
    assert warm.from_cache
    fresh = read_index(tape, validate=True)
    _same(warm, fresh)
    last = len(fresh) - 1
    i = fresh.key_first[fresh.keys[0]]
    while fresh.key_next[i] >= 0:
        i = fresh.key_next[i]
    assert i == last


def test_a_torn_tail_stays_out_of_the_entry(tmp_path: Path, cache: Path) -> None:
    tape = _tape(tmp_path / "t.jsonl")
    with open(tape, "ab") as fh:
        fh.write(b'{"type":"call","seq":999,"to')
    read_index(tape)
    warm = read_index(tape)
    assert warm.from_cache and warm.torn is not None and warm.torn.line == warm.line_count + 1
    _same(warm, read_index(tape, validate=True))


@pytest.mark.parametrize("change", ["same size, new mtime", "replaced", "shorter", "same size and mtime"])
def test_a_rewritten_tape_is_scanned_again(tmp_path: Path, cache: Path, change: str) -> None:
    tape = _tape(tmp_path / "t.jsonl", n=400)  # more than the 64 KiB whose hash an entry keeps
    first = read_index(tape)
    data = tape.read_bytes()
    st = tape.stat()
    j = 4  # a call near the start: not one of the three decoded when an entry loads, not in the hashed tail
    line = first.raw_line(j)
    old_key = first.keys[j].encode()
    new_key = old_key[:-1] + (b"0" if old_key[-1:] != b"0" else b"1")
    edited = data[: first.offsets[j]] + line.replace(old_key, new_key) + data[first.offsets[j] + len(line) :]
    assert len(edited) == len(data)
    if change == "replaced":
        atomic_write(tape, edited)
    elif change == "shorter":
        tape.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 1])
    else:
        with open(tape, "r+b") as fh:
            fh.write(edited)
        if change == "same size and mtime":  # forged: only decoding the line can tell
            os.utime(tape, ns=(st.st_atime_ns, st.st_mtime_ns))
    idx = read_index(tape)
    if change != "same size and mtime":
        assert not idx.from_cache
        _same(idx, read_index(tape, validate=True))
        return
    # The entry passes its checks; the edited line is not the call it indexed, and decoding it says so.
    assert idx.from_cache
    with pytest.raises(TapeError, match=r"t\.jsonl:\d+: the tape changed after it was opened"):
        idx.record(j)
    assert _entries(cache) == []  # the stale entry is gone: the next open scans
    assert not read_index(tape).from_cache


def test_a_damaged_entry_only_means_a_scan(tmp_path: Path, cache: Path) -> None:
    tape = _tape(tmp_path / "t.jsonl")
    expected = read_index(tape, validate=True)
    read_index(tape)
    (entry,) = _entries(cache)
    good = entry.read_bytes()
    damaged = [
        b"",
        good[:10],
        good[: len(good) // 2],
        b"garbage" * 100,
        good[:-1] + bytes([good[-1] ^ 1]),
        good[:40] + bytes([good[40] ^ 0x10]) + good[41:],
    ]
    for data in damaged:
        entry.write_bytes(data)
        idx = read_index(tape)
        assert not idx.from_cache
        _same(idx, expected)
    entry.write_bytes(good)
    entry.chmod(0o666)  # intact, but others could have written it
    assert not read_index(tape).from_cache
    entry.chmod(0o600)
    assert read_index(tape).from_cache


def test_replay_from_a_cached_index_in_and_out_of_order(tmp_path: Path, cache: Path) -> None:
    reg = ToolRegistry()
    counter = iter(range(100))

    @reg.tool(version="1")
    def tick(name: str) -> int:
        return next(counter)

    tape = tmp_path / "t.jsonl"
    order = ["a", "x", "a", "b", "a"]
    with _cache_off(), Tape(tape, "record", reg, run_log=False) as t:  # the recording leaves no entry
        recorded = [t.call("tick", {"name": n}) for n in order]
    for attempt in range(2):  # the first open scans, the second loads the entry
        with Tape(tape, "replay", reg, run_log=False) as t:
            assert t._index is not None and t._index.from_cache == (attempt == 1)
            # out of order: x first, then each "a" gets the earliest recorded "a" not yet replayed
            assert t.call("tick", {"name": "x"}) == recorded[1]
            assert [t.call("tick", {"name": "a"}) for _ in range(3)] == [recorded[0], recorded[2], recorded[4]]
            assert t.call("tick", {"name": "b"}) == recorded[3]
        with Tape(tape, "replay", reg, run_log=False) as t:  # in order
            assert [t.call("tick", {"name": n}) for n in order] == recorded
            assert t.stats()["tape_hits"] == 5


def test_cache_off_and_eviction(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tapes = [_tape(tmp_path / f"t{i}.jsonl", n=5) for i in range(3)]
    monkeypatch.setenv("TAPETUI_CACHE_DIR", "off")
    assert not read_index(tapes[0]).from_cache and not cache.exists()
    monkeypatch.setenv("TAPETUI_CACHE_DIR", str(cache))
    monkeypatch.setattr(indexcache, "MAX_ENTRIES", 2)
    read_index(tapes[0])
    os.utime(_entries(cache)[0], ns=(1, 1))  # t0's entry is the least recently used
    for tape in tapes[1:]:
        read_index(tape)
    assert len(_entries(cache)) == 2
    assert not read_index(tapes[0]).from_cache  # evicted
    assert oct(cache.stat().st_mode & 0o777) == "0o700"
    assert all(e.stat().st_mode & 0o077 == 0 for e in _entries(cache))


def test_a_tape_written_a_moment_ago_is_not_saved_yet(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexcache, "RACY_NS", 60 * 10**9)
    tape = _tape(tmp_path / "t.jsonl", n=3)
    read_index(tape)
    assert _entries(cache) == []  # a same-sized rewrite now could keep this mtime
    old = tape.stat().st_mtime_ns - 120 * 10**9
    os.utime(tape, ns=(old, old))
    read_index(tape)
    assert read_index(tape).from_cache


def test_small_tapes_are_not_cached(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(indexcache, "MIN_BYTES", 1 << 20)
    tape = _tape(tmp_path / "t.jsonl", n=3)
    read_index(tape)
    assert _entries(cache) == [] and not read_index(tape).from_cache


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.lists(st.integers(0, 5), min_size=1, max_size=6)),  # symbols: keys repeat
        st.tuples(st.just("torn"), st.integers(1, 40)),
        st.tuples(st.just("truncate"), st.integers(0, 10)),
        st.tuples(st.just("splice"), st.lists(st.integers(0, 5), min_size=3, max_size=6)),  # cut lines, append more
        st.tuples(st.just("rewrite"), st.integers(0, 50)),
        st.tuples(st.just("replace"), st.integers(0, 50)),
    ),
    min_size=1,
    max_size=8,
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60, deadline=None)
@given(ops=_OPS)
@pytest.mark.slow
def test_whatever_happens_to_a_tape_an_open_returns_its_scan(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, Any]]
) -> None:
    """Appends, torn tails, truncation, in-place and atomic rewrites between opens: the cached open is the scan."""
    d = tmp_path_factory.mktemp("prop")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TAPETUI_CACHE_DIR", str(d / "cache"))
        mp.setattr(indexcache, "MIN_BYTES", 0)
        mp.setattr(indexcache, "RACY_NS", 0)
        tape = _tape(d / "t.jsonl", n=12)
        clock = tape.stat().st_mtime_ns - 10**12  # in the past, a second per step
        seq = 1000
        for op, arg in ops:
            data = tape.read_bytes()
            starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10][:-1]
            if op == "splice" and len(starts) > 3:
                tape.write_bytes(data[: starts[-2]])  # the last two lines go; longer ones come after them
            if op in ("append", "splice"):
                lines = []
                for sym in arg:
                    seq += 1
                    args = {"symbol": f"S{sym}"}
                    lines.append(
                        orjson.dumps(
                            {
                                "type": "call",
                                "seq": seq,
                                "tool": "quote",
                                "key": key_of("quote", args),
                                "args": args,
                                "result": seq,
                            }
                        )
                        + b"\n"
                    )
                with Appender(tape) as out:  # sets a torn tail aside first, as every writer does
                    out.append(b"".join(lines))
            elif op == "torn":
                with open(tape, "ab") as fh:
                    fh.write(b'{"type":"call","seq":1,"tool":"quote","key":"x'[:arg])
            elif op == "truncate" and len(starts) > 3:
                tape.write_bytes(data[: starts[max(3, len(starts) - 1 - arg)]])
            elif op in ("rewrite", "replace"):
                i = data.find(b'"key":"quote:', starts[arg % len(starts)])
                if i < 0:
                    continue
                j = i + len(b'"key":"quote:')
                edited = data[:j] + (b"0" if data[j : j + 1] != b"0" else b"1") + data[j + 1 :]
                if op == "replace":
                    atomic_write(tape, edited)
                else:
                    with open(tape, "r+b") as fh:
                        fh.write(edited)
            clock += 10**9  # a second passes between writes and opens, as the racy guard ensures for real
            os.utime(tape, ns=(clock, clock))
            try:
                expected = read_index(tape, validate=True)
            except TapeError:
                continue
            first, again = read_index(tape), read_index(tape)
            _same(first, expected)
            _same(again, expected)
            assert again.from_cache
            for i in range(len(again)):  # every line decodes as the index says
                again.record(i)


def test_a_recording_leaves_its_index_and_the_first_replay_loads_it(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(indexcache, "RACY_NS", 60 * 10**9)  # a scan's own save waits; the recorder's does not
    tape = tmp_path / "t.jsonl"
    with Tape(tape, "record", _registry(), run_log=False) as t:
        for i in range(30):
            t.call("quote", {"symbol": f"S{i % 7}"})
    assert len(_entries(cache)) == 1
    first = read_index(tape)
    assert first.from_cache  # the first open after the recording: no scan
    _same(first, read_index(tape, validate=True))
    with Tape(tape, "replay", _registry(), run_log=False) as t:
        assert [t.call("quote", {"symbol": f"S{i % 7}"}) for i in range(30)][-1] == {"symbol": "S1", "price": 2}


def test_a_recording_another_writer_appended_to_leaves_no_index(tmp_path: Path, cache: Path) -> None:
    tape = tmp_path / "t.jsonl"
    with Tape(tape, "record", _registry(), run_log=False) as t:
        t.call("quote", {"symbol": "A"})
        with Appender(tape) as other:  # another process's line between two of ours
            other.append(b'{"seq":50,"tool":"quote","args":{"symbol":"Z"},"result":1}\n')
        t.call("quote", {"symbol": "B"})
    assert _entries(cache) == []
    assert not read_index(tape).from_cache
