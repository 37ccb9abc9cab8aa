from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import tapetui
from tapetui import review
from tapetui.core.codecs import Unrecordable
from tapetui.core.comparators import TooLongToCompare

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


@pytest.mark.parametrize("module", [tapetui, review], ids=["tapetui", "tapetui.review"])
def test_all_names_exactly_what_the_module_imports(module: ModuleType) -> None:
    assert list(module.__all__) == sorted(module.__all__)
    for name in module.__all__:
        assert hasattr(module, name), name
    assert module.__file__ is not None
    tree = ast.parse(Path(module.__file__).read_text())
    # the names are imported on first use (PEP 562): for type checkers under TYPE_CHECKING, at run time by _WHERE
    checking = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    imported = {a.asname or a.name: n.module for n in checking.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert imported == module._WHERE
    assert set(imported) == set(module.__all__)


def test_importing_the_package_imports_nothing_it_exports() -> None:
    code = "import sys, tapetui, tapetui.review; print(sorted(m for m in sys.modules if m.startswith('tapetui.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['tapetui.core', 'tapetui.core.lazy', 'tapetui.review']"


def _engine_modules() -> list[ModuleType]:
    out = []
    for package in (tapetui.core, review):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            out.append(importlib.import_module(info.name))
    return out


def test_every_error_is_a_tape_error_and_the_ones_users_meet_are_exported() -> None:
    """Every error of the engine and the review layer is a TapeError, so ``except TapeError`` catches what
    tapetui raises; a class that was a TypeError or ValueError still is one too."""
    errors = [
        f"{m.__name__}.{name}"
        for m in _engine_modules()
        for name, obj in vars(m).items()
        if isinstance(obj, type)
        and issubclass(obj, BaseException)
        and not issubclass(obj, Warning)
        and obj.__module__ == m.__name__
        and not name.startswith("_")
        and not issubclass(obj, tapetui.TapeError)
    ]
    assert errors == []
    for name in tapetui.__all__ + review.__all__:
        obj = getattr(tapetui, name, None) or getattr(review, name)
        if isinstance(obj, type) and issubclass(obj, BaseException) and not issubclass(obj, Warning):
            assert issubclass(obj, tapetui.TapeError), name
    for name in ("ConfigError", "LockBusy", "TapeError", "TooDeep"):  # raised by Tape, load_config, review calls
        assert name in tapetui.__all__, name
    assert issubclass(Unrecordable, TypeError) and issubclass(TooLongToCompare, ValueError)


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


def test_mode_is_a_str_enum_that_still_takes_the_strings(tmp_path: Path) -> None:
    from tapetui import MODES, Mode, Tape, ToolRegistry

    assert MODES == ("record", "replay", "fill") and all(type(m) is str for m in MODES)
    assert [m.value for m in Mode] == list(MODES) and Mode.REPLAY == "replay"
    reg = ToolRegistry()
    reg.register(lambda x: x, name="echo")
    path = tmp_path / "s.jsonl"
    with Tape(path, Mode.RECORD, reg, run_log=False) as t:
        t.call("echo", {"x": 1})
    for mode in ("replay", Mode.REPLAY):
        with Tape(path, mode, reg, run_log=False) as t:
            assert t.call("echo", {"x": 1}) == 1
            assert t.mode == "replay" and type(t.stats()["mode"]) is str and t.stats()["mode"] == "replay"
    with pytest.raises(tapetui.InvalidValue) as e:
        Tape(path, "replya")
    assert isinstance(e.value, ValueError) and isinstance(e.value, tapetui.TapeError)
    assert "valid modes: record, replay, fill" in str(e.value)


def test_a_value_a_public_call_does_not_take_is_a_tape_error_and_what_it_was() -> None:
    with pytest.raises(tapetui.InvalidValue) as e:
        tapetui.canon({"a": object()})
    assert isinstance(e.value, TypeError)
    with pytest.raises(TypeError):  # an `except TypeError` written for the old error still catches it
        tapetui.canon([1, object()])
