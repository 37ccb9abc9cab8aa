"""``tapetui import otlp``: OTLP traces become tapes that replay.

One tape per trace (or per value of ``--group-by ATTR``, a span's or its resource's attribute), its model turns
and tool calls in span start order, written through :class:`~tapetui.core.tape.Tape` in record mode as an
adapter would write them (``source: "otlp"``): the same redaction, keys and fingerprints. Each tape is recorded
whole in memory first (:class:`~tapetui.core.session.DraftFiles`), then published under the session's gate and
recording lock (the lock protocol of a recording), so a failed or killed import leaves no part of a tape, and two
imports at once make one golden a trace. So:

- a tape that does not exist yet becomes the golden, its changelog entry naming the trace written just before;
  an existing golden is never touched: the import is its candidate, for review (``tapetui diff``,
  ``accept --why``);
- the tool definitions a model span carries (``gen_ai.tool.definitions``) become the tools' contracts, marked
  as seen in a trace (``from_trace``: the fields it held, a name, a description and a parameter schema): replay
  compares only those until the tape is recorded again or a candidate with the whole contract is accepted;
- a span's times are the step's ``recorded_at`` and ``ms``; provenance (service, provider, model, trace id, the
  file) goes in the session header's labels.

Memory: spans are read a line at a time and spilled to one temporary file (where each group's pieces are is
remembered), so a file of gigabytes costs the memory of its biggest trace, not of the file. Duplicate spans (the
same span id twice, from two exporters or a retried export) are merged; an MCP ``tools/call`` span and the GenAI
tool span of the same call (one call id, or one inside the other) are one call. Spans that are neither turns nor
tool calls are counted and skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.clock import now_iso
from tapetui.core.config import Config, config_for_tape
from tapetui.core.errors import TapeError, UnrecordableResult
from tapetui.core.files import atomic_write
from tapetui.core.locks import gate, recording_lock
from tapetui.core.redact import REDACTED
from tapetui.core.session import DraftFiles
from tapetui.core.store import golden_of, is_golden, prepare_recording, recording_target, session_name
from tapetui.core.tape import Tape
from tapetui.core.turns import CAPTURE_HINT, NOT_CAPTURED
from tapetui.review.changelog import Entry, append_entries
from tapetui.traces.conventions import LocalIds, TraceCall, TraceTurn, classify
from tapetui.traces.otlp import IdNotes, Span, TraceFormatError, read_spans

__all__ = ["SOURCE", "TRACE_HELD", "ImportReport", "TracedError", "import_otlp"]

_log = logging.getLogger("tapetui")

SOURCE = "otlp"
TRACE_HELD = ("name", "description", "schema")  # what gen_ai.tool.definitions holds of a contract
_SPILL_BYTES = 8 << 20  # span bytes held in memory across groups before they are appended to their spill files


def _n(count: int, what: str) -> str:
    return f"{count:,} {what}" + ("" if count == 1 else "s")


class TracedError(Exception):
    """What a traced span's error becomes on the tape when its class is not one Python knows: replayed as
    :class:`~tapetui.core.errors.TapeReplayedError` carrying the traced type and message."""


@dataclass
class ImportReport:
    """What an import did: the tapes written and what was read, counted."""

    tapes: list[tuple[Path, str, str]] = field(default_factory=list)  # (file, "golden" | "candidate", group)
    names: dict[str, str] = field(default_factory=dict, repr=False)  # tape name → its group, within this import
    turns: int = 0
    calls: int = 0
    skipped: int = 0
    merged: int = 0
    duplicates: int = 0
    not_captured: int = 0
    notes: IdNotes = field(default_factory=IdNotes)

    def lines(self) -> list[str]:
        out = [f"{kind} {path}  ({group})" for path, kind, group in self.tapes]
        out.append(
            f"imported {_n(self.notes.spans, 'span')} from {len(self.notes.files)} file(s): "
            f"{_n(self.turns, 'model turn')}, {_n(self.calls, 'tool call')} into {_n(len(self.tapes), 'tape')}; "
            f"{_n(self.skipped, 'other span')} skipped"
            + (f"; {self.duplicates:,} duplicate spans merged" if self.duplicates else "")
            + (f"; {self.merged:,} MCP spans merged with their tool spans" if self.merged else "")
        )
        if self.notes.base64_ids:
            out.append(
                f"notice: {self.notes.base64_ids:,} ids were base64 (the protobuf JSON mapping), not the OTLP file "
                "format's hex: read as the bytes they decode to"
            )
        if self.not_captured:
            out.append(
                f"notice: {self.not_captured:,} turns and calls without their content (messages or arguments were "
                f"not captured): imported marked '{NOT_CAPTURED}', and replaying one is an error; {CAPTURE_HINT}"
            )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "tapes": [{"path": str(p), "kind": k, "group": g} for p, k, g in self.tapes],
            "spans": self.notes.spans,
            "turns": self.turns,
            "calls": self.calls,
            "skipped": self.skipped,
            "merged": self.merged,
            "duplicates": self.duplicates,
            "not_captured": self.not_captured,
            "base64_ids": self.notes.base64_ids,
        }


def import_otlp(
    files: Iterable[Path], out_dir: Path, *, group_by: str | None = None, config: Config | None = None
) -> ImportReport:
    """Import OTLP JSON ``files`` into tapes in ``out_dir`` (see the module doc).

    Raises:
        TraceFormatError: a file that is not OTLP JSON, a span without its ids or times, cyclic parent ids;
            the message names the file and line (nothing is written for a file that fails to read).
        TapeError: a tape cannot be written.
    """
    try:
        return _import(files, out_dir, group_by, config)
    except TraceFormatError as e:  # it may quote a value of the trace (a span's name, a bad id): said redacted
        # without config=, the configuration a tape in out_dir would have (as each imported tape's is found)
        redactor = (config if config is not None else config_for_tape(out_dir / "import.jsonl")).redactor()
        raise TraceFormatError(redactor.redact_text(str(e))) from None


def _import(files: Iterable[Path], out_dir: Path, group_by: str | None, config: Config | None) -> ImportReport:
    report = ImportReport()
    # an error quoting a value of the trace redacts it as the tapes it goes to would (an api_key attribute's value)
    report.notes.secret_key = (config or config_for_tape(out_dir / "import.jsonl")).redactor().is_secret_key
    out_dir.mkdir(parents=True, exist_ok=True)
    _sweep_spills()
    with tempfile.TemporaryDirectory(prefix=f"{_SPILL_PREFIX}{os.getpid()}-") as tmp, contextlib.ExitStack() as open_:
        spill = _Spill(Path(tmp) / "spans.jsonl")
        open_.callback(spill.close)
        grouping = _Grouping(group_by)
        for f in files:
            for span in read_spans(Path(f), report.notes):
                spill.add(grouping.key(span), span)
        spill.flush()
        # Every tape is recorded before any is published (each waits in a second spill file): a trace that cannot
        # be imported (cyclic parents, a value nested too deeply) fails the import with nothing written.
        built = _Spill(Path(tmp) / "tapes.jsonl")
        open_.callback(built.close)
        waiting: list[tuple[Path, Entry, Config, str]] = []
        for group, keys in grouping.groups(spill.groups()).items():
            made = _build_group(group, spill.spans(*keys), out_dir, report, config, group_by)
            if made is not None:
                path, data, entry, cfg = made
                built.add_bytes(str(len(waiting)), data)
                waiting.append((path, entry, cfg, group))
        built.flush()
        try:
            for n, (path, entry, cfg, group) in enumerate(waiting):
                try:
                    target = _publish(built.bytes(str(n)), path, entry, cfg)
                except (TapeError, OSError) as e:  # the folder itself (a lock held, a full disk): said, with how far
                    why = e if isinstance(e, TapeError) else f"{e.filename or path}: {e.strerror or e}"
                    raise TapeError(f"{why} (imported {n:,} of {len(waiting):,} tapes before this one)") from None
                shown = _shown_group(group, group_by, cfg)
                report.tapes.append((target, "golden" if target == path else "candidate", shown))
        finally:
            os.sync()  # the tapes and entries are written without an fsync each (thousands of traces): durable at once
    return report


_SPILL_PREFIX = "tapetui-import-"


def _sweep_spills() -> None:
    """Spill folders of imports that were killed (their process is gone): removed, so a kill leaves no lasting copy
    of a trace in the temporary folder."""
    for d in Path(tempfile.gettempdir()).glob(f"{_SPILL_PREFIX}*-*"):
        pid = d.name[len(_SPILL_PREFIX) :].split("-", 1)[0]
        try:
            st = d.lstat()
        except OSError:
            continue
        # ours only (another user's folder, a symlink, a name that is no process id: left alone)
        if not (pid.isascii() and pid.isdigit() and len(pid) <= 9) or not stat.S_ISDIR(st.st_mode):
            continue
        if st.st_uid != os.getuid():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except OSError:
            pass  # alive: left alone


class _Grouping:
    """Which tape each span goes to: its trace's (one tape per trace), or with ``--group-by`` its own value of the
    attribute, else its trace's value (the root span's, else the first one seen): an attribute only the root span
    carries (an agent's name, a session id) groups the whole trace, never the rest under "(none)"."""

    def __init__(self, group_by: str | None) -> None:
        self.group_by = group_by
        self.of_trace: dict[str, tuple[bool, str]] = {}  # trace id → (from its root span, its value)

    def key(self, span: Span) -> str:
        """Where ``span`` is spilled: its group, or its trace's until the end of the read says which that is."""
        if self.group_by is None:
            return span.trace_id
        v = span.attrs.get(self.group_by, span.resource.get(self.group_by))
        if v is None:
            return "\0" + span.trace_id  # the trace's group, known at the end
        value, root = str(v), span.parent_id is None
        known = self.of_trace.get(span.trace_id)
        if known is None or (root and not known[0]):  # the root's value wins over any seen before it
            self.of_trace[span.trace_id] = (root, value)
        return "\1" + value

    def groups(self, keys: list[str]) -> dict[str, list[str]]:
        """Each group and the spill keys of its spans, in the order the groups first appeared."""
        out: dict[str, list[str]] = {}
        for key in keys:
            if self.group_by is None:
                group = key
            elif key.startswith("\0"):
                group = self.of_trace.get(key[1:], (False, "(none)"))[1]
            else:
                group = key[1:]
            out.setdefault(group, []).append(key)
        return out


class _Spill:
    """Spans by group, in one temporary JSON Lines file: memory bounded by :data:`_SPILL_BYTES`.

    Each flush appends every group's buffered spans to the file, a group's spans in one piece, and remembers
    where each piece is: one file for the whole import (creating a file costs more than writing one on some
    file systems, and an import has thousands of groups), read back through one descriptor."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.buffer: dict[str, bytearray] = {}
        self.held = 0
        self.pieces: dict[str, list[tuple[int, int]]] = {}  # group → (offset, length) of its spans, in order
        self.size = 0
        self._fd: int | None = None  # the file, open for reading once something is read back

    def add(self, group: str, span: Span) -> None:
        self.add_bytes(group, orjson.dumps(span.to_json()) + b"\n")

    def add_bytes(self, group: str, raw: bytes) -> None:
        buf = self.buffer.get(group)
        if buf is None:
            buf = self.buffer[group] = bytearray()
            self.pieces.setdefault(group, [])
        buf += raw  # copied: orjson's own buffer is many times the line's length, and freed now
        self.held += len(raw)
        if self.held >= _SPILL_BYTES:
            self.flush()

    def flush(self) -> None:
        with open(self.path, "ab") as fh:
            for group, buf in self.buffer.items():
                self.pieces[group].append((self.size, len(buf)))
                fh.write(buf)
                self.size += len(buf)
        self.buffer, self.held = {}, 0

    def groups(self) -> list[str]:
        return list(self.pieces)

    def bytes(self, *groups: str) -> bytes:
        """What was added under ``groups``, in the order it was added (all of it flushed)."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        pieces = [os.pread(self._fd, length, offset) for group in groups for offset, length in self.pieces[group]]
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)

    def spans(self, *groups: str) -> list[Span]:
        return [Span.from_json(orjson.loads(line)) for line in self.bytes(*groups).split(b"\n") if line]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


