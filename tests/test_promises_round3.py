"""Promises that hold, round 3: what a hostile tester and a new user found at the edges of export, diff, import,
``check --jobs`` and the pytest plugin under xdist.

Each test failed before the change it guards; waits are on events (a process exit), never on time.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tapetui import Tape, TapeError, ToolRegistry
from tapetui.core import locks
from tapetui.core.runlog import RunLogWarning, read_run_log
from tapetui.core.runstart import GROUP_ENV, runs_of
from tapetui.core.store import runlog_path
from tests import otlp_fixtures as fx
from tests.conftest import tapetui_cli


@pytest.fixture
def tapes(sample_dir: Path) -> Path:
    return sample_dir / "sample_tapes"


def test_export_and_diff_never_read_a_run_log_or_candidate_that_links_out(sample_dir: Path, tapes: Path) -> None:
    outside = sample_dir.parent / "outside_run.jsonl"
    outside.write_text(
        '{"event":"start","mode":"replay"}\n'
        '{"event":"drift","seq":2,"step":2,"tool":"fetch_doc","changes":[["args.doc_id","a","SECRET-OUTSIDE"]]}\n'
    )
    (tapes / "clean.run.jsonl").unlink()
    (tapes / "clean.run.jsonl").symlink_to(outside)
    (tapes / "drift_summarize.candidate.jsonl").unlink()
    (tapes / "drift_summarize.candidate.jsonl").symlink_to(outside)
    for argv in (("export", "otlp", "clean"), ("diff", "clean"), ("diff", "drift_summarize")):
        r = tapetui_cli(sample_dir, *argv)
        assert r.returncode == 2 and "a symlink to" in r.stderr and "not followed" in r.stderr, argv
        assert "SECRET-OUTSIDE" not in r.stdout + r.stderr and "Traceback" not in r.stderr, argv
    r = tapetui_cli(sample_dir, "export", "otlp", "drift_summarize.candidate.jsonl")
    assert r.returncode == 2 and "outside the tapes folder" in r.stderr and "SECRET-OUTSIDE" not in r.stdout + r.stderr


def test_a_torn_last_line_is_left_out_of_export_and_diff_and_diff_says_so(sample_dir: Path, tapes: Path) -> None:
    whole = tapetui_cli(sample_dir, "export", "otlp", "clean")
    assert whole.returncode == 0, whole.stderr
    golden = tapes / "clean.jsonl"
    with golden.open("ab") as fh:
        fh.write(b'{"type":"call","seq":5,"tool":"fetch_doc","ar')  # a write the recorder did not finish
    torn = tapetui_cli(sample_dir, "export", "otlp", "clean")
    assert torn.returncode == 0 and "Traceback" not in torn.stderr, torn.stderr
    spans = [len(d["resourceSpans"][0]["scopeSpans"][0]["spans"]) for d in map(json.loads, torn.stdout.splitlines())]
    assert spans == [
        len(d["resourceSpans"][0]["scopeSpans"][0]["spans"]) for d in map(json.loads, whole.stdout.splitlines())
    ]
    d = tapetui_cli(sample_dir, "diff", "clean", str(golden))
    assert d.stdout.count("clean.jsonl: torn last line 10") == 1 and "interrupted write" in d.stdout, d.stdout
    j = tapetui_cli(sample_dir, "diff", "clean", str(golden), "--json")
    assert any("torn last line" in n for n in json.loads(j.stdout)["notes"])


def test_diff_with_a_file_that_is_not_a_tape_is_an_error_not_a_verdict(sample_dir: Path) -> None:
    junk = sample_dir / "x.txt"
    junk.write_text("garbage")  # no complete line: read as a tape it would be one whose every step is gone
    r = tapetui_cli(sample_dir, "diff", "clean", str(junk))
    assert r.returncode == 2 and "x.txt: not a tape (no complete line)" in r.stderr and not r.stdout


# ---- import otlp: what a trace's values may name, and a trace that cannot be imported ---------------------------
SECRET_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2


def _traced(trace: str, **attributes: str) -> dict[str, Any]:
    spans = fx.genai_trace()
    for s in spans:
        s["traceId"] = trace
    if attributes:  # on the root span only, as an agent's name or a session id usually is
        spans[0]["attributes"] = spans[0]["attributes"] + fx.attrs(attributes)
    return fx.doc(spans)


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    (tmp_path / "tapes").mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    return tmp_path


def test_a_group_value_holding_a_secret_or_naming_another_sessions_file_is_never_a_file_name(proj: Path) -> None:
    fx.write(proj / "foo.jsonl", _traced("2" * 32, agent="foo"))
    fx.write(
        proj / "t.jsonl",
        _traced("1" * 32, agent=SECRET_KEY),
        _traced("3" * 32, agent="foo.run"),
        _traced("4" * 32, agent="foo.candidate"),
    )
    for f in ("foo.jsonl", "t.jsonl"):
        r = tapetui_cli(proj, "import", "otlp", f, "--group-by", "agent")
        assert r.returncode == 0, r.stderr
        assert SECRET_KEY not in r.stdout + r.stderr
    names = sorted(p.name for p in (proj / "tapes").iterdir())
    assert not [n for n in names if SECRET_KEY[:12] in n], names
    assert "foo.run.jsonl" not in names and "foo.candidate.jsonl" not in names  # foo's own files stay foo's
    assert SECRET_KEY not in (proj / "tapes" / "CHANGELOG.md").read_text()
    check = tapetui_cli(proj, "check")
    assert check.returncode == 0 and "4 session(s) checked, 0 with findings" in check.stdout, (
        check.stdout + check.stderr
    )
    assert SECRET_KEY not in check.stdout


def test_a_group_by_attribute_on_the_root_span_alone_groups_its_whole_trace(proj: Path) -> None:
    fx.write(proj / "t.jsonl", _traced("1" * 32, agent="monday"), _traced("2" * 32, agent="tuesday"))
    r = tapetui_cli(proj, "import", "otlp", "t.jsonl", "--group-by", "agent")
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in (proj / "tapes").glob("*.jsonl")) == ["monday.jsonl", "tuesday.jsonl"]
    for day in ("monday", "tuesday"):  # each its trace's two turns and one call, nothing under "(none)"
        kinds = [json.loads(x)["type"] for x in (proj / "tapes" / f"{day}.jsonl").read_text().splitlines()]
        assert kinds.count("model") == 2 and kinds.count("call") == 1, (day, kinds)


def test_an_import_with_a_trace_that_cannot_be_imported_writes_nothing(proj: Path) -> None:
    good = _traced("5" * 32)
    cyclic = _traced("6" * 32)
    spans = cyclic["resourceSpans"][0]["scopeSpans"][0]["spans"]
    spans[1]["parentSpanId"], spans[3]["parentSpanId"] = spans[3]["spanId"], spans[1]["spanId"]
    fx.write(proj / "mixed.jsonl", good, cyclic)
    r = tapetui_cli(proj, "import", "otlp", "mixed.jsonl")
    assert r.returncode == 2 and "form a cycle" in r.stderr and "Traceback" not in r.stderr
    assert list((proj / "tapes").iterdir()) == []  # not the good trace's tape, nor its changelog entry
    deep = '{"a":' * 1020 + "1" + "}" * 1020  # a result nested past what a tape line can hold
    nested = _traced("7" * 32)
    tool = nested["resourceSpans"][0]["scopeSpans"][0]["spans"][2]
    tool["attributes"] = [a for a in tool["attributes"] if a["key"] != "gen_ai.tool.call.result"]
    tool["attributes"] += fx.attrs({"gen_ai.tool.call.result": deep})
    fx.write(proj / "deep.jsonl", good, nested)
    r = tapetui_cli(proj, "import", "otlp", "deep.jsonl")
    assert r.returncode == 2 and "recorded with this as its error" not in r.stderr, r.stderr
    assert (
        "the traced tool returned a value nested too deeply to record" in r.stderr
        and list((proj / "tapes").iterdir()) == []
    )


def test_a_changelog_named_like_a_tape_in_the_tapes_folder_is_refused(proj: Path) -> None:
    (proj / "tapes.toml").write_text('[tapes]\ndir = "tapes"\nchangelog = "tapes/history.jsonl"\n')
    r = tapetui_cli(proj, "check")
    assert r.returncode == 2 and "'tapes.changelog' = 'history.jsonl' is a .jsonl file in the tapes folder" in r.stderr


def test_an_import_into_another_projects_tapes_folder_writes_the_changelog_entry_there(tmp_path: Path) -> None:
    qa, qb = tmp_path / "qa", tmp_path / "qb"
    for q in (qa, qb):
        (q / "tapes").mkdir(parents=True)
        (q / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    fx.write(qa / "prod.jsonl", _traced("5" * 32))
    r = tapetui_cli(qa, "import", "otlp", "prod.jsonl", "--out", "../qb/tapes")
    assert r.returncode == 0, r.stderr
    assert not (qa / "tapes" / "CHANGELOG.md").exists()  # this project has no such session
    assert "imported `trace-" + "5" * 32 + "`" in (qb / "tapes" / "CHANGELOG.md").read_text()
    loose = tmp_path / "loose"  # a folder no tapes.toml covers: its own changelog
    r = tapetui_cli(qa, "import", "otlp", "prod.jsonl", "--out", str(loose))
    assert r.returncode == 0 and (loose / "CHANGELOG.md").is_file(), r.stderr


# ---- run logs of tests that share a tape ----------------------------------------------------------------------
def _shared(tmp_path: Path) -> tuple[Path, ToolRegistry]:
    (tmp_path / "tapes").mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    def add(a: int, b: int) -> int:
        return a + b

    tape = tmp_path / "tapes" / "shared.jsonl"
    with Tape(tape, "record", reg) as t:
        t.call("add", {"a": 100, "b": 1})
    return tape, reg


def _replay(tape: Path, reg: ToolRegistry, b: int) -> None:
    with Tape(tape, "replay", reg) as t, contextlib.suppress(TapeError):
        t.call("add", {"a": 100, "b": b})


def test_the_runs_of_one_test_session_sharing_a_tape_are_all_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape, reg = _shared(tmp_path)
    monkeypatch.setenv(GROUP_ENV, "session-1")  # as the pytest plugin makes a test session one run group
    _replay(tape, reg, 2)  # the first test drifts (b 1 → 2)
    _replay(tape, reg, 1)  # the second, sharing the tape, replays cleanly: it no longer hides the first
    r = tapetui_cli(tmp_path, "check")
    assert r.returncode == 1 and "run 1 of 2: " in r.stdout and "args.b  1 → 2" in r.stdout, r.stdout
    monkeypatch.setenv(GROUP_ENV, "session-2")  # the next test session replaces the file
    _replay(tape, reg, 1)
    assert tapetui_cli(tmp_path, "check").returncode == 0
    monkeypatch.delenv(GROUP_ENV)  # outside a test session each run replaces it, as it always has
    _replay(tape, reg, 2)
    _replay(tape, reg, 1)
    assert tapetui_cli(tmp_path, "check").returncode == 0


@pytest.mark.parametrize("second_group", [None, "session-1"])
def test_a_run_started_while_another_runs_joins_it_and_both_are_judged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second_group: str | None
) -> None:
    """Two replays of one tape at once (two processes, two test sessions): the second replaced the run log while the
    first still ran, the first's drift went to a file no longer there, and check was green on the second's hits."""
    tape, reg = _shared(tmp_path)
    monkeypatch.delenv(GROUP_ENV, raising=False)
    with Tape(tape, "replay", reg) as first:
        if second_group is not None:  # a test session's run starting beside a plain one takes the plain one's group
            monkeypatch.setenv(GROUP_ENV, second_group)
        _replay(tape, reg, 1)  # the second starts, hits and ends while the first still runs
        with pytest.raises(TapeError):
            first.call("add", {"a": 100, "b": 2})  # then the first drifts
    runs = runs_of(read_run_log(runlog_path(tape)))
    assert [[e["event"] for e in run] for run in runs] == [["start", "drift", "end"], ["start", "hit", "end"]]
    assert runs[1][0].get("group") == second_group and type(runs[1][0]["run"]) is str and "run" not in runs[0][0]
    r = tapetui_cli(tmp_path, "check")
    assert r.returncode == 1 and "run 1 of 2: " in r.stdout and "args.b  1 → 2" in r.stdout, r.stdout
    monkeypatch.delenv(GROUP_ENV, raising=False)
    _replay(tape, reg, 1)  # no run running: the next one replaces the file, as it always has
    assert len(runs_of(read_run_log(runlog_path(tape)))) == 1 and tapetui_cli(tmp_path, "check").returncode == 0


@pytest.mark.parametrize("which", [".live", ".lock"])
def test_a_folder_in_place_of_a_run_logs_lock_says_it_cannot_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, which: str
) -> None:
    """No live lock to ask: each run replaces the file (never joins forever), and says so."""
    tape, reg = _shared(tmp_path)
    monkeypatch.delenv(GROUP_ENV, raising=False)
    live = runlog_path(tape).with_name(f".{runlog_path(tape).name}{which}")
    live.unlink(missing_ok=True)
    live.mkdir()
    for b in (2, 1):
        with pytest.warns(RunLogWarning, match=r"cannot tell whether another run of this tape is running"):
            _replay(tape, reg, b)
    assert len(runs_of(read_run_log(runlog_path(tape)))) == 1 and tapetui_cli(tmp_path, "check").returncode == 0


@pytest.mark.parametrize("first_group", [None, "session-X"])
def test_a_test_sessions_run_that_joined_another_running_run_is_still_judged_after_its_next_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, first_group: str | None
) -> None:
    """Session Y's first run drifted while another session's run ran, and joined it under that run's group: Y's
    next run, alone, found another group in the file and replaced it, and check went green over Y's drift."""
    tape, reg = _shared(tmp_path)
    monkeypatch.delenv(GROUP_ENV, raising=False)
    if first_group is not None:
        monkeypatch.setenv(GROUP_ENV, first_group)
    with Tape(tape, "replay", reg) as other:
        monkeypatch.setenv(GROUP_ENV, "session-Y")
        _replay(tape, reg, 2)  # Y's first test drifts while the other run runs
        other.call("add", {"a": 100, "b": 1})
    _replay(tape, reg, 1)  # Y's second test, alone: it joins its session's runs
    runs = runs_of(read_run_log(runlog_path(tape)))
    assert [run[0].get("group") for run in runs] == [first_group, "session-Y", "session-Y"]
    r = tapetui_cli(tmp_path, "check")
    assert r.returncode == 1 and "run 2 of 3: " in r.stdout and "args.b  1 → 2" in r.stdout, r.stdout
    monkeypatch.setenv(GROUP_ENV, "session-Z")  # the next session, alone: afresh
    _replay(tape, reg, 1)
    assert len(runs_of(read_run_log(runlog_path(tape)))) == 1 and tapetui_cli(tmp_path, "check").returncode == 0


