"""``tapetui export otlp``: a tape (with what its latest run said of each step, or, for a candidate, what its
comparison with its golden says) as OTLP JSON Lines.

One ``TracesData`` line per tape, in the OTLP file format (hex ids, nanosecond times as strings, ``kind`` and
status codes as integers), under the current GenAI conventions:

- a root ``invoke_agent {session}`` span (INTERNAL);
- a ``chat {model}`` span (CLIENT) per model turn: ``gen_ai.operation.name``, ``gen_ai.provider.name``,
  ``gen_ai.request.model`` and its settings as ``gen_ai.request.*``, ``gen_ai.system_instructions``,
  ``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.tool.definitions`` (from the tape's tool lines),
  ``gen_ai.response.{id,model,finish_reasons}``, ``gen_ai.usage.*``;
- an ``execute_tool {tool}`` span (INTERNAL) per call: ``gen_ai.tool.{name,call.id,call.arguments,call.result}``,
  ``tool.fingerprint`` and ``tool.version`` (the contract the call was recorded under), ``tool.side_effect``;
- exported as a candidate (``NAME.candidate.jsonl``), on every step's span its outcome against the golden
  (:func:`compared_outcomes`: ``hit``, ``tolerated``, ``drift`` with its changed ``args.…``/``result.…`` paths,
  ``contract``, ``miss``, ``live``); else
- on every step's span ``tapetui.outcome``: its status in the latest run log (``hit``, ``drift``, ``contract``,
  ``miss``, ``stale``, ``unused``, ``tolerated``, ``served over a changed input``, ``behaviour drift``), ``live``
  for a step a run made live, ``recorded`` when no run has replayed it; a drift is a span event
  ``tapetui.drift`` with the changed paths (``tapetui.changes``), as a contract change is ``tapetui.contract``.

A step's span starts at its ``recorded_at`` (a recording stamps a step as it starts it) and lasts its ``ms``. Ids
are derived from the tape (its trace id when it was imported from one), so exporting the same tape twice writes the
same ids. Importing the output gives the same tape back: the same keys, the same requests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from tapetui.core.changes import secret_path
from tapetui.core.clock import parse_iso
from tapetui.core.config import Config
from tapetui.core.errors import TapeError, TooDeep
from tapetui.core.files import open_regular
from tapetui.core.fingerprint import redact_manifest_line
from tapetui.core.paths import prefixed
from tapetui.core.redact import DEFAULT_REDACTOR, REDACTED, Redactor
from tapetui.core.runlog import read_run_log
from tapetui.core.store import refuse_links_out, runlog_path
from tapetui.core.tapefile import read_index
from tapetui.core.textsafe import safe_json_text
from tapetui.core.turns import TURN
from tapetui.review.comparison import compare

__all__ = ["SCOPE", "compared_outcomes", "export_otlp", "tape_spans"]

SCOPE = "tapetui"
_INTERNAL, _CLIENT = 1, 3


def export_otlp(
    tapes: list[Path],
    service: str = "tapetui",
    run_logs: list[Path | None] | None = None,
    goldens: list[Path | None] | None = None,
    config: Config | None = None,
) -> Iterator[bytes]:
    """One OTLP JSON line (``TracesData``, newline-terminated) per tape; ``run_logs``: the run whose outcomes each
    tape's spans carry (None: its latest); ``goldens``: the golden a tape (a candidate) is compared with, whose
    comparison its spans' outcomes then say (:func:`compared_outcomes`; ``config``: the rules it is compared under).

    Raises:
        TapeError: a tape or its run log cannot be read; the message names the file and line.
    """
    for n, tape in enumerate(tapes):
        log = run_logs[n] if run_logs is not None else None
        golden = goldens[n] if goldens is not None else None
        doc = {
            "resourceSpans": [
                {
                    "resource": {"attributes": _attributes({"service.name": service})},
                    "scopeSpans": [{"scope": {"name": SCOPE}, "spans": tape_spans(tape, log, golden, config)}],
                }
            ]
        }
        # C1 controls and bidi overrides a tape may hold, written as \\uXXXX: the line is printed to terminals too
        yield safe_json_text(orjson.dumps(doc).decode()).encode() + b"\n"


def _lines(path: Path, redactor: Redactor) -> list[dict[str, Any]]:
    """The tape's lines, each redacted (a tape holding a secret in clear, hand-written or recorded before a rule
    existed, never exports it) and checked to be writable as JSON text (a value nested past orjson's 254 levels
    is refused here, naming its line)."""
    idx = read_index(path, validate=True)  # a malformed line: a TapeError naming it
    if idx.line_count == 0:
        raise TapeError(f"{path}: not a tape (no complete line); nothing to export")
    out = []
    with open(open_regular(path), "rb", closefd=True) as fh:
        for n, raw in enumerate(fh, 1):
            if n > idx.line_count:  # a torn last line (an interrupted write): left out, as a replay leaves it
                break
            if not raw.strip():
                continue
            try:
                record = _redacted_line(orjson.loads(raw), redactor)
                orjson.dumps(record)
            except TooDeep:
                raise TapeError(f"{path}:{n}: a value nested too deeply to export (past ~900 levels)") from None
            except TypeError as e:  # orjson.JSONEncodeError is one
                raise TapeError(f"{path}:{n}: cannot be exported as JSON text: {e}") from None
            out.append(record)
    return out


_OUTCOME = {"hit": "hit", "drift": "drift", "contract": "contract", "miss": "miss", "stale": "stale",
            "unused": "unused", "live": "live", "behaviour": "behaviour drift"}  # fmt: skip
_LOUD = frozenset({"drift", "contract", "behaviour drift"})  # an outcome a later event never hides


def _outcomes(tape: Path, log: Path | None) -> tuple[dict[int, str], dict[int, list[dict[str, Any]]]]:
    """A run's outcome of each recorded step (``log``; None: the latest run's), and its drift, contract and
    behaviour events."""
    log = log if log is not None else runlog_path(tape)
    events = read_run_log(log) if log.exists() else []
    status: dict[int, str] = {}
    found: dict[int, list[dict[str, Any]]] = {}
    for e in events:
        step = e.get("step", e.get("seq"))
        kind = _OUTCOME.get(str(e.get("event")))
        if type(step) is not int or kind is None:
            continue
        if kind in _LOUD:
            found.setdefault(step, []).append(e)
        if kind == "hit" and e.get("tolerated"):  # served over differences a rule excused
            kind = "tolerated"
        elif kind == "hit" and e.get("changed_input"):
            kind = "served over a changed input"
        if status.get(step) not in _LOUD:
            status[step] = kind
    return status, found


_COMPARED = {"same": "hit", "tolerated": "tolerated", "changed": "drift", "replaced": "miss", "added": "live"}


def compared_outcomes(
    golden: Path, candidate: Path, config: Config | None = None
) -> tuple[dict[int, str], dict[int, list[dict[str, Any]]]]:
    """The outcome of each of a candidate's steps against its golden, as a replay would have met it: ``hit`` (the
    same), ``tolerated`` (every difference excused by a rule), ``drift`` (its arguments or result differ, or a model
    turn's request or response: a span event with the changed paths), ``contract`` (its tool's contract changed),
    ``miss`` (another tool at that place), ``live`` (a step the golden has not); keyed by the candidate's step."""
    cmp = compare(golden, candidate, config, hooks=None)
    status: dict[int, str] = {}
    found: dict[int, list[dict[str, Any]]] = {}
    for s in cmp.steps:
        if s.new is None:  # a golden step the candidate left out: the candidate has no span for it
            continue
        seq = s.new.seq
        status[seq] = _COMPARED[s.kind]
        changes = [[prefixed("args", c.path), c.old, c.new] for c in s.arg_changes]
        changes += [[prefixed("result", c.path), c.old, c.new] for c in s.result_changes]
        if s.kind == "changed" and changes:
            found.setdefault(seq, []).append({"event": "drift", "changes": changes})
        if s.fingerprint:
            status[seq] = "contract"
            found.setdefault(seq, []).append({"event": "contract", "explanation": list(s.fingerprint)})
    for d in cmp.turns.diffs:  # the model turns, each against the golden's at its place
        step = (d.new or {}).get("seq")
        if type(step) is not int:  # a golden turn the candidate left out: no span for it
            continue
        seq = step
        turn_changes = [[c.path if c.path == "model" else prefixed("request", c.path), c.old, c.new] for c in d.request]
        turn_changes += [[c.path, c.old, c.new] for c in d.response]
        if d.old is None:
            status[seq] = "live"
        elif turn_changes:
            status[seq] = "drift"
            found.setdefault(seq, []).append({"event": "drift", "changes": turn_changes})
        else:
            status[seq] = "tolerated" if d.excused or d.response_excused else "hit"
    return status, found


