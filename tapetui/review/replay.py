"""The replay command of ``tapes.toml`` for one session: what the app's ``p`` and ``tapetui replay`` run."""

from __future__ import annotations

import shlex
from pathlib import Path

from tapetui.core.config import Config
from tapetui.core.errors import TapeError

__all__ = ["replay_argv"]


def replay_argv(config: Config, golden: Path) -> list[str]:
    """``replay_command`` split into arguments, ``{tape}`` replaced by the golden's path.

    Run it with ``cwd=config.root`` (where ``tapes.toml`` is). The path is quoted before the
    command is split, so a session name with spaces or quotes stays one argument.

    Raises:
        TapeError: ``tapes.toml`` names no replay_command, or it cannot be split (unbalanced quotes).
    """
    if not config.replay_command:
        raise TapeError(f"{config.path or 'tapes.toml'}: no replay_command to run a replay with")
    cmd = config.replay_command.replace("{tape}", shlex.quote(str(golden)))
    try:
        argv = shlex.split(cmd)
    except ValueError as e:
        raise TapeError(f"{config.path or 'tapes.toml'}: replay_command cannot be split: {e}") from None
    if not argv:
        raise TapeError(f"{config.path or 'tapes.toml'}: replay_command is empty")
    return argv
