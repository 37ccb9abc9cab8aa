"""Model turns in the app: a turn row among the steps, its conversation in the detail pane, a candidate's
prompt drift side by side, the ``model:`` filter, and the keys that act on files (accept, reject, undo) or
never call a model (re-record).

Tapes are recorded in ``tmp_path`` with the core API; waits are on conditions (see tests.test_tui.wait_for),
never on time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from tapetui import Tape, load_config
from tapetui.core.errors import ModelDrift
from tapetui.core.store import candidate_path
from tapetui.review.sessions import Session, TurnRow, parse_filter, read_session, select
from tapetui.tui.app import TapeApp
from tapetui.tui.screens.confirm import ConfirmScreen
from tapetui.tui.screens.help import HelpScreen
from tapetui.tui.screens.rationale import RationaleScreen
from tapetui.tui.widgets import session_tree
from tapetui.tui.widgets.session_tree import MoreRef, StepRef, turn_label
from tests.test_tui import _visible, goto_session, wait_for
from tests.test_tui_review import pane_text

WIDE = (160, 50)
MODEL = "openai:gpt-4o"
ASK = "find [bold red]x[/bold red] \x1b[2J now"  # markup and a terminal control: shown literally, escaped
TOOL = {"name": "search", "description": "search docs", "parameters": {"type": "object"}}


def _clock() -> datetime:
    return datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def _request(instructions: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"instructions": instructions, "messages": messages, "tools": [TOOL], "settings": {"temperature": 0}}


def agent(path: Path, mode: str, instructions: str = "Be brief.", model: str = MODEL) -> None:
    """An agent of two model turns around one tool call: it asks for ``search``, then answers."""
    cfg = load_config(path.parent.parent / "tapes.toml")
    with Tape(path, mode, config=cfg, clock=_clock, timer=lambda: 0.0) as t:
        first = [{"role": "user", "parts": [{"type": "text", "content": ASK}]}]
        r = t.model(
            _request(instructions, first),
            live=lambda: {
                "parts": [{"type": "tool_call", "id": "c1", "name": "search", "arguments": {"q": "x"}}],
                "usage": {"input": 100, "output": 10},
            },
            model=model,
        )
        out = t.call("search", {"q": "x"}, live=lambda: "found x", call_id="c1")
        result = {"type": "tool_call_response", "id": "c1", "name": "search", "response": out}
        second = [*first, {"role": "assistant", "parts": r["parts"]}, {"role": "tool", "parts": [result]}]
        t.model(
            _request(instructions, second),
            live=lambda: {
                "parts": [{"type": "text", "content": "x is found"}],
                "finish_reason": "stop",
                "usage": {"input": 150, "output": 5},
            },
            model=model,
        )


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    """``agent``: replayed (every step a hit), with a candidate whose system prompt changed; ``drifted``: its last
    replay drifted at its first turn; ``claude``: another model's turns; ``tools_only``: no turn at all."""
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    tapes = tmp_path / "tapes"
    tapes.mkdir()
    agent(tapes / "agent.jsonl", "record")
    agent(tapes / "agent.jsonl", "record", instructions="Be very brief.")  # the golden exists: a candidate
    agent(tapes / "agent.jsonl", "replay")
    agent(tapes / "drifted.jsonl", "record")
    with pytest.raises(ModelDrift):
        agent(tapes / "drifted.jsonl", "replay", instructions="Answer in French.")
    agent(tapes / "claude.jsonl", "record", model="anthropic:claude-sonnet-4")
    cfg = load_config(tmp_path / "tapes.toml")
    with Tape(tapes / "tools_only.jsonl", "record", config=cfg, clock=_clock) as t:
        t.call("search", {"q": "y"}, live=lambda: "found y")
    return tmp_path


def app_for(proj: Path) -> TapeApp:
    return TapeApp(load_config(proj / "tapes.toml"), watch=False)


def said(app: TapeApp, text: str) -> bool:
    return any(text in n.message for n in app._notifications)


async def open_agent(pilot, app: TapeApp) -> None:  # type: ignore[no-untyped-def]
    await goto_session(pilot, app, "agent")
    await pilot.press("enter")
    await wait_for(pilot, lambda: app.session_tree.cursor_node.is_expanded, "the session's steps")


async def to_step(pilot, app: TapeApp, seq: int) -> StepRef:  # type: ignore[no-untyped-def]
    for _ in range(10):
        node = app.session_tree.cursor_node
        if node is not None and isinstance(node.data, StepRef) and node.data.seq == seq:
            return node.data
        await pilot.press("j")
    raise AssertionError(f"no step {seq}")


