"""``Tape``: record an agent session's tool calls, or replay them offline."""

from __future__ import annotations

import inspect
import logging
import os
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from tapetui.core.canon import canon, canonical_json
from tapetui.core.changes import MISSING, format_path
from tapetui.core.clock import Clock, Timer, event_clock, iso, parse_iso, perf_timer, utcnow
from tapetui.core.codecs import Codec, CodecWarning, codec_for, json_form
from tapetui.core.comparators import Rules
from tapetui.core.config import Config, ToolPolicy, config_for_tape
from tapetui.core.contract import contract_change
from tapetui.core.errors import TapeDrift, TapeError, TapeMiss, TapeStale, ToolDriftError
from tapetui.core.files import atomic_write
from tapetui.core.fill import Filled
from tapetui.core.fingerprint import redact_manifest_line
from tapetui.core.index import Consumed, TapeIndex
from tapetui.core.jsondiff import IgnoreRules, diff_parts, diff_values
from tapetui.core.live import (
    LineStamp,
    call_args,
    check_tool_name,
    line_stamp,
    outcome_line,
    result_form,
    run_callable,
    run_tool,
    stored_args,
    tool_as_written,
)
from tapetui.core.locks import LockBusy, RecordingLock, gate, recording_lock
from tapetui.core.matching import DRIFT, HIT, MISS, OPEN, OPEN_UNPLACED, Matcher
from tapetui.core.recorded_errors import raise_recorded
from tapetui.core.redact import Redactor
from tapetui.core.registry import Tool, ToolRegistry, make_contract
from tapetui.core.runlog import EventKind, RunLog, add_status, status_counts, step_status
from tapetui.core.store import candidate_path, prepare_recording, recording_target, runlog_path, session_name
from tapetui.core.tapefile import Appender, dump_line, read_index, session_line

__all__ = ["MODES", "Tape"]

MODES = ("record", "replay", "fill")
_log = logging.getLogger("tapetui")
# stats() counters, in the order stats() lists them (after mode and steps)
_COUNTERS: tuple[str, ...] = ("tape_hits", "tape_misses", "live_tool_calls", "real_side_effects", "drift_events")
_COUNTERS += ("fingerprint_changes", "stale", "overrides", "unused", "tolerated_hits")


_UNKNOWN: Any = object()  # a tool whose codec is not looked up yet


@dataclass(slots=True)
class _Call:
    """A call the tape does not serve from a recording, as :meth:`Tape._begin` read it (a hit never builds one)."""

    seq: int
    name: str
    args: dict[str, Any]
    fn: Callable[[], Any] | None  # the caller's live=, else the tool's own function runs
    passed: Any  # the arguments as passed, in their JSON form
    redacted: Any  # redacted and canonical
    key: str
    requested_tool: str | None
    extra: dict[str, Any] | None


@dataclass(slots=True)
class _Run(_Call):
    """A call about to run live, as :meth:`Tape._plan` settled it for :meth:`Tape._end`."""

    tool: Tool
    stamp: LineStamp | None  # with write
    manifest: bytes  # the tool line, when this tape has not written it yet
    write: bool


