"""``Tape.note`` and ``Tape.phase``: lines of their own on a recording, run-log events on a replay."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Config, Tape, TapeError, ToolRegistry
from tapetui.core import indexcache
from tapetui.core.index import NoteRecord, PhaseRecord
from tapetui.core.runlog import RunSummary, event_problem, read_run_log
from tapetui.core.store import candidate_path, runlog_path
from tapetui.core.tapefile import Appender, read_index

from .conftest import Calls


def lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in path.read_bytes().splitlines()]


def body(path: Path) -> list[tuple[Any, ...]]:
    """The calls, notes and phases of a tape in file order, without times."""
    out: list[tuple[Any, ...]] = []
    for r in lines(path):
        if r["type"] == "call":
            out.append(("call", r["seq"], r["tool"]))
        elif r["type"] == "note":
            out.append(("note", r["kind"], r["value"], r["after"], r["phase"]))
        elif r["type"] == "phase":
            out.append(("phase", r["name"], r["after"]))
    return out


def log_extras(path: Path) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for e in read_run_log(runlog_path(path)):
        if e["event"] == "note":
            out.append(("note", e["kind"], e["value"], e["after"], e["phase"]))
        elif e["event"] == "phase":
            out.append(("phase", e["name"], e["after"]))
    return out


def session(t: Tape) -> None:
    """A session with a phase, a note before any call, notes between calls and a final answer."""
    t.note("plan", "look it up")
    t.phase("gather")
    t.call("search", {"query": "tapes"})
    t.note("response", {"text": "found one"})
    t.call("summarize", {"text": "a b c", "max_words": 2})
    t.phase("answer")
    t.note("final", "a b")


EXPECTED = [
    ("note", "plan", "look it up", 0, None),
    ("phase", "gather", 0),
    ("call", 1, "search"),
    ("note", "response", {"text": "found one"}, 1, "gather"),
    ("call", 2, "summarize"),
    ("phase", "answer", 2),
    ("note", "final", "a b", 2, "answer"),
]


def test_record_writes_notes_and_phases_in_order(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        session(t)
        s = t.stats()
    assert body(tape) == EXPECTED
    assert s["steps"] == 2 and s["live_tool_calls"] == 2  # notes and phases are no calls
    note = next(r for r in lines(tape) if r["type"] == "note")
    assert list(note) == ["type", "kind", "value", "after", "phase", "recorded_at"]
    assert note["recorded_at"].endswith("Z")
    phase = next(r for r in lines(tape) if r["type"] == "phase")
    assert list(phase) == ["type", "name", "after", "recorded_at"]
    assert [e for e in log_extras(tape)] == [e for e in EXPECTED if e[0] != "call"]


def test_a_note_after_a_call_that_raised_counts_that_call(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        with pytest.raises(ValueError):
            t.call("flaky", {"n": 1})
        t.note("response", "it failed")
    assert body(tape)[-1] == ("note", "response", "it failed", 1, None)


def test_note_values_are_redacted(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    config = Config.for_dir(tmp_path)
    config = Config(**{**config.__dict__, "redact_patterns": (r"acct-\d+",)})
    with Tape(tape, "record", registry, config=config) as t:
        t.note("final", {"api_key": "sk-live-123456", "text": "billed to acct-998877", "n": 3})
    data = tape.read_bytes() + runlog_path(tape).read_bytes()
    assert b"sk-live-123456" not in data and b"acct-998877" not in data
    (note,) = [r for r in lines(tape) if r["type"] == "note"]
    assert note["value"] == {"api_key": "[REDACTED]", "text": "billed to [REDACTED]", "n": 3}
    with Tape(tape, "replay", registry, config=config) as t:
        t.note("final", {"api_key": "sk-live-123456", "text": "billed to acct-998877", "n": 3})
    assert b"acct-998877" not in runlog_path(tape).read_bytes()
    assert log_extras(tape)[0][2] == note["value"]


def test_note_values_take_their_json_form(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        t.note("final", ("a", 1, float("nan")))
    assert body(tape) == [("note", "final", ["a", 1, None], 0, None)]


def test_replay_never_writes_the_golden_and_logs_events(tmp_path: Path, registry: ToolRegistry, calls: Calls) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        session(t)
    before = tape.read_bytes()
    calls.n.clear()
    with Tape(tape, "replay", registry) as t:
        session(t)
        s = t.stats()
    assert tape.read_bytes() == before
    assert not candidate_path(tape).exists()
    assert calls.n == {}
    assert s["steps"] == 2 and s["tape_hits"] == 2 and s["unused"] == 0
    assert log_extras(tape) == [e for e in EXPECTED if e[0] != "call"]
    events = read_run_log(runlog_path(tape))
    assert all(event_problem(e) is None for e in events)
    summary = RunSummary.of(events)
    assert (summary.hits, summary.invalid, summary.problems) == (2, 0, [])


def test_fill_writes_notes_into_its_candidate_where_they_happened(
    tmp_path: Path, registry: ToolRegistry, calls: Calls
) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        t.call("search", {"query": "tapes"})
        t.call("summarize", {"text": "a b c", "max_words": 2})
    golden = tape.read_bytes()
    calls.n.clear()
    with Tape(tape, "fill", registry) as t:
        t.phase("gather")
        t.call("search", {"query": "tapes"})  # a hit: carried into the candidate when a miss opens it
        t.note("response", "found")
        t.call("search", {"query": "new"})  # a miss: runs live, opens the candidate
        t.phase("answer")
        t.call("summarize", {"text": "a b c", "max_words": 2})
        t.note("final", "a b")
    assert tape.read_bytes() == golden
    assert calls.n == {"search": 1}
    assert body(candidate_path(tape)) == [
        ("phase", "gather", 0),
        ("call", 1, "search"),
        ("note", "response", "found", 1, "gather"),
        ("call", 2, "search"),
        ("phase", "answer", 2),
        ("call", 3, "summarize"),
        ("note", "final", "a b", 3, "answer"),
    ]
    assert log_extras(tape) == [
        ("phase", "gather", 0),
        ("note", "response", "found", 1, "gather"),
        ("phase", "answer", 2),
        ("note", "final", "a b", 3, "answer"),
    ]


def test_a_fill_without_misses_logs_notes_and_writes_no_candidate(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        session(t)
    with Tape(tape, "fill", registry) as t:
        session(t)
    assert not candidate_path(tape).exists()
    assert log_extras(tape) == [e for e in EXPECTED if e[0] != "call"]


@pytest.mark.parametrize("mode", ["record", "replay"])
@pytest.mark.parametrize(
    ("bad", "said"),
    [("", "a blank string"), (" \t", "a blank string"), (3, "int"), (None, "NoneType"), (b"final", "bytes")],
)
def test_a_bad_kind_or_name_is_refused_before_anything_is_written(
    tmp_path: Path, registry: ToolRegistry, mode: str, bad: Any, said: str
) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        t.call("search", {"query": "tapes"})
    with Tape(tape, mode, registry) as t:
        written = t.target if mode == "record" else tape  # a record over a golden writes a candidate
        assert written is not None
        before = (written.read_bytes(), runlog_path(tape).read_bytes())
        with pytest.raises(TapeError, match=f"note kind must be a non-blank string, got {said}"):
            t.note(bad, "x")
        with pytest.raises(TapeError, match=f"phase name must be a non-blank string, got {said}"):
            t.phase(bad)
        with pytest.raises(TapeError, match="not valid UTF-8"):
            t.note("\ud800", "x")
        with pytest.raises(TapeError, match=r"note 'final': its value cannot be recorded: .*object"):
            t.note("final", {"when": object()})
        assert (written.read_bytes(), runlog_path(tape).read_bytes()) == before
        t.phase("ok")  # the tape still works
    with pytest.raises(TapeError, match="tape is closed"):
        t.note("final", "late")
    with pytest.raises(TapeError, match="tape is closed"):
        t.phase("late")


def test_notes_from_many_threads_are_whole_lines(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:

        def work(n: int) -> None:
            for i in range(20):
                t.call("search", {"query": f"{n}-{i}"})
                t.note("response", {"n": n, "i": i, "text": "x" * 5000})

        threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    idx = read_index(tape, validate=True)
    assert len(idx) == 80 and len(idx.notes) == 80
    afters = [n.after for n in idx.notes]
    assert afters == sorted(afters) and afters[0] >= 1 and afters[-1] == 80


# ---- the index --------------------------------------------------------------------------
@pytest.mark.parametrize("validate", [False, True])
def test_the_index_holds_notes_and_phases(tmp_path: Path, registry: ToolRegistry, validate: bool) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        session(t)
    idx = read_index(tape, validate=validate)
    assert idx.unknown_lines == 0 and len(idx) == 2
    notes = [(n.kind, n.value, n.after, n.phase) for n in idx.notes]
    assert notes == [e[1:] for e in EXPECTED if e[0] == "note"]
    assert [(p.name, p.after) for p in idx.phases] == [("gather", 0), ("answer", 2)]
    numbers = {r["type"] + str(r.get("kind", r.get("name"))): n for n, r in enumerate(lines(tape), 1)}
    assert [n.line for n in idx.notes] == [numbers["noteplan"], numbers["noteresponse"], numbers["notefinal"]]
    assert idx.phases[0] == PhaseRecord("gather", 0, numbers["phasegather"])
    assert isinstance(idx.notes[0], NoteRecord)
    with pytest.raises(AttributeError):
        idx.notes[0].kind = "x"  # type: ignore[misc]  # records are values


def test_a_tape_without_notes_reads_as_before(tmp_path: Path, registry: ToolRegistry) -> None:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry) as t:
        t.call("search", {"query": "tapes"})
    idx = read_index(tape)
    assert (idx.notes, idx.phases, idx.extra_spans, idx.unknown_lines) == ([], [], [], 0)


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (b'{"type":"note","value":1,"after":0}', "note has no valid 'kind' (a non-empty string), got None"),
        (b'{"type":"note","kind":3,"value":1,"after":0}', "note has no valid 'kind'"),
        (b'{"type":"note","kind":"","value":1,"after":0}', "note has no valid 'kind'"),
        (b'{"type":"note","kind":"final","value":1,"after":-1}', "note 'after' must be a step number"),
        (b'{"type":"note","kind":"final","value":1,"after":true}', "note 'after' must be a step number"),
        (b'{"type":"note","kind":"final","value":1,"after":"2"}', "note 'after' must be a step number"),
        (b'{"type":"note","kind":"final","value":1,"after":0,"phase":5}', "note 'phase' must be a non-empty string"),
        (b'{"type":"phase","after":0}', "phase has no valid 'name'"),
        (b'{"type":"phase","name":["a"],"after":0}', "phase has no valid 'name'"),
        (b'{"type":"phase","name":"a","after":1.5}', "phase 'after' must be a step number"),
    ],
)
@pytest.mark.parametrize("validate", [False, True])
def test_a_malformed_note_or_phase_line_names_file_and_line(
    tmp_path: Path, line: bytes, problem: str, validate: bool
) -> None:
    tape = tmp_path / "t.jsonl"
    tape.write_bytes(b'{"type":"session","v":1}\n' + line + b"\n")
    with pytest.raises(TapeError, match=rf"t\.jsonl:2: {problem}".replace("(", r"\(").replace(")", r"\)")):
        read_index(tape, validate=validate)


def test_a_hand_written_note_without_after_or_phase_is_read(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    tape.write_bytes(b'{"type":"note","kind":"final","value":{"a":1},"extra":"kept"}\n{"type":"phase","name":"p"}\n')
    idx = read_index(tape)
    assert idx.notes == [NoteRecord("final", {"a": 1}, 0, None, 1)]
    assert idx.phases == [PhaseRecord("p", 0, 2)]


# ---- the index cache ----------------------------------------------------------------------
@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("TAPETUI_CACHE_DIR", str(folder))
    monkeypatch.setattr(indexcache, "MIN_BYTES", 0)  # every tape is big enough here
    monkeypatch.setattr(indexcache, "RACY_NS", 0)  # and old enough
    return folder


def _cached_tape(tmp_path: Path, registry: ToolRegistry) -> Path:
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", registry, run_log=False) as t:
        for i in range(10):
            t.phase(f"p{i}")
            t.call("search", {"query": f"q{i}"})
            t.note("response", {"i": i, "token": "sk-secret-value"})
    return tape


def _extras(idx: Any) -> tuple[Any, ...]:
    return (idx.notes, idx.phases, idx.extra_spans, idx.unknown_lines)


def test_a_cached_index_keeps_notes_and_phases(tmp_path: Path, registry: ToolRegistry, cache: Path) -> None:
    tape = _cached_tape(tmp_path, registry)
    assert len(list(cache.glob("*.idx"))) == 1  # the recording left its index
    warm = read_index(tape)
    assert warm.from_cache
    for entry in cache.glob("*.idx"):
        entry.unlink()
    cold = read_index(tape)
    assert not cold.from_cache and len(list(cache.glob("*.idx"))) == 1
    full = read_index(tape, validate=True)
    assert _extras(warm) == _extras(cold) == _extras(full)
    assert len(warm.notes) == 10 and warm.notes[3].phase == "p3"
    entry = next(cache.glob("*.idx")).read_bytes()
    assert b"REDACTED" not in entry and b'"i":' not in entry  # no note value is kept in the cache


def test_notes_appended_after_the_entry_are_scanned(tmp_path: Path, registry: ToolRegistry, cache: Path) -> None:
    tape = _cached_tape(tmp_path, registry)
    read_index(tape)
    with Appender(tape) as out:
        out.append(b'{"type":"note","kind":"final","value":"done","after":10,"phase":"p9"}\n')
    warm = read_index(tape)
    assert warm.from_cache
    assert warm.notes[-1] == NoteRecord("final", "done", 10, "p9", warm.line_count)
    assert _extras(warm) == _extras(read_index(tape, validate=True))


def test_an_entry_whose_note_lines_moved_is_not_trusted(
    tmp_path: Path, registry: ToolRegistry, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape = _cached_tape(tmp_path, registry)
    cold = read_index(tape)
    # an entry pointing a note span at a call line: the load refuses it and the tape is scanned
    real_save = indexcache.save

    def bad_save(idx: Any, *a: Any) -> None:
        idx.extra_spans[0] = (idx.offsets[0], idx.lengths[0], idx.lines[0])
        real_save(idx, *a)

    for e in cache.glob("*.idx"):
        e.unlink()
    monkeypatch.setattr(indexcache, "save", bad_save)
    read_index(tape)
    monkeypatch.setattr(indexcache, "save", real_save)
    again = read_index(tape)
    assert not again.from_cache
    assert _extras(again) == _extras(cold)


# ---- run-log events ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("event", "problem"),
    [
        ({"event": "note", "kind": "final", "value": [1], "after": 2, "phase": None}, None),
        ({"event": "note", "kind": "final", "value": None, "after": 0, "phase": "p"}, None),
        ({"event": "phase", "name": "gather", "after": 0}, None),
        ({"event": "note", "value": 1, "after": 0}, "note event: 'kind' must be a non-empty string"),
        ({"event": "note", "kind": 3, "after": 0}, "note event: 'kind' must be a string"),
        ({"event": "note", "kind": "f", "after": -1}, "note event: 'after' must be a step number"),
        ({"event": "note", "kind": "f", "after": True}, "note event: 'after' must be a step number"),
        ({"event": "note", "kind": "f", "after": 0, "phase": 2}, "note event: 'phase' must be a string"),
        ({"event": "phase", "after": 0}, "phase event: 'name' must be a non-empty string"),
        ({"event": "phase", "name": "", "after": 0}, "phase event: 'name' must be a non-empty string"),
        ({"event": "phase", "name": {"a": 1}}, "phase event: 'name' must be a string"),
        # other events may carry fields of these names as they like
        ({"event": "hit", "seq": 1, "name": 3, "kind": [], "after": "x"}, None),
    ],
)
def test_note_and_phase_events_are_checked(event: dict[str, Any], problem: str | None) -> None:
    got = event_problem(event)
    if problem is None:
        assert got is None
    else:
        assert got is not None and got.startswith(problem)
