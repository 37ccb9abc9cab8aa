"""Checking sessions: what a run log says went wrong, a golden's stored keys, pending candidates.

``check`` is what ``tapetui check`` and CI run; the app shows the same findings.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rapidfuzz.distance import Levenshtein

from tapetui.core.changes import Change, format_changes
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import file_sha256
from tapetui.core.index import TapeIndex
from tapetui.core.jsondiff import IgnoreRules
from tapetui.core.locks import reading
from tapetui.core.runlog import CALL_EVENTS, EXECUTED_EVENTS, RunLogReader, event_problem
from tapetui.core.store import (
    candidate_path,
    iter_goldens,
    journal_path,
    refuse_links_out,
    runlog_path,
    session_name,
)
from tapetui.core.tapefile import read_index
from tapetui.review.comparison import Comparison, LoadedTape, compare, load
from tapetui.review.journal import recover

__all__ = [
    "Finding",
    "FindingKind",
    "Progress",
    "SessionReport",
    "check",
    "check_session",
    "compare_run",
    "golden_sha256",
    "no_tapes_message",
    "pending",
    "run_log_stale",
]

FindingKind = Literal[
    "drift",  # a call's arguments changed (run log)
    "miss",  # a call not on the tape (run log)
    "fingerprint",  # a tool's contract changed (run log)
    "unused",  # recorded steps never called, or not reached
    "stale",  # an expired entry was replayed
    "stale_run",  # the last run predates the golden
    "pending",  # a candidate waits for review
    "candidate",  # one line of the candidate's comparison with the golden
    "error",  # the run ended in an error, or has no end
    "tools",  # the executed tool sequence changed
    "torn",  # the golden's last line is torn
    "key",  # a stored key is not the key of its arguments
    "journal",  # an interrupted change recover could not finish: review actions on the session are refused
]
"""What a :class:`Finding` is about."""

Progress = Callable[[int, int], None]
"""``progress(done, total)``: called by :func:`check` as sessions are checked."""


# ---- run logs -----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Finding:
    """One thing ``check`` reports about a session."""

    kind: FindingKind
    text: str
    seq: int | None = None
    tool: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    warning: bool = False  # shown, but does not fail check

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "seq": self.seq,
            "tool": self.tool,
            "text": self.text,
            "warning": self.warning,
            **self.data,
        }


_REPLAY_ERRORS = ("TapeDrift", "TapeMiss", "ToolDriftError", "TapeStale")


def compare_run(
    golden: TapeIndex,
    events: list[dict[str, Any]],
    config: Config | None = None,
    *,
    log: Path | None = None,
    checked: bool = False,
) -> list[Finding]:
    """What a run log says went wrong against its golden.

    Never silent about a run that did not replay cleanly: a run log with no ``end`` (the replay
    was killed, or is still running) and a run that ended in an error are findings, even when
    every argument path it drifted on is hidden by the ignore rules (those paths are still part
    of the call key, so the replay raised).

    Args:
        log: the run log, named in messages.
        checked: the events come from :class:`~tapetui.core.runlog.RunLogReader`, which checked each one
            (:func:`~tapetui.core.runlog.event_problem`); other events are checked here.

    Raises:
        TapeError: a malformed event, naming the run log and its line.
    """
    rules = config.ignore_rules() if config else IgnoreRules()
    where = str(log) if log is not None else "run log"
    out: list[Finding] = []
    executed: list[str] = []
    unused: list[dict[str, Any]] = []
    end: dict[str, Any] | None = None
    last_seq: int | None = None
    last_tool: str | None = None
    hidden_at: int | None = None  # index in ``out`` of the finding for the last drift whose paths are all ignored
    for n, ev in enumerate(events, 1):
        problem = None if checked else event_problem(ev)
        if problem is None and ev.get("event") == "invalid":
            problem = str(ev.get("problem") or "invalid event")
        if problem is not None:
            line = ev.get("line") if type(ev) is dict else None
            raise TapeError(f"{where}:{line}: {problem}" if type(line) is int else f"{where}: event {n}: {problem}")
        kind, seq, tool = ev.get("event"), ev.get("seq"), ev.get("tool")
        executes = kind in EXECUTED_EVENTS or (kind == "fingerprint" and not ev.get("allowed"))
        if executes and isinstance(tool, str):
            executed.append(tool)
        if kind in CALL_EVENTS and seq is not None:
            last_seq, last_tool = seq, tool
        if kind == "drift":
            changes = [Change(p, o, n) for p, o, n in ev.get("changes") or []]
            shown = [c for c in changes if not rules.ignores(c.path.replace("[", ".").replace("]", "").split("."))]
            data = {"recorded_key": ev.get("recorded_key"), "key": ev.get("key")}
            if not shown:
                # The call key still differed (ignore rules only hide paths from diffs): the replay raised here.
                paths = ", ".join(_arg_paths(changes)) or "no path shown"
                hidden_at = len(out)
                out.append(
                    Finding(
                        "drift",
                        f"{tool}  step {seq}  drift only in ignored paths ({paths}); they are "
                        "still part of the call key, so the replay raised TapeDrift",
                        seq,
                        tool,
                        {**data, "ignored_paths": _arg_paths(changes)},
                    )
                )
                continue
            hidden_at = None
            for line in format_changes(shown, prefix="args"):
                out.append(Finding("drift", f"{tool}  step {seq}  {line}", seq, tool, data))
        elif kind == "miss":
            near = ev.get("nearest")
            detail = "; ".join(format_changes([Change(p, o, n) for p, o, n in ev.get("changes") or []], "args"))
            why = f" ({ev['reason']})" if ev.get("reason") else ""
            text = f"{tool}  step {seq}  miss{why}: {ev.get('key')} not on tape" + (
                (f"; nearest is step {near}: {detail}" if detail else f"; recorded at step {near}")
                if near
                else f"; no recorded {tool} call"
            )
            out.append(Finding("miss", text, seq, tool, {"key": ev.get("key")}))
        elif kind == "fingerprint" and not ev.get("allowed"):
            out.append(
                Finding(
                    "fingerprint",
                    f"{tool}  step {seq}  [CONTRACT] fingerprint {ev.get('recorded')} → {ev.get('live')}",
                    seq,
                    tool,
                )
            )
            out += [
                Finding("fingerprint", f"{tool}  step {seq}  [CONTRACT] {line}", seq, tool)
                for line in ev.get("explanation") or []
            ]
        elif kind == "unused":
            unused.append(ev)
        elif kind == "stale":
            out.append(
                Finding(
                    "stale",
                    f"{tool}  step {seq}  expired at {ev.get('expires_at')} (stale policy {ev.get('policy')})",
                    seq,
                    tool,
                    warning=ev.get("policy") == "warn",
                )
            )
        elif kind == "end":
            end = ev
            err = ev.get("error")
            if err is not None and err.get("type") not in _REPLAY_ERRORS:  # an error object is an error, even {}
                out.append(
                    Finding(
                        "error",
                        f"run ended with {err.get('type') or 'an error'}: {_first_line(err.get('message'))}",
                        data={"error": err.get("type")},
                    )
                )
    if end is None:
        out.append(
            Finding(
                "error",
                f"run log has no end: the replay was killed or is still running ({len(events)} events)",
                data={"events": len(events)},
            )
        )
    err = end.get("error") if end is not None else None
    if err is not None and err.get("type") in _REPLAY_ERRORS:
        etype = err["type"]
        if etype == "TapeDrift" and hidden_at is not None and hidden_at == len(out) - 1:
            old = out[hidden_at]  # the run stopped at that drift: say so in its words
            out[hidden_at] = Finding(
                "drift",
                f"{old.tool}  step {old.seq}  run ended with TapeDrift at step {old.seq}; "
                f"the changed paths are ignored in diffs but still part of the call key "
                f"({', '.join(old.data['ignored_paths']) or 'no path shown'})",
                old.seq,
                old.tool,
                {**old.data, "error": etype},
            )
        elif not any(not f.warning for f in out):  # nothing above says why the run stopped
            at = f" at step {last_seq}" if last_seq is not None else ""
            out.append(
                Finding(
                    "error",
                    f"run ended with {etype}{at}: {_first_line(err.get('message'))}",
                    last_seq,
                    last_tool,
                    {"error": etype},
                )
            )
    stopped_by: dict[str, Any] | None = end.get("error") if end is not None else None
    stopped = stopped_by is not None
    if stopped_by is not None and unused:
        # The run stopped at a drift or miss: the steps after it were not reached, not skipped.
        steps = ", ".join(str(e.get("seq")) for e in unused)
        out.append(
            Finding(
                "unused",
                f"run stopped at step {len(executed)} ({stopped_by.get('type')}); step(s) {steps} not reached",
                data={"steps": [e.get("seq") for e in unused]},
            )
        )
    else:
        out += [
            Finding(
                "unused",
                f"{e.get('tool')}  step {e.get('seq')}  unused: recorded but never called",
                e.get("seq"),
                e.get("tool"),
            )
            for e in unused
        ]
    recorded = list(golden.tools)
    dist = Levenshtein.distance(recorded, executed)
    if dist and end is not None and not stopped:
        out.insert(
            0,
            Finding(
                "tools",
                f"[TOOLS] executed sequence changed (edit distance {dist}): {recorded} → {executed}",
                data={"edit_distance": dist},
            ),
        )
    return out


def _arg_paths(changes: list[Change]) -> list[str]:
    return [("args" + ("" if c.path.startswith("[") else ".") + c.path) if c.path else "args" for c in changes]


def _first_line(text: Any) -> str:
    s = str(text) if text is not None else ""
    return s.split("\n", 1)[0]


# ---- check --------------------------------------------------------------------------
@dataclass
class SessionReport:
    """Everything ``check`` found for one session."""

    session: str
    golden: Path
    findings: list[Finding] = field(default_factory=list)
    comparison: Comparison | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not any(not f.warning for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "session": self.session,
            "golden": str(self.golden),
            "ok": self.ok,
            "error": self.error,
            "findings": [f.to_json() for f in self.findings],
            "candidate": self.comparison.to_json() if self.comparison else None,
        }


def check_session(golden: Path, config: Config) -> SessionReport:
    """Check one session, reading it consistently (see :func:`_check_session_once` for what is checked).

    The read holds the session's lock shared (:func:`tapetui.core.locks.reading`), so no review action
    changes the files under it; a recording may still move a pending candidate into the samples
    folder, so a read that failed is done again while the files change under it (a real error,
    such as a malformed line, fails the same way on unchanged files and is reported).
    """
    with reading(golden):
        rep = _check_session_once(golden, config)
    for _ in range(2):  # a failed read is done again only while the session's files keep changing under it
        if rep.error is None:
            break
        before = _stamp(golden)
        with reading(golden):
            rep = _check_session_once(golden, config)
        if rep.error is not None and _stamp(golden) == before:
            break  # the same files, the same error: a real one
    return rep


def _stamp(golden: Path) -> tuple[tuple[int, int, int] | None, ...]:
    out: list[tuple[int, int, int] | None] = []
    for p in (golden, candidate_path(golden), runlog_path(golden)):
        try:
            st = os.stat(p)
            out.append((st.st_ino, st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def _check_session_once(golden: Path, config: Config) -> SessionReport:
    """Check one session: its golden (every line parsed, every stored key checked against its arguments),
    its latest run log and its pending candidate. A file that cannot be read as what it is named
    (malformed, a FIFO or a folder, gone since it was listed, a name too long) sets ``error``."""
    rep = SessionReport(session_name(golden, config.tapes_dir), golden)
    try:
        cand, log = candidate_path(golden), runlog_path(golden)
        refuse_links_out(config.tapes_dir, golden, cand, log)
        if os.path.lexists(journal_path(golden)):  # check ran recover first: what is left, it could not finish
            rep.findings.append(
                Finding(
                    "journal",
                    f"{journal_path(golden).name}: an interrupted change could not be finished; review actions on "
                    "this session are refused until it is resolved (`tapetui recover` says why)",
                )
            )
        idx = read_index(golden, validate=True, keep_bytes=True) if golden.exists() else None
        if idx is not None:
            rep.findings += _key_findings(idx)
        if idx is not None and idx.torn is not None:
            rep.findings.append(
                Finding(
                    "torn", f"torn last line {idx.torn.line} ({idx.torn.size:,} bytes); the next append sets it aside"
                )
            )
        if idx is not None:
            reader = RunLogReader(log)
            events = reader.poll()[1]
            if reader.inode is not None:  # there is a run log (an empty one too: a run that never got going)
                whole = idx.data if idx.data is not None and len(idx.data) == idx.size else None
                stale = run_log_stale(golden, events, whole)  # a small golden is hashed as read, not read again
                if stale:
                    rep.findings.append(Finding("stale_run", stale))
                else:
                    rep.findings += compare_run(idx, events, config, log=log, checked=True)
        if cand.exists():
            if idx is None:
                rep.findings.append(Finding("pending", f"pending new session {cand.name} (no golden yet)"))
            else:
                c = load(cand)
                rep.findings += _key_findings(c.index)
                cmp = compare(LoadedTape(golden, idx, tuple(idx.records())), c, config)
                rep.comparison = cmp
                n = len(cmp.changed_steps)
                rep.findings.append(
                    Finding("pending", f"pending candidate {cand.name}: {n} step(s) differ", data={"clean": cmp.clean})
                )
                rep.findings += [Finding("candidate", line) for line in cmp.lines()]
    except TapeError as e:
        rep.error = str(e)
    except OSError as e:  # a name too long for the file system, a folder that cannot be listed...
        rep.error = f"{e.filename or golden}: {e.strerror or e}"
    return rep


def golden_sha256(golden: Path, data: bytes | None = None) -> str | None:
    """The sha256 of a golden's bytes (what a run log's ``start`` names), None when there is none.

    ``data``: the golden's bytes when the caller has read them already (not read again)."""
    return hashlib.sha256(data).hexdigest() if data is not None else file_sha256(golden)


