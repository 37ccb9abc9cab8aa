"""The app driven as a person would: keys in, screen and files out."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

import orjson
import pytest
from textual.widgets import Input, Log

from tapetui import load_config
from tapetui.core.store import candidate_path, runlog_path
from tapetui.tui.app import TapeApp
from tapetui.tui.detailmodel import subject_of
from tapetui.tui.screens.confirm import ConfirmScreen
from tapetui.tui.screens.rationale import RationaleScreen
from tapetui.tui.widgets.session_tree import StepRef

SIZE = (140, 44)


def app_for(proj: Path, watch: bool = False) -> TapeApp:
    return TapeApp(load_config(proj / "tapes.toml"), watch=watch)


def _visible(app: TapeApp) -> str:
    """The text on the terminal right now (modal screens included)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(seg.text for seg in strip) for strip in strips)


POLLS = 1500  # a generous bound (minutes on a loaded machine): a wait ends when its condition holds


async def wait_for(pilot, cond, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    """Wait until ``cond()`` holds, checked after each round of the app's messages.

    Event-driven: no time decides the outcome; the bound on polls only turns a hang into a failure.
    """
    for _ in range(POLLS):
        if cond():
            return
        await pilot.pause(0.02)  # lets workers' call_from_thread messages in, then processes them
    raise AssertionError(f"{what}: not met after {POLLS} polls")


def idle(app: TapeApp) -> bool:
    """Every run log read, and no worker left but the file watcher: what the screen shows has settled."""
    return (
        all(s.loaded for s in app.sessions.values())
        and not app.detail.computing
        and all(w.is_finished or w.group == "watch" for w in app.workers)
    )


def _picture(app: TapeApp) -> str:
    """What a snapshot takes: the screen and, under a modal, the screens behind it (its SVG, ids left out)."""
    return re.sub(r"terminal-\d+-", "", app.export_screenshot())


async def settle(pilot) -> None:  # type: ignore[no-untyped-def]
    """Idle, and the picture the same after one more round of messages: a refresh the last update scheduled (a
    scrollbar for content that grew, a scroll, the screen behind a modal) has been drawn before a snapshot is
    taken. A text box's cursor is held still (shown): where its 0.5 s blink happens to be is no part of a picture."""
    await wait_for(pilot, lambda: idle(pilot.app), "the app settles")
    for screen in pilot.app.screen_stack:
        for box in screen.query(Input):
            box.cursor_blink = False
    same = 0  # rounds in a row with nothing new drawn: a scrollbar laid out a round late on a busy machine
    before = _picture(pilot.app)
    for _ in range(POLLS):
        await pilot.pause(0.02)
        now = _picture(pilot.app)
        same = same + 1 if idle(pilot.app) and now == before else 0
        if same >= 3:
            return
        before = now
    raise AssertionError(f"the screen kept changing for {POLLS} rounds")


async def goto_session(pilot, app: TapeApp, name: str) -> None:  # type: ignore[no-untyped-def]
    await wait_for(pilot, lambda: all(s.loaded for s in app.sessions.values()), "every run log read")
    for _ in range(20):
        node = app.session_tree.cursor_node
        if node is not None and getattr(node.data, "name", None) == name:
            return
        await pilot.press("j")
    raise AssertionError(f"no session {name}")


@pytest.mark.slow
async def test_find_drift_read_diff_accept_with_rationale(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: any(s.loaded for s in app.sessions.values()))
        await pilot.press("n", "n")  # contract_change, then drift_summarize
        await goto_session(pilot, app, "drift_summarize")
        await pilot.press("enter", "j", "j", "j")  # expand, to step 3
        node = app.session_tree.cursor_node
        assert isinstance(node.data, StepRef) and node.data.seq == 3
        await wait_for(pilot, lambda: "args.max_words  120 → 80" in _visible(app))
        text = _visible(app)
        assert "recorded" in text and "candidate" in text
        assert "3 ≠ summarize" in text
        await pilot.press("a")
        assert isinstance(app.screen, RationaleScreen)
        await pilot.press("enter")  # empty: refused
        assert isinstance(app.screen, RationaleScreen)
        assert "A rationale is required" in _visible(app)
        await pilot.click("#why")
        for ch in "shorter reports":
            await pilot.press(ch if ch != " " else "space")
        await pilot.press("enter")
        cfg = app.config
        g = cfg.tapes_dir / "drift_summarize.jsonl"
        await wait_for(pilot, lambda: cfg.changelog.exists())
        calls = [orjson.loads(x) for x in g.read_bytes().splitlines()]
        assert [c["args"]["max_words"] for c in calls if c.get("tool") == "summarize"] == [80]
        assert "shorter reports" in cfg.changelog.read_text()
        assert "step 3" in cfg.changelog.read_text()
        # the toast says what happened: one step, and whether the rest of the candidate still waits
        await wait_for(
            pilot, lambda: any("Accepted step 3 of drift_summarize" in n.message for n in app._notifications)
        )
        toast = next(n.message for n in app._notifications if "Accepted step 3" in n.message)
        assert ("stays pending" in toast) == candidate_path(g).exists()
        # u (after saying which change it reverts) restores the previous golden and logs the undo
        await wait_for(pilot, lambda: "⟲ rerun" in _visible(app), "the last run predating the new golden")
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the undo confirmation")
        assert "Undo the accept of drift_summarize?" in _visible(app)
        await pilot.press("y")
        await wait_for(pilot, lambda: "undo" in cfg.changelog.read_text())
        await wait_for(pilot, lambda: b'"max_words":120' in g.read_bytes())  # the entry is written first
        # the golden is the one the last run played again: its summary is back, not "predates the golden"
        await wait_for(pilot, lambda: "⟲ rerun" not in _visible(app), "the run's own summary back")


@pytest.mark.slow
async def test_reject_and_expire_keys(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    cfg = app.config
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("enter", "j", "j")  # step 2: search_index, which had no expiry
        await pilot.press("x")
        await wait_for(pilot, lambda: cfg.changelog.exists() and "marked expired" in cfg.changelog.read_text())
        recs = [orjson.loads(x) for x in (cfg.tapes_dir / "clean.jsonl").read_bytes().splitlines()]
        search = next(r for r in recs if r.get("type") == "call" and r["seq"] == 2)
        assert search["expires_at"] is not None
        await goto_session(pilot, app, "contract_change")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "r asks first")
        await pilot.press("y")
        g = cfg.tapes_dir / "contract_change.jsonl"
        await wait_for(pilot, lambda: not candidate_path(g).exists())
        await goto_session(pilot, app, "stale_quote")
        before = (cfg.tapes_dir / "stale_quote.jsonl").read_bytes()
        await pilot.press("X")  # its quote expired on 2026-01-09: nothing to do, nothing logged
        await wait_for(pilot, lambda: any("already expired" in n.message for n in app._notifications))
        assert (cfg.tapes_dir / "stale_quote.jsonl").read_bytes() == before
        assert cfg.changelog.read_text().count("<!-- tapetui:entry") == 2  # the expire and the reject


@pytest.mark.slow
async def test_rerecord_against_sample_registry(sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAPETUI_SAMPLE_REPORTS", str(sample_dir / "reports"))
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("enter", "j", "j")  # step 2: search_index
        await pilot.press("R")
        await wait_for(pilot, lambda: "tapetui.sample_agent:registry" in _visible(app))
        await pilot.press("y")
        g = app.config.tapes_dir / "clean.jsonl"
        await wait_for(pilot, lambda: candidate_path(g).exists())
        assert b'"rerecorded":true' in candidate_path(g).read_bytes()


async def test_live_run_log_lines_appear(sample_dir: Path) -> None:
    app = app_for(sample_dir, watch=True)
    g = app.config.tapes_dir / "clean.jsonl"
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await wait_for(
            pilot, lambda: app.feed.summarised.is_set() and app.feed.watching.is_set(), "the watcher is running"
        )
        log = runlog_path(g)
        with log.open("ab") as fh:
            fh.write(orjson.dumps({"event": "start", "mode": "replay"}) + b"\n")
        with log.open("ab") as fh:
            fh.write(
                orjson.dumps({"event": "drift", "seq": 2, "tool": "search_index", "changes": [["query", "a", "b"]]})
                + b"\n"
            )
        live = app.query_one("#live", Log)
        await wait_for(pilot, lambda: any("drift" in line and "search_index" in line for line in live.lines))
        assert app.sessions[g].summary.drift == 1


async def test_a_session_appearing_while_the_app_runs_shows_its_pending_candidate(sample_dir: Path) -> None:
    app = app_for(sample_dir, watch=True)
    tapes = app.config.tapes_dir
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feed.summarised.is_set() and app.feed.watching.is_set())
        shutil.copy(tapes / "drift_summarize.candidate.jsonl", tapes / "brand_new.candidate.jsonl")
        await wait_for(pilot, lambda: "brand_new  ● pending" in _visible(app))


async def test_tape_text_is_shown_literally(sample_dir: Path) -> None:
    g = sample_dir / "sample_tapes" / "clean.jsonl"
    evil = "[bold red]boom[/] \x1b]0;pwned\x07 \x1b[2J \u202eevil"
    g.write_text(g.read_text().replace('"doc_id":"handbook"', '"doc_id":' + orjson.dumps(evil).decode()))
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("enter", "j")
        await wait_for(pilot, lambda: "[bold red]boom[/]" in _visible(app))
        text = _visible(app)
        assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
        assert "\\u202e" in text


@pytest.mark.slow
async def test_malformed_tape_marks_error_and_app_keeps_working(sample_dir: Path) -> None:
    bad = sample_dir / "sample_tapes" / "aaa_broken.jsonl"
    bad.write_text('{"type":"session","v":1}\n{"type":"call", oops}\n')
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "aaa_broken")
        await pilot.press("enter")
        # the detail pane names the file and line; a long tmp path may wrap it, so check the parts
        await wait_for(pilot, lambda: "invalid JSON" in _visible(app) and "aaa_broken.jsonl:2" in _visible(app))
        await goto_session(pilot, app, "drift_summarize")
        await wait_for(pilot, lambda: "candidate vs golden" in _visible(app))