# ---- one group: one tape ----------------------------------------------------------------------------------
def _build_group(
    group: str,
    spans: list[Span],
    out_dir: Path,
    report: ImportReport,
    config: Config | None,
    group_by: str | None,
) -> tuple[Path, bytes, Entry, Config] | None:
    """A group's tape recorded in memory: where it goes, its bytes, its changelog entry and the configuration it
    was recorded under; None when the group holds neither a turn nor a call."""
    spans = _unique(spans, report)
    _check_parents(spans)
    spans.sort(key=lambda s: (s.start, s.end))
    items: list[TraceTurn | TraceCall] = []
    for s in spans:
        try:
            item = classify(s)
        except RecursionError:  # an attribute of thousands of numbered segments, a value nested as deep
            raise TraceFormatError(
                f"{s.where}: span {s.name!r} ({s.span_id}): an attribute is nested too deeply to read"
            ) from None
        except (TypeError, ValueError, AttributeError, KeyError, IndexError) as e:  # a shape no reader foresaw
            raise TraceFormatError(
                f"{s.where}: span {s.name!r} ({s.span_id}): its attributes are not in a form any convention this "
                f"importer reads has ({type(e).__name__}: {e})"
            ) from None
        if item is None:
            report.skipped += 1
        else:
            items.append(item)
    items = _merge_mcp(items, spans, report)
    ids = LocalIds()
    for item in items:
        if isinstance(item, TraceTurn):
            ids.turn(item)
        else:
            ids.call(item)
    if not items:
        return None
    cfg = config if config is not None else config_for_tape(out_dir / "_.jsonl")
    name = _tape_name(group, group_by, cfg, out_dir)
    while report.names.setdefault(name, group) != group:  # a name another group of this import has: made unique
        name = f"{name}-{_digest(group)[:6]}"
    path = out_dir / f"{name}.jsonl"
    # recorded whole in memory first, then published: a failed or killed import leaves no part of a tape
    shown = _shown_group(group, group_by, cfg)
    return path, _write(path, shown, items, report, cfg), _entry(path, group, items, cfg), cfg