def run_log_stale(golden: Path, events: list[dict[str, Any]], data: bytes | None = None) -> str | None:
    """Why a run log does not describe the golden as it is now, or None.

    A run's ``start`` event names the sha256 of the golden it ran against; after an accept (or any
    change of the golden) that run's drift is history, not current drift. A run log from before the
    hash was recorded is "unknown", not stale (None): file times cannot tell, a fresh clone resets them.
    """
    start = next((e for e in events if e.get("event") == "start"), None)
    recorded = start.get("golden_sha256") if start is not None else None
    if not isinstance(recorded, str):
        return None
    if recorded == golden_sha256(golden, data):
        return None
    return (
        "last run predates the golden (it ran against an earlier version of it); run the replay again "
        "(p in the app) to check the golden as it is now"
    )


def _key_findings(idx: TapeIndex) -> list[Finding]:
    """A call whose stored key is not the key of its stored arguments was edited by hand: replay would
    look it up by the key of the arguments it is called with, so the golden is not what it says."""
    return [
        Finding(
            "key",
            f"{idx.path}:{line}: {tool} step {seq}: stored key {key} is not the key of the "
            f"arguments on the line ({computed or 'none: they cannot be encoded'}); edited after it was "
            "recorded? re-record the step, or put the arguments back",
            seq,
            tool,
            {"line": line, "stored_key": key, "computed_key": computed},
        )
        for line, seq, tool, key, computed in idx.key_mismatches
    ]