@pytest.mark.slow
async def test_help_and_filter(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("question_mark")
        for ch in "expire":
            await pilot.press(ch)
        text = _visible(app)
        assert "expire every time-sensitive" in text and "quit" not in text.split("what it does")[-1]
        await pilot.press("escape")
        await pilot.press("slash")
        for ch in "status:miss":
            await pilot.press(ch)
        await pilot.press("enter")
        names = [n.data.name for n in app.session_tree.session_nodes.values()]
        assert names == ["miss_extra_doc", "new_tool", "stale_quote"]


def _many_sessions(proj: Path) -> Path:
    """Two folders of 30 clean sessions, one drifted session deep in the second, and 25 loose ones."""
    src = proj / "sample_tapes"
    tape, run = (src / "clean.jsonl").read_bytes(), (src / "clean.run.jsonl").read_bytes()
    d = proj / "many"
    for folder, n in (("a", 30), ("b", 30), (".", 25)):
        (d / folder).mkdir(parents=True, exist_ok=True)
        stem = "loose" if folder == "." else "s"
        for i in range(n):
            (d / folder / f"{stem}{i:03d}.jsonl").write_bytes(tape)
            (d / folder / f"{stem}{i:03d}.run.jsonl").write_bytes(run)
    shutil.copy(src / "drift_summarize.jsonl", d / "b" / "s027.jsonl")
    shutil.copy(src / "drift_summarize.run.jsonl", d / "b" / "s027.run.jsonl")
    return d


@pytest.mark.slow
async def test_big_folders_start_closed_page_and_next_finds_unbuilt_sessions(
    sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tapetui.core.config import Config
    from tapetui.tui.widgets import session_tree

    monkeypatch.setattr(session_tree, "EAGER", 20)
    monkeypatch.setattr(session_tree, "SESSION_PAGE", 10)
    d = _many_sessions(sample_dir)
    app = TapeApp(Config.for_dir(d), watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: all(s.loaded for s in app.sessions.values()))
        await wait_for(pilot, lambda: "1 to review" in _visible(app))
        text = _visible(app)
        assert "a  30 sessions" in text and "b  30 sessions  1 to review" in text
        assert "s005" not in text  # folders closed: no session nodes yet
        assert len(app.session_tree.session_nodes) == 8  # first page of the root: folders a, b and 8 loose sessions
        assert "… 17 more" in text
        await pilot.press("n")  # the drifted session is on the third page of folder b: built on demand
        node = app.session_tree.cursor_node
        assert node is not None and getattr(node.data, "name", "") == "b/s027"
        assert "b/s027" in _visible(app) or "s027" in _visible(app)
        await pilot.press("n")  # the only target: wraps onto itself
        assert app.session_tree.cursor_node is node
        app.session_tree.move_cursor(app.session_tree.folder_nodes[Path("b")])  # a folder's detail: its counts
        await wait_for(pilot, lambda: "to review    1" in _visible(app) and "with drift   1" in _visible(app))
        app.session_tree.move_cursor(app.session_tree.folder_nodes[Path("a")])
        await pilot.press("enter")  # open folder a: 10 sessions and a "more" node
        await wait_for(pilot, lambda: "… 20 more" in _visible(app))
        for _ in range(11):
            await pilot.press("j")
        await pilot.press("enter")  # on "… 20 more": the next page arrives
        await wait_for(pilot, lambda: "… 10 more" in _visible(app))
        assert sum(1 for g in app.session_tree.session_nodes if g.parent.name == "a") == 20


async def test_run_log_lines_written_during_startup_are_not_lost(
    sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append after the first read of every run log but before the watcher is up still arrives."""
    g = sample_dir / "sample_tapes" / "clean.jsonl"
    first = TapeApp.on_summaries_ready

    def append_then_handle(self: TapeApp, msg) -> None:  # type: ignore[no-untyped-def]
        if g in msg.summaries:
            with runlog_path(g).open("ab") as fh:
                fh.write(
                    orjson.dumps({"event": "drift", "seq": 2, "tool": "search_index", "changes": [["query", "a", "b"]]})
                    + b"\n"
                )
        first(self, msg)

    monkeypatch.setattr(TapeApp, "on_summaries_ready", append_then_handle)
    app = app_for(sample_dir, watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.sessions[g].summary.drift == 1)


SNAP = Path(__file__).parent / "snapshot_app.py"


def test_snapshot_main_screen(snap_compare, sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(sample_dir)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await goto_session(pilot, pilot.app, "drift_summarize")
        await wait_for(pilot, lambda: "candidate vs golden" in _visible(pilot.app) and bool(pilot.app.detail.diffs))
        # the picture is what is in view: the detail's scrollbar thumb (how much lies below the fold) drew a cell
        # shorter in a fresh clone's first run
        pilot.app.detail.styles.scrollbar_size_vertical = 0
        await settle(pilot)

    assert snap_compare(str(SNAP), terminal_size=SIZE, run_before=run_before)


@pytest.mark.slow
def test_snapshot_diff_view(snap_compare, sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(sample_dir)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await goto_session(pilot, pilot.app, "drift_summarize")
        await pilot.press("enter", "j", "j", "j")
        await wait_for(pilot, lambda: bool(pilot.app.detail.diffs))
        await settle(pilot)

    assert snap_compare(str(SNAP), terminal_size=SIZE, run_before=run_before)


@pytest.mark.slow
def test_snapshot_rationale_modal(snap_compare, sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(sample_dir)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await goto_session(pilot, pilot.app, "drift_summarize")
        await wait_for(pilot, lambda: "candidate vs golden" in _visible(pilot.app))  # the screen behind has settled
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, RationaleScreen))
        pilot.app.screen.query_one("#why").cursor_blink = False  # a blinking cursor makes the picture a coin toss
        # the session behind the modal is part of the picture: wait until it is drawn there too
        await wait_for(
            pilot,
            lambda: "contract_change" in html.unescape(_picture(pilot.app)),  # a tree row beside the modal
            "the screen behind the modal",
        )
        await settle(pilot)

    assert snap_compare(str(SNAP), terminal_size=SIZE, run_before=run_before)


@pytest.mark.slow
async def test_after_an_accept_the_app_says_the_last_run_predates_the_golden(sample_dir: Path) -> None:
    from tapetui.sample_agent import replay

    app = app_for(sample_dir)
    g = app.config.tapes_dir / "drift_summarize.jsonl"
    assert replay(g) == 1  # a run that names the golden it played against: drift at step 3
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "drift_summarize")
        s = app.sessions[g]
        assert s.summary.drift == 1 and not s.summary.outdated
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, RationaleScreen))
        await pilot.click("#why")
        for ch in "intended":
            await pilot.press(ch)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.sessions[g].summary.outdated)  # not the drift just accepted
        await wait_for(pilot, lambda: "predates the golden" in _visible(app))
        text = _visible(app)
        assert "⟲ rerun" in text and "drift_summarize ● pending" not in text
        row = next(line for line in text.splitlines() if "drift_summarize" in line)
        assert "≠" not in row


def _log_text(app: TapeApp) -> str:
    return "\n".join(str(line) for line in app.run_log.lines)


async def _panes_follow(pilot, app: TapeApp, name: str) -> None:  # type: ignore[no-untyped-def]
    """The tree highlights ``name`` and both panes show it: the detail's subject and the run log's heading."""
    await wait_for(pilot, lambda: idle(app) and f"── {name} ──" in _log_text(app), f"the run log of {name}")
    node = app.session_tree.node_at_cursor()
    assert node is not None and getattr(node.data, "name", None) == name
    assert app._cursor()[0] is node.data  # what a key acts on is what the screen highlights
    assert app.detail.subject == subject_of(node.data)  # the detail pane is that session's


@pytest.mark.slow  # an app walk: five filters and moves, each waited for
async def test_after_a_filter_both_panes_show_the_session_the_tree_highlights(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await goto_session(pilot, app, "clean")
        await _panes_follow(pilot, app, "clean")
        await pilot.press("/", *"model:function", "enter")  # research_prompt alone, on the line clean was on
        await _panes_follow(pilot, app, "research_prompt")
        await pilot.press("escape")
        await goto_session(pilot, app, "stale_quote")
        await _panes_follow(pilot, app, "stale_quote")
        await pilot.press("/", *"status:contract", "enter")  # contract_change alone
        await _panes_follow(pilot, app, "contract_change")
        await pilot.press("escape", "/", *"model:function", "enter")
        await _panes_follow(pilot, app, "research_prompt")


@pytest.mark.slow  # an app walk of seconds
async def test_a_detail_asked_again_before_its_first_read_ends_still_shows_the_sessions_run(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "stale_quote")
        await _panes_follow(pilot, app, "stale_quote")
        clean = next(s for s in app.sessions.values() if s.name == "clean")
        app.show_detail(clean, with_log=True)
        app.show_detail(clean)  # as a run log's summary arriving does: the first read's answer is dropped
        await wait_for(pilot, lambda: idle(app) and "── clean ──" in _log_text(app), "clean's run log")


@pytest.mark.slow  # an app walk of seconds
async def test_x_and_r_on_a_session_row_say_where_they_act_and_a_marks_left_out_are_named(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("x")
        said = lambda text: any(text in str(n.message) for n in app._notifications)  # noqa: E731
        await wait_for(pilot, lambda: said("x expires one step: open the session (enter)"))
        await pilot.press("R")
        await wait_for(pilot, lambda: said("R re-records one step"))
        await pilot.press("space")  # clean: marked, but it has no candidate
        await goto_session(pilot, app, "new_tool")
        await pilot.press("space", "A")
        await wait_for(pilot, lambda: isinstance(app.screen, RationaleScreen))
        assert "1 session(s): new_tool (marked with no candidate, left out: clean)" in _visible(app)


async def test_the_run_log_pane_never_shows_a_run_log_that_links_out(sample_dir: Path) -> None:
    tapes = sample_dir / "sample_tapes"
    outside = sample_dir.parent / "outside.run.jsonl"
    outside.write_text('{"event":"start","mode":"replay"}\n{"event":"hit","seq":1,"tool":"OUTSIDE-MARKER","step":1}\n')
    (tapes / "clean.run.jsonl").unlink()
    (tapes / "clean.run.jsonl").symlink_to(outside)
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("enter", "j")  # a step of clean: its run log read for the pane
        await wait_for(pilot, lambda: idle(app) and "── clean ──" in _log_text(app))
        assert "OUTSIDE-MARKER" not in _log_text(app) + _visible(app)