async def test_the_run_log_pane_shows_a_joining_run_beside_the_first_one() -> None:
    """The pane cleared the first run (and its drift) when a run joined the file while the app showed it."""
    from textual.app import App, ComposeResult

    from tapetui.tui.widgets.runlog_pane import RunLogPane

    sha = "ab" * 32
    first = [
        {"event": "start", "mode": "replay", "golden_sha256": sha, "at": 1},
        {"event": "drift", "seq": 2, "tool": "lookup", "step": 2, "changes": [["city", "Paris", "Berlin"]], "at": 2},
    ]
    joiner = [
        {"event": "start", "mode": "replay", "golden_sha256": sha, "run": "r1", "at": 3},
        {"event": "hit", "seq": 1, "tool": "lookup", "step": 1, "key": "k", "run": "r1", "at": 4},
    ]

    class One(App[None]):
        def compose(self) -> ComposeResult:
            yield RunLogPane()

    app = One()
    async with app.run_test() as pilot:
        pane = app.query_one(RunLogPane)
        pane.show_run("s", first)
        pane.add_events("s", joiner, False)
        await pilot.pause()
        shown = "\n".join(map(str, pane.lines))
        assert "Berlin" in shown and "hit" in shown, shown
        pane.add_events("s", first[:1], True)  # the file replaced: afresh
        await pilot.pause()
        assert "Berlin" not in "\n".join(map(str, pane.lines))