# ---- the steps ---------------------------------------------------------------------------------------------
def test_a_sessions_steps_merge_its_turns_by_step_and_page_over_both(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")
    s = read_session(cfg, cfg.tapes_dir / "agent.jsonl")
    rows = s.steps()
    assert [(r.seq, r.tool) for r in rows] == [(1, "model"), (2, "search"), (3, "model")]
    assert s.step_count() == len(rows) == len(s.index()) + len(s.index().turns)
    first = rows[0]
    assert isinstance(first, TurnRow) and (first.model, first.tokens, first.requested) == (MODEL, 110, ("search",))
    assert s.steps(0, 1) + s.steps(1, 2) + s.steps(2, 9) == rows and s.steps(3, 5) == []
    assert s.summary.status == {1: "hit", 2: "hit", 3: "hit"}  # keyed by recorded step, turns as calls
    plain = read_session(cfg, cfg.tapes_dir / "tools_only.jsonl")
    assert plain.step_count() == len(plain.index()) == 1


def test_a_turn_row_reads_without_colour_and_fits_a_narrow_tree() -> None:
    s = Session(Path("x.jsonl"), "x")
    s.summary.status[1] = "drift"
    row = TurnRow(0, 1, MODEL, 110, True, ("search",), False, False)
    assert turn_label(s, row, mono=True).plain == "   1 ≠ ◆ openai:gpt-4o  110 tok → search"
    assert turn_label(s, row, 27, mono=True).plain == "   1 ≠ ◆ gpt-4o 110t→search"
    assert not turn_label(s, row, mono=True).spans or all(
        "red" not in str(sp.style) and "cyan" not in str(sp.style) for sp in turn_label(s, row, mono=True).spans
    )
    long = TurnRow(0, 1, "function:research_model", 167, True, ("search_index",), False, False)
    assert turn_label(s, long, 27).plain[:27] == "   1 ≠ ◆ research_m… 167t→s"  # the tree cuts the rest: "→…"
    failed = TurnRow(0, 2, MODEL, 0, False, (), True, False)
    assert turn_label(s, failed).plain == "   2 ✗ ◆ openai:gpt-4o  error"


# ---- the app at 80×24 -------------------------------------------------------------------------------------------
async def test_80x24_a_turn_row_shows_its_glyph_model_and_tokens_and_R_on_it_says_to_rerun_the_agent(
    proj: Path,
) -> None:
    app = app_for(proj)
    golden = app.config.tapes_dir / "agent.jsonl"
    before = golden.read_bytes(), candidate_path(golden).read_bytes()
    async with app.run_test(size=(80, 24)) as pilot:
        await open_agent(pilot, app)
        await wait_for(pilot, lambda: "◆" in _visible(app), "a turn row")
        text = _visible(app)
        assert "1 ✓ ◆ gpt-4o 110t→search" in text  # its status (a hit), the glyph, the model, tokens, the tool
        assert "2 ✓ search" in text and "3 ✓ ◆ gpt-4o  155 tok" in text  # in step order, among the calls
        node = app.session_tree.cursor_node
        assert [(c.data.seq, c.data.turn) for c in node.children] == [(1, 0), (2, None), (3, 1)]
        # R and x on a turn: a notice, never a model call, nothing to confirm, no file touched
        await to_step(pilot, app, 1)
        await pilot.press("R")
        await wait_for(pilot, lambda: said(app, "Rerun the agent in record mode"), "the notice")
        assert not isinstance(app.screen, ConfirmScreen)
        assert said(app, "is a model turn (openai:gpt-4o): the app cannot re-record it, it never calls a model")
        await pilot.press("x")
        await wait_for(pilot, lambda: said(app, "the app cannot expire it"), "the expire notice")
        assert (golden.read_bytes(), candidate_path(golden).read_bytes()) == before
        # the model: filter
        await pilot.press("slash")
        app.query_one("#filter", Input).value = "model:claude"
        claude = app.config.tapes_dir / "claude.jsonl"
        await wait_for(pilot, lambda: list(app.session_tree.session_nodes) == [claude], "the filter")
        # the tree shows the one session left (the run-log pane may still name the session the cursor left)
        await wait_for(pilot, lambda: "▶ claude" in _visible(app), "the tree")
        # ? explains the glyph (search: the legend is below the fold at 80×24)
        await pilot.press("escape", "question_mark")
        assert isinstance(app.screen, HelpScreen)
        app.screen.query_one("#help-search", Input).value = "model"
        await wait_for(pilot, lambda: "a model turn among the steps" in _visible(app), "the legend row")
        assert "◆" in _visible(app) and "model:NAME" in _visible(app)


# ---- the detail ------------------------------------------------------------------------------------------------
@pytest.mark.slow  # an app walk through a turn's conversation and its diff
async def test_a_turn_shows_its_conversation_and_the_candidates_prompt_diff_side_by_side(
    proj: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_tree, "STEP_PAGE", 2)  # pages count turns and calls alike
    app = app_for(proj)
    golden = app.config.tapes_dir / "agent.jsonl"
    async with app.run_test(size=WIDE) as pilot:
        await open_agent(pilot, app)
        node = app.session_tree.cursor_node
        await wait_for(pilot, lambda: "… 1 more steps (enter to load)" in _visible(app), "the more row")
        assert "1 ✓ ◆ openai:gpt-4o  110 tok → search" in _visible(app)
        await pilot.press("j", "j", "j", "enter")
        await wait_for(pilot, lambda: "3 ✓ ◆ openai:gpt-4o  155 tok" in _visible(app), "the next page")
        assert [c.data.seq for c in node.children if not isinstance(c.data, MoreRef)] == [1, 2, 3]
        # turn 1: its fields, the candidate's changed system prompt side by side, then the conversation
        await pilot.press("k", "k")
        await wait_for(pilot, lambda: app.detail.subject == ("step", golden, 1) and bool(app.detail.diffs), "diff")
        assert app.detail.diffs[0][0] == "system prompt (instructions): recorded | candidate"
        text = pane_text(app)
        assert "model turn 1" in text and "tokens 110 (input 100, output 10)" in text and "asked for search" in text
        assert "source core" in text and "stream no" in text and "finish reason -" in text
        assert "candidate differs (its model turn at this place)" in text
        assert 'request instructions "Be brief." → "Be very brief."' in text
        screen = _visible(app)
        row = next(line for line in screen.splitlines() if '"Be brief."' in line and "→" not in line)
        assert '"Be very brief."' in row  # recorded | candidate on one line: side by side
        assert "system instructions" in text and "user message 1" in text and "→ calls search (id c1)" in text
        assert "find [bold red]x[/bold red] \\x1b[2J now" in text  # literal: no markup, the control escaped
        # turn 2: the assistant's call, the tool's result, the answer
        await pilot.press("j", "j")
        await wait_for(pilot, lambda: app.detail.subject == ("step", golden, 3) and bool(app.detail.diffs), "turn 2")
        await pilot.press("tab", "end")
        await wait_for(pilot, lambda: "x is found" in pane_text(app), "the response")
        text = pane_text(app)
        assert "assistant message 2" in text and "tool message 3" in text
        assert "← result of search (id c1)" in text and "found x" in text and "response finish reason stop" in text
        # a session whose last replay drifted at a turn: that drift, side by side
        await pilot.press("shift+tab")
        await goto_session(pilot, app, "drifted")
        await pilot.press("enter", "j")
        await wait_for(pilot, lambda: "prompt drift in the last run" in pane_text(app), "the drift")
        await wait_for(pilot, lambda: bool(app.detail.diffs), "its diff")
        assert app.detail.diffs[0][0] == "instructions: recorded | last run"
        assert 'instructions "Be brief." → "Answer in French."' in pane_text(app)
        assert "1 ≠ ◆ openai:gpt-4o" in _visible(app)


# ---- filters --------------------------------------------------------------------------------------------------
def test_model_and_status_filters_find_sessions_by_their_turns(proj: Path) -> None:
    cfg = load_config(proj / "tapes.toml")

    def names(q: str) -> list[str]:
        return [s.name for s in select(cfg, q)]

    assert names("model:gpt-4o") == ["agent", "drifted"]  # a part of the name
    assert names("model:CLAUDE") == ["claude"]  # any case
    assert names("model:anthropic:*") == ["claude"] and names("model:gpt-4o") == names("model:openai:gpt-4?")
    assert names("model:gpt") == ["agent", "drifted"] and names("model:llama") == []
    assert "drifted" in names("status:drift")  # a turn's prompt drift is drift
    assert parse_filter("model: gpt-4o").value == "gpt-4o"


# ---- keys ---------------------------------------------------------------------------------------------------------
@pytest.mark.slow  # a longer app walk: three review actions and their confirmations
async def test_accept_undo_and_reject_act_on_the_files_of_a_session_with_turns(proj: Path) -> None:
    app = app_for(proj)
    cfg = app.config
    golden = cfg.tapes_dir / "agent.jsonl"
    cand = candidate_path(golden)
    old, new = golden.read_bytes(), cand.read_bytes()
    async with app.run_test(size=WIDE) as pilot:
        await goto_session(pilot, app, "agent")
        await pilot.press("a")
        assert isinstance(app.screen, RationaleScreen)
        app.screen.query_one("#why", Input).value = "terser"
        await pilot.press("enter")
        await wait_for(pilot, lambda: said(app, "Accepted agent"), "the accept")
        assert b"Be very brief." in golden.read_bytes() and not cand.exists()
        assert "[MODEL] turn 1" in cfg.changelog.read_text()  # the turns' differences are in its entry
        await pilot.press("u")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the undo's question")
        await pilot.press("y")
        await wait_for(pilot, lambda: said(app, "Undid the accept of agent"), "the undo")
        assert golden.read_bytes() == old and cand.read_bytes() == new
        await wait_for(pilot, lambda: app.sessions[golden].pending, "pending again")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), "the reject's question")
        await pilot.press("y")
        await wait_for(pilot, lambda: said(app, "Rejected the candidate of agent"), "the reject")
        assert golden.read_bytes() == old and not cand.exists()
