from __future__ import annotations

import compileall
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tapetui import Config, ToolRegistry
from tapetui.core.runstart import GROUP_ENV
from tests import bytecode  # first loaded by -p (pyproject.toml); imported here where it was not

# Fuzzing budgets: CI runs a fixed, repeatable set; HYPOTHESIS_PROFILE=fuzz hunts longer with fresh inputs.
settings.register_profile("ci", max_examples=120, derandomize=True, database=None, deadline=None)
settings.register_profile("fuzz", max_examples=3000, database=None, deadline=None)
# the quick loop (`-m "not slow"`): the same fixed inputs, fewer of them (every @example still runs)
settings.register_profile("quick", max_examples=25, derandomize=True, database=None, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_configure(config: pytest.Config) -> None:
    """``-m "not slow"`` without HYPOTHESIS_PROFILE runs the "quick" budget; every other run the "ci" one.

    The package is compiled once, before any test (by the controller, not each xdist worker): hundreds of
    tests run ``tapetui`` in a child process, and where ``PYTHONDONTWRITEBYTECODE`` is set (as on these CI
    machines) each child would compile every module again, a third of a second each. Only the package is
    compiled: the modules tests write (and rewrite within a second, at the same size) are never cached.
    """
    if "HYPOTHESIS_PROFILE" not in os.environ and "not slow" in (config.getoption("markexpr") or ""):
        settings.load_profile("quick")
    if not hasattr(config, "workerinput"):
        compileall.compile_dir(ROOT / "tapetui", quiet=2)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Any:
    """While the tests are collected (in each xdist worker too), compiled modules are cached even where
    ``PYTHONDONTWRITEBYTECODE`` is set: each worker otherwise rewrites the asserts of every test module and
    compiles every module it imports again, some 7 s a worker. Only what collection imports is cached (the test
    modules, the package, their dependencies: files nobody changes during a run); writes are atomic, so workers
    collecting at once are safe. The tests then run with the setting as it was: a module a test writes is never
    cached (see :func:`pytest_configure`)."""
    sys.dont_write_bytecode = False  # so since tests.bytecode was loaded, before any other plugin
    try:
        yield
    finally:
        sys.dont_write_bytecode = bytecode.DONT_WRITE_BYTECODE


ROOT = Path(__file__).resolve().parent.parent


def tapetui_cli(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``tapetui ARGS`` as a person runs it, its exit code, stdout and stderr as a child process gives them, run in
    this process (the way click's ``CliRunner`` runs a command): ``tapetui.cli.main`` with that working folder,
    environment, no stdin and stdout/stderr that are no terminal. A child process costs half a second each
    (the interpreter, then importing deepdiff and pydantic again), and the quick loop runs this a hundred and
    fifty times. What only a process has (a signal, a hook that never returns, the entry point itself):
    :func:`tapetui_process`. A hang fails at pytest-timeout's limit, naming the test."""
    return _in_process(cwd, list(args), env or {})


def tapetui_process(
    cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``tapetui ARGS`` in a child process; a hang fails at the timeout instead of the suite."""
    return subprocess.run(
        [sys.executable, "-m", "tapetui", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
        stdin=subprocess.DEVNULL,
        timeout=timeout,
    )


def _in_process(cwd: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``main(args)`` with file descriptors 0, 1 and 2 on /dev/null and two temporary files, so what the commands it
    runs write (a replay command, a record command) is captured with its own output, in order, as a child's is."""
    from tapetui import cli

    saved = (os.getcwd(), dict(os.environ), sys.stdin, sys.stdout, sys.stderr, set(sys.modules))
    for s in (sys.stdout, sys.stderr):
        s.flush()
    fds = [os.dup(0), os.dup(1), os.dup(2)]
    code: int
    with open(os.devnull) as devnull, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            os.chdir(cwd)
            os.environ.update(env)
            for fd, f in ((0, devnull), (1, out), (2, err)):
                os.dup2(f.fileno(), fd)
            sys.stdin = devnull
            sys.stdout, sys.stderr = (
                io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8", write_through=True)
                for fd in (1, 2)
            )
            try:
                code = cli.main(args)
            except SystemExit as e:  # argparse: --help, a usage error
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            except Exception:  # what the interpreter would print before exiting 1
                import traceback

                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            for fd, copy in enumerate(fds):
                os.dup2(copy, fd)
                os.close(copy)
            cwd0, env0, sys.stdin, sys.stdout, sys.stderr, modules = saved
            os.chdir(cwd0)
            os.environ.clear()
            os.environ.update(env0)
            _forget_modules_imported_from_tests(modules)
        texts = []
        for f in (out, err):
            f.seek(0)
            texts.append(_universal(f.read().decode()))
    return subprocess.CompletedProcess(["tapetui", *args], code, texts[0], texts[1])


def _universal(text: str) -> str:
    """Newlines as ``text=True`` reads a child's output."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _forget_modules_imported_from_tests(before: set[str]) -> None:
    """A run imported a test's hook module (``module:function`` in its tapes.toml): forgotten, as a new process
    would not know it, so the next test's module of that name is imported afresh."""
    keep = (str(ROOT / "tapetui"), sys.prefix, sys.base_prefix)
    for name in set(sys.modules) - before:
        f = getattr(sys.modules[name], "__file__", None) or ""
        if f and not f.startswith(keep):
            del sys.modules[name]


@pytest.fixture(autouse=True, scope="session")
def _index_cache(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Tests (and the processes they start) keep index-cache entries in a temporary folder, not ~/.cache."""
    old = {k: os.environ.get(k) for k in ("TAPETUI_CACHE_DIR", "TAPETUI_STATE_DIR")}
    os.environ["TAPETUI_CACHE_DIR"] = str(tmp_path_factory.mktemp("index-cache"))
    os.environ["TAPETUI_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))  # parking tokens: never in ~
    yield
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(autouse=True)
def _runs_stand_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test's runs replace their run logs, as outside a test session: the plugin makes this test session a run
    group (tapetui.core.runstart), and a test of run groups sets TAPETUI_RUN_GROUP itself."""
    monkeypatch.delenv(GROUP_ENV, raising=False)


class Calls:
    """Counts how often each live tool really ran."""

    def __init__(self) -> None:
        self.n: dict[str, int] = {}

    def hit(self, name: str) -> None:
        self.n[name] = self.n.get(name, 0) + 1


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def registry(calls: Calls, tmp_path: Path) -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object", "properties": {"text": {"type": "string"}}}, version="1.0")
    def summarize(text: str, max_words: int = 120) -> dict[str, Any]:
        calls.hit("summarize")
        return {"summary": " ".join(text.split()[:max_words])}

    @reg.tool(schema={"type": "object"}, version="1.0")
    def search(query: str) -> list[str]:
        calls.hit("search")
        return [f"hit for {query}"]

    @reg.tool(schema={"type": "object"}, version="1.0", side_effect=True)
    def send_email(to: str, body: str) -> dict[str, Any]:
        calls.hit("send_email")
        with (tmp_path / "outbox.txt").open("a") as fh:
            fh.write(f"{to}: {body}\n")
        return {"sent": True}

    @reg.tool(schema={"type": "object"}, version="1.0", ttl=60)
    def quote(symbol: str) -> dict[str, Any]:
        calls.hit("quote")
        return {"symbol": symbol, "price": 1.5}

    @reg.tool(schema={"type": "object"}, version="1.0")
    def flaky(n: int) -> int:
        calls.hit("flaky")
        raise ValueError(f"upstream said no to {n}")

    return reg


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return Config.for_dir(tmp_path)


def committed_samples(root: Path, dest: Path) -> None:
    """Write the sample tapes and tapes.toml of ``root``'s last commit (``git archive HEAD``) into ``dest``.

    Never what the working tree holds now: following the README tour leaves a CHANGELOG.md, changed
    goldens and candidates there. Outside a git checkout the sample agent writes the tapes afresh.
    """
    dest.mkdir(parents=True, exist_ok=True)
    try:
        tar = subprocess.run(
            ["git", "-C", str(root), "archive", "--format=tar", "HEAD", "sample_tapes", "tapes.toml"],
            capture_output=True,
            check=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        from tapetui.sample_agent import regenerate

        regenerate(dest / "sample_tapes")
        shutil.copy(root / "tapes.toml", dest / "tapes.toml")
        return
    with tarfile.open(fileobj=io.BytesIO(tar)) as tf:
        tf.extractall(dest, filter="data")


def python_here(toml: Path) -> None:
    """Make the replay_command and record_command of the tapes.toml ``toml`` (a copy of the repository's: ``python
    -m tapetui.sample_agent …``) run the interpreter running the tests, whatever PATH holds (outside an activated
    venv there may be no ``python``, or another one without tapetui)."""
    import shlex

    import tomlkit

    doc = tomlkit.parse(toml.read_text(encoding="utf-8"))
    tapes: Any = doc["tapes"]
    for key in ("replay_command", "record_command"):
        command = str(tapes.get(key, ""))
        if command.startswith("python "):
            tapes[key] = shlex.quote(sys.executable) + command.removeprefix("python")
    toml.write_text(tomlkit.dumps(doc), encoding="utf-8")


@pytest.fixture(scope="session")
def _committed_samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("committed-samples")
    committed_samples(ROOT, d)
    return d


@pytest.fixture
def sample_dir(tmp_path: Path, _committed_samples: Path) -> Path:
    """A writable copy of the repository's committed sample tapes and a tapes.toml pointing at it."""
    d = tmp_path / "proj"
    shutil.copytree(_committed_samples, d)
    return d
