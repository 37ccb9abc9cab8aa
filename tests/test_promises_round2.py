"""Promises that hold, round 2: no shell ever parses a tape's name, every command tapetui runs has a time limit,
``check --samples`` parks the pending candidate where no command can delete it, what a command said is quoted
redacted and escaped, ``accept --all --rule`` writes its rule, ``use_tape`` shared by tasks, recorded errors whose
class would run code, and the accept modal's suggestion from raw tape text.

Each test failed before the change it guards; waits are on events (a FIFO read, a process exit), never on time.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import hashlib
import json
import os
import shlex
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

from tapetui import ConfigError, Tape, TapeError, ToolRegistry, load_config, review, use_tape
from tapetui.core.errors import TapeReplayedError
from tapetui.core.redact import Redactor
from tapetui.core.store import candidate_path, runlog_path, samples_of
from tests.conftest import ROOT, tapetui_cli, tapetui_process

SECRET_KEY = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z" * 2
BEARER = "Bearer " + "eyJhbGciOiJIUzI1NiJ9.abcdefghijklmnop.qrstuvwxyz012345"


def run(cwd: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess[str]:
    """``tapetui ARGS``; with a ``timeout``, in a process of its own (a command it runs that hangs or keeps its
    pipes open must not outlive it)."""
    if timeout is not None:
        return tapetui_process(cwd, *args, env={"NO_COLOR": "1"}, timeout=timeout)
    return tapetui_cli(cwd, *args, env={"NO_COLOR": "1"})


def set_tapes_key(proj: Path, key: str, value: str) -> None:
    """Replace (or add) ``[tapes] key = value`` in the project's tapes.toml; ``value`` is TOML as written."""
    toml = proj / "tapes.toml"
    lines = toml.read_text().splitlines()
    lines = [ln for ln in lines if not ln.startswith(f"{key} ")]
    at = lines.index("[tapes]") + 1
    lines.insert(at, f"{key} = {value}")
    toml.write_text("\n".join(lines) + "\n")


def script(proj: Path, name: str, body: str) -> str:
    """A Python script in the project folder; the command line that runs it (this interpreter, not PATH's)."""
    (proj / name).write_text(textwrap.dedent(body))
    return f"{sys.executable} {name}"


EVIL = "x$(touch PWNED)`touch PWNED2`;touch PWNED3"


@pytest.fixture
def evil_proj(sample_dir: Path) -> Path:
    """The samples, plus a session whose file name a shell would run commands from."""
    tapes = sample_dir / "sample_tapes"
    (tapes / f"{EVIL}.jsonl").write_bytes((tapes / "clean.jsonl").read_bytes())
    return sample_dir


def pwned(proj: Path) -> list[str]:
    return [p.name for p in proj.rglob("PWNED*")]


# ---- 1: commands from tapes.toml never parse a tape's name ------------------------------------------------
@pytest.mark.parametrize(
    "command",
    [
        "sh -c \"cat '{tape}'\"",  # the user quoted {tape} themselves: quoting it again cancels theirs
        "sh -c 'cat \"{tape}\"'",  # $(…) expands inside double quotes
        "timeout 30 sh -c 'cat {tape}'",  # a wrapper in front of the shell
        "bash -lc 'wc -c < {tape}'",
        "cat prefix{tape}",  # glued to other text
        "sh -c {tape}",  # the name as the script itself
        "timeout 30 bash -lc {tape}",
        "python3 -c {tape}",
        "env perl -e {tape}",
        # a second hostile pass: code after other options, behind wrappers, programs that run a shell themselves
        "sh -c -- {tape}",
        "bash -c -x {tape}",
        "bash -c -o posix {tape}",
        'env -S "sh -c" {tape}',
        "env --split-string={tape}",
        "script -q -c {tape} /dev/null",
        "watch -g -n 1 {tape}",
        "awk {tape}",
        "awk -f {tape}",
        "sh {tape}",  # the tape itself run as a script
        "{tape}",
        "timeout 30 {tape}",
        "python3 -c={tape}",
        "node -p {tape}",
        "ssh localhost cat {tape}",
    ],
)
def test_a_tape_name_inside_shell_text_is_refused_with_the_safe_form(command: str) -> None:
    """Both commands (the app's p and tapetui replay run replay_command, check --samples record_command) are
    made by the one function: refused before anything runs, with the safe form."""
    from dataclasses import replace

    cfg = load_config(ROOT / "tapes.toml")
    golden = cfg.tapes_dir / "clean.jsonl"
    for make, key in ((review.replay_command, "replay_command"), (review.record_command, "record_command")):
        with pytest.raises(ConfigError) as got:
            make(replace(cfg, **{key: command}), golden)
        assert "sh -c 'cat \"$TAPETUI_TAPE\"'" in str(got.value) and "tapes.toml" in str(got.value)


