"""What every adapter shares: the tape a call goes through."""

from __future__ import annotations

from tapetui.core.current import current_tape
from tapetui.core.errors import TapeError
from tapetui.core.tape import Tape

__all__ = ["resolve_tape"]


def resolve_tape(tape: Tape | None) -> Tape:
    """``tape``, else the current one (``with tapetui.use_tape(...)``, the pytest ``tape`` fixture).

    Adapters call it when a call is made, not when they wrap: a toolset wrapped once at import time goes
    through whichever tape is current then.

    Raises:
        TapeError: no tape was given and none is current.
    """
    if tape is not None:
        return tape
    found = current_tape()
    if found is None:
        raise TapeError(
            "no tape: pass tape=... to the adapter, or run inside `with tapetui.use_tape(path, mode=...)` "
            "(the pytest `tape` fixture makes its tape current)"
        )
    return found
