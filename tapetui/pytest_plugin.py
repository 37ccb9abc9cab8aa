"""pytest plugin: a ``tape`` fixture and ``--tape-mode=record|replay|fill``.

The tape of a test lives under the configured tapes folder at a path derived from
the test's node id (``tests/test_agent.py::test_x[a]`` → ``tests/test_agent/test_x-a.jsonl``).
The default mode is ``replay``, so CI never records. ``@pytest.mark.tape(path=..., mode=...)``
overrides both for one test. A failing call shows the drift report (paths that changed, both
values), not only an exception's repr — also when the agent wrapped the ``TapeError`` (an
``ExceptionGroup`` member, or the cause or context of what the test raised).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tapetui.core.changes import show_redacted_by, shown_redactor
from tapetui.core.config import Config, find_config, load_config
from tapetui.core.current import use_tape
from tapetui.core.errors import TapeError
from tapetui.core.registry import ToolRegistry
from tapetui.core.runstart import GROUP_ENV, end_group
from tapetui.core.store import inside
from tapetui.core.tape import MODES, Tape
from tapetui.core.textsafe import inert_commands, safe_text

__all__ = ["tape_errors", "tape_path_for"]

_MARKER = (
    "tape(path=None, mode=None): this test's tape at `path` (relative to the tapes folder) and in `mode` "
    "(record | replay | fill), whatever --tape-mode says"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tapetui")
    group.addoption(
        "--tape-mode", choices=MODES, default=None, help="record | replay | fill (default: replay, so CI never records)"
    )
    group.addoption("--tape-dir", default=None, help="tapes folder (default: tapes.toml's, else ./tapes)")
    group.addoption(
        "--tape-live",
        default="",
        metavar="NAME,...",
        help="boundaries that run live in replay (tool names, and `model` for the model turns): a cut-point "
        "replay; each result is compared with the recording at its place",
    )
    group.addoption(
        "--tape-on-drift",
        choices=("raise", "live"),
        default="raise",
        help="live: in fill mode, run everything from the first drifted model turn on live into a candidate",
    )
    parser.addini("tape_mode", "default tape mode", default="replay")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER)
    # The session's runs are one group (tapetui.core.runstart): tests sharing a tape each leave their run in its
    # run log, so check judges every one, not the last. xdist's workers (and the processes the tests start)
    # inherit it, or take the run's id xdist gives each worker; one already set (a CI job grouping several pytest
    # runs) is kept. The run's id counts in a worker only: a pytest that a test starts inherits it too, and is a
    # test session of its own.
    if not os.environ.get(GROUP_ENV, "").strip():  # a blank one is none (as the run logs read it)
        worker = hasattr(config, "workerinput")
        group = (os.environ.get("PYTEST_XDIST_TESTRUNUID") if worker else None) or uuid.uuid4().hex
        os.environ[GROUP_ENV] = group
        config.stash[_SET_GROUP] = group


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(_SET_GROUP, None) is not None and os.environ.get(GROUP_ENV) == config.stash[_SET_GROUP]:
        # this session's tapes no longer run (tapetui.core.runstart): the next session's runs replace their logs. A
        # session inside another (pytest.main in a test) set no group of its own: the outer session's still runs
        end_group()
        del os.environ[GROUP_ENV]


_SET_GROUP = pytest.StashKey[str]()


def tape_path_for(nodeid: str, tapes_dir: Path) -> Path:
    """Where the tape of a test lives: its node id made into a safe relative path."""
    file_part, _, name = nodeid.partition("::")
    stem = Path(file_part).with_suffix("")
    clean = re.sub(r"[^A-Za-z0-9_.-]+", "-", name.replace("::", "/")).strip("-") or "test"
    parts = [p for p in stem.parts if p not in ("..", ".", "/")]
    return Path(tapes_dir).joinpath(*parts, *clean.split("/")).with_suffix(".jsonl")


@pytest.fixture
def tape_config(request: pytest.FixtureRequest) -> Iterator[Config]:
    opt = request.config.getoption("--tape-dir")
    if opt:
        cfg = Config.for_dir(Path(opt))
    else:
        found = find_config(request.config.rootpath)
        cfg = load_config(found) if found else Config.for_dir(request.config.rootpath / "tapes")
    before = shown_redactor()
    show_redacted_by(cfg.redactor())  # a drift's message shows the golden's values redacted by the project's rules
    yield cfg
    show_redacted_by(before)  # the next test's project may have other rules


@pytest.fixture
def tape_registry() -> ToolRegistry:
    """A fresh, empty :class:`~tapetui.ToolRegistry` for each test: register tools on it (the ``tape`` holds
    the same registry), or override this fixture in your conftest to return the one your agent uses."""
    return ToolRegistry()


def _marked(request: pytest.FixtureRequest, tapes_dir: Path) -> tuple[Path | None, str | None]:
    """``(path, mode)`` from the test's ``@pytest.mark.tape``, each None when not given."""
    marker = request.node.get_closest_marker("tape")
    if marker is None:
        return None, None
    test = request.node.nodeid
    unknown = sorted(set(marker.kwargs) - {"path", "mode"})
    if marker.args or unknown:
        given = ", ".join([*map(repr, marker.args), *unknown])
        pytest.fail(f"{test}: @pytest.mark.tape takes only path= and mode= (got {given})", pytrace=False)
    path, mode = marker.kwargs.get("path"), marker.kwargs.get("mode")
    if mode is not None and mode not in MODES:
        pytest.fail(
            f"{test}: @pytest.mark.tape(mode={mode!r}) is not a tape mode (one of: {', '.join(MODES)})", pytrace=False
        )
    if path is not None and not isinstance(path, (str, os.PathLike)):
        pytest.fail(
            f"{test}: @pytest.mark.tape(path=...) must be a str or a Path, not {type(path).__name__}", pytrace=False
        )
    if path is None:
        return None, mode
    try:
        where = inside(tapes_dir, path) if not Path(path).is_absolute() else None
    except (OSError, ValueError):
        where = None
    if where is None or where == Path(tapes_dir).resolve():
        pytest.fail(
            f"{test}: @pytest.mark.tape(path={os.fspath(path)!r}) must name a file inside the tapes folder "
            f"{tapes_dir} (a relative path, no '..' out of it)",
            pytrace=False,
        )
    return Path(tapes_dir, path), mode