def _publish(data: bytes, golden: Path, entry: Entry, cfg: Config) -> Path:
    """Put a written tape in place as a recording of ``golden`` would go (the same locks, in the same order): the
    golden when there is none (its changelog entry first: a kill between leaves an entry, never a golden without
    one), else the candidate, a pending one moved to ``NAME.samples/``. Returns where it went."""
    prepare_recording(golden)
    with gate(golden):
        lock = recording_lock(golden)
        try:
            target, moved = recording_target(golden)
            if moved is not None:
                _log.warning("%s: a pending candidate nobody reviewed was moved to %s", golden, moved)
            if target == golden:
                append_entries(cfg.changelog, [entry], cfg.redactor(), sync=False)
            atomic_write(target, data, sync=False)  # one os.sync() at the end of the import
        finally:
            lock.release()
    return target


def _unique(spans: list[Span], report: ImportReport) -> list[Span]:
    """One span per span id: a duplicate (two exporters, a retried export) merged into the first, whose
    attributes it completes."""
    seen: dict[tuple[str, str], Span] = {}
    for s in spans:
        k = (s.trace_id, s.span_id)
        first = seen.get(k)
        if first is None:
            seen[k] = s
        else:
            report.duplicates += 1
            first.attrs = {**s.attrs, **first.attrs}
            first.events = first.events or s.events
    return list(seen.values())


