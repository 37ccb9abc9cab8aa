from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import tapetui

PKG = Path(tapetui.__file__).parent


def test_all_is_sorted_and_complete() -> None:
    assert list(tapetui.__all__) == sorted(tapetui.__all__)
    for name in tapetui.__all__:
        assert hasattr(tapetui, name), name
    for fixed in (
        "Tape",
        "ToolRegistry",
        "tool_fingerprint",
        "canon",
        "call_key",
        "TapeError",
        "TapeDrift",
        "TapeMiss",
        "ToolDriftError",
    ):
        assert fixed in tapetui.__all__
    for sub in (tapetui.TapeDrift, tapetui.TapeMiss, tapetui.ToolDriftError):
        assert issubclass(sub, tapetui.TapeError)


def test_core_never_imports_textual_or_watchfiles() -> None:
    for path in PKG.rglob("*.py"):
        if "tui" in path.relative_to(PKG).parts:
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            # cli.py starts the app with a lazy import inside a function: allowed, it is the entry point.
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for n in names:
                assert not n.startswith(("textual", "watchfiles")), f"{path}: imports {n}"
                if n.startswith("tapetui.tui"):
                    assert path.name == "cli.py" and node.col_offset > 0, f"{path}: imports {n}"


def test_importing_core_and_running_check_loads_no_textual() -> None:
    code = (
        "import sys, tapetui, tapetui.review, tapetui.cli, tapetui.sample_agent;"
        "print(any(m.startswith(('textual', 'watchfiles')) for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_python_dash_m_runs_the_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "tapetui", "check", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "--json" in out.stdout
