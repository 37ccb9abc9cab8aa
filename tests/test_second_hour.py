"""A user's second hour: the app follows the cursor through a filter, `s` skips, review actions that do not
surprise (`accept --step` twice, `accept --rule` unchanged), `--config` after the verb, `--version`, and
the messages a person reads. Each test failed before its change; waits are on conditions, never on time."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tapetui import load_config, review
from tapetui.core.store import candidate_path
from tests.conftest import tapetui_cli
from tests.test_tui import SIZE, _visible, app_for, goto_session, idle, wait_for


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tapetui_cli(cwd, *args, env={"NO_COLOR": "1"})


# ---- 2: the detail pane follows a filter -----------------------------------------------------------------
@pytest.mark.slow
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
@pytest.mark.slow
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
@pytest.mark.slow
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
@pytest.mark.slow
def test_config_goes_after_the_verb_too(sample_dir: Path, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere"
    other.mkdir()
    r = tapetui_cli(other, "check", "--config", str(sample_dir / "tapes.toml"), env={"NO_COLOR": "1"})
    assert r.returncode == 1 and "session(s) checked" in r.stdout, r.stderr
    r = tapetui_cli(other, "--config", str(sample_dir / "tapes.toml"), "check", env={"NO_COLOR": "1"})
    assert r.returncode == 1 and "session(s) checked" in r.stdout, r.stderr


@pytest.mark.slow
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
    log = cfg.changelog.read_text()
    assert "candidate contract_change.candidate.jsonl discarded" in log
    # what it discarded is the contract change: named with its fingerprints, no key "changed" to itself
    assert "- tool summarize: fingerprint 5acb883fd5c8e752 → cf3ef94c97773c11" in log
    assert "- step 3 summarize (changed): fingerprint 5acb883fd5c8e752 → cf3ef94c97773c11" in log
    assert "summarize:ff76f5a3c2b0 → summarize:ff76f5a3c2b0" not in log


# ---- 8: ] moves on through a coarsened diff -------------------------------------------------------------------
@pytest.mark.slow
async def test_next_change_keys_move_through_a_coarsened_diff(tmp_path: Path) -> None:
    from tapetui.tui.app import TapeApp
    from tests.test_tui_review import big_session, prose

    cfg = big_session(tmp_path, {"text": prose(300_000, seed=1)}, {"text": prose(300_000, seed=2)})
    app = TapeApp(cfg, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "big")
        await pilot.press("enter", "j")
        await wait_for(pilot, lambda: bool(app.detail.diffs) and not app.detail.computing, "the diff is shown")
        ((_, d),) = app.detail.diffs
        assert d.note is not None  # coarsened: one long block of folded lines
        ((start, end),) = app.detail._change_offsets()  # one block, taller than the pane
        page = app.detail.scrollable_content_region.height
        assert end - start > 2 * page
        seen = [app.detail.scroll_y]
        for _ in range(3):
            await pilot.press("right_square_bracket")
            await pilot.pause()
            seen.append(app.detail.scroll_y)
        # the block's start, then a page further each time (before: its start, and then nothing moved)
        assert seen[1] == start and seen[2] > seen[1] and seen[3] > seen[2], seen
        await pilot.press("left_square_bracket")
        await pilot.pause()
        assert app.detail.scroll_y < seen[-1]


# ---- 6: J where there are no hooks says so ---------------------------------------------------------------------
async def test_J_without_hooks_says_why(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("J")
        await wait_for(pilot, lambda: any("No comparison hooks for clean" in n.message for n in app._notifications))


# ---- 10: scrub keeps the arguments as they were passed -------------------------------------------------------
def test_scrub_keeps_argument_key_order_and_whitespace(tmp_path: Path) -> None:
    import orjson

    from tapetui import Config, Tape
    from tapetui.review.scrub import scrub
    from tests.test_scrub import SECRETS, _Raw, _registry

    tapes = tmp_path / "tapes"
    tapes.mkdir()
    with Tape(tapes / "s.jsonl", "record", _registry(), config=_Raw.for_dir(tapes)) as t:
        t.call("fetch", {"q": f"  use {SECRETS['arg']} ", "n": 1, "map": {"z": 1, "a": None}})
    scrub(Config.for_dir(tapes), tapes)
    call = next(orjson.loads(x) for x in (tapes / "s.jsonl").read_bytes().splitlines() if b'"call"' in x)
    assert list(call["args"]) == ["q", "n", "map"] and list(call["args"]["map"]) == ["z", "a"]
    assert call["args"]["map"]["a"] is None and call["args"]["q"].startswith("  use ")
    assert SECRETS["arg"] not in call["args"]["q"]


# ---- 3: 80×24 and 160×48 ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@pytest.mark.slow
async def test_rows_keep_their_review_marks_and_help_fits(sample_dir: Path, size: tuple[int, int]) -> None:
    from tapetui.tui.screens.help import GLANCE, HelpScreen

    app = app_for(sample_dir)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: bool(app.session_tree.session_nodes), "the tree")
        await wait_for(pilot, lambda: "contract_change" in _visible(app) and "⚡1" in _visible(app), "⚡ shown")
        screen = _visible(app)
        row = next(line for line in screen.splitlines() if "contract_change" in line)
        assert "⚡1" in row and "●" in row
        row = next(line for line in screen.splitlines() if "drift_summarize" in line)
        assert "≠1" in row and row.index("drift_summarize") < row.index("●")  # one layout: the name first
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        await wait_for(pilot, lambda: "search keys" in _visible(app))
        shown = _visible(app)
        for line in GLANCE.splitlines():  # each line whole: nothing cut at the right edge
            assert line in shown, line
        assert "skip this session" in shown  # the help table is drawn beside the glance


# ---- 4: one status per step, the same counts everywhere -----------------------------------------------------
def test_stats_statuses_count_each_step_once_as_the_tree_does(sample_dir: Path) -> None:
    from tapetui.core.runlog import read_run_log
    from tapetui.core.store import runlog_path
    from tapetui.review.sessions import StepSummary

    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "contract_change.jsonl"
    tree = StepSummary.of(read_run_log(runlog_path(g))).counts()
    assert tree == {"contract": 1, "hit": 2, "unused": 1}  # ✓2 ⚡1 ∅1: four steps
    r = run(sample_dir, "stats", "contract_change")
    assert "last run: 2 hits, 0 misses, 0 drift, 1 contract, 0 stale, 1 unused" in r.stdout, r.stdout
    # the core's own run summary says the same: stats()["statuses"], and the run log's end line
    from tapetui.sample_agent import replay

    stale = cfg.tapes_dir / "stale_quote.jsonl"
    assert replay(stale) == 1  # its expired quote is a miss in replay: the run stops there
    events = read_run_log(runlog_path(stale))
    st = [e for e in events if e["event"] == "end"][-1]["stats"]["statuses"]
    assert st == StepSummary.of(events).counts() and st.get("miss") == 1, st
    assert sum(st.values()) <= 5
    r = run(sample_dir, "stats", "stale_quote")
    from tapetui.core.runlog import describe_counts

    assert describe_counts(st) in r.stdout, (st, r.stdout)


# ---- 5: a recording is not shown as a replay ----------------------------------------------------------------
async def test_a_recordings_run_log_is_shown_as_a_recording(sample_dir: Path) -> None:
    from tapetui import Tape
    from tapetui.sample_agent import SESSIONS, build_registry, run_agent

    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "clean.jsonl"
    with Tape(g, "record", build_registry(), config=cfg) as t:  # a golden exists: this records a candidate
        run_agent(t, SESSIONS["clean"][1])
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await wait_for(pilot, lambda: "a recording of" in _visible(app), "the last run is a recording")
        assert "[VERDICT] arguments" not in _visible(app)
    r = run(sample_dir, "stats", "clean")
    assert "last run: a recording of" in r.stdout, r.stdout


# ---- 7: without colour the markers stay readable -----------------------------------------------------------
def test_without_colour_markers_are_bold_not_grey() -> None:
    from tapetui.tui.widgets.session_tree import _mono

    assert _mono("bold magenta", True) == "bold" and _mono("bold red", True) == "bold"
    assert _mono("dim", True) == "" and _mono("bold red", False) == "bold red"
    assert _mono("green", True) == ""  # a hit is plain: bold is left to what asks for review


async def test_no_color_tree_rows_have_no_grey_markers(sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = app_for(sample_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: bool(app.session_tree.session_nodes), "the tree")
        assert app.no_color
        node = app.session_tree.session_nodes[app.config.tapes_dir / "contract_change.jsonl"]
        label = node.label
        for span in label.spans:
            style = span.style if not isinstance(span.style, str) else None
            text = span.style if isinstance(span.style, str) else ""
            assert "magenta" not in text and "red" not in text and "yellow" not in text, label.spans
            assert style is None or style.color is None
        await wait_for(pilot, lambda: idle(app), "settled")


async def test_the_live_run_log_draws_no_sideways_scrollbar(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: bool(app.session_tree.session_nodes), "the tree")
        assert app.run_log.styles.scrollbar_size_horizontal == 0
        await wait_for(pilot, lambda: idle(app), "settled")


# ---- 3: every row of a narrow tree is laid out alike; a state keeps its word where it fits ------------------
async def test_every_session_row_of_a_narrow_tree_is_laid_out_alike_and_a_wide_one_in_full(sample_dir: Path) -> None:
    def rows(app) -> dict[str, str]:  # type: ignore[no-untyped-def]
        out = {}
        for line in _visible(app).splitlines():
            cells = line.split("│")
            m = re.match(r"[▶▼] (\w+)(.*)", cells[1]) if len(cells) > 1 else None
            if m:
                out[m[1]] = m[2].rstrip()
        return out

    app = app_for(sample_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: "✓3" in rows(app).get("stale_quote", ""), "the tree and its counts")
        narrow = rows(app)
    # what needs review first, one space apart, whether the full row would have fitted or not
    assert narrow["contract_change"] == " ● ⚡1 ∅1 ✓2" and narrow["stale_quote"] == " ?1 ∅1 ✓3", narrow
    assert narrow["new_tool"].startswith(" ● pending"), narrow  # the whole name fits beside the word: kept
    app = app_for(sample_dir)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: "✓3" in rows(app).get("stale_quote", ""), "the tree and its counts")
        wide = rows(app)
    assert wide["contract_change"] == "  ✓2  ⚡1  ∅1  ● pending" and wide["stale_quote"] == "  ✓3  ?1  ∅1", wide


# ---- 7: NO_COLOR keeps a diff readable -------------------------------------------------------------------
def test_without_colour_a_diff_marks_changes_in_reverse_video_not_in_two_greys() -> None:
    import io

    from rich.console import Console

    from tapetui.tui.widgets.diff_view import build_diff

    d = build_diff({"max_words": 120, "text": "same"}, {"max_words": 80, "text": "same"})
    for unified in (False, True):
        console = Console(file=io.StringIO(), width=80, color_system="truecolor")
        segments = list(console.render(d.render(unified, mono=True)))
        styled = [s for s in segments if s.style is not None and s.text.strip()]
        assert all(s.style.bgcolor is None and s.style.color is None for s in styled)  # no colour at all
        assert {s.text for s in styled if s.style.reverse} >= {"12", "8"}  # what changed stands out
        if not unified:
            assert any(s.text.strip() == "recorded" and s.style.underline for s in styled)
    coloured = list(Console(file=io.StringIO(), width=80, color_system="truecolor").render(d.render(False)))
    assert any(s.style is not None and s.style.bgcolor is not None for s in coloured)  # with colour: as before


def test_a_compact_row_drops_the_word_pending_before_rerun_and_puts_off_tape_misses_first(sample_dir: Path) -> None:
    from tapetui.review.sessions import read_session
    from tapetui.tui.widgets.session_tree import session_label

    cfg = load_config(sample_dir / "tapes.toml")
    s = read_session(cfg, cfg.tapes_dir / "drift_summarize.jsonl")
    s.summary.outdated = True  # an accept since its last run: ⟲ rerun
    assert session_label(s, 34, compact=True).plain == "drift_summarize ● ⟲ rerun ≠1 ∅1 ✓2"
    assert session_label(s, 42, compact=True).plain == "drift_summarize ● pending ⟲ rerun ≠1 ∅1 ✓2"
    assert session_label(s, 28, compact=True).plain == "drift_summarize ● ⟲ ≠1 ∅1 ✓2"  # no room: glyphs
    n = read_session(cfg, cfg.tapes_dir / "new_tool.jsonl")
    assert session_label(n, 28, compact=True).plain == "new_tool ● pending ?+1 ✓4"


# ---- 3: the pane says how to scroll it, and after Tab how to get back -----------------------------------------
@pytest.mark.slow
async def test_the_detail_pane_says_how_to_scroll_and_after_tab_how_to_return(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await goto_session(pilot, app, "contract_change")
        await wait_for(pilot, lambda: "Tab, then ↓ or PgDn" in str(app.detail.border_subtitle), "the hint")
        await pilot.press("tab")
        await wait_for(pilot, lambda: app.detail.has_focus, "the pane has the keys")
        await wait_for(pilot, lambda: "shift+Tab: the tree" in str(app.detail.border_subtitle), "the way back")
        await pilot.press("shift+tab")
        await wait_for(pilot, lambda: "Tab, then ↓ or PgDn" in str(app.detail.border_subtitle), "the hint again")