@pytest.mark.parametrize("command", ["sh -c \"cat '{tape}'\"", "timeout 30 sh -c 'cat {tape}'", "sh -c -- {tape}"])
@pytest.mark.slow
def test_the_refusal_from_the_command_line_runs_nothing(evil_proj: Path, command: str) -> None:
    set_tapes_key(evil_proj, "replay_command", json.dumps(command))
    r = run(evil_proj, "replay", EVIL)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    assert "sh -c 'cat \"$TAPETUI_TAPE\"'" in r.stderr and "tapes.toml" in r.stderr, r.stderr
    assert not pwned(evil_proj)
    set_tapes_key(evil_proj, "record_command", json.dumps(command))
    r = run(evil_proj, "check", "--samples", "1")
    assert r.returncode == 2 and "sh -c 'cat \"$TAPETUI_TAPE\"'" in r.stderr, (r.stdout, r.stderr)
    assert not pwned(evil_proj)


@pytest.mark.slow
def test_the_safe_forms_reach_the_command_as_one_argument(sample_dir: Path) -> None:
    out = sample_dir / "seen.txt"
    show = script(
        sample_dir,
        "show.py",
        """
        import os, sys, pathlib
        pathlib.Path("seen.txt").write_text(repr((sys.argv[1:], os.environ["TAPETUI_TAPE"])))
        """,
    )
    golden = str(load_config(sample_dir / "tapes.toml").tapes_dir / "clean.jsonl")
    for command, argv in (
        (f"{show} {{tape}}", [golden]),
        (f"{show} --tape={{tape}}", [f"--tape={golden}"]),
        (show, []),  # no {tape}: the environment has it
    ):
        set_tapes_key(sample_dir, "replay_command", json.dumps(command))
        r = run(sample_dir, "replay", "clean")
        assert r.returncode == 0, r.stderr
        assert out.read_text() == repr((argv, golden))
    # a shell script reads the name from the environment, quoted, or as a positional parameter
    for command in ("sh -c 'wc -c < \"$TAPETUI_TAPE\"'", "sh -c 'wc -c < \"$1\"' sh {tape}"):
        set_tapes_key(sample_dir, "replay_command", json.dumps(command))
        r = run(sample_dir, "replay", "clean")
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == str(Path(golden).stat().st_size)


@pytest.mark.parametrize("name", [EVIL, "x y", "a\nb", "-rf", "q'uote", "x\u202ey", "semi;colon", "team/$(id)"])
def test_a_tape_name_a_shell_would_act_on_never_reaches_a_command(sample_dir: Path, name: str) -> None:
    """Whatever the command does with it (a wrapper may hand it to a shell of its own: ssh, watch), a name the
    pull request chose is one plain word: one with a character a shell acts on is refused before anything runs."""
    tapes = sample_dir / "sample_tapes"
    target = tapes / f"{name}.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes((tapes / "clean.jsonl").read_bytes())
    set_tapes_key(
        sample_dir, "replay_command", json.dumps(script(sample_dir, "ran.py", "open('RAN', 'w')") + " {tape}")
    )
    r = run(sample_dir, "replay", str(target))
    assert r.returncode == 2 and "Rename the tape" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert not (sample_dir / "RAN").exists() and not pwned(sample_dir)


def test_the_repositorys_own_commands_are_accepted() -> None:
    cfg = load_config(ROOT / "tapes.toml")
    g = cfg.tapes_dir / "clean.jsonl"
    assert review.replay_command(cfg, g).argv[-3:] == (str(g), "--delay", "0.3")
    assert review.record_command(cfg, g).argv[-1] == str(g)


def test_refusal_is_a_config_error() -> None:
    cfg = load_config(ROOT / "tapes.toml")
    from dataclasses import replace

    bad = replace(cfg, replay_command="sh -c 'cat {tape}'")
    with pytest.raises(ConfigError, match="TAPETUI_TAPE"):
        review.replay_command(bad, cfg.tapes_dir / "clean.jsonl")