def _wait_for(go: Any) -> None:  # noqa: ANN401 - a multiprocessing event
    go.wait(300)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_child_forked_during_a_run_does_not_keep_the_run_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forked child (a worker pool) inherited the run's live lock: after the run ended every later run joined the
    file instead of replacing it, and an old drift stayed in check after a clean rerun."""
    tape, reg = _shared(tmp_path)
    monkeypatch.delenv(GROUP_ENV, raising=False)
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    with Tape(tape, "replay", reg) as t, contextlib.suppress(TapeError):
        child = ctx.Process(target=_wait_for, args=(go,))
        child.start()
        t.call("add", {"a": 100, "b": 2})  # drifts
    try:
        _replay(tape, reg, 1)  # the run ended: a clean rerun replaces its log
        assert len(runs_of(read_run_log(runlog_path(tape)))) == 1 and tapetui_cli(tmp_path, "check").returncode == 0
    finally:
        go.set()
        child.join(60)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_child_forked_while_a_tape_was_open_does_not_hold_its_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker pool forked during a replay kept the session's lock (a flock lives as long as any copy of its open
    file): accept timed out with "in use by another tapetui process" for as long as the pool lived."""
    tape, reg = _shared(tmp_path)
    (tape.parent / "shared.candidate.jsonl").write_bytes(tape.read_bytes())
    ctx = multiprocessing.get_context("fork")
    go = ctx.Event()
    with Tape(tape, "replay", reg) as t:
        child = ctx.Process(target=_wait_for, args=(go,))
        child.start()
        t.call("add", {"a": 100, "b": 1})
    try:
        monkeypatch.setattr(locks, "DEFAULT_WAIT", 0.2)  # held, it would be refused at once
        r = tapetui_cli(tmp_path, "accept", "shared", "--why", "the pool is idle")
        assert r.returncode == 0, r.stderr
    finally:
        go.set()
        child.join(60)


