"""Re-recording one step: run its tool live with the recorded arguments; the result becomes a candidate."""

from __future__ import annotations

import importlib
import logging
import sys
from pathlib import Path
from typing import Any

import orjson

import tapetui.review.journal as journal
from tapetui.core.clock import now_iso
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.files import atomic_write
from tapetui.core.live import record_live, tool_as_written
from tapetui.core.registry import ToolRegistry
from tapetui.core.store import candidate_path, keep_sample, refuse_links_out
from tapetui.core.tapefile import dump_line, read_index, session_line
from tapetui.review.actions import file_bytes, rebuild
from tapetui.review.comparison import load

__all__ = ["load_registry", "rerecord", "rerecorded_message"]

_log = logging.getLogger("tapetui")


def load_registry(config: Config) -> ToolRegistry:
    """Import the registry named in ``tapes.toml`` (only when a person asks for a re-record)."""
    if not config.registry:
        raise TapeError(f"{config.path or 'tapes.toml'}: no 'tapes.registry' (module:attribute) to re-record with")
    module_name, _, attr = config.registry.partition(":")
    root = str(config.root)
    added = root not in sys.path
    if added:
        sys.path.insert(0, root)
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        raise TapeError(f"cannot import registry module {module_name!r}: {type(e).__name__}: {e}") from None
    finally:
        if added:
            sys.path.remove(root)
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, None)
    if callable(obj) and not isinstance(obj, ToolRegistry):
        obj = obj()
    if not isinstance(obj, ToolRegistry):
        raise TapeError(f"{config.registry} is not a tapetui ToolRegistry")
    return obj


def rerecord(
    config: Config, golden: Path, seq: int, *, yes: bool = False, registry: ToolRegistry | None = None
) -> Path:
    """Run step ``seq``'s tool live with its recorded arguments; the result becomes a pending candidate.

    Raises:
        TapeError: unknown step, a side-effecting tool without ``yes``, a failing import.
    """
    golden = Path(golden)
    cand = candidate_path(golden)
    refuse_links_out(config.tapes_dir, golden, cand)
    with journal.session(config, golden):
        return _rerecord_locked(config, golden, cand, seq, yes, registry)


def _rerecord_locked(
    config: Config, golden: Path, cand: Path, seq: int, yes: bool, registry: ToolRegistry | None
) -> Path:
    base = load(cand) if cand.exists() else load(golden)
    try:
        pos = next(i for i, c in enumerate(base.calls) if c.seq == seq)
    except StopIteration:
        turn = next((t for t in base.index.turns if t.seq == seq), None)
        if turn is not None:
            raise TapeError(
                f"{base.path}: step {seq} is a model turn ({turn.model}): re-recording a turn needs the live model; "
                "rerun the agent in record mode, or in fill mode after expiring it"
            ) from None
        raise TapeError(f"{base.path}: no step {seq}") from None
    rec = base.calls[pos]
    reg = registry or load_registry(config)
    tool = reg[rec.tool]
    if tool.side_effect and not yes:
        raise TapeError(f"{rec.tool} has side effects: re-recording step {seq} runs it for real; confirm with --yes")
    redactor = config.redactor()
    args = rec.args if isinstance(rec.args, dict) else {}
    live = record_live(  # the one way a call runs live and gets its line, as a recording does it
        tool,
        args,
        seq=rec.seq,
        redactor=redactor,
        policy=config.policy(rec.tool),
        requested_tool=rec.requested_tool,
        extra={"rerecorded": True},
    )
    if live.problem:
        raise TapeError(f"{rec.tool} (step {seq}) {live.problem}; the candidate is unchanged")
    line = live.line
    manifest = tool_as_written(tool, redactor).manifest  # as a recording writes it: tapes.toml's [redact] applies
    manifests = []
    if manifest.fingerprint != rec.fingerprint:
        manifests.append(dump_line(manifest.to_record(tool.side_effect)))
    i = next(i for i in range(len(base.index)) if base.index.lines[i] == rec.line)
    data = rebuild(base.index, {i: line}, manifests)
    if base.path != cand:
        data = _mark_origin(data, "rerecord")
    elif not _golden_holds(golden, base.index.raw_line(i)):  # the candidate's own recording of the step: kept
        kept = keep_sample(golden, file_bytes(base.index))
        _log.warning("%s: the pending candidate as it was before this re-record is kept in %s", cand, kept)
    atomic_write(cand, data)
    return cand


def _golden_holds(golden: Path, line: bytes) -> bool:
    """The golden holds this very call line: a candidate's step that is the golden's copy, which a re-record may
    replace with nothing lost (a recording of the candidate's own is kept in ``NAME.samples/`` first)."""
    if not golden.exists():
        return False
    idx = read_index(golden)
    return any(idx.raw_line(j) == line for j in range(len(idx)))


def rerecorded_message(golden: Path, cand: Path, seq: int) -> str:
    """What a re-record of step ``seq`` into ``cand`` changed, in words: its result (or error) differs from the
    golden's, or it is the same and the candidate only renews the step's recorded time (and expiry)."""
    try:
        new = next(c for c in load(cand).calls if c.seq == seq)
        old = next(c for c in load(golden).calls if c.seq == seq)
    except (StopIteration, TapeError):
        return "it is pending"
    if (new.result, new.error) != (old.result, old.error):
        return "its result differs from the golden's"
    return "its result is the same as the golden's (accepting it only renews the step's recorded time and expiry)"


def _mark_origin(data: bytes, origin: str) -> bytes:
    first, _, rest = data.partition(b"\n")
    try:
        head = orjson.loads(first)
    except orjson.JSONDecodeError:
        head = None
    if isinstance(head, dict) and head.get("type") == "session":
        head["origin"] = origin
        return dump_line(head) + rest
    return session_line(created_at=now_iso(), origin=origin) + data
