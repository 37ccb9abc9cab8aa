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
_OPTION = re.compile(r"--[A-Za-z0-9][\w.-]*=\{tape\}|-[A-Za-z0-9][\w.-]+=\{tape\}")
# programs that read code from their arguments: the argument of -c/-e (or a cluster holding it), else their first
# plain argument (a script file); `--` ends their options
_INTERPRETER = re.compile(
    r"(?:[a-z]*sh[\d.]*|python[\d.]*|pypy[\d.]*|ipython[\d.]*|perl[\d.]*|ruby[\d.]*|node(?:js)?|deno|bun"
    r"|php[\d.]*|lua[\d.]*|luajit|tclsh[\d.]*|wish[\d.]*|expect|pwsh|powershell|osascript|[gmn]?awk|busybox"
    r"|Rscript|julia|script|su|sudo|doas|flock|xargs|parallel)"
)
# programs that run the program named by their first plain argument (a tape there would be run)
_WRAPPER = re.compile(r"(?:timeout|env|nice|nohup|ionice|chrt|taskset|setsid|stdbuf|time|exec|command|unbuffer)")
_ALL_CODE = frozenset({"watch", "ssh"})
_CODE_FLAG = re.compile(r"-[A-Za-z]*[ceErpS][A-Za-z]*|--(?:eval|command|print|exec|split-string|require)(?:=.*)?")
_CODE_ONLY = frozenset({"script", "su", "flock", "sudo", "doas", "xargs", "parallel"})  # code only after -c
_CHAINS = frozenset({"sudo", "doas", "xargs", "parallel", "flock"})  # they also run the program named next
_VALUED = re.compile(r"[-+][oOWXIfvFMm]")  # an option whose value is the next argument (bash -o posix, awk -f f)
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

    def run(self, *, capture: bool) -> subprocess.CompletedProcess[str]:
        """Run it (no shell, no standard input) and wait at most :attr:`timeout` seconds for it to exit.

        ``capture``: keep the last :data:`KEPT_BYTES` of stdout and stderr (as text) instead of letting them
        through to this process's own. It waits for the command to exit, not for its output to end: a child it
        left running (a daemon that keeps the pipe open) does not hold tapetui up.

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
        if as_value and (_CODE_FLAG.fullmatch(arg.split("=", 1)[0]) or arg.startswith(("-S", "--split-string"))):
            raise ConfigError(
                f"{where}: {key} passes {{tape}} as the value of {arg.split('=', 1)[0]}, which reads code: the tape "
                f"itself would run. Pass it as data instead: {SAFE_FORM}"
            )
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
    """The program that would read ``argv[i]`` as code, or as the program to run, or None when it is data.

    The programs are ``argv[0]`` and, while one is a wrapper (``timeout 30``, ``env``, ``nice``, ``sudo``,
    ``xargs``...), the program it runs (its first plain argument). ``{tape}`` is code when it is one of them;
    anything after ``watch``, ``ssh`` or ``env -S``; for a shell or an interpreter (``sh``, ``python3``,
    ``perl``, ``awk``...): the argument a code option (``-c``, ``-lc``, ``-e``, ``--eval``) takes — the first
    plain argument after it, other options and ``--`` passed over — or, without one, its first plain argument
    (its script); and the value of one of its options (``awk -f {tape}``).
    """
    p: int | None = 0
    runner = "the command"
    while p is not None and p <= i:
        if p == i:
            return f"{runner} (the tape would be the program it runs)"
        prog = runner = Path(argv[p]).name
        end = _first_plain(argv, p + 1, prog)
        options = [a for a in argv[p + 1 : min(i, end if end is not None else i)] if a.startswith("-")]
        if prog in _ALL_CODE or (prog == "env" and any(a.startswith(("-S", "--split-string")) for a in options)):
            return prog + (" -S" if prog == "env" else "")
        if _INTERPRETER.fullmatch(prog):
            code = _code_position(argv, p + 1)
            if code is not None:
                return prog if code >= i else None  # the code, or an option before it; after it: $0, $1...
            if prog not in _CODE_ONLY and _first_plain(argv, p + 1, prog) == i:
                return prog  # its script
            if _VALUED.fullmatch(argv[i - 1]) and i - 1 > p and prog not in _CODE_ONLY:
                return prog  # an option's value (awk -f {tape})
            if prog not in _CHAINS:
                return None
        elif not _WRAPPER.fullmatch(prog):
            return None
        p = end
    return None


def _first_plain(argv: list[str], start: int, prog: str) -> int | None:
    """The index of the first plain argument from ``start`` (options and their values passed over; for
    ``timeout`` its duration too, for ``env`` its NAME=VALUE settings), or None."""
    j = start
    seen_duration = prog != "timeout"
    while j < len(argv):
        a = argv[j]
        if a == "--":
            return j + 1 if j + 1 < len(argv) else None
        if a.startswith("-") and len(a) > 1:
            j += 2 if _VALUED.fullmatch(a) else 1
            continue
        if prog == "env" and "=" in a and not a.startswith("="):
            j += 1
            continue
        if not seen_duration:
            seen_duration = True
            j += 1
            continue
        return j
    return None


def _code_position(argv: list[str], start: int) -> int | None:
    """Where the code a code option (``-c`` ...) takes is, after ``start``: the first plain argument after the
    option, other options and ``--`` passed over; None when no code option comes before a plain argument."""
    j = start
    code = False
    while j < len(argv):
        a = argv[j]
        if a == "--":
            j += 1
            break
        if a.startswith(("-", "+")) and len(a) > 1:
            if _CODE_FLAG.fullmatch(a):
                code = True
            j += 2 if _VALUED.fullmatch(a) else 1
            continue
        break
    if not code:
        return None
    return j if j < len(argv) else None


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
