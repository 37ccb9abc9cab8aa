"""The replay command of ``tapes.toml`` for one session: what the app's ``p`` and ``tapetui replay`` run."""

from __future__ import annotations

import shlex
from pathlib import Path

from tapetui.core.config import Config
from tapetui.core.errors import TapeError

__all__ = ["record_argv", "replay_argv"]


def replay_argv(config: Config, golden: Path) -> list[str]:
    """``replay_command`` split into arguments, then ``{tape}`` replaced by the golden's path in each.

    Run it with ``cwd=config.root`` (where ``tapes.toml`` is), without a shell. The command is split
    first and the path put into the arguments afterwards, so no character of a tape's name (spaces,
    quotes, ``;``) is ever parsed: ``{tape}`` as its own argument is exactly one argument. A command
    that starts a shell itself should pass the path as a positional parameter, not inside the script:
    ``sh -c 'wc -c "$1"' sh {tape}``. In the script of ``sh -c`` (``bash -lc``...) a bare ``{tape}`` is
    quoted for that shell.

    Raises:
        TapeError: ``tapes.toml`` names no replay_command, or it cannot be split (unbalanced quotes).
    """
    return _argv(config, golden, "replay_command", config.replay_command, "run a replay with")


def record_argv(config: Config, golden: Path) -> list[str]:
    """``record_command`` as :func:`replay_argv` makes ``replay_command``: what ``check --samples N`` runs
    N times, each run recording one new candidate of the session (the previous one rotates into
    ``NAME.samples/``).

    Raises:
        TapeError: ``tapes.toml`` names no record_command, or it cannot be split.
    """
    return _argv(config, golden, "record_command", config.record_command, "record samples with")


def _argv(config: Config, golden: Path, key: str, command: str | None, purpose: str) -> list[str]:
    where = config.path or "tapes.toml"
    if not command:
        raise TapeError(f"{where}: no {key} to {purpose}")
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise TapeError(f"{where}: {key} cannot be split: {e}") from None
    if not argv:
        raise TapeError(f"{where}: {key} is empty")
    path = str(golden)
    script = _script_index(argv)
    return [arg.replace("{tape}", shlex.quote(path) if i == script else path) for i, arg in enumerate(argv)]


_SHELLS = frozenset(("sh", "bash", "dash", "zsh", "ksh", "ash"))


def _script_index(argv: list[str]) -> int | None:
    """Where the script of ``sh -c SCRIPT`` (``bash -lc``...) is: a shell parses it, so the path put into it
    is quoted for the shell; everywhere else the path goes in as it is, one argument nothing parses."""
    if Path(argv[0]).name not in _SHELLS:
        return None
    for i, arg in enumerate(argv[1:-1], 1):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg:
            return i + 1
    return None
