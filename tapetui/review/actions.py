"""Review actions on a session: accept, accept-all, reject, expire, restore.

Each runs under the session's lock (:func:`tapetui.review.journal.session`) and changes a golden
only through :func:`tapetui.review.journal.commit`, which first keeps what the change replaces
(:mod:`tapetui.review.history`, for ``tapetui undo``) and never changes a golden without its
changelog entry.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import tapetui.review.history as history
import tapetui.review.journal as journal
from tapetui.core.changes import format_changes
from tapetui.core.clock import iso, parse_iso, utcnow
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import atomic_write, read_regular
from tapetui.core.index import TapeIndex
from tapetui.core.store import candidate_path, refuse_links_out
from tapetui.core.tapefile import dump_line
from tapetui.review.changelog import Entry
from tapetui.review.comparison import Comparison, LoadedTape, StepDiff, compare, excused_lines, load
from tapetui.review.findings import pending
from tapetui.review.parking import is_parked

__all__ = [
    "AlreadyExpired",
    "BatchResult",
    "accept",
    "accept_all",
    "expire",
    "file_bytes",
    "rebuild",
    "reject",
    "restore",
    "restore_candidate",
]


def _require_why(why: str | None, action: str) -> str:
    if why is None or not why.strip():
        raise TapeError(f"{action} needs a rationale (--why TEXT): the changelog records why a golden changed")
    return why.strip()


def rebuild(
    index: TapeIndex,
    replace: dict[int, bytes],
    extra_manifests: list[bytes],
    spans: dict[int, tuple[int, bytes]] | None = None,
) -> bytes:
    """The golden's bytes with some call lines replaced (by call index), other lines replaced (``spans``: offset →
    (length, new line), a model turn's) and manifests added before the first call or turn."""
    data = file_bytes(index)
    if index.torn is not None:
        data = data[: index.torn.offset]
    cuts = {index.offsets[i]: (index.lengths[i], line) for i, line in replace.items()}
    cuts.update(spans or {})
    first = min(index.offsets[0] if len(index) else len(data), index.turns[0].offset if index.turns else len(data))
    parts = [data[:first], *extra_manifests]
    pos = first
    for off in sorted(cuts):
        length, line = cuts[off]
        parts.append(data[pos:off])
        parts.append(line)
        pos = off + length
    parts.append(data[pos:])
    return b"".join(parts)


def accept(config: Config, golden: Path, why: str | None, steps: Iterable[int] | None = None) -> Entry:
    """Promote the candidate (whole, or the given golden steps) to golden, with a changelog entry.

    Raises:
        TapeError: no rationale, no candidate, a step that does not line up.
    """
    why = _require_why(why, "accept")
    golden = Path(golden)
    cand = candidate_path(golden)
    refuse_links_out(config.tapes_dir, golden, cand)
    with journal.session(config, golden):  # a second accept waits, then finds the candidate gone
        return _accept_locked(config, golden, cand, why, steps)