# ---- 10: every command has a time limit ----------------------------------------------------------------------
@pytest.mark.slow
def test_a_hanging_record_command_is_stopped_at_command_timeout(sample_dir: Path) -> None:
    hang = script(
        sample_dir,
        "hang.py",
        """
        import os, pathlib, time
        pathlib.Path("hang.pid").write_text(str(os.getpid()))
        time.sleep(3600)
        """,
    )
    set_tapes_key(sample_dir, "record_command", json.dumps(hang + " {tape}"))
    set_tapes_key(sample_dir, "command_timeout", '"1s"')
    r = run(sample_dir, "check", "--samples", "1", timeout=120)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "ran longer than 1s and was stopped" in r.stderr and "command_timeout" in r.stderr
    assert "Traceback" not in r.stderr
    pid = int((sample_dir / "hang.pid").read_text())
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def test_a_bad_command_timeout_names_the_file_and_key(sample_dir: Path) -> None:
    set_tapes_key(sample_dir, "command_timeout", '"forever"')
    r = run(sample_dir, "check")
    assert r.returncode == 2 and "tapes.command_timeout" in r.stderr and "Traceback" not in r.stderr


# ---- 11: the pending candidate is parked where no command can delete it --------------------------------------
PRUNER = """
import shutil, sys, pathlib
g = pathlib.Path(sys.argv[1])
shutil.rmtree(g.with_name(g.stem + ".samples"), ignore_errors=True)  # a record_command that prunes old samples
shutil.copy(g, g.with_name(g.stem + ".candidate.jsonl"))
"""