def tape_spans(
    tape: Path, run_log: Path | None = None, golden: Path | None = None, config: Config | None = None
) -> list[dict[str, Any]]:
    """The spans of one tape (see the module doc), with the outcomes of ``run_log`` (None: its latest run's), or,
    given the ``golden`` it is a candidate of, those of its comparison with it (:func:`compared_outcomes`)."""
    redactor = config.redactor() if config is not None else DEFAULT_REDACTOR
    if config is not None:  # a planted link to a file outside the tapes folder is never read, nor exported
        refuse_links_out(config.tapes_dir, tape, run_log or runlog_path(tape), *((golden,) if golden else ()))
    lines = _lines(tape, redactor)
    header = next((r for r in lines if r.get("type") == "session"), {})
    labels: dict[str, Any] = header["labels"] if isinstance(header.get("labels"), dict) else {}
    trace_id = labels.get("trace_id") if isinstance(labels.get("trace_id"), str) else None
    if trace_id is None or len(trace_id) != 32:
        seed = f"{tape.name}:{header.get('created_at')}"
        trace_id = hashlib.sha256(seed.encode()).hexdigest()[:32]
    status, found = _outcomes(tape, run_log) if golden is None else compared_outcomes(golden, tape, config)
    tools = {r["name"]: r for r in lines if r.get("type") == "tool" and isinstance(r.get("name"), str)}
    steps = [r for r in lines if r.get("type") in ("call", TURN) and type(r.get("seq")) is int]
    starts = [_start(r) for r in steps]
    # a step whose time is unknown (0) is unknown at both ends
    ends = [min(start + _ms(r), _NS_MAX) if start else 0 for start, r in zip(starts, steps, strict=True)]
    first_start = min(starts, default=0)
    last_end = max(ends, default=first_start)
    root_id = _span_id(trace_id, 0)
    session = tape.name.removesuffix(".jsonl")
    spans = [
        _span(
            trace_id,
            root_id,
            None,
            f"invoke_agent {session}",
            _INTERNAL,
            first_start,
            last_end,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": session,
                "tapetui.tape": _project_path(tape, config),
            },
        )
    ]
    for r, start, end in zip(steps, starts, ends, strict=True):
        seq = r["seq"]
        outcome = status.get(seq, "recorded")
        if r.get("type") == TURN:
            name, kind, attrs = _turn_span(r, tools)
        else:
            name, kind, attrs = _call_span(r, tools)
        attrs["tapetui.outcome"] = outcome
        attrs["tapetui.step"] = seq
        span = _span(trace_id, _span_id(trace_id, seq), root_id, name, kind, start, end, attrs)
        error = r.get("error")
        if isinstance(error, dict):
            span["status"] = {"code": 2, "message": str(error.get("message", ""))}
        span["events"] = [_event(_redacted_event(e, redactor), end) for e in found.get(seq, [])]
        spans.append(span)
    return spans