def _accept_locked(config: Config, golden: Path, cand: Path, why: str, steps: Iterable[int] | None) -> Entry:
    if not os.path.lexists(cand):
        if is_parked(config, golden):
            raise TapeError(
                f"{golden}: its pending candidate is parked while check --samples records samples; accept it after"
            )
        raise TapeError(f"{golden}: no pending candidate to accept")
    c = load(cand, keep_bytes=True)  # read once: compared, kept as history, promoted
    if c.index.line_count == 0:  # never a golden with every step gone
        raise TapeError(
            f"{cand}: not a tape (no complete line); nothing to accept (a recording killed as it began leaves one: "
            "reject it, or record the session again)"
        )
    cand_before = file_bytes(c.index)
    torn = _torn(c)
    if not golden.exists():
        details = [f"new session with {len(c.calls)} steps: {[x.tool for x in c.calls]}", *torn]
        entry = journal.new_entry("accept (new session)", config, golden, [x.seq for x in c.calls], details, why)
        before = history.Before(True, None, True, cand_before)
        journal.commit(config, golden, complete_bytes(c), entry, before=before, remove_candidate=True)
        return entry
    g = load(golden, keep_bytes=True)
    golden_before = file_bytes(g.index)
    cmp = compare(g, c, config, hooks=None)  # what changed is recorded; no user hook runs in an accept
    if steps is None:
        details = _details(cmp, cmp.changed_steps) + _note_details(cmp) + [line for line, _ in cmp.turns.rows()]
        details = (details or ["no differences"]) + torn
        entry = journal.new_entry("accept", config, golden, [s.seq for s in cmp.changed_steps if s.old], details, why)
        before = history.Before(True, golden_before, True, cand_before)
        journal.commit(config, golden, complete_bytes(c), entry, before=before, remove_candidate=True)
        return entry
    wanted = sorted(set(steps))
    by_seq = {s.old.seq: s for s in cmp.steps if s.old is not None and s.kind in ("same", "changed", "tolerated")}
    same = [n for n in wanted if n in by_seq and by_seq[n].kind == "same"]
    if same and len(same) == len(wanted):  # accepted already (or never different): nothing would change
        raise TapeError(
            f"{golden}: step{'s' if len(same) > 1 else ''} {', '.join(map(str, same))} of the golden "
            f"{'are' if len(same) > 1 else 'is'} the same in the candidate: nothing to accept (--step takes the "
            "golden's step numbers, as diff shows them)"
        )
    replace: dict[int, bytes] = {}
    manifests: list[bytes] = []
    chosen = []
    spans: dict[int, tuple[int, bytes]] = {}
    turns = {t.seq: k for k, t in enumerate(g.index.turns)}
    for n in wanted:
        sd = by_seq.get(n)
        if sd is None and n in turns:  # a model turn: the candidate's turn at the same place
            spans.update(_turn_span(g, c, turns[n], manifests))
            continue
        if sd is None or sd.new is None:
            raise TapeError(
                f"{golden}: step {n} does not line up with a step of the candidate; accept the whole candidate instead"
            )
        assert sd.old is not None
        chosen.append(sd)
        raw = dict(sd.new.raw)
        raw["seq"] = sd.old.seq
        i = next(i for i in range(len(g.index)) if g.index.lines[i] == sd.old.line)
        replace[i] = dump_line(raw)
        if sd.fingerprint and sd.tool in c.manifests:
            manifests.append(c.index.manifest_lines[sd.tool])
    data = rebuild(g.index, replace, manifests, spans)
    turn_lines = [
        line for d in cmp.turns.changed if d.old is not None and d.old.get("seq") in wanted for line, _ in d.rows()
    ]
    # When nothing else differs any more, the candidate has been fully reviewed.
    rest = [s for s in cmp.changed_steps if s not in chosen]
    turns_left = [d for d in cmp.turns.changed if d.old is None or d.old.get("seq") not in wanted]
    done = not rest and not cmp.edit_distance and not cmp.changed_notes and not turns_left  # notes: whole only
    details = _details(cmp, chosen) + turn_lines + (torn if done else [])
    entry = journal.new_entry("accept", config, golden, wanted, details, why)
    before = history.Before(True, golden_before, done, cand_before)
    journal.commit(config, golden, data, entry, before=before, remove_candidate=done)
    return entry


def _torn(c: LoadedTape) -> list[str]:
    """What an accept leaves out of the candidate, said in its changelog entry: a torn last line (a recording killed
    mid-line; its bytes stay in the undo history)."""
    torn = c.index.torn
    if torn is None:
        return []
    return [f"{c.path.name}: torn last line {torn.line} ({torn.size:,} bytes, an interrupted write) left out"]