@pytest.mark.slow
def test_a_record_command_that_prunes_samples_cannot_delete_the_pending_candidate(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    golden = cfg.tapes_dir / "drift_summarize.jsonl"
    pending = candidate_path(golden).read_bytes()
    log = runlog_path(golden)
    log_before = log.read_bytes() if log.exists() else None
    set_tapes_key(sample_dir, "record_command", json.dumps(script(sample_dir, "prune.py", PRUNER) + " {tape}"))
    r = run(sample_dir, "check", "--samples", "2")
    assert "No such file" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert candidate_path(golden).read_bytes() == pending  # byte for byte
    assert (log.read_bytes() if log.exists() else None) == log_before
    assert not (cfg.tapes_dir / ".tapetui" / "parked").exists()


@pytest.mark.slow
def test_a_killed_check_samples_leaves_the_pending_candidate_for_recover(sample_dir: Path, tmp_path: Path) -> None:
    """SIGKILL while a sample records (the candidate parked): the next command puts it back byte for byte."""
    cfg = load_config(sample_dir / "tapes.toml")
    golden = cfg.tapes_dir / "drift_summarize.jsonl"
    pending = candidate_path(golden).read_bytes()
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    blocker = script(
        sample_dir,
        "block.py",
        f"""
        import os, shutil, sys, time, pathlib
        g = pathlib.Path(sys.argv[1])
        if g.name != "drift_summarize.jsonl":  # the other sessions record at once
            shutil.copy(g, g.with_name(g.stem + ".candidate.jsonl"))
            sys.exit(0)
        with open({str(fifo)!r}, "w") as fh:
            fh.write(str(os.getpid()) + "\\n")
        time.sleep(3600)
        """,
    )
    set_tapes_key(sample_dir, "record_command", json.dumps(blocker + " {tape}"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tapetui", "check", "--samples", "1"],
        cwd=sample_dir,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    try:
        with open(fifo) as fh:  # blocks until the record_command runs: the candidate is parked by then
            child = int(fh.readline())
        assert not candidate_path(golden).exists()
        parked = cfg.tapes_dir / ".tapetui" / "parked" / "drift_summarize" / "candidate.jsonl"
        assert parked.read_bytes() == pending
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        proc.kill()
        proc.wait(timeout=60)
        try:
            os.kill(child, signal.SIGKILL)
            psutil.Process(child).wait(timeout=60)
        except (ProcessLookupError, psutil.NoSuchProcess, UnboundLocalError):
            pass
    r = run(sample_dir, "recover")
    assert r.returncode == 0, r.stderr
    assert candidate_path(golden).read_bytes() == pending
    assert not (cfg.tapes_dir / ".tapetui" / "parked").exists()


def test_recover_tells_a_parked_candidate_from_a_sample_written_after_it(sample_dir: Path) -> None:
    """A kill after a sample run wrote its candidate: that one is a sample, the parked one pending again."""
    from tapetui.core.files import atomic_write
    from tapetui.core.locks import session_lock
    from tapetui.review import parking

    cfg = load_config(sample_dir / "tapes.toml")
    golden = cfg.tapes_dir / "drift_summarize.jsonl"
    pending = candidate_path(golden).read_bytes()
    with session_lock(golden):
        parking._park(cfg, golden)
    atomic_write(candidate_path(golden), golden.read_bytes())  # what a sample run left
    before = len(samples_of(golden))
    notes = review.recover(cfg)
    assert any("put the pending candidate back" in n for n in notes), notes
    assert candidate_path(golden).read_bytes() == pending
    assert len(samples_of(golden)) == before + 1  # nothing recorded is lost
    # killed between the journal and the move: the candidate in place is the pending one, left as it is
    with session_lock(golden):
        parking._park(cfg, golden)
        parking.unpark(cfg, golden)
    assert candidate_path(golden).read_bytes() == pending


# ---- 12: what a command said is quoted redacted and escaped ---------------------------------------------------
LEAKY = f"""
import sys
print("connecting with api key {SECRET_KEY}", file=sys.stderr)
print("Authorization: {BEARER}", file=sys.stderr)
print("\\x1b]52;c;cHduZWQ=\\x07 clipboard", file=sys.stderr)
sys.exit(3)
"""


def test_a_failing_record_commands_output_is_redacted_and_escaped(sample_dir: Path) -> None:
    set_tapes_key(sample_dir, "record_command", json.dumps(script(sample_dir, "leaky.py", LEAKY) + " {tape}"))
    r = run(sample_dir, "check", "--samples", "1")
    assert r.returncode == 2 and "exited with status 3" in r.stderr, r.stderr
    for secret in (SECRET_KEY, BEARER.split()[1], "\x1b"):
        assert secret not in r.stderr and secret not in r.stdout
    assert "clipboard" in r.stderr  # the rest is quoted


def test_quoted_output_redacts_whole_lines_then_cuts() -> None:
    said = review.quoted_output("", f"x {SECRET_KEY}\n" + "y" * 300 + SECRET_KEY, Redactor())
    assert SECRET_KEY[:20] not in said and len(said.splitlines()[-1]) <= 210


async def test_the_apps_replay_failure_message_is_redacted(sample_dir: Path) -> None:
    from tests.test_tui import SIZE, app_for, goto_session, wait_for

    set_tapes_key(sample_dir, "replay_command", json.dumps(script(sample_dir, "leaky.py", LEAKY) + " {tape}"))
    app = app_for(sample_dir)
    async with app.run_test(size=SIZE) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("p")

        def said() -> str:
            return "\n".join(str(n.message) for n in app._notifications if "exited" in str(n.message))

        await wait_for(pilot, lambda: "exited 3" in said(), "the replay ended")
        assert SECRET_KEY not in said() and BEARER.split()[1] not in said() and "\x1b" not in said()
        assert "clipboard" in said()


# ---- 5: accept --all --rule writes the rule for each session -------------------------------------------------
@pytest.mark.slow
def test_accept_all_with_a_rule_writes_it_into_each_accepted_sessions_table(sample_dir: Path) -> None:
    r = run(sample_dir, "pending")
    cfg = load_config(sample_dir / "tapes.toml")
    sessions = sorted(p.name[: -len(".candidate.jsonl")] for p in cfg.tapes_dir.glob("*.candidate.jsonl"))
    assert len(sessions) >= 2, r.stdout
    r = run(sample_dir, "accept", "--all", "--rule", "ignore:result.debug", "--why", "debug output is noise")
    assert r.returncode == 0, (r.stdout, r.stderr)
    cfg = load_config(sample_dir / "tapes.toml")
    log = cfg.changelog.read_text()
    for name in sessions:
        assert any(rule.key == "result.debug" for rule in cfg.compare_for(name).rules.rules), name
        assert f"rule for {name}" in log or name in log
    assert r.stdout.count("changelog entry") == 2 * len(sessions)  # an accept and a rule, each with its entry


def test_accept_all_with_a_bad_rule_changes_nothing(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    pending = sorted(cfg.tapes_dir.glob("*.candidate.jsonl"))
    toml = (sample_dir / "tapes.toml").read_bytes()
    r = run(sample_dir, "accept", "--all", "--rule", "nonsense:result.x", "--why", "x")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert sorted(cfg.tapes_dir.glob("*.candidate.jsonl")) == pending
    assert (sample_dir / "tapes.toml").read_bytes() == toml


# ---- 9: one use_tape object entered by several asyncio tasks ---------------------------------------------------
async def test_one_use_tape_entered_by_two_tasks_leaves_in_any_order(tmp_path: Path) -> None:
    from tapetui import current_tape

    reg = ToolRegistry()
    reg.register(lambda: 1, name="one", schema={"type": "object"}, version="1")
    tape = Tape(tmp_path / "t.jsonl", "record", reg)
    shared = use_tape(tape)
    first_in, second_in, first_out = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def first() -> None:
        async with shared:
            first_in.set()
            await second_in.wait()
            assert current_tape() is tape
        first_out.set()  # the first to enter leaves first

    async def second() -> None:
        await first_in.wait()
        async with shared:
            second_in.set()
            await first_out.wait()
            assert current_tape() is tape
        assert current_tape() is None

    await asyncio.gather(first(), second())
    assert current_tape() is None
    tape.close()


# ---- 14: a recorded error whose class would run code is not rebuilt as itself --------------------------------
class _Meta(type):
    ran: list[str] = []

    def __subclasscheck__(cls, sub: type) -> bool:
        _Meta.ran.append("subclasscheck")
        return super().__subclasscheck__(sub)

    def __instancecheck__(cls, obj: Any) -> bool:
        _Meta.ran.append("instancecheck")
        return super().__instancecheck__(obj)


class MetaError(Exception, metaclass=_Meta):
    pass


class FinalisedError(Exception):
    ran: list[str] = []

    def __del__(self) -> None:
        FinalisedError.ran.append("del")


@pytest.mark.parametrize("cls", [MetaError, FinalisedError])
def test_a_recorded_error_of_a_class_that_runs_code_replays_as_tape_replayed_error(tmp_path: Path, cls: type) -> None:
    reg = ToolRegistry()

    def boom() -> None:
        raise cls("quota")

    reg.register(boom, schema={"type": "object"}, version="1")
    path = tmp_path / "t.jsonl"
    with Tape(path, "record", reg) as t, pytest.raises(cls):
        t.call("boom", {})
    gc.collect()  # the recorded instance (held by a traceback cycle) is finalised now, not during the replay
    _Meta.ran.clear()
    FinalisedError.ran.clear()
    with Tape(path, "replay", reg) as t:
        try:
            t.call("boom", {})
        except TapeReplayedError as e:
            assert "quota" in str(e) and cls.__name__ in str(e)
        except BaseException as e:  # noqa: BLE001 - the test's point
            raise AssertionError(f"raised {type(e).__name__}, not TapeReplayedError") from None
    assert _Meta.ran == [] and FinalisedError.ran == []


# ---- 13: the accept modal's rule suggestion is built from raw tape text ----------------------------------------
async def test_the_rule_suggestion_from_tape_text_reaches_the_screen_escaped() -> None:
    from textual.app import App
    from textual.widgets import Input

    from tapetui.tui.screens.rationale import RationaleScreen

    hostile = 'ignore:result["\x1b]52;c;cHduZWQ=\x07\x1b[2J\u202ename"]'
    app: App[None] = App()
    async with app.run_test(size=(100, 30)) as pilot:
        screen = RationaleScreen("session x", hostile)
        await app.push_screen(screen)
        await pilot.pause()
        box = screen.query_one("#rule", Input)
        assert "\x1b" not in str(box.placeholder) and "\u202e" not in str(box.placeholder)
        assert "\\x1b]52" in str(box.placeholder) and "\\u202e" in str(box.placeholder)
        assert screen.suggestion is None  # never completed into the box as text the terminal acts on


def test_tape_error_is_what_a_bad_command_raises() -> None:
    assert issubclass(review.CommandTimeout, TapeError)


# ---- a second hostile pass -------------------------------------------------------------------------------------
def _forge_parked(tapes: Path, session: str, **journal: Any) -> None:
    folder = tapes / ".tapetui" / "parked" / session
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "parked.json").write_text(json.dumps({"v": 1, "candidate": None, "run_log": None, **journal}))


@pytest.mark.slow
def test_a_parked_journal_from_the_repository_never_moves_or_deletes_anything(sample_dir: Path) -> None:
    """A pull request that adds .tapetui/parked/*/parked.json cannot turn check green: nothing is moved or deleted,
    and check says the journal is not this machine's."""
    cfg = load_config(sample_dir / "tapes.toml")
    before = run(sample_dir, "check")
    assert before.returncode == 1
    files = {p: p.read_bytes() for p in cfg.tapes_dir.glob("*.jsonl")}
    for s in ("drift_summarize", "contract_change", "stale_quote"):
        _forge_parked(cfg.tapes_dir, s)
    r = run(sample_dir, "check")
    assert r.returncode == 1, r.stdout
    assert "not written by tapetui on this machine" in r.stderr, r.stderr
    assert {p: p.read_bytes() for p in cfg.tapes_dir.glob("*.jsonl")} == files  # every candidate and run log
    assert "parked" in r.stdout


def test_recover_never_follows_a_planted_symlink_out_of_the_tapes_folder(sample_dir: Path, tmp_path: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    outside = tmp_path / "outside" / "clean"
    outside.mkdir(parents=True)
    (outside / "run.jsonl").write_text("OUTSIDE DATA\n")
    sha = hashlib.sha256(b"OUTSIDE DATA\n").hexdigest()
    (outside / "parked.json").write_text(json.dumps({"v": 1, "candidate": None, "run_log": sha}))
    (cfg.tapes_dir / ".tapetui").mkdir()
    (cfg.tapes_dir / ".tapetui" / "parked").symlink_to(outside.parent)
    log = runlog_path(cfg.tapes_dir / "clean.jsonl").read_bytes()
    r = run(sample_dir, "recover")
    assert "Traceback" not in r.stderr
    assert runlog_path(cfg.tapes_dir / "clean.jsonl").read_bytes() == log
    assert (outside / "run.jsonl").read_text() == "OUTSIDE DATA\n" and (outside / "parked.json").exists()


@pytest.mark.slow
def test_a_record_command_that_deletes_the_parked_folder_loses_nothing(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    golden = cfg.tapes_dir / "drift_summarize.jsonl"
    pending = candidate_path(golden).read_bytes()
    log_before = runlog_path(golden).read_bytes()
    cleaner = script(
        sample_dir,
        "clean_all.py",
        """
        import shutil, sys, pathlib
        g = pathlib.Path(sys.argv[1])
        shutil.rmtree(g.parent / ".tapetui", ignore_errors=True)  # as git clean -fdx would
        shutil.copy(g, g.with_name(g.stem + ".candidate.jsonl"))
        """,
    )
    set_tapes_key(sample_dir, "record_command", json.dumps(cleaner + " {tape}"))
    r = run(sample_dir, "check", "--samples", "1")
    assert "Traceback" not in r.stderr, r.stderr
    assert candidate_path(golden).read_bytes() == pending and runlog_path(golden).read_bytes() == log_before
    assert "put back from memory" in r.stderr


@pytest.mark.slow
def test_diff_compares_arguments_whatever_the_stored_keys_say(sample_dir: Path) -> None:
    """A candidate line that carries the golden's key over other arguments is a difference, and accepting it says
    what changed."""
    cfg = load_config(sample_dir / "tapes.toml")
    golden = cfg.tapes_dir / "clean.jsonl"
    lines = golden.read_bytes().splitlines(keepends=True)
    out = []
    for raw in lines:
        obj = json.loads(raw)
        if obj.get("type") == "call" and obj["seq"] == 2:
            obj["args"] = {**obj["args"], "query": "mallory"}  # the key is left as the golden's
            raw = (json.dumps(obj) + "\n").encode()
        out.append(raw)
    candidate_path(golden).write_bytes(b"".join(out))
    r = run(sample_dir, "diff", "clean")
    assert r.returncode == 1 and "mallory" in r.stdout, r.stdout
    r = run(sample_dir, "accept", "clean", "--why", "x")
    assert r.returncode == 0
    assert "mallory" in cfg.changelog.read_text()


@pytest.mark.slow
def test_a_command_that_leaves_a_child_holding_its_output_does_not_hang(sample_dir: Path) -> None:
    leaver = script(
        sample_dir,
        "leaver.py",
        f"""
        import os, shutil, subprocess, sys, pathlib
        g = pathlib.Path(sys.argv[1])
        if g.name != "clean.jsonl":
            shutil.copy(g, g.with_name(g.stem + ".candidate.jsonl"))
            sys.exit(0)
        child = subprocess.Popen([{sys.executable!r}, "-c", "import time; time.sleep(600)"], start_new_session=True)
        pathlib.Path("child.pid").write_text(str(child.pid))  # it keeps this command's stdout and stderr open
        shutil.copy(g, g.with_name(g.stem + ".candidate.jsonl"))
        """,
    )
    set_tapes_key(sample_dir, "record_command", json.dumps(leaver + " {tape}"))
    try:
        r = run(sample_dir, "check", "--samples", "1", timeout=300)  # before: waited for ever on the pipe
        assert "Traceback" not in r.stderr, r.stderr
        assert r.returncode in (0, 1)
    finally:
        for pid_file in sample_dir.glob("child.pid"):
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)


@pytest.mark.parametrize("value", ['"25d"', "3153600000"])
def test_a_command_timeout_longer_than_the_system_waits_is_refused(sample_dir: Path, value: str) -> None:
    set_tapes_key(sample_dir, "command_timeout", value)
    r = run(sample_dir, "check")
    assert r.returncode == 2 and "tapes.command_timeout" in r.stderr and "Traceback" not in r.stderr
    assert "ttl" not in r.stderr


def test_a_private_key_printed_by_a_failing_command_is_redacted_whole() -> None:
    pem = (
        "-----BEGIN OPENSSH PRIVATE KEY-----\n"
        "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
        "QyNTUxOQAAACDzSECRETSECRETSECRETSECRETSECRETSECRETSECRETAAAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----\nfailed\n"
    )
    said = review.quoted_output("", pem, Redactor())
    assert "QyNTUxOQ" not in said and "b3BlbnNzaC1" not in said and "failed" in said


def test_a_hook_raising_a_baseexception_of_its_own_is_its_comparisons_error(tmp_path: Path) -> None:
    from tapetui.core.comparators import Hooks, compare_settings

    class Weird(BaseException):
        pass

    def judge(a: Any, b: Any, context: Any) -> Any:
        raise Weird("no")

    settings, _ = compare_settings({"judge": "x:y", "rules": {"result": "judge"}}, "tapes.toml")
    j = settings.rules.judge("result", {"a": "one"}, {"a": "two"}, hooks=Hooks(judge=judge))
    assert j.errors and "Weird" in j.errors[0]


def test_a_regex_over_its_budget_is_not_run_again_on_the_next_value(monkeypatch: pytest.MonkeyPatch) -> None:
    from tapetui.core import comparators
    from tapetui.core.comparators import compare_settings

    monkeypatch.setattr(comparators, "REGEX_BUDGET", 0.05)
    settings, _ = compare_settings({"rules": {"result.x": {"regex": "^(a|aa)*$"}}}, "tapes.toml")
    hostile = "a" * 60 + "b"
    first = settings.rules.judge("result", {"x": "ok"}, {"x": hostile})
    for _ in range(20):  # a hostile tape's many values: each an error at once, not another budget spent
        again = settings.rules.judge("result", {"x": "ok"}, {"x": hostile})
        assert again.errors and "not run again" in again.errors[0]
    assert first.errors and "exceeded its time budget" in first.errors[0]


# ---- where a program reads code: a guard against the common mistakes (the name rule holds whatever) ----------
REFUSED_COMMANDS = [
    "sh -c -- {tape}",
    "timeout 30 sh -c -- {tape}",
    "bash -c -x {tape}",
    "nice bash -c +e {tape}",
    "bash -c -o posix {tape}",
    'env -S "sh -c" {tape}',
    "env -S {tape}",
    "script -q -c {tape} /dev/null",
    "watch -g -n 1 {tape}",
    "awk {tape}",
    "awk -f {tape}",
    "sh {tape}",
    "{tape}",
    "timeout 30 {tape}",
    "env X=1 {tape}",
    "sudo {tape}",
    "python -m {tape}",
    "sudo sh -c {tape}",
    "xargs sh -c {tape}",
    "perl -e {tape}",
    "node -p {tape}",
    "php -r {tape}",
    "ipython -c {tape}",
    "bash5 -c {tape}",
    "env perl -e {tape}",
    "pwsh -Command {tape}",
    "ssh host cat {tape}",
    "timeout -s KILL 30 sh {tape}",
    "timeout -- 30 sh {tape}",
    "nice -n 10 sh {tape}",
    "env -u HOME sh {tape}",
    "taskset 1 sh {tape}",
    "flock /tmp/x/lk sh {tape}",
    "strace -o /dev/null sh {tape}",
    "sh +x {tape}",
    "timeout -k 5 30 {tape}",
    "nice -n 10 {tape}",
    "xargs -n 1 sh -c {tape}",
    "make -f {tape}",
    "sudo -u nobody sh {tape}",
    "doas -u x sh {tape}",
    "su -s /bin/sh -c {tape}",
    "runuser -u x -- sh {tape}",
    "gawk --file={tape}",
    "awk --source={tape}",
    "node --import={tape} x.js",
    "bash --rcfile={tape} -i",
    "busybox sh {tape}",
    "python3.13t {tape}",
    "python3-dbg {tape}",
    "node20 {tape}",
    "tsx {tape}",
    "Python3 {tape}",
    "/bin/SH -c {tape}",
    "uv run sh {tape}",
    "poetry run python {tape}",
    "valgrind sh {tape}",
    "unshare -r sh {tape}",
    "gdb -x {tape}",
    "vim -S {tape}",
    "sed -f {tape}",
    "python3 -c={tape}",
    "env --split-string={tape}",
    "perl -e={tape}",
]
ACCEPTED_COMMANDS = [
    "sh -c 'cat \"$1\"' sh {tape}",
    "python -m tapetui.sample_agent replay {tape} --delay 0.3",
    "python script.py {tape}",
    "sh script.sh {tape}",
    "timeout 30 sh -c 'x' sh {tape}",
    "cat {tape}",
    "wc -c {tape}",
    "mytool -c {tape}",
    "grep -e x {tape}",
    "timeout 30 python -m x {tape}",
    "python -W ignore::DeprecationWarning -m mod {tape}",
    "python -S -m mod {tape}",
    "python -m mod -e {tape}",
    "python x.py --exec={tape}",
    "python x.py --print={tape}",
    "make replay TAPE={tape}",
    "env TAPE={tape} cmd",
    "./bin/refresh {tape}",
    "./publish {tape}",
    "node script.js {tape}",
    "python -E -m mod {tape}",
    "uv run python -m x {tape}",
    "npx mytool {tape}",
]


@pytest.mark.parametrize("command", REFUSED_COMMANDS)
def test_tape_where_a_program_reads_code_is_refused(command: str) -> None:
    from tapetui.review.replay import _runs_as_code

    argv = shlex.split(command)
    assert _runs_as_code(argv, next(k for k, a in enumerate(argv) if "{tape}" in a)) is not None


@pytest.mark.parametrize("command", ACCEPTED_COMMANDS)
def test_tape_as_a_programs_data_is_accepted(command: str) -> None:
    from tapetui.review.replay import _runs_as_code

    argv = shlex.split(command)
    assert _runs_as_code(argv, next(k for k, a in enumerate(argv) if "{tape}" in a)) is None


def test_a_candidate_that_flips_side_effect_is_a_difference(sample_dir: Path) -> None:
    """The app's re-record warning reads side_effect from the tape: a candidate may not launder it silently."""
    cfg = load_config(sample_dir / "tapes.toml")
    golden = cfg.tapes_dir / "clean.jsonl"
    out = []
    for raw in golden.read_bytes().splitlines(keepends=True):
        obj = json.loads(raw)
        if obj.get("type") == "call" and obj.get("side_effect"):
            obj["side_effect"] = False
            raw = (json.dumps(obj) + "\n").encode()
        out.append(raw)
    candidate_path(golden).write_bytes(b"".join(out))
    r = run(sample_dir, "diff", "clean")
    assert r.returncode == 1 and "side_effect true → false" in r.stdout, r.stdout


def test_the_built_in_similarity_refuses_texts_too_long_to_compare_in_bounded_time() -> None:
    from tapetui.core.comparators import SIMILARITY_MAX_CHARS, compare_settings

    settings, _ = compare_settings({"rules": {"note.final": {"similarity": 0.8}}}, "tapes.toml")
    big = "字" * (SIMILARITY_MAX_CHARS // 2 + 1)
    j = settings.rules.judge("note.final", big, big + "x")
    assert j.errors and "more than the built-in similarity compares" in j.errors[0]


def test_an_exception_whose_class_name_runs_code_is_described_without_it() -> None:
    from tapetui.core.comparators import _described

    class Meta(type):
        @property
        def __name__(cls) -> str:  # type: ignore[override]
            raise RuntimeError("no")

    class Odd(Exception, metaclass=Meta):
        pass

    assert _described(Odd("x")) == "Odd: x"
