"""The review app: a session tree, a detail pane with diffs, and a live run log.

``app.py`` composes the screen and binds the keys (``keys.py``). The run logs are read and the folder watched
by the feed (``feed.py``); the review actions and their undo stack live in the controller (``controller.py``);
what the detail pane shows is read in a worker (``detailmodel.py``); which comparison hooks may run, J
(``hooks.py``); what is known of a session, and the filter, come from the review layer
(``tapetui.review.sessions``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Header, Input, Tree

import tapetui.review as review
from tapetui.core.changes import show_redacted_by, shown_redactor
from tapetui.core.comparators import Hooks
from tapetui.core.config import Config, load_config
from tapetui.core.errors import TapeError
from tapetui.core.store import golden_of
from tapetui.core.textsafe import safe_text
from tapetui.review.history import HistoryRecord
from tapetui.review.sessions import Session, StepSummary, current, goldens, has_candidate, matches, parse_filter
from tapetui.review.sessions import session_of as new_session
from tapetui.tui.controller import ReviewController
from tapetui.tui.detailmodel import DetailInputs, session_detail, step_detail, subject_of, turn_detail
from tapetui.tui.feed import Feed
from tapetui.tui.hooks import HookKey, HookPermissions
from tapetui.tui.keys import KEYS
from tapetui.tui.messages import ConfigFileChanged, FilesChanged, RunEvents, SummariesReady
from tapetui.tui.prompts import accept_what, reject_question, rerecord_question, turn_notice, undo_question
from tapetui.tui.screens.confirm import ConfirmScreen
from tapetui.tui.screens.help import COMMAND_HELP, HelpScreen
from tapetui.tui.screens.rationale import Accepting, RationaleScreen
from tapetui.tui.widgets.detail import DetailView, no_tapes_text
from tapetui.tui.widgets.footer import ReviewFooter
from tapetui.tui.widgets.runlog_pane import RunLogPane
from tapetui.tui.widgets.session_tree import FolderRef, MoreRef, SessionTree, StepRef

_ON_A_STEP = "{key} {what} one step: open the session (enter) and put the cursor on the step. X expires every step."


class TapeApp(App[None]):
    """``tapetui [DIR]``: browse tapes, watch replays, review drift, accept baselines."""

    CSS_PATH = "app.tcss"
    TITLE = "tapetui"
    BINDINGS = KEYS

    def __init__(self, config: Config, *, watch: bool = True) -> None:
        super().__init__()
        self.config = config
        show_redacted_by(config.redactor())  # what the screen shows of a tape: redacted by the project's rules too
        self.sessions: dict[Path, Session] = {}
        self.order: list[Path] = []
        self.filter_text = ""
        self.live_session: Path | None = None  # the session whose run the live pane follows
        self._log_of: Path | None = None  # the session whose run log the pane shows (set as it is drawn)
        self.first_paint: float | None = None  # monotonic time the first screen was drawn
        self.feed = Feed(self, config, lambda: self.order, watch=watch)
        self.controller = ReviewController(self, config)
        self._detail_token = 0
        self._errors_scanning = False  # status:error is reading tapes for recorded errors
        self._filter_anchor: Session | None = None  # the session selected when / was pressed
        self._footer_allows: tuple[bool | None, ...] = ()
        self.comparison_hooks = HookPermissions(self)  # the ones a person allowed (J): until then none runs
        self.skipped: set[Path] = set()  # sessions `s` left for later: n and N pass them by in this sitting

    # ---- layout -----------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            placeholder="filter: tool:NAME  model:NAME  status:drift|contract|miss|stale|unused|pending|error  "
            "or text; esc",
            id="filter",
        )
        with Horizontal(id="main"):
            yield SessionTree(str(self.config.tapes_dir), id="tree")
            with Vertical(id="right"):
                yield DetailView(id="detail")
                yield RunLogPane(id="live")
        yield ReviewFooter()

    @property
    def session_tree(self) -> SessionTree:
        return self.query_one(SessionTree)

    @property
    def detail(self) -> DetailView:
        return self.query_one(DetailView)

    @property
    def run_log(self) -> RunLogPane:
        return self.query_one(RunLogPane)

    def on_mount(self) -> None:
        try:
            rel = self.config.tapes_dir.relative_to(self.config.root)
            # the folder's own name when it is the project folder (no tapes.toml): never "tapetui — ."
            shown = str(rel) if rel != Path(".") else (self.config.tapes_dir.name or str(self.config.tapes_dir))
            self.sub_title = safe_text(shown, newlines=False)
        except ValueError:
            self.sub_title = safe_text(str(self.config.tapes_dir), newlines=False)
        self.query_one("#filter", Input).display = False
        try:
            for note in review.recover(self.config):
                self.notify(safe_text(note), severity="warning", markup=False)
        except (TapeError, OSError) as e:
            self.notify(safe_text(str(e)), severity="error", markup=False)
        self.load_sessions()
        self.session_tree.focus()
        if self.session_tree.cursor_line < 0 and self.order:
            self.session_tree.cursor_line = 0
        elif not self.order:
            self._show_no_tapes()
        self.call_after_refresh(self._start_background)  # the first screen is drawn before any run log is read

    def _start_background(self) -> None:
        self.first_paint = time.monotonic()
        self.feed.start()

    def on_unmount(self) -> None:
        self.feed.stop()

    # ---- sessions ---------------------------------------------------------------
    def load_sessions(self) -> None:
        found = goldens(self.config)
        keep = {}
        for g in found:
            s = self.sessions.get(g)
            if s is None:
                s = new_session(self.config, g)
                if self.feed.summarised.is_set():  # appeared while the app runs: the first read is long over
                    s.pending, s.loaded = s.has_candidate(), True
            keep[g] = s
        self.sessions = keep
        self.order = found
        self.rebuild_tree()
        if not found:
            self._show_no_tapes()
        elif self.session_tree.cursor_line < 0 and not self.filter_text:
            self.session_tree.cursor_line = 0  # the first tapes appeared in an empty folder

    def _show_no_tapes(self) -> None:
        self.detail.show(Text(safe_text(no_tapes_text(self.config)), "yellow"))

    def visible_sessions(self) -> list[Session]:
        """The sessions the filter lets through, in folder order."""
        f = parse_filter(self.filter_text)
        if f.kind == "all":
            return [self.sessions[g] for g in self.order]
        return [s for g in self.order if matches(f, s := self.sessions[g])]

    def rebuild_tree(self) -> None:
        shown = self.visible_sessions()
        self.session_tree.populate(self.config.tapes_dir, shown)
        if not shown:  # an empty tree says why (the right pane says more)
            self.session_tree.root.add_leaf(
                Text(
                    "no session matches the filter" if self.filter_text.strip() else "no tapes in this folder",
                    "dim italic",
                ),
                data=None,
            )

    # ---- what the feed hands over -------------------------------------------------------
    def on_summaries_ready(self, msg: SummariesReady) -> None:
        tree = self.session_tree
        for g, (summary, pending) in msg.summaries.items():
            s = self.sessions.get(g)
            if s is None:
                continue
            s.summary, s.pending, s.loaded = summary, pending, True
            tree.refresh_session(s)
        tree.refresh_folders([s for g in msg.summaries if (s := self.sessions.get(g)) is not None])
        self._refresh_selected()

    def on_run_events(self, msg: RunEvents) -> None:
        pane = self.run_log
        tree = self.session_tree
        touched = []
        for golden, events, reset in msg.updates:
            s = self.sessions.get(golden)
            if s is None:
                continue
            if reset:
                s.summary.reset()
            for ev in events:
                s.summary.add(ev)
            tree.refresh_session(s)
            touched.append(s)
            if self.live_session is None or self.live_session == golden:
                pane.add_events(s.name, events, reset)
                self._log_of = golden
                if pane.follow:
                    tree.follow_step(s, events)
        tree.refresh_folders(touched)
        if self._cursor()[0] in touched and any(e.get("event") == "end" for _, es, _ in msg.updates for e in es):
            self._refresh_selected()  # a run just ended: the detail shows its outcome, not the run before it

    def on_files_changed(self, msg: FilesChanged) -> None:
        # Run logs arrive as RunEvents (read incrementally); here only tapes and candidates matter.
        changed = {g for p in msg.paths if (g := golden_of(p)) is not None and not p.name.endswith(".run.jsonl")}
        if not changed:
            return
        structural = False
        for g in changed:
            pending = has_candidate(g)
            exists = g.exists() or pending
            s = self.sessions.get(g)
            if s is None and exists or s is not None and not exists:
                structural = True
            elif s is not None:
                s.pending = pending
                self.session_tree.refresh_session(s)
        if structural:
            self.load_sessions()
        self._refresh_selected()
        known = [s for g in changed if (s := self.sessions.get(g)) is not None and g.exists()]
        if known:  # a golden changed by another process (a CLI accept): its last run may now predate it
            self.run_worker(lambda: [self._check_outdated(s) for s in known], thread=True, group="outdated")

    def on_config_file_changed(self, msg: ConfigFileChanged) -> None:
        """tapes.toml changed on disk (an editor, ``tapetui accept --rule``): compare under it from now on. A
        file that does not load is said, and the configuration in use stays; another tapes folder needs a
        restart (the tree is of this one)."""
        try:
            config = load_config(msg.path)
        except TapeError as e:
            self.notify(safe_text(f"tapes.toml not reloaded: {e}"), severity="error", markup=False, timeout=8)
            return
        if config == self.config:
            return
        self.config_changed(config)
        self._refresh_selected()
        self._refresh_footer()

    # ---- what the controller hands back (on the main thread) ---------------------------------
    def show_error(self, e: BaseException) -> None:
        self.notify(safe_text(str(e)), severity="error", markup=False, timeout=8)

    def session_changed(self, s: Session, message: str) -> None:
        """An action changed ``s``'s files: show it as it is now, and say what was done."""
        self._check_outdated(s)
        s.pending = s.has_candidate()
        self.session_tree.refresh_session(s)
        self.session_tree.refresh_folders([s])
        self._refresh_selected()
        self._refresh_footer()
        self.notify(safe_text(message), markup=False)

    def config_changed(self, config: Config) -> None:
        """tapes.toml changed (a rule was added): compare under ``config`` from now on. The tapes folder and the
        changelog stay this sitting's (another folder needs a restart: the tree, the locks, the changelog
        entries of what the app changes are this folder's)."""
        if (config.tapes_dir, config.changelog) != (self.config.tapes_dir, self.config.changelog):
            config = replace(config, tapes_dir=self.config.tapes_dir, changelog=self.config.changelog)
            self.notify(
                safe_text(f"{config.path} names another tapes folder or changelog: restart the app to use them"),
                severity="warning",
                markup=False,
            )
        self.config = config
        self.controller.config = config
        self.feed.config = config
        self.comparison_hooks.config_changed()

    def hooks_for(self, s: Session) -> tuple[Hooks | None, str | None]:
        """The comparison hooks to run for ``s``, and else what the detail pane says of them (see hooks.py)."""
        return self.comparison_hooks.for_session(s)

    @property
    def _allowed_hooks(self) -> set[HookKey]:
        return self.comparison_hooks.allowed

    def hooks_imported(self) -> None:
        """J imported comparison hooks: the footer and the detail follow (compared again, with the hooks)."""
        self._refresh_footer()
        self._refresh_selected()

    def confirm(self, title: str, body: str, then: Callable[[], None]) -> None:
        """Ask ``title`` on a yes/no screen saying ``body``; ``then`` runs on yes."""

        def answered(ok: bool | None) -> None:
            if ok:
                then()

        self.push_screen(ConfirmScreen(title, body), answered)

    @work(thread=True, group="write")
    def _check_outdated(self, s: Session) -> None:
        """After the golden changed: is the last run now about an earlier golden? (hashing is file IO)"""
        summary = s.summary
        now = current(s.golden, summary)
        if now is not summary:
            self.call_from_thread(self._set_summary, s, summary, now)

    def _set_summary(self, s: Session, old: StepSummary, new: StepSummary) -> None:
        if s.summary is old:  # no newer run replaced it meanwhile
            s.summary = new
            self.session_tree.refresh_session(s)
            self._refresh_selected()

    # ---- detail -----------------------------------------------------------------
    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        # the row under the cursor as the tree is now: an event handled after a rebuild (a filter typed on)
        # names a node of the tree before it
        tree = self.query_one_optional(SessionTree)
        if tree is None:  # the app is closing: a highlight handled late has nothing to show
            return
        node = tree.node_at_cursor()
        self.show_detail(node.data if node is not None else event.node.data, with_log=True)
        self._refresh_footer()

    def _refresh_footer(self) -> None:
        """Redraw the footer's keys only when what they allow changed: rebuilding it is the costliest part
        of a cursor move (its key widgets are recomposed and restyled), and j/k over similar items
        change nothing there."""
        if self.query_one_optional(SessionTree) is None:  # the app is closing (see check_action): nothing to redraw
            return
        allowed = tuple(self.check_action(b.action, ()) for b in self.BINDINGS if isinstance(b, Binding) and b.show)
        if allowed != self._footer_allows:
            self._footer_allows = allowed
            self.refresh_bindings()

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[Any]) -> None:
        data = event.node.data
        if isinstance(data, MoreRef):
            self.session_tree.load_more(data, event.node)

    def _refresh_selected(self) -> None:
        node = self.session_tree.node_at_cursor()  # the row as the tree is now: cursor_node lags behind a rebuild
        if node is not None:
            self.show_detail(node.data)

    def show_detail(self, data: Any, with_log: bool = False) -> None:
        """Show what ``data`` (the row under the cursor) is in the detail pane; the run-log pane follows whenever
        the row is another session's (``with_log`` asks for that too: it never shows one session's run beside
        another's detail)."""
        if not isinstance(data, (Session, StepRef, FolderRef)):
            return  # a "more" row or a message row: what the pane shows (or is reading) stays
        self._detail_token += 1
        if isinstance(data, Session):
            with_log = self._log_of != data.golden
            self.live_session = data.golden
            self._session_detail(data, self._detail_token, with_log, DetailInputs(self.config, *self.hooks_for(data)))
        elif isinstance(data, StepRef):
            self.live_session = data.session.golden
            if self._log_of != data.session.golden:  # a step of another session: its run log too
                self._session_log(data.session, self._detail_token)
            inputs = DetailInputs(self.config, *self.hooks_for(data.session))
            if data.turn is not None:
                self._turn_detail(data, self._detail_token, inputs)
            else:
                self._step_detail(data, self._detail_token, inputs)
        elif isinstance(data, FolderRef):
            self.detail.show_folder(str(data.rel), self.session_tree.sessions_under(data.rel))

    # a description of their own: @work would describe a worker by the repr() of its arguments (a Config)
    @work(thread=True, exclusive=True, group="detail", description="a session's detail")
    def _session_detail(self, s: Session, token: int, with_log: bool, inputs: DetailInputs) -> None:
        try:
            d = session_detail(s, inputs)  # in the worker: reads the files, formats every change
        except TapeError as e:
            self._detail_failed(token, e)
            self.call_from_thread(self.session_tree.refresh_session, s)
            if with_log:  # the pane never goes on showing the session before this one
                self.call_from_thread(
                    self._if_current, token, lambda: self._show_log(s, [], "not read: see the detail")
                )
            return
        if with_log:
            self.call_from_thread(self._if_current, token, lambda: self._show_log(s, d.events))
        self.call_from_thread(self._if_current, token, lambda: self.detail.show_session(d))

    @work(thread=True, exclusive=True, group="session-log", description="a session's run log")
    def _session_log(self, s: Session, token: int) -> None:
        try:
            events, problem = s.run_events(), None
        except TapeError as e:  # a FIFO, a folder named like a run log: said, never read
            events, problem = [], shown_redactor().redact_text(str(e))
        self.call_from_thread(self._if_current, token, lambda: self._show_log(s, events, problem))

    def _show_log(self, s: Session, events: list[dict[str, Any]], problem: str | None = None) -> None:
        """The run-log pane shows session ``s``'s run (what a detail worker read of it)."""
        self.run_log.show_run(s.name, events, problem)
        self._log_of = s.golden

    @work(thread=True, exclusive=True, group="detail", description="a step's detail")
    def _step_detail(self, ref: StepRef, token: int, inputs: DetailInputs) -> None:
        try:
            d = step_detail(ref, inputs)  # in the worker, as a session's
        except TapeError as e:
            self._detail_failed(token, e)
            return
        self.call_from_thread(self._if_current, token, lambda: self.detail.show_step(d))

    @work(thread=True, exclusive=True, group="detail", description="a model turn's detail")
    def _turn_detail(self, ref: StepRef, token: int, inputs: DetailInputs) -> None:
        try:
            d = turn_detail(ref, inputs)  # in the worker, as a step's
        except TapeError as e:
            self._detail_failed(token, e)
            return
        self.call_from_thread(self._if_current, token, lambda: self.detail.show_turn(d))

    def _detail_failed(self, token: int, e: TapeError) -> None:
        """From a detail worker: the pane says why, unless the cursor moved on meanwhile."""
        message = str(e)
        self.call_from_thread(self._if_current, token, lambda: self.detail.show_error(message))

    def _if_current(self, token: int, fn: Callable[[], None]) -> None:
        # a worker that finishes while the app closes finds no pane to fill: nothing to do (never an error)
        if token == self._detail_token and self.query_one_optional(DetailView) is not None:
            fn()

    # ---- what the cursor is on ---------------------------------------------------
    def _cursor(self) -> tuple[Session | None, StepRef | None]:
        node = self.session_tree.node_at_cursor()  # what the screen highlights, also just after a rebuild
        data = node.data if node is not None else None
        if isinstance(data, StepRef):
            return data.session, data
        if isinstance(data, Session):
            return data, None
        return None, None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.query_one_optional(SessionTree) is None:  # the app is closing: its screen's widgets are gone, and
            return None  # a message or a footer still asks (a cursor move handled late, on a busy machine)
        s, step = self._cursor()
        if action in ("accept", "reject"):
            return True if s is not None and s.pending else None
        if action in ("rerecord", "expire"):  # on a session's row they say where they act
            return True if s is not None else None
        if action in ("expire_all", "replay", "mark"):
            return True if s is not None else None
        if action == "undo":
            return True  # with nothing to undo, u says so
        if action in ("toggle_unified", "next_change", "prev_change"):
            return True if self.detail.diffs else None
        if action in ("allow_hooks", "no_hooks"):  # J: hidden unless the session's settings name hooks not allowed yet
            hooks = self.comparison_hooks.offered(s)
            return hooks if action == "allow_hooks" else not hooks
        return True

    # ---- the filter -------------------------------------------------------------
    def action_filter(self) -> None:
        self._filter_anchor = self._cursor()[0] or self._filter_anchor
        box = self.query_one("#filter", Input)
        box.display = True
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self.rebuild_tree()
        self._after_filter()

    def _after_filter(self) -> None:
        """The cursor stays on a visible row (its detail shown); with no row, the pane says why."""
        f = parse_filter(self.filter_text)
        tree = self.session_tree
        if f.scans_errors and any(s.recorded_error is None and s.error is None for s in self.sessions.values()):
            self._scan_recorded_errors()  # the tree fills in as tapes are read
        problem = f.problem + " esc clears the filter." if f.problem is not None else None
        if problem is not None or not tree.session_nodes:
            self._detail_token += 1  # a detail still being read for the old cursor is not shown
            self.live_session = self._log_of = None
            self.run_log.clear()  # no session is shown: neither is a run
            text = problem or (
                f"No session matches {self.filter_text.strip()!r}"
                + (" (looking for recorded errors…)" if self._errors_scanning else "")
                + ". esc clears the filter."
            )
            self.detail.show(Text(safe_text(text), "yellow" if problem else "dim"))
        else:
            node = tree.node_at_cursor()  # after a rebuild the tree's own cursor node may be stale
            anchor = self._filter_anchor  # the session selected when / was pressed: back on it while it is shown
            if anchor is not None and tree.shows(anchor) and (node is None or node.data is not anchor):
                tree.go_to(tree.reveal(anchor))
            elif node is None:
                tree.cursor_line = 0
            # The panes follow the row under the cursor now, whatever put it there: a move to the line it was
            # already on (or a rebuild that put another session on it) sends no highlight event.
            node = tree.node_at_cursor()
            data = node.data if node is not None else None
            session = data if isinstance(data, Session) else data.session if isinstance(data, StepRef) else None
            if data is not None and (
                not self.detail.subject
                or self.detail.subject != subject_of(data)
                or (session is not None and self._log_of != session.golden)
            ):
                self.show_detail(data, with_log=True)

    @work(thread=True, exclusive=True, group="errors")
    def _scan_recorded_errors(self) -> None:
        self._errors_scanning = True
        try:
            for s in list(self.sessions.values()):
                if self.feed.stopping.is_set():
                    return
                with contextlib.suppress(TapeError, OSError):  # unreadable: s.error says so; status:error matches it
                    s.scan_recorded_error()
        finally:
            self._errors_scanning = False
        self.call_from_thread(self._errors_scanned)

    def _errors_scanned(self) -> None:
        if parse_filter(self.filter_text).scans_errors:
            self.rebuild_tree()
            self._after_filter()

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self._filter_anchor = None  # from now on the cursor is where the person puts it
        self.session_tree.focus()

    async def action_back(self) -> None:  # async like App.action_back, which it replaces
        box = self.query_one("#filter", Input)
        tree = self.session_tree
        if box.has_focus or box.display:
            # esc closes the filter and clears it (a hidden filter would hide sessions silently); the cursor
            # stays on the row it was on, and j goes on from there
            box.display = False
            tree.focus()
            self._filter_anchor = None  # the cursor stays where it is
            if self.filter_text:
                box.value = ""  # Input.Changed rebuilds the tree with every session
                self.filter_text = ""
                self.rebuild_tree()
                self._after_filter()
            return
        node = tree.cursor_node
        if node is not None and isinstance(node.data, StepRef) and node.parent is not None:
            tree.move_cursor(node.parent)
            node.parent.collapse()
        elif node is not None and node.is_expanded:
            node.collapse()

    # ---- moving to what needs review ---------------------------------------------------
    def _jump(self, step: int) -> None:
        shown = self.visible_sessions()
        if not self.session_tree.jump_to_review(shown, step, skip=self.skipped):
            self.notify("Nothing needs review.", markup=False)

    def action_next_review(self) -> None:
        self._jump(1)

    def action_skip(self) -> None:
        """s: leave the session under the cursor for later: n and N pass it by for the rest of this sitting."""
        s, _ = self._cursor()
        if s is None:
            return
        self.skipped.add(s.golden)
        self.notify(safe_text(f"Skipped {s.name}: n and N pass it by until the app is restarted."), markup=False)
        self._jump(1)

    def action_prev_review(self) -> None:
        self._jump(-1)

    # ---- the other keys ---------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    def action_mark(self) -> None:
        s, _ = self._cursor()
        if s is not None:
            s.marked = not s.marked
            self.session_tree.refresh_session(s)

    def action_toggle_unified(self) -> None:
        self.detail.toggle_unified()

    def action_next_change(self) -> None:
        self.detail.jump_change(1)

    def action_prev_change(self) -> None:
        self.detail.jump_change(-1)

    def action_follow(self) -> None:
        follow = self.run_log.toggle_follow()
        self.notify("Following the newest event." if follow else "Stopped following.", markup=False)

    def action_accept(self) -> None:
        s, step = self._cursor()
        if s is None or not s.pending:
            self.notify(
                "Nothing to accept here: no pending candidate. Record or fill a run first.",
                severity="warning",
                markup=False,
            )
            return
        what = accept_what(s, step)
        steps = [step.seq] if step is not None else None
        suggestion = self.detail.suggested_rule if self.detail.subject == subject_of(step or s) else None

        def accept(got: Accepting | None) -> None:
            if got is not None:
                self.controller.accept([s], got.why, steps, got.rule)

        # a rule goes into tapes.toml: without one (defaults for a bare folder) the box is not offered
        self.push_screen(RationaleScreen(what, suggestion, rules=self.config.path is not None), accept)

    def action_accept_all(self) -> None:
        shown = self.visible_sessions()
        chosen = [s for s in shown if s.marked and s.pending] or (
            [s for s in shown if s.pending] if self.filter_text else []
        )
        if not chosen:
            self.notify("Mark sessions with space (or filter them) to accept them together.", markup=False)
            return
        what = f"{len(chosen)} session(s): " + ", ".join(s.name for s in chosen)
        left = [s.name for s in shown if s.marked and not s.pending]
        if left and any(s.marked for s in chosen):  # marked, but with nothing to accept: said, not dropped silently
            what += f" (marked with no candidate, left out: {', '.join(left)})"

        def accept(got: Accepting | None) -> None:
            if got is not None:
                self.controller.accept(chosen, got.why, None)

        self.push_screen(RationaleScreen(what, rules=False), accept)  # a rule is added for one session at a time

    def action_reject(self) -> None:
        s, _ = self._cursor()
        if s is None or not s.pending:
            return
        self.confirm(*reject_question(s), lambda: self.controller.reject(s))

    def action_expire(self) -> None:
        s, step = self._cursor()
        if s is not None and step is None:
            self.notify(_ON_A_STEP.format(key="x", what="expires"), markup=False, timeout=6)
        elif s is not None and step is not None and step.turn is not None:
            self.notify(turn_notice(s, step, "expire"), markup=False, timeout=10)
        elif s is not None and step is not None:
            self.controller.expire(s, [step.seq], False)

    def action_expire_all(self) -> None:
        s, _ = self._cursor()
        if s is not None:
            self.controller.expire(s, None, True)

    def action_undo(self) -> None:
        """u: `tapetui undo SESSION` for the session under the cursor, after a confirmation naming the change."""
        s, _ = self._cursor()
        if s is None:
            self.notify(
                "u undoes the newest accept, reject or expire of the session under the cursor: move to a session "
                "(a folder has nothing of its own to undo).",
                markup=False,
            )
            return
        self.controller.ask_undo(s, self._confirm_undo)

    def _confirm_undo(self, s: Session, target: HistoryRecord) -> None:
        self.confirm(*undo_question(s, target), lambda: self.controller.undo(s, target))

    def action_rerecord(self) -> None:
        s, step = self._cursor()
        if s is not None and step is None:
            self.notify(_ON_A_STEP.format(key="R", what="re-records"), markup=False, timeout=6)
        if s is None or step is None:
            return
        if step.turn is not None:  # the app never calls a model: the agent does, through its tape
            self.notify(turn_notice(s, step, "re-record"), markup=False, timeout=10)
            return
        try:
            rec = s.record(step.index)
        except TapeError as e:
            self.show_error(e)
            return
        self.confirm(*rerecord_question(self.config, rec), lambda: self.controller.rerecord(s, rec.seq))

    def action_allow_hooks(self) -> None:
        """J: import the comparison hooks tapes.toml names for this session, after asking (see hooks.py)."""
        self.comparison_hooks.ask(self._cursor()[0])

    def action_no_hooks(self) -> None:
        """J where there is nothing to import: say why, instead of doing nothing."""
        self.comparison_hooks.explain(self._cursor()[0])

    def action_replay(self) -> None:
        s, _ = self._cursor()
        if s is None:
            return
        if not self.config.replay_command:
            self.notify("No replay_command in tapes.toml.", severity="warning", markup=False)
            return
        self.live_session = s.golden
        self.controller.replay(s)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            assert isinstance(b, Binding)
            if b.action in ("quit", "back", "no_hooks"):
                continue
            yield SystemCommand(
                f"{b.description} ({self.get_key_display(b)})",
                COMMAND_HELP.get(b.action, ""),
                getattr(self, f"action_{b.action}"),
            )