def _parents(spans: list[Span]) -> dict[tuple[str, str], tuple[str, str]]:
    """Each span's parent, a span known by its trace and span id: a span id is unique within its trace only (a
    ``--group-by`` group holds several traces)."""
    return {(s.trace_id, s.span_id): (s.trace_id, s.parent_id) for s in spans if s.parent_id is not None}


def _check_parents(spans: list[Span]) -> None:
    """No span is its own ancestor (:func:`_parents`)."""
    parent = _parents(spans)
    where = {(s.trace_id, s.span_id): s for s in spans}
    done: set[tuple[str, str]] = set()
    for s in spans:
        path: list[tuple[str, str]] = []
        at: tuple[str, str] | None = (s.trace_id, s.span_id)
        on_path: set[tuple[str, str]] = set()
        while at is not None and at in parent and at not in done:
            if at in on_path:
                span = where[at]
                ids = [span_id for _, span_id in path[path.index(at) :] + [at]]
                raise TraceFormatError(
                    f"{span.where}: span {span.name!r} ({at[1]}) is its own ancestor: the parent ids "
                    f"{' → '.join(ids)} form a cycle"
                )
            on_path.add(at)
            path.append(at)
            at = parent[at]
        done.update(path)


def _merge_mcp(items: list[TraceTurn | TraceCall], spans: list[Span], report: ImportReport) -> list[Any]:
    """An MCP ``tools/call`` span covered by a GenAI (or other) tool span of the same call is not a call of its
    own: the same call id, or one nested in the other (the nearest such span). What it captured completes the
    other span's. Each span's ancestors are walked once: linear in the spans times their depth. Span and call ids
    are those of one trace (a ``--group-by`` group holds several): each is known with its trace's id."""
    parent = _parents(spans)
    calls = [i for i in items if isinstance(i, TraceCall) and not i.mcp]
    mcps = {_ids(i): i for i in items if isinstance(i, TraceCall) and i.mcp}
    by_id = {(c.span.trace_id, c.call_id): c for c in calls if c.call_id}
    by_span = {_ids(c): c for c in calls}
    covered: dict[tuple[str, str], TraceCall] = {}  # MCP span → the tool span covering it
    for key, m in mcps.items():  # a tool span above it
        same_call = by_id.get((m.span.trace_id, m.call_id)) if m.call_id else None
        if same_call is not None:
            covered[key] = same_call
            continue
        at = parent.get(key)
        while at is not None:
            c = by_span.get(at)
            if c is not None and c.tool == m.tool:
                covered[key] = c
                break
            at = parent.get(at)
    for c in calls:  # ... or below it
        at = parent.get(_ids(c))
        while at is not None:
            above = mcps.get(at)
            if above is not None and above.tool == c.tool and at not in covered:
                covered[at] = c
                break
            at = parent.get(at)
    out: list[Any] = []
    for item in items:
        other = covered.get(_ids(item)) if isinstance(item, TraceCall) and item.mcp else None
        if other is None:
            out.append(item)
            continue
        assert isinstance(item, TraceCall)
        report.merged += 1
        if not other.captured and item.captured:
            other.args, other.result, other.captured = item.args, item.result, True
        other.error = other.error or item.error
    return out


