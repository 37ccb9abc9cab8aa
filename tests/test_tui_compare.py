"""The app shows a comparison like a reviewer: a verdict per dimension, what a rule excused, rules added
when accepting, and comparison hooks imported only after a person allowed it.

Each test drives the real app with Pilot over tapes recorded in ``tmp_path``; waits are on conditions
(see tests.test_tui.wait_for), never on time.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.text import Text
from textual.widgets import Input

import tapetui.review as review
from tapetui import Tape, ToolRegistry, load_config
from tapetui.core.store import candidate_path
from tapetui.tui.app import TapeApp
from tapetui.tui.model import comparison_rows, step_rows
from tapetui.tui.screens.confirm import ConfirmScreen
from tapetui.tui.screens.help import HelpScreen
from tapetui.tui.screens.rationale import RationaleScreen
from tests.test_tui import _visible, goto_session, settle, wait_for
from tests.test_tui import app_for as sample_app_for
from tests.test_tui_review import pane_text

SIZE = (160, 50)
HOOK_MODULE = "ui_judge_hook"  # written into tmp_path; imported from the project folder (config.root)

TOML = f"""\
# tapetui settings of the UI tests: this comment must survive a rule added from the app
[tapes]
dir = "tapes"

[compare]
max_tool_edits = 0  # strict, as by default

[compare.rules]
"result.price" = {{ tolerance = 0.01 }}  # cents do not matter
"result.label" = {{ regex = "hot" }}

[compare.sessions."judged"]
judge = "{HOOK_MODULE}:judge"

[compare.sessions."judged".rules]
"note.final" = "judge"

[compare.sessions."broken_hook"]
judge = "no_such_ui_hook_module:judge"

[compare.sessions."broken_hook".rules]
"note.final" = "judge"
"""

HOOK_SOURCE = """\
def judge(a, b, context):
    return (True, "the same answer in other words")
"""

MARKUP = "[bold red]hot[/bold red] [link=https://x.test]deal[/link]"


def _clock() -> datetime:
    return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


class Tools:
    """Tools whose answers the test sets before each recording."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {"price": 1.5, "label": "plain", "total": 10}
        self.registry = ToolRegistry()

        @self.registry.tool(schema={"type": "object"}, version="1.0")
        def quote(symbol: str) -> dict[str, Any]:
            return {"symbol": symbol, "price": self.state["price"], "label": self.state["label"]}

        @self.registry.tool(schema={"type": "object"}, version="1.0")
        def tally(n: int) -> dict[str, Any]:
            return {"n": n, "total": self.state["total"]}


def _record(proj: Path, tools: Tools, name: str, final: str | None = None, **state: Any) -> None:
    """Record session ``name`` with the tools answering ``state``: the golden first, a candidate after."""
    tools.state.update(state)
    cfg = load_config(proj / "tapes.toml")
    path = cfg.tapes_dir / f"{name}.jsonl"
    with Tape(path, "record", tools.registry, config=cfg, clock=_clock, timer=lambda: 0.0, run_log=False) as t:
        t.call("quote", {"symbol": "X"})
        t.call("tally", {"n": 1})
        if final is not None:
            t.note("final", final)


@pytest.fixture
def proj(tmp_path: Path) -> Iterator[Path]:
    """A project with sessions whose candidates differ: within the rules (``tolerant``), outside them
    (``failing``), in a final answer a judge hook decides (``judged``, ``broken_hook``)."""
    (tmp_path / "tapes.toml").write_text(TOML)
    (tmp_path / "tapes").mkdir()
    tools = Tools()
    _record(tmp_path, tools, "tolerant", price=1.5, label="plain")
    _record(tmp_path, tools, "tolerant", price=1.505, label=MARKUP)
    tools.state.update(price=1.5, label="plain")
    _record(tmp_path, tools, "failing", total=10)
    _record(tmp_path, tools, "failing", total=12)
    tools.state.update(total=10)
    for name in ("judged", "broken_hook"):
        _record(tmp_path, tools, name, final="The price is one and a half.")
        _record(tmp_path, tools, name, final="It costs 1.50.")
    yield tmp_path
    sys.modules.pop(HOOK_MODULE, None)  # the next test imports its own


def app_for(proj: Path) -> TapeApp:
    return TapeApp(load_config(proj / "tapes.toml"), watch=False)


def said(app: TapeApp, text: str) -> bool:
    """A message (notification) of the app says ``text``."""
    return any(text in n.message for n in app._notifications)


