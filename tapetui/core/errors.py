"""Exceptions raised by tapetui. Every one of them is a :class:`TapeError`."""

from __future__ import annotations

from typing import Any

from tapetui.core.changes import format_changes, shown_redactor
from tapetui.core.errorbase import InvalidValue, TapeError, TooDeep

__all__ = [
    "ConfigError",
    "TapeDrift",
    "InvalidValue",
    "ModelDrift",
    "TapeError",
    "TapeMiss",
    "TapeReplayedError",
    "TapeStale",
    "TooDeep",
    "ToolDriftError",
    "UnrecordableResult",
]


class ConfigError(TapeError):
    """``tapes.toml`` is missing, malformed, or holds an unknown key or a wrong type."""


class TapeDrift(TapeError):
    """The tape has a call of the same tool at this step, but with other arguments.

    Attributes:
        seq: the 1-based step where the drift happened.
        tool: the tool name.
        recorded_key / new_key: the two call keys.
        recorded_args / new_args: the two (redacted) argument sets.
        changes: the differing argument paths, as ``(path, old, new)``.
        recorded_seq: the step of the recording this call drifted from (``seq`` unless calls ran in
            parallel or out of order: see README "Async agents and parallel tool calls").
    """

    def __init__(
        self,
        *,
        path: str,
        seq: int,
        tool: str,
        recorded_key: str,
        new_key: str,
        recorded_args: Any,
        new_args: Any,
        changes: list[tuple[str, Any, Any]],
        recorded_seq: int | None = None,
    ) -> None:
        self.path = path
        self.seq = seq
        self.tool = tool
        self.recorded_key = recorded_key
        self.new_key = new_key
        self.recorded_args = recorded_args
        self.new_args = new_args
        self.changes = changes
        self.recorded_seq = seq if recorded_seq is None else recorded_seq
        lines = format_changes(changes, prefix="args") or [
            "no argument differs as stored: the recorded key is not the key of the recorded arguments (the tape "
            "was edited, or holds a value in clear that a [redact] rule now hides): `tapetui check` names the line"
        ]
        against = f" against recorded step {self.recorded_seq}" if self.recorded_seq != seq else ""
        super().__init__(
            f"{path}: argument drift at step {seq} ({tool}){against}: "
            f"{recorded_key} recorded, {new_key} now\n" + "\n".join(f"  {line}" for line in lines)
        )


class ModelDrift(TapeDrift):
    """A model request that differs from the turn recorded at its place (the k-th model turn of the session):
    another prompt, message, offered tool, output schema, setting or model.

    Attributes:
        seq: the step of this request; ``turn``: its place among the session's model turns (1 for the first).
        tool: ``"model"``; ``model`` / ``recorded_model``: the model's name now and on the tape.
        recorded_key / new_key: the two turn keys.
        recorded_args / new_args: the two requests (redacted, as stored).
        changes: the differing request paths, as ``(path, old, new)`` (``model`` first when the name changed).
        lines: the same, written for people (``instructions: + "…"``, ``settings.temperature 0 → 0.7``).
        recorded_seq: the step of the turn it drifted from.
    """

    def __init__(
        self,
        *,
        path: str,
        seq: int,
        turn: int,
        model: str,
        recorded_model: str,
        recorded_key: str,
        new_key: str,
        recorded_request: Any,
        new_request: Any,
        changes: list[tuple[str, Any, Any]],
        lines: list[str],
        recorded_seq: int,
    ) -> None:
        self.path = path
        self.seq = seq
        self.turn = turn
        self.tool = "model"
        self.model = model
        self.recorded_model = recorded_model
        self.recorded_key = recorded_key
        self.new_key = new_key
        self.recorded_args = recorded_request
        self.new_args = new_request
        self.changes = changes
        self.lines = lines
        self.recorded_seq = recorded_seq
        against = f" against recorded step {recorded_seq}" if recorded_seq != seq else ""
        TapeError.__init__(
            self,
            f"{path}: prompt drift at step {seq} (model turn {turn}, {model}){against}: "
            f"{recorded_key} recorded, {new_key} now\n" + "\n".join(f"  {line}" for line in lines),
        )


