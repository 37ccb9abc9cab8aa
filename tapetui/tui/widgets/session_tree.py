"""The session tree: folders → sessions → steps, children built only on expand."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets._tree import TOGGLE_STYLE
from textual.widgets.tree import TreeNode

from tapetui.core.errors import TapeError
from tapetui.core.textsafe import safe_text
from tapetui.review.sessions import GLYPH, Session, TurnRow

STEP_PAGE = 1000  # steps added per expand; a "more" node loads the next page
SESSION_PAGE = 1000  # sessions added per folder expand; when a folder holds more, a "more" node pages on
EAGER = 1000  # with at most this many sessions every folder opens expanded; above it folders start closed
REVIEW_STATUSES = ("drift", "miss", "contract", "stale", "unused")  # a step with one of these needs review


@dataclass
class FolderRef:
    path: Path  # absolute
    rel: Path  # relative to the tapes folder ("." for the root)


@dataclass
class StepRef:
    session: Session
    index: int  # call index in the tape (-1 for a model turn)
    seq: int
    tool: str  # "model" for a model turn
    pos: int = -1  # where it is among the session's steps (calls and turns), as pages count them
    turn_row: TurnRow | None = None  # a model turn's row (None for a tool call)

    @property
    def turn(self) -> int | None:
        """A model turn's index among the tape's turns (0-based); None for a tool call."""
        return self.turn_row.turn if self.turn_row is not None else None


@dataclass
class MoreRef:
    """The next page of steps of ``session``, or of the entries of folder ``folder``."""

    session: Session | None
    start: int
    folder: Path | None = None


NodeData = FolderRef | Session | StepRef | MoreRef | None


_COUNT_ORDER = ("hit", "miss", "drift", "contract", "stale", "unused")
# a row that must be compact shows what asks for review first: a cut row loses ✓ and ∅ before ⚡ or ≠
_COMPACT_ORDER = ("contract", "drift", "miss", "stale", "unused", "hit")
_COUNT_STYLE = {
    "hit": "green",
    "miss": "bold yellow",
    "drift": "bold red",
    "contract": "bold red",
    "stale": "yellow",
    "unused": "dim",
    "error": "red",
}
MIN_NAME = 8  # cells of a session's name a compact row keeps before it cuts the name
WIDE_TREE = 48  # a tree narrower than this (80 columns: about 30) lays every session row out compact


def _mono(style: str, mono: bool) -> str:
    """Without colour (NO_COLOR) a marker that asks for review is bold at full contrast (a colour turned grey
    would be nearly invisible on the dark background: magenta and red are dark greys); a hit (green) and an
    unused step (dim) are plain, so that bold still tells what to look at."""
    if not mono or not style:
        return style
    return "" if style in ("dim", "green") else "bold"


def session_label(s: Session, width: int | None = None, *, mono: bool = False, compact: bool = False) -> Text:
    """The session's row: name, step counts, ``● pending``, ``▶ running``, ``⟲ rerun``.

    Given the ``width`` the row has, a label that does not fit is made compact, always in the same layout: the
    name, the states as glyphs (``●`` ``▶`` ``⟲``), then the counts, what needs review first (``⚡ ≠ ? ⌛`` before
    ``∅ ✓``); the name is cut (to :data:`MIN_NAME` cells) before a state or a review count is, and what still
    does not fit ends in an ellipsis; a state keeps its word (``⟲ rerun``) where the whole name fits beside
    it. ``compact``: that layout whether or not the full one fits (a narrow tree lays every row out alike).
    ``mono``: no colour (markers bold instead).
    """
    full = _session_label(s, mono)
    if not compact and (width is None or width <= 0 or full.cell_len <= width):
        return full
    name = _name_text(s, mono)
    tail = _compact_tail(s, mono, words=2)
    if width is None or width <= 0:
        return Text.assemble(name, tail)
    for words in (1, 0):  # the word of ● pending goes first (the tree's most common glyph), then the others
        if name.cell_len + tail.cell_len <= width:
            break
        tail = _compact_tail(s, mono, words=words)
    room = max(MIN_NAME, width - tail.cell_len)
    if name.cell_len > room:
        name.truncate(room, overflow="ellipsis")
    t = Text.assemble(name, tail)
    t.truncate(width, overflow="ellipsis")
    return t


def _name_text(s: Session, mono: bool) -> Text:
    t = Text()
    if s.marked:
        t.append(GLYPH["marked"] + " ", _mono("bold magenta", mono))
    t.append(safe_text(s.name.rsplit("/", 1)[-1], newlines=False), "bold" if s.needs_review else "")
    return t


def _state_parts(s: Session) -> list[tuple[str, str]]:
    parts = []
    if s.pending and not s.error:
        parts.append((GLYPH["pending"] + " pending", "bold magenta"))
    if s.summary.running and not s.error:
        parts.append((GLYPH["running"] + " running", "bold cyan"))
    if s.summary.outdated and not s.error:
        parts.append((GLYPH["rerun"] + " rerun", "yellow"))  # the last run predates the golden
    return parts


def _count_parts(s: Session, order: tuple[str, ...], mono: bool) -> list[tuple[str, str]]:
    # steps per status, each step counted once (runlog.STATUS_PRECEDENCE): the counts add up to the steps
    counts = s.summary.counts()
    parts = [(f"{GLYPH[k]}{counts[k]}", _mono(_COUNT_STYLE[k], mono)) for k in order if counts.get(k)]
    if s.summary.off_tape:  # calls that match no recorded step: with the misses, where the order puts them
        at = len(parts)
        if order is _COMPACT_ORDER:
            at = sum(1 for k in order[: order.index("miss") + 1] if counts.get(k))
        parts.insert(at, (f"{GLYPH['miss']}+{s.summary.off_tape}", _mono("bold yellow", mono)))
    return parts


def _compact_tail(s: Session, mono: bool, *, words: int) -> Text:
    """The states and counts after a compact row's name; ``words``: 2 every state spelled out, 1 all but
    ``pending``, 0 glyphs only."""
    t = Text()
    if s.error:
        t.append(f" {GLYPH['unreadable']}", _mono("bold red", mono))
        return t
    for text, style in _state_parts(s):
        t.append(" ")
        spelled = words == 2 or (words == 1 and not text.endswith(" pending"))
        t.append(text if spelled else text.split(" ", 1)[0], _mono(style, mono))
    for text, style in _count_parts(s, _COMPACT_ORDER, mono):
        t.append(" ")
        t.append(text, style)
    return t


def _session_label(s: Session, mono: bool) -> Text:
    t = _name_text(s, mono)
    if s.error:
        t.append(
            f"  {GLYPH['unreadable']} " + safe_text(s.error.split(": ", 1)[0].rsplit("/", 1)[-1], newlines=False),
            _mono("bold red", mono),
        )
        return t
    parts = _count_parts(s, _COUNT_ORDER, mono) + [(x, _mono(style, mono)) for x, style in _state_parts(s)]
    for text, style in parts:
        t.append("  ")
        t.append(text, style)
    return t


def step_label(s: Session, seq: int, tool: str, ms: float, has_error: bool, *, mono: bool = False) -> Text:
    status = s.summary.status.get(seq, "")
    if has_error and status in ("", "hit"):
        status = "error"
    t = Text()
    t.append(f"{seq:>4} ", "dim")
    t.append(GLYPH[status] + " ", _mono(_COUNT_STYLE.get(status, ""), mono))
    t.append(safe_text(tool, newlines=False))
    t.append(f"  {ms:.1f} ms", "dim")
    return t


def _short_model(model: str) -> str:
    """``gpt-4o`` of ``openai:gpt-4o``: what a narrow row keeps of a model's name."""
    return model.rpartition(":")[2] or model