def _ids(item: TraceTurn | TraceCall) -> tuple[str, str]:
    """A span's trace and span id: what knows it across the traces of a group."""
    return item.span.trace_id, item.span.span_id


def _tape_name(group: str, group_by: str | None, cfg: Config, out_dir: Path) -> str:
    """The session a group's tape is named: the trace id, or the ``--group-by`` value when it is a plain file name
    as it is. Any other value gets a short hash of itself, so two never share a tape: one that is not a file name
    (nor one starting with "-", an option to rm or xargs), one naming another session's run log or candidate
    (``x.run``), the changelog, or holding a secret (a rule redacts it: the file name, the changelog and every
    line printed would quote it; the name is then only the hash)."""
    if group_by is None:
        return f"trace-{group}"  # the whole id: two traces never share a tape
    if _shown_group(group, group_by, cfg) != group:
        return f"group-{_digest(group)[:12]}"
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", group).strip("._-")[:80] or "group"
    path = out_dir / f"{name}.jsonl"
    if name == group and is_golden(path) and golden_of(path) == path and path.resolve() != cfg.changelog.resolve():
        return name
    return f"{name}-{_digest(group)[:6]}"


def _shown_group(group: str, group_by: str | None, cfg: Config) -> str:
    """The group as an import says it (its tape's header, its report line): redacted as the attribute it is the value
    of would be in a tape, by name (``session.id``, ``api_key``) or by value (a key's pattern)."""
    red = cfg.redactor()
    if group_by is not None and red.redact({group_by: group}) != {group_by: group}:
        return REDACTED
    return red.redact_text(group)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _ns(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, UTC)


