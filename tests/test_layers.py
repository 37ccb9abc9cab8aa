"""The package's layers, read from its source: no import circles, each layer imports only those below it.

    fronts (cli, tui, pytest_plugin, sample_agent, __main__)  ->  review  ->  core
    integrations                                               ->  review, core
    traces (OTLP import and export)                            ->  review, core

An import inside a function hides a circle from Python but not from this test; it is allowed only
to defer a heavy or optional dependency, and then says why in a comment on its line or the one above.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "tapetui"

# which layers each layer may import (its own included)
ALLOWED = {
    "core": {"core"},
    "review": {"review", "core"},
    "integrations": {"integrations", "review", "core"},
    "traces": {"traces", "review", "core"},
    "tui": {"tui", "review", "core"},
    "front": {"front", "api", "tui", "review", "core", "integrations", "traces"},  # api: tapetui.__version__
    "api": {"core", "review"},  # tapetui/__init__.py
}
# (multiprocessing and concurrent: check's process pool, which a check in one process never starts)
HEAVY_OR_OPTIONAL = (
    "textual",
    "watchfiles",
    "rich",
    "deepdiff",
    "pytest",
    "pydantic",
    "regex",
    "multiprocessing",
    "concurrent",
)


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "api"
    if parts[1] in ("core", "review", "integrations", "tui", "traces"):
        return parts[1]
    return "front"


def _target(module: str, node: ast.ImportFrom | ast.Import, is_package: bool) -> list[str]:
    """The absolute names one import statement brings in (submodules when `from pkg import mod`)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
        base = ".".join(anchor + ([base] if base else []))
    return [base] + [f"{base}.{a.name}" for a in node.names]


