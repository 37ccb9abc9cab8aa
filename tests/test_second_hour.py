"""A user's second hour: the app follows the cursor through a filter, `s` skips, review actions that do not
surprise (`accept --step` twice, `accept --rule` unchanged), `--config` after the verb, `--version`, and
the messages a person reads. Each test failed before its change; waits are on conditions, never on time."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tapetui import load_config, review
from tapetui.core.store import candidate_path
from tests.conftest import tapetui_cli
from tests.test_tui import SIZE, _visible, app_for, goto_session, wait_for


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tapetui_cli(cwd, *args, env={"NO_COLOR": "1"}, timeout=120)


# ---- 2: the detail pane follows a filter -----------------------------------------------------------------
async def test_the_detail_pane_follows_the_cursor_a_filter_moved(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await wait_for(pilot, lambda: app.detail.subject == ("session", app.config.tapes_dir / "clean.jsonl"))
        await pilot.press("slash", *"stale", "enter")
        stale = app.config.tapes_dir / "stale_quote.jsonl"
        await wait_for(pilot, lambda: app._cursor()[0] is not None and app._cursor()[0].golden == stale, "cursor")
        await wait_for(pilot, lambda: app.detail.subject == ("session", stale), "the pane follows the cursor")
        assert re.search(r"session +stale_quote", _visible(app))


# ---- 6: s skips a session for the rest of the sitting --------------------------------------------------
async def test_s_skips_the_session_for_n_and_N(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: bool(app.session_tree.session_nodes))
        await pilot.press("n")
        await wait_for(pilot, lambda: app._cursor()[0] is not None, "a session to review")
        first = app._cursor()[0]
        assert first is not None
        await pilot.press("s")  # skip it: the cursor moves on, and n never comes back to it
        await wait_for(pilot, lambda: app._cursor()[0] is not first, "moved on")
        seen = set()
        for _ in range(12):
            await pilot.press("n")
            cur = app._cursor()[0]
            assert cur is not first
            seen.add(cur.golden if cur else None)
        assert len(seen) >= 2
        assert any("Skipped " + first.name in n.message for n in app._notifications)


# ---- 6: review actions that do not surprise ------------------------------------------------------------------
def test_accept_step_twice_is_refused_the_second_time(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    if not candidate_path(g).exists():  # the committed samples have it pending
        raise AssertionError("drift_summarize has no candidate")
    first = run(sample_dir, "accept", "drift_summarize", "--step", "3", "--why", "shorter reports")
    assert first.returncode == 0, first.stderr
    log = cfg.changelog.read_text()
    golden = g.read_bytes()
    again = run(sample_dir, "accept", "drift_summarize", "--step", "3", "--why", "shorter reports")
    if candidate_path(g).exists():  # other steps still pending: step 3 is the golden's already
        assert again.returncode == 2 and "nothing to accept" in again.stderr, again.stderr
    else:
        assert again.returncode == 2 and "no pending candidate" in again.stderr
    assert cfg.changelog.read_text() == log and g.read_bytes() == golden


def test_accept_rule_that_is_there_already_changes_nothing(sample_dir: Path) -> None:
    rule = "tolerance:average_price:result.average=0.05"  # reviewed_answer's own rule, as the repository has it
    toml = (sample_dir / "tapes.toml").read_bytes()
    cfg = load_config(sample_dir / "tapes.toml")
    log = cfg.changelog.read_text() if cfg.changelog.exists() else ""
    r = run(sample_dir, "accept", "reviewed_answer", "--rule", rule, "--why", "again")
    assert r.returncode == 0, r.stderr
    assert "replaced" not in r.stdout and "unchanged" in r.stdout, r.stdout
    assert (sample_dir / "tapes.toml").read_bytes() == toml
    new_log = cfg.changelog.read_text() if cfg.changelog.exists() else ""
    # the candidate's accept is logged; the rule, which did not change, is not
    assert new_log.count("<!-- tapetui:entry") == log.count("<!-- tapetui:entry") + 1


# ---- 10: the command line's smaller edges -------------------------------------------------------------------
def test_config_goes_after_the_verb_too(sample_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = tapetui_cli(other, "check", "--config", str(sample_dir / "tapes.toml"), env={"NO_COLOR": "1"})
    assert r.returncode == 1 and "session(s) checked" in r.stdout, r.stderr
    r = tapetui_cli(other, "--config", str(sample_dir / "tapes.toml"), "check", env={"NO_COLOR": "1"})
    assert r.returncode == 1 and "session(s) checked" in r.stdout, r.stderr


def test_version_and_read_only_help(sample_dir: Path) -> None:
    r = run(sample_dir, "--version")
    assert r.returncode == 0 and r.stdout.startswith("tapetui ")
    for verb in ("stats", "pending"):
        r = run(sample_dir, verb, "--help")
        assert r.returncode == 0 and "nothing was changed" not in r.stdout


def test_no_such_tape_says_where_it_looked(sample_dir: Path) -> None:
    r = run(sample_dir, "diff", "nosuch")
    cfg = load_config(sample_dir / "tapes.toml")
    assert r.returncode == 2 and "nosuch: no such tape" in r.stderr
    assert str(cfg.tapes_dir / "nosuch.jsonl") in r.stderr and "Traceback" not in r.stderr


def test_reject_on_the_command_line_is_logged(sample_dir: Path) -> None:
    r = run(sample_dir, "reject", "contract_change")
    assert r.returncode == 0 and "changelog entry" in r.stdout
    cfg = load_config(sample_dir / "tapes.toml")
    entries = review.pending  # the review API stays importable
    assert entries is not None
    assert "candidate contract_change.candidate.jsonl discarded" in cfg.changelog.read_text()
