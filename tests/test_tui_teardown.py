"""The app closing while messages are still on their way (issue 23, item 12): on a busy machine the tree's last
``NodeHighlighted`` (a cursor move just before the app closes) reached the app after its screen's widgets had been
removed, and ``_refresh_footer`` → ``check_action`` → ``query_one(SessionTree)`` raised ``NoMatches`` at teardown.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Tree

from tapetui.tui.widgets.session_tree import SessionTree
from tests.test_tui import SIZE, app_for, goto_session


async def test_a_cursor_move_that_arrives_while_the_app_closes_is_no_error(
    sample_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = app_for(sample_dir)
    late: list[bool] = []

    def on_unmount(self: SessionTree) -> None:
        # what a loaded machine does by chance, made certain: the highlight is handled once the tree is gone
        app.post_message(Tree.NodeHighlighted(self.root))
        late.append(True)

    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "drift_summarize")
        monkeypatch.setattr(SessionTree, "on_unmount", on_unmount, raising=False)
    # leaving run_test closed the app: a NoMatches raised while it did would have been raised here
    assert late == [True]
    assert app.return_code in (None, 0)


async def test_a_detail_read_that_ends_while_the_app_closes_is_no_error(sample_dir: Path) -> None:
    from rich.text import Text

    from tapetui.tui.widgets.detail import DetailView

    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        for pane in (SessionTree, DetailView):  # as the app's closing removes its panes, its loop still running
            await app.query_one(pane).remove()
        # a detail worker's answer (call_from_thread) handled then: nothing to fill, and no error
        app._if_current(app._detail_token, lambda: app.detail.show(Text("late")))
    assert app.return_code in (None, 0)
