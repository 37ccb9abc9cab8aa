"""Cut-point replay of a tool: a tool named live on replay (tapes.toml's ``live``, ``Tape(live=[...])``, pytest's
``--tape-live``) runs, consumes the recording at its place, and its result is compared with it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tapetui.core.canon import canon
from tapetui.core.changes import event_changes
from tapetui.core.codecs import json_form
from tapetui.core.decide import Decider
from tapetui.core.errors import TapeError
from tapetui.core.index import Consumed, TapeIndex
from tapetui.core.jsondiff import diff_values
from tapetui.core.live import LiveStep, Request
from tapetui.core.redact import Redactor
from tapetui.core.toolbox import Toolbox

__all__ = ["CutPoints"]


class CutPoints:
    """The cut-point half of :class:`~tapetui.core.serving.ToolServing` (the tape's attributes below)."""

    path: Path
    _redactor: Redactor
    _tools: Toolbox
    _decider: Decider
    _used: Consumed | None
    _index: TapeIndex | None
    _fd: int
    _tool_n: int
    _active: int
    _emit: Callable[..., None]  # ToolServing's
    _plan_live: Callable[..., LiveStep]  # ToolServing's

    def _plan_cut(self, request: Request, *, policy: str) -> LiveStep:
        """A tool that runs live on replay (tapes.toml's ``live``, or ``live=``): it consumes the recording at its
        place, and its result is compared with it when it returns (a ``behaviour`` event)."""
        seq, tool, key, redacted = request[0], request[1], request[6], request[5]
        t = self._tools.tool(tool, request[3])
        at = None
        m = self._decider.matcher
        if m is not None and self._used is not None:
            at = m.used.take(key)
            if at is None:
                at = m.drift_target(tool, self._tool_n, redacted, alone=self._active == 0, unplaced=False)
            if at is not None:
                self._used.flags[at] = 1
        fields = {"step": m.index.seqs[at]} if m is not None and at is not None else {}
        self._emit("live", seq=seq, tool=tool, key=key, policy=policy, fingerprint=t.fingerprint, **fields)
        step = self._plan_live(request, write=False)
        step.compare = at
        return step

    def _behaviour(self, step: LiveStep, result: Any, error: Exception | None) -> None:
        """A cut-point call's outcome against the recording it consumed: a ``behaviour`` event when they differ."""
        index = self._index
        at = step.compare
        if index is None or at is None:
            return
        try:
            old_result, old_error = index.outcome(at, self._fd)
            old = canon(self._redactor.redact({"result": old_result} if old_error is None else {"error": old_error}))
            if error is None:
                new = canon(self._redactor.redact({"result": json_form(result, "result")}))
            else:
                new = {"error": {"type": type(error).__qualname__, "message": self._redactor.redact_text(str(error))}}
                old = {"error": {k: old["error"].get(k) for k in ("type", "message")}} if "error" in old else old
            changes = diff_values(old, new)
        except (TypeError, TapeError):
            return
        if changes:
            self._emit(
                "behaviour",
                seq=step.seq,
                tool=step.name,
                step=index.seqs[at],
                changes=event_changes(changes),
            )