def turn_label(s: Session, row: TurnRow, width: int | None = None, *, mono: bool = False) -> Text:
    """A model turn's row: its step and status (as a call's), ``◆``, the model, its tokens and the tools it asked
    for: ``   1 ✓ ◆ openai:gpt-4o  110 tok → search``. Given the ``width`` the row has, a row that does not fit
    keeps the model's name without its provider and writes tokens as ``110t`` before anything is cut."""
    status = s.summary.status.get(row.seq, "")
    if row.error and status in ("", "hit"):
        status = "error"
    head = Text()
    head.append(f"{row.seq:>4} ", "dim")
    head.append(GLYPH[status] + " ", _mono(_COUNT_STYLE.get(status, ""), mono))
    head.append(GLYPH["turn"] + " ", "" if mono else "bold cyan")
    model = safe_text(row.model, newlines=False)
    tools = [safe_text(name, newlines=False) for name in row.requested]
    if row.error:  # no response: the model call raised
        tok, short_tok, to, short_to = "  error", " error", "", ""
    else:
        tok = f"  {row.tokens:,} tok" if row.has_usage else ""
        short_tok = f" {row.tokens}t" if row.has_usage else ""
        to = f" → {', '.join(tools)}" if tools else ""
        short_to = f"→{','.join(tools)}" if tools else ""
    layouts = [(model, tok, to), (_short_model(model), tok, to), (_short_model(model), short_tok, short_to)]
    for name, tok, to in layouts:
        t = head.copy()
        t.append(name)
        t.append(tok, "dim")
        t.append(to)
        if width is None or width <= 0 or t.cell_len <= width:
            return t
    # still too wide: the model's name is cut (to MIN_NAME cells at least) so that its tokens stay in view
    assert width is not None
    name_text = Text(_short_model(model))
    room = max(MIN_NAME, width - head.cell_len - len(short_tok) - (2 if short_to else 0))  # and "→…" after them
    if name_text.cell_len > room:
        name_text.truncate(room, overflow="ellipsis")
    return Text.assemble(head, name_text, (short_tok, "dim"), short_to)


