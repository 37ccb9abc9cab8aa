"""The commands of ``tapes.toml`` for one session: ``replay_command`` (the app's ``p``, ``tapetui replay``) and
``record_command`` (``tapetui check --samples N``).

The rule, whatever the user wrote: **no shell ever parses a tape's name.** A tape's name is data from a
repository anyone can open a pull request against (``x$(touch PWNED).jsonl`` is a valid file name), so:

- the command is split into arguments first (:func:`shlex.split`) and ``{tape}`` is put in afterwards, only
  where it is a whole argument (``{tape}``) or the value of an option (``--tape={tape}``);
- ``{tape}`` anywhere else — inside a quoted ``sh -c '…'`` script, glued to other text — is refused (a
  :class:`~tapetui.core.errors.ConfigError`, exit 2) with the safe form: the command reads the path from the
  environment (``sh -c 'cat "$TAPETUI_TAPE"'``) or as a positional parameter (``sh -c 'cat "$1"' sh {tape}``);
- ``{tape}`` as the *code* argument of an interpreter (``sh -c {tape}``, ``python -c {tape}``, ``perl -e
  {tape}``, behind a wrapper such as ``timeout 30`` too) is refused as well: the name would be run as code;
- ``TAPETUI_TAPE`` is always set to the tape's path for the command;
- and, whatever the command does with it, a tape's name (its path inside the tapes folder, the part a pull
  request controls) holds only characters no shell acts on — letters, digits and ``. _ - + @ , : % = /`` —
  so even a program that hands its arguments to a shell of its own (``ssh host …``, ``watch``, ``env -S``)
  sees one plain word. A tape named otherwise is refused, naming the characters.

``{tape}`` where a program reads code — the argument of ``-c``/``-e`` of a shell or an interpreter (after
other options and ``--`` too), an interpreter's script argument (``sh {tape}`` runs the tape as a script),
the program itself (``{tape}`` first, or after ``timeout``/``env``/``nice``), anything after ``env -S`` or
``watch``/``ssh`` — is refused too: the tape's *content* would run.

Every command runs without a shell, in the folder of ``tapes.toml``, with no standard input, for at most
``[tapes] command_timeout`` (30 minutes by default); what it prints is redacted and escaped before tapetui
quotes it anywhere (:func:`quoted_output`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tapetui.core.config import Config
from tapetui.core.errors import ConfigError, TapeError
from tapetui.core.redact import Redactor
from tapetui.core.textsafe import safe_text

__all__ = [
    "TAPE_ENV",
    "Command",
    "CommandTimeout",
    "format_seconds",
    "quoted_output",
    "record_argv",
    "record_command",
    "replay_argv",
    "replay_command",
]

TAPE_ENV = "TAPETUI_TAPE"
"""The environment variable that holds the tape's path for every command tapetui runs."""

SAFE_FORM = "sh -c 'cat \"$TAPETUI_TAPE\"'"

_PLACEHOLDER = "{tape}"
_OPTION = re.compile(r"--[A-Za-z0-9][\w.-]*=\{tape\}|-[A-Za-z0-9][\w.-]+=\{tape\}|[A-Za-z_][A-Za-z0-9_]*=\{tape\}")

