"""Counts for a session: steps, tools, side effects, expiry, the latest run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tapetui.core.changes import shown_redactor
from tapetui.core.clock import parse_iso, utcnow
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.redact import DEFAULT_REDACTOR
from tapetui.core.runlog import RunSummary, read_run_log
from tapetui.core.runstart import runs_of
from tapetui.core.store import candidate_path, iter_goldens, refuse_links_out, runlog_path, session_name
from tapetui.core.tapefile import read_index

__all__ = ["stats", "stats_of"]


def stats_of(golden: Path, config: Config | None = None) -> dict[str, Any]:
    """Counts for a session: steps (tool calls and model turns), tools, model turns and their tokens, side effects,
    time-sensitive and expired entries, latest run (its ``end`` stats redacted by ``config``'s rules: a run log is a
    file anyone may have written).

    Raises:
        TapeError: the golden cannot be read, or it or its run log is a symlink leading out of the tapes folder.
    """
    if config is not None:
        refuse_links_out(config.tapes_dir, golden, runlog_path(golden))
    redactor = config.redactor() if config is not None else DEFAULT_REDACTOR
    idx = read_index(golden, validate=True)
    now = utcnow()
    expired = sum(1 for e in idx.expires.values() if (d := parse_iso(e)) is not None and d <= now)
    out: dict[str, Any] = {
        "steps": len(idx) + len(idx.turns),
        "model_turns": len(idx.turns),
        "models": sorted({t.model for t in idx.turns}),
        "recorded_tokens": sum(t.tokens for t in idx.turns),
        "tools": sorted(set(idx.tools)),
        "side_effect_steps": sum(idx.side_effects),
        "time_sensitive": len(idx.expires),
        "expired": expired,
        "recorded_ms": round(sum(idx.ms), 3),
        "pending_candidate": candidate_path(golden).exists(),
        "torn_tail": idx.torn is not None,
    }
    log = runlog_path(golden)
    if log.exists():
        runs = runs_of(read_run_log(log))
        events = runs[-1] if runs else []  # the last run (of a run group's log: its own events)
        for ev in reversed(events):
            if ev.get("event") == "end" and isinstance(ev.get("stats"), dict):
                run = RunSummary.of(events)
                # the steps by status as the tree counts them (one status a step), an older run log's too
                shown = redactor.redact(ev["stats"])
                out["last_run"] = {**shown, "statuses": run.counts(), "off_tape": run.off_tape}
                break
    return out


def stats(config: Config, where: Path | None = None) -> dict[str, dict[str, Any]]:
    """:func:`stats_of` for each session in a folder (default: the tapes folder) or for one golden, by session name."""
    where = config.tapes_dir if where is None else Path(where)
    goldens = iter_goldens(where) if where.is_dir() else [where]
    out: dict[str, dict[str, Any]] = {}
    for g in goldens:
        if not g.exists():
            continue
        try:
            out[session_name(g, config.tapes_dir)] = stats_of(g, config)
        except TapeError as e:  # one session that cannot be read says why; the others are counted
            out[session_name(g, config.tapes_dir)] = {"error": shown_redactor().redact_text(str(e))}
    return out
