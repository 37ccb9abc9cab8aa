from __future__ import annotations

import contextlib
import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import TapeError, load_config
from tapetui.core.store import candidate_path
from tapetui.core.tapefile import read_index
from tapetui.review import accept, check, compare, expire, recover, reject, rerecord, restore


def calls_of(path: Path) -> list[dict]:
    return [r for r in map(orjson.loads, path.read_bytes().splitlines()) if r.get("type") == "call"]


def test_compare_drift_candidate(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    cmp = compare(g, candidate_path(g), cfg)
    assert cmp.edit_distance == 0 and not cmp.contracts
    step3 = [s for s in cmp.changed_steps if s.seq == 3][0]
    assert step3.kind == "changed" and step3.tool == "summarize"
    assert [(c.path, c.old, c.new) for c in step3.arg_changes] == [("max_words", 120, 80)]
    assert "summarize  step 3  args.max_words  120 → 80" in cmp.lines()


def test_compare_explains_contract_change(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "contract_change.jsonl"
    cmp = compare(g, candidate_path(g), cfg)
    old, new, why = cmp.contracts["summarize"]
    assert old != new
    assert "version: 1.0.0 → 1.1.0" in why
    assert "schema.properties.max_words.maximum  500 → 200" in why


def test_alignment_names_inserted_and_skipped_steps(tmp_path: Path, sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "clean.jsonl"
    lines = g.read_bytes().splitlines(keepends=True)
    calls = [i for i, ln in enumerate(lines) if b'"type":"call"' in ln]
    # Insert a copy of step 1 after it, drop step 3: steps 2 and 4 must still line up.
    extra = lines[calls[0]].replace(b'"seq":1', b'"seq":2').replace(b'"doc_id":"handbook"', b'"doc_id":"appendix"')
    other = lines[: calls[1]] + [extra] + [lines[calls[1]]] + [lines[calls[3]]]
    o = tmp_path / "other.jsonl"
    o.write_bytes(b"".join(other))
    cmp = compare(g, o, cfg)
    kinds = [(s.kind, s.tool) for s in cmp.steps]
    assert ("added", "fetch_doc") in kinds and ("skipped", "summarize") in kinds
    assert [s.kind for s in cmp.steps if s.tool in ("search_index", "write_report")] == ["same", "same"]
    assert cmp.edit_distance == 2


def test_ignore_rules_hide_volatile_paths(tmp_path: Path, sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "clean.jsonl"
    text = g.read_text().replace('"doc_id":"handbook","title"', '"doc_id":"handbook","request_id":"r-2","title"')
    o = tmp_path / "o.jsonl"
    o.write_text(text)
    assert compare(g, o, cfg).clean


def test_sample_drift_fails_check_until_accepted(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    rep = {r.session: r for r in check(cfg.tapes_dir, cfg)}
    assert not rep["drift_summarize"].ok and rep["clean"].ok
    with pytest.raises(TapeError, match="needs a rationale"):
        accept(cfg, g, "  ")
    assert candidate_path(g).exists()
    entry = accept(cfg, g, "max_words lowered to 80 on purpose: shorter reports")
    assert not candidate_path(g).exists()
    assert [c["args"]["max_words"] for c in calls_of(g) if c["tool"] == "summarize"] == [80]
    log = cfg.changelog.read_text()
    assert entry.id in log and "shorter reports" in log and "args.max_words  120 → 80" in log
    # The old run log still shows the drift: replaying against the new golden clears it.
    from tapetui.sample_agent import replay

    assert replay(g) == 0
    rep = {r.session: r for r in check(cfg.tapes_dir, cfg)}
    assert rep["drift_summarize"].ok


def test_accept_single_aligned_step(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    accept(cfg, g, "take the new summarize only", steps=[3])
    summ, report = calls_of(g)[2], calls_of(g)[3]
    assert summ["args"]["max_words"] == 80 and summ["seq"] == 3
    assert "760" in str(report["result"])  # step 4 untouched
    assert candidate_path(g).exists()  # step 4 still differs
    with pytest.raises(TapeError, match="step 9 does not line up"):
        accept(cfg, g, "x", steps=[9])


def test_reject_and_expire(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    before = g.read_bytes()
    rejected = reject(cfg, g)
    assert not candidate_path(g).exists() and g.read_bytes() == before
    # a reject is always logged, reason or not: what was discarded and the keys it changed
    log = cfg.changelog.read_text()
    assert log.count("<!-- tapetui:entry") == 1 and rejected.id in log
    assert "candidate drift_summarize.candidate.jsonl discarded" in log and "step 3 summarize (changed): key" in log
    s = cfg.tapes_dir / "stale_quote.jsonl"
    before_s = s.read_bytes()
    # quote_price expired on 2026-01-09 already: expiring it again changes nothing and logs nothing
    with pytest.raises(TapeError, match="already expired: step 4 .at 2026-01-09T10:00:04Z.; nothing to do"):
        expire(cfg, s, all_time_sensitive=True, why="prices moved")
    assert s.read_bytes() == before_s and cfg.changelog.read_text() == log
    with pytest.raises(TapeError, match="no time-sensitive"):
        expire(cfg, g, all_time_sensitive=True)
    expire(cfg, g, [2], why="re-check the index")
    assert calls_of(g)[1]["expires_at"] is not None
    assert "marked expired at" in cfg.changelog.read_text() and "expires_at None" not in cfg.changelog.read_text()
    with pytest.raises(TapeError, match="already expired"):  # x pressed twice: one entry, expiry unchanged
        expire(cfg, g, [2], why="again")
    assert cfg.changelog.read_text().count("<!-- tapetui:entry") == 2  # the reject and the expire


def test_expired_entry_is_rerecorded_by_fill(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    s = cfg.tapes_dir / "stale_quote.jsonl"  # its step 4 expired on 2026-01-09
    from tapetui.sample_agent import replay

    assert replay(s, "fill") == 0
    cand = calls_of(candidate_path(s))
    assert cand[3]["tool"] == "quote_price" and cand[3]["expires_at"] > cand[3]["recorded_at"]


def test_rerecord_runs_live_tool_and_makes_a_candidate(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "clean.jsonl"
    before = g.read_bytes()
    with pytest.raises(TapeError, match="side effects.*--yes"):
        rerecord(cfg, g, 4)
    cand = rerecord(cfg, g, 2)
    assert g.read_bytes() == before and cand.exists()
    assert calls_of(cand)[1].get("rerecorded") is True
    assert compare(g, cand, cfg).clean  # same tool, same result: nothing to review but the candidate
    with pytest.raises(TapeError, match="no step 99"):
        rerecord(cfg, g, 99)


def test_rerecording_every_step_of_the_untouched_clean_sample_shows_no_difference(
    sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tape keeps the arguments as the agent passed them (whitespace too): running a step's tool again
    with its recorded arguments gives the recorded result (the report's body ends with a newline)."""
    monkeypatch.setenv("TAPETUI_SAMPLE_REPORTS", str(sample_dir / "reports"))
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "clean.jsonl"
    steps = [c["seq"] for c in calls_of(g)]
    assert calls_of(g)[-1]["args"]["body"].endswith("\n")
    for seq in steps:
        cand = rerecord(cfg, g, seq, yes=True)
    cmp = compare(g, cand, cfg)
    assert cmp.clean, [line for s in cmp.changed_steps for line in s.lines()]
    assert [c.get("rerecorded") for c in calls_of(cand)] == [True] * len(steps)


def test_restore_writes_an_undo_entry(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    before, cand = g.read_bytes(), candidate_path(g).read_bytes()
    accept(cfg, g, "try it")
    restore(cfg, g, before, "undo: not yet", candidate=cand)
    assert g.read_bytes() == before and candidate_path(g).read_bytes() == cand
    assert "undo" in cfg.changelog.read_text()


CHILD = r"""
import os, sys
import tapetui.review.journal as g
from tapetui.review import accept
from tapetui import load_config
point, when = sys.argv[1], sys.argv[2]
def wrap(owner, name):
    orig = getattr(owner, name)
    def f(*a, **k):
        if when == "before":
            os.kill(os.getpid(), 9)
        r = orig(*a, **k)
        if when == "after":
            os.kill(os.getpid(), 9)
        return r
    setattr(owner, name, f)
owners = {"journal": (g, "atomic_write"), "changelog": (g, "append_entry"), "rename": (g.os, "replace"),
          "unlink": (g, "candidate_path")}
if point == "tmp":
    def o(path, data):
        with open(path, "wb") as fh:
            fh.write(data[:7])
            fh.flush()
        os.kill(os.getpid(), 9)
    g.write_new = o
else:
    wrap(*owners[point])
cfg = load_config(sys.argv[3])
accept(cfg, cfg.tapes_dir / "drift_summarize.jsonl", "killed mid-way")
"""


@pytest.mark.parametrize(
    "point,when",
    [
        ("tmp", "during"),
        ("journal", "before"),
        ("journal", "after"),
        ("changelog", "before"),
        ("changelog", "after"),
        ("rename", "before"),
        ("rename", "after"),
        ("unlink", "before"),
    ],
)
def test_killed_accept_never_leaves_a_golden_without_its_entry(sample_dir: Path, point: str, when: str) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    old, new = g.read_bytes(), candidate_path(g).read_bytes()
    r = subprocess.run(
        [sys.executable, "-c", CHILD, point, when, str(sample_dir / "tapes.toml")],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
    )
    assert r.returncode == -9, r.stderr.decode()
    recover(cfg)  # what every command does first
    logged = cfg.changelog.exists() and "killed mid-way" in cfg.changelog.read_text()
    now = g.read_bytes()
    assert now in (old, new)
    assert (now == new) == logged, (point, when, logged)
    if now == new:
        assert not candidate_path(g).exists()
    else:
        assert candidate_path(g).read_bytes() == new
    assert not list(cfg.tapes_dir.glob(".*.next")) and not list(cfg.tapes_dir.glob("*.journal"))
    read_index(g, validate=True)


# ---- check never says green when it must not ----------------------------------------------------------
def _replay_tape(tmp_path: Path) -> tuple[Path, Any, Any]:
    from tapetui import Config, Tape, ToolRegistry

    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    def lookup(q: str, request_id: str = "") -> dict[str, str]:
        return {"q": q}

    cfg = Config.for_dir(tmp_path)  # volatile defaults on: they hide request_id in results, never in arguments
    tape = tmp_path / "s.jsonl"
    with Tape(tape, "record", reg, config=cfg, run_log=False) as t:
        for i in range(5):
            t.call("lookup", {"q": f"q{i}", "request_id": f"r{i}"})
    return tape, reg, cfg


def test_a_run_that_ended_in_drift_on_an_ignored_path_is_a_finding(tmp_path: Path) -> None:
    from tapetui import Tape, TapeDrift

    tape, reg, cfg = _replay_tape(tmp_path)
    with pytest.raises(TapeDrift), Tape(tape, "replay", reg, config=cfg) as t:
        t.call("lookup", {"q": "q0", "request_id": "r0"})
        t.call("lookup", {"q": "q1", "request_id": "r1"})
        t.call("lookup", {"q": "q2", "request_id": "new"})  # only an ignored path differs: still a new key
    (rep,) = check(tmp_path, cfg)  # a volatile default never hides an argument: a plain drift
    assert not rep.ok and 'lookup  step 3  args.request_id  "r2" → "new"' in [f.text for f in rep.findings]
    # [diff] ignore names it since the run (replay would have tolerated it): still the drift the run stopped at
    (rep,) = check(tmp_path, dataclasses.replace(cfg, ignore=("request_id",)))
    assert not rep.ok and rep.error is None
    texts = [f.text for f in rep.findings if not f.warning]
    assert (
        "lookup  step 3  run ended with TapeDrift at step 3; the changed paths are ignored in diffs but still "
        "part of the call key (args.request_id)" in texts
    )
    assert any("step(s) 4, 5 not reached" in x for x in texts)


def test_a_drift_on_an_ignored_path_that_the_agent_caught_is_a_finding(tmp_path: Path) -> None:
    from tapetui import Tape, TapeDrift

    tape, reg, cfg = _replay_tape(tmp_path)
    with Tape(tape, "replay", reg, config=cfg) as t:
        for i in range(5):
            with contextlib.suppress(TapeDrift):  # a fallback branch: the run goes on, and ends without an error
                t.call("lookup", {"q": f"q{i}", "request_id": "other" if i == 1 else f"r{i}"})
    (rep,) = check(tmp_path, cfg)  # a volatile default never hides an argument: a plain drift
    assert [f.text for f in rep.findings if f.kind == "drift"] == ['lookup  step 2  args.request_id  "r1" → "other"']
    (rep,) = check(tmp_path, dataclasses.replace(cfg, ignore=("request_id",)))  # [diff] ignore names it since
    assert not rep.ok
    assert [f.text for f in rep.findings if f.kind == "drift"] == [
        "lookup  step 2  drift only in ignored paths (args.request_id); they are still part of the call key, "
        "so the replay raised TapeDrift"
    ]


def test_a_killed_replay_with_no_end_is_a_finding(tmp_path: Path) -> None:
    from tapetui import Tape

    tape, reg, cfg = _replay_tape(tmp_path)
    t = Tape(tape, "replay", reg, config=cfg)
    t.call("lookup", {"q": "q0", "request_id": "r0"})
    t.call("lookup", {"q": "q1", "request_id": "r1"})  # and then the process dies: no close, no end event
    try:
        (rep,) = check(tmp_path, cfg)
        assert not rep.ok
        assert [f.text for f in rep.findings] == [
            "run log has no end: the replay was killed or is still running (3 events)"
        ]
    finally:
        t.close()
    (rep,) = check(tmp_path, cfg)  # closed: an end, and the three steps never called are unused
    assert [f.kind for f in rep.findings] == ["tools", "unused", "unused", "unused"]


def test_an_empty_run_log_is_a_finding(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    (cfg.tapes_dir / "clean.run.jsonl").write_bytes(b"")
    rep = {r.session: r for r in check(cfg.tapes_dir, cfg)}["clean"]
    assert not rep.ok and "run log has no end" in rep.findings[0].text and "(0 events)" in rep.findings[0].text


def test_a_hand_edited_argument_whose_key_no_longer_matches_is_a_finding(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "clean.jsonl"
    assert {r.session: r for r in check(cfg.tapes_dir, cfg)}["clean"].ok
    lines = g.read_bytes().splitlines(keepends=True)
    n = next(i for i, ln in enumerate(lines) if b'"doc_id":"handbook"' in ln)
    lines[n] = lines[n].replace(b'"doc_id":"handbook"', b'"doc_id":"handbook-v2"')  # the key is left as it was
    g.write_bytes(b"".join(lines))
    rep = {r.session: r for r in check(cfg.tapes_dir, cfg)}["clean"]
    assert not rep.ok
    (f,) = [f for f in rep.findings if f.kind == "key"]
    assert f.text.startswith(f"{g}:{n + 1}: fetch_doc step ") and "is not the key of the arguments" in f.text
    # keys are compared on the arguments as canon makes them: a line the writer did not lay out is fine
    obj = orjson.loads(lines[n])
    obj["args"] = {"doc_id": " handbook-v2 "}  # canon strips: the same key as "handbook-v2"
    from tapetui.core.keys import key_of

    obj["key"] = key_of(obj["tool"], {"doc_id": "handbook-v2"})
    lines[n] = orjson.dumps(obj) + b"\n"
    g.write_bytes(b"".join(lines))
    assert not [f for f in {r.session: r for r in check(cfg.tapes_dir, cfg)}["clean"].findings if f.kind == "key"]


def test_check_of_a_folder_with_no_tapes_raises(tmp_path: Path) -> None:
    from tapetui import Config

    for folder in (tmp_path / "missing", tmp_path / "empty"):
        if folder.name == "empty":
            folder.mkdir()
        with pytest.raises(TapeError, match=f"no tapes found in {folder} \\(tapes.toml: none found\\)"):
            check(folder, Config.for_dir(folder))
