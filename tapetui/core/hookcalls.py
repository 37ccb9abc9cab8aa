"""Calling a user's comparison hook (``[compare] similarity`` / ``judge``): importing it by its
``module:function`` name, running each call in a thread of its own within ``hook_timeout``, keeping what
it prints off stdout (which carries ``--json``), and not calling again what went over its budget once.
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from typing import Any, TextIO, TypeVar, cast

from tapetui.core.changes import MISSING
from tapetui.core.errors import TapeError
from tapetui.core.shown import shown_number

__all__ = [
    "HOOK_TIMEOUT",
    "HookStdout",
    "HookTimeout",
    "hooks_running",
    "import_object",
    "quiet",
    "run_hook",
    "spend",
    "spent",
]

HOOK_TIMEOUT = 60.0
"""Seconds one call of a similarity or judge hook may take unless ``[compare] hook_timeout`` says otherwise."""

_T = TypeVar("_T")


def import_object(spec: str, root: Path | None, what: str) -> Any:
    """Import ``module:attribute`` (``root`` first on ``sys.path`` while importing).

    Raises:
        TapeError: the module cannot be imported or has no such attribute; the message starts with ``what``.
    """
    module_name, _, attr = spec.partition(":")
    added = root is not None and str(root) not in sys.path
    if added:
        sys.path.insert(0, str(root))
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # whatever the module raises while importing is the user's to see
        raise TapeError(f"{what}: cannot import {module_name!r}: {type(e).__name__}: {e}") from None
    finally:
        if added:
            sys.path.remove(str(root))
    obj: Any = module
    for part in attr.split("."):
        obj = getattr(obj, part, MISSING)
        if obj is MISSING:
            raise TapeError(f"{what}: {module_name!r} has no attribute {attr!r}")
    return obj


@contextmanager
def quiet() -> Iterator[None]:
    """What a hook's module prints as it is imported goes to stderr: stdout carries ``--json``."""
    with redirect_stdout(sys.stderr):
        yield


class HookTimeout(TapeError):
    """A hook did not answer within its timeout (the message says which, and the setting); the comparison
    that called it turns it into its error."""


# Budgets are per value, and a hostile tape has as many values as it likes: a regex that went over its budget is not
# run again in that session, a hook that did not answer in time not again by this process (each later comparison
# needing it is an error saying so), so the time they can take is bounded by the rules, the hooks and the sessions,
# not by the values. A regex's is per session: a session's verdict then depends on its own values alone, whichever
# process checks it after whichever others (check --jobs); a hook that did not answer still runs in its thread, and
# is never started again. Kept by the object (held here, so its id is never reused).
_SPENT: dict[int, object] = {}
_SPENT_IN_SESSION: dict[int, object] = {}


def spent(obj: object) -> bool:
    """Whether ``obj`` (a regex rule, a hook function) went over its time budget before (see :func:`spend`)."""
    return id(obj) in _SPENT or id(obj) in _SPENT_IN_SESSION


def spend(obj: object, *, session: bool = False) -> None:
    """``obj`` went over its time budget: it is not run again by this process (``session``: until
    :func:`next_session`)."""
    (_SPENT_IN_SESSION if session else _SPENT)[id(obj)] = obj


def next_session() -> None:
    """A session's check begins: what went over its budget for the session before runs again."""
    if _SPENT_IN_SESSION:
        _SPENT_IN_SESSION.clear()


def hooks_running() -> bool:
    """Whether a hook that did not answer in time still runs in its thread (the process then ends without
    waiting for it at interpreter shutdown)."""
    return _hooks_running > 0


def run_hook(fn: Callable[[], _T], timeout: float, name: str, key: object | None = None) -> _T:
    """``fn()`` (a call of the user's hook ``name``) in a thread of its own, waited for ``timeout`` seconds;
    ``key`` (the hook function) is not run again once it timed out.

    A daemon thread, not a pool's: a hook that never returns is left behind, and a pool's threads are joined
    when the interpreter exits, so ``check`` would hang at its end. What the hook prints goes to stderr (see
    :class:`HookStdout`), during the wait and after it.

    Raises:
        HookTimeout: no answer in time (the hook runs on, unseen).
        BaseException: what ``fn`` raised, raised again here.
    """
    done = threading.Event()
    box: list[tuple[bool, Any]] = []

    def run() -> None:
        me = threading.get_ident()
        with _stdout_lock:
            _hook_threads.add(me)
        try:
            box.append((True, fn()))
        except BaseException as e:  # handed to the caller, which tells a failure from a person's Ctrl-C
            box.append((False, e))
        finally:
            _hook_ended(me)
            done.set()

    late = f"{name} did not answer within {shown_number(timeout)} s ([compare] hook_timeout); not called again"
    if key is not None and spent(key):  # said as the first time is: which session met it first is no matter
        raise HookTimeout(f"{late} by this check")
    _hook_starting()
    thread = threading.Thread(target=run, name=f"tapetui {name}", daemon=True)
    try:
        thread.start()
    except BaseException:  # no thread to run it (the system's limit): nothing will end what was started
        _hook_ended(None)
        raise
    if not done.wait(timeout):
        if key is not None:
            spend(key)
        raise HookTimeout(f"{late} by this check")
    ok, value = box[0]
    if not ok:
        raise value
    result: _T = value
    return result


# sys.stdout is one for the process, so a hook thread cannot redirect its own prints (redirect_stdout would
# send the main thread's report to stderr while the hook runs, and a hook that timed out would restore stdout
# whenever it ended). While hooks run, sys.stdout is a HookStdout: a hook thread's writes go to stderr.
_stdout_lock = threading.Lock()
_hook_threads: set[int] = set()  # the threads running a hook now
_hooks_running = 0  # hooks started and not ended (a thread registers itself once it runs)


class HookStdout:
    """``sys.stdout`` while a hook runs: what a hook's thread writes goes to stderr, what any other thread
    writes (the report, ``--json``) to the stdout it replaced."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def _target(self) -> TextIO:
        return sys.stderr if threading.get_ident() in _hook_threads else self.inner

    def write(self, text: str) -> int:
        return self._target().write(text)

    def flush(self) -> None:
        self._target().flush()

    @property
    def buffer(self) -> Any:  # bytes written to sys.stdout.buffer go where text would
        return self._target().buffer

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno...: the real stdout's
        return getattr(self.inner, name)


def _hook_starting() -> None:
    global _hooks_running
    with _stdout_lock:
        _hooks_running += 1
        if not isinstance(sys.stdout, HookStdout):
            sys.stdout = cast(TextIO, HookStdout(sys.stdout))  # written to as one


def _hook_ended(thread: int | None) -> None:
    """A hook ended (``thread``: its thread; None when it never started): the last puts stdout back."""
    global _hooks_running
    with _stdout_lock:
        if thread is not None:
            _hook_threads.discard(thread)
        _hooks_running -= 1
        out = sys.stdout
        if _hooks_running == 0 and isinstance(out, HookStdout):
            sys.stdout = out.inner