class _Imports(ast.NodeVisitor):
    def __init__(self) -> None:
        self.depth = 0
        self.type_only = 0
        self.found: list[tuple[ast.Import | ast.ImportFrom, bool, bool]] = []  # node, nested, type-only

    def _scope(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scope

    def visit_If(self, node: ast.If) -> None:
        guard = ast.unparse(node.test)
        checking = guard in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        self.type_only += checking
        for child in node.body:
            self.visit(child)
        self.type_only -= checking
        for child in node.orelse:
            self.visit(child)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.append((node, self.depth > 0, self.type_only > 0))

    visit_ImportFrom = visit_Import  # type: ignore[assignment]


def _scan() -> dict[str, tuple[Path, list[tuple[ast.Import | ast.ImportFrom, bool, bool]]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        v = _Imports()
        v.visit(ast.parse(path.read_text(), str(path)))
        out[_module_name(path)] = (path, v.found)
    return out


MODULES = _scan()


def _internal(name: str) -> str | None:
    """The tapetui module an imported name refers to (a module, or the module defining the name)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _edges(runtime_only: bool) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod, (path, found) in MODULES.items():
        for node, _nested, type_only in found:
            if runtime_only and type_only:
                continue
            for name in _target(mod, node, path.name == "__init__.py"):
                dep = _internal(name)
                if dep is not None and dep != mod and name.startswith("tapetui"):
                    graph[mod].add(dep)
    return graph


def test_the_scan_sees_the_package() -> None:
    """Guards the test itself: an empty or wrong scan would pass everything."""
    assert {"tapetui", "tapetui.cli", "tapetui.core.tape", "tapetui.review", "tapetui.tui.app"} <= set(MODULES)
    assert "tapetui.core.tape" in _edges(runtime_only=False)["tapetui"]  # the public face re-exports Tape
    graph = _edges(runtime_only=True)
    assert any(dep.startswith("tapetui.review") for dep in graph["tapetui.cli"])


def test_no_import_circles() -> None:
    """Tarjan's strongly connected components over every import, nested ones included."""
    graph = _edges(runtime_only=True)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                circles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    # a package's __init__ importing its own submodules is not a circle of ideas; anything else is
    real = [c for c in circles if not all(m.startswith(c[0] + ".") or m == c[0] for m in c)]
    assert real == [], "import circles: " + "; ".join(" <-> ".join(c) for c in real)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_those_below_it(layer: str) -> None:
    graph = _edges(runtime_only=False)
    wrong = sorted(
        f"{mod} imports {dep}"
        for mod, deps in graph.items()
        if _layer(mod) == layer
        for dep in deps
        if _layer(dep) not in ALLOWED[layer]
    )
    assert wrong == []


def test_imports_inside_functions_only_defer_a_heavy_or_optional_dependency() -> None:
    hidden = []
    for mod, (path, found) in MODULES.items():
        lines = path.read_text().splitlines()
        for node, nested, _type_only in found:
            if not nested:
                continue
            names = _target(mod, node, path.name == "__init__.py")
            deferring = all(
                n.split(".")[0] in HEAVY_OR_OPTIONAL
                or n.startswith(("tapetui.tui", "tapetui.integrations", "tapetui.traces"))
                or (_layer(mod) == "integrations" and not n.startswith("tapetui"))
                for n in names
                if n
            )
            said = "#" in lines[node.lineno - 1] or lines[node.lineno - 2].strip().startswith("#")
            if not (deferring and said):
                hidden.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert hidden == []


def test_the_engine_and_review_layers_never_import_a_screen() -> None:
    screens = ("textual", "watchfiles")
    wrong = [
        f"{mod}: {ast.unparse(node)}"
        for mod, (path, found) in MODULES.items()
        if _layer(mod) in ("core", "review", "api")
        for node, _n, _t in found
        for name in _target(mod, node, path.name == "__init__.py")
        if name.split(".")[0] in screens
    ]
    assert wrong == []


def test_only_the_otel_integration_imports_opentelemetry() -> None:
    """Import and export are JSON work: OpenTelemetry (the extra tapetui[otel]) is imported by
    tapetui.integrations.otel alone, so the core, review and traces run without it."""
    wrong = [
        f"{mod}: {ast.unparse(node)}"
        for mod, (path, found) in MODULES.items()
        if mod != "tapetui.integrations.otel"
        for node, _n, _t in found
        for name in _target(mod, node, path.name == "__init__.py")
        if name.split(".")[0] in ("opentelemetry", "google", "openinference")
    ]
    assert wrong == []


def test_no_package_attribute_hides_a_submodule() -> None:
    """`import tapetui.review.findings as m` must give the module: a function of the same name re-exported by
    the package would shadow it (and pytest's string monkeypatch targets with it)."""
    import importlib
    import types

    hidden = []
    for mod in MODULES:
        parent, _, leaf = mod.rpartition(".")
        if leaf == "__main__":
            continue  # importing it runs the command line
        if parent and not isinstance(getattr(importlib.import_module(parent), leaf, None), types.ModuleType):
            importlib.import_module(mod)
            if not isinstance(getattr(importlib.import_module(parent), leaf), types.ModuleType):
                hidden.append(mod)
    assert hidden == []


# The engine's house (docs/architecture.md): a unit that grows past these is split along its seams.
MAX_CORE_MODULE_LINES = 600
MAX_CORE_CLASS_LINES = 400
MAX_FUNCTION_LINES = 80  # in core and review


def _sizes() -> list[str]:
    over = []
    for path in sorted(PACKAGE.rglob("*.py")):
        layer = path.relative_to(PACKAGE).parts[0]
        if layer not in ("core", "review"):
            continue
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(PACKAGE.parent)
        if layer == "core" and len(text.splitlines()) > MAX_CORE_MODULE_LINES:
            over.append(f"{rel}: {len(text.splitlines())} lines (module)")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if isinstance(node, ast.ClassDef):
                if layer == "core" and lines > MAX_CORE_CLASS_LINES:
                    over.append(f"{rel}:{node.lineno}: class {node.name}: {lines} lines")
            elif lines > MAX_FUNCTION_LINES:
                over.append(f"{rel}:{node.lineno}: {node.name}(): {lines} lines")
    return over


def test_no_unit_of_the_engine_outgrows_its_size() -> None:
    """No module of tapetui/core over 600 lines, no class there over 400, no function in core or review over 80."""
    assert _sizes() == []


def test_the_size_rule_sees_an_oversized_unit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    core = tmp_path / "tapetui" / "core"
    core.mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    (core / "big.py").write_text(f"def f():\n{body}\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", tmp_path / "tapetui")
    assert _sizes() == [f"tapetui/core/big.py:1: f(): {MAX_FUNCTION_LINES + 2} lines"]