class TapeMiss(TapeError):
    """The call's key is nowhere on the tape.

    Attributes:
        seq, tool, key, args: the call that missed.
        nearest_seq: the step of the nearest recorded call of the same tool, or None.
        changes: argument paths that differ from that nearest call.
    """

    def __init__(
        self,
        *,
        path: str,
        seq: int,
        tool: str,
        key: str,
        args: Any,
        nearest_seq: int | None,
        changes: list[tuple[str, Any, Any]],
        reason: str = "",
        prefix: str = "args",
    ) -> None:
        self.path = path
        self.seq = seq
        self.tool = tool
        self.key = key
        self.args = args
        self.nearest_seq = nearest_seq
        self.changes = changes
        head = f"{path}: miss at step {seq}: {key} is not on the tape"
        if reason:
            head += f" ({reason})"
        if nearest_seq is None:
            body = f"  no recorded call of {tool!r} at all" if tool != "model" else "  the tape has no model turn"
        else:
            lines = format_changes(changes, prefix=prefix) or [
                "(same arguments; every recording of it was already used)"
            ]
            what = "model turn" if tool == "model" else tool
            body = f"  nearest recorded {what} is step {nearest_seq}; it differs in:\n" + "\n".join(
                f"    {line}" for line in lines
            )
        super().__init__(head + "\n" + body)


class TapeStale(TapeError):
    """A replayed entry expired and the tool's stale policy is ``error``."""


class UnrecordableResult(TapeError):
    """A call ran live and returned what a tape cannot hold (a value nested too deeply, one with no JSON form): the
    call was recorded with that as its error, and this tells the caller. ``problem``: what was wrong."""

    def __init__(self, message: str, problem: str) -> None:
        super().__init__(message)
        self.problem = problem


class ToolDriftError(TapeError):
    """The live tool's fingerprint differs from the one on the tape.

    Attributes:
        tool: the tool name.
        recorded: the fingerprint on the tape.
        live: the fingerprint of the registered tool.
        explanation: what changed between the two manifests, when both are known.
    """

    def __init__(self, *, path: str, seq: int, tool: str, recorded: str, live: str, explanation: list[str]) -> None:
        self.path = path
        self.seq = seq
        self.tool = tool
        self.recorded = recorded
        self.live = live
        self.explanation = explanation
        detail = "".join(f"\n  {line}" for line in explanation)
        super().__init__(
            f"{path}: tool contract of {tool!r} changed at step {seq}: "
            f"fingerprint {recorded} on tape, {live} registered{detail}\n"
            f"  (re-record, accept a candidate, or set check_fingerprint = false for {tool!r} in tapes.toml)"
        )


class TapeReplayedError(TapeError):
    """A recorded error replayed as data: its class was not raised again as itself.

    That happens when the class's module is not loaded (a tape never makes tapetui import
    anything), when the class is a control-flow or test-outcome class (``SystemExit``,
    ``StopIteration``, ``unittest.SkipTest``, pytest's outcomes...), or when it cannot be
    built without running its constructor.

    Attributes:
        tool, seq: the replayed call.
        type_name / module: the class the tape names (its qualified name; a bare name on older tapes).
        message: the recorded message, as recorded.
        recorded_args: the recorded ``args`` of the exception (JSON values, a tuple), or None when the
            tape holds none (they were not JSON, or the tape is older).
        attributes: the recorded attributes (JSON values; empty on older tapes).
        reason: why the class itself was not raised.
    """

    def __init__(
        self,
        *,
        tool: str,
        seq: int,
        type_name: str,
        module: str,
        message: str,
        attributes: dict[str, Any] | None = None,
        reason: str = "",
        recorded_args: tuple[Any, ...] | None = None,
    ) -> None:
        self.tool = tool
        self.seq = seq
        self.type_name = type_name
        self.module = module
        self.message = message
        self.recorded_args = recorded_args
        self.attributes = dict(attributes or {})
        self.reason = reason
        # its text shows the recorded message redacted, as every value shown is (``message`` keeps it as recorded)
        shown = shown_redactor().redact_text(message)
        super().__init__(f"{tool} (step {seq}) raised {type_name} when recorded: {shown}")