class SessionTree(Tree[NodeData]):
    """Sessions of the tapes folder. Step nodes are made when a session is expanded."""

    @property
    def mono(self) -> bool:
        """The app runs without colour (NO_COLOR): markers are bold instead of coloured."""
        return self.is_attached and bool(getattr(self.app, "no_color", False))

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        # Tree binds space to expand/collapse (enter does that too); here it marks the session, as the footer
        # and help say: a focused widget's binding wins over the app's, so it is bound here.
        Binding("space", "app.mark", "Mark session", show=False),
    ]

    DEFAULT_CSS = """
    SessionTree { width: 1fr; }
    """

    def __init__(self, root_label: str, **kw: object) -> None:
        super().__init__(Text(safe_text(root_label, newlines=False)), data=None, **kw)  # type: ignore[arg-type]
        self.guide_depth = 3
        self.show_root = False
        self.session_nodes: dict[Path, TreeNode[NodeData]] = {}
        self.folder_nodes: dict[Path, TreeNode[NodeData]] = {}
        self._entries: dict[Path, list[Path | Session]] = {Path(): []}  # folder → sub-folders and sessions
        self._folder_of: dict[Path, Path] = {}  # golden → its folder
        self._root_dir = Path()

    def populate(self, root_dir: Path, sessions: list[Session]) -> None:
        """(Re)build the tree. Only what is open gets nodes: a folder's entries are added when it is
        expanded (pages of SESSION_PAGE), a session's steps likewise (pages of STEP_PAGE)."""
        expanded = {p for p, n in self.session_nodes.items() if n.is_expanded}
        open_folders = {p for p, n in self.folder_nodes.items() if n.is_expanded and n is not self.root}
        cursor = self.cursor_node.data if self.cursor_node else None
        self.clear()
        self._root_dir = root_dir
        self.session_nodes = {}
        self.folder_nodes = {Path(): self.root}
        self._entries = {Path(): []}
        self._folder_of = {}
        keys: dict[str, Path] = {"": Path()}
        for s in sessions:
            folder = s.name.rpartition("/")[0]
            acc = keys.get(folder)
            if acc is None:
                acc = Path()
                for part in folder.split("/"):
                    nxt = acc / part
                    if nxt not in self._entries:
                        self._entries[nxt] = []
                        self._entries[acc].append(nxt)
                    acc = nxt
                keys[folder] = acc
            self._entries[acc].append(s)
            self._folder_of[s.golden] = acc
        # a small tree opens whole; a big one keeps closed what was closed (all of it, the first time)
        self._fill(Path(), 0, None if len(sessions) <= EAGER else open_folders, expanded)
        self.root.expand()
        if isinstance(cursor, Session) and cursor.golden in self._folder_of:
            self.go_to(self.reveal(cursor))
        elif isinstance(cursor, StepRef) and cursor.session.golden in self._folder_of:
            self.go_to(self.reveal(cursor.session))  # its steps are rebuilt on expand: the session keeps the cursor
        elif isinstance(cursor, FolderRef) and cursor.rel in self.folder_nodes:
            self.go_to(self.folder_nodes[cursor.rel])

    def _fill(
        self, rel: Path, start: int, open_folders: set[Path] | None, expanded: frozenset[Path] | set[Path] = frozenset()
    ) -> None:
        """Add entries ``start…start+SESSION_PAGE`` of folder ``rel``; open_folders None opens every folder."""
        node = self.folder_nodes[rel]
        for child in list(node.children):
            if isinstance(child.data, MoreRef):
                child.remove()
        entries = self._entries[rel]
        end = min(len(entries), start + SESSION_PAGE)
        for e in entries[start:end]:
            if isinstance(e, Path):
                sub = node.add(Text(), data=FolderRef(self._root_dir / e, e), allow_expand=True)
                self.folder_nodes[e] = sub
                self._folder_label(e)
                if open_folders is None or e in open_folders:
                    self._fill(e, 0, open_folders, expanded)
                    sub.expand()
            else:
                sn = node.add(session_label(e, mono=self.mono), data=e, allow_expand=True)
                self.session_nodes[e.golden] = sn
                if e.golden in expanded:
                    sn.expand()
        if end < len(entries):
            node.add_leaf(
                Text(f"… {len(entries) - end:,} more (enter to load)", "italic"), data=MoreRef(None, end, rel)
            )

    def _folder_label(self, rel: Path) -> None:
        sessions = self.sessions_under(rel)
        review = sum(1 for s in sessions if s.needs_review)
        t = Text()
        t.append(safe_text(rel.name, newlines=False), "bold blue")
        t.append(f"  {len(sessions):,} session{'s' * (len(sessions) != 1)}", "dim")
        if review:
            t.append(f"  {review:,} to review", "bold red")
        self.folder_nodes[rel].set_label(t)

    def sessions_under(self, rel: Path) -> list[Session]:
        """Every session in folder ``rel`` and below, built or not."""
        out: list[Session] = []
        for e in self._entries.get(rel, ()):
            if isinstance(e, Path):
                out += self.sessions_under(e)
            else:
                out.append(e)
        return out

    def go_to(self, node: TreeNode[NodeData]) -> None:
        """Put the cursor on ``node`` and scroll to it, also when it was added a moment ago."""
        _ = self._tree_lines  # nodes just added have no line number until the lines are rebuilt
        self.move_cursor(node)
        self.scroll_to_node(node, animate=False)

    def node_at_cursor(self) -> TreeNode[NodeData] | None:
        """The node on the cursor's line as the tree is now (``cursor_node`` lags behind a rebuild)."""
        lines = self._tree_lines
        return lines[self.cursor_line].node if 0 <= self.cursor_line < len(lines) else None

    def shows(self, s: Session) -> bool:
        """Whether ``s`` is in the tree (built or not yet), i.e. not filtered out."""
        return s.golden in self._folder_of

    def follow_step(self, s: Session, events: list[dict[str, Any]]) -> None:
        """F (follow): the cursor on the newest step of ``s`` its run-log ``events`` name, while ``s`` is shown."""
        seqs = [e.get("step", e.get("seq")) for e in events if isinstance(e.get("seq"), int)]
        if not seqs or not self.shows(s):
            return
        node = self.reveal(s)
        node.expand()
        self.build_steps(node)
        for child in node.children:
            if isinstance(child.data, StepRef) and child.data.seq == seqs[-1]:
                self.go_to(child)
                break

    def reveal(self, s: Session) -> TreeNode[NodeData]:
        """The node of session ``s``, opening its folders and loading pages until it exists."""
        node = self.session_nodes.get(s.golden)
        if node is not None:
            return node
        rel = self._folder_of[s.golden]
        chain = [rel, *rel.parents][:-1][::-1]  # outermost first, without the root
        for f in chain:
            if f not in self.folder_nodes:  # a page of the parent must be loaded first
                self._load_until(f.parent, f)
            fn = self.folder_nodes[f]
            if not fn.is_expanded:
                fn.expand()
            if not fn.children:
                self._fill(f, 0, set())
        self._load_until(rel, s)
        return self.session_nodes[s.golden]

    def _load_until(self, rel: Path, entry: Path | Session) -> None:
        """Load pages of folder ``rel`` until ``entry`` has its node."""
        pos = next(i for i, e in enumerate(self._entries[rel]) if e is entry or (isinstance(e, Path) and e == entry))
        node = self.folder_nodes[rel]
        while pos >= (loaded := sum(1 for c in node.children if not isinstance(c.data, MoreRef))):
            self._fill(rel, loaded, set())

    def first_session(self, data: NodeData) -> Session | None:
        """The first session at or below a folder node or a folder's "more" node."""
        if isinstance(data, FolderRef):
            entries, start = self._entries.get(data.rel, []), 0
        elif isinstance(data, MoreRef) and data.folder is not None:
            entries, start = self._entries.get(data.folder, []), data.start
        else:
            return None
        for e in entries[start:]:
            found = self.first_session(FolderRef(self._root_dir / e, e)) if isinstance(e, Path) else e
            if found is not None:
                return found
        return None

    def load_more(self, more: MoreRef, node: TreeNode[NodeData]) -> None:
        if more.folder is not None:
            self._fill(more.folder, more.start, set())
        elif more.session is not None and node.parent is not None:
            self.build_steps(node.parent, start=more.start)

    def refresh_session(self, s: Session) -> None:
        node = self.session_nodes.get(s.golden)
        if node is None:
            return
        node.set_label(session_label(s, mono=self.mono))
        if node.is_expanded:
            self.build_steps(node, reload=True)

    def refresh_folders(self, sessions: list[Session]) -> None:
        """Recount the labels of the folders holding ``sessions`` (and their parents)."""
        touched: set[Path] = set()
        for s in sessions:
            rel = self._folder_of.get(s.golden)
            while rel is not None and rel != Path() and rel not in touched:
                touched.add(rel)
                rel = rel.parent
        for rel in touched:
            if rel in self.folder_nodes:
                self._folder_label(rel)

    def build_steps(self, node: TreeNode[NodeData], reload: bool = False, start: int = 0) -> None:
        s = node.data
        assert isinstance(s, Session)
        if node.children and not reload and start == 0:
            return
        if start == 0:
            node.remove_children()
        else:
            for child in list(node.children):
                if isinstance(child.data, MoreRef):
                    child.remove()
        try:
            rows = s.steps(start, start + STEP_PAGE)
            total = s.step_count()  # calls and model turns
        except TapeError as e:
            node.add_leaf(Text("⚠ " + safe_text(str(e), newlines=False), "bold red"), data=None)
            node.set_label(session_label(s, mono=self.mono))
            return
        for pos, row in enumerate(rows, start):
            if isinstance(row, TurnRow):
                node.add_leaf(
                    turn_label(s, row, mono=self.mono),
                    data=StepRef(s, -1, row.seq, row.tool, pos, turn_row=row),
                )
                continue
            node.add_leaf(
                step_label(s, row.seq, row.tool, row.ms, row.error, mono=self.mono),
                data=StepRef(s, row.index, row.seq, row.tool, pos),
            )
        end = start + len(rows)
        if end < total:
            node.add_leaf(Text(f"… {total - end:,} more steps (enter to load)", "italic"), data=MoreRef(s, end))

    # ---- moving to what needs review ----------------------------------------------------------------
    def review_targets(self, shown: list[Session]) -> list[tuple[tuple[int, int], Session, TreeNode[NodeData] | None]]:
        """What needs review, in screen order: sessions (built or not) and the steps of open sessions."""
        out: list[tuple[tuple[int, int], Session, TreeNode[NodeData] | None]] = []
        for i, s in enumerate(shown):
            if s.needs_review:
                out.append(((i, -1), s, None))
            node = self.session_nodes.get(s.golden)
            if node is not None and node.is_expanded:
                out += [
                    ((i, c.data.pos), s, c)
                    for c in node.children
                    if isinstance(c.data, StepRef) and s.summary.status.get(c.data.seq) in REVIEW_STATUSES
                ]
        return out

    def cursor_key(self, shown: list[Session]) -> tuple[int, int]:
        """Where the cursor is, in the order of review_targets."""
        pos = {s.golden: i for i, s in enumerate(shown)}
        node = self.cursor_node
        data = node.data if node is not None else None
        if isinstance(data, StepRef):
            return pos.get(data.session.golden, -1), data.pos
        if isinstance(data, Session):
            return pos.get(data.golden, -1), -1
        if isinstance(data, MoreRef) and data.session is not None:
            return pos.get(data.session.golden, -1), data.start
        first = self.first_session(data)
        return (pos[first.golden] - 1, 1 << 62) if first is not None and first.golden in pos else (-1, 0)

    def jump_to_review(self, shown: list[Session], step: int, *, skip: Collection[Path] = ()) -> bool:
        """Move the cursor to the next (step > 0) or previous item that needs review, wrapping around;
        False when nothing does. ``shown``: the sessions in the tree, in order; ``skip``: goldens of sessions
        passed by (``s``)."""
        targets = [t for t in self.review_targets(shown) if t[1].golden not in skip]
        if not targets:
            return False
        cur = self.cursor_key(shown)
        if step > 0:
            target = next((t for t in targets if t[0] > cur), targets[0])
        else:
            target = next((t for t in reversed(targets) if t[0] < cur), targets[-1])
        self.go_to(target[2] or self.reveal(target[1]))
        return True

    def _room(self, node: TreeNode[NodeData], width: int) -> int:
        """The cells a node's label has in a tree ``width`` wide: what its depth's guides and its toggle leave."""
        depth = 0
        parent = node.parent
        while parent is not None and parent is not self.root:
            depth += 1
            parent = parent.parent
        return width - depth * self.guide_depth - (len(self.ICON_NODE) if node.allow_expand else 0)

    def process_label(self, label: str | Text) -> Text:
        """Our rows are one line already (made with ``newlines=False``): Rich's split, which Textual runs on every
        label added, is skipped for them (an eighth of adding a page of 1,000 rows)."""
        if isinstance(label, Text) and "\n" not in label.plain:
            return label
        return super().process_label(label)

    def get_label_width(self, node: TreeNode[NodeData]) -> int:
        """The width :meth:`render_label` gives a row, at most: the label, or the room it has when it is cut to
        fit. Textual asks it of every row to size the tree; rendering each (a fitted turn row is made anew) is
        most of laying out a page of 1,000 rows."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return super().get_label_width(node)
        toggle = len(self.ICON_NODE) if node.allow_expand else 0
        return toggle + min(node._label.cell_len, max(self._room(node, width), 1))

    def render_label(self, node: TreeNode[NodeData], base_style: Style, style: Style) -> Text:
        """A row cut to the tree's width ends in an ellipsis; a session's row is made compact first, so
        that its state (``● pending``) is never the part cut off."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return super().render_label(node, base_style, style)
        avail = self._room(node, width)
        label = node._label
        narrow = width < WIDE_TREE and isinstance(node.data, Session)  # every session row in the compact layout
        if label.cell_len <= avail and not narrow:
            return super().render_label(node, base_style, style)
        if isinstance(node.data, Session):
            fitted = session_label(node.data, avail, mono=self.mono, compact=narrow)
        elif isinstance(node.data, StepRef) and node.data.turn_row is not None:
            fitted = turn_label(node.data.session, node.data.turn_row, avail, mono=self.mono)
        else:
            fitted = label.copy()
        fitted.truncate(max(avail, 1), overflow="ellipsis")
        fitted.stylize(style)
        prefix = (
            ((self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE), base_style + TOGGLE_STYLE)
            if node.allow_expand
            else ("", base_style)
        )
        return Text.assemble(prefix, fitted)

    def _on_tree_node_expanded(self, event: Tree.NodeExpanded[NodeData]) -> None:
        data = event.node.data
        if isinstance(data, Session):
            self.build_steps(event.node)
        elif isinstance(data, FolderRef) and not event.node.children:
            self._fill(data.rel, 0, set())