def _redacted_line(record: Any, redactor: Redactor) -> Any:
    """A tape line with what it holds of a call or a turn redacted — arguments, result, error, messages, response,
    a note's value, the header's labels — and a tool line as the recorder redacts a contract (its fingerprint
    kept): a schema keeps its structure (a parameter named ``api_key`` stays one), its defaults and examples under
    a secret-looking name and every secret-shaped string (a description's ``Bearer …``) redacted."""
    if not isinstance(record, dict):
        return record
    kind = record.get("type")
    if kind == "tool":
        tool = orjson.loads(redact_manifest_line(orjson.dumps(record), redactor))
        for k in ("description", "title"):
            if isinstance(tool.get(k), str):
                tool[k] = redactor.redact_text(tool[k])
        return tool
    out = dict(record)
    if kind == TURN and isinstance(record.get("request"), dict):
        request = record["request"]
        out["request"] = {k: v if k == "tools" else redactor.redact(v) for k, v in request.items()}
        rest = {k: v for k, v in record.items() if k not in ("request", "type", "key", "seq")}
        out.update(redactor.redact(rest))
        return out
    for k in ("args", "result", "error", "value", "labels", "requested_tool", "response", "usage", "call_id", "order"):
        if k in record:
            out[k] = redactor.redact(record[k])
    return out