def _turn_span(g: LoadedTape, c: LoadedTape, k: int, manifests: list[bytes]) -> dict[int, tuple[int, bytes]]:
    """Golden turn ``k``'s line replaced by the candidate's turn at the same place (keeping the golden's step), and
    the candidate's tool lines of the offered tools whose contract differs added to ``manifests``."""
    if k >= len(c.index.turns):
        raise TapeError(
            f"{g.path}: model turn {k + 1} has no turn at its place in the candidate; accept the whole candidate"
        )
    old, new = g.index.turns[k], dict(c.index.turn(k))
    new["seq"] = old.seq
    for name, fp in (new.get("offered") or {}).items():
        held = g.index.manifests.get(name)
        if (held is None or held.fingerprint != fp) and name in c.index.manifest_lines:
            manifests.append(c.index.manifest_lines[name])
    return {old.offset: (old.length, dump_line(new))}


def file_bytes(index: TapeIndex) -> bytes:
    """A tape's bytes: as the index read them when it kept them (a small tape), else read now.

    Raises:
        TapeError: the file is not a regular file any more.
    """
    if index.data is not None and len(index.data) == index.size:
        return index.data
    return read_regular(index.path)


def complete_bytes(t: LoadedTape) -> bytes:
    """A tape's complete lines as indexed (a torn tail a dead recorder left is not promoted)."""
    idx = t.index
    if idx.data is not None and len(idx.data) >= idx.scanned:
        return idx.data[: idx.scanned]
    with open(t.path, "rb") as fh:
        data = fh.read(t.index.scanned)
    if len(data) != t.index.scanned:
        raise TapeError(f"{t.path}: changed while it was read; try again")
    return data


def _details(cmp: Comparison, chosen: Iterable[StepDiff]) -> list[str]:
    out = []
    if cmp.edit_distance:
        out.append(f"tool sequence edit distance {cmp.edit_distance}: {list(cmp.old_tools)} → {list(cmp.new_tools)}")
    for s in chosen:
        keys = f"key {s.old.key if s.old else '-'} → {s.new.key if s.new else '-'}"
        fp = ""
        if s.old and s.new and s.old.fingerprint != s.new.fingerprint:
            fp = f"; fingerprint {s.old.fingerprint} → {s.new.fingerprint}"
        out.append(f"step {s.seq} {s.tool} ({s.kind}): {keys}{fp}")
        out += [f"step {s.seq} {line}" for line in format_changes(s.arg_changes, prefix="args")]
        out += [f"step {s.seq} {line}" for line in format_changes(s.result_changes, prefix="result")]
        out += [f"step {s.seq} {line}" for line in excused_lines(s.excused)]  # accepted too: the golden changes
        if s.expiry is not None:
            out.append(f"step {s.seq} expires_at {s.expiry[0] or '(none)'} → {s.expiry[1] or '(none)'}")
        out += [f"step {s.seq} contract: {line}" for line in s.fingerprint]
    return out


def _note_details(cmp: Comparison) -> list[str]:
    """The notes a whole-candidate accept changes (a step accept leaves the golden's notes as they are)."""
    return [line for n in cmp.changed_notes for line in n.lines()]


def reject(config: Config, golden: Path, why: str | None = None) -> Entry:
    """Discard the pending candidate, with a changelog entry naming what was discarded (and the reason, if given)."""
    golden = Path(golden)
    cand = candidate_path(golden)
    refuse_links_out(config.tapes_dir, golden, cand)
    with journal.session(config, golden):
        if not os.path.lexists(cand):
            raise TapeError(f"{golden}: no pending candidate to reject")
        data = read_regular(cand, "candidate")
        reason = why.strip() if why and why.strip() else None
        details, steps = _discarded(config, golden, cand)
        entry = journal.new_entry("reject", config, golden, steps, details, reason)
        before = history.Before(False, None, True, data)
        # always with its changelog entry (what was discarded), so `undo` can name what it brings back
        journal.commit(config, golden, None, entry, before=before, remove_candidate=True)
        return entry


