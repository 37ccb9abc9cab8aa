"""The review controller: accept (with a rule), reject, expire, undo, re-record and replay, through the review layer.

Every action runs in a worker thread (file IO, locks, live tools); what it changes of the app's state
(the undo stack, a session's flags, the screen) is changed on the main thread, in the callback the worker
hands back with ``call_from_thread``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol

from textual.notifications import SeverityLevel

import tapetui.review as review
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.textsafe import safe_text
from tapetui.review.sessions import Session

ActionKind = Literal["accept", "reject", "expire"]
NEW_SESSION = "accept (new session)"  # the history's name for the accept that made a golden: no undo reverts it


class Host(Protocol):
    """What the controller needs of the app."""

    sessions: dict[Path, Session]

    def run_worker(self, work: Callable[[], None], *, thread: bool = ..., group: str = ...) -> Any: ...

    def call_from_thread(self, callback: Callable[..., Any], *args: Any, **kwargs: Any) -> Any: ...

    def notify(
        self,
        message: str,
        *,
        title: str = ...,
        severity: SeverityLevel = ...,
        timeout: float | None = ...,
        markup: bool = ...,
    ) -> None: ...

    def show_error(self, e: BaseException) -> None: ...

    def session_changed(self, s: Session, message: str) -> None: ...

    def config_changed(self, config: Config) -> None: ...


@dataclass(frozen=True, slots=True)
class UndoItem:
    """An action of this sitting that ``u`` can undo: what was done to which session, and its changelog
    entry (None for a reject without a reason). The bytes it replaced are kept by the review layer
    (``.tapetui/history/``), not here: ``u`` and ``tapetui undo`` undo the same way."""

    kind: ActionKind
    golden: Path
    entry_id: str | None


class ReviewController:
    """Performs the app's review actions and keeps the undo stack of this sitting."""

    def __init__(self, host: Host, config: Config) -> None:
        self.host = host
        self.config = config
        self.undo_stack: list[UndoItem] = []

    def _run(self, fn: Callable[..., None], *args: Any, group: str = "write") -> None:
        self.host.run_worker(partial(fn, *args), thread=True, group=group)

    def _later(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run ``fn`` on the main thread (from a worker)."""
        self.host.call_from_thread(fn, *args, **kwargs)

    def _done(self, s: Session, message: str, item: UndoItem | None = None) -> None:
        """On the main thread: an action on ``s`` finished."""
        if item is not None:
            self.undo_stack.append(item)
        self.host.session_changed(s, message)

    # ---- accept, reject, expire ------------------------------------------------------------------------
    def accept(
        self, sessions: list[Session], why: str, steps: list[int] | None, rule: review.RuleSpec | None = None
    ) -> None:
        """Accept the candidates of ``sessions`` (or the given steps of one) with the rationale ``why``; with
        ``rule``, add it to tapes.toml for each session too (after its accept; with the same rationale)."""
        self._run(self._accept, sessions, why, steps, rule)

    def _accept(self, sessions: list[Session], why: str, steps: list[int] | None, rule: review.RuleSpec | None) -> None:
        for s in sessions:
            if rule is not None and not s.has_candidate():  # nothing to accept (any more): the rule alone
                self._add_rule(s, why, rule, None)
                continue
            try:
                if rule is not None:  # the rule can go into tapes.toml: checked first, so nothing is left half done
                    review.check_rule(self.config, s.golden, rule)
                entry = review.accept(self.config, s.golden, why, steps)
            except (TapeError, OSError) as e:
                self._later(self.host.show_error, e)
                continue  # nothing accepted: no rule either
            if steps:  # one step of the candidate: say so, and whether the rest still waits for review
                rest = (
                    "the candidate stays pending: other steps still differ"
                    if s.has_candidate()
                    else "nothing else differed: the candidate is done"
                )
                what = f"step{'s' if len(steps) != 1 else ''} {', '.join(map(str, steps))} of {s.name}; {rest}"
            else:
                what = s.name
            item = UndoItem("accept", s.golden, entry.id)
            message = f"Accepted {what}; changelog entry {entry.id}."
            if rule is not None:
                self._add_rule(s, why, rule, (message, item))
            else:
                self._later(self._accepted, s, message, item)

    def _accepted(self, s: Session, message: str, item: UndoItem | None) -> None:
        s.marked = False
        self._done(s, message, item)

    def _add_rule(self, s: Session, why: str, rule: review.RuleSpec, accepted: tuple[str, UndoItem] | None) -> None:
        """In the worker: add ``rule`` for ``s``; ``accepted``: the message and undo item of its accept."""
        said, item = accepted if accepted is not None else ("", None)
        try:
            entry, config = review.add_rule(self.config, s.golden, rule, why)
        except (TapeError, OSError) as e:
            if accepted is not None:
                self._later(self._accepted, s, said + " The rule was not added:", item)
            self._later(self.host.show_error, e)
            return
        assert self.config.path is not None  # add_rule wrote it
        added = (
            f"Added the rule {rule.toml_text()} to {self.config.path.name} "
            f'[compare.sessions."{s.name}".rules]; changelog entry {entry.id} (u does not remove it).'
        )
        self._later(self._rule_added, s, f"{said} {added}".strip(), item, config)

    def _rule_added(self, s: Session, message: str, item: UndoItem | None, config: Config) -> None:
        """On the main thread: tapes.toml has a new rule; from now on everything is compared under it."""
        self.config = config
        self.host.config_changed(config)
        self._accepted(s, message, item)

    def reject(self, s: Session) -> None:
        self._run(self._reject, s)

    def _reject(self, s: Session) -> None:
        try:
            entry = review.reject(self.config, s.golden)
        except (TapeError, OSError) as e:
            self._later(self.host.show_error, e)
            return
        item = UndoItem("reject", s.golden, entry.id if entry is not None else None)
        self._later(self._done, s, f"Rejected the candidate of {s.name} (u undoes).", item)

    def expire(self, s: Session, steps: list[int] | None, all_time_sensitive: bool) -> None:
        """Expire the given steps of ``s``, or every time-sensitive one."""
        self._run(self._expire, s, steps, all_time_sensitive)

    def _expire(self, s: Session, steps: list[int] | None, all_ts: bool) -> None:
        try:
            entry = review.expire(self.config, s.golden, steps, all_time_sensitive=all_ts)
        except review.AlreadyExpired as e:  # nothing changed: information, not an error
            self._later(self.host.notify, safe_text(str(e)), markup=False)
            return
        except (TapeError, OSError) as e:
            self._later(self.host.show_error, e)
            return
        n = len(entry.steps)
        message = (
            f"Expired step{'s' if n != 1 else ''} {', '.join(map(str, entry.steps))} of {s.name}; "
            f"the next fill re-records {'them' if n != 1 else 'it'}."
        )
        self._later(self._done, s, message, UndoItem("expire", s.golden, entry.id))

    # ---- undo ------------------------------------------------------------------------------------------
    def undo(self) -> None:
        """Undo the newest accept, reject or expire of this sitting (or say there is none)."""
        if not self.undo_stack:
            self.host.notify(
                "Nothing to undo in this sitting; `tapetui undo SESSION` reverts older changes.", markup=False
            )
            return
        self._run(self._undo, self.undo_stack.pop())

    def _undo(self, item: UndoItem) -> None:
        """Undo through the review layer (``tapetui undo`` does the same): the newest change of the session."""
        target = None
        try:
            target = review.undo_target(self.config, item.golden)
            entry = review.undo(self.config, item.golden)
        except (TapeError, OSError) as e:
            # nothing left to undo, or a change no undo can revert (the first accept of a new session): dropped;
            # anything else (a newer candidate, a lock held) stays on the stack, and u can try again
            retry = target is not None and target.action != NEW_SESSION
            self._later(self._undo_failed, item if retry else None, e)
            return
        assert target is not None  # undo() reverted something: undo_target named it
        reverts = f"changelog entry {target.id}" if target.logged else "no changelog entry"
        self._later(self._undone, item, target.action, f"({reverts}); logged as changelog entry {entry.id}.")

    def _undo_failed(self, item: UndoItem | None, e: BaseException) -> None:
        if item is not None:
            self.undo_stack.append(item)  # not undone: u can try again
        self.host.show_error(e)

    def _undone(self, item: UndoItem, kind: str, said: str) -> None:
        s = self.host.sessions.get(item.golden)
        message = f"Undid the {kind} of {s.name if s is not None else item.golden.name} {said}"
        if s is not None:
            self._done(s, message)
        else:
            self.host.notify(safe_text(message), markup=False)

    # ---- re-record and replay --------------------------------------------------------------------------
    def rerecord(self, s: Session, seq: int) -> None:
        """Run step ``seq``'s tool live (asked for confirmation before); its result becomes a candidate."""
        self._run(self._rerecord, s, seq)

    def _rerecord(self, s: Session, seq: int) -> None:
        try:
            review.rerecord(self.config, s.golden, seq, yes=True)
        except (TapeError, OSError) as e:
            self._later(self.host.show_error, e)
            return
        self._later(self._done, s, f"Re-recorded step {seq} of {s.name}: review the pending change.")

    def replay(self, s: Session) -> None:
        """Run tapes.toml's replay_command for ``s``; the run log shows it live, a message tells how it ended."""
        self._run(self._replay, s, group="replay")

    def _replay(self, s: Session) -> None:
        self._later(self.host.notify, safe_text(f"Replaying {s.name}…"), markup=False)
        try:
            argv = review.replay_argv(self.config, s.golden)  # `tapetui replay` runs the same
            proc = subprocess.run(
                argv,
                cwd=self.config.root,
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=3600,
            )
        except (TapeError, OSError, subprocess.TimeoutExpired) as e:
            self._later(self.host.show_error, e)
            return
        if proc.returncode == 0:
            tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1:] or [""]
            self._later(self.host.notify, safe_text(f"Replay of {s.name} exited 0: {tail[0]}"), markup=False)
        else:  # the cause, not only the last line: a failure's message often spans several
            self._later(
                self.host.notify,
                f"Replay of {safe_text(s.name, newlines=False)} exited "
                f"{proc.returncode}:\n{failure_tail(proc.stdout, proc.stderr)}",
                severity="warning",
                markup=False,
                timeout=15,
            )


TAIL_LINES = 8  # lines of a failed replay's output kept in its message
TAIL_LINE_CHARS = 200


def failure_tail(stdout: str, stderr: str) -> str:
    """What a failed command said last, as text safe for the terminal: the last meaningful lines of its
    stderr (else stdout), extended back to the line that starts the message they belong to (an indented
    line continues the one above it, as a drift report or a traceback's frames do), at most TAIL_LINES
    lines of TAIL_LINE_CHARS characters. Rules (====, ----) and blank lines are left out."""
    text = stderr if stderr.strip() else stdout
    lines = [ln.rstrip() for ln in text.splitlines()]
    lines = [ln for ln in lines if ln.strip() and not set(ln.strip()) <= set("=-_*~#")]
    if not lines:
        return "(no output)"
    start = max(0, len(lines) - 4)
    while start > 0 and lines[start][:1].isspace() and len(lines) - start < TAIL_LINES:
        start -= 1  # the message this indented line belongs to
    kept = lines[max(start, len(lines) - TAIL_LINES) :]
    return "\n".join(
        safe_text(ln if len(ln) <= TAIL_LINE_CHARS else ln[:TAIL_LINE_CHARS] + "…", newlines=False) for ln in kept
    )
