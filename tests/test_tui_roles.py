"""The app by role: sessions read by the review layer, a controller that changes state on the main thread
and undoes through the review layer, a feed that never takes hidden files for tapes.

UI tests drive the real app with Pilot; waits are on conditions (see tests.test_tui.wait_for), never on time.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from tapetui import load_config, review
from tapetui.core.store import candidate_path
from tapetui.review import sessions
from tapetui.review.sessions import GLYPH, FilterError, matches, parse_filter, read_session, select
from tapetui.tui.feed import _hidden
from tapetui.tui.screens.confirm import ConfirmScreen
from tapetui.tui.screens.help import GLANCE, LEGEND
from tests.test_tui import SIZE, _visible, app_for, goto_session, wait_for


def names(found: list[sessions.Session]) -> list[str]:
    return [s.name for s in found]


# ---- the filter, shared by the app's / and `tapetui accept --all --filter` -------------------------------
def test_select_is_the_apps_filter_without_the_app(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    # a changed contract is its own status: a bulk accept of "drift" never promotes it
    assert names(select(cfg, "status:drift")) == ["drift_summarize", "research_prompt"]  # a prompt drift too
    assert names(select(cfg, "status:contract")) == ["contract_change"]
    pending = ["contract_change", "drift_summarize", "new_tool", "research_prompt", "reviewed_answer"]
    assert names(select(cfg, "status:pending")) == pending
    assert names(select(cfg, "status:miss")) == ["miss_extra_doc", "new_tool", "stale_quote"]
    assert names(select(cfg, "status:error")) == ["error_missing_doc"]  # the tape recorded an error
    assert names(select(cfg, "tool:quote_price")) == ["stale_quote"]
    assert names(select(cfg, "tool:send_email")) == ["new_tool", "research_prompt"]  # only their candidates call it
    assert names(select(cfg, "  DRIFT ")) == ["drift_summarize"]  # a part of a name, any case
    assert names(select(cfg, "model:research")) == ["research_prompt"]  # a session with a turn of that model
    assert len(select(cfg, "")) == len(select(cfg, None)) == 9
    assert names(select(cfg, None, pending_only=True)) == pending
    assert names(select(cfg, "status:miss", pending_only=True)) == ["new_tool"]  # its candidate calls a new tool


def test_an_unknown_status_is_an_error_that_lists_the_valid_ones(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    with pytest.raises(FilterError, match=r"Unknown status 'bogus'\. Valid: status:drift, .*status:error"):
        select(cfg, "status:bogus")
    f = parse_filter("status: bogus")
    assert f.kind == "status" and f.problem is not None
    assert not matches(f, read_session(cfg, sample_dir / "sample_tapes" / "clean.jsonl"))


def test_status_error_matches_a_recorded_error_only_once_the_tape_was_scanned(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    s = read_session(cfg, sample_dir / "sample_tapes" / "error_missing_doc.jsonl")
    f = parse_filter("status:error")
    assert f.scans_errors and not matches(f, s)
    assert s.scan_recorded_error() and matches(f, s)


def test_a_sessions_steps_mark_the_call_that_recorded_an_error(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    s = read_session(cfg, sample_dir / "sample_tapes" / "error_missing_doc.jsonl")
    rows = s.steps()
    assert [r.seq for r in rows] == list(range(1, len(rows) + 1))
    assert [r.seq for r in rows if r.error] == [r.seq for r in rows if "error" in s.record(r.index).raw]
    assert any(r.error for r in rows)
    assert s.steps(1, 2) == rows[1:2]


def test_the_glyphs_are_said_once() -> None:
    assert GLANCE.startswith(f"{GLYPH['hit']} hit  {GLYPH['drift']} drift  {GLYPH['contract']} contract")
    assert {glyph.split(" ")[0].removesuffix("+N") for glyph, _ in LEGEND} <= {*GLYPH.values(), "▶"}  # + the tree's own
    assert max(len(line) for line in GLANCE.splitlines()) <= 76  # fits the help at 80 columns


# ---- the feed ------------------------------------------------------------------------------------------
def test_the_watcher_ignores_hidden_files_in_the_tapes_folder(tmp_path: Path) -> None:
    assert _hidden(tmp_path / ".tapetui" / "history" / "a" / "x.jsonl", tmp_path)
    assert _hidden(tmp_path / "sub" / ".a.jsonl.swp", tmp_path)
    assert not _hidden(tmp_path / "sub" / "a.run.jsonl", tmp_path)
    assert not _hidden(Path("/elsewhere/.x/a.jsonl"), tmp_path)  # outside the folder: not for it to say


# ---- the controller ------------------------------------------------------------------------------------
class _MainThreadOnly(list[Any]):
    """A list that remembers which thread changed it."""

    threads: set[str]

    def append(self, item: Any) -> None:
        self.threads.add(threading.current_thread().name)
        super().append(item)


@pytest.mark.slow
async def test_u_undoes_the_session_under_the_cursor_through_the_review_layer(sample_dir: Path) -> None:
    """u is `tapetui undo SESSION` for the session under the cursor: a change made elsewhere (another sitting, the
    command line) of another session is never what it reverts."""
    app = app_for(sample_dir)
    cfg = app.config
    g = cfg.tapes_dir / "clean.jsonl"
    other = cfg.tapes_dir / "drift_summarize.jsonl"
    other_before = other.read_bytes()
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        before = g.read_bytes()
        await pilot.press("enter", "j", "j", "x")  # expire step 2 of clean
        await wait_for(pilot, lambda: any("Expired step 2" in n.message for n in app._notifications), "the expire")
        review.accept(cfg, other, "accepted in another process meanwhile")  # newer, of another session
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        assert "Undo the expire of clean?" in _visible(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: any("Undid the expire of clean" in n.message for n in app._notifications), "undo")
        await wait_for(pilot, lambda: g.read_bytes() == before, "the golden as it was")
        assert other.read_bytes() != other_before  # the other session's accept stays
        # the review layer's undo: its entry names the entry it reverts, as `tapetui undo` writes it
        assert "- reverts changelog entry " in cfg.changelog.read_text()


async def test_u_on_a_folder_row_says_what_it_undoes(sample_dir: Path) -> None:
    team = sample_dir / "sample_tapes" / "team"
    team.mkdir()
    (team / "copy.jsonl").write_bytes((sample_dir / "sample_tapes" / "clean.jsonl").read_bytes())
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: Path("team") in app.session_tree.folder_nodes, "the folder row")
        app.session_tree.move_cursor(app.session_tree.folder_nodes[Path("team")])
        await pilot.press("u")
        await wait_for(pilot, lambda: any("move to a session" in n.message for n in app._notifications))
        assert not isinstance(app.screen, ConfirmScreen)


@pytest.mark.slow
async def test_a_replay_command_that_cannot_be_split_is_an_error_shown(sample_dir: Path) -> None:
    toml = sample_dir / "tapes.toml"
    text = toml.read_text()
    start = text.index("replay_command = ")
    end = text.index("\n", start)
    toml.write_text(text[:start] + "replay_command = 'echo \"{tape}'" + text[end:])
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("p")
        await wait_for(
            pilot,
            lambda: any("replay_command cannot be split" in n.message for n in app._notifications),
            "the error",
        )
        assert app.is_running  # the worker did not take the app down


@pytest.mark.slow
async def test_r_asks_then_rejects_with_a_changelog_entry_and_u_puts_the_candidate_back(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    cfg = app.config
    g = cfg.tapes_dir / "contract_change.jsonl"
    cand = candidate_path(g)
    before = cand.read_bytes()
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "contract_change")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("n")  # no: nothing happens
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert cand.read_bytes() == before
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: not cand.exists(), "the reject")
        log = cfg.changelog.read_text()
        assert "reject" in log and "candidate contract_change.candidate.jsonl discarded" in log
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the undo confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: any("Undid the reject" in n.message for n in app._notifications), "undo")
        message = next(n.message for n in app._notifications if "Undid the reject" in n.message)
        assert "(no changelog entry)" not in message and "logged as changelog entry" in message
        assert cand.read_bytes() == before
        await wait_for(pilot, lambda: app.sessions[g].pending, "the session is pending again")


@pytest.mark.slow
async def test_the_detail_shows_a_run_that_just_ended_without_moving_the_cursor(sample_dir: Path) -> None:
    from tests.test_tui import _visible

    app = app_for(sample_dir, watch=True)
    log = sample_dir / "sample_tapes" / "drift_summarize.run.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "drift_summarize")
        await wait_for(pilot, lambda: re.search(r"last run +2 hits, 0 misses, 1 drift", _visible(app)), "the last run")
        # a new run: every step a hit (the run log is replaced, as each run does)
        hits = [
            line.replace(b'"event":"drift"', b'"event":"hit"').replace(b'"event":"unused"', b'"event":"hit"')
            for line in lines[1:-1]
        ]
        end = lines[-1].replace(b'"tape_hits":2', b'"tape_hits":4').replace(b'"drift_events":1', b'"drift_events":0')
        tmp = log.with_name(".new-run")
        tmp.write_bytes(lines[0] + b"".join(hits) + end)
        tmp.replace(log)
        await wait_for(pilot, lambda: re.search(r"last run +4 hits, 0 misses, 0 drift", _visible(app)), "the new run")
