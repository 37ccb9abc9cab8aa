"""Every fenced code block of README.md runs, or is parsed, as a newcomer would use it (issue 23).

Each block is a test whose id names its line and the heading it is under (``L83-in-your-code``):

- ``python``: run as a script in a fresh ``sys.executable``, in an empty temp folder (the cwd), with PYTHONPATH
  the repository root, stdin closed and a timeout. A block with a top-level ``def test_…`` is a test file: it
  runs under pytest with tapetui's plugin, ``--tape-mode=record``, then again in the default mode, replay. A
  block that imports a framework which is not installed is skipped, naming it.
- ``sh`` / ``bash`` / ``shell`` / ``console``: each command line runs, in order, with ``bash -e`` in a temp copy
  of the committed sample tapes and ``tapes.toml`` (the repository root a reader types them in). It passes on
  exit 0, or 1 for a command whose 1 means findings (``check``, ``diff``, ``mcp verify``), with no traceback.
  ``NOT_RUN`` lists the commands that cannot run in a test, each with why. No line starts with a ``$`` prompt.
- ``toml``: parsed with tomlkit and, unless its first line is a comment naming another file (``# pyproject.toml``),
  loaded as tapes.toml with ``config_from_text``, so a key tapes.toml does not have fails.
- ``yaml``: parsed with PyYAML (it comes with langchain-core, a test dependency); every ``tapetui …`` it runs
  parses with the CLI's grammar.
- no language, or ``text``: an output sample. When its first line is ``$ COMMAND``, the rest is what COMMAND
  prints in a copy of the committed samples, line for line; any other one is named in ``OUTPUTS``.

What a block needs that is not worth showing a reader goes in an HTML comment on the line right above its
fence (GitHub and PyPI do not show it); one or more of:

    <!-- readme-test: setup NAME -->   copy the files of tests/data/readme/NAME/ into the temp folder first.
                                       A file around.py among them is run instead of the block, with the block's text
                                       in place of its line ``# readme-block`` (indented as that line is): it
                                       defines the names a fragment takes as given, and calls what it defines.
    <!-- readme-test: after -->        first run the block above this one in the same temp folder.
    <!-- readme-test: skip REASON -->  not run: REASON says what it needs that a test cannot have.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import tomlkit

from tapetui.core.config import config_from_text
from tapetui.review.replay import record_command, replay_command

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SETUPS = ROOT / "tests" / "data" / "readme"
TIMEOUT = 120

SHELL = {"sh", "bash", "shell", "console"}
OUTPUT = {"", "text"}

# Commands a test cannot run (matched against each command line), and why. Everything else runs.
NOT_RUN = {
    r"pip install": "installs packages: needs the network (CI installs the same way before it runs this file)",
    r"^tapetui check --samples 5\b": "records 5 samples of each of the 8 sample sessions (40 record runs, ~40 s); "
    "tests/test_sample_compare.py runs check --samples 3 and the [SAMPLES] output sample below shows its report",
    r"\bnpx ": "npx fetches an npm package: needs Node and the network",
}
# Blocks over ~2 s whose promise another test guards too, by (language, heading): `-m "not slow"` leaves them out.
SLOW = {
    ("python", "pydantic-ai"): "examples/pydantic_ai_agent.py and tests/test_integration_pydantic_ai.py",
    ("python", "OpenAI Agents SDK"): "examples/openai_agents_tools.py and tests/test_integration_openai_agents.py",
    ("sh", "MCP"): "tests/test_integration_mcp.py runs mcp serve and mcp verify",
    ("python", "MCP"): "tests/test_integration_mcp.py",
    ("python", "LangChain"): "examples/langchain_tools.py and tests/test_integration_langchain.py",
    ("python", "pytest"): "tests/test_plugin.py runs the tape fixture in an inner pytest",
    ("sh", "Review workflow (headless, for CI and scripts)"): "tests/test_cli.py and tests/test_review_fronts.py",
    ("sh", "Traces in and out"): "tests/test_traces.py imports, compares, promotes and exports traces",
    ("python", "Traces in and out"): "tests/test_traces.py and tests/test_live_spans.py",
}
FINDINGS_EXIT_1 = re.compile(r"^tapetui (check|diff|mcp verify)\b")  # their exit 1 means "found something"
DIRECTIVE = re.compile(r"^<!--\s*readme-test:\s*(\w+)\s*(.*?)\s*-->\s*$")


@dataclass
class Block:
    line: int  # of its opening fence, 1-based
    lang: str
    heading: str
    text: str
    setup: str | None = None
    after: Block | None = None
    skip: str | None = None

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")
        return f"L{self.line}-{slug}"


def readme_blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    blocks: list[Block] = []
    heading = "(top)"
    i = 0
    while i < len(lines):
        line = lines[i]
        fence = re.match(r"^(`{3,})\s*([\w+-]*)", line)
        if fence is None:
            if re.match(r"^#{1,6} ", line):
                heading = line.lstrip("#").strip()
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith(fence.group(1))), None)
        assert end is not None, f"README.md:{i + 1}: a fence that is never closed"
        block = Block(line=i + 1, lang=fence.group(2).lower(), heading=heading, text="\n".join(lines[i + 1 : end]))
        j = i - 1
        while j >= 0 and (d := DIRECTIVE.match(lines[j])):
            key, value = d.groups()
            if key == "setup":
                block.setup = value
            elif key == "after":
                assert blocks, f"README.md:{i + 1}: 'after' with no block before it"
                block.after = blocks[-1]
            elif key == "skip":
                block.skip = value
            else:
                raise AssertionError(f"README.md:{j + 1}: unknown readme-test directive {key!r}")
            j -= 1
        blocks.append(block)
        i = end + 1
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


def of(langs: set[str]) -> list[Any]:
    return [
        pytest.param(
            b, id=b.id, marks=[pytest.mark.slow] if ("sh" if b.lang in SHELL else b.lang, b.heading) in SLOW else []
        )
        for b in BLOCKS
        if b.lang in langs
    ]


def child_env() -> dict[str, str]:
    """What a block's processes see: this checkout's tapetui, this interpreter's ``python`` and ``tapetui``
    first on PATH, no API key (a block that runs offline must not find one), no colours."""
    bin_dir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "OPENAI_"))}
    return {**env, "PYTHONPATH": str(ROOT), "PATH": bin_dir + os.pathsep + env.get("PATH", ""), "NO_COLOR": "1"}


def run(argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        cwd=cwd,
        env={**child_env(), **(env or {})},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=TIMEOUT,
    )


def said(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


# ---- python -----------------------------------------------------------------------------------------------
def setup_files(block: Block) -> list[Path]:
    if block.setup is None:
        return []
    folder = SETUPS / block.setup
    assert folder.is_dir(), f"{block.id}: no setup folder {folder}"
    return sorted(folder.iterdir())


def python_source(block: Block) -> str:
    """The block's text, inside its setup's around.py when it has one."""
    around = next((f for f in setup_files(block) if f.name == "around.py"), None)
    if around is None:
        return block.text + "\n"
    template = around.read_text(encoding="utf-8")
    at = re.search(r"^([ \t]*)# readme-block\n", template, re.M)
    assert at is not None, f"{around}: no line '# readme-block' to put the block at"
    indented = "".join(at.group(1) + ln if ln.strip() else ln for ln in (block.text + "\n").splitlines(True))
    return template[: at.start()] + indented + template[at.end() :]


def missing_imports(block: Block, source: str) -> list[str]:
    """Top-level modules the block imports that are not installed (the setup's own modules are there)."""
    local = {f.stem for f in setup_files(block)}
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return sorted(n for n in names - local if importlib.util.find_spec(n) is None)


def defined_tests(source: str) -> list[str]:
    tree = ast.parse(source)
    return [
        n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name[:5] == "test_"
    ]


def run_block(block: Block, folder: Path) -> None:
    """Run ``block`` (and first the one it comes after) in ``folder``; fail with what it said."""
    if block.after is not None:
        run_block(block.after, folder)
    if block.skip:
        pytest.skip(f"README.md:{block.line}: {block.skip}")
    for f in setup_files(block):
        if f.name == "around.py":
            continue
        (shutil.copytree if f.is_dir() else shutil.copy)(f, folder / f.name)
    if block.lang == "python":
        run_python(block, folder)
    elif block.lang in SHELL:
        run_shell(block, folder)
    else:
        raise AssertionError(f"{block.id}: a {block.lang!r} block cannot be run")


def run_python(block: Block, folder: Path) -> None:
    source = python_source(block)
    if missing := missing_imports(block, source):
        pytest.skip(f"README.md:{block.line} needs {', '.join(missing)}, which is not installed")
    if not defined_tests(source):
        script = folder / "readme_block.py"
        script.write_text(source, encoding="utf-8")
        done = run([sys.executable, script.name], folder)
        assert done.returncode == 0, said(done)
        return
    (folder / "test_readme_block.py").write_text(source, encoding="utf-8")
    # Only the plugin tapetui installs, loaded by name: the other plugins of this environment (loading them takes
    # seconds; pytest-asyncio warns when it is not configured) are not what the block shows.
    pytest_argv = [sys.executable, "-m", "pytest", "test_readme_block.py", "-p", "tapetui.pytest_plugin"]
    pytest_argv += ["-p", "no:cacheprovider", "-q"]
    for mode in ("--tape-mode=record", None):  # record, then replay (the default) what it recorded
        done = run(pytest_argv + ([mode] if mode else []), folder, {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
        assert done.returncode == 0, f"pytest {mode or '(replay)'}: {said(done)}"
        # each test's calls went through its tape (an adapter that bypassed it would replay "green" too)
        taped = [p for p in (folder / "tapes").rglob("*.jsonl") if '"type":"call"' in p.read_text(encoding="utf-8")]
        assert len(taped) >= len(defined_tests(source)), f"tapes with calls: {taped}\n{said(done)}"


@pytest.mark.parametrize("block", of({"python"}))
def test_python_block_runs(block: Block, tmp_path: Path) -> None:
    run_block(block, tmp_path)


# ---- shell ------------------------------------------------------------------------------------------------
def commands(block: Block) -> list[str]:
    return [ln.strip() for ln in block.text.splitlines() if ln.strip() and not ln.strip().startswith("#")]


def not_run(command: str) -> str | None:
    return next((why for pattern, why in NOT_RUN.items() if re.search(pattern, command)), None)


def run_shell(block: Block, folder: Path) -> None:
    ran = []
    for command in commands(block):
        assert not command.startswith("$"), f"README.md:{block.line}: {command!r} has a prompt: it cannot be pasted"
        if not_run(command):
            continue
        done = run(["bash", "-e", "-c", command], folder)
        ok = {0, 1} if FINDINGS_EXIT_1.match(command) else {0}
        assert done.returncode in ok and "Traceback" not in done.stderr, f"{command}\n{said(done)}"
        ran.append(command)
    if not ran:
        pytest.skip("; ".join(f"not run: {c[:50]}…: {not_run(c)}" for c in commands(block)))


@pytest.mark.parametrize("block", of(SHELL))
def test_shell_block_runs(block: Block, tmp_path: Path, sample_dir: Path) -> None:
    run_block(block, sample_dir if block.after is None else tmp_path)


def test_every_command_not_run_is_in_the_readme() -> None:
    """``NOT_RUN`` stays a short list of reasons that still apply."""
    shown = [c for b in BLOCKS if b.lang in SHELL for c in commands(b)]
    for pattern in NOT_RUN:
        assert any(re.search(pattern, c) for c in shown), f"NOT_RUN {pattern!r} matches no README command any more"


# ---- toml -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block", of({"toml"}))
def test_toml_block_loads(block: Block, tmp_path: Path) -> None:
    tomlkit.parse(block.text)
    named = re.match(r"#\s*(\S+\.toml)\b", block.text)
    if named and Path(named.group(1)).name != "tapes.toml":
        return  # another file's fragment: parsing it is all
    config = config_from_text(block.text, tmp_path / "tapes.toml")  # a key tapes.toml does not have fails
    golden = config.tapes_dir / "report.jsonl"
    if config.replay_command:  # a command shown is one tapetui runs (ConfigError when it is not the safe form)
        replay_command(config, golden)
    if config.record_command:
        record_command(config, golden)


# ---- yaml -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block", of({"yaml", "yml"}))
def test_yaml_block_parses(block: Block) -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML (installed with langchain-core, a test dependency)")
    from tapetui.cli import _commands
    from tapetui.cli_parser import parser

    doc = yaml.safe_load(block.text)
    assert isinstance(doc, dict) and doc.get("jobs"), f"{block.id}: not a GitHub workflow"
    runs = [step["run"] for job in doc["jobs"].values() for step in job["steps"] if "run" in step]
    assert runs, f"{block.id}: a workflow that runs nothing"
    grammar = parser(_commands())
    for command in runs:
        command = re.sub(r"\$\{\{[^}]*\}\}", "1", command)  # an Actions expression: substituted before any shell
        for part in re.split(r"&&|\|\||;|\n", command):
            argv = shlex.split(part, comments=True)
            cut = next((i for i, a in enumerate(argv) if a in (">", ">>", "2>", "|")), len(argv))  # a redirection
            argv = argv[:cut]
            if argv[:1] == ["tapetui"]:
                try:
                    grammar.parse_args(argv[1:])
                except SystemExit:  # argparse's exit 2: a command or option the CLI does not have
                    pytest.fail(f"{block.id}: the CLI does not take {part.strip()!r}")


# ---- output samples ---------------------------------------------------------------------------------------
def samples_output(block: Block, proj: Path) -> None:
    """What its prose says: ``check --samples 3`` of ``reviewed_answer`` from the committed samples (the other
    sessions left out: each would record 3 samples too). A sample's name is its time: any time matches."""
    for f in (proj / "sample_tapes").iterdir():
        if not f.name.startswith("reviewed_answer."):
            f.unlink()
    done = run(["tapetui", "check", "--samples", "3"], proj)
    assert done.returncode == 1, said(done)  # fewer samples match than required
    got = [ln.strip() for ln in done.stdout.splitlines()]
    when = r"\d{8}T\d{6}\.\d{6}Z"
    for line in block.text.splitlines():
        shown = when.join(map(re.escape, re.split(when, line.strip())))
        assert any(re.fullmatch(shown, g) for g in got), f"{line!r} is not in\n{done.stdout}"


def code_map(block: Block, proj: Path) -> None:
    """Every file and folder the code map names exists (``cli_parser.py`` on the ``tapetui/cli.py`` line is in
    ``tapetui/``)."""
    for path in re.findall(r"[\w/]+(?:\.py|/)", block.text):
        where = ROOT / path if path.startswith("tapetui/") else ROOT / "tapetui" / path
        assert where.exists(), f"the code map names {path}, which is not there"


# Output samples whose first line is not ``$ COMMAND``: the first line's start → what checks the sample.
OUTPUTS = {"[SAMPLES]": samples_output, "fronts ": code_map}
SLOW_OUTPUTS = {"[SAMPLES]"}  # 3 record runs; tests/test_sample_compare.py checks the same counts by --json


def output_params() -> list[Any]:
    params = []
    for b in BLOCKS:
        if b.lang in OUTPUT:
            slow = any(b.text.startswith(k) for k in SLOW_OUTPUTS)
            params.append(pytest.param(b, id=b.id, marks=[pytest.mark.slow] if slow else []))
    return params


@pytest.mark.parametrize("block", output_params())
def test_output_sample_is_what_the_code_prints(block: Block, sample_dir: Path) -> None:
    assert block.text.strip(), f"{block.id}: an empty block"
    first, _, shown = block.text.partition("\n")
    if first.startswith("$ "):
        done = run(["bash", "-e", "-c", first[2:]], sample_dir)
        assert done.returncode in {0, 1} and "Traceback" not in done.stderr, said(done)
        assert done.stdout.rstrip().splitlines() == shown.rstrip().splitlines()
        return
    check = next((f for k, f in OUTPUTS.items() if first.startswith(k)), None)
    assert check is not None, f"{block.id}: start it with '$ COMMAND', or name in OUTPUTS what prints it"
    check(block, sample_dir)


def test_every_block_is_tested() -> None:
    known = {"python", "toml", "yaml", "yml"} | SHELL | OUTPUT
    assert BLOCKS, "README.md has no code block"
    assert not [b.id for b in BLOCKS if b.lang not in known], f"a language this file does not test: {known}"
    unused = {d.name for d in SETUPS.iterdir()} - {b.setup for b in BLOCKS}
    assert not unused, f"tests/data/readme/ holds setups no README block names: {sorted(unused)}"


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    """`.ci/run` runs the README's second set-up command, as written: the quick and the slow step."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"```sh\n(python3 -m venv [^\n]*)\n```", readme)
    assert len(commands) == 2, "the README gives exactly two set-up commands"
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    assert ci == commands[1]
    assert '-m "not slow" -n auto' in ci and ci.endswith("python -m pytest -m slow")
