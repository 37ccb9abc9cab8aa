"""Undo from any process: the commit protocol keeps the bytes each change replaced under .tapetui/history/."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tapetui import TapeError, load_config
from tapetui.core.config import Config
from tapetui.core.store import candidate_path, iter_goldens, samples_of
from tapetui.review import accept, check, expire, reject, undo, undo_target
from tapetui.review.changelog import logged_entries
from tapetui.review.history import KEEP, history_dir, records
from tests.conftest import tapetui_cli

ROOT = Path(__file__).resolve().parent.parent


def tapetui(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tapetui_cli(cwd, *args)


def _undo_entries(cfg: Config) -> list[tuple[str, str | None]]:
    return [(e.id, e.reverts) for e in logged_entries(cfg.changelog) if e.action == "undo"]


@pytest.mark.slow
def test_undo_in_another_process_restores_the_exact_bytes_of_an_accept_made_by_another(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    golden, cand = g.read_bytes(), candidate_path(g).read_bytes()
    r = tapetui(sample_dir, "accept", "drift_summarize", "--why", "shorter summaries")
    assert r.returncode == 0, r.stderr
    accepted = re.search(r"changelog entry ([0-9a-f]+)", r.stdout)
    assert accepted is not None and g.read_bytes() == cand and not candidate_path(g).exists()
    r = tapetui(sample_dir, "undo", "drift_summarize")
    assert r.returncode == 0, r.stderr
    assert g.read_bytes() == golden and candidate_path(g).read_bytes() == cand
    assert f"reverts changelog entry {accepted[1]}" in r.stdout
    ((undo_id, reverts),) = _undo_entries(cfg)
    assert reverts == accepted[1] and undo_id in r.stdout
    # history lives in the project folder, hidden: never taken for a tape
    assert (sample_dir / ".tapetui" / "history" / "drift_summarize").is_dir()
    assert all(".tapetui" not in str(p) for p in iter_goldens(sample_dir))
    # nothing left to undo for this session: said clearly, exit 2, nothing changed
    r = tapetui(sample_dir, "undo", "drift_summarize")
    assert r.returncode == 2 and "nothing to undo" in r.stderr and "Traceback" not in r.stderr
    assert g.read_bytes() == golden


def test_undo_of_a_reject_with_and_without_a_reason(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "contract_change.jsonl"
    golden, cand = g.read_bytes(), candidate_path(g).read_bytes()
    first = reject(cfg, g)  # no reason: a changelog entry all the same (what was discarded), and history
    assert first.id in cfg.changelog.read_text() and first.rationale is None and not candidate_path(g).exists()
    entry = undo(cfg, g)
    assert candidate_path(g).read_bytes() == cand and g.read_bytes() == golden
    assert entry.action == "undo"
    rej = reject(cfg, g, "not this contract")
    assert rej is not None
    entry = undo(cfg, g)
    assert candidate_path(g).read_bytes() == cand and f"reverts changelog entry {rej.id}" in entry.details[0]
    assert (entry.id, rej.id) in _undo_entries(cfg)


def test_undo_of_an_expire_then_of_the_accept_before_it(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    original, cand = g.read_bytes(), candidate_path(g).read_bytes()
    acc = accept(cfg, g, "take it")
    after_accept = g.read_bytes()
    exp = expire(cfg, g, [2], why="refresh")
    assert g.read_bytes() != after_accept
    first = undo(cfg, g)  # the newest: the expire
    assert g.read_bytes() == after_accept and f"reverts changelog entry {exp.id}" in first.details[0]
    second = undo(cfg, g)  # a second undo reverts the change before: the accept
    assert g.read_bytes() == original and candidate_path(g).read_bytes() == cand
    assert f"reverts changelog entry {acc.id}" in second.details[0]
    with pytest.raises(TapeError, match="nothing to undo"):
        undo(cfg, g)


def test_a_newer_candidate_is_never_overwritten_by_an_undo(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    newer = g.read_bytes()  # a later recording that happens to be the old golden again
    accept(cfg, g, "take it")
    after = g.read_bytes()
    accepted = candidate_path(g).exists()
    candidate_path(g).write_bytes(newer)
    entry = undo(cfg, g)  # the accept's candidate comes back; the newer one is kept beside it, never lost
    assert not accepted and g.read_bytes() != after
    (kept,) = samples_of(g)
    assert kept.read_bytes() == newer and str(kept) in entry.details[1]


def test_undo_walks_back_through_two_accepts_in_a_row(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    original, cand_a = g.read_bytes(), candidate_path(g).read_bytes()
    accept(cfg, g, "A")
    cand_b = (cfg.tapes_dir / "clean.jsonl").read_bytes()
    candidate_path(g).write_bytes(cand_b)
    accept(cfg, g, "B")
    undo(cfg, g)  # B: its candidate is pending again
    assert candidate_path(g).read_bytes() == cand_b
    undo(cfg, g)  # A: the golden before it and A's candidate; B's candidate is kept in the samples
    assert g.read_bytes() == original and candidate_path(g).read_bytes() == cand_a
    assert [p.read_bytes() for p in samples_of(g)] == [cand_b]


def test_history_is_gone_is_said_clearly(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    acc = accept(cfg, g, "take it")
    for p in history_dir(cfg, g).iterdir():
        p.unlink()
    with pytest.raises(TapeError, match=f"changelog entry {acc.id}: its history is gone"):
        undo(cfg, g)


def test_21_accepts_keep_the_last_20_history_records(tmp_path: Path, sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    versions = [g.read_bytes(), candidate_path(g).read_bytes()]
    ids = []
    for n in range(KEEP + 1):
        candidate_path(g).write_bytes(versions[(n + 1) % 2])
        ids.append(accept(cfg, g, f"accept {n}").id)
    kept = records(cfg, g)
    assert len(kept) == KEEP and [r.id for r in kept] == ids[1:]
    files = list(history_dir(cfg, g).iterdir())  # each: the golden and candidate before, and its .json
    assert len(files) == 3 * KEEP and {f.name.partition(".")[0] for f in files} == {r.stem for r in kept}
    target = undo_target(cfg, g)
    assert target is not None and target.id == ids[-1]


def test_check_never_takes_history_for_tapes(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    before = len(check(cfg.tapes_dir, cfg))
    accept(cfg, cfg.tapes_dir / "drift_summarize.jsonl", "take it")
    # a project whose tapes folder is its root: the history folder sits among the tapes
    flat = Config.for_dir(cfg.tapes_dir)
    expire(flat, cfg.tapes_dir / "clean.jsonl", [2], why="x")
    assert (cfg.tapes_dir / ".tapetui" / "history").is_dir()
    assert len(check(cfg.tapes_dir, cfg)) == before


def test_history_is_never_kept_through_a_symlink_out_of_the_project(sample_dir: Path, tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    golden = g.read_bytes()
    outside = tmp_path_factory.mktemp("outside")
    (sample_dir / ".tapetui").symlink_to(outside, target_is_directory=True)
    r = tapetui(sample_dir, "accept", "drift_summarize", "--why", "shorter summaries")
    assert r.returncode == 2 and "not a folder tapetui made (a symlink)" in r.stderr and "Traceback" not in r.stderr
    assert list(outside.iterdir()) == [] and g.read_bytes() == golden and candidate_path(g).exists()
    assert not cfg.changelog.exists()  # no change, so no entry


def test_a_fifo_or_folder_among_the_records_is_skipped_never_waited_on(sample_dir: Path) -> None:
    import os

    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    golden = g.read_bytes()
    acc = accept(cfg, g, "take it")
    folder = history_dir(cfg, g)
    os.mkfifo(folder / f"{'9' * 20}-deadbeef.json")  # newest by its name, and no writer will ever come
    (folder / f"{'9' * 19}8-cafe.json").mkdir()
    target = undo_target(cfg, g)
    assert target is not None and target.id == acc.id
    undo(cfg, g)
    assert g.read_bytes() == golden


def test_undo_records_do_not_push_the_changes_they_revert_out_of_the_history(
    sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tapetui.review.history as history

    monkeypatch.setattr(history, "KEEP", 2)
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    original = g.read_bytes()
    accept(cfg, g, "A")
    candidate_path(g).write_bytes((cfg.tapes_dir / "clean.jsonl").read_bytes())
    accept(cfg, g, "B")
    undo(cfg, g)
    undo(cfg, g)  # A's record is still there: the undo of B did not count against the two kept changes
    assert g.read_bytes() == original


def test_an_unreadable_record_of_the_change_to_undo_is_named(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    acc = accept(cfg, g, "take it")
    (meta,) = history_dir(cfg, g).glob(f"*-{acc.id}.json")
    meta.write_bytes(b"\\xff not json")
    with pytest.raises(TapeError, match=f"history record {re.escape(str(meta))} is not one tapetui wrote"):
        undo(cfg, g)