async def show_session(pilot, app: TapeApp, name: str) -> str:  # type: ignore[no-untyped-def]
    """Go to session ``name`` and wait until its comparison is shown; the right-hand panes' text."""
    await goto_session(pilot, app, name)
    await wait_for(pilot, lambda: "candidate vs golden" in _visible(app), f"the comparison of {name}")
    return pane_text(app)


# ---- verdicts and excused differences --------------------------------------------------------------------
@pytest.mark.slow
async def test_a_candidate_within_the_rules_shows_each_verdict_passing_and_what_excused_each_difference(
    proj: Path,
) -> None:
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        text = await show_session(pilot, app, "tolerant")
        for dim in ("tools", "requested", "arguments", "results", "notes"):
            assert f"[VERDICT] {dim}" in text
        assert "FAIL" not in text
        assert "result.price 1.5 → 1.505 — within tolerance ±0.01" in text
        assert "— matches regex 'hot'" in text
        # a value from the tape is shown as written: its markup is neither applied nor swallowed
        assert MARKUP in pane_text(app)
        rows = app.detail._tail[1]  # the comparison's rows as drawn: passes green, excused differences cyan
        assert isinstance(rows, Text)
        assert {"green", "cyan"} <= {str(span.style) for span in rows.spans}


@pytest.mark.slow
async def test_a_step_shows_its_excused_differences(proj: Path) -> None:
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        await show_session(pilot, app, "tolerant")
        await pilot.press("enter", "j")  # step 1: quote
        await wait_for(pilot, lambda: "candidate differs (tolerated)" in _visible(app), "the step's difference")
        text = pane_text(app)
        assert "result.price 1.5 → 1.505 — within tolerance ±0.01" in text
        assert MARKUP in pane_text(app)


@pytest.mark.slow
async def test_a_dimension_over_its_threshold_fails(proj: Path) -> None:
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        text = await show_session(pilot, app, "failing")
        assert "[VERDICT] results FAIL 1 difference (max 0)" in text
        assert "[VERDICT] arguments pass" in text
        assert "result.total 10 → 12" in text


@pytest.mark.slow
async def test_a_current_run_shows_its_verdicts(proj: Path) -> None:
    tools = Tools()
    cfg = load_config(proj / "tapes.toml")
    with Tape(cfg.tapes_dir / "failing.jsonl", "replay", tools.registry, config=cfg) as t:
        t.call("quote", {"symbol": "X"})  # tally is left out: one edit of the executed sequence
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        await show_session(pilot, app, "failing")
        await wait_for(pilot, lambda: "run log" in pane_text(app), "the run's part")
        text = pane_text(app)
        run = text.split("run log", 1)[1].split("candidate vs golden")[0]  # the run's own part
        assert "[VERDICT] tools FAIL 1 edit (strict order; max 0)" in run and "[VERDICT] arguments pass" in run
        await pilot.press("a")  # accepted: the run played an earlier golden, its verdicts are history
        await wait_for(pilot, lambda: isinstance(app.screen, RationaleScreen), "the rationale modal")
        await type_into(pilot, "#why", "ok")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "predates the golden" in pane_text(app), "the run is history")
        assert "[VERDICT] tools FAIL" not in pane_text(app)


@pytest.mark.slow
def test_rows_of_megabyte_values_are_clipped_and_keep_their_remarks(tmp_path: Path) -> None:
    """What the detail pane shows of a comparison is ``cmp.rows()``, cut near each difference first (a
    megabyte string is formatted in microseconds); remarks and excuses stay with their differences."""
    (tmp_path / "tapes.toml").write_text(
        '[tapes]\ndir = "tapes"\n[compare.rules]\n"result.price" = { tolerance = 0.01 }\n'
        '"result.label" = { regex = "NEW$" }\n'
    )
    (tmp_path / "tapes").mkdir()
    tools = Tools()
    big = "a" * 1_000_000
    _record(tmp_path, tools, "big", price=1.0, label=big + "OLD", total=big + "x")
    _record(tmp_path, tools, "big", price=2.0, label=big + "NEW", total=big + "y")
    cfg = load_config(tmp_path / "tapes.toml")
    golden = cfg.tapes_dir / "big.jsonl"
    cmp = review.compare(golden, candidate_path(golden), cfg, hooks=None)
    rows = comparison_rows(cmp)
    assert rows == cmp.rows()
    texts = [t for t, _ in rows]
    assert any("result.price  1.0 → 2.0  (differs by 1, outside tolerance ±0.01)" in t for t in texts)
    assert any("matches regex 'NEW$'" in t for t, level in rows if level == "excused")
    assert any(t.startswith("[VERDICT] results") for t, level in rows if level == "fail")
    sd = next(d for d in cmp.steps if d.differs and d.tool == "quote")
    assert step_rows(sd) == sd.rows()
    assert all(len(t) < 400 for t in texts)


