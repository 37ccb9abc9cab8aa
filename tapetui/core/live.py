"""Running a tool live and writing its call line: the one place for it.

``Tape`` runs tools this way when it records, fills a miss or plays a ``live`` tool, and the review
layer's re-record does with :func:`record_live`. The order is the contract: everything about the call
line that can fail is settled before the tool runs (:func:`line_stamp`), and once the tool has run its
call is written whatever its outcome (:func:`outcome_line`): what cannot be recorded (a result that is
not JSON, an error whose text cannot be read) becomes the line's error, and the caller is told why.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NoReturn

import orjson

from tapetui.core.canon import canonical_json, dumps
from tapetui.core.clock import Clock, Timer, iso, perf_timer, utcnow
from tapetui.core.codecs import Codec, Unrecordable, codec_for, json_form
from tapetui.core.config import ToolPolicy, ttl_problem
from tapetui.core.errors import TapeError, TooDeep
from tapetui.core.fingerprint import LATEST_FORM
from tapetui.core.keys import key_of_json
from tapetui.core.paths import first_non_json
from tapetui.core.recorded_errors import error_record
from tapetui.core.redact import Redactor
from tapetui.core.registry import Tool
from tapetui.core.tapefile import call_line

__all__ = [
    "Request",
    "LineStamp",
    "LiveCall",
    "LiveStep",
    "call_args",
    "check_tool_name",
    "line_stamp",
    "outcome_line",
    "record_live",
    "result_form",
    "run_callable",
    "run_tool",
    "stored_args",
    "tool_as_written",
]


@dataclass(frozen=True, slots=True)
class LineStamp:
    """The times a call line carries: when it was recorded and, for a time-sensitive tool, when it expires."""

    recorded_at: str
    expires_at: str | None


@dataclass(frozen=True, slots=True)
class LiveCall:
    """One tool call run live, and its call line (see :func:`record_live`).

    Attributes:
        line: the call line, ending with a newline, ready to append.
        key: the call key of the (redacted) arguments.
        result: what a replay of the line returns: the type the tool's codec rebuilds, else the JSON form
            (None when the tool raised).
        error: what the tool raised, to raise again to the caller, or None.
        ms: how long the tool ran, in milliseconds.
        recorded_error: the line records an error (the tool's, or ``problem``).
        problem: empty, or why the outcome could not be recorded (then the line records it as its error).
    """

    line: bytes
    key: str
    result: Any
    error: Exception | None
    ms: float
    recorded_error: bool
    problem: str


# A request as Tape._begin read it: (seq, name, args, live=, args as passed, redacted, key, requested_tool, line
# fields); a plain tuple, so that the hit path builds no object for it
Request = tuple[int, str, dict[str, Any], Any, Any, Any, str, str | None, dict[str, Any] | None]


def tool_as_written(tool: Tool, redactor: Redactor) -> Tool:
    """``tool`` with its manifest as a tape written under ``redactor``'s rules holds it: the latest fingerprint
    form, each field of its contract redacted by its declared rule (:mod:`tapetui.core.declared`), so that no
    configured secret (``tapes.toml [redact]``) reaches a tool line. Its contract itself is unchanged."""
    if redactor.is_default:
        return tool  # registration computed this manifest already
    return replace(tool, manifest=tool.manifest_for(LATEST_FORM, redactor))


def check_tool_name(tool: Any, path: Path) -> None:
    """A tool name is text a tape can hold: a non-empty string of valid UTF-8 (no lone surrogates).

    Raises:
        TapeError: naming the tape at ``path``.
    """
    if not isinstance(tool, str) or not tool:
        raise TapeError(f"{path}: a tool name must be a non-empty string, got {type(tool).__name__}")
    if tool == "model":
        raise TapeError(f"{path}: a tool may not be called 'model': the name belongs to model turns (use tape.model)")
    try:
        tool.encode("utf-8")
    except UnicodeEncodeError as e:
        raise TapeError(
            f"{path}: tool name {tool!r} is not valid UTF-8 text ({e.reason} at character "
            f"{e.start}); a tape holds UTF-8"
        ) from None


def call_args(redactor: Redactor, tool: str, args: dict[str, Any], seq: int) -> tuple[Any, str, Any]:
    """``(redacted, key, passed)``: the arguments redacted and canonical in one pass, their key, and the
    arguments as passed in their JSON form (a pydantic model as its JSON dump; the same object when they
    are JSON already), which :func:`stored_args` writes.

    Raises:
        TapeError: the arguments have no JSON form, or are nested too deeply.
    """
    try:
        try:
            redacted = redactor.canon_form(args)
        except TypeError:  # a pydantic model, a tuple of them...: recorded as their JSON form
            args = json_form(args, "args")
            redacted = redactor.canon_form(args)
        # canonical JSON (= canon(redacted)) is hashed for the key; the tape keeps the arguments as passed
        key = key_of_json(tool, canonical_json(redacted))
    except (TypeError, TooDeep) as e:
        raise TapeError(f"{tool} (step {seq}): arguments cannot be recorded: {e}") from None
    return redacted, key, args


def stored_args(redactor: Redactor, passed: Any, redacted: Any) -> bytes:
    """The JSON a call line stores as its ``args``: the arguments as passed (key order, whitespace and
    ``None`` values kept), redacted; their canonical form (``redacted``) when that cannot be written
    (keys that are not strings). Either hashes to the call's key through canon."""
    try:
        return dumps(redactor.redact(passed))
    except (TypeError, TooDeep):
        return canonical_json(redacted)


def line_stamp(
    seq: int,
    name: str,
    tool: Tool,
    policy: ToolPolicy,
    recorded_at: datetime,
    key: str,
    requested_tool: str | None,
) -> LineStamp:
    """``recorded_at`` and ``expires_at`` of a call line, and a check that its other fields can be written.

    Raises:
        TapeError: before the tool runs, when they cannot (an absurd ttl, a name that is not valid text).
    """
    ttl = policy.ttl if policy.ttl is not None else tool.ttl
    problem = ttl_problem(ttl) if ttl is not None else None
    if problem:
        raise TapeError(
            f"{name} (step {seq}): {problem} (tapes.toml [tools.{name}] or the tool's registration); "
            "the tool was not run"
        )
    try:
        stamp = iso(recorded_at)
        expires = iso(recorded_at + timedelta(seconds=ttl)) if ttl is not None else None
    except Exception as e:  # noqa: BLE001 - a date past year 9999, a clock that is not a datetime
        raise TapeError(
            f"{name} (step {seq}): cannot compute the call's recorded_at/expires_at "
            f"({type(e).__name__}: {e}); the tool was not run"
        ) from None
    try:
        orjson.dumps([name, key, tool.fingerprint, requested_tool])
    except TypeError as e:
        raise TapeError(
            f"{name!r} (step {seq}): the tool name or requested_tool cannot be written as JSON "
            f"({e}); the tool was not run"
        ) from None
    return LineStamp(stamp, expires)


def run_tool(tool: Tool, args: dict[str, Any], timer: Timer = perf_timer) -> tuple[Any, Exception | None, float]:
    """Call ``tool`` with ``args``: ``(result, error, ms)`` (see :func:`run_callable`). A coroutine function runs
    to completion when no event loop is running in this thread.

    Raises:
        TapeError: the tool has no function (a contract registered without one), or is a coroutine function
            called from inside a running event loop.
    """
    fn = tool.fn
    if fn is None:
        raise TapeError(f"tool {tool.name!r} has no function to run (registered as a contract): pass live=")
    if tool.is_async:
        if _loop_running():
            raise TapeError(
                f"tool {tool.name!r} is a coroutine function: inside a running event loop, run it "
                "with `await tape.acall(...)`"
            )
        return run_callable(lambda: asyncio.run(fn(**args)), timer)  # sync code, no loop: run it to completion
    start = timer()  # the common path, without run_callable's extra frame
    try:
        result = fn(**args)
    except Exception as e:  # recorded, then raised again by the caller
        return None, e, round((timer() - start) * 1000, 3)
    if type(result) not in _PLAIN and inspect.isawaitable(result):
        _refuse_awaitable(result)
    return result, None, round((timer() - start) * 1000, 3)


def run_callable(fn: Callable[[], Any], timer: Timer = perf_timer) -> tuple[Any, Exception | None, float]:
    """Call ``fn()``: ``(result, error, ms)``. An ``Exception`` is returned, to be recorded; anything else (an
    interrupt) propagates. An awaitable result is refused (closed, never run): a sync call cannot await it."""
    start = timer()
    try:
        result = fn()
    except Exception as e:  # recorded, then raised again by the caller
        return None, e, round((timer() - start) * 1000, 3)
    if type(result) not in _PLAIN and inspect.isawaitable(result):
        _refuse_awaitable(result)
    return result, None, round((timer() - start) * 1000, 3)


_PLAIN = frozenset({dict, list, str, int, float, bool, type(None), tuple})  # never awaitable: no ABC check


def _refuse_awaitable(result: Any) -> NoReturn:
    close = getattr(result, "close", None)
    if callable(close):
        close()  # a coroutine never started: nothing ran
    raise TapeError("the tool returned an awaitable: an async tool runs with `await tape.acall(...)`")


def _loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def result_form(result: Any, codec: Codec | None) -> tuple[Any, Any, str]:
    """``(data, value, problem)`` of what a tool returned: ``data`` the JSON form to record, ``value`` what the
    caller gets — what a replay returns: the type rebuilt by ``codec``, else the JSON form — and ``problem``
    why the result cannot be recorded (then ``data`` is None and ``value`` the result itself)."""
    try:
        data = codec.encode(result) if codec is not None else json_form(result)
    except Unrecordable as e:
        return None, result, f"returned a value that cannot be recorded: {e}"
    except TooDeep:
        return None, result, "returned a value nested too deeply to record"
    except Exception as e:  # noqa: BLE001 - a codec that fails on this value: the call is still recorded
        return None, result, f"returned a value that cannot be recorded ({type(e).__name__}: {e})"
    if codec is None:
        return data, data, ""
    try:
        return data, codec.decode(data), ""
    except Exception:  # noqa: BLE001 - replay could not rebuild it either: both return the JSON form
        return data, data, ""


def outcome_line(
    *,
    seq: int,
    name: str,
    tool: Tool,
    key: str,
    args_json: bytes,
    stamp: LineStamp,
    ms: float,
    result: Any,
    error: BaseException | None,
    redactor: Redactor,
    requested_tool: str | None = None,
    extra: dict[str, Any] | None = None,
    unrecordable: str = "",
) -> tuple[bytes, bool, str]:
    """The call line of a call that ran: ``(line, recorded_error, problem)``. Never raises for the outcome:
    what cannot be recorded (``unrecordable`` says so already, from :func:`result_form`) becomes the line's
    error, and ``problem`` says why (else it is empty). ``result`` is in its JSON form."""

    def line(result: Any, err: dict[str, Any] | None) -> bytes:  # the two outcomes below share every other field
        return call_line(
            seq=seq,
            tool=name,
            key=key,
            fingerprint=tool.fingerprint,
            side_effect=tool.side_effect,
            ms=ms,
            expires_at=stamp.expires_at,
            recorded_at=stamp.recorded_at,
            args=orjson.Fragment(args_json),
            result=result,
            error=err,
            requested_tool=requested_tool,
            extra=extra,
        )

    if unrecordable:
        problem = unrecordable
    else:
        try:
            err = error_record(error, redactor) if error is not None else None
            return line(None if err else redactor.redact(result), err), err is not None, ""
        except Exception as e:  # noqa: BLE001 - whatever it is, the call is not lost
            problem = _unrecordable(e, error, result)
    try:
        problem = redactor.redact_text(problem)  # it may name result paths (dict keys)
    except Exception:  # noqa: BLE001
        problem = "its outcome cannot be recorded"
    fallback = {"type": "TapeError", "module": "tapetui.core.errors", "message": f"{name} (step {seq}) {problem}"}
    return line(None, fallback), True, problem


@dataclass(slots=True)
class LiveStep:
    """One call about to run live, as :meth:`planned` settled it: with a ``stamp``, everything about its line
    that can fail is settled before the tool runs; then :meth:`run` (or :meth:`arun`) runs it and
    :meth:`outcome` builds what it returns and its line. ``Tape`` and re-record both go this way.

    Attributes:
        fn: what runs: the caller's ``live=`` callable, else None for the tool's own function.
        passed / redacted / key: the arguments as passed (JSON form), redacted and canonical, and their key.
        tool: the tool as the tape writes it (:func:`tool_as_written`).
        stamp: the line's times; None when the call is not written (a replay's ``live`` tool).
        tool_line: the tool line to write before this call line, when the target has none yet.
        compare: a cut-point replay's live call: the golden's recording it consumed (its result is compared).
    """

    seq: int
    name: str
    args: dict[str, Any]
    fn: Callable[[], Any] | None
    passed: Any
    redacted: Any
    key: str
    requested_tool: str | None
    extra: dict[str, Any] | None
    tool: Tool
    stamp: LineStamp | None
    tool_line: bytes = b""
    compare: int | None = None

    @classmethod
    def planned(
        cls,
        *,
        seq: int,
        name: str,
        args: dict[str, Any],
        tool: Tool,
        redactor: Redactor,
        policy: ToolPolicy,
        recorded_at: datetime | None,
        requested_tool: str | None = None,
        extra: dict[str, Any] | None = None,
        fn: Callable[[], Any] | None = None,
        call: tuple[Any, str, Any] | None = None,
    ) -> LiveStep:
        """A step about to run; ``recorded_at`` None: it is not written. ``call``: its :func:`call_args`, when the
        caller has them already.

        Raises:
            TapeError: arguments, a ttl or a name that cannot be recorded (nothing has run).
        """
        redacted, key, passed = call if call is not None else call_args(redactor, name, args, seq)
        stamp = None
        if recorded_at is not None:
            stamp = line_stamp(seq, name, tool, policy, recorded_at, key, requested_tool)
        return cls(seq, name, args, fn, passed, redacted, key, requested_tool, extra, tool, stamp)

    def run(self, timer: Timer = perf_timer) -> tuple[Any, Exception | None, float]:
        """Run it (sync): ``(result, error, ms)``; see :func:`run_tool`."""
        if self.fn is None:
            return run_tool(self.tool, self.args, timer)
        return run_callable(self.fn, timer)

    async def arun(self, timer: Timer = perf_timer) -> tuple[Any, Exception | None, float]:
        """Run it on the caller's event loop: an awaitable result is awaited there, with no thread hop; a sync
        function runs inline. What it raises (an ``Exception``) is returned as the error; a cancellation or an
        interrupt propagates."""
        fn = self.fn
        if fn is None:
            tool_fn, kwargs = self.tool.fn, self.args
            assert tool_fn is not None  # planned for a tool without a function is refused by its caller
            fn = lambda: tool_fn(**kwargs)  # noqa: E731
        start = timer()
        error: Exception | None = None
        try:
            result = fn()
            if inspect.isawaitable(result):
                result = await result
        except Exception as e:  # recorded, then raised again
            result, error = None, e
        return result, error, round((timer() - start) * 1000, 3)

    def outcome(
        self, result: Any, error: Exception | None, ms: float, redactor: Redactor, codec: Codec | None
    ) -> LiveCall:
        """What the call returns and, when it is written, its line (see :class:`LiveCall`). Never raises for the
        outcome: what cannot be recorded becomes the line's error and ``problem`` says why."""
        value: Any = None
        data: Any = None
        unrecordable = ""
        if error is None:
            data, value, unrecordable = result_form(result, codec)
        if self.stamp is None:
            return LiveCall(b"", self.key, value, error, ms, error is not None, unrecordable)
        line, recorded_error, problem = outcome_line(
            seq=self.seq,
            name=self.name,
            tool=self.tool,
            key=self.key,
            args_json=stored_args(redactor, self.passed, self.redacted),
            stamp=self.stamp,
            ms=ms,
            result=data,
            error=error,
            redactor=redactor,
            requested_tool=self.requested_tool,
            extra=self.extra,
            unrecordable=unrecordable,
        )
        return LiveCall(line, self.key, value, error, ms, recorded_error, problem)


def record_live(
    tool: Tool,
    args: dict[str, Any],
    *,
    seq: int,
    redactor: Redactor,
    policy: ToolPolicy,
    clock: Clock = utcnow,
    timer: Timer = perf_timer,
    requested_tool: str | None = None,
    extra: dict[str, Any] | None = None,
) -> LiveCall:
    """Run ``tool`` live with ``args`` as step ``seq`` and build its call line as a recording writes it.

    The arguments are redacted and made canonical, the line's times and expiry come from ``clock`` and
    ``policy`` (else the tool's ttl), its fingerprint is the tool's as a tape under ``redactor`` holds it
    (:func:`tool_as_written`), and the outcome is recorded through ``redactor``. ``extra`` adds fields
    (``{"rerecorded": True}``). Nothing is written: the caller appends ``line`` where it belongs, then
    raises ``error`` if it wants the tool's own exception.

    Raises:
        TapeError: before the tool runs, for arguments, a ttl or a name that cannot be recorded.
    """
    step = LiveStep.planned(
        seq=seq,
        name=tool.name,
        args=args,
        tool=tool_as_written(tool, redactor),
        redactor=redactor,
        policy=policy,
        recorded_at=clock(),
        requested_tool=requested_tool,
        extra=extra,
    )
    result, error, ms = step.run(timer)
    return step.outcome(result, error, ms, redactor, codec_for(tool.returns))


def _unserialisable(value: Any, path: str = "result") -> tuple[str, str] | None:
    """The first path in ``value`` holding something JSON cannot, and its type name."""
    found = first_non_json(value, path)
    if found is None:
        return None
    where = f"{found.path} key {found.value!r}" if found.key else found.path
    return where, type(found.value).__name__


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
