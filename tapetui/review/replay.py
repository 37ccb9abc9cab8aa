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
- ``TAPETUI_TAPE`` is always set to the tape's path for the command.

A command that hands its arguments to a shell of its own (``ssh host …``, ``su -c``) must read
``$TAPETUI_TAPE`` inside that shell's script, quoted; that is beyond what tapetui can see.

Every command runs without a shell, in the folder of ``tapes.toml``, with no standard input, for at most
``[tapes] command_timeout`` (30 minutes by default); what it prints is redacted and escaped before tapetui
quotes it anywhere (:func:`quoted_output`).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

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
_OPTION = re.compile(r"--?[A-Za-z0-9][\w.-]*=\{tape\}")
# programs whose next argument after -c / -e (or a cluster holding it) is code they run
_INTERPRETER = re.compile(
    r"(?:[a-z]*sh|python[\d.]*|pypy[\d.]*|perl[\d.]*|ruby[\d.]*|node(?:js)?|deno|bun|php[\d.]*|lua[\d.]*"
    r"|tclsh[\d.]*|pwsh|powershell|osascript|[gm]?awk)"
)


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
        """Run it (no shell, no standard input) and wait at most :attr:`timeout` seconds.

        ``capture``: keep stdout and stderr (as text) instead of letting them through to this process's own.

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
                text=True,
                errors="replace",
                start_new_session=True,  # a timeout kills what it started too (a shell's children)
            )
        except OSError as e:
            raise TapeError(f"{self.argv[0]}: cannot run the {self.key}: {e.strerror or e}") from None
        try:
            out, err = proc.communicate(timeout=self.timeout)
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
        return subprocess.CompletedProcess(list(self.argv), proc.returncode, out, err)


def _kill(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, 9)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.communicate()


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
        if arg != _PLACEHOLDER and not _OPTION.fullmatch(arg):
            raise ConfigError(
                f"{where}: {key} puts {{tape}} inside {arg!r}: a tape's name is data and reaches a command only as "
                f"a whole argument ({{tape}}, or --option={{tape}}), never inside text a shell parses. In a shell "
                f"script read it from the environment, quoted: {SAFE_FORM}"
            )
        if _runs_as_code(argv, i):
            raise ConfigError(
                f"{where}: {key} passes {{tape}} as the code {argv[i - 1]} runs, so the tape's name would be run. "
                f"Read it from the environment instead: {SAFE_FORM}"
            )
    path = str(golden)
    return Command(
        key=key,
        argv=tuple(arg.replace(_PLACEHOLDER, path) for arg in argv),
        cwd=config.root,
        tape=golden,
        timeout=config.command_timeout,
        where=where,
    )


def _runs_as_code(argv: list[str], i: int) -> bool:
    """Whether ``argv[i]`` is the code argument of an interpreter named before it (``sh -c X``, ``bash -lc X``,
    ``python3 -c X``, ``perl -e X``; after a wrapper such as ``timeout 30`` or ``env`` too)."""
    if i == 0:
        return False
    prev = argv[i - 1]
    if not re.fullmatch(r"-[A-Za-z]*[ceE][A-Za-z]*", prev):
        return False
    return any(_INTERPRETER.fullmatch(Path(a).name) for a in argv[: i - 1])


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
    kept = [ln.rstrip() for ln in text.splitlines()]
    kept = [ln for ln in kept if ln.strip() and not set(ln.strip()) <= set("=-_*~#")]
    if not kept:
        return "(no output)"
    start = max(0, len(kept) - min(4, lines))
    while start > 0 and kept[start][:1].isspace() and len(kept) - start < lines:
        start -= 1  # the message this indented line belongs to
    out = []
    for ln in kept[max(start, len(kept) - lines) :]:
        ln = redactor.redact_text(ln)  # whole, before it is cut: a secret cut in two would not be seen
        out.append(safe_text(ln if len(ln) <= TAIL_LINE_CHARS else ln[:TAIL_LINE_CHARS] + "…", newlines=False))
    return "\n".join(out)
