"""The current tape: ``with tapetui.use_tape(...)`` makes a tape current for the code it wraps.

Framework adapters (:mod:`tapetui.integrations`) use it when they are given no tape, so that a toolset
wrapped once at import time records and replays through whichever tape the test or the run made current.
It is context-local (a :class:`contextvars.ContextVar`): each asyncio task sees the tape of the context it was
created in, a new thread starts with none (run it with ``contextvars.copy_context().run``, or pass the tape),
and nested ``use_tape`` blocks restore the outer one on exit.
"""

from __future__ import annotations

import contextvars
import functools
import inspect
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from tapetui.core.errors import InvalidValue, TapeError
from tapetui.core.registry import ToolRegistry
from tapetui.core.tape import Tape

__all__ = ["current_tape", "use_tape"]

F = TypeVar("F", bound=Callable[..., Any])

_CURRENT: contextvars.ContextVar[Tape | None] = contextvars.ContextVar("tapetui_current_tape", default=None)


def current_tape() -> Tape | None:
    """The tape made current by the innermost ``use_tape`` (or the pytest ``tape`` fixture), or None."""
    return _CURRENT.get()


class use_tape:  # noqa: N801 - used like a function: `with use_tape(...)`, `@use_tape(...)`
    """Make a tape current: ``with use_tape("tapes/x.jsonl", mode="replay") as tape: ...``.

    Given a path, it opens a :class:`~tapetui.Tape` (``mode``, ``registry`` and the other keywords are
    ``Tape``'s) and closes it on exit; given a ``Tape``, it makes that one current and leaves it open. Also a
    decorator, for sync and async functions: each call of the function runs with its own tape.
    """

    def __init__(
        self,
        tape: Tape | str | os.PathLike[str],
        mode: str = "replay",
        registry: ToolRegistry | None = None,
        **kwargs: Any,
    ) -> None:
        self._tape = tape
        self._mode = mode
        self._registry = registry
        self._kwargs = kwargs
        # the `with` blocks entered and not yet left, per context: a use_tape may be nested in itself, and one
        # object may be entered by several asyncio tasks at once, each leaving in its own order
        self._open: contextvars.ContextVar[tuple[Any, ...]] = contextvars.ContextVar("tapetui_use_tape", default=())

    @contextmanager
    def _using(self) -> Iterator[Tape]:
        given = self._tape
        owned = not isinstance(given, Tape)
        tape = given if isinstance(given, Tape) else Tape(given, self._mode, self._registry, **self._kwargs)
        token = _CURRENT.set(tape)
        try:
            yield tape
        except BaseException as e:
            _CURRENT.reset(token)
            if owned:
                tape.close(error=e)
            raise
        _CURRENT.reset(token)
        if owned:
            tape.close()

    def __enter__(self) -> Tape:
        cm = self._using()
        tape = cm.__enter__()
        self._open.set((*self._open.get(), cm))
        return tape

    def __exit__(self, *exc: Any) -> None:
        entered = self._open.get()
        if not entered:  # left in another task or context than the one that entered it
            raise TapeError(
                "use_tape: left in another asyncio task (or context) than the one that entered it; enter and leave "
                "a use_tape in the same task (an async fixture: enter it in the test's own task)"
            )
        *outer, cm = entered
        self._open.set(tuple(outer))
        cm.__exit__(*exc)

    async def __aenter__(self) -> Tape:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)

    def __call__(self, fn: F) -> F:
        if inspect.isgeneratorfunction(fn) or inspect.isasyncgenfunction(fn):
            # the tape would close when the generator is made, before its body runs: refuse, never record nothing
            raise InvalidValue(
                f"@use_tape cannot wrap the generator function {getattr(fn, '__qualname__', fn)!r}: "
                "use `with use_tape(...)` inside it"
            )
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def run_async(*args: Any, **kwargs: Any) -> Any:
                with self._using():
                    return await fn(*args, **kwargs)

            return run_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            with self._using():
                return fn(*args, **kwargs)

        return run  # type: ignore[return-value]