@pytest.fixture
def tape(request: pytest.FixtureRequest, tape_config: Config, tape_registry: Any) -> Iterator[Tape]:
    """A :class:`~tapetui.Tape` for this test, in the session's ``--tape-mode`` (or its ``@pytest.mark.tape``'s),
    made the current tape (:func:`tapetui.use_tape`) for the test."""
    marked_path, marked_mode = _marked(request, tape_config.tapes_dir)
    mode = marked_mode or request.config.getoption("--tape-mode") or request.config.getini("tape_mode")
    path = marked_path or tape_path_for(request.node.nodeid, tape_config.tapes_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    live = [n.strip() for n in str(request.config.getoption("--tape-live") or "").split(",") if n.strip()]
    on_drift = request.config.getoption("--tape-on-drift") or "raise"
    t = Tape(path, mode, tape_registry, config=tape_config, live=live, on_drift=on_drift)
    try:
        with use_tape(t):  # the current tape: adapters given no tape (`taped(toolset)`) use it
            yield t
    finally:
        # what the test raised ends the run as `with Tape(...)` ends it: a recording cut short by a failure or an
        # interrupt is a run that ended with an error, which check reports (never a clean end over half a session)
        t.close(error=request.node.stash.get(_RAISED, None))


_RAISED = pytest.StashKey[BaseException]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, None]:
    """What the test's own body raised (an interrupt too, which makes no report), for its tape's end."""
    outcome = yield
    if outcome.excinfo is not None:
        item.stash[_RAISED] = outcome.excinfo[1]


def tape_errors(error: BaseException) -> list[TapeError]:
    """The ``TapeError``s in what a test raised: itself, the members of an ``ExceptionGroup`` (nested too) and
    the ``__cause__``/``__context__`` chain of each, in reading order, each once (a cycle ends the walk)."""
    found: list[TapeError] = []
    seen: set[int] = set()
    stack: list[BaseException] = [error]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, TapeError):
            found.append(e)
            continue
        linked: list[BaseException] = []
        if isinstance(e, BaseExceptionGroup):
            linked.extend(e.exceptions)
        linked.extend(x for x in (e.__cause__, e.__context__) if isinstance(x, BaseException))
        stack.extend(reversed(linked))
    return found


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, None]:
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is None:
        return
    error = call.excinfo.value
    # escaped again here: tool names, arguments and paths in it come from tapes (a tool name is the model's choice)
    # and reach a terminal or a CI job's log, where no line may be a workflow command (a tool named "x\n::error::…")
    if isinstance(error, TapeError):
        # Show the readable drift report instead of the traceback's repr.
        report.longrepr = "tapetui: " + inert_commands(safe_text(str(error)))
        return
    wrapped = tape_errors(error) if report.failed else []
    if not wrapped:
        return
    # The test's own traceback stays (it says how the agent failed); the drift report follows it.
    text = "\n\n".join("tapetui: " + inert_commands(safe_text(str(e))) for e in wrapped)
    if hasattr(report.longrepr, "addsection"):
        report.longrepr.addsection("tapetui (a TapeError inside what the test raised)", text)
    else:
        report.longrepr = f"{report.longrepr}\n\n{text}"