class Tape:
    """One agent session on disk, recorded or replayed.

    Args:
        path: the golden tape (``name.jsonl``).
        mode: ``record`` (run every call live, write a fresh tape, a candidate when a
            golden exists), ``replay`` (recorded results only; never runs a tool) or
            ``fill`` (replay, and run only misses live, writing them to a candidate).
        registry: the live tools; needed to record, to fill and to check fingerprints.
        config: redaction rules and per-tool policy. Without it, the ``tapes.toml`` found from the
            tape's folder up to the repository root (a folder holding ``.git``) applies, else defaults
            (see :func:`tapetui.core.config.config_for_tape`).
        labels: free-form session labels written to the header (model, prompt version...).
        clock / timer: injectable time sources (deterministic sample tapes use them).
        run_log: write the run's events beside the tape (``name.run.jsonl``).
        fsync: fsync each appended record (slower; crash-proof even against power loss).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        mode: str = "replay",
        registry: ToolRegistry | None = None,
        *,
        config: Config | None = None,
        labels: dict[str, Any] | None = None,
        clock: Clock = utcnow,
        timer: Timer = perf_timer,
        run_log: bool = True,
        fsync: bool = False,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown tape mode {mode!r}; valid modes: {', '.join(MODES)}")
        self.path = Path(path)
        self.mode = mode
        self.registry = registry
        self.config = config or config_for_tape(self.path)  # tapes.toml from the tape's folder up to the repo root
        self.labels = dict(labels or {})
        self._clock = clock
        self._timer = timer
        self._fsync = fsync
        self._redactor: Redactor = self.config.redactor()
        self._seq = 0
        self._overrides: dict[int, tuple[Any, BaseException | None]] = {}
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._status: dict[int, str] = {}  # recorded step → its one status in this run (runlog.STATUS_PRECEDENCE)
        self._allowed_fp: set[str] = set()
        self._fp_ok: dict[str, str] = {}  # tool → recorded fingerprint that matched the live one
        self._live_tools: dict[str, Tool] = {}  # name → the registered tool as this tape writes it
        self._index: TapeIndex | None = None
        self._fh: Any = None
        self._fd = -1
        self._used: Consumed | None = None  # which recorded calls this run has used (when there is a golden)
        self._consumed = bytearray()  # = self._used.flags
        self._writer: Appender | None = None
        self._written_tools: set[str] = set()
        # (run seq, index, from the earlier fill) of the hits before the first fill miss, and the note and phase
        # lines among them
        self._pending_fill: list[tuple[int, int, bool] | bytes] = []
        self._after = 0  # the step of the last call line written or served: where a note or phase line goes
        self._phase: str | None = None  # the phase Tape.phase named last
        self.target: Path | None = None
        self.notices: list[str] = []  # what this tape did that a person should hear of (a candidate rotated)
        self._alt: Filled | None = None  # fill: calls an earlier, unreviewed fill already ran live
        self._lock: RecordingLock | None = None
        self._closed = False
        # One lock guards every decision and write of this tape (calls may come from many threads and tasks);
        # it is never held while a tool runs. _active counts the calls running live.
        self._mu = threading.Lock()
        self._active = 0
        self._matcher: Matcher | None = None
        self._codecs: dict[str, Codec | None] = {}
        self._codec_warned: set[str] = set()
        self._tool_policies = self.config.tools
        self._default_policy = self.config.policy("")  # what a tool without a [tools.NAME] table gets
        self._adhoc: dict[str, Tool] = {}  # tools called with live= that the registry does not hold
        self._contracts: dict[str, tuple[Any, Tool]] = {}  # name → (its definition, as contract() last saw it)
        self._rules: tuple[Rules | None, IgnoreRules] | None = None  # see _replay_rules: looked up on a first drift

        try:
            self._open_session(mode)
        except BaseException:
            self._release()
            raise
        self._log = (
            RunLog(
                runlog_path(self.path),
                {
                    "mode": mode,
                    "tape": self.path.name,
                    "started": iso(self._clock()),
                    "golden_sha256": self._index.sha256() if self._index is not None else None,
                },
                clock=event_clock(clock),
            )
            if run_log
            else None
        )

    # ---- context manager ---------------------------------------------------------
    def __enter__(self) -> Tape:
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.close(error=exc)

    # ---- public API --------------------------------------------------------------
    def override(self, seq: int, result: Any = None, *, error: BaseException | None = None) -> None:
        """Replace what step ``seq`` returns on replay (or make it raise ``error``).

        For exercising a fallback branch offline, e.g. an upstream 500 at step 2.
        """
        self._overrides[seq] = (result, error)

    def note(self, kind: str, value: Any) -> None:
        """Record a labelled value of the session that is not a tool call: a model response, the final output.

        Its value is redacted like a call's arguments. Recording writes a ``note`` line after the calls so far
        (``after``: the step of the last one, 0 when none; ``phase``: the current phase); a replay never writes
        the golden and logs a ``note`` event instead; a fill does both, the line going into its candidate.
        Notes are no calls: they have no key and do not count in ``steps``.

        Args:
            kind: the note's label (``"final"``, ``"response"``...): notes are compared by kind and by their
                position among notes.
            value: any JSON value (a pydantic model as its JSON dump).

        Raises:
            TapeError: ``kind`` is not a non-empty string, ``value`` has no JSON form, or the tape is closed;
                nothing is written then.
        """
        kind = self._check_label(kind, "note kind")
        try:
            # redacted as the value of a key named ``kind``: note("api_key", ...) is a secret by its name too
            data = self._redactor.redact({kind: json_form(value, "value")})[kind]
        except (TypeError, TapeError) as e:  # Unrecordable is a TypeError, TooDeep a TapeError
            raise TapeError(f"{self.path}: note {kind!r}: its value cannot be recorded: {e}") from None
        with self._mu:
            after, phase = self._after, self._phase
            fields = {"kind": kind, "value": data, "after": after, "phase": phase}
            self._extra("note", fields)

    def phase(self, name: str) -> None:
        """Mark the start of phase ``name`` of the session (``gather``, ``answer``...): the calls after it, up to
        the next phase, belong to it, and so do the notes.

        Recording writes a ``phase`` line (``after``: the step of the last call, 0 when none); a replay logs a
        ``phase`` event instead; a fill does both. Not a call: no key, not counted in ``steps``.

        Raises:
            TapeError: ``name`` is not a non-empty string, or the tape is closed; nothing is written then.
        """
        name = self._check_label(name, "phase name")
        with self._mu:
            self._extra("phase", {"name": name, "after": self._after})
            self._phase = name

    def call(
        self,
        tool: str,
        args: dict[str, Any] | None = None,
        *,
        requested_tool: str | None = None,
        live: Callable[[], Any] | None = None,
        order: Any = None,
        call_id: str | None = None,
    ) -> Any:
        """Make one tool call through the tape; returns the (recorded or live) result.

        Args:
            tool / args: the tool's name and the arguments the model passed.
            requested_tool: what the model asked for, when the harness ran another tool.
            live: what to run when the call runs live (record, a fill's miss, a ``live`` tool): a callable
                taking no arguments — a framework's own executor — instead of the registered function.
            order: the call's place in the model's request, e.g. ``(turn, index)``; any JSON value (a tuple
                and a list name the same place). Parallel calls carrying it are matched to the recordings
                at that place (README "Async agents and parallel tool calls").
            call_id: the model's id of this tool call, recorded on the line.

        Raises:
            TapeDrift: replay/fill, the step was recorded with other arguments (unless tapes.toml's
                ``[compare.rules]`` and ``[diff] ignore`` excuse every difference: then the recording is served
                as a tolerated hit, counted in ``stats()["tolerated_hits"]``).
            TapeMiss: replay, the call is not on the tape.
            ToolDriftError: the registered tool's fingerprint is not the recorded one.
            TapeStale: an expired entry under the ``error`` stale policy.
            TapeError: a bad argument or result value, a closed tape, a missing tool, an async tool called
                from inside a running event loop (use :meth:`acall`).
        """
        run, value = self._begin(tool, args, requested_tool, live, order, call_id)
        if run is None:
            return value
        try:
            fn = run.fn
            if fn is None:
                result, error, ms = run_tool(run.tool, run.args, self._timer)
            else:
                result, error, ms = run_callable(fn, self._timer)
        except BaseException:
            self._abandon()
            raise
        return self._end(run, result, error, ms)

    async def acall(
        self,
        tool: str,
        args: dict[str, Any] | None = None,
        *,
        requested_tool: str | None = None,
        live: Callable[[], Any] | None = None,
        order: Any = None,
        call_id: str | None = None,
    ) -> Any:
        """:meth:`call` for async code: the same semantics in every mode, for async and sync tools.

        An async tool (or a ``live`` callable returning an awaitable) is awaited on the caller's event loop,
        with no thread hop; a sync one runs inline. Many ``acall`` may run at once (``asyncio.gather``).
        """
        run, value = self._begin(tool, args, requested_tool, live, order, call_id)
        if run is None:
            return value
        timer = self._timer
        fn = run.fn
        if fn is None:
            tool_fn, kwargs = run.tool.fn, run.args
            assert tool_fn is not None  # _plan refused a tool without a function
            fn = lambda: tool_fn(**kwargs)  # noqa: E731
        try:
            start = timer()
            error: Exception | None = None
            try:
                result = fn()
                if inspect.isawaitable(result):
                    result = await result
            except Exception as e:  # recorded, then raised again
                result, error = None, e
            ms = round((timer() - start) * 1000, 3)
        except BaseException:  # a cancellation, an interrupt: nothing is recorded
            self._abandon()
            raise
        return self._end(run, result, error, ms)

    def _check_label(self, text: Any, what: str) -> str:
        """A note kind or phase name, checked, and redacted as any text is (a label is no place for a secret)."""
        if type(text) is not str or not text.strip():
            got = "a blank string" if isinstance(text, str) else type(text).__name__
            raise TapeError(f"{self.path}: a {what} must be a non-blank string, got {got}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            raise TapeError(f"{self.path}: {what} is not valid UTF-8 text ({e.reason})") from None
        return self._redactor.redact_text(text)

    def _extra(self, kind: EventKind, fields: dict[str, Any]) -> None:
        """Write a note or phase line where this run's lines go, and log it; the caller holds the lock."""
        if self._closed:
            raise TapeError(f"{self.path}: tape is closed")
        try:
            line = dump_line({"type": kind, **fields, "recorded_at": iso(self._clock())})
        except (TypeError, TapeError) as e:  # an integer beyond 64 bits, a string that is not text...
            raise TapeError(f"{self.path}: this {kind} cannot be recorded: {e}") from None
        if self._writer is not None:
            self._writer.append(line)
        elif self.mode == "fill" and self._index is not None:
            self._pending_fill.append(line)  # the candidate, if a miss opens one, starts with the hits and these
        self._emit(kind, **fields)

    # ---- the two halves of a call ---------------------------------------------------
    def _begin(
        self,
        tool: str,
        args: dict[str, Any] | None,
        requested_tool: str | None,
        live: Callable[[], Any] | None,
        order: Any,
        call_id: str | None,
    ) -> tuple[_Run | None, Any]:
        """Decide a call under the tape's lock: ``(None, result)`` when the tape serves it (a hit, an override),
        ``(run, None)`` when it runs live (then :meth:`_end` finishes it); raises a drift, miss or recorded error.
        """
        if type(tool) is not str or not tool.isascii():  # isascii is a flag test: the common case costs nothing
            check_tool_name(tool, self.path)
        args = {} if args is None else args
        if live is not None and not callable(live):
            raise TapeError(f"{self.path}: {tool}: live= takes a callable with no arguments, not {type(live).__name__}")
        extra = None
        order_json = None
        if order is not None or call_id is not None:
            extra, order_json = self._line_extra(tool, order, call_id)
        with self._mu:  # every decision and every write of this tape holds it; a tool never runs under it
            if self._closed:
                raise TapeError(f"{self.path}: tape is closed")
            self._seq += 1
            seq = self._seq
            alone = self._active == 0  # no call of this tape is running live
            redacted, key, passed = call_args(self._redactor, tool, args, seq)
            policy = self._tool_policies.get(tool, self._default_policy)  # = config.policy(tool), without a call
            if self.mode == "record" or policy.live:
                c = _Call(seq, tool, args, live, passed, redacted, key, requested_tool, extra)
                if self.mode != "record":
                    t = self._tool(tool, live)
                    self._emit("live", seq=seq, tool=tool, key=key, policy="live", fingerprint=t.fingerprint)
                return self._plan(c, write=self.mode == "record"), None

            index = self._index
            m = self._matcher
            hit = m.used.take(key) if m is not None and order_json is None else None  # the common hit, inline
            if hit is not None:
                verdict, j = HIT, hit
            elif m is None:
                verdict, j = OPEN, -1
            else:
                verdict, j = m.judge(tool, key, order_json)
            i = j if verdict == HIT else None
            if self._overrides and seq in self._overrides:
                return None, self._override(seq, tool, key, i)
            tolerated: list[dict[str, Any]] | None = None
            if i is None:  # no recording with this key: a drift (or a tolerated hit), else a miss
                c = _Call(seq, tool, args, live, passed, redacted, key, requested_tool, extra)
                if verdict == MISS:
                    return self._miss(c)
                target: int | None = j
                if verdict != DRIFT:
                    if self._alt is not None:
                        served, result = self._alt_hit(seq, tool, key)
                        if served:
                            return None, result
                    target = None
                    if m is not None:
                        target = m.drift_target(
                            tool, seq, redacted, alone=alone and order_json is None, unplaced=verdict == OPEN_UNPLACED
                        )
                if target is None:
                    return self._miss(c)
                tolerated, excused = self._tolerated(tool, redacted, target)
                if tolerated is None:
                    self._drift(seq, tool, key, redacted, target, excused)
                i = target
            assert index is not None
            if self.registry is not None and self._fp_ok.get(tool) != index.fingerprints[i]:
                self._check_fingerprint(i, seq, tool, policy)
            if index.expires and i in index.expires and self._expired(index.expires[i]):
                stale = policy.stale_policy or self.config.stale_policy
                self._counts["stale"] += 1
                self._emit("stale", seq=seq, tool=tool, key=key, expires_at=index.expires[i], policy=stale)
                if stale == "error":
                    raise TapeStale(
                        f"{self.path}: step {seq} ({tool}) expired at {index.expires[i]} "
                        f"(stale policy 'error'; re-record it with mode='fill' after expiring)"
                    )
                if stale == "miss":
                    c = _Call(seq, tool, args, live, passed, redacted, key, requested_tool, extra)
                    return self._miss(c, reason="expired", near=i)
            self._consumed[i] = 1
            self._counts["tape_hits"] += 1
            self._after = seq
            if tolerated is not None:  # served in place of a drift: every difference is excused
                self._counts["tolerated_hits"] += 1
                self._emit(
                    "hit",
                    seq=seq,
                    tool=tool,
                    key=key,
                    step=index.seqs[i],
                    recorded_key=index.keys[i],
                    tolerated=tolerated,
                    # the arguments as called (redacted and canonical, as a drift logs them): check judges the
                    # hit again by value, under the rules as they are then, against the golden's recording
                    args=redacted,
                )
            else:  # the hot path: the event written directly, the step's status set here
                if self._log is not None:
                    self._log.emit("hit", seq=seq, tool=tool, key=key, step=index.seqs[i])
                add_status(self._status, index.seqs[i], "hit")
            result, error = index.outcome(i, self._fd)
            if self._writer is not None or self.mode == "fill":
                self._carry(seq, i)
            if error is not None:
                raise_recorded(error, tool, seq)
            if self._codecs.get(tool, _UNKNOWN) is None:  # the common case: no codec, the JSON form
                return None, result
            return None, self._typed(tool, result)

    def _end(self, run: _Run, result: Any, error: Exception | None, ms: float) -> Any:
        """Finish a call that ran live: count it, write its line (with ``run.write``), return what it returned.

        The line is built outside the lock (a result of megabytes does not hold up the other calls); only its
        append, the tool line before it and the counters are under it."""
        try:
            value = result
            data: Any = None
            unrecordable = ""
            if error is None:
                codec = self._codecs.get(run.name, _UNKNOWN)
                data, value, unrecordable = result_form(result, self._codec(run.name) if codec is _UNKNOWN else codec)
            t = run.tool
            if run.write:
                # The tool ran: its call is written whatever happens now (see outcome_line).
                assert run.stamp is not None
                line, recorded_error, problem = outcome_line(
                    seq=run.seq,
                    name=run.name,
                    tool=t,
                    key=run.key,
                    args_json=stored_args(self._redactor, run.passed, run.redacted),
                    stamp=run.stamp,
                    ms=ms,
                    result=data,
                    error=error,
                    redactor=self._redactor,
                    requested_tool=run.requested_tool,
                    extra=run.extra,
                    unrecordable=unrecordable,
                )
        except BaseException:  # an interrupt while the line was built: nothing is written
            self._abandon()
            raise
        with self._mu:
            self._active -= 1
            self._counts["live_tool_calls"] += 1
            if run.seq > self._after:  # calls running at once may end in any order
                self._after = run.seq
            if t.side_effect:
                self._counts["real_side_effects"] += 1
            if run.write:
                if self._writer is None:
                    raise TapeError(
                        f"{self.path}: the tape was closed while {run.name} (step {run.seq}) ran; its call "
                        "was not recorded"
                    )
                manifest = b""
                if run.name not in self._written_tools:  # another call of the tool may have written it meanwhile
                    manifest = run.manifest or self._manifest_bytes(run.name)
                self._writer.append(manifest + line)
                self._written_tools.add(run.name)
                self._emit(
                    "record" if self.mode == "record" else "live",
                    seq=run.seq,
                    tool=run.name,
                    key=run.key,
                    fingerprint=t.fingerprint,
                    ms=ms,
                    side_effect=t.side_effect,
                    error=recorded_error,
                )
                if problem:
                    raise TapeError(
                        f"{run.name} (step {run.seq}) {problem}; the call was recorded with this as its error"
                    )
            elif unrecordable:
                raise TapeError(f"{run.name} (step {run.seq}) {unrecordable}")
        if error is not None:
            raise error
        return value

    def _abandon(self) -> None:
        """A live call interrupted before it returned (a cancellation): nothing is written."""
        with self._mu:
            self._active -= 1

    def _plan(self, c: _Call, *, write: bool) -> _Run:
        """Call ``c`` about to run live; with ``write``, everything about its line that can fail is settled here,
        before the tool runs. The caller holds the lock."""
        t = self._tool(c.name, c.fn)
        if c.fn is None and t.fn is None:
            raise TapeError(
                f"{self.path}: tool {c.name!r} has no function to run (registered as a contract): pass live="
            )
        stamp = None
        manifest = b""
        if write:
            assert self._writer is not None
            stamp = line_stamp(c.seq, c.name, t, self.config.policy(c.name), self._clock(), c.key, c.requested_tool)
            if c.name not in self._written_tools:
                manifest = self._manifest_bytes(c.name)  # built now (it can fail); written with the first call line
        self._active += 1
        return _Run(
            c.seq,
            c.name,
            c.args,
            c.fn,
            c.passed,
            c.redacted,
            c.key,
            c.requested_tool,
            c.extra,
            tool=t,
            stamp=stamp,
            manifest=manifest,
            write=write,
        )

    def _line_extra(self, tool: str, order: Any, call_id: Any) -> tuple[dict[str, Any], bytes | None]:
        """The ``order`` and ``call_id`` fields of a call's line, and the order's canonical JSON (how a place is
        looked up)."""
        extra: dict[str, Any] = {}
        order_json = None
        if order is not None:
            try:
                value = self._redactor.redact(json_form(order, "order"))  # a tuple and a list: the same place
                order_json = canonical_json(value)
            except TypeError as e:
                raise TapeError(
                    f"{self.path}: {tool}: order={order!r} must be a JSON value such as (turn, index) ({e})"
                ) from None
            extra["order"] = value
        if call_id is not None:
            if not isinstance(call_id, str):
                raise TapeError(f"{self.path}: {tool}: call_id must be a string, got {type(call_id).__name__}")
            extra["call_id"] = self._redactor.redact_text(call_id)
        return extra, order_json

    def _typed(self, tool: str, result: Any) -> Any:
        """A recorded result as the tool's codec rebuilds it (its return type), else as recorded."""
        codec = self._codec(tool)
        if codec is None or result is None:
            return result
        try:
            return codec.decode(result)
        except Exception as e:  # noqa: BLE001 - a redacted field, an older tape: the JSON form, said once
            if tool not in self._codec_warned:
                self._codec_warned.add(tool)
                warnings.warn(
                    f"{self.path}: {tool}: the recorded result could not be rebuilt as the tool's return type "
                    f"({type(e).__name__}); returning its JSON form",
                    CodecWarning,
                    stacklevel=4,
                )
            return result

    def _codec(self, tool: str) -> Codec | None:
        try:
            return self._codecs[tool]
        except KeyError:
            t = self.registry.get(tool) if self.registry is not None else None
            codec = self._codecs[tool] = codec_for(t.returns) if t is not None else None
            return codec

    def _tolerated(self, tool: str, redacted: Any, j: int) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
        """Whether this call (``redacted``: its canonical, redacted arguments) may be served recording ``j``'s
        outcome although their keys differ: ``(excuses, [])`` when the session's ``[compare.rules]`` and
        ``[diff] ignore`` (without the volatile defaults: an argument named ``date`` selects data) excuse every
        difference, else ``(None, the differences they did excuse)``. No difference at all (a tape written under
        older redaction rules, a hand edit) excuses nothing: that stays a drift."""
        rules, ignore = self._replay_rules()
        if rules is None:
            return None, []
        assert self._matcher is not None
        try:
            recorded = canon(self._redactor.redact(self._matcher.index.record(j, self._fh).args))
            judged = rules.judge("args", recorded, redacted, tool=tool, hooks=None, ignore=ignore)
            excused = [e.to_json("args") for e in judged.excused]
            if not judged.ok:
                return None, excused
            if ignore.patterns:  # what [diff] ignore left out of the comparison is excused too: say so
                excused += [
                    {"path": format_path(parts, "args"), "rule": "ignore", "text": "ignored ([diff] ignore)"}
                    for parts, _ in diff_parts(recorded, redacted)
                    if ignore.ignores(parts)
                ]
        except TapeError:  # nested too deeply to compare: the drift says so
            return None, []
        if not excused:
            return None, []
        excused.sort(key=lambda e: str(e["path"]))
        return excused, []

    def _replay_rules(self) -> tuple[Rules | None, IgnoreRules]:
        """The rules that may excuse a replayed call's differences (looked up once per tape); None when there
        are none."""
        found = self._rules
        if found is None:
            settings = self.config.compare_for(session_name(self.path, self.config.tapes_dir))
            ignore = self.config.replay_ignore()
            found = self._rules = (settings.rules if settings.rules or ignore.patterns else None, ignore)
        return found

    def _drift(
        self, seq: int, tool: str, key: str, redacted: Any, j: int, excused: list[dict[str, Any]] | None = None
    ) -> NoReturn:
        """Raise the drift of this call against recording ``j`` (consumed: it is accounted for). ``excused``: the
        differences the rules excused (the others were not), for the run log."""
        assert self._matcher is not None
        index = self._matcher.index
        self._consumed[j] = 1
        self._matcher.drifted.add(j)
        recorded = index.record(j, self._fh)
        # a tape written under older rules: what they let through stays out of the run log and the error
        recorded_args = self._redactor.redact(recorded.args)
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
            changes=[[c.path, _jsonable(c.old), _jsonable(c.new)] for c in changes],
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

    def contract(
        self,
        name: str,
        *,
        schema: dict[str, Any] | None = None,
        description: str | None = None,
        version: str = "0",
        output_schema: dict[str, Any] | None = None,
        annotations: dict[str, Any] | None = None,
        title: str | None = None,
        side_effect: bool = False,
        ttl: float | None = None,
        returns: Any = None,
    ) -> Tool:
        """Make a framework's own definition of tool ``name`` its contract on this tape (see
        :meth:`ToolRegistry.contract <tapetui.core.registry.ToolRegistry.contract>`).

        It goes into the tape's registry (one is made when the tape has none), replacing a tool of that
        name: replay checks the recorded fingerprints against it, and a recording writes its tool line
        now, whether the tool is called or not (the tape then holds every tool the model was offered).
        Cheap and idempotent for the same definition, so an adapter may call it at every call.

        Raises:
            TapeError: a value that is not what its keyword takes.
        """
        fields = (schema, description, version, output_schema, annotations, title, side_effect, ttl)
        try:
            ident: Any = (canonical_json(list(fields)), id(returns))
        except TypeError:  # not JSON: make_contract says what is wrong
            ident = None
        with self._mu:
            known = self._contracts.get(name)
            if known is not None and ident is not None and known[0] == ident:
                return known[1]
            tool = make_contract(
                name,
                schema=schema,
                description=description,
                version=version,
                output_schema=output_schema,
                annotations=annotations,
                title=title,
                side_effect=side_effect,
                ttl=ttl,
                returns=returns,
            )
            if self.registry is None:
                self.registry = ToolRegistry()
            self.registry.put(tool)
            for cache in (self._live_tools, self._fp_ok, self._codecs, self._adhoc):
                cache.pop(name, None)
            self._contracts[name] = (ident, tool)
            self._written_tools.discard(name)  # a redefined tool: its next call line comes after its new tool line
            if self.mode == "record" and self._writer is not None:
                # what the model was offered, called or not (an MCP server's listing): on the tape now
                self._writer.append(self._manifest_line(name))
            return tool

    def stats(self) -> dict[str, Any]:
        """Counters of this run: the fixed keys of DESIGN §3 and a few more.

        ``run_log``: ``"written"``, ``"off"`` (``run_log=False``) or ``"failed: PATH: reason"`` when it could
        not be written (a read-only checkout): the run went on without it, with a ``RunLogWarning``.
        """
        log = self._log
        return {
            "mode": self.mode,
            "steps": self._seq,
            **self._counts,
            # recorded steps per status, each counted once by runlog.STATUS_PRECEDENCE (the fixed counters above
            # count events: a step that went stale, then missed, is one stale and one miss there, one miss here)
            "statuses": status_counts(self._status),
            "fingerprint_checks_off": sorted(self._allowed_fp),
            "run_log": "off" if log is None else (f"failed: {log.problem}" if log.problem else "written"),
        }

    @property
    def unused_steps(self) -> list[int]:
        """Recorded steps not consumed so far (all of them are reported at close)."""
        if self._index is None or self._used is None:
            return []
        return [self._index.seqs[i] for i in self._used.unused()]

    def close(self, error: BaseException | None = None) -> None:
        """Report unused steps, write the ``end`` event, release files. Idempotent.

        A call still running live when the tape closes raises a TapeError when it returns: close a tape
        after its calls (``async with`` / ``with`` around the whole agent run)."""
        with self._mu:
            self._close(error)

    def _close(self, error: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._index is not None and self._used is not None and self.mode != "record":
                idx = self._index
                unused = self._used.unused()
                self._counts["unused"] = len(unused)
                for i in unused:
                    add_status(self._status, idx.seqs[i], "unused")
                if self._log is not None and unused:
                    self._log.emit_many(
                        [
                            {"event": "unused", "seq": idx.seqs[i], "tool": idx.tools[i], "key": idx.keys[i]}
                            for i in unused
                        ]
                    )
            if self._log is not None:
                end: dict[str, Any] = {"stats": self.stats()}
                if error is not None:
                    end["error"] = {"type": type(error).__name__, "message": self._redactor.redact_text(str(error))}
                self._log.emit("end", **end)
        finally:
            self._release()

    # ---- internals ---------------------------------------------------------------
    def _open_session(self, mode: str) -> None:
        """Take the session's locks (see :mod:`tapetui.core.locks`) and open or claim its files."""
        if mode != "replay":
            prepare_recording(self.path)
        if mode == "record":
            with gate(self.path):
                self._lock = recording_lock(self.path)
                self._claim_target("record")
            return
        if mode == "fill":
            with gate(self.path):
                self._lock = recording_lock(self.path)
        else:
            try:  # a replay writes only its run log; on a read-only checkout it runs unlocked
                self._lock = recording_lock(self.path)
            except LockBusy:
                raise
            except TapeError:
                self._lock = None
        try:
            exists = self.path.exists()
        except OSError as e:  # a name too long for the file system
            raise TapeError(f"{self.path}: {e.strerror or e}") from None
        if exists:
            self._index = read_index(self.path, keep_bytes=True)
            self._fh = open(self.path, "rb")  # noqa: SIM115 -- held for the tape's life, closed by _release
            self._fd = self._fh.fileno()
            self._used = Consumed(self._index)
            self._consumed = self._used.flags
            self._matcher = Matcher(self._index, self._used, self._fh, self._redactor)
            cand = candidate_path(self.path)
            if mode == "fill" and os.path.lexists(cand):
                # An earlier fill that was never reviewed (or was killed) ran its misses live: replay those
                # too, so a side effect runs once, not at every fill.
                self._alt = Filled.open(cand, self._index, self._fh)
        elif mode == "replay":
            raise TapeError(f"{self.path}: no tape to replay (record it first: mode='record')")
        else:
            with gate(self.path):
                self._claim_target("fill")

    def _claim_target(self, origin: str, body: bytes = b"") -> None:
        """Pick this recording's file (see :func:`~tapetui.core.store.recording_target`) and start it there; the
        caller holds the session's gate."""
        self.target, moved = recording_target(self.path, golden_in_use=origin == "fill" and self._index is not None)
        if moved is not None:
            note = f"{self.path}: a pending candidate nobody reviewed was moved to {moved}"
            self.notices.append(note)
            _log.warning("%s", note)
        self._start_target(origin, body)

    def _release(self) -> None:
        """Close every file and lock this tape holds (idempotent; also after a failed open)."""
        for res in (self._writer, getattr(self, "_log", None), self._fh):
            if res is not None:
                res.close()
        self._writer = self._fh = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._alt is not None:
            self._alt.close()
            self._alt = None

    def _start_target(self, origin: str, body: bytes = b"") -> None:
        assert self.target is not None
        labels = self._redactor.redact(self.labels) if self.labels else None
        atomic_write(self.target, session_line(created_at=iso(self._clock()), origin=origin, labels=labels) + body)
        self._writer = Appender(self.target, fsync=self._fsync)

    def _emit(self, event: EventKind, **fields: Any) -> None:
        at, status = step_status(event, fields)
        if at is not None and status is not None:
            add_status(self._status, at, status)
        if self._log is not None:
            self._log.emit(event, **fields)

    def _tool(self, name: str, live: Callable[[], Any] | None = None) -> Tool:
        """The tool a live call runs as: the registered one, else (called with ``live=``) a contract that
        holds only its name, so that registering its real contract later shows as contract drift."""
        t = self._live_tool(name)
        if t is not None:
            return t
        if live is not None:
            t = self._adhoc.get(name)
            if t is None:
                t = self._adhoc[name] = tool_as_written(make_contract(name), self._redactor)
            return t
        if self.registry is None:
            raise TapeError(f"{self.path}: tool {name!r} must run live but the tape has no registry (or pass live=)")
        return self.registry[name]  # the registry's error names the tools it has

    def _live_tool(self, name: str) -> Tool | None:
        """The registered tool as this tape writes it (:func:`~tapetui.core.live.tool_as_written`), or None."""
        t = self._live_tools.get(name)
        if t is None:
            base = self.registry.get(name) if self.registry is not None else None
            if base is None:
                return None
            t = self._live_tools[name] = tool_as_written(base, self._redactor)
        return t

    def _expired(self, expires_at: str) -> bool:
        when = parse_iso(expires_at)
        return when is not None and when <= self._clock()

    def _check_fingerprint(self, i: int, seq: int, tool: str, policy: ToolPolicy) -> None:
        """Compare call ``i``'s fingerprint with the live tool's, computed in the form the call was recorded in."""
        live = self._live_tool(tool)
        index = self._index
        assert index is not None
        recorded = index.fingerprints[i]
        change = None
        if live is not None and recorded:
            change = contract_change(
                live,
                recorded,
                form=index.fp_forms.get(recorded, 1),
                old=index.manifests.get(tool),
                redactor=self._redactor,
                where=f"{self.path}:{index.lines[i]}",
                ignore=self.config.fingerprint_ignore(tool),
            )
        if change is None:
            self._fp_ok[tool] = recorded  # the same tool and fingerprint again need no check
            return
        self._counts["fingerprint_changes"] += 1
        allowed = not policy.check_fingerprint
        if allowed:
            self._allowed_fp.add(tool)
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
        )
        if not allowed:
            raise ToolDriftError(
                path=str(self.path),
                seq=seq,
                tool=tool,
                recorded=recorded,
                live=change.live,
                explanation=change.explanation,
            )

    def _override(self, seq: int, tool: str, key: str, i: int | None) -> Any:
        if i is not None:
            self._consumed[i] = 1
        self._counts["overrides"] += 1
        self._counts["tape_hits"] += 1
        self._after = seq
        self._emit("hit", seq=seq, tool=tool, key=key, override=True)
        result, error = self._overrides[seq]
        if error is not None:
            raise error
        return result

    def _nearest(
        self, tool: str, seq: int, redacted: Any, near: int | None
    ) -> tuple[int | None, list[tuple[str, Any, Any]]]:
        """The nearest recorded call of ``tool`` (``near`` when given), and how ``redacted`` differs from it."""
        best = near if near is not None or self._used is None else self._used.nearest(tool, seq)
        if best is None or self._matcher is None:
            return None, []
        changes = self._matcher.changes(best, redacted)
        return self._matcher.index.seqs[best], [(c.path, c.old, c.new) for c in changes]

    def _miss(self, c: _Call, reason: str = "", near: int | None = None) -> tuple[_Run | None, Any]:
        """Call ``c`` is not on the tape: a TapeMiss in replay; in fill, served by an earlier fill or run live."""
        seq, tool, key, redacted = c.seq, c.name, c.key, c.redacted
        self._counts["tape_misses"] += 1
        nearest, changes = self._nearest(tool, seq, redacted, near)
        self._emit(
            "miss",
            seq=seq,
            tool=tool,
            key=key,
            args=redacted,
            nearest=nearest,
            reason=reason or None,
            changes=[[p, _jsonable(o), _jsonable(n)] for p, o, n in changes],
        )
        if self.mode == "replay":
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
        if reason and self._alt is not None:  # an expired entry an earlier fill already re-recorded
            served, result = self._alt_hit(seq, tool, key)
            if served:
                return None, result
        if self._writer is None:
            self._open_fill_candidate()
        return self._plan(c, write=True), None

    def _open_fill_candidate(self) -> None:
        """First miss of a fill over a golden: the candidate starts with the hits so far."""
        assert self._index is not None
        body = b"".join(p if isinstance(p, bytes) else self._carried_line(*p) for p in self._pending_fill)
        self._pending_fill = []
        with gate(self.path):
            self._claim_target("fill", body)

    def _manifest_line(self, tool: str, index: TapeIndex | None = None) -> bytes:
        """The tool line to write before ``tool``'s first call line, once (empty after that)."""
        if tool in self._written_tools:
            return b""
        line = self._manifest_bytes(tool, index)
        self._written_tools.add(tool)
        return line

    def _manifest_bytes(self, tool: str, index: TapeIndex | None = None) -> bytes:
        live = self._live_tool(tool) or self._adhoc.get(tool)
        if live is not None:
            return dump_line(live.manifest.to_record(live.side_effect))
        index = index or self._index
        assert index is not None
        # a tool line copied from an older tape: what it holds verbatim (form 1) is redacted, its fingerprint kept
        return redact_manifest_line(index.manifest_lines.get(tool, b""), self._redactor)

    def _carried_line(self, run_seq: int, i: int, alt: bool) -> bytes:
        """Recorded call ``i`` (of the golden, or with ``alt`` of the earlier fill) renumbered to ``run_seq``."""
        if alt:
            assert self._alt is not None
            index, fh = self._alt.index, self._alt.fh
        else:
            assert self._index is not None
            index, fh = self._index, self._fh
        return self._manifest_line(index.tools[i], index) + index.renumbered(i, run_seq, fh)

    def _carry(self, seq: int, i: int, alt: bool = False) -> None:
        """In fill mode the candidate is the session as played: hits are carried into it."""
        if self._writer is None:
            self._pending_fill.append((seq, i, alt))
        else:
            self._writer.append(self._carried_line(seq, i, alt))

    def _alt_hit(self, seq: int, tool: str, key: str) -> tuple[bool, Any]:
        """Serve a call from what an earlier fill ran live; ``(False, None)`` when it has none."""
        alt = self._alt
        if alt is None:
            return False, None
        live = self._live_tool(tool)  # the contract as this tape records it: what the earlier fill wrote too
        a = alt.take(key, self._expired, live.fingerprint if live is not None else None)
        if a is None:
            return False, None
        self._counts["tape_hits"] += 1
        self._after = seq
        self._emit("hit", seq=seq, tool=tool, key=key, step=seq, source="candidate")
        result, error = alt.index.outcome(a, alt.fh.fileno())
        if self._writer is None:  # the earlier candidate is not this session as played: write the new one
            self._open_fill_candidate()
        self._carry(seq, a, alt=True)
        if error is not None:
            raise_recorded(error, tool, seq)
        return True, self._typed(tool, result)


def _jsonable(v: Any) -> Any:
    return "(absent)" if v is MISSING else v