class _SpanTime:
    """The tape's clock and timer during an import: the span being written, its start and its duration."""

    def __init__(self) -> None:
        self.at = datetime.now(UTC)
        self.t = 0.0

    def clock(self) -> datetime:
        return self.at

    def timer(self) -> float:
        return self.t

    def span(self, span: Span) -> None:
        self.at = _ns(span.start)

    def ran(self, span: Span) -> None:
        """The live call the tape times has run: it took the span's duration."""
        self.t += max(0, span.end - span.start) / 1e9


def _labels(group: str, items: list[TraceTurn | TraceCall]) -> dict[str, Any]:
    first = items[0].span
    turns = [i for i in items if isinstance(i, TraceTurn)]
    labels: dict[str, Any] = {"source": SOURCE, "trace_id": first.trace_id}
    service = first.resource.get("service.name")
    if service is not None:
        labels["service"] = str(service)
    if turns:
        labels["provider"] = turns[0].provider
        labels["model"] = turns[0].model
    labels["file"] = first.where.rsplit(":", 1)[0]
    labels["conventions"] = sorted({i.convention for i in items})
    if group != first.trace_id:
        labels["group"] = group
    return labels


def _write(path: Path, group: str, items: list[TraceTurn | TraceCall], report: ImportReport, cfg: Config) -> bytes:
    """The tape of ``items`` at ``path``, recorded in memory: its bytes (nothing is written)."""
    times = _SpanTime()
    times.span(items[0].span)
    orders: dict[str, tuple[int, int]] = {}  # call id → (turn, index): the place the model asked for it
    turn_k = 0
    # an import replays nothing and runs nothing live: no live spans of it (they would be the trace's own, again)
    cfg = replace(cfg, otel_enabled=False) if cfg.otel_enabled else cfg
    with _DraftTape(
        path, "record", config=cfg, labels=_labels(group, items), clock=times.clock, timer=times.timer, run_log=False
    ) as tape:
        for item in items:
            times.span(item.span)
            if isinstance(item, TraceTurn):
                turn_k += 1
                for j, (cid, _) in enumerate(item.requested):
                    if cid:
                        orders.setdefault(cid, (turn_k, j))
                _write_turn(tape, item, times, report)
            else:
                _write_call(tape, item, times, orders, report)
    files = tape._files
    assert isinstance(files, DraftFiles)
    return files.data


class _DraftTape(Tape):
    """A tape recorded in memory (see :func:`_write`)."""

    _session_files = DraftFiles


def _write_turn(tape: Tape, item: TraceTurn, times: _SpanTime, report: ImportReport) -> None:
    report.turns += 1
    if not item.captured:
        report.not_captured += 1
    for d in item.definitions:
        tape._tools.mark_traced(d["name"], TRACE_HELD)
    where = f"{item.span.where}: span {item.span.name!r} ({item.span.span_id})"
    try:
        turn = tape.model_turn(item.request, model=item.model, source=SOURCE)
    except TapeError as e:
        raise TraceFormatError(f"{where}: {e}") from None
    turn.from_trace = item.held
    times.ran(item.span)
    if item.error is not None:
        turn.fail(_error(item.error))
        return
    response = dict(item.response or {})
    response["usage"] = item.usage
    try:
        turn.finish(response, ms=item.span.ms)
    except TapeError as e:
        raise TraceFormatError(f"{where}: {e}") from None