def _project_path(tape: Path, config: Config | None) -> str:
    """The tape as the root span names it: relative to the project (a trace is shared; the machine's folders are
    not its business), or its file name for a tape outside it."""
    if config is not None:
        try:
            return str(tape.resolve().relative_to(config.root.resolve()))
        except (ValueError, OSError):
            pass
    return tape.name


def _ms(r: dict[str, Any]) -> int:
    ms = r.get("ms")
    return int(ms * 1e6) if isinstance(ms, (int, float)) and ms >= 0 else 0


def _start(r: dict[str, Any]) -> int:
    """When a step began: its ``recorded_at`` (a recording stamps a call and a turn as it starts them)."""
    at = r.get("recorded_at")
    when = parse_iso(at) if isinstance(at, str) else None
    return _ns(when) if when is not None else 0  # a line without its time: the epoch, never today


_NS_MAX = 2**64 - 1  # the latest time OTLP's fixed64 holds


def _ns(when: datetime) -> int:
    """Nanoseconds since the epoch, as OTLP's fixed64 holds them: a time it cannot (before 1970, after 2554) is 0,
    as a line without its time is."""
    ns = int(when.timestamp()) * 1_000_000_000 + when.microsecond * 1000
    return ns if 0 <= ns <= _NS_MAX else 0


def _span_id(trace_id: str, seq: int) -> str:
    return hashlib.sha256(f"{trace_id}:{seq}".encode()).hexdigest()[:16]


def _span(
    trace_id: str, span_id: str, parent: str | None, name: str, kind: int, start: int, end: int, attrs: dict[str, Any]
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": name,
        "kind": kind,
        "startTimeUnixNano": str(max(0, start)),
        "endTimeUnixNano": str(max(0, end)),
        "attributes": _attributes(attrs),
        "status": {},
    }
    if parent is not None:
        out["parentSpanId"] = parent
    return out


def _redacted_event(e: dict[str, Any], redactor: Redactor) -> dict[str, Any]:
    """A run's (or a comparison's) event as a span event carries it: its changes' values redacted, ``[REDACTED]``
    under a secret key's path (a golden in clear, compared or replayed, never exports a secret)."""
    try:
        out = redactor.redact({k: v for k, v in e.items() if k != "changes"})
        changes = e.get("changes")
        if isinstance(changes, list):
            out["changes"] = [
                _redacted_change(c, redactor) if isinstance(c, list) else redactor.redact(c) for c in changes
            ]
    except TooDeep:
        return {"event": e.get("event")}  # nested past what redaction walks: its kind alone
    result: dict[str, Any] = out
    return result


def _redacted_change(c: list[Any], redactor: Redactor) -> list[Any]:
    """``[path, old, new]`` of an event: its path's secrets redacted, its values ``[REDACTED]`` under a secret key's
    path, else through the redactor."""
    if not c:
        return c
    path = str(c[0])
    hidden = secret_path(path)
    return [redactor.redact_text(path), *(REDACTED if hidden else redactor.redact(v) for v in c[1:])]


def _event(e: dict[str, Any], at: int) -> dict[str, Any]:
    kind = e.get("event")
    attrs: dict[str, Any] = {}
    changes = e.get("changes")
    if isinstance(changes, list):
        attrs["tapetui.changes"] = [str(c[0]) for c in changes if isinstance(c, list) and c]
        attrs["tapetui.detail"] = orjson.dumps(changes, default=str).decode()
    for k in ("recorded", "live", "explanation"):
        if k in e:
            attrs[f"tapetui.{k}"] = e[k] if isinstance(e[k], str) else orjson.dumps(e[k], default=str).decode()
    return {"timeUnixNano": str(at), "name": f"tapetui.{kind}", "attributes": _attributes(attrs)}


