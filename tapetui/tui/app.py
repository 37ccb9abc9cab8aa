"""The review app: a session tree, a detail pane with diffs, and a live run log."""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Header, Input, Log, Tree

from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.runlog import RunLogReader, RunSummary
from tapetui.core.store import candidate_path, golden_of, iter_goldens, refuse_links_out, runlog_path, session_name
from tapetui.core.tapefile import read_regular
from tapetui.core.textsafe import safe_text
from tapetui.review import golden as review
from tapetui.tui.messages import FilesChanged, RunEvents, SummariesReady
from tapetui.tui.model import Session, StepSummary, comparison_lines, step_lines
from tapetui.tui.screens.confirm import ConfirmScreen
from tapetui.tui.screens.help import HelpScreen
from tapetui.tui.screens.rationale import RationaleScreen
from tapetui.tui.widgets.detail import DetailView
from tapetui.tui.widgets.footer import ReviewFooter
from tapetui.tui.widgets.session_tree import FolderRef, MoreRef, SessionTree, StepRef

REVIEW_STATUSES = ("drift", "miss", "contract", "stale", "unused")
# what `/` understands after status:  (error: a tape that cannot be read, or one that recorded an error)
FILTER_STATUSES = ("drift", "contract", "miss", "stale", "unused", "pending", "error")