def _write_call(
    tape: Tape, item: TraceCall, times: _SpanTime, orders: dict[str, tuple[int, int]], report: ImportReport
) -> None:
    report.calls += 1
    if not item.captured:
        report.not_captured += 1
    args = item.args
    if not item.captured:
        args = {"content": NOT_CAPTURED}
    elif not isinstance(args, dict):
        args = {"input": args}  # a tool given text (not an object): the text, under one key
    where = f"{item.span.where}: span {item.span.name!r} ({item.span.span_id})"
    # names from production data, written to the tape as they are: redacted as any value of it (a key as a name)
    red = tape._redactor
    tool = red.redact_text(item.tool)
    if item.definition is not None and tool not in tape._tools.traced:
        tape._tools.mark_traced(tool, TRACE_HELD)
        d = item.definition
        try:
            tape.contract(tool, schema=d.get("parameters"), description=d.get("description"))
        except TapeError as e:  # a definition no contract can hold (no name, a schema nested too deeply)
            raise TraceFormatError(f"{where}: the tool's definition: {e}") from None
    elif tape.registry is None or tape.registry.get(tool) is None:
        tape._tools.mark_traced(tool, ("name",))  # no definition in the trace: its name alone
    error = item.error
    raised = _error({**error, "type": red.redact_text(str(error.get("type") or ""))}) if error is not None else None

    def live() -> Any:
        times.ran(item.span)
        if raised is not None:
            raise raised
        return item.result

    order = orders.get(item.call_id) if item.call_id else None
    try:
        tape.call(tool, args, live=live, call_id=item.call_id, order=list(order) if order else None)
    except UnrecordableResult as e:  # on this tape, an error the tool never raised: the trace is not imported
        raise TraceFormatError(f"{where}: the traced tool {e.problem}; nothing is imported") from None
    except Exception as e:  # noqa: BLE001 - the traced error, recorded as the call's (any class: IOError is OSError)
        if e is not raised:
            if isinstance(e, TapeError):
                raise TraceFormatError(f"{where}: {e}") from None
            raise


_ERROR_CLASSES: dict[tuple[str, str], type[Exception]] = {}
# str(KeyError("k")) is "'k'": a key's repr with no quote or backslash inside, which is the key in those quotes
_QUOTED_KEY = re.compile(r"'([^'\\]*)'|\"([^\"\\]*)\"")


def _error(error: dict[str, str]) -> Exception:
    """A traced error as an exception to record: a builtin exception class when the trace names one (so replay
    raises it), else a :class:`TracedError` named as the trace names it (data: a name, never looked up)."""
    etype = error.get("type") or "Error"
    module, _, name = etype.rpartition(".")
    builtin = getattr(sys.modules["builtins"], name, None) if module in ("", "builtins") else None
    if isinstance(builtin, type) and issubclass(builtin, Exception) and builtin.__module__ == "builtins":
        message = error.get("message", "")
        if issubclass(builtin, KeyError):  # its text is the repr of its key: the key again, or export quotes anew
            quoted = _QUOTED_KEY.fullmatch(message)
            if quoted is not None:
                message = quoted.group(1) if quoted.group(1) is not None else quoted.group(2)
        try:
            return builtin(message)
        except Exception:  # noqa: BLE001 - a builtin whose constructor wants more: a traced error instead
            pass
    key = (module or "trace", name or "Error")
    cls = _ERROR_CLASSES.get(key)
    if cls is None:
        cls = _ERROR_CLASSES[key] = type(
            name or "Error", (TracedError,), {"__module__": key[0], "__qualname__": key[1]}
        )
    return cls(error.get("message", ""))


def _entry(path: Path, group: str, items: list[Any], cfg: Config) -> Entry:
    first = items[0].span
    return Entry(
        id=hashlib.sha256(f"import:{path}:{group}:{now_iso()}".encode()).hexdigest()[:16],
        when=now_iso(),
        action="imported",
        session=session_name(path, cfg.tapes_dir),
        steps=(),
        details=(f"from the OTLP trace {first.trace_id} in {first.where.rsplit(':', 1)[0]}",),
        rationale=None,
    )