# Programs that read code: family → (its code options: short letters and long names, options whose value is
# the next argument, whether its first plain argument is a script). Names are matched case-insensitively, a
# version suffix allowed (python3.13t, node20, bash5).
_FAMILIES: dict[str, tuple[str, frozenset[str], frozenset[str], bool]] = {
    "shell": ("c", frozenset({"--command", "--rcfile", "--init-file"}), frozenset({"-o", "+o", "-O", "+O"}), True),
    "python": ("c", frozenset(), frozenset({"-W", "-X", "-Q"}), True),
    "perl": ("eE", frozenset(), frozenset({"-I", "-M", "-m", "-x"}), True),
    "ruby": ("e", frozenset(), frozenset({"-I", "-r"}), True),
    "node": (
        "epr",
        frozenset({"--eval", "--print", "--require", "--import", "--loader", "--experimental-loader"}),
        frozenset(),
        True,
    ),
    "php": ("rBRFE", frozenset(), frozenset({"-d", "-c"}), True),
    "awk": ("f", frozenset({"--file", "--source", "--include"}), frozenset({"-v", "-F"}), True),
    "other": ("ceErpfxS", frozenset({"--eval", "--command", "--exec", "--file"}), frozenset(), True),
    "su": ("c", frozenset({"--command", "--session-command"}), frozenset({"-s", "--shell", "-g", "-G"}), False),
    "script": ("c", frozenset({"--command"}), frozenset(), False),
    "make": ("f", frozenset({"--file", "--makefile", "--eval"}), frozenset({"-C", "-I", "-j", "-o", "-W"}), False),
}
_FAMILY_NAMES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?:sh|bash|rbash|dash|zsh|ksh|mksh|pdksh|ash|yash|fish|csh|tcsh)[\d.]*"), "shell"),
    (re.compile(r"(?:python|pypy|ipython|jython)[\w.+-]*"), "python"),
    (re.compile(r"perl[\d.]*"), "perl"),
    (re.compile(r"(?:ruby|jruby|irb)[\d.]*"), "ruby"),
    (re.compile(r"(?:node|nodejs|deno|bun|tsx|ts-node)[\d.]*"), "node"),
    (re.compile(r"php[\d.]*"), "php"),
    (re.compile(r"[gmn]?awk|busybox-awk"), "awk"),
    (
        re.compile(
            r"(?:lua|luajit|tclsh|wish|expect|pwsh|powershell|osascript|rscript|r|julia|sed|gsed|m4|dc|gdb|vim?|nvim"
            r"|sqlite3|jq|groovy|scala|kotlinc?|elixir|erl|escript|racket|guile|sbcl|ocaml|swift)[\d.]*"
        ),
        "other",
    ),
    (re.compile(r"su"), "su"),
    (re.compile(r"script"), "script"),
    (re.compile(r"g?make"), "make"),
]
# programs that run the program named by their first plain argument, with the options that take a value
_WRAPPERS: dict[str, frozenset[str]] = {
    "timeout": frozenset({"-s", "--signal", "-k", "--kill-after"}),
    "env": frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"}),
    "nice": frozenset({"-n", "--adjustment"}),
    "ionice": frozenset({"-c", "--class", "-n", "--classdata", "-t"}),
    "chrt": frozenset(),
    "taskset": frozenset(),
    "setsid": frozenset(),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "--format", "-o", "--output"}),
    "exec": frozenset(),
    "command": frozenset(),
    "unbuffer": frozenset(),
    "sudo": frozenset({"-u", "--user", "-g", "--group", "-C", "-D", "--chdir", "-h", "-p", "-r", "-t", "-U"}),
    "doas": frozenset({"-u", "-C"}),
    "xargs": frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s"}),
    "flock": frozenset({"-w", "--timeout", "-E", "--conflict-exit-code"}),
    "strace": frozenset({"-o", "-e", "-p", "-s", "-u", "-E"}),
    "ltrace": frozenset({"-o", "-e", "-p", "-s", "-u"}),
    "valgrind": frozenset(),
    "prlimit": frozenset(),
    "numactl": frozenset(),
    "faketime": frozenset(),
    "unshare": frozenset(),
    "nsenter": frozenset({"-t", "--target"}),
    "chroot": frozenset(),
    "runuser": frozenset({"-u", "--user", "-g", "--group"}),
    "systemd-run": frozenset({"-p", "--property", "-u", "--unit"}),
    "busybox": frozenset(),
}
# a wrapper's first plain argument is not its program (taskset MASK, chrt PRIO, flock FILE, timeout DURATION)
_WRAPPER_FIRST = frozenset({"timeout", "taskset", "chrt", "flock", "chroot", "faketime"})
_ALL_CODE = frozenset({"watch", "ssh", "rsh", "parallel"})
_VALUE_LIKE = re.compile(
    r"[+-]?\d+(?:\.\d+)?[smhdkKMG%]?|(?:SIG)?[A-Z][A-Z0-9]*"
)  # every later argument is code for a shell


def _family(prog: str) -> str | None:
    name = prog.lower()
    return next((fam for pattern, fam in _FAMILY_NAMES if pattern.fullmatch(name)), None)


SAFE_NAME = re.compile(r"[\w.+@,:%=/-]+")
"""A tape name (its path inside the tapes folder) the commands of tapes.toml may be given: no character a
shell acts on (no space, quote, ``$``, backtick, ``;``, ``&``, ``|``, ``<>``, ``()``, ``{}``, ``[]``, ``*``,
``?``, ``!``, ``~``, ``#``, backslash, control or bidi character)."""


class CommandTimeout(TapeError):
    """A command of ``tapes.toml`` ran longer than ``[tapes] command_timeout``; it was killed."""