def _discarded(config: Config, golden: Path, cand: Path) -> tuple[list[str], list[int]]:
    """What a reject discards, for its changelog entry: the candidate, and the steps in which it differed
    (their key changes); the candidate alone when it cannot be compared (a malformed one is rejected too)."""
    head = f"candidate {cand.name} discarded"
    if not golden.exists():
        return [f"{head} (a new session; no golden)"], []
    try:
        cmp = compare(load(golden), load(cand), config, hooks=None)
    except TapeError as e:
        return [f"{head} (it could not be compared: {e})"], []
    changed = cmp.changed_steps
    contracts = [f"tool {tool}: fingerprint {old} → {new}" for tool, (old, new, _) in sorted(cmp.contracts.items())]
    return [head, *contracts, *(_step_change(s) for s in changed)], [s.seq for s in changed if s.old]


def _step_change(s: StepDiff) -> str:
    """A discarded step's change, for a reject's entry: its key and, when it moved, its fingerprint."""
    old, new = s.old, s.new
    changes = []
    if old is None or new is None or old.key != new.key:
        changes.append(f"key {old.key if old else '-'} → {new.key if new else '-'}")
    if old is not None and new is not None and old.fingerprint != new.fingerprint:
        changes.append(f"fingerprint {old.fingerprint} → {new.fingerprint}")
    return f"step {s.seq} {s.tool} ({s.kind}): " + (", ".join(changes) or "its result or error")


def expire(
    config: Config,
    golden: Path,
    steps: Iterable[int] | None = None,
    *,
    all_time_sensitive: bool = False,
    why: str | None = None,
    now: datetime | None = None,
) -> Entry:
    """Mark entries expired (``expires_at`` = now) so the next ``fill`` re-records them."""
    golden = Path(golden)
    refuse_links_out(config.tapes_dir, golden)
    with journal.session(config, golden):
        return _expire_locked(config, golden, steps, all_time_sensitive, why, now)


class AlreadyExpired(TapeError):
    """Every entry asked for has expired already: nothing was changed and no changelog entry written."""


def _expire_turns(
    config: Config, g: LoadedTape, turns: list[int], calls: list[int], when: str, why: str | None
) -> Entry:
    """Expire model turns (and the calls among the steps asked for): a fill runs each again live (the model)."""
    spans: dict[int, tuple[int, bytes]] = {}
    replace: dict[int, bytes] = {}
    details = []
    for k in turns:
        t = g.index.turns[k]
        obj = dict(g.index.turn(k))
        if isinstance(obj.get("expires_at"), str):
            continue
        obj["expires_at"] = when
        spans[t.offset] = (t.length, dump_line(obj))
        details.append(f"step {t.seq} model turn ({t.model}): marked expired at {when}")
    for i in calls:
        raw = dict(g.calls[i].raw)
        raw["expires_at"] = when
        replace[i] = dump_line(raw)
        details.append(f"step {g.calls[i].seq} {g.calls[i].tool}: expires_at → {when}")
    if not details:
        raise AlreadyExpired(f"{g.path}: already expired: nothing to do (the next fill re-records expired steps)")
    steps = sorted([g.index.turns[k].seq for k in turns] + [g.calls[i].seq for i in calls])
    entry = journal.new_entry("expire", config, g.path, steps, details, why.strip() if why and why.strip() else None)
    before = history.Before(True, file_bytes(g.index))
    journal.commit(config, g.path, rebuild(g.index, replace, [], spans), entry, before=before)
    return entry