def test_a_replay_made_while_samples_record_is_kept_over_the_parked_run_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """check --samples parks the run log while the samples record, then put it back over whatever was there: a
    drifting replay another process made meanwhile was thrown away, and check went green."""
    from tapetui.core.config import Config
    from tapetui.review.parking import parked

    tape, reg = _shared(tmp_path)
    monkeypatch.delenv(GROUP_ENV, raising=False)
    _replay(tape, reg, 1)  # the run log check --samples parks: clean
    config = Config.for_dir(tape.parent)
    notes: list[str] = []
    with parked(config, tape, notes):
        with Tape(tape, "record", reg) as t:  # a sample's recording
            t.call("add", {"a": 100, "b": 1})
        _replay(tape, reg, 2)  # another process's replay, meanwhile: it drifts
    assert [e["event"] for e in read_run_log(runlog_path(tape))] == ["start", "drift", "end"]
    assert any("a replay made while the samples recorded is kept" in n for n in notes), notes
    assert tapetui_cli(tmp_path, "check").returncode == 1
    with parked(config, tape), Tape(tape, "record", reg) as t:  # samples alone: the parked run log comes back
        t.call("add", {"a": 100, "b": 1})
    assert [e["event"] for e in read_run_log(runlog_path(tape))] == ["start", "drift", "end"]
    with parked(config, tape), Tape(tape, "fill", reg) as t:  # a sample that fills is no replay made meanwhile
        t.call("add", {"a": 100, "b": 1})
        t.call("add", {"a": 1, "b": 1}, live=lambda: 2)  # not on the tape: run live into a candidate
    assert [e["event"] for e in read_run_log(runlog_path(tape))] == ["start", "drift", "end"]


