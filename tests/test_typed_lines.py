"""``check``'s typed reads (msgspec: :mod:`tapetui.core.typedlines`) conclude exactly what its dict reads conclude.

A validating scan decodes a golden's call lines typed, and ``check`` judges a run log that is one plain replay from
its typed hits (:mod:`tapetui.review.plainrun`). Each has the dict read as its twin, which stays the reference:
these tests hold the typed reads to it on the lines a writer writes, on odd and hostile ones, on lines generated
and mutated byte by byte, and on whole folders with every kind of finding.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tapetui.cli import main
from tapetui.core import lineparse, typedlines
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.index import TapeIndex
from tapetui.core.keys import key_of
from tapetui.review import findings
from tapetui.review.findings import check_session
from tapetui.review.plainrun import read_plain_run

from .builders import call_line
from .test_check_fastpaths import COLUMNS, HEADER, ODD_TAPES, TOOL, _line, _raw

# ---- a golden's call lines ------------------------------------------------------------------------------------------


def _index(data: bytes, typed: bool, monkeypatch: pytest.MonkeyPatch) -> TapeIndex | str:
    """A validating scan of ``data`` (whole lines), typed or by dicts only, or the error it raised."""
    with monkeypatch.context() as m:
        if not typed:
            m.setattr(lineparse, "fits", lambda chunk: False)
        idx = TapeIndex(Path("t.jsonl"))
        idx.verify_keys = True
        try:
            lineparse._slow(idx, data, 0, len(data), 0, 0)
        except TapeError as e:
            return str(e)
        return idx


def _facts(idx: TapeIndex | str) -> Any:
    """What an index says, as plain values to compare."""
    if isinstance(idx, str):
        return idx
    columns = {name: list(getattr(idx, name)) for name in COLUMNS}
    notes = [(n.kind, n.value, n.line) for n in idx.notes]
    return (columns, idx.expires, idx.key_mismatches, idx.header, sorted(idx.manifests), notes, idx.unknown_lines)


def _same_both_ways(data: bytes, monkeypatch: pytest.MonkeyPatch) -> Any:
    typed, plain = _index(data, True, monkeypatch), _index(data, False, monkeypatch)
    assert _facts(typed) == _facts(plain)
    return typed


def _typed_taken(data: bytes) -> bool:
    """Whether the typed read takes ``data`` itself (rather than leaving it to the dict read)."""
    idx = TapeIndex(Path("t.jsonl"))
    raws = data.split(b"\n")[:-1]
    return lineparse._typed(idx, raws, 0, 0) is not None


CALL_LINES = [call_line(seq=i + 1, tool="fetch", args={"n": i, "q": "x"}, result={"ok": i}) for i in range(5)]
CALLS = b"".join(CALL_LINES)
HOSTILE = {
    "header and calls": HEADER + CALLS,
    "a tool line among the calls": HEADER + b"".join(CALL_LINES[:2]) + TOOL + b"".join(CALL_LINES[2:]),
    "every field a writer adds": HEADER
    + call_line(seq=1, tool="t", args={}, error={"type": "E"}, requested_tool="u", extra={"order": [1, 0]}),
    "a second type, another kind": HEADER + CALLS.replace(b'"result":', b'"type":"tool","result":', 1),
    "a second seq": HEADER + CALLS.replace(b'"result":', b'"seq":7,"result":', 1),
    "a field no writer writes": HEADER + CALLS.replace(b'"result":', b'"nope":1,"result":', 1),
    "an integer past 64 bits in the arguments": HEADER
    + _raw(key="fetch:x", args={"n": 1}).replace(b'"n":1', b'"n":' + b"9" * 30),
    "an integer past 64 bits as seq": HEADER + _raw().replace(b'"seq":1', b'"seq":' + b"9" * 30),
    "a seq of 2**63": HEADER + _raw().replace(b'"seq":1', b'"seq":9223372036854775808'),
    "a seq of 0": HEADER + _raw(seq=0),
    "an empty tool name": HEADER + _raw(tool=""),
    "a seq that is a float": HEADER + _raw().replace(b'"seq":1', b'"seq":1.0'),
    "a flag that is an integer": HEADER + _raw().replace(b'"side_effect":false', b'"side_effect":0'),
    "bytes that are not UTF-8 in a result": HEADER + _raw().replace(b'"result":1', b'"result":"\xff"'),
    "a lone surrogate in a result": HEADER + _raw().replace(b'"result":1', b'"result":"\\ud800"'),
    "null arguments": HEADER + _raw(args=None),
    "no header": CALLS,
    "only a header": HEADER,
    **ODD_TAPES,
}


@pytest.mark.parametrize("data", HOSTILE.values(), ids=HOSTILE.keys())
def test_the_typed_scan_indexes_what_the_dict_scan_indexes(data: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    _same_both_ways(data, monkeypatch)


def test_the_typed_scan_takes_what_writers_write_and_leaves_the_rest() -> None:
    for name in ("header and calls", "a tool line among the calls", "every field a writer adds", "null arguments"):
        assert _typed_taken(HOSTILE[name]), name
    for name in ("a second type, another kind", "a field no writer writes", "an integer past 64 bits in the arguments"):
        assert not _typed_taken(HOSTILE[name]), name  # the dict read indexes it, as before


def test_a_hand_edited_key_is_found_whichever_way_the_lines_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    edited = HEADER + CALLS.replace(b'"n":2', b'"n":3', 1)
    idx = _same_both_ways(edited, monkeypatch)
    assert isinstance(idx, TapeIndex) and [m[1] for m in idx.key_mismatches] == [3]


@pytest.mark.parametrize("where", ["the recursion limit raised past it", "a Python whose msgspec goes deeper"])
def test_nesting_orjson_refuses_is_refused_however_deep_msgspec_goes(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = b"[" * 1100 + b"]" * 1100
    golden = HEADER + _raw(key="fetch:x", args={"a": 1}).replace(b'"result":1', b'"result":' + deep)
    log = _log_bytes([START, *_hits(4), {"event": "hit", "seq": 5, "tool": "fetch", "at": "x"}, END])
    log = log.replace(b'"at":"x"', b'"at":' + deep)
    limit = sys.getrecursionlimit()
    try:
        if where == "the recursion limit raised past it":
            sys.setrecursionlimit(5000)  # where msgspec would decode 1,100 levels on Python 3.11
        else:  # from Python 3.12 msgspec's own limit is thousands deep, whatever the recursion limit
            monkeypatch.setattr(typedlines, "_DEPTH_BOUNDED_BY_RECURSION", False)
        assert not typedlines.fits(golden) and not typedlines.fits(log)
        raised = _index(golden, True, monkeypatch)
        (tmp_path / "s.run.jsonl").write_bytes(log)
        assert read_plain_run(tmp_path / "s.run.jsonl") is None
    finally:
        sys.setrecursionlimit(limit)
    assert isinstance(raised, str) and "t.jsonl:2" in raised


def test_a_chunk_fits_by_its_digits_and_the_brackets_of_its_deepest_line(monkeypatch: pytest.MonkeyPatch) -> None:
    assert typedlines.fits(HEADER + CALLS) and typedlines.fits(b"[" * 1023)
    assert not typedlines.fits(b'{"n":' + b"1" * 19 + b"}") and typedlines.fits(b'{"n":' + b"1" * 18 + b"}")
    monkeypatch.setattr(typedlines, "_DEPTH_BOUNDED_BY_RECURSION", False)  # as from Python 3.12
    many = b'{"a":[1]}\n' * 2000  # 4,000 brackets and braces, two a line: a big golden of shallow lines fits
    assert typedlines.fits(many) and typedlines.fits(many + b"[" * 1023 + b"\n")
    assert not typedlines.fits(many + b"[" * 1024 + b"\n")


_BIG = b"9" * 400  # orjson refuses it (past a double's range); msgspec makes an int of it


@pytest.mark.parametrize(
    "field", ["result", "error", "recorded_at", "order", "call_id", "requested_tool", "rerecorded"]
)
def test_an_integer_orjson_refuses_in_any_field_is_refused_typed_too(
    field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    value = b'{"type":' + _BIG + b"}" if field == "error" else _BIG
    line = _raw().replace(b'"result":1', b'"' + field.encode() + b'":' + value) if field != "result" else None
    data = HEADER + (line or _raw().replace(b'"result":1', b'"result":' + _BIG))
    raised = _same_both_ways(data, monkeypatch)
    assert isinstance(raised, str) and "t.jsonl:2" in raised


@pytest.mark.parametrize("number", [_BIG, b"1" * 20, b"-9223372036854775809"])
def test_an_integer_outside_64_bits_in_a_hits_time_is_judged_as_events_judge_it(
    number: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = tmp_path / "tapes" / "s.jsonl"
    tape.parent.mkdir()
    tape.write_bytes(HEADER + CALLS)
    log = _log_bytes([START, *_hits(5), END]).replace(b'"at":2.0', b'"at":' + number, 1)
    tape.with_name("s.run.jsonl").write_bytes(log)
    assert read_plain_run(tape.with_name("s.run.jsonl")) is None
    typed, as_events = _reports(tape, Config.for_dir(tape.parent), monkeypatch)
    assert typed == as_events


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    args=st.dictionaries(st.text(max_size=4), _json_values, max_size=3),
    result=_json_values,
    seq=st.integers(min_value=-2, max_value=2**64),
    ms=st.one_of(st.integers(min_value=-(2**66), max_value=2**66), st.floats(allow_nan=False, allow_infinity=False)),
    expires=st.one_of(st.none(), st.text(max_size=5), st.integers()),
)
def test_generated_call_lines_index_the_same_both_ways(
    args: dict[str, Any], result: Any, seq: int, ms: float, expires: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    try:
        key = key_of("t", args)
    except (TapeError, TypeError):  # an integer past 64 bits: no key of it is written
        key = "t:x"
    line = {"type": "call", "seq": seq, "tool": "t", "key": key, "fingerprint": "f", "side_effect": False}
    line.update(ms=ms, expires_at=expires, args=args, result=result)
    try:
        data = HEADER + orjson.dumps(line) + b"\n"
    except TypeError:  # an integer orjson cannot write: written as a hostile file would hold it
        data = HEADER + json.dumps(line, separators=(",", ":")).encode() + b"\n"
    _same_both_ways(data, monkeypatch)


_GOOD = HEADER + TOOL + CALLS
_BYTES = [
    b'"',
    b"\\",
    b",",
    b"}",
    b"{",
    b"]",
    b":",
    b"\xff",
    b"\xed\xa0\x80",
    b"9" * 25,
    b"-",
    b"e",
    b"\n",
    b"\t",
    b" ",
]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    edits=st.lists(st.tuples(st.integers(0, len(_GOOD) - 1), st.integers(0, 3), st.sampled_from(_BYTES)), max_size=3)
)
def test_lines_mutated_byte_by_byte_index_the_same_both_ways(
    edits: list[tuple[int, int, bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    data = bytearray(_GOOD)
    for at, cut, put in edits:
        data[at : at + cut] = put
    whole = bytes(data[: data.rfind(b"\n") + 1])
    _same_both_ways(whole, monkeypatch)


# ---- a run log that is one plain run ------------------------------------------------------------------------------

START = {"event": "start", "mode": "replay", "golden_sha256": None, "at": 1.0}
END = {"event": "end", "stats": {}, "at": 3.0}


def _hits(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [
        {"event": "hit", "seq": i + 1, "tool": "fetch", "key": key_of("fetch", {"n": i, "q": "x"}), "step": i + 1}
        | extra
        | {"at": 2.0}
        for i in range(n)
    ]


RUNS: dict[str, list[Any]] = {
    "a clean replay": [START, *_hits(5), END],
    "a clean replay of a run group": [
        START | {"run": "r1", "group": "g"},
        *_hits(5, run="r1", group="g"),
        END | {"run": "r1"},
    ],
    "two runs of a group": [
        START | {"run": "r1"},
        *_hits(5, run="r1"),
        START | {"run": "r2"},
        *_hits(5, run="r2"),
        END,
    ],
    "hits of another run": [START | {"run": "r1"}, *_hits(4, run="r1"), *_hits(1, run="r2"), END | {"run": "r1"}],
    "a run that ended in an error": [START, *_hits(5), END | {"error": {"type": "ValueError", "message": "x"}}],
    "a run with no end": [START, *_hits(5)],
    "a torn end": [START, *_hits(5), b'{"event":"end"'],
    "a tolerated hit": [START, *_hits(4), *_hits(1, tolerated=[{"path": "n"}], recorded_key="fetch:x"), END],
    "a hit from an earlier fill": [START, *_hits(4), *_hits(1, source="candidate"), END],
    "a step left unused": [START, *_hits(4), {"event": "unused", "seq": 5, "tool": "fetch"}, END],
    "a drift": [START, *_hits(4), {"event": "drift", "seq": 5, "tool": "fetch", "changes": [["n", 4, 5]]}, END],
    "a hit of a model turn": [START, *_hits(5), *_hits(1, tool="model"), END],
    "a hit of another tool": [START, *_hits(4), *_hits(1, tool="search"), END],
    "one hit too few": [START, *_hits(4), END],
    "a hit with no tool": [START, *_hits(5), {"event": "hit", "seq": 6, "at": 2.0}, END],
    "a field of the wrong type": [START, *_hits(4), *_hits(1, step="5"), END],
    "a seq that is a flag": [START, *_hits(4), *_hits(1, seq=True), END],
    "a seq past 64 bits": [START, *_hits(4), b'{"event":"hit","seq":99999999999999999999999,"tool":"fetch"}', END],
    "a step below -2**63": [START, *_hits(4), b'{"event":"hit","step":-9223372036854775809,"tool":"fetch"}', END],
    "a step of 2**63": [START, *_hits(4), b'{"event":"hit","step":9223372036854775808,"tool":"fetch"}', END],
    "a start of the wrong type": [START | {"mode": 3}, *_hits(5), END],
    "a start naming a tool": [START | {"tool": "model"}, *_hits(5), END],
    "an invalid line": [START, *_hits(4), b"{nope", END],
    "a blank line": [START, *_hits(4), b"", END],
    "a second event key": [START, *[b'{"event":"hit","seq":1,"event":"miss","tool":"fetch"}'], *_hits(4), END],
    "a note": [START, *_hits(5), {"event": "note", "kind": "answer", "value": 1}, END],
    "nothing but a start and an end": [START, END],
    "only an end": [END],
    "empty": [],
}


def _log_bytes(events: list[Any]) -> bytes:
    return b"".join((e if isinstance(e, bytes) else orjson.dumps(e)) + b"\n" for e in events)


def _reports(golden: Path, config: Config, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """``check_session``'s report of ``golden``, the plain run read typed where it can be, and read as events."""
    typed = check_session(golden, config).to_json()
    with monkeypatch.context() as m:
        m.setattr(findings, "read_plain_run", lambda path: None)
        events = check_session(golden, config).to_json()
    return typed, events