def _expire_locked(
    config: Config,
    golden: Path,
    steps: Iterable[int] | None,
    all_time_sensitive: bool,
    why: str | None,
    now: datetime | None,
) -> Entry:
    g = load(golden, keep_bytes=True)
    when = iso((now or utcnow()).replace(microsecond=0))
    wanted = set(steps or ())
    if all_time_sensitive:
        targets = [i for i, c in enumerate(g.calls) if c.expires_at is not None]
        if not targets:
            raise TapeError(f"{golden}: no time-sensitive entries (none has expires_at)")
    else:
        if not wanted:
            raise TapeError("expire needs --step N or --all-time-sensitive")
        targets = [i for i, c in enumerate(g.calls) if c.seq in wanted]
        turns = [k for k, t in enumerate(g.index.turns) if t.seq in wanted]
        missing = wanted - {g.calls[i].seq for i in targets} - {g.index.turns[k].seq for k in turns}
        if turns and not missing:
            return _expire_turns(config, g, turns, targets, when, why)
        if missing:
            raise TapeError(f"{golden}: no step {', '.join(map(str, sorted(missing)))} on the tape")
    instant = parse_iso(when)
    assert instant is not None
    done = [i for i in targets if (d := parse_iso(g.calls[i].expires_at or "")) is not None and d <= instant]
    if len(done) == len(targets):  # pressing x again must not move an expiry later, nor log a change
        steps_text = ", ".join(f"{g.calls[i].seq} (at {g.calls[i].expires_at})" for i in done)
        raise AlreadyExpired(
            f"{golden}: already expired: step {steps_text}; nothing to do (the next fill re-records expired steps)"
        )
    targets = [i for i in targets if i not in done]
    replace = {}
    details = []
    for i in targets:
        raw = dict(g.calls[i].raw)
        old = raw.get("expires_at")
        details.append(
            f"step {g.calls[i].seq} {g.calls[i].tool}: "
            + (f"expires_at {old} → {when}" if isinstance(old, str) else f"marked expired at {when} (it had no expiry)")
        )
        raw["expires_at"] = when
        replace[i] = dump_line(raw)
    entry = journal.new_entry(
        "expire",
        config,
        golden,
        [g.calls[i].seq for i in targets],
        details,
        why.strip() if why and why.strip() else None,
    )
    before = history.Before(True, file_bytes(g.index))
    journal.commit(config, golden, rebuild(g.index, replace, []), entry, before=before)
    return entry


def restore(config: Config, golden: Path, data: bytes, why: str, candidate: bytes | None = None) -> Entry:
    """Put back an earlier golden (undo), with a changelog entry; optionally its candidate too."""
    golden = Path(golden)
    details = [f"restored the golden as it was before ({len(data)} bytes)"]
    entry = journal.new_entry("undo", config, golden, [], details, why)
    with journal.session(config, golden):
        cand = candidate_path(golden)
        now = history.Before(
            True,
            read_regular(golden) if golden.exists() else None,
            candidate is not None,
            read_regular(cand, "candidate") if candidate is not None and os.path.lexists(cand) else None,
        )
        journal.commit(config, golden, data, entry, before=now)
        if candidate is not None:
            atomic_write(candidate_path(golden), candidate)
    return entry


def restore_candidate(config: Config, golden: Path, data: bytes, why: str) -> Entry:
    """Put back a rejected candidate (undo of a reject), noted in the changelog."""
    golden = Path(golden)
    entry = journal.new_entry("undo", config, golden, [], ["restored the rejected candidate"], why)
    with journal.session(config, golden):
        if os.path.lexists(candidate_path(golden)):
            raise TapeError(f"{golden}: a newer candidate is pending; review it before restoring the rejected one")
        atomic_write(candidate_path(golden), data)
        journal.commit(config, golden, None, entry, before=history.Before(False, None, True, None))
    return entry


@dataclass(frozen=True, slots=True)
class BatchResult:
    """One session of :func:`accept_all`: its changelog entry, or why it was not accepted."""

    golden: Path
    entry: Entry | None
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None


def accept_all(config: Config, why: str | None, goldens: Iterable[Path] | None = None) -> list[BatchResult]:
    """Accept every pending candidate (or those of ``goldens``), each whole, with one rationale.

    Each session is accepted as :func:`accept` does (its own lock, changelog entry and history
    record); one that fails is reported in its result and the others go on.

    Raises:
        TapeError: no rationale (nothing is accepted then).
    """
    why = _require_why(why, "accept")
    chosen = [g for g, _ in pending(config)] if goldens is None else [Path(g) for g in goldens]
    out = []
    for g in chosen:
        try:
            out.append(BatchResult(g, accept(config, g, why), None))
        except TapeError as e:
            out.append(BatchResult(g, None, str(e)))
        except OSError as e:
            out.append(BatchResult(g, None, f"{e.filename or g}: {e.strerror or e}"))
    return out
