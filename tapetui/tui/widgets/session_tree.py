"""The session tree: folders → sessions → steps, children built only on expand."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tapetui.errors import TapeError
from tapetui.textsafe import safe_text
from tapetui.tui.model import GLYPH, Session

STEP_PAGE = 1000  # steps added per expand; a "more" node loads the next page


@dataclass
class FolderRef:
    path: Path


@dataclass
class StepRef:
    session: Session
    index: int  # call index in the tape
    seq: int
    tool: str


@dataclass
class MoreRef:
    session: Session
    start: int


NodeData = FolderRef | Session | StepRef | MoreRef | None


def session_label(s: Session) -> Text:
    t = Text()
    if s.marked:
        t.append("▣ ", "bold magenta")
    t.append(safe_text(s.name.rsplit("/", 1)[-1], newlines=False), "bold" if s.needs_review else "")
    if s.error:
        t.append("  ⚠ " + safe_text(s.error.split(": ", 1)[0].rsplit("/", 1)[-1], newlines=False), "bold red")
        return t
    sm = s.summary
    parts: list[tuple[str, str]] = []
    if sm.hits:
        parts.append((f"✓{sm.hits}", "green"))
    if sm.misses:
        parts.append((f"?{sm.misses}", "bold yellow"))
    if sm.drift:
        parts.append((f"≠{sm.drift}", "bold red"))
    if sm.stale:
        parts.append((f"⌛{sm.stale}", "yellow"))
    if sm.unused:
        parts.append((f"∅{sm.unused}", "dim"))
    if s.pending:
        parts.append(("● pending", "bold magenta"))
    if sm.running:
        parts.append(("▶ running", "bold cyan"))
    for text, style in parts:
        t.append("  ")
        t.append(text, style)
    return t


def step_label(s: Session, seq: int, tool: str, ms: float, has_error: bool) -> Text:
    status = s.summary.status.get(seq, "")
    if has_error and status in ("", "hit"):
        status = "error"
    style = {"hit": "green", "drift": "bold red", "miss": "bold yellow", "stale": "yellow", "unused": "dim",
             "contract": "bold red", "error": "red"}.get(status, "")
    t = Text()
    t.append(f"{seq:>4} ", "dim")
    t.append(GLYPH[status] + " ", style)
    t.append(safe_text(tool, newlines=False))
    t.append(f"  {ms:.1f} ms", "dim")
    return t


class SessionTree(Tree[NodeData]):
    """Sessions of the tapes folder. Step nodes are made when a session is expanded."""

    BINDINGS = [
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
    ]

    DEFAULT_CSS = """
    SessionTree { width: 1fr; }
    """

    def __init__(self, root_label: str, **kw: object) -> None:
        super().__init__(Text(safe_text(root_label, newlines=False)), data=None, **kw)  # type: ignore[arg-type]
        self.guide_depth = 3
        self.show_root = False
        self.session_nodes: dict[Path, TreeNode[NodeData]] = {}

    def populate(self, root_dir: Path, sessions: list[Session]) -> None:
        """(Re)build folders and session nodes; steps stay unbuilt until expanded."""
        expanded = {p for p, n in self.session_nodes.items() if n.is_expanded}
        cursor = self.cursor_node.data if self.cursor_node else None
        self.clear()
        self.session_nodes = {}
        folders: dict[Path, TreeNode[NodeData]] = {}
        for s in sessions:
            rel_parent = Path(s.name).parent
            parent = self.root
            acc = Path()
            for part in rel_parent.parts:
                acc = acc / part
                if acc not in folders:
                    folders[acc] = parent.add(Text("▸ " + safe_text(part, newlines=False), "bold blue"),
                                              data=FolderRef(root_dir / acc), expand=True)
                parent = folders[acc]
            node = parent.add(session_label(s), data=s, allow_expand=True)
            self.session_nodes[s.golden] = node
            if s.golden in expanded:
                node.expand()
        self.root.expand()
        if isinstance(cursor, Session) and cursor.golden in self.session_nodes:
            self.move_cursor(self.session_nodes[cursor.golden])

    def refresh_session(self, s: Session) -> None:
        node = self.session_nodes.get(s.golden)
        if node is None:
            return
        node.set_label(session_label(s))
        if node.is_expanded:
            self.build_steps(node, reload=True)

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
            idx = s.index()
        except TapeError as e:
            node.add_leaf(Text("⚠ " + safe_text(str(e), newlines=False), "bold red"), data=None)
            node.set_label(session_label(s))
            return
        errors = _error_lines(idx)
        end = min(len(idx), start + STEP_PAGE)
        for i in range(start, end):
            seq, tool = idx.seqs[i], idx.tools[i]
            node.add_leaf(step_label(s, seq, tool, idx.ms[i], i in errors), data=StepRef(s, i, seq, tool))
        if end < len(idx):
            node.add_leaf(Text(f"… {len(idx) - end:,} more steps (enter to load)", "italic"), data=MoreRef(s, end))

    def _on_tree_node_expanded(self, event: Tree.NodeExpanded[NodeData]) -> None:
        if isinstance(event.node.data, Session):
            self.build_steps(event.node)


def _error_lines(idx: object) -> set[int]:
    """Call indices whose line holds a recorded error (found without decoding every line)."""
    from tapetui.tapefile import TapeIndex

    assert isinstance(idx, TapeIndex)
    if len(idx) > 5000:
        return set()
    out = set()
    with open(idx.path, "rb") as fh:
        for i in range(len(idx)):
            fh.seek(idx.offsets[i])
            if b',"error":{' in fh.read(idx.lengths[i]):
                out.add(i)
    return out
