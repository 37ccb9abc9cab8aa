"""``Tape``: record an agent session's boundaries (its tool calls), or replay them offline.

``Tape`` is a facade over parts with one job each (``docs/architecture.md``, "The engine"):

- :class:`~tapetui.core.session.SessionFiles`: the session's files and locks (open, claim, release);
- :class:`~tapetui.core.decide.Decider`: the decision for one request (hit, tolerated hit, drift, miss,
  override, served by an earlier fill), as a :class:`~tapetui.core.decide.Decision` value that the tape
  then serves; a tool call is one kind of boundary, and that machinery knows nothing of tools;
- :class:`~tapetui.core.fill.FillCandidate`: what a fill writes for review;
- :class:`~tapetui.core.live.LiveStep`: one call run live and its line (re-record uses it too);
- :class:`~tapetui.core.matching.Matcher`, :mod:`~tapetui.core.runlog`, :mod:`~tapetui.core.contract`: matching,
  the run's events, a tool contract's change.

What stays here is the tool boundary itself: its public calls, the tool a call runs as, its fingerprint and
expiry checks, the counters and the run log's ``end``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Unpack

from tapetui.core.between import BetweenCalls
from tapetui.core.clock import Clock, Timer, event_clock, iso, perf_timer, utcnow
from tapetui.core.config import Config, config_for_tape
from tapetui.core.decide import Decider, Tolerance
from tapetui.core.declared import Contract, ContractFields
from tapetui.core.errors import InvalidValue, TapeError
from tapetui.core.fill import FillCandidate
from tapetui.core.index import Consumed, TapeIndex
from tapetui.core.live import LiveStep, call_args, check_tool_name
from tapetui.core.matching import Matcher
from tapetui.core.modelserving import ModelServing, turn_options
from tapetui.core.modes import MODES, Mode
from tapetui.core.redact import Redactor
from tapetui.core.registry import Tool, ToolRegistry, make_contract
from tapetui.core.runlog import RunLog, status_counts
from tapetui.core.serving import Request, ToolServing
from tapetui.core.session import SessionFiles
from tapetui.core.stepspans import StepSpans, load_spans, tool_span
from tapetui.core.store import runlog_path, session_name
from tapetui.core.toolbox import Toolbox

__all__ = ["MODES", "Mode", "Tape"]


# stats() counters, in the order stats() lists them (after mode and steps)
_COUNTERS: tuple[str, ...] = ("tape_hits", "tape_misses", "live_tool_calls", "real_side_effects", "drift_events")
_COUNTERS += ("fingerprint_changes", "stale", "overrides", "unused", "tolerated_hits")


class Tape(ToolServing, ModelServing, BetweenCalls):
    """One agent session on disk, recorded or replayed.

    Args:
        path: the golden tape (``name.jsonl``).
        mode: ``record`` (run every call live, write a fresh tape, a candidate when a
            golden exists), ``replay`` (recorded results only; never runs a tool) or
            ``fill`` (replay, and run only misses live, writing them to a candidate); a :class:`Mode` or
            its string.
        registry: the live tools; needed to record, to fill and to check fingerprints.
        config: redaction rules and per-tool policy. Without it, the ``tapes.toml`` found from the
            tape's folder up to the repository root (a folder holding ``.git``) applies, else defaults
            (see :func:`tapetui.core.config.config_for_tape`).
        labels: free-form session labels written to the header (model, prompt version...).
        clock / timer: injectable time sources (deterministic sample tapes use them).
        run_log: write the run's events beside the tape (``name.run.jsonl``).
        fsync: fsync each appended record (slower; crash-proof even against power loss).
        tracer: live spans: an OpenTelemetry ``Tracer`` (the extra ``tapetui[otel]``) or any
            :class:`~tapetui.core.stepspans.StepSpans`; each call and model turn is a span with its fingerprint
            and outcome (``tapes.toml``'s ``[otel] enabled = true`` does it with the global tracer provider).
        live: the boundaries that run live in this run without editing tapes.toml: tool names, and
            ``"model"`` for the model turns (a cut-point replay). In replay each runs, consumes the recording at
            its place and is compared with it: a difference is reported by path (``behaviour`` on its ``live``
            event), never dropped.
        on_drift: ``"raise"`` (default), or ``"live"``: in ``fill``, from the first drifted model turn on
            everything runs live into the candidate (re-baselining after an intended prompt change).
    """

    # the session's files and locks; a writer that publishes a recording itself records into memory
    # (tapetui.core.session.DraftFiles, the trace importer's)
    _session_files: type[SessionFiles] = SessionFiles

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
        live: Iterable[str] = (),
        on_drift: str = "raise",
        tracer: Any = None,
    ) -> None:
        if mode not in MODES:
            raise InvalidValue(f"unknown tape mode {mode!r}; valid modes: {', '.join(MODES)}")
        live_names, on_drift = turn_options(live, on_drift)
        self.path = Path(path)
        self.mode = Mode(mode)
        self._records = self.mode is Mode.RECORD  # every call runs live and is written
        self.config = config or config_for_tape(self.path)  # tapes.toml from the tape's folder up to the repo root
        self.labels = dict(labels or {})
        self._clock = clock
        self._timer = timer
        self._redactor: Redactor = self.config.redactor()
        self._spans: StepSpans | None = load_spans(tracer, self.config.otel_enabled)  # live spans; None: no cost
        self._seq = 0  # steps so far: tool calls and model turns, one sequence
        self._tool_n = 0  # tool calls so far: a call's position among the tape's tool calls (the matcher's rule 3)
        self._overrides: dict[int, tuple[Any, BaseException | None]] = {}
        self._counts = dict.fromkeys(_COUNTERS, 0)
        self._status: dict[int, str] = {}  # recorded step → its one status in this run (runlog.STATUS_PRECEDENCE)
        self._tools = Toolbox(self.path, registry, self.config, self._redactor)
        self._contracts: dict[str, tuple[Any, Tool]] = {}  # name → (its definition, as contract() last saw it)
        self._tool_policies = self.config.tools
        self._default_policy = self.config.policy("")  # what a tool without a [tools.NAME] table gets
        self._after = 0  # the step of the last call line written or served: where a note or phase line goes
        self._phase: str | None = None  # the phase Tape.phase named last
        self._closed = False
        # One lock guards every decision and write of this tape (calls may come from many threads and tasks);
        # it is never held while a tool runs. _active counts the calls running live.
        self._mu = threading.Lock()
        self._active = 0
        self._log: RunLog | None = None
        self._files = files = self._session_files(
            self.path, redactor=self._redactor, clock=clock, labels=self.labels, fsync=fsync
        )
        try:
            files.open(mode)
        except BaseException:
            files.release()
            raise
        self._index: TapeIndex | None = files.index
        self._fd = files.fd
        self._used: Consumed | None = None  # which recorded calls this run has used (when there is a golden)
        self._fill: FillCandidate | None = None  # fill over a golden: its candidate, opened at the first miss
        matcher = None
        if files.index is not None:
            self._used = Consumed(files.index)
            matcher = Matcher(files.index, self._used, files.fh, self._redactor)
            if self.mode == Mode.FILL:
                self._fill = FillCandidate(files.index, files.fh, files.earlier_fill, self._tool_line)
        session = self._session = session_name(self.path, self.config.tapes_dir)
        tolerance = Tolerance(self.config, session, self._redactor, matcher) if matcher is not None else None
        self._decider = Decider(
            matcher,
            overrides=self._overrides,
            earlier_fill=files.earlier_fill,
            recorded_under=self._tools.recorded_under,
            expired=self._expired,
            tolerance=tolerance,
        )
        self._init_turns(live_names, on_drift)
        if run_log:
            sha = files.index.sha256() if files.index is not None else None
            header = {"mode": str(self.mode), "tape": self.path.name, "started": iso(clock()), "golden_sha256": sha}
            self._log = RunLog(runlog_path(self.path), header, clock=event_clock(clock))

    @property
    def target(self) -> Path | None:
        """The file this run records into (the golden, or a candidate beside it), once claimed."""
        return self._files.target

    @property
    def notices(self) -> list[str]:
        """What this tape did that a person should hear of (a pending candidate moved aside)."""
        return self._files.notices

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
        if self._spans is not None:
            with tool_span(self._spans, tool, call_id, self._tools.live_tool(tool), self._redactor):
                step, value = self._begin(tool, args, requested_tool, live, order, call_id)
                return value if step is None else self._run(step)
        step, value = self._begin(
            tool, args, requested_tool, live, order, call_id
        )  # a hit returns from here, with no call more
        return value if step is None else self._run(step)

    def _run(self, step: LiveStep) -> Any:
        """Run a call live (its decision said so) and write what it returned or raised."""
        try:
            result, error, ms = step.run(self._timer)
        except BaseException:
            self._abandon()
            raise
        return self._end(step, result, error, ms)

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
        if self._spans is not None:
            with tool_span(self._spans, tool, call_id, self._tools.live_tool(tool), self._redactor):
                step, value = self._begin(tool, args, requested_tool, live, order, call_id)
                return value if step is None else await self._arun(step)
        step, value = self._begin(
            tool, args, requested_tool, live, order, call_id
        )  # a hit returns from here, with no await more
        return value if step is None else await self._arun(step)

    async def _arun(self, step: LiveStep) -> Any:
        """:meth:`_run` for ``acall``: an async tool awaited on the caller's loop."""
        try:
            result, error, ms = await step.arun(self._timer)
        except BaseException:  # a cancellation, an interrupt: nothing is recorded
            self._abandon()
            raise
        return self._end(step, result, error, ms)

    # ---- one request: decided, then served ----------------------------------------------
    def _begin(
        self,
        tool: str,
        args: dict[str, Any] | None,
        requested_tool: str | None,
        live: Callable[[], Any] | None,
        order: Any,
        call_id: str | None,
    ) -> tuple[LiveStep | None, Any]:
        """Decide a call under the tape's lock and serve the decision: ``(None, result)`` when the tape serves it
        (a hit, an override), ``(step, None)`` when it runs live (then :meth:`_end` finishes it); raises a drift,
        miss or recorded error."""
        if type(tool) is not str or not tool.isascii():  # isascii is a flag test: the common case costs nothing
            check_tool_name(tool, self.path)
        args = {} if args is None else args
        if live is not None and not callable(live):
            raise TapeError(f"{self.path}: {tool}: live= takes a callable with no arguments, not {type(live).__name__}")
        fields = place = None
        if order is not None or call_id is not None:
            fields, place = self._order_fields(tool, order, call_id)
        with self._mu:  # every decision and every write of this tape holds it; a tool never runs under it
            if self._closed:
                raise TapeError(f"{self.path}: tape is closed")
            self._seq += 1
            self._tool_n += 1
            seq = self._seq
            alone = self._active == 0  # no call of this tape is running live
            redacted, key, passed = call_args(self._redactor, tool, args, seq)
            policy = self._tool_policies.get(tool, self._default_policy)  # = config.policy(tool), without a call
            request: Request = (seq, tool, args, live, passed, redacted, key, requested_tool, fields)
            if self._records or self._all_live:
                return self._plan_live(request, write=True), None
            if policy.live or (self._live_names and tool in self._live_names):
                return self._plan_cut(request, policy="live" if policy.live else "cut"), None
            kind, at, excuses = self._decider.decide(seq, tool, key, redacted, place, alone, self._tool_n)
            if kind == "hit" or kind == "tolerated":
                return self._serve_recording(at, excuses, request, policy)
            return self._serve_other(kind, at, excuses, request)

    def contract(
        self,
        name: str | Contract,
        **fields: Unpack[ContractFields],
    ) -> Tool:
        """Make a framework's own definition of tool ``name`` (or a whole :class:`~tapetui.core.declared.Contract`)
        its contract on this tape (see :meth:`ToolRegistry.contract <tapetui.core.registry.ToolRegistry.contract>`).

        It goes into the tape's registry (one is made when the tape has none), replacing a tool of that
        name: replay checks the recorded fingerprints against it, and a recording writes its tool line
        now, whether the tool is called or not (the tape then holds every tool the model was offered).
        Cheap and idempotent for the same definition, so an adapter may call it at every call.

        Raises:
            TapeError: a value that is not what its keyword takes.
        """
        declared = Contract.of(name, fields)
        name = declared.name
        try:
            ident: Any = declared.identity()
        except TypeError:  # not JSON: make_contract says what is wrong
            ident = None
        with self._mu:
            known = self._contracts.get(name)
            if known is not None and ident is not None and known[0] == ident:
                return known[1]
            tool = make_contract(declared)
            if self.registry is None:
                self.registry = ToolRegistry()
            before = self.registry.get(name)
            self.registry.put(tool)
            # the same contract as written (another adapter's definition of it, with a codec): its line stands
            same_line = before is not None and (before.fingerprint, before.side_effect) == (
                tool.fingerprint,
                tool.side_effect,
            )
            written = name in self._tools.written
            self._tools.forget(name)  # a redefined tool: looked up again; its next call line after its new tool line
            self._contracts[name] = (ident, tool)
            if same_line and written:
                self._tools.written.add(name)
                return tool
            writer = self._files.writer
            if self.mode == Mode.RECORD and writer is not None:
                # what the model was offered, called or not (an MCP server's listing): on the tape now
                writer.append(self._tool_line(name))
            return tool

    def stats(self) -> dict[str, Any]:
        """Counters of this run: the fixed keys of ``docs/format.md`` ("Counters") and a few more.

        ``mode`` (a plain string), ``steps``, the fixed counters, ``statuses`` (recorded steps per status),
        ``fingerprint_checks_off`` (tools whose contract changed under ``check_fingerprint = false``) and
        ``run_log``: ``"written"``, ``"off"``, or ``"failed: PATH: reason"`` when it could not be written (a
        read-only checkout): the run went on without it, with a ``RunLogWarning``.
        """
        log = self._log
        return {
            "mode": str(self.mode),
            "steps": self._seq,
            **self._counts,
            # recorded steps per status, each counted once by runlog.STATUS_PRECEDENCE (the fixed counters above
            # count events: a step that went stale, then missed, is one stale and one miss there, one miss here)
            "statuses": status_counts(self._status),
            "fingerprint_checks_off": sorted(self._tools.checks_off),
            # tools compared on a contract seen in a trace (an imported tape): only the fields it held
            "contracts_from_trace": sorted(self._tools.partial_seen),
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
            if self.mode != Mode.RECORD:
                self._report_unused()
                self._report_unused_turns()
            if self._log is not None:
                end: dict[str, Any] = {"stats": self.stats()}
                if error is not None:
                    end["error"] = {"type": type(error).__name__, "message": self._redactor.redact_text(str(error))}
                self._log.emit("end", **end)
        finally:
            self._release()

    def _release(self) -> None:
        """Close the run log and every file and lock of the session (idempotent)."""
        if self._log is not None:
            self._log.close()
        self._files.release()

    # ---- the tool boundary's own checks --------------------------------------------------
    @property
    def registry(self) -> ToolRegistry | None:
        """The live tools (see the class doc)."""
        return self._tools.registry

    @registry.setter
    def registry(self, registry: ToolRegistry | None) -> None:
        self._tools.registry = registry

    def _tool_line(self, name: str, index: TapeIndex | None = None) -> bytes:
        return self._tools.tool_line(name, index or self._index)