@pytest.mark.parametrize("events", RUNS.values(), ids=RUNS.keys())
@pytest.mark.parametrize("golden", ["calls", "calls and a note", "no calls"])
def test_a_run_log_judged_typed_is_judged_as_its_events_are(
    events: list[Any], golden: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = {
        "calls": CALLS,
        "calls and a note": CALLS + _line({"type": "note", "kind": "k", "value": 1}),
        "no calls": b"",
    }
    tape = tmp_path / "tapes" / "s.jsonl"
    tape.parent.mkdir()
    tape.write_bytes(HEADER + body[golden])
    tape.with_name("s.run.jsonl").write_bytes(_log_bytes(events))
    typed, as_events = _reports(tape, Config.for_dir(tape.parent), monkeypatch)
    assert typed == as_events


def test_only_a_plain_run_is_read_typed(tmp_path: Path) -> None:
    log = tmp_path / "s.run.jsonl"
    plain = {"a clean replay", "a clean replay of a run group", "one hit too few"}
    plain |= {"a hit of another tool", "a hit with no tool", "nothing but a start and an end"}
    for name, events in RUNS.items():
        log.write_bytes(_log_bytes(events))
        assert (read_plain_run(log) is not None) == (name in plain), name


@pytest.mark.parametrize(
    "toml",
    [
        '[compare]\nsequence = "phases"\n',
        '[compare]\nsequence = "unordered"\nmax_tool_edits = 2\n',
        '[compare.sessions."s*"]\nmax_tool_edits = 1\n',
    ],
)
def test_a_plain_run_is_judged_under_the_sessions_settings(
    toml: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n' + toml)
    tape = tmp_path / "tapes" / "s.jsonl"
    tape.parent.mkdir()
    tape.write_bytes(HEADER + CALLS)
    for events in (RUNS["a clean replay"], RUNS["a hit of another tool"], RUNS["one hit too few"]):
        tape.with_name("s.run.jsonl").write_bytes(_log_bytes(events))
        typed, as_events = _reports(tape, Config.for_dir(tmp_path), monkeypatch)
        assert typed == as_events


def test_a_line_still_being_written_after_the_end_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tape = tmp_path / "tapes" / "s.jsonl"
    tape.parent.mkdir()
    tape.write_bytes(HEADER + CALLS)
    log = tape.with_name("s.run.jsonl")
    log.write_bytes(_log_bytes(RUNS["a clean replay"]) + b'{"event":"no')  # as a reader meets a run appending
    assert read_plain_run(log) is not None
    typed, as_events = _reports(tape, Config.for_dir(tape.parent), monkeypatch)
    assert typed == as_events and typed["ok"]


def test_a_run_of_another_golden_is_stale_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tape = tmp_path / "tapes" / "s.jsonl"
    tape.parent.mkdir()
    tape.write_bytes(HEADER + CALLS)
    tape.with_name("s.run.jsonl").write_bytes(_log_bytes([START | {"golden_sha256": "0" * 64}, *_hits(5), END]))
    typed, as_events = _reports(tape, Config.for_dir(tape.parent), monkeypatch)
    assert typed == as_events and [f["kind"] for f in typed["findings"]] == ["stale_run"]


def test_a_run_log_that_is_no_regular_file_is_left_to_the_read_that_says_so(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "s.run.jsonl"
    os.mkfifo(fifo)
    assert read_plain_run(fifo) is None  # never blocks; the read as events names it
    assert read_plain_run(tmp_path / "gone.run.jsonl") is None


# ---- whole folders --------------------------------------------------------------------------------------------------


def _check_json(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, typed: bool) -> tuple[int, str]:
    with monkeypatch.context() as m:
        if not typed:
            m.setattr(lineparse, "fits", lambda chunk: False)
            m.setattr(findings, "read_plain_run", lambda path: None)
        code = main(["check", "--json"])
        text = main(["check"])
    out = capsys.readouterr().out
    return code + 10 * text, out


def test_check_says_the_same_of_every_kind_of_finding_whichever_way_it_reads(
    sample_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(sample_dir)
    tapes = sample_dir / "sample_tapes"
    clean = (tapes / "clean.jsonl").read_bytes()
    (tapes / "clean_copy.jsonl").write_bytes(clean)
    (tapes / "clean_copy.run.jsonl").write_bytes((tapes / "clean.run.jsonl").read_bytes())
    plain_runs: list[Path] = []

    def spy(path: Path) -> Any:
        found = read_plain_run(path)
        if found is not None:
            plain_runs.append(path)
        return found

    monkeypatch.setattr(findings, "read_plain_run", spy)
    typed = _check_json(capsys, monkeypatch, True)
    as_dicts = _check_json(capsys, monkeypatch, False)
    assert typed == as_dicts
    assert typed[0] == 11  # findings: exit 1, both times
    assert {"clean.run.jsonl", "clean_copy.run.jsonl"} <= {p.name for p in plain_runs}  # the typed read was taken