# ---- accepting with a rule ----------------------------------------------------------------------------------
async def open_accept(pilot, app: TapeApp, name: str) -> RationaleScreen:  # type: ignore[no-untyped-def]
    await show_session(pilot, app, name)
    await pilot.press("a")
    await wait_for(pilot, lambda: isinstance(app.screen, RationaleScreen), "the rationale modal")
    assert isinstance(app.screen, RationaleScreen)
    return app.screen


async def type_into(pilot, selector: str, text: str) -> None:  # type: ignore[no-untyped-def]
    await pilot.click(selector)
    for ch in text:
        await pilot.press(ch if ch != " " else "space")


@pytest.mark.slow
async def test_accept_with_a_rule_writes_it_to_tapes_toml_with_a_changelog_entry(proj: Path) -> None:
    app = app_for(proj)
    golden = app.config.tapes_dir / "failing.jsonl"
    candidate = candidate_path(golden).read_bytes()
    async with app.run_test(size=SIZE) as pilot:
        modal = await open_accept(pilot, app, "failing")
        # offered for the first difference no rule excuses, scoped to the tool it was seen in
        assert modal.suggestion == "tolerance:tally:result.total=2"
        await type_into(pilot, "#why", "totals drift by a couple")
        await type_into(pilot, "#rule", "t")
        box = modal.query_one("#rule", Input)
        await wait_for(pilot, lambda: box._suggestion == "tolerance:tally:result.total=2", "the completion offered")
        await pilot.press("right")  # → completes the suggestion
        assert box.value == "tolerance:tally:result.total=2"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, RationaleScreen), "the modal closed")
        await wait_for(pilot, lambda: not candidate_path(golden).exists(), "the candidate accepted")
        await wait_for(pilot, lambda: app.config.compare_for("failing").rules.rules[0].key == "tally:result.total")
        toml = (proj / "tapes.toml").read_text()
        assert "# tapetui settings of the UI tests: this comment must survive a rule added from the app" in toml
        assert '"result.price" = { tolerance = 0.01 }  # cents do not matter' in toml
        assert "[compare.sessions.failing.rules]" in toml and '"tally:result.total" = {tolerance = 2}' in toml
        assert golden.read_bytes() == candidate
        log = app.config.changelog.read_text()
        assert "totals drift by a couple" in log and '"tally:result.total" = {tolerance = 2}' in log
        assert app.controller.config is app.config  # the controller compares under the new rules as well
        await wait_for(pilot, lambda: said(app, "Added the rule"), "the message")


@pytest.mark.slow
async def test_a_bad_rule_keeps_the_modal_open_and_changes_nothing(proj: Path) -> None:
    app = app_for(proj)
    toml = (proj / "tapes.toml").read_text()
    golden = app.config.tapes_dir / "failing.jsonl"
    before = golden.read_bytes()
    async with app.run_test(size=SIZE) as pilot:
        modal = await open_accept(pilot, app, "failing")
        await type_into(pilot, "#why", "fine")
        await type_into(pilot, "#rule", "fuzzy:result.total")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "unknown comparator 'fuzzy'" in _visible(app), "the problem shown")
        assert app.screen is modal
        await pilot.press("escape")  # cancels
        await wait_for(pilot, lambda: not isinstance(app.screen, RationaleScreen), "the modal closed")
        await settle(pilot)
    assert (proj / "tapes.toml").read_text() == toml
    assert golden.read_bytes() == before and candidate_path(golden).exists()
    assert not app.config.changelog.exists()


@pytest.mark.slow
async def test_the_cancel_button_closes_the_modal(proj: Path) -> None:
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        await open_accept(pilot, app, "failing")
        await pilot.click("#cancel")
        await wait_for(pilot, lambda: not isinstance(app.screen, RationaleScreen), "the modal closed")
    assert candidate_path(app.config.tapes_dir / "failing.jsonl").exists()


