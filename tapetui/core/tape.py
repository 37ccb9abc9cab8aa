"""``Tape``: record an agent session's tool calls, or replay them offline."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from tapetui.core.canon import canon
from tapetui.core.changes import MISSING
from tapetui.core.clock import Clock, Timer, event_clock, iso, parse_iso, perf_timer, utcnow
from tapetui.core.config import Config, ToolPolicy, config_for_tape
from tapetui.core.contract import contract_change
from tapetui.core.errors import TapeDrift, TapeError, TapeMiss, TapeStale, ToolDriftError
from tapetui.core.files import atomic_write
from tapetui.core.fill import Filled
from tapetui.core.fingerprint import redact_manifest_line
from tapetui.core.index import Consumed, TapeIndex
from tapetui.core.jsondiff import diff_values
from tapetui.core.live import call_args, check_tool_name, line_stamp, outcome_line, run_tool, tool_as_written
from tapetui.core.locks import LockBusy, RecordingLock, gate, recording_lock
from tapetui.core.recorded_errors import raise_recorded
from tapetui.core.redact import Redactor
from tapetui.core.registry import Tool, ToolRegistry
from tapetui.core.runlog import EventKind, RunLog
from tapetui.core.store import candidate_path, prepare_recording, recording_target, runlog_path
from tapetui.core.tapefile import Appender, dump_line, read_index, session_line

__all__ = ["MODES", "Tape"]

MODES = ("record", "replay", "fill")
_log = logging.getLogger("tapetui")
# stats() counters, in the order stats() lists them (after mode and steps)
_COUNTERS: tuple[str, ...] = ("tape_hits", "tape_misses", "live_tool_calls", "real_side_effects", "drift_events")
_COUNTERS += ("fingerprint_changes", "stale", "overrides", "unused")


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
        # (run seq, index, from the earlier fill) of the hits before the first fill miss
        self._pending_fill: list[tuple[int, int, bool]] = []
        self.target: Path | None = None
        self.notices: list[str] = []  # what this tape did that a person should hear of (a candidate rotated)
        self._alt: Filled | None = None  # fill: calls an earlier, unreviewed fill already ran live
        self._lock: RecordingLock | None = None
        self._closed = False

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

    def call(self, tool: str, args: dict[str, Any] | None = None, *, requested_tool: str | None = None) -> Any:
        """Make one tool call through the tape; returns the (recorded or live) result.

        Raises:
            TapeDrift: replay/fill, the step was recorded with other arguments.
            TapeMiss: replay, the call is not on the tape.
            ToolDriftError: the registered tool's fingerprint is not the recorded one.
            TapeStale: an expired entry under the ``error`` stale policy.
            TapeError: a bad argument or result value, a closed tape, a missing tool.
        """
        if self._closed:
            raise TapeError(f"{self.path}: tape is closed")
        if type(tool) is not str or not tool.isascii():  # isascii is a flag test: the common case costs nothing
            check_tool_name(tool, self.path)
        args = {} if args is None else args
        self._seq += 1
        seq = self._seq
        redacted, args_json, key = call_args(self._redactor, tool, args, seq)
        policy = self.config.policy(tool)
        if self.mode == "record":
            return self._live(seq, tool, args, args_json, key, requested_tool, write=True)
        if policy.live:
            self._emit("live", seq=seq, tool=tool, key=key, policy="live", fingerprint=self._tool(tool).fingerprint)
            return self._live(seq, tool, args, args_json, key, requested_tool, write=False)

        index = self._index
        used = self._used
        i = used.take(key) if used is not None else None
        if self._overrides and seq in self._overrides:
            return self._override(seq, tool, key, i)
        if i is not None:
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
                    return self._miss(
                        seq, tool, args, redacted, args_json, key, requested_tool, reason="expired", near=i
                    )
            self._consumed[i] = 1
            self._counts["tape_hits"] += 1
            if self._log is not None:
                self._log.emit("hit", seq=seq, tool=tool, key=key, step=index.seqs[i])
            result, error = index.outcome(i, self._fd)
            if self._writer is not None or self.mode == "fill":
                self._carry(seq, i)
            if error is not None:
                raise_recorded(error, tool, seq)
            return result
        if self._alt is not None:
            served, result = self._alt_hit(seq, tool, key)
            if served:
                return result
        if index is not None:
            j = index.at_seq(seq)
            if j is not None and index.tools[j] == tool and index.keys[j] != key:
                self._consumed[j] = 1
                recorded = index.record(j, self._fh)
                # a tape written under older rules: what they let through stays out of the run log and the error
                recorded_args = self._redactor.redact(recorded.args)
                changes = diff_values(canon(recorded_args), canon(redacted))
                self._counts["drift_events"] += 1
                self._emit(
                    "drift",
                    seq=seq,
                    tool=tool,
                    key=key,
                    recorded_key=recorded.key,
                    recorded_args=recorded_args,
                    args=redacted,
                    changes=[[c.path, _jsonable(c.old), _jsonable(c.new)] for c in changes],
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
                )
        return self._miss(seq, tool, args, redacted, args_json, key, requested_tool)

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
        """Report unused steps, write the ``end`` event, release files. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._index is not None and self._used is not None and self.mode != "record":
                idx = self._index
                unused = self._used.unused()
                self._counts["unused"] = len(unused)
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
        if self._log is not None:
            self._log.emit(event, **fields)

    def _tool(self, name: str) -> Tool:
        if self.registry is None:
            raise TapeError(f"{self.path}: tool {name!r} must run live but the tape has no registry")
        return self._live_tool(name) or self.registry[name]  # the registry's error names the tools it has

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
        if best is None or self._index is None:
            return None, []
        rec = self._index.record(best, self._fh)
        changes = diff_values(canon(self._redactor.redact(rec.args)), canon(redacted))
        return rec.seq, [(c.path, c.old, c.new) for c in changes]

    def _miss(
        self,
        seq: int,
        tool: str,
        args: Any,
        redacted: Any,
        args_json: bytes,
        key: str,
        requested_tool: str | None,
        reason: str = "",
        near: int | None = None,
    ) -> Any:
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
                return result
        if self._writer is None:
            self._open_fill_candidate()
        return self._live(seq, tool, args, args_json, key, requested_tool, write=True)

    def _open_fill_candidate(self) -> None:
        """First miss of a fill over a golden: the candidate starts with the hits so far."""
        assert self._index is not None
        body = b"".join(self._carried_line(run_seq, i, alt) for run_seq, i, alt in self._pending_fill)
        self._pending_fill = []
        with gate(self.path):
            self._claim_target("fill", body)

    def _manifest_line(self, tool: str, index: TapeIndex | None = None) -> bytes:
        if tool in self._written_tools:
            return b""
        self._written_tools.add(tool)
        live = self._live_tool(tool)
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
        self._emit("hit", seq=seq, tool=tool, key=key, step=seq, source="candidate")
        result, error = alt.index.outcome(a, alt.fh.fileno())
        if self._writer is None:  # the earlier candidate is not this session as played: write the new one
            self._open_fill_candidate()
        self._carry(seq, a, alt=True)
        if error is not None:
            raise_recorded(error, tool, seq)
        return True, result

    def _live(
        self, seq: int, tool: str, args: Any, args_json: bytes, key: str, requested_tool: str | None, *, write: bool
    ) -> Any:
        """Run the tool; with ``write``, append its call line (``args_json``: the redacted, canonical arguments).

        The steps are :mod:`tapetui.core.live`'s, in its order; what is this tape's (the tool line written the
        first time, the counters, the run-log event) goes between them."""
        t = self._tool(tool)
        recorded_at = self._clock()
        manifest = b""
        if write:  # everything about the call line that can fail is settled before the tool runs
            assert self._writer is not None
            stamp = line_stamp(seq, tool, t, self.config.policy(tool), recorded_at, key, requested_tool)
            try:
                manifest = self._manifest_line(tool)
            except BaseException:  # not written: the next call of this tool writes it
                self._written_tools.discard(tool)
                raise
        try:
            result, error, ms = run_tool(t, args, self._timer)
        except BaseException:  # an interrupt: no line is written, so the manifest is not written either
            if manifest:
                self._written_tools.discard(tool)
            raise
        self._counts["live_tool_calls"] += 1
        if t.side_effect:
            self._counts["real_side_effects"] += 1
        if write:
            # The tool ran: its call is written whatever happens now (see outcome_line).
            assert self._writer is not None
            line, recorded_error, problem = outcome_line(
                seq=seq,
                name=tool,
                tool=t,
                key=key,
                args_json=args_json,
                stamp=stamp,
                ms=ms,
                result=result,
                error=error,
                redactor=self._redactor,
                requested_tool=requested_tool,
            )
            self._writer.append(manifest + line)
            self._emit(
                "record" if self.mode == "record" else "live",
                seq=seq,
                tool=tool,
                key=key,
                fingerprint=t.fingerprint,
                ms=ms,
                side_effect=t.side_effect,
                error=recorded_error,
            )
            if problem:
                raise TapeError(f"{tool} (step {seq}) {problem}; the call was recorded with this as its error")
        if error is not None:
            raise error
        return result


def _jsonable(v: Any) -> Any:
    return "(absent)" if v is MISSING else v
