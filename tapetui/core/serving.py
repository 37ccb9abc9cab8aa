"""Serving a decision at the tool boundary: what :class:`~tapetui.core.tape.Tape` does once
:class:`~tapetui.core.decide.Decider` has decided a request.

:class:`ToolServing` is the half of ``Tape`` that acts on a :class:`~tapetui.core.decide.Decision`: a recording
is served after the tool's own checks (its contract's fingerprint, its expiry), a drift or a miss is logged
and raised (a fill's miss runs live into the candidate), and a call that runs live is planned before and
written after it runs (:class:`~tapetui.core.live.LiveStep`). Every method is called under the tape's lock,
except the building of a live call's line, which :meth:`ToolServing._end` does before taking it.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, NoReturn

from tapetui.core.canon import canon, canonical_json
from tapetui.core.changes import event_changes
from tapetui.core.clock import Clock, parse_iso
from tapetui.core.codecs import json_form
from tapetui.core.config import Config, ToolPolicy
from tapetui.core.contract import ContractChange
from tapetui.core.cutpoint import CutPoints
from tapetui.core.decide import Decider, DecisionKind
from tapetui.core.errors import TapeDrift, TapeError, TapeMiss, TapeStale, ToolDriftError, UnrecordableResult
from tapetui.core.fill import FillCandidate
from tapetui.core.index import Consumed, TapeIndex
from tapetui.core.jsondiff import diff_values
from tapetui.core.live import LiveStep, Request
from tapetui.core.modes import Mode
from tapetui.core.recorded_errors import raise_recorded
from tapetui.core.redact import Redactor
from tapetui.core.runlog import EventKind, RunLog, add_status, step_status
from tapetui.core.session import SessionFiles
from tapetui.core.stepspans import StepSpans, note_event
from tapetui.core.toolbox import UNKNOWN, Toolbox
from tapetui.core.turns import CAPTURE_HINT, NOT_CAPTURED

__all__ = ["Request", "ToolServing"]


class ToolServing(CutPoints):
    """Serves decisions for :class:`~tapetui.core.tape.Tape` (its base class: the attributes below are the
    tape's, set by its constructor)."""

    path: Path
    mode: Mode
    config: Config
    _redactor: Redactor
    _clock: Clock
    _mu: threading.Lock
    _closed: bool
    _active: int
    _after: int
    _counts: dict[str, int]
    _status: dict[int, str]
    _overrides: dict[int, tuple[Any, BaseException | None]]
    _log: RunLog | None
    _files: SessionFiles
    _tools: Toolbox
    _decider: Decider
    _records: bool
    _fill: FillCandidate | None
    _used: Consumed | None
    _index: TapeIndex | None
    _fd: int
    _tool_n: int
    _live_names: frozenset[str]
    _spans: StepSpans | None
    _all_live: bool

    def _serve_other(
        self, kind: DecisionKind, at: int | None, excuses: list[dict[str, Any]] | None, request: Request
    ) -> tuple[LiveStep | None, Any]:
        """Serve a :data:`~tapetui.core.decide.Decision` that is not a recording of the golden: an override, a
        drift, a miss, an earlier fill's call."""
        seq, tool, key = request[0], request[1], request[6]
        if kind == "override":
            return None, self._serve_override(seq, tool, key, at)
        if kind == "earlier_fill":
            assert at is not None
            return None, self._serve_earlier_fill(seq, tool, key, at)
        if kind == "drift":
            assert at is not None
            self._serve_drift(seq, tool, key, request[5], at, excuses or [])
        return self._serve_miss(request)

    def _serve_recording(
        self, i: int | None, excuses: list[dict[str, Any]] | None, request: Request, policy: ToolPolicy
    ) -> tuple[LiveStep | None, Any]:
        """Serve golden recording ``i`` (a hit, or with ``excuses`` a tolerated one) after the tool's checks: its
        contract's fingerprint, its expiry."""
        seq, tool, key = request[0], request[1], request[6]
        index = self._index
        assert index is not None and i is not None and self._used is not None
        tools = self._tools
        if tools.registry is not None and tools.checked.get(tool) != index.fingerprints[i]:
            self._check_fingerprint(i, seq, tool, policy)
        expires = index.expires.get(i) if index.expires else None
        if expires is not None and self._expired(expires) and self._stale(expires, seq, tool, key, policy) == "miss":
            return self._serve_miss(request, reason="expired", near=i)
        self._used.flags[i] = 1
        self._counts["tape_hits"] += 1
        self._after = seq
        if excuses is not None:  # tolerated: served in place of a drift, every difference excused
            self._counts["tolerated_hits"] += 1
            # the arguments as called (redacted and canonical, as a drift logs them): check judges the hit again
            # by value, under the rules as they are then, against the golden's recording
            fields = {"recorded_key": index.keys[i], "tolerated": excuses, "args": request[5]}
            self._emit("hit", seq=seq, tool=tool, key=key, step=index.seqs[i], **fields)
        else:  # the hot path: the event written directly, the step's status set here
            step = index.seqs[i]
            if self._log is not None:
                self._log.emit("hit", seq=seq, tool=tool, key=key, step=step)
            if self._spans is not None:  # the span's outcome: a hit, also when what it serves is a recorded error
                note_event("hit", {"seq": seq, "tool": tool, "key": key, "step": step})
            if step in self._status:  # a stale event came first: the precedence decides
                add_status(self._status, step, "hit")
            else:
                self._status[step] = "hit"
        result, error = index.outcome(i, self._fd)
        if self._fill is not None:  # in fill mode the candidate is the session as played: hits are carried into it
            self._fill.carry(self._files.writer, seq, i)
        if error is not None:
            raise_recorded(error, tool, seq)
        if tools.codecs.get(tool, UNKNOWN) is None:  # the common case: no codec, the JSON form
            return None, result
        return None, tools.typed(tool, result)

    def _stale(self, expires_at: str, seq: int, tool: str, key: str, policy: ToolPolicy) -> str:
        """A recording that expired: counted and logged; raised under the ``error`` policy, else the policy."""
        stale = policy.stale_policy or self.config.stale_policy
        self._counts["stale"] += 1
        self._emit("stale", seq=seq, tool=tool, key=key, expires_at=expires_at, policy=stale)
        if stale == "error":
            raise TapeStale(
                f"{self.path}: step {seq} ({tool}) expired at {expires_at} "
                f"(stale policy 'error'; re-record it with mode='fill' after expiring)"
            )
        return stale

    def _serve_override(self, seq: int, tool: str, key: str, i: int | None) -> Any:
        if i is not None and self._used is not None:
            self._used.flags[i] = 1
        self._counts["overrides"] += 1
        self._counts["tape_hits"] += 1
        self._after = seq
        self._emit("hit", seq=seq, tool=tool, key=key, override=True)
        result, error = self._overrides[seq]
        if error is not None:
            raise error
        return result

    def _serve_earlier_fill(self, seq: int, tool: str, key: str, a: int) -> Any:
        """Serve a call from what an earlier fill ran live (its call ``a``)."""
        assert self._fill is not None and self._fill.earlier is not None
        earlier = self._fill.earlier
        self._counts["tape_hits"] += 1
        self._after = seq
        self._emit("hit", seq=seq, tool=tool, key=key, step=seq, source="candidate")
        result, error = earlier.index.outcome(a, earlier.fh.fileno())
        if self._files.writer is None:  # the earlier candidate is not this session as played: write the new one
            self._open_fill_candidate()
        self._fill.carry(self._files.writer, seq, a, earlier=True)
        if error is not None:
            raise_recorded(error, tool, seq)
        return self._tools.typed(tool, result)

    def _serve_drift(
        self, seq: int, tool: str, key: str, redacted: Any, j: int, excused: list[dict[str, Any]]
    ) -> NoReturn:
        """Raise the drift of this call against recording ``j`` (consumed: it is accounted for). ``excused``: the
        differences the rules excused (the others were not), for the run log."""
        matcher = self._decider.matcher
        assert matcher is not None and self._used is not None
        self._used.flags[j] = 1
        matcher.drifted.add(j)
        recorded = matcher.index.record(j, self._files.fh)
        # a tape written under older rules: what they let through stays out of the run log and the error
        recorded_args = self._redactor.redact(recorded.args)
        if recorded_args == {"content": NOT_CAPTURED}:
            raise TapeError(
                f"{self.path}:{recorded.line}: call {seq} ({tool}) was imported from a trace that did not capture "
                f"its arguments ({NOT_CAPTURED}): it cannot be replayed; {CAPTURE_HINT}"
            )
        changes = diff_values(canon(recorded_args), redacted)
        self._counts["drift_events"] += 1
        self._emit(
            "drift",
            seq=seq,
            tool=tool,
            key=key,
            recorded_key=recorded.key,
            recorded_args=recorded_args,
            args=redacted,
            step=recorded.seq,
            changes=event_changes(changes),
            **({"excused": excused} if excused else {}),
        )
        raise TapeDrift(
            path=str(self.path),
            seq=seq,
            tool=tool,
            recorded_key=recorded.key,
            new_key=key,
            recorded_args=recorded_args,
            new_args=redacted,
            changes=[tuple(c) for c in changes],
            recorded_seq=recorded.seq,
        )

    def _serve_miss(self, request: Request, reason: str = "", near: int | None = None) -> tuple[LiveStep | None, Any]:
        """The request is not on the tape: a TapeMiss in replay; in fill, served by an earlier fill or run live."""
        seq, tool, key, redacted = request[0], request[1], request[6], request[5]
        self._counts["tape_misses"] += 1
        nearest, changes = self._nearest(tool, seq, redacted, near)
        shown = event_changes(changes)
        self._emit(
            "miss", seq=seq, tool=tool, key=key, args=redacted, nearest=nearest, reason=reason or None, changes=shown
        )
        if self.mode == Mode.REPLAY:
            raise TapeMiss(
                path=str(self.path),
                seq=seq,
                tool=tool,
                key=key,
                args=redacted,
                nearest_seq=nearest,
                changes=changes,
                reason=reason,
            )
        if reason:  # an expired entry an earlier fill already re-recorded
            earlier = self._decider.from_earlier_fill(tool, key)
            if earlier is not None and earlier[1] is not None:
                return None, self._serve_earlier_fill(seq, tool, key, earlier[1])
        if self._files.writer is None:
            self._open_fill_candidate()
        return self._plan_live(request, write=True), None

    def _nearest(
        self, tool: str, seq: int, redacted: Any, near: int | None
    ) -> tuple[int | None, list[tuple[str, Any, Any]]]:
        """The nearest recorded call of ``tool`` (``near`` when given), and how ``redacted`` differs from it."""
        best = near if near is not None or self._used is None else self._used.nearest(tool, seq)
        matcher = self._decider.matcher
        if best is None or matcher is None:
            return None, []
        changes = matcher.changes(best, redacted)
        return matcher.index.seqs[best], [(c.path, c.old, c.new) for c in changes]

    def _open_fill_candidate(self) -> None:
        """First miss of a fill over a golden: the candidate starts with the hits so far."""
        assert self._fill is not None
        self._files.claim_fill_target(self._fill.opening())

    # ---- a call run live ----------------------------------------------------------------
    def _plan_live(self, request: Request, *, write: bool) -> LiveStep:
        """The request about to run live; with ``write``, everything about its line that can fail is settled here,
        before the tool runs. The caller holds the lock."""
        seq, name, args, fn, passed, redacted, key, requested_tool, fields = request
        t = self._tools.tool(name, fn)
        if fn is None and t.fn is None:
            raise TapeError(f"{self.path}: tool {name!r} has no function to run (registered as a contract): pass live=")
        step = LiveStep.planned(
            seq=seq,
            name=name,
            args=args,
            tool=t,
            redactor=self._redactor,
            policy=self.config.policy(name),
            recorded_at=self._clock() if write else None,
            requested_tool=requested_tool,
            extra=fields,
            fn=fn,
            call=(redacted, key, passed),
        )
        if write:
            assert self._files.writer is not None
            if name not in self._tools.written:
                step.tool_line = self._tools.tool_line_bytes(name)  # built now (it can fail); written with the call
        self._active += 1
        return step

    def _end(self, step: LiveStep, result: Any, error: Exception | None, ms: float) -> Any:
        """Finish a call that ran live: count it, write its line (when it is written), return what it returned.

        The line is built outside the lock (a result of megabytes does not hold up the other calls); only its
        append, the tool line before it and the counters are under it."""
        try:
            codec = self._tools.codecs.get(step.name, UNKNOWN)
            out = step.outcome(
                result, error, ms, self._redactor, self._tools.codec(step.name) if codec is UNKNOWN else codec
            )
        except BaseException:  # an interrupt while the line was built: nothing is written
            self._abandon()
            raise
        with self._mu:
            self._active -= 1
            self._counts["live_tool_calls"] += 1
            if step.seq > self._after:  # calls running at once may end in any order
                self._after = step.seq
            if step.tool.side_effect:
                self._counts["real_side_effects"] += 1
            if step.compare is not None:
                self._behaviour(step, out.result, error)
            if step.stamp is not None:
                self._write_live(step, out.line, out.ms, out.recorded_error, out.problem)
            elif out.problem:
                raise TapeError(f"{step.name} (step {step.seq}) {out.problem}")
        if error is not None:
            raise error
        return out.result

    def _write_live(self, step: LiveStep, line: bytes, ms: float, recorded_error: bool, problem: str) -> None:
        """Append a live call's line (after its tool line, once) and log it; the caller holds the lock."""
        writer = self._files.writer
        if writer is None:
            raise TapeError(
                f"{self.path}: the tape was closed while {step.name} (step {step.seq}) ran; its call was not recorded"
            )
        tool_line = b""
        if step.name not in self._tools.written:  # another call of the tool may have written it meanwhile
            tool_line = step.tool_line or self._tools.tool_line_bytes(step.name)
        writer.append(tool_line + line)
        self._tools.written.add(step.name)
        self._emit(
            "record" if self.mode == Mode.RECORD else "live",
            seq=step.seq,
            tool=step.name,
            key=step.key,
            fingerprint=step.tool.fingerprint,
            ms=ms,
            side_effect=step.tool.side_effect,
            error=recorded_error,
        )
        if problem:
            raise UnrecordableResult(
                f"{step.name} (step {step.seq}) {problem}; the call was recorded with this as its error", problem
            )

    def _abandon(self) -> None:
        """A live call interrupted before it returned (a cancellation): nothing is written."""
        with self._mu:
            self._active -= 1

    def _order_fields(self, tool: str, order: Any, call_id: Any) -> tuple[dict[str, Any], bytes | None]:
        """The ``order`` and ``call_id`` fields of a call's line, and the order's canonical JSON (how a place is
        looked up)."""
        fields: dict[str, Any] = {}
        place = None
        if order is not None:
            try:
                value = self._redactor.redact(json_form(order, "order"))  # a tuple and a list: the same place
                place = canonical_json(value)
            except TypeError as e:
                raise TapeError(
                    f"{self.path}: {tool}: order= must be a JSON value such as (turn, index), got "
                    f"{self._redactor.redact_text(str(e))}"
                ) from None
            fields["order"] = value
        if call_id is not None:
            if not isinstance(call_id, str):
                raise TapeError(f"{self.path}: {tool}: call_id must be a string, got {type(call_id).__name__}")
            fields["call_id"] = self._redactor.redact_text(call_id)
        return fields, place

    def _report_unused(self) -> None:
        """At close: the golden's recordings this run never used, counted and logged (``unused`` events)."""
        idx, used = self._index, self._used
        if idx is None or used is None:
            return
        unused = used.unused()
        self._counts["unused"] = len(unused)
        for i in unused:
            add_status(self._status, idx.seqs[i], "unused")
        if self._log is not None and unused:
            self._log.emit_many(
                [{"event": "unused", "seq": idx.seqs[i], "tool": idx.tools[i], "key": idx.keys[i]} for i in unused]
            )

    def _emit(self, event: EventKind, **fields: Any) -> None:
        at, status = step_status(event, fields)
        if at is not None and status is not None:
            add_status(self._status, at, status)
        if self._spans is not None:
            note_event(event, fields)
        if self._log is not None:
            self._log.emit(event, **fields)

    def _expired(self, expires_at: str) -> bool:
        when = parse_iso(expires_at)
        return when is not None and when <= self._clock()

    def _check_fingerprint(self, i: int, seq: int, tool: str, policy: ToolPolicy) -> None:
        """Compare call ``i``'s fingerprint with the live tool's, computed in the form the call was recorded in."""
        index = self._index
        assert index is not None
        change = self._tools.fingerprint_change(index, i, tool)
        if change is not None:
            self._contract_changed(seq, tool, index.fingerprints[i], change, policy)

    def _contract_changed(
        self,
        seq: int,
        tool: str,
        recorded: str,
        change: ContractChange,
        policy: ToolPolicy,
        *,
        fields: dict[str, Any] | None = None,
        context: tuple[str, ...] = (),
    ) -> None:
        """A contract that is not the recorded one: counted and logged (a ``fingerprint`` event, ``fields`` added);
        a ``ToolDriftError`` (``context`` before its explanation) unless the tool's check is off."""
        self._counts["fingerprint_changes"] += 1
        allowed = not policy.check_fingerprint
        if allowed:
            self._tools.checks_off.add(tool)
        else:
            self._counts["drift_events"] += 1
        self._emit(
            "fingerprint",
            seq=seq,
            tool=tool,
            recorded=recorded,
            live=change.live,
            allowed=allowed,
            explanation=change.explanation,
            form=change.form,
            **(fields or {}),
        )
        if not allowed:
            raise ToolDriftError(
                path=str(self.path),
                seq=seq,
                tool=tool,
                recorded=recorded,
                live=change.live,
                explanation=[*context, *change.explanation],
            )