def test_the_park_lock_handed_to_a_command_stays_held_while_it_lives(tmp_path: Path) -> None:
    """Every lock is unlocked before it is closed, but the park lock: check --samples hands it to its commands, so
    that one still running after tapetui stopped keeps recover from putting the candidate back under it."""
    tape, _ = _shared(tmp_path)
    with locks.park_lock(tape):
        fd = locks.held_park_fd(tape)
        assert fd is not None
        command = subprocess.Popen(
            [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE, pass_fds=(fd,)
        )
    try:
        with locks.try_park_lock(tape) as held:
            assert not held  # the command holds it still
    finally:
        assert command.stdin is not None
        command.stdin.close()
        command.wait(60)
    with locks.try_park_lock(tape) as held:
        assert held


def test_a_test_session_inside_another_leaves_the_outer_sessions_tapes_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pytest.main in a test ended every group at its end, the outer session's too: a concurrent session then
    replaced the outer one's run log, drift and all."""
    from tapetui import pytest_plugin
    from tapetui.core import runstart

    tape, reg = _shared(tmp_path)
    monkeypatch.setenv(GROUP_ENV, "outer")
    _replay(tape, reg, 2)  # the outer session's run: it keeps its tape running
    assert str(runlog_path(tape)) in runstart._SESSION

    class Nested:  # a session inside: the group was set already, so it set none of its own
        stash = pytest.Stash()

    pytest_plugin.pytest_unconfigure(Nested())  # type: ignore[arg-type]
    assert str(runlog_path(tape)) in runstart._SESSION
    runstart.end_group()


def _session(tape: Path, reg: ToolRegistry, group: str, steps: list[tuple[Any, Any, int]]) -> None:
    """A test session of its own (a pytest process): each step waits for its turn, replays, and says it is done."""
    os.environ[GROUP_ENV] = group
    for turn, done, b in steps:
        turn.wait(60)
        _replay(tape, reg, b)
        done.set()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_two_test_sessions_at_once_whose_runs_take_turns_each_keep_their_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two pytest sessions sharing a tape whose runs never overlapped: each run found no run running and no run of
    its session in the file, and replaced it; session 1's drift was gone and check green."""
    tape, reg = _shared(tmp_path)
    monkeypatch.delenv(GROUP_ENV, raising=False)
    ctx = multiprocessing.get_context("fork")
    e = [ctx.Event() for _ in range(5)]
    s1 = ctx.Process(target=_session, args=(tape, reg, "S1", [(e[0], e[1], 2), (e[2], e[3], 1)]))
    s2 = ctx.Process(target=_session, args=(tape, reg, "S2", [(e[1], e[2], 1), (e[3], e[4], 1)]))
    for p in (s1, s2):
        p.start()
    e[0].set()  # S1's first test (drifts), S2's first, S1's second, S2's second: one after another
    for p in (s1, s2):
        p.join(120)
        assert p.exitcode == 0
    runs = runs_of(read_run_log(runlog_path(tape)))
    assert [run[0].get("group") for run in runs] == ["S1", "S2", "S1", "S2"]
    r = tapetui_cli(tmp_path, "check")
    assert r.returncode == 1 and "run 1 of 4: " in r.stdout and "args.b  1 → 2" in r.stdout, r.stdout
    _replay(tape, reg, 1)  # both sessions over: the next run replaces the file
    assert len(runs_of(read_run_log(runlog_path(tape)))) == 1


def _run_until_killed(tape: Path, reg: ToolRegistry, started: Any) -> None:  # noqa: ANN401 - a multiprocessing event
    t = Tape(tape, "replay", reg)
    t.call("add", {"a": 100, "b": 1})
    started.set()
    threading.Event().wait(300)  # until killed


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_run_whose_process_was_killed_no_longer_runs_and_the_next_replaces_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape, reg = _shared(tmp_path)
    monkeypatch.delenv(GROUP_ENV, raising=False)
    ctx = multiprocessing.get_context("fork")
    started = ctx.Event()
    proc = ctx.Process(target=_run_until_killed, args=(tape, reg, started))
    proc.start()
    try:
        assert started.wait(60)
    finally:
        proc.kill()
        proc.join(60)
    _replay(tape, reg, 1)
    runs = runs_of(read_run_log(runlog_path(tape)))
    assert [[e["event"] for e in run] for run in runs] == [["start", "hit", "end"]]
    assert tapetui_cli(tmp_path, "check").returncode == 0


def _replay_after(tape: Path, reg: ToolRegistry, go: Any) -> None:  # noqa: ANN401 - a multiprocessing event
    go.wait(60)
    _replay(tape, reg, 1)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_runs_of_one_group_started_at_once_in_many_processes_each_keep_every_event(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape, reg = _shared(tmp_path)
    monkeypatch.setenv(GROUP_ENV, "session-1")
    ctx = multiprocessing.get_context("fork")
    for round_ in range(5):  # each round from no run log at all, or a symlink in its place: a fresh checkout
        if round_ % 2:
            runlog_path(tape).unlink()
        else:
            runlog_path(tape).unlink(missing_ok=True)
            runlog_path(tape).symlink_to(tmp_path / "nowhere.jsonl")
        go = ctx.Event()
        procs = [ctx.Process(target=_replay_after, args=(tape, reg, go)) for _ in range(6)]
        for p in procs:
            p.start()
        go.set()  # every process starts its run at once: they race to create and join the run log
        for p in procs:
            p.join(120)
            assert p.exitcode == 0
        runs = runs_of(read_run_log(runlog_path(tape)))
        assert len(runs) == 6 and all([e["event"] for e in run] == ["start", "hit", "end"] for run in runs), runs
        assert len({run[0]["run"] for run in runs}) == 6
        assert tapetui_cli(tmp_path, "check").returncode == 0


SHARED_TESTS = """
import os
import pytest

B = int(os.environ.get("B", "1"))


@pytest.mark.tape(path="shared.jsonl")
def test_b(tape):
    assert tape.call("add", {"a": 100, "b": B}, live=lambda: 100 + B) == 100 + B


@pytest.mark.tape(path="shared.jsonl")
def test_a(tape):
    assert tape.call("add", {"a": 100, "b": 1}, live=lambda: 101) == 101
"""


@pytest.mark.slow  # four pytest sessions of their own
def test_a_test_session_whose_last_test_replays_a_shared_tape_cleanly_still_fails_check(tmp_path: Path) -> None:
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    (tmp_path / "test_s.py").write_text(SHARED_TESTS)
    env = {k: v for k, v in os.environ.items() if k != GROUP_ENV}

    def pytest_run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", *args]
        return subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, env={**env, **extra}, timeout=300)

    assert pytest_run("--tape-mode=record", "-k", "test_b").returncode == 0
    assert pytest_run().returncode == 0 and tapetui_cli(tmp_path, "check").returncode == 0
    failed = pytest_run(B="2")  # test_b drifts, then test_a replays the same tape cleanly
    assert failed.returncode == 1 and "1 failed, 1 passed" in failed.stdout, failed.stdout[-800:]
    r = tapetui_cli(tmp_path, "check")
    assert r.returncode == 1 and "run 1 of 2: " in r.stdout and "args.b  1 → 2" in r.stdout, r.stdout
    assert pytest_run().returncode == 0 and tapetui_cli(tmp_path, "check").returncode == 0  # the next session: afresh


def test_arguments_nested_as_deep_as_a_recording_takes_are_keyed_again_by_check_in_any_process(
    tmp_path: Path,
) -> None:
    (tmp_path / "tapes").mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    def f(x: dict[str, Any]) -> int:
        return 1

    def record(depth: int) -> None:
        v: Any = 1
        for _ in range(depth):
            v = {"a": v}
        with Tape(tmp_path / "tapes" / f"deep{depth}.jsonl", "record", reg) as t:
            t.call("f", {"x": v})

    for depth in (500, 950):  # past orjson's 254 levels, and near Python's own limit, from a caller's shallow stack
        recorder = threading.Thread(target=record, args=(depth,))
        recorder.start()
        recorder.join()
    assert (tmp_path / "tapes" / "deep950.jsonl").is_file()
    one, two = (tapetui_cli(tmp_path, "check", "--jobs", j) for j in ("1", "2"))
    assert one.returncode == two.returncode == 0 and one.stdout == two.stdout, one.stdout + two.stdout
    assert "2 session(s) checked, 0 with findings" in one.stdout


def test_a_failed_replays_toast_fits_a_small_terminal() -> None:
    from types import SimpleNamespace

    from tapetui.tui.controller import _fit

    said = "\n".join(f"line {i} " + "x" * 150 for i in range(8))
    small = _fit(said, SimpleNamespace(size=SimpleNamespace(width=80)))
    assert len(small.splitlines()) == 4 and all(len(ln) <= 44 for ln in small.splitlines()[:3])
    assert "5 more" in small
    assert _fit(said, SimpleNamespace(size=SimpleNamespace(width=200))) == said


def test_an_option_a_command_does_not_take_is_said_with_that_commands_usage(sample_dir: Path) -> None:
    r = tapetui_cli(sample_dir, "check", "--bogus")
    assert r.returncode == 2 and "usage: tapetui check" in r.stderr and "unrecognized arguments: --bogus" in r.stderr


def test_a_changelog_entry_for_one_step_says_step(sample_dir: Path, tapes: Path) -> None:
    r = tapetui_cli(sample_dir, "accept", "drift_summarize", "--step", "3", "--why", "shorter reports on purpose")
    assert r.returncode == 0, r.stderr
    heads = [ln for ln in (tapes / "CHANGELOG.md").read_text().splitlines() if ln.startswith("## ")]
    assert heads[-1].endswith("`drift_summarize` — step 3"), heads[-1]
    assert tapetui_cli(sample_dir, "undo", "drift_summarize").returncode == 0  # the entry is read back by undo


def test_a_rerecord_that_changed_nothing_says_so(sample_dir: Path) -> None:
    r = tapetui_cli(sample_dir, "rerecord", "clean", "--step", "2")
    assert r.returncode == 0 and "its result is the same as the golden's" in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_a_new_run_log_is_written_through_its_own_name(tmp_path: Path) -> None:
    from tapetui.core.runstart import open_run

    # a folder watcher (the app's) names a file's changes by the name its writer opened it by: never a temp name
    path = tmp_path / "s.run.jsonl"
    for start in ({"event": "start", "mode": "replay"}, {"event": "start", "group": "g", "mode": "replay"}):
        run = open_run(path, start)
        try:
            assert os.readlink(f"/proc/self/fd/{run.out._fd}") == str(path)
        finally:
            run.close()


def test_group_values_whose_names_clash_each_get_a_tape_of_their_own(proj: Path) -> None:
    h = hashlib.sha256(b"a b").hexdigest()[:6]
    values = [f"a_b-{h}", "a b", f"a_b-{h}-{h}"]  # the second's name is the first's, made unique: the third's
    fx.write(proj / "t.jsonl", *(_traced(f"{i + 1:032x}", agent=v) for i, v in enumerate(values)))
    r = tapetui_cli(proj, "import", "otlp", "t.jsonl", "--group-by", "agent")
    assert r.returncode == 0 and r.stdout.count("golden ") == 3 and "candidate" not in r.stdout, r.stdout


def test_a_group_by_attribute_the_rules_hide_names_no_file(proj: Path) -> None:
    fx.write(proj / "t.jsonl", _traced("1" * 32, **{"session.id": "S3CR3TSESSION42"}))
    r = tapetui_cli(proj, "import", "otlp", "t.jsonl", "--group-by", "session.id")
    assert r.returncode == 0 and "S3CR3TSESSION42" not in r.stdout + r.stderr
    for f in (proj / "tapes").iterdir():
        assert "S3CR3TSESSION42" not in f.name + f.read_text()


def test_a_golden_with_no_complete_line_is_no_tape_to_diff_or_export(sample_dir: Path, tapes: Path) -> None:
    (tapes / "nolines.jsonl").write_text('{"type":"session"')
    for argv in (("diff", "nolines", "clean"), ("export", "otlp", "nolines")):
        r = tapetui_cli(sample_dir, *argv)
        assert r.returncode == 2 and "not a tape (no complete line)" in r.stderr and not r.stdout, argv


def test_stats_reads_no_run_log_that_links_out_and_shows_none_of_its_secrets(sample_dir: Path, tapes: Path) -> None:
    outside = sample_dir.parent / "outside.run.jsonl"
    outside.write_text('{"event":"start","mode":"replay"}\n{"event":"end","stats":{"note":"OUTSIDE-CONTENT"}}\n')
    (tapes / "clean.run.jsonl").unlink()
    (tapes / "clean.run.jsonl").symlink_to(outside)
    with (tapes / "stale_quote.run.jsonl").open("a") as fh:
        fh.write('{"event":"end","stats":{"password":"hunter2hunter2"}}\n')
    r = tapetui_cli(sample_dir, "stats", "--json")
    assert r.returncode == 2 and "OUTSIDE-CONTENT" not in r.stdout and "hunter2hunter2" not in r.stdout
    rows = json.loads(r.stdout)
    assert "not followed" in rows["clean"]["error"] and rows["stale_quote"]["last_run"]["password"] == "[REDACTED]"
    text = tapetui_cli(sample_dir, "stats")
    assert text.returncode == 2 and "tapetui: clean: " in text.stderr and "stale_quote:" in text.stdout


def test_a_torn_tail_is_never_set_aside_through_a_planted_symlink(tmp_path: Path) -> None:
    from tapetui.core.tapefile import Appender

    log = tmp_path / "x.run.jsonl"
    log.write_bytes(b'{"event":"start"}\n{"event":"hit","se')  # a kill mid-append
    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    (tmp_path / "x.run.jsonl.torn").symlink_to(outside)
    with Appender(log) as out:
        out.append(b'{"event":"end"}\n')
    assert outside.read_text() == "precious\n" and not (tmp_path / "x.run.jsonl.torn").is_symlink()
    assert (tmp_path / "x.run.jsonl.torn").read_bytes() == b'{"event":"hit","se\n'


def test_a_fill_between_two_replays_of_one_session_keeps_every_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tape, reg = _shared(tmp_path)
    monkeypatch.setenv(GROUP_ENV, "session-1")
    _replay(tape, reg, 2)  # drifts
    with Tape(tape, "fill", reg) as t:  # another test, marked mode="fill", sharing the tape
        t.call("add", {"a": 100, "b": 1})
    _replay(tape, reg, 1)
    r = tapetui_cli(tmp_path, "check")
    assert r.returncode == 1 and "run 1 of 3: " in r.stdout and "args.b  1 → 2" in r.stdout, r.stdout


def test_a_blank_or_secret_run_group_is_no_group_or_a_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    from tapetui.core.runstart import run_group

    monkeypatch.setenv(GROUP_ENV, "  ")
    assert run_group() is None
    monkeypatch.setenv(GROUP_ENV, "api_key=sk-" + "a" * 40)
    group = run_group()
    assert group is not None and group.startswith("sha256:") and "sk-" not in group


def test_a_group_whose_earlier_run_was_killed_is_running_in_the_tree_and_no_matching_sample(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tapetui.core.runlog import RunSummary

    tape, reg = _shared(tmp_path)
    monkeypatch.setenv(GROUP_ENV, "session-1")
    _replay(tape, reg, 1)
    log = runlog_path(tape)
    killed = [ln for ln in log.read_text().splitlines() if '"event":"end"' not in ln]  # as a kill before its end
    log.write_text("\n".join(killed) + "\n")
    _replay(tape, reg, 1)  # the next test's run ends
    summary = RunSummary.of(read_run_log(log))
    assert summary.running  # a run of the group never ended: the tree says so, as check does
    r = tapetui_cli(tmp_path, "check", "--sample", str(log))
    assert "0 of 1 samples match" in r.stdout, r.stdout


def test_stats_last_run_of_a_group_is_its_last_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tape, reg = _shared(tmp_path)
    monkeypatch.setenv(GROUP_ENV, "session-1")
    _replay(tape, reg, 2)  # drifts
    _replay(tape, reg, 1)  # the last run: clean
    r = tapetui_cli(tmp_path, "stats", "--json")
    last = json.loads(r.stdout)["shared"]["last_run"]
    assert last["statuses"] == {"hit": 1} and last["tape_hits"] == 1, last
