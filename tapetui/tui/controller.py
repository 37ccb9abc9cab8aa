"""The review controller: accept (with a rule), reject, expire, undo, re-record and replay, through the review layer.

Every action runs in a worker thread (file IO, locks, live tools); what it changes of the app's state
(the undo stack, a session's flags, the screen) is changed on the main thread, in the callback the worker
hands back with ``call_from_thread``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol

import tapetui.review as review
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.runlog import end_counts, read_run_log
from tapetui.core.store import runlog_path
from tapetui.core.textsafe import safe_text
from tapetui.review.history import HistoryRecord
from tapetui.review.sessions import Session
from tapetui.tui.host import WorkerHost

ActionKind = Literal["accept", "reject", "expire"]


class Host(WorkerHost, Protocol):
    """What the controller needs of the app."""

    sessions: dict[Path, Session]

    def session_changed(self, s: Session, message: str) -> None: ...

    def config_changed(self, config: Config) -> None: ...


class ReviewController:
    """Performs the app's review actions (each through the review layer, as the command line does)."""

    def __init__(self, host: Host, config: Config) -> None:
        self.host = host
        self.config = config

    def _run(self, fn: Callable[..., None], *args: Any, group: str = "write") -> None:
        self.host.run_worker(partial(fn, *args), thread=True, group=group)

    def _later(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        """Run ``fn`` on the main thread (from a worker)."""
        self.host.call_from_thread(fn, *args, **kwargs)

    def _done(self, s: Session, message: str) -> None:
        """On the main thread: an action on ``s`` finished."""
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
            message = f"Accepted {what}; changelog entry {entry.id}."
            if rule is not None:
                self._add_rule(s, why, rule, message)
            else:
                self._later(self._accepted, s, message)

    def _accepted(self, s: Session, message: str) -> None:
        s.marked = False
        self._done(s, message)

    def _add_rule(self, s: Session, why: str, rule: review.RuleSpec, accepted: str | None) -> None:
        """In the worker: add ``rule`` for ``s``; ``accepted``: the message of its accept (None: no accept)."""
        said = accepted or ""
        try:
            entry, config, done = review.add_rule(self.config, s.golden, rule, why)
        except (TapeError, OSError) as e:
            if accepted is not None:
                self._later(self._accepted, s, said + " The rule was not added:")
            self._later(self.host.show_error, e)
            return
        assert self.config.path is not None  # add_rule wrote it
        added = (
            f"Added the rule {rule.toml_text()} to {self.config.path.name} "
            f'[compare.sessions."{s.name}".rules]; changelog entry {entry.id} (u does not remove it).'
            if entry is not None
            else f"The rule {rule.toml_text()} is in {self.config.path.name} already: {done}."
        )
        self._later(self._rule_added, s, f"{said} {added}".strip(), config)

    def _rule_added(self, s: Session, message: str, config: Config) -> None:
        """On the main thread: tapes.toml has a new rule; from now on everything is compared under it."""
        self.config = config
        self.host.config_changed(config)
        self._accepted(s, message)

    def reject(self, s: Session) -> None:
        self._run(self._reject, s)

    def _reject(self, s: Session) -> None:
        try:
            entry = review.reject(self.config, s.golden)
        except (TapeError, OSError) as e:
            self._later(self.host.show_error, e)
            return
        self._later(self._done, s, f"Rejected the candidate of {s.name}; changelog entry {entry.id} (u undoes).")

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
        self._later(self._done, s, message)

    # ---- undo ------------------------------------------------------------------------------------------
    def ask_undo(self, s: Session, ask: Callable[[Session, HistoryRecord], None]) -> None:
        """Find the change ``u`` would revert for ``s`` (what ``tapetui undo SESSION`` reverts: the session's newest
        accept, reject or expire not undone yet, from any sitting or process) and hand it to ``ask``, on the main
        thread, to confirm; say so when there is none."""
        self._run(self._ask_undo, s, ask, group="undo")

    def _ask_undo(self, s: Session, ask: Callable[[Session, HistoryRecord], None]) -> None:
        try:
            target = review.undo_target(self.config, s.golden)
        except (TapeError, OSError) as e:
            self._later(self.host.show_error, e)
            return
        if target is None:
            self._later(
                self.host.notify,
                safe_text(f"Nothing to undo for {s.name}: no accept, reject or expire of it that is not undone."),
                markup=False,
            )
            return
        self._later(ask, s, target)

    def undo(self, s: Session, target: HistoryRecord) -> None:
        """Revert ``target`` (confirmed by a person), unless the session's newest change is another one by now."""
        self._run(self._undo, s, target)

    def _undo(self, s: Session, target: HistoryRecord) -> None:
        try:
            entry = review.undo(self.config, s.golden, expect=target.id)
        except (TapeError, OSError) as e:
            self._later(self.host.show_error, e)
            return
        self._later(
            self._done,
            s,
            f"Undid the {target.action} of {s.name} (changelog entry {target.id}); "
            f"logged as changelog entry {entry.id}.",
        )

    # ---- re-record and replay --------------------------------------------------------------------------
    def rerecord(self, s: Session, seq: int) -> None:
        """Run step ``seq``'s tool live (asked for confirmation before); its result becomes a candidate."""
        self._run(self._rerecord, s, seq)

    def _rerecord(self, s: Session, seq: int) -> None:
        try:
            cand = review.rerecord(self.config, s.golden, seq, yes=True)
        except (TapeError, OSError) as e:
            self._later(self.host.show_error, e)
            return
        said = review.rerecorded_message(s.golden, cand, seq)
        self._later(self._done, s, f"Re-recorded step {seq} of {s.name}: {said}; review the pending change.")

    def replay(self, s: Session) -> None:
        """Run tapes.toml's replay_command for ``s``; the run log shows it live, a message tells how it ended."""
        self._run(self._replay, s, group="replay")

    def _replay(self, s: Session) -> None:
        self._later(self.host.notify, safe_text(f"Replaying {s.name}…"), markup=False, timeout=3)
        try:
            command = review.replay_command(self.config, s.golden)  # `tapetui replay` runs the same
            proc = command.run(capture=True)
        except TapeError as e:
            self._later(self.host.show_error, e)
            return
        said = review.quoted_output(
            proc.stdout, proc.stderr, self.config.redactor(), lines=1 if proc.returncode == 0 else 8
        )
        if proc.returncode == 0:  # what the run did, as the run log's end says it (the command's own last line else)
            done = _run_log_counts(s.golden) or said
            self._later(self.host.notify, f"Replay of {safe_text(s.name, newlines=False)} passed: {done}", markup=False)
        else:  # the cause, not only the last line: a failure's message often spans several
            self._later(
                self.host.notify,
                f"Replay of {safe_text(s.name, newlines=False)} exited {proc.returncode}:\n{_fit(said, self.host)}",
                severity="warning",
                markup=False,
                timeout=15,
            )


def _fit(said: str, host: Any) -> str:
    """A command's last words as a toast can show them: on a small terminal (80×24) a toast is a third of its width,
    and eight long lines would cover the tree for as long as it stays; there its first three lines, each cut to two
    of the toast's rows."""
    size = getattr(host, "size", None)
    if size is None or size.width >= 120:
        return said
    lines = said.splitlines()
    room = max(20, size.width // 3 - 4) * 2  # two of the toast's rows a line
    kept = [ln if len(ln) <= room else ln[: room - 1] + "…" for ln in lines[:3]]
    more = f"\n… {len(lines) - 3} more: `tapetui replay` says all" if len(lines) > 3 else ""
    return "\n".join(kept) + more


def _run_log_counts(golden: Path) -> str | None:
    """The last run's steps per status in words (``4 hits, 0 misses, …``) from its run log's ``end``, or None."""
    try:
        events = read_run_log(runlog_path(golden))
    except TapeError:
        return None
    end = events[-1] if events and events[-1].get("event") == "end" else None
    stats = end.get("stats") if end is not None else None
    return end_counts(stats) if isinstance(stats, dict) else None
