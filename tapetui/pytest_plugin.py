"""pytest plugin: a ``tape`` fixture and ``--tape-mode=record|replay|fill``.

The tape of a test lives under the configured tapes folder at a path derived from
the test's node id (``tests/test_agent.py::test_x[a]`` → ``tests/test_agent/test_x-a.jsonl``).
The default mode is ``replay``, so CI never records. A failing call shows the drift
report (paths that changed, both values), not only an exception's repr.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tapetui.core.config import Config, find_config, load_config
from tapetui.core.errors import TapeError
from tapetui.core.tape import MODES, Tape
from tapetui.core.textsafe import safe_text

__all__ = ["tape_path_for"]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tapetui")
    group.addoption(
        "--tape-mode", choices=MODES, default=None, help="record | replay | fill (default: replay, so CI never records)"
    )
    group.addoption("--tape-dir", default=None, help="tapes folder (default: tapes.toml's, else ./tapes)")
    parser.addini("tape_mode", "default tape mode", default="replay")


def tape_path_for(nodeid: str, tapes_dir: Path) -> Path:
    """Where the tape of a test lives: its node id made into a safe relative path."""
    file_part, _, name = nodeid.partition("::")
    stem = Path(file_part).with_suffix("")
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", name.replace("::", "/")).strip("-") or "test"
    parts = [p for p in stem.parts if p not in ("..", ".", "/")]
    return Path(tapes_dir).joinpath(*parts, *clean.split("/")).with_suffix(".jsonl")


@pytest.fixture
def tape_config(request: pytest.FixtureRequest) -> Config:
    opt = request.config.getoption("--tape-dir")
    if opt:
        return Config.for_dir(Path(opt))
    found = find_config(request.config.rootpath)
    return load_config(found) if found else Config.for_dir(request.config.rootpath / "tapes")


@pytest.fixture
def tape_registry() -> Any:
    """Override in your conftest to return the ToolRegistry your agent uses."""
    return None


@pytest.fixture
def tape(request: pytest.FixtureRequest, tape_config: Config, tape_registry: Any) -> Iterator[Tape]:
    """A :class:`~tapetui.Tape` for this test, in the session's ``--tape-mode``."""
    mode = request.config.getoption("--tape-mode") or request.config.getini("tape_mode")
    path = tape_path_for(request.node.nodeid, tape_config.tapes_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = Tape(path, mode, tape_registry, config=tape_config)
    try:
        yield t
    finally:
        t.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and isinstance(call.excinfo.value, TapeError):
        # Show the readable drift report instead of the traceback's repr.
        # escaped again here: tool names, arguments and paths in it come from tapes and reach a terminal
        report.longrepr = "tapetui: " + safe_text(str(call.excinfo.value))