def no_tapes_message(tapes_dir: Path, config: Config) -> str:
    return f"no tapes found in {tapes_dir} (tapes.toml: {config.path or 'none found'})"


def check(
    tapes_dir: Path,
    config: Config,
    sessions: Iterable[Path] | None = None,
    *,
    progress: Progress | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[SessionReport]:
    """Check every session of a folder (or the given goldens), after :func:`recover`.

    Args:
        progress: called with ``(0, total)`` before the first session and ``(done, total)`` after
            each one, so a front can draw a progress bar.
        on_note: called with each line :func:`recover` reports (a repair, a problem left in place).

    Raises:
        TapeError: the folder does not exist or holds no tapes (a misconfigured CI job must not go green).
    """
    for note in recover(config):
        if on_note is not None:
            on_note(note)
    goldens = list(sessions) if sessions is not None else list(iter_goldens(tapes_dir))
    if sessions is None and not goldens:
        raise TapeError(no_tapes_message(tapes_dir, config))
    total = len(goldens)
    if progress is not None:
        progress(0, total)
    reports = []
    for done, g in enumerate(goldens, 1):
        reports.append(check_session(g, config))
        if progress is not None:
            progress(done, total)
    return reports


def pending(config: Config) -> list[tuple[Path, Path]]:
    """``(golden, candidate)`` of every candidate waiting for review."""
    return [(g, candidate_path(g)) for g in iter_goldens(config.tapes_dir) if candidate_path(g).exists()]
