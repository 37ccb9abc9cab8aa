"""Promises that hold, round 4: what a hostile tester found in the review commands (accept, undo, the changelog,
a tape's name on the command line).

Each test failed before the change it guards.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tapetui.core.store import candidate_path
from tests.builders import HEADER, call_line
from tests.conftest import tapetui_cli


def _tapes(root: Path, *names: str) -> Path:
    """A tapes folder whose sessions ``names`` each have a golden and a candidate differing in one argument."""
    (root / "tapes").mkdir()
    (root / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    for name in names:
        (root / "tapes" / f"{name}.jsonl").write_bytes(HEADER + call_line(seq=1, tool="t", args={"q": 1}, result=1))
        (root / "tapes" / f"{name}.candidate.jsonl").write_bytes(
            HEADER + call_line(seq=1, tool="t", args={"q": 2}, result=2)
        )
    return root / "tapes"


def test_an_empty_candidate_is_never_accepted_over_a_golden(tmp_path: Path) -> None:
    """A recording killed as it began leaves an empty candidate: accepted, it emptied the golden."""
    tapes = _tapes(tmp_path, "s")
    golden = (tapes / "s.jsonl").read_bytes()
    (tapes / "s.candidate.jsonl").write_bytes(b"")
    r = tapetui_cli(tmp_path, "accept", "s", "--why", "looks fine")
    assert r.returncode == 2 and "not a tape (no complete line); nothing to accept" in r.stderr, r.stderr
    assert (tapes / "s.jsonl").read_bytes() == golden and not (tapes / "CHANGELOG.md").exists()
    assert tapetui_cli(tmp_path, "reject", "s").returncode == 0  # what the message says to do works


def test_an_accepted_candidates_torn_last_line_is_said_in_its_changelog_entry(tmp_path: Path) -> None:
    tapes = _tapes(tmp_path, "s")
    with open(tapes / "s.candidate.jsonl", "ab") as fh:
        fh.write(b'{"type":"call","seq":2,"tool":"t"')  # a recording killed mid-line
    r = tapetui_cli(tmp_path, "accept", "s", "--why", "ok")
    assert r.returncode == 0, r.stderr
    log = (tapes / "CHANGELOG.md").read_text()
    assert "s.candidate.jsonl: torn last line 3 (33 bytes, an interrupted write) left out" in log, log
    assert b'"seq":2' not in (tapes / "s.jsonl").read_bytes()


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_an_accept_whose_entry_cannot_be_written_changes_nothing_and_journals_nothing(
    tmp_path: Path, kind: str
) -> None:
    """It said the accept failed, but left a journal: the next command's recover finished the accept."""
    tapes = _tapes(tmp_path, "s")
    golden = (tapes / "s.jsonl").read_bytes()
    log = tapes / "CHANGELOG.md"
    log.mkdir() if kind == "folder" else os.mkfifo(log)
    r = tapetui_cli(tmp_path, "accept", "s", "--why", "first try")
    assert r.returncode == 2 and "the changelog must be a regular file" in r.stderr, r.stderr
    assert sorted(p.name for p in tapes.iterdir() if not p.name.startswith(".")) == [
        "CHANGELOG.md",
        "s.candidate.jsonl",
        "s.jsonl",
    ]
    log.rmdir() if kind == "folder" else log.unlink()
    assert "nothing to recover" in tapetui_cli(tmp_path, "recover").stdout
    assert (tapes / "s.jsonl").read_bytes() == golden and candidate_path(tapes / "s.jsonl").exists()


def test_two_sessions_whose_names_differ_in_a_backtick_keep_entries_of_their_own(tmp_path: Path) -> None:
    """A backtick was written as a quote: `x`y` and `x'y` shared a heading, and undo of one found the other's."""
    tapes = _tapes(tmp_path, "x`y", "x'y", "a\\x0ab")
    assert tapetui_cli(tmp_path, "accept", "x`y", "--why", "A").returncode == 0
    assert tapetui_cli(tmp_path, "accept", "x'y", "--why", "B").returncode == 0
    heads = [ln for ln in (tapes / "CHANGELOG.md").read_text().splitlines() if ln.startswith("## ")]
    assert heads[0].endswith(" — accept `x\\x60y` — step 1") and heads[1].endswith(" — accept `x'y` — step 1"), heads
    r = tapetui_cli(tmp_path, "undo", "x`y")
    assert r.returncode == 0, r.stderr
    assert candidate_path(tapes / "x`y.jsonl").exists() and not candidate_path(tapes / "x'y.jsonl").exists()


@pytest.mark.parametrize("name", ["", ".", "/", "..", "./", "tapes/.."])
@pytest.mark.parametrize("command", [["accept", "--why", "x"], ["reject"], ["diff"], ["undo"]])
def test_a_name_that_names_no_file_is_a_clear_error(tmp_path: Path, name: str, command: list[str]) -> None:
    _tapes(tmp_path, "s")
    r = tapetui_cli(tmp_path, command[0], name, *command[1:])
    assert r.returncode == 2 and "not a tape's name" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_rerecord_into_a_pending_candidate_keeps_the_candidate_it_rewrote(
    sample_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Its step was overwritten and the earlier recording of it kept nowhere: no sample, no history, no entry."""
    cand = sample_dir / "sample_tapes" / "drift_summarize.candidate.jsonl"
    samples = sample_dir / "sample_tapes" / "drift_summarize.samples"
    before = cand.read_bytes()
    assert tapetui_cli(sample_dir, "rerecord", "drift_summarize", "--step", "3", "--yes").returncode == 0
    (kept,) = samples.iterdir()
    assert kept.read_bytes() == before and cand.read_bytes() != before
    assert any("is kept in" in r.getMessage() and r.levelname == "WARNING" for r in caplog.records)
    # a candidate a re-record made holds the golden's copies of its other steps: re-recorded, nothing is lost
    clean = sample_dir / "sample_tapes" / "clean.samples"
    for step, kept_then in ((2, 0), (3, 0), (2, 1)):  # the third re-records the candidate's own recording
        assert tapetui_cli(sample_dir, "rerecord", "clean", "--step", str(step), "--yes").returncode == 0
        assert len(list(clean.iterdir()) if clean.exists() else []) == kept_then, step


def test_a_session_whose_name_is_not_utf8_is_accepted_and_undone(tmp_path: Path) -> None:
    """Its name reached the history's and the journal's JSON as it was: a traceback, and orphan history files."""
    name = os.fsdecode(b"d\xff")
    tapes = _tapes(tmp_path, name)
    golden = (tapes / f"{name}.jsonl").read_bytes()
    r = tapetui_cli(tmp_path, "accept", name, "--why", "ok")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    heads = [ln for ln in (tapes / "CHANGELOG.md").read_text().splitlines() if ln.startswith("## ")]
    assert heads[-1].endswith(" — accept `d\\\\udcff` — step 1"), heads
    r = tapetui_cli(tmp_path, "undo", name)
    assert r.returncode == 0, r.stderr
    assert (tapes / f"{name}.jsonl").read_bytes() == golden and candidate_path(tapes / f"{name}.jsonl").exists()