# ---- comparison hooks ---------------------------------------------------------------------------------------
@pytest.mark.slow
async def test_a_judge_hook_is_imported_only_after_the_person_allows_it(proj: Path) -> None:
    (proj / f"{HOOK_MODULE}.py").write_text(HOOK_SOURCE)
    sys.modules.pop(HOOK_MODULE, None)
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        text = await show_session(pilot, app, "judged")
        assert f"comparison hooks not run: press J to import {HOOK_MODULE} (compare.judge)" in text
        assert "not run here (check and diff run it; the app after J)" in text and "[VERDICT] notes FAIL" in text
        assert HOOK_MODULE not in sys.modules
        await pilot.press("J")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        assert HOOK_MODULE in _visible(app)  # it names the module it would import
        assert HOOK_MODULE not in sys.modules
        await pilot.press("y")
        await wait_for(pilot, lambda: "judge: the same answer in other words" in pane_text(app), "judged again")
        assert HOOK_MODULE in sys.modules and said(app, f"Imported {HOOK_MODULE} (compare.judge)")
        text = pane_text(app)
        assert "[VERDICT] notes pass" in text and "press J" not in text


@pytest.mark.slow
async def test_no_means_no_import(proj: Path) -> None:
    (proj / f"{HOOK_MODULE}.py").write_text(HOOK_SOURCE)
    sys.modules.pop(HOOK_MODULE, None)
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        await show_session(pilot, app, "judged")
        await pilot.press("J")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen), "the question closed")
        await settle(pilot)
        assert HOOK_MODULE not in sys.modules and "press J" in pane_text(app)


@pytest.mark.slow
async def test_a_hook_that_cannot_be_imported_is_an_error_message(proj: Path) -> None:
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        await show_session(pilot, app, "broken_hook")
        await pilot.press("J")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the question")
        await pilot.press("y")
        await wait_for(pilot, lambda: said(app, "cannot import 'no_such_ui_hook_module'"), "the error")
        await settle(pilot)
        text = _visible(app)
        assert "Traceback" not in text and "press J to import no_such_ui_hook_module" in pane_text(app)
        assert app._allowed_hooks == set()


@pytest.mark.slow
async def test_sessions_without_hooks_offer_no_J_and_help_lists_it(proj: Path) -> None:
    app = app_for(proj)
    async with app.run_test(size=SIZE) as pilot:
        await show_session(pilot, app, "judged")
        assert app.check_action("allow_hooks", ()) is True
        assert "J Run hooks" in _visible(app)  # in the footer
        await show_session(pilot, app, "tolerant")
        assert app.check_action("allow_hooks", ()) is False
        assert "press J" not in pane_text(app) and "J Run hooks" not in _visible(app)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        assert "import the comparison hooks" in _visible(app)


# ---- the picture ----------------------------------------------------------------------------------------------
SNAP = Path(__file__).parent / "snapshot_app.py"


@pytest.mark.slow
def test_snapshot_verdicts_and_excused_rows(snap_compare, proj: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(proj)

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await show_session(pilot, pilot.app, "tolerant")
        await settle(pilot)

    assert snap_compare(str(SNAP), terminal_size=(120, 36), run_before=run_before)


# ---- tapes.toml and goldens changed by another process while the app runs --------------------------------
@pytest.mark.slow
async def test_tapes_toml_edited_outside_the_app_is_compared_under_at_once(proj: Path) -> None:
    app = TapeApp(load_config(proj / "tapes.toml"), watch=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feed.summarised.is_set() and app.feed.watching.is_set(), "the watcher")
        text = await show_session(pilot, app, "failing")
        assert "[VERDICT] results FAIL" in text
        toml = proj / "tapes.toml"
        toml.write_text(
            toml.read_text().replace('"result.label"', '"result.total" = { tolerance = 5 }\n"result.label"')
        )
        await wait_for(pilot, lambda: "— within tolerance ±5" in pane_text(app), "the rule added outside the app")
        assert "[VERDICT] results pass" in pane_text(app)
        before = app.config
        toml.write_text("[compare]\nsequence = 'sorted'\n" + toml.read_text())  # broken: said, the old one stays
        await wait_for(pilot, lambda: said(app, "tapes.toml not reloaded"), "the error")
        assert app.config is before and "— within tolerance ±5" in pane_text(app)


@pytest.mark.slow
async def test_the_last_runs_counts_add_up_to_the_steps_as_the_tree_counts_them(sample_dir: Path) -> None:
    app = sample_app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "contract_change")  # ✓2 ⚡1 ∅1 in the tree
        await wait_for(pilot, lambda: "last run" in _visible(app), "the session's detail")
        assert "2 hits, 0 misses, 0 drift, 1 contract, 0 stale, 1 unused" in _visible(app)