def _definitions(names: list[Any], tools: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for n in names:
        t = tools.get(n) if isinstance(n, str) else None
        d: dict[str, Any] = {"type": "function", "name": n}
        if t is not None:
            if isinstance(t.get("description"), str):
                d["description"] = t["description"]
            if isinstance(t.get("schema"), dict):
                d["parameters"] = t["schema"]
        out.append(d)
    return out


def _turn_span(r: dict[str, Any], tools: dict[str, dict[str, Any]]) -> tuple[str, int, dict[str, Any]]:
    model = str(r.get("model") or "")
    provider, _, name = model.partition(":")
    if not name:
        provider, name = "", model
    request: dict[str, Any] = r["request"] if isinstance(r.get("request"), dict) else {}
    response: dict[str, Any] = r["response"] if isinstance(r.get("response"), dict) else {}
    attrs: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": name}
    if provider:
        attrs["gen_ai.provider.name"] = provider
    instructions = request.get("instructions")
    if isinstance(instructions, str):
        attrs["gen_ai.system_instructions"] = [{"type": "text", "content": instructions}]
    elif isinstance(instructions, list):
        attrs["gen_ai.system_instructions"] = instructions
    if request.get("content") is None:
        attrs["gen_ai.input.messages"] = request.get("messages") or []
    names = request.get("tools") or []
    if names:
        attrs["gen_ai.tool.definitions"] = _definitions(names, tools)
    for k, v in (request.get("settings") or {}).items():
        attrs[f"gen_ai.request.{k}"] = v
    if response and response.get("content") is None:
        message: dict[str, Any] = {"role": "assistant", "parts": response.get("parts") or []}
        if response.get("finish_reason") is not None:
            message["finish_reason"] = response["finish_reason"]
        attrs["gen_ai.output.messages"] = [message]
    if response.get("finish_reason") is not None:
        attrs["gen_ai.response.finish_reasons"] = [str(response["finish_reason"])]
    for k, attr in (("id", "gen_ai.response.id"), ("model_name", "gen_ai.response.model")):
        if response.get(k) is not None:
            attrs[attr] = str(response[k])
    usage: dict[str, Any] = r["usage"] if isinstance(r.get("usage"), dict) else {}
    for k, attr in (
        ("input", "gen_ai.usage.input_tokens"),
        ("output", "gen_ai.usage.output_tokens"),
        ("cache_read", "gen_ai.usage.cache_read.input_tokens"),
        ("cache_write", "gen_ai.usage.cache_write.input_tokens"),
    ):
        if type(usage.get(k)) is int:
            attrs[attr] = usage[k]
    error = r.get("error")
    if isinstance(error, dict):
        attrs["error.type"] = _error_type(error)
    return f"chat {name}", _CLIENT, attrs


def _error_type(error: dict[str, Any]) -> str:
    """A recorded error's class as ``error.type`` holds it: qualified by its module (``my.mod.QuotaError``), except
    a builtin's and an error a trace named without one, which import reads back as they were."""
    name = str(error.get("type", "Error"))
    module = error.get("module")
    if isinstance(module, str) and module and module not in ("builtins", "trace"):
        return f"{module}.{name}"
    return name


def _call_span(r: dict[str, Any], tools: dict[str, dict[str, Any]]) -> tuple[str, int, dict[str, Any]]:
    tool = str(r.get("tool"))
    t: dict[str, Any] = tools.get(tool) or {}
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.call.arguments": r.get("args"),
        "tool.fingerprint": str(r.get("fingerprint") or ""),
        "tool.version": str(t.get("version", "")),
        "tool.side_effect": bool(r.get("side_effect")),
    }
    if isinstance(t.get("description"), str):
        attrs["gen_ai.tool.description"] = t["description"]
    if r.get("call_id") is not None:
        attrs["gen_ai.tool.call.id"] = str(r["call_id"])
    error = r.get("error")
    if isinstance(error, dict):
        attrs["error.type"] = _error_type(error)
    elif "result" in r:
        attrs["gen_ai.tool.call.result"] = r["result"]
    return f"execute_tool {tool}", _INTERNAL, attrs


# ---- OTLP's AnyValue ---------------------------------------------------------------------------------------
def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": _any(v)} for k, v in attrs.items() if v is not None]


def _any(v: Any) -> dict[str, Any]:
    """A value as OTLP's ``AnyValue``: a scalar as itself (an integer as a string, as the protobuf JSON mapping
    writes int64), a list of scalars as an array, anything structured as its JSON text (the conventions' form)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, str):
        return {"stringValue": v}
    if isinstance(v, list) and all(isinstance(x, (str, bool)) for x in v):
        return {"arrayValue": {"values": [_any(x) for x in v]}}
    try:
        return {"stringValue": orjson.dumps(v).decode()}
    except TypeError as e:
        raise TapeError(f"a value that is not JSON cannot be exported: {e}") from None