@dataclass(frozen=True, slots=True)
class Command:
    """One command of ``tapes.toml`` made for one tape: what to run, where, with what, for how long."""

    key: str  # "replay_command" or "record_command"
    argv: tuple[str, ...]
    cwd: Path
    tape: Path
    timeout: float
    where: str  # tapes.toml, for messages

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, TAPE_ENV: str(self.tape)}

    def shown(self) -> str:
        """The command as a person would type it (each argument quoted for a shell), safe for a terminal."""
        return safe_text(shlex.join(self.argv), newlines=False)

    def run(self, *, capture: bool, keep_fds: tuple[int, ...] = ()) -> subprocess.CompletedProcess[str]:
        """Run it (no shell, no standard input) and wait at most :attr:`timeout` seconds for it to exit.

        ``capture``: keep the last :data:`KEPT_BYTES` of stdout and stderr (as text) instead of letting them
        through to this process's own. It waits for the command to exit, not for its output to end: a child it
        left running (a daemon that keeps the pipe open) does not hold tapetui up. ``keep_fds``: descriptors the
        command inherits (a lock it then holds as long as it lives).

        Raises:
            CommandTimeout: it ran too long (it is killed, with its process group).
            TapeError: it cannot be started (naming the program).
        """
        try:
            proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture else None,
                stderr=subprocess.PIPE if capture else None,
                start_new_session=True,  # a timeout kills what it started too (a shell's children)
                pass_fds=keep_fds,
            )
        except OSError as e:
            raise TapeError(f"{self.argv[0]}: cannot run the {self.key}: {e.strerror or e}") from None
        tails = [_Tail(pipe) for pipe in (proc.stdout, proc.stderr) if pipe is not None]
        try:
            proc.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise CommandTimeout(
                f"{self.key} for {safe_text(self.tape.name, newlines=False)} ran longer than "
                f"{format_seconds(self.timeout)} and was stopped ({self.where}: [tapes] command_timeout): "
                f"{self.shown()}"
            ) from None
        except BaseException:  # Ctrl-C while waiting: never leave it running
            _kill(proc)
            raise
        finally:
            deadline = time.monotonic() + _DRAIN_SECONDS  # one drain for both pipes
            for t in tails:
                t.finish(deadline)
        out, err = (tails[0].text(), tails[1].text()) if tails else ("", "")
        return subprocess.CompletedProcess(list(self.argv), proc.returncode, out, err)


KEPT_BYTES = 256 * 1024
"""How much of a command's stdout (and of its stderr) tapetui keeps to quote its last lines: the end of it."""

_DRAIN_SECONDS = 2.0  # after the command exits, how long what it wrote last may take to be read


class _Tail:
    """Reads a pipe in a thread and keeps its last :data:`KEPT_BYTES` (a command that prints gigabytes does not
    fill the memory); :meth:`finish` stops waiting for more after a short drain."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.pipe = pipe
        self.kept = bytearray()
        self.done = threading.Event()
        threading.Thread(target=self._read, name="tapetui command output", daemon=True).start()

    def _read(self) -> None:
        try:
            while chunk := os.read(self.pipe.fileno(), 65536):
                self.kept += chunk
                if len(self.kept) > 2 * KEPT_BYTES:
                    del self.kept[: len(self.kept) - KEPT_BYTES]
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                self.pipe.close()
            self.done.set()

    def finish(self, deadline: float) -> None:
        """Wait a little for the end of the output. A child the command left running may hold the pipe open:
        then stop waiting and leave this thread to read on until that child ends (the pipe is never closed
        under a reading thread: its descriptor could be reused meanwhile)."""
        self.done.wait(max(0.0, deadline - time.monotonic()))

    def text(self) -> str:
        return bytes(self.kept[-KEPT_BYTES:]).decode("utf-8", "replace")


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command and its process group; wait for the command itself only (never for a pipe)."""
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=_DRAIN_SECONDS)


