"""``Tape``: record an agent session's tool calls, or replay them offline."""

from __future__ import annotations

import builtins
import os
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from tapetui.canon import canon, canonical_json, key_of_json
from tapetui.config import Config, ToolPolicy
from tapetui.errors import TapeDrift, TapeError, TapeMiss, TapeStale, ToolDriftError, TooDeep
from tapetui.fingerprint import explain_manifest_change
from tapetui.jsondiff import diff_values
from tapetui.redact import Redactor
from tapetui.registry import Tool, ToolRegistry
from tapetui.runlog import RunLog
from tapetui.store import candidate_path, runlog_path
from tapetui.tapefile import FORMAT_VERSION, Appender, TapeIndex, atomic_write, call_line, dump_line, read_index

__all__ = ["MODES", "Tape", "iso", "utcnow"]

MODES = ("record", "replay", "fill")


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


def _raise_recorded(error: dict[str, Any], tool: str, seq: int) -> None:
    """Raise a recorded error again: its own type where it is already imported, else TapeError."""
    tname = str(error.get("type", "Exception"))
    message = str(error.get("message", ""))
    module = sys.modules.get(str(error.get("module", "builtins")))
    cls = getattr(module, tname, None) if module is not None else getattr(builtins, tname, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        try:
            exc = cls(message)
        except Exception:  # a constructor with other arguments
            exc = None
        if exc is not None:
            raise exc
    raise TapeError(f"{tool} (step {seq}) raised {tname} when recorded: {message}")


class Tape:
    """One agent session on disk, recorded or replayed.

    Args:
        path: the golden tape (``name.jsonl``).
        mode: ``record`` (run every call live, write a fresh tape, a candidate when a
            golden exists), ``replay`` (recorded results only; never runs a tool) or
            ``fill`` (replay, and run only misses live, writing them to a candidate).
        registry: the live tools; needed to record, to fill and to check fingerprints.
        config: redaction rules and per-tool policy (``tapes.toml``); defaults otherwise.
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
        self.config = config or Config.for_dir(self.path.parent)
        self.labels = dict(labels or {})
        self._clock = clock
        self._timer = timer
        self._fsync = fsync
        self._redactor: Redactor = self.config.redactor()
        self._seq = 0
        self._overrides: dict[int, tuple[Any, BaseException | None]] = {}
        self._counts = {"tape_hits": 0, "tape_misses": 0, "live_tool_calls": 0, "real_side_effects": 0,
                        "drift_events": 0, "fingerprint_changes": 0, "stale": 0, "overrides": 0, "unused": 0}
        self._allowed_fp: set[str] = set()
        self._fp_ok: dict[str, str] = {}  # tool → recorded fingerprint that matched the live one
        self._index: TapeIndex | None = None
        self._fh: Any = None
        self._fd = -1
        self._consumed = bytearray()
        self._low = 0  # no call before this one is unconsumed
        self._writer: Appender | None = None
        self._written_tools: set[str] = set()
        self._pending_fill: list[tuple[int, int]] = []  # (run seq, index) of hits before the first fill miss
        self.target: Path | None = None
        self._closed = False
        self._entered = False

        if mode == "record":
            self.target = candidate_path(self.path) if self._has_golden() else self.path
            self._start_target("record")
        else:
            source = self.path
            cand = candidate_path(self.path)
            if mode == "fill" and cand.exists():
                # An earlier fill's candidate holds its filled misses: replay from it, so a miss runs live once.
                try:
                    if (read_index(cand).header or {}).get("origin") == "fill":
                        source = cand
                except TapeError:
                    pass
            if source.exists():
                self._index = read_index(source, keep_bytes=True)
                self._fh = open(source, "rb")
                self._fd = self._fh.fileno()
                self._consumed = bytearray(len(self._index))
            elif mode == "replay":
                raise TapeError(f"{self.path}: no tape to replay (record it first: mode='record')")
            else:
                self.target = self.path
                self._start_target("fill")
        # event times in seconds with 6 decimals; the real clock's path avoids datetime and round()
        stamp = (lambda: time.time_ns() // 1000 / 1e6) if clock is utcnow else \
            (lambda: round(self._clock().timestamp(), 6))
        self._log = RunLog(runlog_path(self.path), {"mode": mode, "tape": self.path.name,
                                                    "started": iso(self._clock())},
                           clock=stamp) if run_log else None

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
            self._emit("live", seq=seq, tool=tool, key=key, policy="live",
                       fingerprint=self._tool(tool).fingerprint)
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
                    raise TapeStale(f"{self.path}: step {seq} ({tool}) expired at {index.expires[i]} "
                                    f"(stale policy 'error'; re-record it with mode='fill' after expiring)")
                if stale == "miss":
                    return self._miss(seq, tool, args, redacted, args_json, key, requested_tool, reason="expired",
                                      near=i)
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
        if index is not None:
            j = index.at_seq(seq)
            if j is not None and index.tools[j] == tool and index.keys[j] != key:
                self._consumed[j] = 1
                recorded = index.record(j, self._fh)
                changes = diff_values(canon(recorded.args), canon(redacted))
                self._counts["drift_events"] += 1
                self._emit("drift", seq=seq, tool=tool, key=key, recorded_key=recorded.key,
                           recorded_args=recorded.args, args=redacted,
                           changes=[[c.path, _jsonable(c.old), _jsonable(c.new)] for c in changes])
                raise TapeDrift(path=str(self.path), seq=seq, tool=tool, recorded_key=recorded.key, new_key=key,
                                recorded_args=recorded.args, new_args=redacted,
                                changes=[tuple(c) for c in changes])
        return self._miss(seq, tool, args, redacted, args_json, key, requested_tool)

    def stats(self) -> dict[str, Any]:
        """Counters of this run: the fixed keys of DESIGN §3 and a few more."""
        return {"mode": self.mode, "steps": self._seq, **self._counts,
                "fingerprint_checks_off": sorted(self._allowed_fp)}

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
                    self._log.emit_many([{"event": "unused", "seq": idx.seqs[i], "tool": idx.tools[i],
                                          "key": idx.keys[i]} for i in unused])
            if self._log is not None:
                end: dict[str, Any] = {"stats": self.stats()}
                if error is not None:
                    end["error"] = {"type": type(error).__name__, "message": self._redactor.redact_text(str(error))}
                self._log.emit("end", **end)
        finally:
            for res in (self._writer, self._log):
                if res is not None:
                    res.close()
            if self._fh is not None:
                self._fh.close()

    # ---- internals ---------------------------------------------------------------
    def _has_golden(self) -> bool:
        try:
            return self.path.stat().st_size > 0
        except FileNotFoundError:
            return False

    def _start_target(self, origin: str, body: bytes = b"") -> None:
        assert self.target is not None
        header: dict[str, Any] = {"type": "session", "v": FORMAT_VERSION, "created_at": iso(self._clock()),
                                  "origin": origin}
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
        return self.registry[name]

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
        if self.registry is None:
            return
        live = self.registry.get(tool)
        assert self._index is not None
        recorded = self._index.fingerprints[i]
        if live is None or not recorded or live.fingerprint == recorded:
            self._fp_ok[tool] = recorded  # the same tool and fingerprint again need no check
            return
        old = self._index.manifests.get(tool)
        explanation = explain_manifest_change(old if old and old.fingerprint == recorded else None, live.manifest)
        self._counts["fingerprint_changes"] += 1
        if not policy.check_fingerprint:
            self._allowed_fp.add(tool)
            self._emit("fingerprint", seq=seq, tool=tool, recorded=recorded, live=live.fingerprint, allowed=True,
                       explanation=explanation)
            return
        self._counts["drift_events"] += 1
        self._emit("fingerprint", seq=seq, tool=tool, recorded=recorded, live=live.fingerprint, allowed=False,
                   explanation=explanation)
        raise ToolDriftError(path=str(self.path), seq=seq, tool=tool, recorded=recorded, live=live.fingerprint,
                             explanation=explanation)

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
        return rec.seq, [tuple(c) for c in diff_values(canon(rec.args), canon(redacted))]

    def _miss(self, seq: int, tool: str, args: Any, redacted: Any, args_json: bytes, key: str,
              requested_tool: str | None, reason: str = "", near: int | None = None) -> Any:
        self._counts["tape_misses"] += 1
        nearest, changes = self._nearest(tool, seq, redacted, near)
        self._emit("miss", seq=seq, tool=tool, key=key, args=redacted, nearest=nearest, reason=reason or None,
                   changes=[[p, _jsonable(o), _jsonable(n)] for p, o, n in changes])
        if self.mode == "replay":
            raise TapeMiss(path=str(self.path), seq=seq, tool=tool, key=key, args=redacted, nearest_seq=nearest,
                           changes=changes, reason=reason)
        if self._writer is None:
            self._open_fill_candidate()
        return self._live(seq, tool, args, args_json, key, requested_tool, write=True)

    def _open_fill_candidate(self) -> None:
        """First miss of a fill over a golden: the candidate starts with the hits so far."""
        assert self._index is not None
        self.target = candidate_path(self.path)
        body = b"".join(self._manifest_line(self._index.tools[i]) + self._renumbered(run_seq, i)
                        for run_seq, i in self._pending_fill)
        self._pending_fill = []
        self._start_target("fill", body)

    def _manifest_line(self, tool: str) -> bytes:
        if tool in self._written_tools:
            return b""
        self._written_tools.add(tool)
        live = self.registry.get(tool) if self.registry is not None else None
        if live is not None:
            return dump_line(live.manifest.to_record(live.side_effect))
        assert self._index is not None
        return self._index.manifest_lines.get(tool, b"")

    def _renumbered(self, run_seq: int, i: int) -> bytes:
        assert self._index is not None
        raw = dict(self._index.record(i, self._fh).raw)
        raw["seq"] = run_seq
        return dump_line(raw)

    def _carry(self, seq: int, i: int) -> None:
        """In fill mode the candidate is the session as played: hits are carried into it."""
        if self._writer is None:
            self._pending_fill.append((seq, i))
        else:
            assert self._index is not None
            self._writer.append(self._manifest_line(self._index.tools[i]) + self._renumbered(seq, i))

    def _live(self, seq: int, tool: str, args: Any, args_json: bytes, key: str, requested_tool: str | None,
              *, write: bool) -> Any:
        """Run the tool; with ``write``, append its call line (``args_json``: the redacted, canonical arguments)."""
        t = self._tool(tool)
        policy = self.config.policy(tool)
        recorded_at = self._clock()
        start = self._timer()
        error: BaseException | None = None
        result: Any = None
        try:
            result = t.fn(**args)
        except Exception as e:  # recorded and raised again below
            error = e
        ms = round((self._timer() - start) * 1000, 3)
        self._counts["live_tool_calls"] += 1
        if t.side_effect:
            self._counts["real_side_effects"] += 1
        if write:
            ttl = policy.ttl if policy.ttl is not None else t.ttl
            expires = iso(recorded_at + timedelta(seconds=ttl)) if ttl else None
            err = None
            if error is not None:
                err = {"type": type(error).__name__, "module": type(error).__module__,
                       "message": self._redactor.redact_text(str(error))}
            try:
                line = call_line(seq=seq, tool=tool, key=key, fingerprint=t.fingerprint, side_effect=t.side_effect,
                                 ms=ms, expires_at=expires, recorded_at=iso(recorded_at),
                                 args=orjson.Fragment(args_json),
                                 result=None if err else self._redactor.redact(result), error=err,
                                 requested_tool=requested_tool)
            except TooDeep:
                raise TapeError(f"{tool} (step {seq}) returned a value nested too deeply to record; "
                                "nothing was written") from None
            except TypeError:
                where = _unserialisable(result) or ("result", type(result).__name__)
                raise TapeError(f"{tool} (step {seq}) returned a value that cannot be recorded: "
                                f"{where[0]} is a {where[1]}, not a JSON value; nothing was written") from None
            assert self._writer is not None
            self._writer.append(self._manifest_line(tool) + line)
            self._emit("record" if self.mode == "record" else "live", seq=seq, tool=tool, key=key,
                       fingerprint=t.fingerprint, ms=ms, side_effect=t.side_effect, error=err is not None)
        if error is not None:
            raise error
        return result


def _jsonable(v: Any) -> Any:
    from tapetui.jsondiff import MISSING

    return "(absent)" if v is MISSING else v

