"""``Tape``: record an agent session's tool calls, or replay them offline."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.canon import canon, canonical_json, key_of_json
from tapetui.core.config import Config, ToolPolicy, config_for_tape, ttl_problem
from tapetui.core.errors import TapeDrift, TapeError, TapeMiss, TapeStale, TooDeep, ToolDriftError
from tapetui.core.fingerprint import FORMS, LATEST_FORM, explain_manifest_change, in_form, redact_manifest_line
from tapetui.core.jsondiff import diff_values
from tapetui.core.locks import LockBusy, RecordingLock, gate, recording_lock
from tapetui.core.recorded_errors import raise_recorded
from tapetui.core.redact import Redactor
from tapetui.core.registry import Tool, ToolRegistry
from tapetui.core.runlog import RunLog
from tapetui.core.store import candidate_path, rotate_candidate, runlog_path
from tapetui.core.tapefile import FORMAT_VERSION, Appender, TapeIndex, atomic_write, call_line, dump_line, read_index

__all__ = ["MODES", "Tape", "iso", "utcnow"]

MODES = ("record", "replay", "fill")
# The longest tape file name a recording creates: the names beside it (".NAME.jsonl.journal.XXXXXXXX.tmp",
# the longest) must stay within the 255 bytes file systems allow.
MAX_NAME = 220
_log = logging.getLogger("tapetui")


def utcnow() -> datetime:
    return datetime.now(UTC)


def iso(dt: datetime) -> str:
    """UTC ISO-8601 with a ``Z``: ``2026-11-30T16:49:00Z`` (microseconds only when there are some)."""
    if dt.tzinfo is not UTC:
        dt = dt.astimezone(UTC)
    return dt.isoformat()[:-6] + "Z"  # without its "+00:00"


def parse_iso(text: str) -> datetime | None:
    try:
        dt = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def key_of(tool: str, redacted_args: Any) -> str:
    """The call key of arguments that are already redacted (see :func:`tapetui.call_key`)."""
    return key_of_json(tool, canonical_json(canon(redacted_args)))


def _unserialisable(value: Any, path: str = "result") -> tuple[str, str] | None:
    """The first path in ``value`` holding something JSON cannot, and its type name."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return None
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return f"{path} key {k!r}", type(k).__name__
            found = _unserialisable(v, f"{path}.{k}")
            if found:
                return found
        return None
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            found = _unserialisable(v, f"{path}[{i}]")
            if found:
                return found
        return None
    return path, type(value).__name__


def _check_tool_name(tool: Any, path: Path) -> None:
    """A tool name is text a tape can hold: a non-empty string of valid UTF-8 (no lone surrogates)."""
    if not isinstance(tool, str) or not tool:
        raise TapeError(f"{path}: a tool name must be a non-empty string, got {type(tool).__name__}")
    try:
        tool.encode("utf-8")
    except UnicodeEncodeError as e:
        raise TapeError(
            f"{path}: tool name {tool!r} is not valid UTF-8 text ({e.reason} at character "
            f"{e.start}); a tape holds UTF-8"
        ) from None