class TapeApp(App[None]):
    """``tapetui [DIR]``: browse tapes, watch replays, review drift, accept baselines."""

    CSS_PATH = "app.tcss"
    TITLE = "tapetui"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("question_mark", "help", "Help"),
        Binding("slash", "filter", "Filter"),
        Binding("n", "next_review", "Next"),
        Binding("N", "prev_review", "Previous session to review", show=False),
        Binding("s", "next_review", "Skip to the next to review", show=False),
        Binding("a", "accept", "Accept"),
        Binding("A", "accept_all", "Accept all marked", show=False),
        Binding("r", "reject", "Reject"),
        Binding("R", "rerecord", "Re-record"),
        Binding("x", "expire", "Expire"),
        Binding("X", "expire_all", "Expire all time-sensitive", show=False),
        Binding("p", "replay", "Replay"),
        Binding("F", "follow", "Follow"),
        Binding("t", "toggle_unified", "Unified or side-by-side diff", show=False),
        Binding("right_square_bracket", "next_change", "Next change", show=False),
        Binding("left_square_bracket", "prev_change", "Previous change", show=False),
        Binding("space", "mark", "Mark session", show=False),  # the tree binds space to it as well (its own wins)
        Binding("u", "undo", "Undo"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, config: Config, *, watch: bool = True) -> None:
        super().__init__()
        self.config = config
        self.watch_files = watch
        self.sessions: dict[Path, Session] = {}
        self.order: list[Path] = []
        self.filter_text = ""
        self.follow = False
        self.live_session: Path | None = None
        # (what was done, golden, golden before, candidate before, its changelog entry id or None)
        self.undo_stack: list[tuple[str, Path, bytes | None, bytes | None, str | None]] = []
        self.first_paint: float | None = None  # monotonic time the first screen was drawn
        self._stop = threading.Event()
        self._watching = threading.Event()  # the watcher is in place
        self._summarised = threading.Event()  # every run log has been read once
        self._readers: dict[Path, RunLogReader] = {}
        self._refused: set[Path] = set()  # run logs that are symlinks leading out (reported once)
        self._detail_token = 0
        self._errors_scanning = False  # status:error is reading tapes for recorded errors
        self._filter_anchor: Session | None = None  # the session selected when / was pressed
        self._footer_allows: tuple[bool | None, ...] = ()

    # ---- layout -----------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            placeholder="filter: tool:NAME  status:drift|miss|stale|pending|error  or text — esc closes", id="filter"
        )
        with Horizontal(id="main"):
            yield SessionTree(str(self.config.tapes_dir), id="tree")
            with Vertical(id="right"):
                yield DetailView(id="detail")
                yield Log(id="live", max_lines=5000, auto_scroll=False)
        yield ReviewFooter()

    @property
    def tree(self) -> SessionTree:
        return self.query_one(SessionTree)

    @property
    def detail(self) -> DetailView:
        return self.query_one(DetailView)

    def on_mount(self) -> None:
        try:
            self.sub_title = safe_text(str(self.config.tapes_dir.relative_to(self.config.root)) or ".", newlines=False)
        except ValueError:
            self.sub_title = safe_text(str(self.config.tapes_dir), newlines=False)
        self.query_one("#filter", Input).display = False
        self.query_one("#live", Log).border_title = "live run log (p starts a replay · F follows)"
        try:
            for note in review.recover(self.config):
                self.notify(safe_text(note), severity="warning", markup=False)
        except (TapeError, OSError) as e:
            self.notify(safe_text(str(e)), severity="error", markup=False)
        self.load_sessions()
        self.tree.focus()
        if self.tree.cursor_line < 0 and self.order:
            self.tree.cursor_line = 0
        elif not self.order:
            self._show_no_tapes()
        self.call_after_refresh(self._start_background)  # the first screen is drawn before any run log is read

    def _start_background(self) -> None:
        self.first_paint = time.monotonic()
        if self.watch_files:
            self.watcher()
        self.summarise()

    def on_unmount(self) -> None:
        self._stop.set()

    # ---- sessions ---------------------------------------------------------------
    def load_sessions(self) -> None:
        goldens = list(iter_goldens(self.config.tapes_dir))
        keep = {}
        for g in goldens:
            s = self.sessions.get(g)
            if s is None:
                s = Session(g, session_name(g, self.config.tapes_dir), self.config.tapes_dir)
                if self._summarised.is_set():  # appeared while the app runs: the first read is long over
                    s.pending, s.loaded = candidate_path(g).exists(), True
            keep[g] = s
        self.sessions = keep
        self.order = goldens
        self.rebuild_tree()
        if not goldens:
            self._show_no_tapes()
        elif self.tree.cursor_line < 0 and not self.filter_text:
            self.tree.cursor_line = 0  # the first tapes appeared in an empty folder

    def no_tapes_text(self) -> str:
        """What an empty (or wrong) folder shows: where tapetui looked, and what to do next."""
        cfg = self.config
        if cfg.path is not None:
            looked = f"tapes.toml: {cfg.path} (its [tapes] dir is the folder above)"
        else:
            here = Path.cwd().resolve()
            top = next((d for d in (here, *here.parents) if (d / ".git").exists()), None)
            looked = (
                f"looked for tapes.toml in {here}"
                + (f" and the folders above it up to {top}" if top and top != here else " and the folders above it")
                + ": none found"
            )
        return (
            f"No tapes found in {cfg.tapes_dir}\n({looked})\n\n"
            "What to do next:\n"
            "• record a session: pytest --tape-mode=record\n"
            '  (or Tape(path, mode="record") in code)\n'
            "• open the folder that holds the tapes: tapetui DIR\n"
            "  (or set [tapes] dir in tapes.toml)\n"
            "• try the samples: python -m tapetui.sample_agent\n"
            "  regenerate sample_tapes, then tapetui sample_tapes\n\n"
            "Tapes that appear here show up by themselves. q quits."
        )

    def _show_no_tapes(self) -> None:
        self.detail.show(Text(safe_text(self.no_tapes_text()), "yellow"))

    def visible(self) -> list[Session]:
        q = self.filter_text.strip().lower()
        out = []
        for g in self.order:
            s = self.sessions[g]
            if not q:
                out.append(s)
            elif q.startswith("status:"):
                want = q[7:].strip()
                if (
                    want in s.statuses
                    or (want == "contract" and "contract" in s.summary.status.values())
                    or (want == "error" and (s.error or s.recorded_error))
                ):
                    out.append(s)
            elif q.startswith("tool:"):
                try:
                    if q[5:] in {t.lower() for t in s.index().tools}:
                        out.append(s)
                except TapeError:
                    pass
            elif q in s.name.lower():
                out.append(s)
        return out

    def rebuild_tree(self) -> None:
        shown = self.visible()
        self.tree.populate(self.config.tapes_dir, shown)
        if not shown:  # an empty tree says why (the right pane says more)
            self.tree.root.add_leaf(
                Text(
                    "no session matches the filter" if self.filter_text.strip() else "no tapes in this folder",
                    "dim italic",
                ),
                data=None,
            )

    # ---- background: summaries and watching ---------------------------------------
    # Two threads share the incremental run-log readers (each byte is read once) but never at the same time:
    # the watcher starts first and queues what changes; the summariser reads every run log, then once more
    # after the watcher is up (catching what was appended in between), and only then the watcher goes on.
    @work(thread=True, exclusive=True, group="summaries")
    def summarise(self) -> None:
        batch: dict[Path, tuple[RunSummary, bool]] = {}
        try:
            for g in list(self.order):
                if self._stop.is_set():
                    return
                batch[g] = (_current(g, StepSummary.of(self._poll(g)[1])), candidate_path(g).exists())
                if len(batch) >= 500:
                    self.post_message(SummariesReady(batch))
                    batch = {}
            self.post_message(SummariesReady(batch))
            if not self.watch_files:
                return
            while not self._watching.wait(0.1):
                if self._stop.is_set():
                    return
            self._post_run_events(list(self.order))
        finally:
            self._summarised.set()

    @work(thread=True, exclusive=True, group="watch")
    def watcher(self) -> None:
        """Watch the folder; run-log appends become RunEvents, other changes FilesChanged."""
        from watchfiles import watch

        for changes in watch(
            self.config.tapes_dir, stop_event=self._stop, debounce=25, step=10, rust_timeout=200, yield_on_timeout=True
        ):
            self._watching.set()  # the first yield, even an empty one, proves the watch is in place
            if not changes:
                continue
            while not self._summarised.wait(0.1):
                if self._stop.is_set():
                    return
            paths = frozenset(Path(p) for _, p in changes)
            self._post_run_events([g for p in paths if p.name.endswith(".run.jsonl") and (g := golden_of(p))])
            self.post_message(FilesChanged(paths))

    def _post_run_events(self, goldens: list[Path]) -> None:
        """Read what was appended to these sessions' run logs; one message for all of them."""
        updates = []
        for g in goldens:
            reset, events = self._poll(g)
            if events or reset:
                updates.append((g, events, reset))
        if updates:
            self.post_message(RunEvents(updates))

    def _poll(self, golden: Path) -> tuple[bool, list[dict[str, Any]]]:
        reader = self._readers.get(golden)
        if reader is None:
            reader = self._readers[golden] = RunLogReader(runlog_path(golden))
        try:
            refuse_links_out(self.config.tapes_dir, reader.path)
            polled = reader.poll()  # a FIFO or a folder named like a run log: a TapeError, never a hang
        except TapeError as e:
            if golden in self._refused:  # said once already
                return False, []
            self._refused.add(golden)
            return False, [{"event": "invalid", "problem": str(e)}]
        self._refused.discard(golden)
        return polled

    def on_summaries_ready(self, msg: SummariesReady) -> None:
        for g, (summary, pending) in msg.summaries.items():
            s = self.sessions.get(g)
            if s is None:
                continue
            s.summary, s.pending, s.loaded = summary, pending, True
            self.tree.refresh_session(s)
        self.tree.refresh_folders([s for g in msg.summaries if (s := self.sessions.get(g)) is not None])
        self._refresh_selected()

    def on_run_events(self, msg: RunEvents) -> None:
        log = self.query_one("#live", Log)
        touched = []
        for golden, events, reset in msg.updates:
            s = self.sessions.get(golden)
            if s is None:
                continue
            if reset:
                s.summary.reset()
            for ev in events:
                s.summary.add(ev)
            self.tree.refresh_session(s)
            touched.append(s)
            if self.live_session is None or self.live_session == golden:
                if reset or any(e.get("event") == "start" for e in events):
                    log.clear()
                    log.write_line(f"── {safe_text(s.name, newlines=False)} ──")
                log.write_lines([_event_line(e) for e in events])
                if self.follow:
                    log.scroll_end(animate=False)
                    self._follow_step(s, events)
        self.tree.refresh_folders(touched)

    def on_files_changed(self, msg: FilesChanged) -> None:
        # Run logs arrive as RunEvents (read incrementally); here only tapes and candidates matter.
        goldens = {g for p in msg.paths if (g := golden_of(p)) is not None and not p.name.endswith(".run.jsonl")}
        if not goldens:
            return
        structural = False
        for g in goldens:
            exists = g.exists() or candidate_path(g).exists()
            s = self.sessions.get(g)
            if s is None and exists or s is not None and not exists:
                structural = True
            elif s is not None:
                s.pending = candidate_path(g).exists()
                self.tree.refresh_session(s)
        if structural:
            self.load_sessions()
        self._refresh_selected()

    def _follow_step(self, s: Session, events: list[dict[str, Any]]) -> None:
        seqs = [e.get("step", e.get("seq")) for e in events if isinstance(e.get("seq"), int)]
        if not seqs or not self.tree.shows(s):
            return
        node = self.tree.reveal(s)
        node.expand()
        self.tree.build_steps(node)
        for child in node.children:
            if isinstance(child.data, StepRef) and child.data.seq == seqs[-1]:
                self.tree.go_to(child)
                break

    # ---- detail -----------------------------------------------------------------
    @on(Tree.NodeHighlighted)
    def _highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        self.show_detail(event.node.data, with_log=True)
        self._refresh_footer()

    def _refresh_footer(self) -> None:
        """Redraw the footer's keys only when what they allow changed: rebuilding it is the costliest part
        of a cursor move (its key widgets are recomposed and restyled), and j/k over similar items
        change nothing there."""
        allowed = tuple(self.check_action(b.action, ()) for b in self.BINDINGS if isinstance(b, Binding) and b.show)
        if allowed != self._footer_allows:
            self._footer_allows = allowed
            self.refresh_bindings()

    @on(Tree.NodeSelected)
    def _selected(self, event: Tree.NodeSelected[Any]) -> None:
        data = event.node.data
        if isinstance(data, MoreRef):
            self.tree.load_more(data, event.node)

    def _refresh_selected(self) -> None:
        node = self.tree.cursor_node
        if node is not None:
            self.show_detail(node.data)

    def show_detail(self, data: Any, with_log: bool = False) -> None:
        if not isinstance(data, (Session, StepRef, FolderRef)):
            return  # a "more" row or a message row: what the pane shows (or is reading) stays
        self._detail_token += 1
        if isinstance(data, Session):
            with_log = with_log and self.live_session != data.golden
            self.live_session = data.golden
            self._session_detail(data, self._detail_token, with_log)
        elif isinstance(data, StepRef):
            self.live_session = data.session.golden
            self._step_detail(data, self._detail_token)
        elif isinstance(data, FolderRef):
            self.detail.show_folder(str(data.rel), self.tree.sessions_under(data.rel))

    @work(thread=True, exclusive=True, group="detail")
    def _session_detail(self, s: Session, token: int, with_log: bool) -> None:
        try:
            idx = s.index()
            cmp = s.comparison(self.config) if s.pending and s.golden.exists() else None
            events = _events(s)
            notes = [f.text for f in review.compare_run(idx, events, self.config)] if s.summary.ended else []
            args = (s, idx.header, len(idx), cmp, notes)
            lines = comparison_lines(cmp) if cmp is not None else None  # in the worker: reads every change
            if with_log:
                self.call_from_thread(self._if_current, token, lambda: self._show_log(s, events))
        except TapeError as e:
            message = str(e)  # `e` is unbound once the except block ends; the lambda runs later
            self.call_from_thread(self._if_current, token, lambda: self.detail.show_error(message))
            self.call_from_thread(self.tree.refresh_session, s)
            return
        self.call_from_thread(self._if_current, token, lambda: self.detail.show_session(*args, lines=lines))

    @work(thread=True, exclusive=True, group="detail")
    def _step_detail(self, ref: StepRef, token: int) -> None:
        s = ref.session
        try:
            rec = s.index().record(ref.index)
            sd = None
            if s.pending and s.golden.exists():
                cmp = s.comparison(self.config)
                sd = next((d for d in cmp.steps if d.old is not None and d.old.seq == ref.seq and d.differs), None)
            ev = s.summary.drift_events.get(ref.seq)
            contract = list(sd.fingerprint) if sd is not None and sd.fingerprint else []
            lines = step_lines(sd) if sd is not None else None  # in the worker: reads every change
            if ev is not None and ev.get("event") == "fingerprint":
                contract = [f"fingerprint {ev.get('recorded')} → {ev.get('live')}", *(ev.get("explanation") or [])]
        except TapeError as e:
            message = str(e)  # `e` is unbound once the except block ends; the lambda runs later
            self.call_from_thread(self._if_current, token, lambda: self.detail.show_error(message))
            return
        self.call_from_thread(
            self._if_current, token, lambda: self.detail.show_step(s, rec, sd, ev, contract, lines=lines)
        )

    def _show_log(self, s: Session, events: list[dict[str, Any]]) -> None:
        """The selected session's latest run, in the live panel (new events keep arriving there)."""
        log = self.query_one("#live", Log)
        log.clear()
        log.write_line(f"── {safe_text(s.name, newlines=False)} ──" + ("" if events else "  no run yet (p starts one)"))
        log.write_lines([_event_line(e) for e in events])

    def _if_current(self, token: int, fn: Callable[[], None]) -> None:
        if token == self._detail_token:
            fn()

    # ---- what the cursor is on ---------------------------------------------------
    def _cursor(self) -> tuple[Session | None, StepRef | None]:
        node = self.tree.cursor_node
        data = node.data if node is not None else None
        if isinstance(data, StepRef):
            return data.session, data
        if isinstance(data, Session):
            return data, None
        return None, None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        s, step = self._cursor()
        if action in ("accept", "reject"):
            return True if s is not None and s.pending else None
        if action in ("rerecord", "expire"):
            return True if step is not None else None
        if action in ("expire_all", "replay", "mark"):
            return True if s is not None else None
        if action == "undo":
            return True  # with nothing to undo, u says so
        if action in ("toggle_unified", "next_change", "prev_change"):
            return True if self.detail.diffs else None
        return True

    # ---- actions ----------------------------------------------------------------
    def action_help(self) -> None:
        self.push_screen(HelpScreen())

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

    def _filter_problem(self) -> str | None:
        q = self.filter_text.strip().lower()
        if q.startswith("status:") and q[7:].strip() not in FILTER_STATUSES:
            return (
                f"Unknown status {q[7:].strip()!r}. Valid: "
                + ", ".join(f"status:{x}" for x in FILTER_STATUSES)
                + "; or tool:NAME, or any part of a session's name. esc clears the filter."
            )
        return None

    def _after_filter(self) -> None:
        """The cursor stays on a visible row (its detail shown); with no row, the pane says why."""
        q = self.filter_text.strip().lower()
        if (
            q.startswith("status:")
            and q[7:].strip() == "error"
            and any(s.recorded_error is None and s.error is None for s in self.sessions.values())
        ):
            self._scan_recorded_errors()  # the tree fills in as tapes are read
        problem = self._filter_problem()
        if problem is not None or not self.tree.session_nodes:
            self._detail_token += 1  # a detail still being read for the old cursor is not shown
            self.live_session = None
            text = problem or (
                f"No session matches {self.filter_text.strip()!r}"
                + (" (looking for recorded errors…)" if self._errors_scanning else "")
                + ". esc clears the filter."
            )
            self.detail.show(Text(safe_text(text), "yellow" if problem else "dim"))
        else:
            node = self.tree.node_at_cursor()  # after a rebuild the tree's own cursor node may be stale
            anchor = self._filter_anchor  # the session selected when / was pressed: back on it while it is shown
            if anchor is not None and self.tree.shows(anchor) and (node is None or node.data is not anchor):
                self.tree.go_to(self.tree.reveal(anchor))
            elif node is None:
                self.tree.cursor_line = 0  # highlighted: its detail follows
            elif not self.detail.subject:
                self.show_detail(node.data, with_log=True)  # the pane still holds a message: the row's detail

    @work(thread=True, exclusive=True, group="errors")
    def _scan_recorded_errors(self) -> None:
        self._errors_scanning = True
        try:
            for s in list(self.sessions.values()):
                if self._stop.is_set():
                    return
                with contextlib.suppress(TapeError, OSError):  # unreadable: s.error says so; status:error matches it
                    s.scan_recorded_error()
        finally:
            self._errors_scanning = False
        self.call_from_thread(self._errors_scanned)

    def _errors_scanned(self) -> None:
        if self.filter_text.strip().lower().replace(" ", "") == "status:error":
            self.rebuild_tree()
            self._after_filter()

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self._filter_anchor = None  # from now on the cursor is where the person puts it
        self.tree.focus()

    def action_back(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_focus or box.display:
            # esc closes the filter and clears it (a hidden filter would hide sessions silently); the cursor
            # stays on the row it was on, and j goes on from there
            box.display = False
            self.tree.focus()
            self._filter_anchor = None  # the cursor stays where it is
            if self.filter_text:
                box.value = ""  # Input.Changed rebuilds the tree with every session
                self.filter_text = ""
                self.rebuild_tree()
                self._after_filter()
            return
        node = self.tree.cursor_node
        if node is not None and isinstance(node.data, StepRef) and node.parent is not None:
            self.tree.move_cursor(node.parent)
            node.parent.collapse()
        elif node is not None and node.is_expanded:
            node.collapse()

    def _review_targets(self) -> list[tuple[tuple[int, int], Session, Any]]:
        """What needs review, in screen order: sessions (built or not) and the steps of open sessions."""
        out: list[tuple[tuple[int, int], Session, Any]] = []
        for i, s in enumerate(self.visible()):
            if s.needs_review:
                out.append(((i, -1), s, None))
            node = self.tree.session_nodes.get(s.golden)
            if node is not None and node.is_expanded:
                out += [
                    ((i, c.data.index), s, c)
                    for c in node.children
                    if isinstance(c.data, StepRef) and s.summary.status.get(c.data.seq) in REVIEW_STATUSES
                ]
        return out

    def _cursor_key(self) -> tuple[int, int]:
        """Where the cursor is, in the order of _review_targets."""
        pos = {s.golden: i for i, s in enumerate(self.visible())}
        node = self.tree.cursor_node
        data = node.data if node is not None else None
        if isinstance(data, StepRef):
            return pos.get(data.session.golden, -1), data.index
        if isinstance(data, Session):
            return pos.get(data.golden, -1), -1
        if isinstance(data, MoreRef) and data.session is not None:
            return pos.get(data.session.golden, -1), data.start
        first = self.tree.first_session(data)
        return (pos[first.golden] - 1, 1 << 62) if first is not None and first.golden in pos else (-1, 0)

    def _jump(self, step: int) -> None:
        targets = self._review_targets()
        if not targets:
            self.notify("Nothing needs review.", markup=False)
            return
        cur = self._cursor_key()
        if step > 0:
            target = next((t for t in targets if t[0] > cur), targets[0])
        else:
            target = next((t for t in reversed(targets) if t[0] < cur), targets[-1])
        self.tree.go_to(target[2] or self.tree.reveal(target[1]))

    def action_next_review(self) -> None:
        self._jump(1)

    def action_prev_review(self) -> None:
        self._jump(-1)

    def action_mark(self) -> None:
        s, _ = self._cursor()
        if s is not None:
            s.marked = not s.marked
            self.tree.refresh_session(s)

    def action_toggle_unified(self) -> None:
        self.detail.toggle_unified()

    def action_next_change(self) -> None:
        self.detail.jump_change(1)

    def action_prev_change(self) -> None:
        self.detail.jump_change(-1)

    def action_follow(self) -> None:
        self.follow = not self.follow
        log = self.query_one("#live", Log)
        log.auto_scroll = self.follow
        # Text, not str: a str border title is markup, and "[following]" would vanish as a tag
        log.border_title = Text("live run log" + ("  [following]" if self.follow else "  (F follows)"))
        if self.follow:
            log.scroll_end(animate=False)
        self.notify("Following the newest event." if self.follow else "Stopped following.", markup=False)

    # -- accept / reject / expire / undo
    def action_accept(self) -> None:
        s, step = self._cursor()
        if s is None or not s.pending:
            self.notify(
                "Nothing to accept here: no pending candidate. Record or fill a run first.",
                severity="warning",
                markup=False,
            )
            return
        what = (
            f"{s.name}: step {step.seq} ({step.tool}) from the candidate"
            if step is not None
            else f"{s.name}: the whole candidate"
        )
        steps = [step.seq] if step is not None else None
        self.push_screen(RationaleScreen(what), lambda why: why and self._accept([s], why, steps))

    def action_accept_all(self) -> None:
        chosen = [s for s in self.visible() if s.marked and s.pending] or (
            [s for s in self.visible() if s.pending] if self.filter_text else []
        )
        if not chosen:
            self.notify("Mark sessions with space (or filter them) to accept them together.", markup=False)
            return
        what = f"{len(chosen)} session(s): " + ", ".join(s.name for s in chosen)
        self.push_screen(RationaleScreen(what), lambda why: why and self._accept(chosen, why, None))

    @work(thread=True, group="write")
    def _accept(self, sessions: list[Session], why: str, steps: list[int] | None) -> None:
        for s in sessions:
            try:  # read_regular: a FIFO named like a tape is an error shown, never a worker blocked for good
                before = read_regular(s.golden) if s.golden.exists() else None
                cand = read_regular(candidate_path(s.golden), "candidate")
                entry = review.accept(self.config, s.golden, why, steps)
            except (TapeError, OSError) as e:
                self.call_from_thread(self._error, e)
                continue
            self.undo_stack.append(("accept", s.golden, before, cand, entry.id))
            s.marked = False
            if steps:  # one step of the candidate: say so, and whether the rest still waits for review
                rest = (
                    "the candidate stays pending: other steps still differ"
                    if candidate_path(s.golden).exists()
                    else "nothing else differed: the candidate is done"
                )
                what = f"step{'s' if len(steps) != 1 else ''} {', '.join(map(str, steps))} of {s.name}; {rest}"
            else:
                what = s.name
            self.call_from_thread(self._done, s, f"Accepted {what}; changelog entry {entry.id}.")

    def action_reject(self) -> None:
        s, _ = self._cursor()
        if s is None or not s.pending:
            return
        self._reject(s)

    @work(thread=True, group="write")
    def _reject(self, s: Session) -> None:
        try:
            cand = read_regular(candidate_path(s.golden), "candidate")
            review.reject(self.config, s.golden)
        except (TapeError, OSError) as e:
            self.call_from_thread(self._error, e)
            return
        self.undo_stack.append(("reject", s.golden, None, cand, None))
        self.call_from_thread(self._done, s, f"Rejected the candidate of {s.name} (u undoes).")

    def action_expire(self) -> None:
        s, step = self._cursor()
        if s is not None and step is not None:
            self._expire(s, [step.seq], False)

    def action_expire_all(self) -> None:
        s, _ = self._cursor()
        if s is not None:
            self._expire(s, None, True)

    @work(thread=True, group="write")
    def _expire(self, s: Session, steps: list[int] | None, all_ts: bool) -> None:
        try:
            before = read_regular(s.golden)
            entry = review.expire(self.config, s.golden, steps, all_time_sensitive=all_ts)
        except review.AlreadyExpired as e:  # nothing changed: information, not an error
            self.call_from_thread(self.notify, safe_text(str(e)), markup=False)
            return
        except (TapeError, OSError) as e:
            self.call_from_thread(self._error, e)
            return
        self.undo_stack.append(("expire", s.golden, before, None, entry.id))
        n = len(entry.steps)
        self.call_from_thread(
            self._done,
            s,
            f"Expired step{'s' if n != 1 else ''} "
            f"{', '.join(map(str, entry.steps))} of {s.name}; the next fill "
            "re-records them.",
        )

    def action_undo(self) -> None:
        if not self.undo_stack:
            self.notify("Nothing to undo: no accept, reject or expire was made in this sitting.", markup=False)
            return
        self._undo()

    @work(thread=True, group="write")
    def _undo(self) -> None:
        kind, golden, before, cand, entry_id = self.undo_stack.pop()
        reverts = f"changelog entry {entry_id}" if entry_id else "no changelog entry"
        why = f"undo of {kind} made in tapetui" + (f" (reverts changelog entry {entry_id})" if entry_id else "")
        if kind != "reject" and before is None:
            self.call_from_thread(
                self._error,
                TapeError(f"cannot undo the first accept of a new session (there was no golden before; {reverts})"),
            )
            return
        try:
            if kind == "reject":
                assert cand is not None
                entry = review.restore_candidate(self.config, golden, cand, why)
            else:
                assert before is not None
                entry = review.restore(self.config, golden, before, why, candidate=cand)
        except (TapeError, OSError) as e:
            self.undo_stack.append((kind, golden, before, cand, entry_id))  # not undone: u can try again
            self.call_from_thread(self._error, e)
            return
        s = self.sessions.get(golden)
        name = s.name if s is not None else golden.name
        message = f"Undid the {kind} of {name} ({reverts}); logged as changelog entry {entry.id}."
        if s is not None:
            self.call_from_thread(self._done, s, message)
        else:
            self.call_from_thread(self.notify, safe_text(message), markup=False)

    # -- re-record and replay
    def action_rerecord(self) -> None:
        s, step = self._cursor()
        if s is None or step is None:
            return
        try:
            rec = s.index().record(step.index)
        except TapeError as e:
            self._error(e)
            return
        body = (
            f"Step {rec.seq} ({rec.tool}) will run live with its recorded arguments.\n"
            f"tapetui will import the registry {self.config.registry or '(none configured)'} "
            f"from {self.config.root} to do it."
        )
        if rec.side_effect:
            body += f"\n\n{rec.tool} HAS SIDE EFFECTS: it will really run."
        self.push_screen(ConfirmScreen("Re-record this step?", body), lambda ok: ok and self._rerecord(s, rec.seq))

    @work(thread=True, group="write")
    def _rerecord(self, s: Session, seq: int) -> None:
        try:
            review.rerecord(self.config, s.golden, seq, yes=True)
        except (TapeError, OSError) as e:
            self.call_from_thread(self._error, e)
            return
        s.pending = True
        self.call_from_thread(self._done, s, f"Re-recorded step {seq} of {s.name}: review the pending change.")

    def action_replay(self) -> None:
        s, _ = self._cursor()
        if s is None:
            return
        if not self.config.replay_command:
            self.notify("No replay_command in tapes.toml.", severity="warning", markup=False)
            return
        self.live_session = s.golden
        self._replay(s)

    @work(thread=True, group="replay")
    def _replay(self, s: Session) -> None:
        cmd = (self.config.replay_command or "").replace("{tape}", shlex.quote(str(s.golden)))
        self.call_from_thread(self.notify, safe_text(f"Replaying {s.name}…"), markup=False)
        try:
            proc = subprocess.run(
                shlex.split(cmd),
                cwd=self.config.root,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=3600,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            self.call_from_thread(self._error, e)
            return
        if proc.returncode == 0:
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or [""]
            self.call_from_thread(self.notify, safe_text(f"Replay of {s.name} exited 0: {tail[0]}"), markup=False)
        else:  # the cause, not only the last line: a failure's message often spans several
            self.call_from_thread(
                self.notify,
                f"Replay of {safe_text(s.name, newlines=False)} exited "
                f"{proc.returncode}:\n{failure_tail(proc.stdout, proc.stderr)}",
                severity="warning",
                markup=False,
                timeout=15,
            )

    # -- helpers
    def _error(self, e: BaseException) -> None:
        self.notify(safe_text(str(e)), severity="error", markup=False, timeout=8)

    @work(thread=True, group="write")
    def _check_outdated(self, s: Session) -> None:
        """After the golden changed: is the last run now about an earlier golden? (hashing is file IO)"""
        summary = s.summary
        now = _current(s.golden, summary)
        if now is not summary:
            self.call_from_thread(self._set_summary, s, summary, now)

    def _set_summary(self, s: Session, old: RunSummary, new: RunSummary) -> None:
        if s.summary is old:  # no newer run replaced it meanwhile
            s.summary = new
            self.tree.refresh_session(s)
            self._refresh_selected()

    def _done(self, s: Session, message: str) -> None:
        self._check_outdated(s)
        s.pending = candidate_path(s.golden).exists()
        self.tree.refresh_session(s)
        self.tree.refresh_folders([s])
        self._refresh_selected()
        self._refresh_footer()
        self.notify(safe_text(message), markup=False)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            assert isinstance(b, Binding)
            if b.action in ("quit", "back"):
                continue
            yield SystemCommand(
                f"{b.description} ({self.get_key_display(b)})",
                _COMMAND_HELP.get(b.action, ""),
                getattr(self, f"action_{b.action}"),
            )


_COMMAND_HELP = {
    "accept": "Promote the candidate (or this step) to golden, with a rationale",
    "accept_all": "Accept every marked or filtered session with one rationale",
    "reject": "Discard the session's candidate",
    "rerecord": "Run this step's tool live; the result becomes a pending change",
    "expire": "Mark this entry expired so the next fill re-records it",
    "expire_all": "Expire every time-sensitive entry of the session",
    "replay": "Run tapes.toml's replay_command for this session and watch it live",
    "follow": "Follow the newest run-log event",
    "undo": "Undo the last accept, reject or expire of this sitting",
    "filter": "Filter sessions by tool, status or text",
    "next_review": "Go to the next item that needs review",
    "prev_review": "Go to the previous item that needs review",
    "help": "Show every key and what the status glyphs mean",
    "toggle_unified": "Show the diff side by side or unified",
    "next_change": "Scroll the diff to the next change",
    "prev_change": "Scroll the diff to the previous change",
    "mark": "Mark or unmark the session; A accepts every marked one",
}


TAIL_LINES = 8  # lines of a failed replay's output kept in its message
TAIL_LINE_CHARS = 200


def failure_tail(stdout: str, stderr: str) -> str:
    """What a failed command said last, as text safe for the terminal: the last meaningful lines of its
    stderr (else stdout), extended back to the line that starts the message they belong to (an indented
    line continues the one above it, as a drift report or a traceback's frames do), at most TAIL_LINES
    lines of TAIL_LINE_CHARS characters. Rules (====, ----) and blank lines are left out."""
    text = stderr if stderr.strip() else stdout
    lines = [ln.rstrip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln.strip() and not set(ln.strip()) <= set("=-_*~#")]
    if not lines:
        return "(no output)"
    start = max(0, len(lines) - 4)
    while start > 0 and lines[start][:1].isspace() and len(lines) - start < TAIL_LINES:
        start -= 1  # the message this indented line belongs to
    kept = lines[max(start, len(lines) - TAIL_LINES) :]
    return "\n".join(
        safe_text(ln if len(ln) <= TAIL_LINE_CHARS else ln[:TAIL_LINE_CHARS] + "…", newlines=False) for ln in kept
    )


def _events(s: Session) -> list[dict[str, Any]]:
    from tapetui.core.runlog import read_run_log

    return read_run_log(runlog_path(s.golden))


def _event_line(ev: dict[str, Any]) -> str:
    kind = str(ev.get("event"))
    seq = ev.get("seq")
    tool = ev.get("tool", "")
    extra = ""
    if kind == "drift":
        extra = "  " + "; ".join(f"{c[0]}: {c[1]!r} → {c[2]!r}" for c in ev.get("changes") or [])[:200]
    elif kind == "miss":
        extra = f"  nearest step {ev.get('nearest')}" if ev.get("nearest") else "  not on tape"
    elif kind == "fingerprint":
        extra = f"  {ev.get('recorded')} → {ev.get('live')}"
    elif kind == "end":
        st = ev.get("stats") or {}
        extra = (
            f"  {st.get('tape_hits', 0)} hits, {st.get('tape_misses', 0)} misses, "
            f"{st.get('drift_events', 0)} drift, {st.get('unused', 0)} unused"
        )
    elif kind == "start":
        extra = f"  mode {ev.get('mode')}"
    head = f"{kind:<11}" + (f" step {seq:<4} {tool}" if seq is not None else "")
    return safe_text(head + extra, newlines=False)


def _current(golden: Path, summary: RunSummary) -> RunSummary:
    """``summary``, or an empty one marked ``outdated`` when its run played against an earlier golden.

    After an accept the old run's drift is history: the app then shows "last run predates the golden"
    (as ``tapetui check`` does), not the drift just accepted. Runs that do not name their golden are
    taken as they are (file times cannot tell: a fresh clone resets them).
    """
    if summary.golden_sha256 is None or summary.outdated or summary.running:
        return summary
    if summary.golden_sha256 == review.golden_sha256(golden):
        return summary
    fresh = StepSummary()
    fresh.golden_sha256, fresh.outdated, fresh.ended = summary.golden_sha256, True, True
    return fresh