def format_seconds(seconds: float) -> str:
    """``1800`` → ``30m``, ``90`` → ``90s``, ``0.5`` → ``0.5s``."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds / 3600:g}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{seconds / 60:g}m"
    return f"{seconds:g}s"


def replay_command(config: Config, golden: Path) -> Command:
    """``replay_command`` made for one session (see the module's rule).

    Raises:
        ConfigError: ``tapes.toml`` names no replay_command, it cannot be split, or it puts ``{tape}`` where a
            shell or an interpreter would parse it.
    """
    return _command(config, golden, "replay_command", config.replay_command, "run a replay with")


def record_command(config: Config, golden: Path) -> Command:
    """``record_command`` made for one session: what ``check --samples N`` runs N times, each run recording
    one new candidate of the session.

    Raises:
        ConfigError: as :func:`replay_command`.
    """
    return _command(config, golden, "record_command", config.record_command, "record samples with")


def replay_argv(config: Config, golden: Path) -> list[str]:
    """:func:`replay_command`'s arguments."""
    return list(replay_command(config, golden).argv)


def record_argv(config: Config, golden: Path) -> list[str]:
    """:func:`record_command`'s arguments."""
    return list(record_command(config, golden).argv)


def _command(config: Config, golden: Path, key: str, command: str | None, purpose: str) -> Command:
    where = str(config.path or "tapes.toml")
    if not command:
        raise ConfigError(f"{where}: no {key} to {purpose}")
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise ConfigError(f"{where}: {key} cannot be split: {e}") from None
    if not argv:
        raise ConfigError(f"{where}: {key} is empty")
    for i, arg in enumerate(argv):
        if _PLACEHOLDER not in arg:
            continue
        as_value = arg != _PLACEHOLDER and _OPTION.fullmatch(arg) is not None
        if arg != _PLACEHOLDER and not as_value:
            raise ConfigError(
                f"{where}: {key} puts {{tape}} inside {arg!r}: a tape's name is data and reaches a command only as "
                f"a whole argument ({{tape}}, or --option={{tape}}), never inside text a shell parses. In a shell "
                f"script read it from the environment, quoted: {SAFE_FORM}"
            )
        runner = _runs_as_code(argv, i)
        if runner is not None:
            raise ConfigError(
                f"{where}: {key} passes {{tape}} where {runner} reads code (or the program to run), so the tape "
                f"itself would run. Pass it as data instead: {SAFE_FORM}, or `sh -c 'cat \"$1\"' sh {{tape}}`"
            )
    _check_name(config, golden)
    path = str(golden)
    return Command(
        key=key,
        argv=tuple(arg.replace(_PLACEHOLDER, path) for arg in argv),
        cwd=config.root,
        tape=golden,
        timeout=config.command_timeout,
        where=where,
    )


def _check_name(config: Config, golden: Path) -> None:
    """Refuse a tape whose name (inside the tapes folder) holds a character a shell acts on.

    Raises:
        TapeError: naming the tape and the characters.
    """
    try:
        name = str(Path(golden).relative_to(config.tapes_dir))
    except ValueError:
        name = Path(golden).name
    if SAFE_NAME.fullmatch(name) and not any(part.startswith("-") for part in Path(name).parts):
        return
    bad = sorted({c for c in name if not SAFE_NAME.fullmatch(c)}) or ["a leading -"]
    shown = ", ".join(safe_text(repr(c), newlines=False) if len(c) == 1 else c for c in bad)
    raise TapeError(
        f"{safe_text(name, newlines=False)}: a tape name with characters a shell acts on ({shown}): tapetui gives the "
        "commands of tapes.toml only plain names (letters, digits and . _ - + @ , : % = /). Rename the tape."
    )


def _runs_as_code(argv: list[str], i: int) -> str | None:
    """The program that would read ``argv[i]`` as code, or as the program to run; None when it is data.

    A guard against the common mistakes, not a sandbox (``tapes.toml`` is trusted configuration; whatever a
    command does, a tape's *name* is a plain word, :func:`_check_name`). The programs are ``argv[0]`` and,
    while one is a wrapper (``timeout``, ``env``, ``nice``, ``sudo``, ``xargs``, ``strace``...), the program it
    runs. ``{tape}`` is code when it is one of them; anything after ``watch``, ``ssh`` or ``env -S``; for a
    shell or an interpreter (``sh``, ``python3``, ``perl``, ``node``, ``awk``, ``make``...): the argument of a
    code option (``-c``, ``-lc``, ``-e``, ``--eval``) — the first plain argument after it, other options and
    ``--`` passed over —, an option's value, or without a code option its first plain argument (its script).
    After a wrapper, a number, a duration or a signal name (``-k 5``, ``-s KILL``) is an option's value, not its
    program.
    """
    p: int | None = 0
    runner = "the command"
    while p is not None and p <= i:
        if p == i:
            return f"{runner} (the tape would be the program it runs)"
        prog = Path(argv[p]).name
        runner = prog
        low = prog.lower()
        if low in _ALL_CODE:
            return prog
        fam = _family(prog)
        if fam is not None:
            return prog if _in_code(argv, p + 1, i, fam) else None
        if low not in _WRAPPERS:
            # not a program this knows: {tape} is its data, unless a program that reads code is named on the
            # way (a wrapper it does not know, with options it does not know)
            for k in range(p + 1, i):
                name = Path(argv[k]).name
                if name.lower() in _ALL_CODE:
                    return name
                fam = _family(name)
                if fam is not None and not argv[k].startswith("-"):
                    return name if _in_code(argv, k + 1, i, fam) else None
            return None
        valued = _WRAPPERS[low]
        j = p + 1
        first = low in _WRAPPER_FIRST
        while j < len(argv):
            a = argv[j]
            if a == "--":
                j += 1
                break
            if low == "env" and (a in ("-S", "--split-string") or a.startswith(("-S", "--split-string="))):
                return "env -S"
            if a.startswith("-") and len(a) > 1:
                if j == i:
                    return prog
                j += 1 if ("=" in a or a not in valued) else 2
                continue
            if low == "env" and "=" in a:
                j += 1
                continue
            if first or _VALUE_LIKE.fullmatch(a):  # a duration, a number, a signal: an option's value, not a program
                first = False
                j += 1
                continue
            break
        if j == i and argv[i - 1] in valued:
            return prog  # {tape} as a wrapper option's value (strace -o {tape} writes over it; refused too)
        p = j if j < len(argv) else None
    return None


def _in_code(argv: list[str], start: int, i: int, fam: str) -> bool:
    """Whether ``argv[i]`` is code for the program of ``fam`` whose arguments start at ``start``."""
    letters, longs, valued, script = _FAMILIES[fam]
    j = start
    code = False
    while j < len(argv):
        a = argv[j]
        if a == "--":
            j += 1
            break
        if (a.startswith("-") or (fam == "shell" and a.startswith("+"))) and len(a) > 1:
            if j == i:
                return True  # {tape} among its options
            head = a.split("=", 1)[0]
            if head in longs or (
                not a.startswith("--") and any(c in letters for c in a[1:]) and not (fam == "python" and a == "-m")
            ):
                code = True
                if "=" in a or (not a.startswith("--") and a[-1] not in letters):
                    j += 1  # the code is in the option itself (-c=..., --eval=...) or it takes none here
                    continue
            if fam == "python" and a == "-m":
                return j + 1 == i  # python -m MODULE: the module is run; what follows is its data
            j += 2 if (a in valued or head in valued) and "=" not in a else 1
            continue
        break
    # j: the first plain argument: the code of a code option, else the script (when the program takes one)
    if j >= len(argv):
        return False
    if code or script:
        return i == j
    return False


TAIL_LINES = 8  # lines of a failed command's output kept in a message
TAIL_LINE_CHARS = 200


def quoted_output(stdout: str | None, stderr: str | None, redactor: Redactor, *, lines: int = TAIL_LINES) -> str:
    """What a command said last, as text fit to quote in a message, a toast, a log or ``--json``: secrets
    redacted (``tapes.toml``'s ``[redact]`` rules and the built-in ones), control and bidi characters escaped.

    The last meaningful lines of its stderr (else stdout), extended back to the line that starts the message
    they belong to (an indented line continues the one above it, as a drift report or a traceback's frames
    do), at most ``lines`` lines of :data:`TAIL_LINE_CHARS` characters. Rules (====, ----) and blank lines
    are left out; ``(no output)`` when nothing is left.
    """
    text = (stderr or "") if (stderr or "").strip() else (stdout or "")
    # redacted whole, before it is split: a secret over several lines (a PEM block) is one to the rules
    text = redactor.redact_text(text)
    kept = [ln.rstrip() for ln in text.splitlines()]
    kept = [ln for ln in kept if ln.strip() and not set(ln.strip()) <= set("=-_*~#")]
    if not kept:
        return "(no output)"
    start = max(0, len(kept) - min(4, lines))
    while start > 0 and kept[start][:1].isspace() and len(kept) - start < lines:
        start -= 1  # the message this indented line belongs to
    out = []
    for ln in kept[max(start, len(kept) - lines) :]:
        ln = redactor.redact_text(ln)  # and each line again, whole, before it is cut
        out.append(safe_text(ln if len(ln) <= TAIL_LINE_CHARS else ln[:TAIL_LINE_CHARS] + "…", newlines=False))
    return "\n".join(out)