def _raise_recorded(error: dict[str, Any], tool: str, seq: int) -> None:
    """Raise a recorded error again. A tape is data: its own class only when already loaded, an
    ``Exception`` and no control-flow or test-outcome class, built without running a constructor;
    else TapeReplayedError (see :mod:`tapetui.core.recorded_errors`)."""
    raise_recorded(error, tool, seq)


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
        clock: Callable[[], datetime] = utcnow,
        timer: Callable[[], float] = time.perf_counter,
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
        self._counts = {
            "tape_hits": 0,
            "tape_misses": 0,
            "live_tool_calls": 0,
            "real_side_effects": 0,
            "drift_events": 0,
            "fingerprint_changes": 0,
            "stale": 0,
            "overrides": 0,
            "unused": 0,
        }
        self._allowed_fp: set[str] = set()
        self._fp_ok: dict[str, str] = {}  # tool → recorded fingerprint that matched the live one
        self._index: TapeIndex | None = None
        self._fh: Any = None
        self._fd = -1
        self._consumed = bytearray()
        self._low = 0  # no call before this one is unconsumed
        self._writer: Appender | None = None
        self._written_tools: set[str] = set()
        # (run seq, index, from the earlier fill) of the hits before the first fill miss
        self._pending_fill: list[tuple[int, int, bool]] = []
        self.target: Path | None = None
        self.notices: list[str] = []  # what this tape did that a person should hear of (a candidate rotated)
        self._alt: _Filled | None = None  # fill: calls an earlier, unreviewed fill already ran live
        self._lock: RecordingLock | None = None
        self._closed = False
        self._entered = False

        try:
            self._open_session(mode)
        except BaseException:
            self._release()
            raise
        # event times in seconds with 6 decimals; the real clock's path avoids datetime and round()
        stamp = (
            (lambda: time.time_ns() // 1000 / 1e6) if clock is utcnow else (lambda: round(self._clock().timestamp(), 6))
        )
        self._log = (
            RunLog(
                runlog_path(self.path),
                {
                    "mode": mode,
                    "tape": self.path.name,
                    "started": iso(self._clock()),
                    "golden_sha256": self._golden_sha256(),
                },
                clock=stamp,
            )
            if run_log
            else None
        )

    # ---- context manager ---------------------------------------------------------
    def __enter__(self) -> Tape:
        self._entered = True
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
            _check_tool_name(tool, self.path)
        args = {} if args is None else args
        self._seq += 1
        seq = self._seq
        try:  # redacted and canonical in one pass; the key hashes it (canonical_json sorts the keys)
            redacted = self._redactor.canon_form(args)
            args_json = canonical_json(redacted)  # = canon(redacted) as JSON: hashed here, written as is
            key = key_of_json(tool, args_json)
        except (TypeError, TooDeep) as e:
            raise TapeError(f"{tool} (step {seq}): arguments cannot be recorded: {e}") from None
        policy = self.config.policy(tool)
        if self.mode == "record":
            return self._live(seq, tool, args, args_json, key, requested_tool, write=True)
        if policy.live:
            self._emit("live", seq=seq, tool=tool, key=key, policy="live", fingerprint=self._tool(tool).fingerprint)
            return self._live(seq, tool, args, args_json, key, requested_tool, write=False)

        index = self._index
        i = self._take(key) if index is not None else None
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
                _raise_recorded(error, tool, seq)
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
        if self._index is None:
            return []
        return [self._index.seqs[i] for i, used in enumerate(self._consumed) if not used]

    def close(self, error: BaseException | None = None) -> None:
        """Report unused steps, write the ``end`` event, release files. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._index is not None and self.mode != "record":
                idx = self._index
                unused = [i for i, used in enumerate(self._consumed) if not used] if 0 in self._consumed else []
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
        if mode != "replay" and len(os.fsencode(self.path.name)) > MAX_NAME:
            raise TapeError(
                f"{self.path}: a tape name of {len(os.fsencode(self.path.name))} bytes is too long: its "
                f"candidate, journal and lock files need room beside it; keep it within {MAX_NAME} bytes"
            )
        if mode != "replay":  # a recording makes its folder, as the README's first example expects
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise TapeError(f"{self.path.parent}: cannot make the tape's folder: {e.strerror or e}") from None
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
            self._consumed = bytearray(len(self._index))
            cand = candidate_path(self.path)
            if mode == "fill" and os.path.lexists(cand):
                # An earlier fill that was never reviewed (or was killed) ran its misses live: replay those
                # too, so a side effect runs once, not at every fill.
                self._alt = _Filled.open(cand, self._index, self._fh)
        elif mode == "replay":
            raise TapeError(f"{self.path}: no tape to replay (record it first: mode='record')")
        else:
            with gate(self.path):
                self._claim_target("fill")

    def _golden_sha256(self) -> str | None:
        """The sha256 of the golden this run plays against (None when it records a new one), so that a
        reader can tell a run log from before an accept from a current one, whatever the file times say."""
        idx = self._index
        if idx is None:
            return None
        if idx.data is not None and len(idx.data) == idx.size:
            return hashlib.sha256(idx.data).hexdigest()
        h = hashlib.sha256()
        try:
            with open(self.path, "rb") as fh:
                while chunk := fh.read(1 << 20):
                    h.update(chunk)
        except OSError:
            return None
        return h.hexdigest()

    def _claim_target(self, origin: str, body: bytes = b"") -> None:
        """Pick this recording's file and create it; the caller holds the session's gate.

        The first recording of a session creates the golden; any later one (while a golden exists)
        writes the candidate, moving a pending candidate into ``NAME.samples/`` first.
        """
        if (origin != "fill" or self._index is None) and not self._has_golden():
            self.target = self.path
            self._start_target(origin, body)
            return
        moved = rotate_candidate(self.path)
        if moved is not None:
            note = f"{self.path}: a pending candidate nobody reviewed was moved to {moved}"
            self.notices.append(note)
            _log.warning("%s", note)
        self.target = candidate_path(self.path)
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

    def _has_golden(self) -> bool:
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False
        except OSError as e:  # a name too long for the file system, a folder that cannot be searched
            raise TapeError(f"{self.path}: {e.strerror or e}") from None

    def _start_target(self, origin: str, body: bytes = b"") -> None:
        assert self.target is not None
        header: dict[str, Any] = {
            "type": "session",
            "v": FORMAT_VERSION,
            "created_at": iso(self._clock()),
            "origin": origin,
        }
        if self.labels:
            header["labels"] = self._redactor.redact(self.labels)
        atomic_write(self.target, dump_line(header) + body)
        self._writer = Appender(self.target, fsync=self._fsync)

    def _emit(self, event: str, **fields: Any) -> None:
        if self._log is not None:
            self._log.emit(event, **fields)

    def _tool(self, name: str) -> Tool:
        if self.registry is None:
            raise TapeError(f"{self.path}: tool {name!r} must run live but the tape has no registry")
        return self._live_tool(name) or self.registry[name]  # the registry's error names the tools it has

    def _live_tool(self, name: str) -> Tool | None:
        """The registered tool with its manifest as this tape writes it: fingerprint form 2 under this
        tape's redaction rules (``tapes.toml [redact]`` too), so no configured secret reaches a tool line."""
        cache: dict[str, Tool] | None = self.__dict__.get("_live_tools")
        if cache is None:
            cache = self._live_tools = {}
        t = cache.get(name)
        if t is None:
            base = self.registry.get(name) if self.registry is not None else None
            if base is None:
                return None
            if not self._redactor.is_default:
                base = replace(base, manifest=base.manifest_for(LATEST_FORM, self._redactor))
            t = cache[name] = base
        return t

    def _take(self, key: str) -> int | None:
        """The first unconsumed recorded call with this key."""
        index = self._index
        assert index is not None
        consumed = self._consumed
        # A replay that follows the tape's order finds its call first in line: the lowest unconsumed
        # call, which, if it has this key, is the first unconsumed one with it (no key table needed).
        low = consumed.find(0, self._low)
        if low < 0:  # every call consumed
            self._low = len(consumed)
            return None
        self._low = low
        if index.keys[low] == key:
            return low
        i = index.key_first.get(key)
        if i is None:
            return None
        following = index.key_next
        while consumed[i]:
            i = following[i]
            if i < 0:
                return None
        return i

    def _expired(self, expires_at: str) -> bool:
        when = parse_iso(expires_at)
        return when is not None and when <= self._clock()

    def _check_fingerprint(self, i: int, seq: int, tool: str, policy: ToolPolicy) -> None:
        """Compare call ``i``'s fingerprint with the live tool's, computed in the form the call was recorded in."""
        if self.registry is None:
            return
        live = self._live_tool(tool)
        assert self._index is not None
        recorded = self._index.fingerprints[i]
        if live is None or not recorded:
            self._fp_ok[tool] = recorded  # the same tool and fingerprint again need no check
            return
        form = self._index.fp_forms.get(recorded, 1)
        if form not in FORMS:
            raise TapeError(
                f"{self.path}:{self._index.lines[i]}: {tool} was recorded with fingerprint form {form}, "
                f"which this version of tapetui does not know (it knows {', '.join(map(str, FORMS))})"
            )
        expected = live.manifest_for(form, self._redactor)
        if expected.fingerprint == recorded:
            self._fp_ok[tool] = recorded
            return
        old = self._index.manifests.get(tool)
        old = old if old and old.fingerprint == recorded else None
        explanation = explain_manifest_change(old, expected, self._redactor)
        r = self._redactor
        if (
            form == 1
            and old is not None
            and old.form == 1
            and in_form(old, LATEST_FORM, r).fingerprint == live.manifest_for(LATEST_FORM, r).fingerprint
        ):
            explanation.append(
                "only secret-looking values changed: this tape was recorded in fingerprint form 1, which "
                "hashes them verbatim; `tapetui scrub` (or re-recording) moves it to form 2, where "
                "rotating a key is not a contract change"
            )
        self._counts["fingerprint_changes"] += 1
        if not policy.check_fingerprint:
            self._allowed_fp.add(tool)
            self._emit(
                "fingerprint",
                seq=seq,
                tool=tool,
                recorded=recorded,
                live=expected.fingerprint,
                allowed=True,
                explanation=explanation,
                form=form,
            )
            return
        self._counts["drift_events"] += 1
        self._emit(
            "fingerprint",
            seq=seq,
            tool=tool,
            recorded=recorded,
            live=expected.fingerprint,
            allowed=False,
            explanation=explanation,
            form=form,
        )
        raise ToolDriftError(
            path=str(self.path),
            seq=seq,
            tool=tool,
            recorded=recorded,
            live=expected.fingerprint,
            explanation=explanation,
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

    def _nearest(self, tool: str, seq: int, redacted: Any, near: int | None) -> tuple[int | None, list[tuple]]:
        idx = self._index
        if idx is None:
            return None, []
        best = near
        if best is None:
            best_d = None
            for i, t in enumerate(idx.tools):
                if t != tool:
                    continue
                d = (self._consumed[i], abs(idx.seqs[i] - seq))
                if best_d is None or d < best_d:
                    best, best_d = i, d
        if best is None:
            return None, []
        rec = idx.record(best, self._fh)
        return rec.seq, [tuple(c) for c in diff_values(canon(self._redactor.redact(rec.args)), canon(redacted))]

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
        raw = dict(index.record(i, fh).raw)
        raw["seq"] = run_seq
        return self._manifest_line(index.tools[i], index) + dump_line(raw)

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
        """Run the tool; with ``write``, append its call line (``args_json``: the redacted, canonical arguments)."""
        t = self._tool(tool)
        policy = self.config.policy(tool)
        recorded_at = self._clock()
        stamp = expires = None
        manifest = b""
        if write:  # everything about the call line that can fail is settled before the tool runs
            assert self._writer is not None
            stamp, expires = self._line_metadata(seq, tool, t, policy, recorded_at, key, requested_tool)
            try:
                manifest = self._manifest_line(tool)
            except BaseException:  # not written: the next call of this tool writes it
                self._written_tools.discard(tool)
                raise
        start = self._timer()
        error: BaseException | None = None
        result: Any = None
        try:
            result = t.fn(**args)
        except Exception as e:  # recorded and raised again below
            error = e
        except BaseException:  # an interrupt: no line is written, so the manifest is not written either
            if manifest:
                self._written_tools.discard(tool)
            raise
        ms = round((self._timer() - start) * 1000, 3)
        self._counts["live_tool_calls"] += 1
        if t.side_effect:
            self._counts["real_side_effects"] += 1
        if write:
            # The tool ran: its call is written whatever happens now. What cannot be recorded (a result that is
            # not JSON, an error whose text cannot be read) becomes the line's error, and the caller gets a TapeError.
            err = None
            line = None
            problem = ""
            try:
                if error is not None:  # every field through the redactor: the message, and what may join it
                    err = self._redactor.redact(
                        {"type": type(error).__name__, "module": type(error).__module__, "message": str(error)}
                    )
                line = call_line(
                    seq=seq,
                    tool=tool,
                    key=key,
                    fingerprint=t.fingerprint,
                    side_effect=t.side_effect,
                    ms=ms,
                    expires_at=expires,
                    recorded_at=stamp,
                    args=orjson.Fragment(args_json),
                    result=None if err else self._redactor.redact(result),
                    error=err,
                    requested_tool=requested_tool,
                )
            except Exception as e:  # noqa: BLE001 - whatever it is, the call is not lost
                problem = _unrecordable(e, error, result)
            if line is None:
                try:
                    problem = self._redactor.redact_text(problem)  # it may name result paths (dict keys)
                except Exception:  # noqa: BLE001
                    problem = "its outcome cannot be recorded"
                err = {
                    "type": "TapeError",
                    "module": "tapetui.core.errors",
                    "message": f"{tool} (step {seq}) {problem}",
                }
                line = call_line(
                    seq=seq,
                    tool=tool,
                    key=key,
                    fingerprint=t.fingerprint,
                    side_effect=t.side_effect,
                    ms=ms,
                    expires_at=expires,
                    recorded_at=stamp,
                    args=orjson.Fragment(args_json),
                    error=err,
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
                error=err is not None,
            )
            if problem:
                raise TapeError(f"{tool} (step {seq}) {problem}; the call was recorded with this as its error")
        if error is not None:
            raise error
        return result

    def _line_metadata(
        self,
        seq: int,
        tool: str,
        t: Tool,
        policy: ToolPolicy,
        recorded_at: datetime,
        key: str,
        requested_tool: str | None,
    ) -> tuple[str, str | None]:
        """``recorded_at`` and ``expires_at`` of a call line, and a check that its other fields can be written;
        a TapeError before the tool runs when they cannot (an absurd ttl, a name that is not valid text)."""
        ttl = policy.ttl if policy.ttl is not None else t.ttl
        problem = ttl_problem(ttl) if ttl is not None else None
        if problem:
            raise TapeError(
                f"{tool} (step {seq}): {problem} (tapes.toml [tools.{tool}] or the tool's registration); "
                "the tool was not run"
            )
        try:
            stamp = iso(recorded_at)
            expires = iso(recorded_at + timedelta(seconds=ttl)) if ttl is not None else None
        except Exception as e:  # noqa: BLE001 - a date past year 9999, a clock that is not a datetime
            raise TapeError(
                f"{tool} (step {seq}): cannot compute the call's recorded_at/expires_at "
                f"({type(e).__name__}: {e}); the tool was not run"
            ) from None
        try:
            orjson.dumps([tool, key, t.fingerprint, requested_tool])
        except TypeError as e:
            raise TapeError(
                f"{tool!r} (step {seq}): the tool name or requested_tool cannot be written as JSON "
                f"({e}); the tool was not run"
            ) from None
        return stamp, expires


_SEQ = re.compile(rb'^(\{"type":"call",)"seq":\d+,')


def _sans_seq(line: bytes) -> bytes:
    """A call line without its ``seq``: how a hit carried into a fill's candidate is told from its golden line."""
    out, n = _SEQ.subn(rb"\1", line, count=1)
    if n:
        return out
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    if isinstance(obj, dict):
        obj.pop("seq", None)
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


class _Filled:
    """The calls an earlier fill ran live, from its pending candidate: those not copied from the golden."""

    def __init__(self, index: TapeIndex, fh: Any, usable: list[int]) -> None:
        self.index, self.fh = index, fh
        self._by_key: dict[str, list[int]] = {}
        for i in usable:
            self._by_key.setdefault(index.keys[i], []).append(i)

    @classmethod
    def open(cls, cand: Path, golden: TapeIndex, golden_fh: Any) -> _Filled | None:
        try:
            index = read_index(cand)
            if (index.header or {}).get("origin") != "fill":
                return None
            fh = open(cand, "rb")  # noqa: SIM115 -- handed to the _Filled source, which closes it
        except (TapeError, OSError):
            return None  # an unreadable candidate is check's to report; this fill just runs its misses
        try:
            from_golden = {_sans_seq(golden.raw_line(i, golden_fh)) for i in range(len(golden))}
            usable = [i for i in range(len(index)) if _sans_seq(index.raw_line(i, fh)) not in from_golden]
        except BaseException:
            fh.close()
            raise
        return cls(index, fh, usable)

    def take(self, key: str, expired: Callable[[str], bool], fingerprint: str | None) -> int | None:
        """The first unused call with ``key`` that is still fresh and was recorded with the live contract."""
        calls = self._by_key.get(key)
        if not calls:
            return None
        for n, i in enumerate(calls):
            exp = self.index.expires.get(i)
            if (exp is None or not expired(exp)) and (fingerprint is None or self.index.fingerprints[i] == fingerprint):
                del calls[n]
                return i
        return None

    def close(self) -> None:
        self.fh.close()


def _unrecordable(e: Exception, error: BaseException | None, result: Any) -> str:
    """Why a call's outcome could not be written, for the error its line records instead."""
    if error is not None:
        return f"raised {type(error).__name__}, whose message cannot be recorded ({type(e).__name__})"
    if isinstance(e, TooDeep):
        return "returned a value nested too deeply to record"
    where = _unserialisable(result)
    if where is not None:
        return f"returned a value that cannot be recorded: {where[0]} is a {where[1]}, not a JSON value"
    return f"returned a value that cannot be recorded ({type(e).__name__}: {e})"


def _jsonable(v: Any) -> Any:
    from tapetui.core.jsondiff import MISSING

    return "(absent)" if v is MISSING else v
