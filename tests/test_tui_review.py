"""The review app on the rough edges a new user meets: big values, small terminals, keys and messages.

Each test drives the real app with Pilot and asserts on what the screen shows; waits are on conditions
(see tests.test_tui.wait_for), never on time.
"""

from __future__ import annotations

import functools
import random
import re
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from tapetui.core.config import Config
from tapetui.tui.app import TapeApp
from tapetui.tui.widgets import diff_view
from tapetui.tui.widgets.session_tree import StepRef
from tests.builders import HEADER, call_line
from tests.conftest import python_here
from tests.test_tui import SIZE, _visible, app_for, goto_session, settle, wait_for


def shows_step(app: TapeApp, seq: int, tool: str) -> bool:
    """The detail pane shows step ``seq`` (its first row: ``step   3  summarize``)."""
    return re.search(rf"│ step +{seq}  {re.escape(tool)} ", _visible(app)) is not None


def pane_text(app: TapeApp) -> str:
    """The right-hand panes' text, wrapped lines joined with single spaces."""
    parts = [line.split("││", 1)[1].rstrip("│ ") for line in _visible(app).splitlines() if "││" in line]
    return re.sub(r"\s+", " ", " ".join(parts))


def prose(n: int, seed: int = 1) -> str:
    """``n`` characters of word-like text (deterministic)."""
    rnd = random.Random(seed)
    words = ["".join(rnd.choice("abcdefghijklmnop") for _ in range(rnd.randint(2, 9))) for _ in range(400)]
    out = " ".join(rnd.choice(words) for _ in range(n // 5 + 10))
    return out[:n]


def changed_in_places(text: str, places: int = 3) -> str:
    chars = list(text)
    for k in range(1, places + 1):
        p = len(chars) * k // (places + 1)
        chars[p : p + 5] = "CHNGD"
    return "".join(chars)


def big_session(tmp_path: Path, old: Any, new: Any, name: str = "big") -> Config:
    """A session whose step 1 (fetch_page) result is ``old`` in the golden and ``new`` in the candidate."""
    d = tmp_path / "tapes"
    d.mkdir(exist_ok=True)

    def tape(result: Any) -> bytes:
        return (
            HEADER
            + call_line(seq=1, tool="fetch_page", args={"url": "u"}, result=result)
            + call_line(seq=2, tool="summarize", args={"n": 1}, result="ok")
        )

    (d / f"{name}.jsonl").write_bytes(tape(old))
    (d / f"{name}.candidate.jsonl").write_bytes(tape(new))
    return Config.for_dir(d)


# ---- 1: big values, never blocking -------------------------------------------------------------
@pytest.mark.slow
async def test_keys_are_answered_while_a_big_diff_is_computed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = prose(200_000)
    cfg = big_session(tmp_path, {"text": text}, {"text": changed_in_places(text)})
    started, release = threading.Event(), threading.Event()
    finished: list[bool] = []
    real = diff_view.build_diff

    def held(old: Any, new: Any, **kw: Any) -> diff_view.DiffResult:  # the diff takes as long as the test says
        started.set()
        release.wait(120)
        try:
            return real(old, new, **kw)
        finally:
            finished.append(True)

    monkeypatch.setattr(diff_view, "build_diff", held)
    app = TapeApp(cfg, watch=False)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await goto_session(pilot, app, "big")
            await pilot.press("enter", "j")  # step 1: its 200,000-character result changed
            # the step is shown before its diff, which is being computed
            await wait_for(pilot, lambda: shows_step(app, 1, "fetch_page"), "step 1 shown")
            await wait_for(pilot, lambda: started.is_set() and app.detail.computing, "the diff worker started")
            await pilot.press("j")
            node = app.session_tree.cursor_node
            assert node is not None and isinstance(node.data, StepRef) and node.data.seq == 2
            await wait_for(pilot, lambda: shows_step(app, 2, "summarize"), "step 2 shown")
            assert not finished  # all of that while the diff was still being computed
            await pilot.press("k")  # back to step 1: its diff is computed again, in a worker
            await wait_for(pilot, lambda: shows_step(app, 1, "fetch_page"), "step 1 shown")
            await wait_for(pilot, lambda: "computing the diff… (keys keep working)" in _visible(app), "a note")
            await pilot.press("q")
            assert app._exit and not finished  # q answered while the diff is still held
            release.set()
    finally:
        release.set()


def _time_cap(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every diff the app computes gets ``seconds`` before it is drawn coarser."""
    monkeypatch.setattr(diff_view, "build_diff", functools.partial(diff_view.build_diff, seconds=seconds))


@pytest.mark.slow
async def test_a_big_result_changed_in_places_shows_each_change_exactly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _time_cap(monkeypatch, 600.0)  # what is tested is the diff, not this machine's speed against the 0.3 s cap
    text = prose(200_000)
    cfg = big_session(tmp_path, {"text": text}, {"text": changed_in_places(text)})
    app = TapeApp(cfg, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "big")
        await pilot.press("enter", "j")
        await wait_for(pilot, lambda: bool(app.detail.diffs), "the diff is shown")
        ((title, d),) = app.detail.diffs
        assert title.startswith("result") and d.level == "chars" and d.note is None
        left, right = d.rows[1]
        assert right.plain.count("CHNGD") == 3 and "CHNGD" not in left.plain
        assert len(right.plain) < 3000  # long equal stretches are elided, not drawn
        assert "chars…" in _visible(app)


def _shown(app: TapeApp, text: str) -> bool:
    """``text`` is on the screen, wherever the pane folded it: compared without spaces, line ends and borders."""
    squeeze = re.compile(r"[\s│┃▎▊▐▌]+")
    return squeeze.sub("", text) in squeeze.sub("", _visible(app))


@pytest.mark.slow
@pytest.mark.parametrize("time_cap", [False, True], ids=["by-size", "past-the-time-cap"])
async def test_a_big_diff_that_had_to_be_coarsened_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, time_cap: bool
) -> None:
    # past the cap (what a busy machine does) the rest is drawn as whole lines; else words or blocks by their size
    _time_cap(monkeypatch, 0.0 if time_cap else 600.0)
    cfg = big_session(tmp_path, {"text": prose(300_000, seed=1)}, {"text": prose(300_000, seed=2)})
    app = TapeApp(cfg, watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "big")
        await pilot.press("enter", "j")
        await wait_for(pilot, lambda: bool(app.detail.diffs), "the diff is shown")
        ((_, d),) = app.detail.diffs
        assert d.level == ("lines" if time_cap else "blocks")
        note = f"diff coarsened to {diff_view.LEVEL_WORDS[d.level]}: values of 300.0 kB"
        assert d.note is not None and d.note.startswith(note)
        assert d.timed_out == time_cap and ("time cap" in d.note) == time_cap
        await wait_for(pilot, lambda: _shown(app, d.note or ""), "the coarsening marker, whole")


# ---- 3: tests independent of the working tree ---------------------------------------------------
def test_the_sample_fixture_is_built_from_the_last_commit_not_the_working_tree(tmp_path: Path) -> None:
    """After the README tour the working tree's sample_tapes/ holds a CHANGELOG.md, changed goldens and
    candidates: none of it may reach the tests. Shown on a clone (never the real working tree)."""
    from tests.conftest import ROOT, committed_samples

    repo = tmp_path / "repo"
    subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(repo)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=300,
    )
    tapes = repo / "sample_tapes"
    tracked = sorted(p.name for p in tapes.iterdir())
    golden = (tapes / "drift_summarize.jsonl").read_bytes()
    (tapes / "CHANGELOG.md").write_text("## accepted drift_summarize\n")  # what the tour leaves
    shutil.copy(tapes / "drift_summarize.candidate.jsonl", tapes / "clean.candidate.jsonl")  # a stray candidate
    (tapes / "drift_summarize.jsonl").write_bytes(golden.replace(b'"max_words":120', b'"max_words":80'))
    (tapes / "drift_summarize.candidate.jsonl").unlink()  # accepted: the candidate is gone
    dest = tmp_path / "copy"
    committed_samples(repo, dest)
    assert sorted(p.name for p in (dest / "sample_tapes").iterdir()) == tracked
    assert (dest / "sample_tapes" / "drift_summarize.jsonl").read_bytes() == golden
    assert (dest / "tapes.toml").read_bytes() == (repo / "tapes.toml").read_bytes()


def test_the_sample_dir_fixture_holds_exactly_the_committed_samples(sample_dir: Path) -> None:
    from tests.conftest import ROOT

    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "-r", "--name-only", "HEAD", "sample_tapes"],
        check=True,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    ).stdout.split()
    have = sorted(str(p.relative_to(sample_dir)) for p in (sample_dir / "sample_tapes").rglob("*") if p.is_file())
    assert have == sorted(listed)


# ---- 4: space marks a session ---------------------------------------------------------------------
@pytest.mark.slow
async def test_space_marks_sessions_and_A_accepts_the_marked_ones(sample_dir: Path) -> None:
    from tapetui.tui.screens.rationale import RationaleScreen

    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "contract_change")
        await pilot.press("space")
        node = app.session_tree.cursor_node
        assert node is not None and node.data.marked and not node.is_expanded  # marked, not expanded
        await goto_session(pilot, app, "drift_summarize")
        await pilot.press("space")
        await wait_for(pilot, lambda: "▣ contract_change" in _visible(app) and "▣ drift_summarize" in _visible(app))
        await pilot.press("A")
        assert isinstance(app.screen, RationaleScreen)
        assert "2 session(s): contract_change, drift_summarize" in _visible(app)
        await pilot.press("escape")
        await pilot.press("space")  # space again unmarks
        assert not app.session_tree.cursor_node.data.marked


# ---- 7: a small terminal ----------------------------------------------------------------------------
@pytest.mark.slow
async def test_80x24_keeps_pending_visible_ellipsises_rows_shows_the_diff_and_the_review_keys(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        await goto_session(pilot, app, "drift_summarize")
        await settle(pilot)
        rows = [
            line for line in _visible(app).splitlines() if line.startswith(("│▶ contract_change", "│▶ drift_summarize"))
        ]
        # compact rows keep the state glyph (●) and the review marks (⚡ ≠) that the full words would push out
        assert len(rows) == 2 and all("●" in row for row in rows)
        assert "⚡1" in rows[0] and "≠1" in rows[1]
        await pilot.press("enter", "j", "j", "j")  # step 3: its diff, without pressing ]
        await wait_for(pilot, lambda: bool(app.detail.diffs), "the diff")
        await wait_for(pilot, lambda: "arguments: recorded | candidate" in _visible(app), "the diff in view")
        text = _visible(app)
        assert '"max_words": 120,' in text and '"max_words": 80,' in text
        assert "search_index  12.5 …│" in text  # a step row cut ends in an ellipsis
        footer = text.splitlines()[-1]
        for key in ("x Expire", "p Replay", "F Follow", "u Undo", "a Accept", "? Help"):
            assert key in footer


# ---- 8: replay failures say why; the follow indicator shows -------------------------------------------
def test_failure_tail_keeps_the_cause_escaped_and_bounded() -> None:
    from tapetui.core.redact import Redactor
    from tapetui.review.replay import TAIL_LINES, quoted_output

    def failure_tail(stdout: str, stderr: str) -> str:
        return quoted_output(stdout, stderr, Redactor())

    err = (
        "sample_tapes/d.jsonl: argument drift at step 3 (summarize): k1 recorded, k2 now\n  args.max_words  120 → 80\n"
    )
    assert failure_tail("", err) == err.strip("\n")
    tb = "\n".join(
        [
            "Traceback (most recent call last):",
            '  File "x.py", line 1, in <module>',
            "    f()",
            "tapetui.core.errors.TapeDrift: drift at step 3",
            "  args.q  'a' → 'b'",
            "=" * 20,
        ]
    )
    assert failure_tail("", tb).splitlines()[-2:] == [
        "tapetui.core.errors.TapeDrift: drift at step 3",
        "  args.q  'a' → 'b'",
    ]
    assert failure_tail("out only\nlast", "") == "out only\nlast"
    noisy = "\n".join(f"line {i} \x1b[2J" + "x" * 500 for i in range(100))
    tail = failure_tail("", noisy)
    assert len(tail.splitlines()) <= TAIL_LINES and "\x1b" not in tail and "\\x1b" in tail
    assert all(len(line) <= 210 for line in tail.splitlines())


@pytest.mark.slow
async def test_a_failed_replay_says_its_cause(sample_dir: Path) -> None:
    python_here(sample_dir / "tapes.toml")  # `p` runs tapes.toml's replay_command: not whatever `python` PATH has
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "drift_summarize")
        await pilot.press("p")

        def said() -> str:
            return "\n".join(n.message for n in app._notifications if "exited" in n.message)

        await wait_for(pilot, lambda: "exited 1" in said(), "the replay ended")
        assert "argument drift at step 3 (summarize)" in said() and "args.max_words  120 → 80" in said()


@pytest.mark.slow
async def test_a_passed_replay_says_what_it_did_in_words(sample_dir: Path) -> None:
    """The toast says the run's steps per status (the run log's end), not the command's raw stats line."""
    python_here(sample_dir / "tapes.toml")
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("p")

        def said() -> str:
            return "\n".join(n.message for n in app._notifications if "Replay of clean" in n.message)

        await wait_for(pilot, lambda: "passed" in said(), "the replay ended")
        assert "Replay of clean passed: 4 hits, 0 misses, 0 drift, 0 stale, 0 unused" in said()
        assert "tape_hits=" not in said() and "statuses=" not in said()


@pytest.mark.slow
async def test_follow_shows_the_following_indicator(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("F")
        await wait_for(pilot, lambda: "live run log  [following]" in _visible(app))
        await pilot.press("F")
        await wait_for(
            pilot, lambda: "[following]" not in _visible(app) and "live run log  (F follows)" in _visible(app)
        )


# ---- 11: one status per step ----------------------------------------------------------------------------
def test_each_step_has_one_status_and_the_counts_add_up_to_the_steps(sample_dir: Path) -> None:
    from tapetui.core.runlog import read_run_log
    from tapetui.core.tapefile import read_index
    from tapetui.review.sessions import Session, StepSummary
    from tapetui.tui.widgets.session_tree import session_label

    tapes = sample_dir / "sample_tapes"
    want = {
        "clean": "✓4",
        "contract_change": "✓2  ⚡1  ∅1",
        "drift_summarize": "✓2  ≠1  ∅1",
        "error_missing_doc": "✓4",
        "miss_extra_doc": "?1  ∅3",
        "stale_quote": "✓3  ?1  ∅1",
    }
    for name, counts in want.items():
        events = read_run_log(tapes / f"{name}.run.jsonl")
        summary = StepSummary.of(events)
        assert sum(summary.counts().values()) == len(read_index(tapes / f"{name}.jsonl")), name
        s = Session(tapes / f"{name}.jsonl", name, tapes, summary=summary)
        assert session_label(s).plain == f"{name}  {counts}", name
    # stale, then missed, then unused: one status, the first of the precedence
    stale = StepSummary.of(read_run_log(tapes / "stale_quote.run.jsonl"))
    assert stale.status[4] == "miss"
    # a new run starts afresh; a miss near no step is counted apart, not as a step
    stale.add({"event": "start", "mode": "replay"})
    stale.add({"event": "miss", "seq": 1, "tool": "t", "key": "t:1", "nearest": None})
    assert stale.counts() == {} and stale.off_tape == 1 and stale.misses == 1


# ---- 12: the filter ------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_filter_status_error_finds_a_recorded_error(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("slash", *"status:error")
        await wait_for(
            pilot,
            lambda: [n.data.name for n in app.session_tree.session_nodes.values()] == ["error_missing_doc"],
            "the session with a recorded error",
        )
        await wait_for(
            pilot,
            lambda: app.detail.subject == ("session", sample_dir / "sample_tapes" / "error_missing_doc.jsonl"),
            "its detail",
        )


@pytest.mark.slow
async def test_an_unknown_status_lists_the_valid_ones_and_no_stale_detail(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "drift_summarize")
        await wait_for(pilot, lambda: "drift_summarize.jsonl" in _visible(app), "the session's detail")
        await pilot.press("slash", *"status:bogus")
        text = _visible(app)
        assert "Unknown status 'bogus'" in text and "status:drift" in text and "status:error" in text
        assert "drift_summarize.jsonl" not in text and not app.session_tree.session_nodes
        assert "no session matches the filter" in text


@pytest.mark.slow
async def test_esc_closes_the_filter_and_the_cursor_stays_where_it_was(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "drift_summarize")
        await pilot.press("slash", *"status:miss")
        assert app.session_tree.cursor_node is not None and app.session_tree.cursor_node.data.name == "miss_extra_doc"
        await pilot.press("enter", "j")  # in the filtered tree: the second match
        assert app.session_tree.cursor_node.data.name == "new_tool"
        await pilot.press("escape")
        assert app.filter_text == "" and len(app.session_tree.session_nodes) == 9
        assert app.session_tree.cursor_node is not None and app.session_tree.cursor_node.data.name == "new_tool"
        await pilot.press("k")  # j and k go on from there
        assert app.session_tree.cursor_node.data.name == "miss_extra_doc"


@pytest.mark.slow
async def test_typing_a_filter_keeps_the_cursor_on_its_session_while_it_matches(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "drift_summarize")
        await pilot.press("enter", "j", "j")  # on a step of it
        await pilot.press("slash", *"status:drift")  # "st…" and "status:" match other sessions or none on the way
        node = app.session_tree.cursor_node
        assert node is not None and node.data.name == "drift_summarize"
        await wait_for(pilot, lambda: app.detail.subject[:1] == ("session",), "its detail")


# ---- 14: undo says what it does -------------------------------------------------------------------------
@pytest.mark.slow
async def test_undo_with_nothing_to_undo_says_so_and_an_undo_names_its_entry(sample_dir: Path) -> None:
    from tapetui.tui.screens.confirm import ConfirmScreen

    app = app_for(sample_dir)
    cfg = app.config
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "stale_quote")
        await pilot.press("u")
        await wait_for(pilot, lambda: any("Nothing to undo for stale_quote" in n.message for n in app._notifications))
        await pilot.press("enter", "j", "j", "x")  # expire step 2, the summary
        await wait_for(pilot, lambda: any("Expired step" in n.message for n in app._notifications), "expire")
        entry = next(n.message for n in app._notifications if "Expired step" in n.message)
        log = cfg.changelog.read_text()
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the confirmation")
        ids = re.findall(r"changelog entry ([0-9a-f]{12})", _visible(app))
        assert ids and ids[0] in log and "Undo the expire of stale_quote?" in _visible(app), entry
        await pilot.press("y")
        await wait_for(pilot, lambda: any("Undid the expire" in n.message for n in app._notifications), "undo")
        message = next(n.message for n in app._notifications if "Undid the expire" in n.message)
        assert f"changelog entry {ids[0]}" in message and "logged as changelog entry" in message


# ---- 15: names a person reads ----------------------------------------------------------------------------
@pytest.mark.slow
async def test_palette_names_keys_as_people_read_them_and_every_binding_says_what_it_does(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for title in (
            "Filter (/)",
            "Next change (])",
            "Previous change ([)",
            "Previous session to review (N)",
            "Mark session (space)",
            "Help (?)",
        ):
            assert title in titles
        assert not [t for t in titles if "slash" in t or "square_bracket" in t or "question_mark" in t]
        assert all(b.description for b in app.BINDINGS)
        await pilot.press("ctrl+p", *"next change")
        await wait_for(pilot, lambda: "Next change (])" in _visible(app), "the palette shows it")


@pytest.mark.slow
async def test_help_has_a_glyph_legend_and_says_when_nothing_matches(sample_dir: Path) -> None:
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: "● pending" in _visible(app), "the help screen")
        text = _visible(app)
        for glyph in ("✓", "≠", "?", "⌛", "∅", "⚡", "● pending", "·"):
            assert f" {glyph} " in text or f" {glyph}  " in text, glyph
        await pilot.press(*"expired")  # the legend's rows are searched too
        await wait_for(pilot, lambda: "stale: the recorded answer had expired" in _visible(app), "the search")
        await pilot.press(*["backspace"] * 7, *"xyz")
        await wait_for(pilot, lambda: "no key matches 'xyz'" in _visible(app), "no match said")


# ---- 18: an empty or wrong folder -------------------------------------------------------------------------
@pytest.mark.slow
async def test_an_empty_folder_says_where_tapetui_looked_and_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "nothing here"
    empty.mkdir()
    monkeypatch.chdir(empty)
    app = TapeApp(Config.for_dir(empty), watch=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        text = pane_text(app)
        assert f"No tapes found in {empty}" in text and f"looked for tapes.toml in {empty}" in text
        assert "pytest --tape-mode=record" in text and "tapetui DIR" in text
        assert "no tapes in this folder" in _visible(app) and "Select a session or a step" not in _visible(app)


# ---- snapshots of the two sizes the app supports besides 140×44 --------------------------------------------
SNAP = Path(__file__).parent / "snapshot_app.py"


@pytest.mark.slow
def test_snapshot_80x24_step_with_its_diff(
    snap_compare,
    sample_dir: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(sample_dir)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        app = pilot.app
        await goto_session(pilot, app, "drift_summarize")
        await pilot.press("enter", "j", "j", "j")
        await wait_for(pilot, lambda: bool(app.detail.diffs), "the diff")
        await wait_for(pilot, lambda: "arguments: recorded | candidate" in _visible(app), "the diff in view")
        await settle(pilot)

    assert snap_compare(str(SNAP), terminal_size=(80, 24), run_before=run_before)


@pytest.mark.slow
def test_snapshot_80x24_tree(
    snap_compare,
    sample_dir: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every row in one layout at 80 columns, its review marks (⚡ ≠) never the part cut off."""
    monkeypatch.chdir(sample_dir)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        app = pilot.app
        await goto_session(pilot, app, "contract_change")
        await wait_for(pilot, lambda: "session        contract_change" in _visible(app), "its detail")
        await settle(pilot)

    assert snap_compare(str(SNAP), terminal_size=(80, 24), run_before=run_before)


@pytest.mark.slow
def test_snapshot_80x24_help(
    snap_compare,
    sample_dir: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """? fits 80 columns: nothing cut at the right edge, no glyph wrapped away from its word."""
    monkeypatch.chdir(sample_dir)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        from tapetui.tui.screens.help import HelpScreen

        app = pilot.app
        await wait_for(pilot, lambda: bool(app.session_tree.session_nodes), "the tree")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        await settle(pilot)

    assert snap_compare(str(SNAP), terminal_size=(80, 24), run_before=run_before)


@pytest.mark.slow
def test_snapshot_200x60_session_review(
    snap_compare,
    sample_dir: Path,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(sample_dir)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        app = pilot.app
        await goto_session(pilot, app, "drift_summarize")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "candidate vs golden" in _visible(app) and bool(app.detail.diffs), "the diffs")
        await settle(pilot)

    assert snap_compare(str(SNAP), terminal_size=(200, 60), run_before=run_before)


def test_the_committed_samples_are_what_the_sample_agent_writes_today(
    tmp_path: Path, _committed_samples: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The README says `python -m tapetui.sample_agent regenerate sample_tapes` rebuilds them byte for byte:
    a change to what a recording writes (a new field of a run log's start, a fingerprint form) must come with
    regenerated samples, or the tour shows what this version never writes."""
    from tapetui.sample_agent import regenerate

    monkeypatch.chdir(tmp_path)
    regenerate(Path("sample_tapes"))
    committed = _committed_samples / "sample_tapes"
    names = sorted(p.name for p in committed.iterdir())
    assert sorted(p.name for p in Path("sample_tapes").iterdir() if not p.name.startswith(".")) == names
    stale = [n for n in names if (committed / n).read_bytes() != (Path("sample_tapes") / n).read_bytes()]
    assert stale == []
