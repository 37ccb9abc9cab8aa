"""Comparing like a reviewer: per-path rules that excuse a difference, and how strict each dimension is.

``tapes.toml``'s ``[compare]`` table (globally, and per session pattern under
``[compare.sessions."PATTERN"]``) says, for one session:

* ``sequence``: how the executed tool sequence is matched — ``strict`` (in order; edit distance),
  ``unordered`` (the same multiset), ``subset`` (the new run's tools are a sub-multiset of the
  golden's), ``superset`` (the reverse), ``phases`` (order ignored within a phase, kept across phases);
* a threshold per dimension (``max_tool_edits``, ``max_requested_edits``, ``max_arg_changes``,
  ``max_result_changes``, ``max_note_changes``; all 0 by default: today's strictness);
* ``samples_required``: how many repeated samples must match (``"all"``, ``"80%"``, or a count);
* ``similarity`` / ``judge``: ``module:function`` hooks, checked for spelling when the file is read and
  imported only when a comparison needs them (:func:`load_hooks`); ``hook_timeout`` (seconds, or ``"30s"``,
  ``"2m"``; :data:`HOOK_TIMEOUT` by default): how long one call may take, run in a thread of its own — a hook
  that does not answer in time fails its comparison;
* ``[compare.rules]``: JSON path pattern → comparator. A path starts with its side (``args``,
  ``result``, ``note.KIND``) or a wildcard (``*.price`` matches at any depth, ``**`` any number of
  segments, ``*`` one: the wildcards of ``[diff] ignore``); ``TOOL:`` in front scopes it to one tool.
  A rule governs the value at its path and everything inside it.

Comparators: ``{ tolerance = 0.01 }`` (numbers within an absolute difference) or ``{ tolerance = "2%" }``
(relative to the larger magnitude); ``"unordered"`` (lists equal as multisets); ``{ regex = "…" }`` (the
new string must match: a search with the ``regex`` package, read as :mod:`re` reads it, within
:data:`REGEX_BUDGET` seconds a value, past which the comparison is an error); ``{ similarity = 0.8 }``
(text at least this similar); ``"judge"`` (the judge hook decides); ``"ignore"``.

The built-in similarity is the cosine of character-trigram counts of the two texts, lower-cased and
with runs of whitespace and punctuation folded to one space (each word padded by a space, so word
starts and ends count). Why: it needs no model download and no corpus (TF-IDF over two documents
has no meaningful document frequencies), it is symmetric and in [0, 1], tolerant of reordered clauses
and inflected words, and it costs one pass over each text (each distinct word is cut once). It
measures wording, not meaning: a negation scores high, and long strings over a small alphabet (hex,
base64) all look alike — compare those exactly or with ``regex``. For meaning, name a ``similarity``
hook (an embedding model) or a ``judge``.
"""

from __future__ import annotations

import importlib
import math
import re
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field, replace
from pathlib import Path as FsPath
from typing import Any, Literal, TextIO, TypeVar, cast

import orjson

from tapetui.core.changes import MISSING, Change
from tapetui.core.errors import ConfigError, TapeError
from tapetui.core.jsondiff import IgnoreRules, Path, diff_parts, match_path, parse_pattern, split_pattern

__all__ = [
    "DIMENSIONS",
    "hooks_running",
    "RULE_KINDS",
    "SEQUENCE_MODES",
    "CompareSettings",
    "Excuse",
    "Hooks",
    "Judged",
    "Rule",
    "RuleKind",
    "Rules",
    "compare_settings",
    "import_object",
    "parse_rule",
    "rule_problem",
    "similarity",
]

RuleKind = Literal["tolerance", "unordered", "regex", "similarity", "judge", "ignore"]
RULE_KINDS: tuple[RuleKind, ...] = ("tolerance", "unordered", "regex", "similarity", "judge", "ignore")
SEQUENCE_MODES = ("strict", "unordered", "subset", "superset", "phases")
DIMENSIONS = ("tools", "requested", "arguments", "results", "notes")
"""The dimensions a comparison gives a verdict on, in the order they are reported."""

_SIDES = ("args", "result", "note")
_HOOK = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


# ---- rules --------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Rule:
    """One ``[compare.rules]`` entry: a path pattern and its comparator.

    ``value``: the tolerance (a number, or a fraction when ``relative``), the compiled regex, the
    similarity threshold; None for ``unordered``, ``judge`` and ``ignore``. ``key``: the key as written.
    """

    pattern: str
    kind: RuleKind
    value: Any
    tool: str | None
    key: str
    relative: bool = False
    segs: tuple[str, ...] = ()

    def describe(self) -> str:
        """``tolerance ±0.01``, ``regex '^a'``: the comparator in a few words."""
        if self.kind == "tolerance":
            return f"tolerance {_num(self.value * 100)}%" if self.relative else f"tolerance ±{_num(self.value)}"
        if self.kind == "regex":
            return f"regex {self.value.pattern!r}"
        if self.kind == "similarity":
            return f"similarity ≥ {_num(self.value)}"
        return self.kind

    def toml_value(self) -> Any:
        """What this rule's value is written as in ``tapes.toml``."""
        if self.kind == "tolerance":
            return {"tolerance": f"{_num(self.value * 100)}%" if self.relative else self.value}
        if self.kind == "regex":
            return {"regex": self.value.pattern}
        if self.kind == "similarity":
            return {"similarity": self.value}
        return self.kind


def _num(x: float) -> str:
    return f"{x:.10g}"


def _ignore_rule(pattern: str) -> Rule:
    """A ``[diff] ignore`` pattern as the rule an :class:`Excuse` names (``kind`` ``ignore``)."""
    return Rule(pattern, "ignore", None, None, f"[diff] ignore {pattern!r}", segs=split_pattern(pattern))


@dataclass(frozen=True, slots=True)
class Excuse:
    """A difference a rule excused, and how it is shown (``within tolerance ±0.01``)."""

    change: Change
    rule: Rule
    text: str

    def to_json(self, prefix: str = "") -> dict[str, Any]:
        return {"path": _joined(prefix, self.change.path), "rule": self.rule.kind, "text": self.text}


@dataclass(frozen=True, slots=True)
class Judged:
    """A side compared under the rules.

    ``changes``: the differences no rule excuses; ``excused``: the ones a rule did; ``remarks``: why a
    rule that governs an unexcused change did not excuse it (``similarity 0.41 < 0.8``, a judge's reason);
    ``errors``: a hook that raised or could not run (never a pass).
    """

    changes: tuple[Change, ...] = ()
    excused: tuple[Excuse, ...] = ()
    remarks: tuple[tuple[Change, str], ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.changes and not self.errors


def _joined(prefix: str, path: str) -> str:
    if not prefix:
        return path
    return prefix + ("" if not path or path.startswith("[") else ".") + path


class Hooks:
    """The user's comparison functions. Given directly (tests, a script), or named by settings and
    imported on first use (:meth:`lazy`): a comparison that never needs one never imports its module.

    Attribute access may raise :class:`ConfigError` (the hook cannot be imported; naming tapes.toml and
    the key).
    """

    def __init__(
        self,
        similarity: Callable[[str, str], float] | None = None,
        judge: Callable[[Any, Any, dict[str, Any]], Any] | None = None,
    ) -> None:
        self._fns: dict[str, Any] = {"similarity": similarity, "judge": judge}
        self._settings: CompareSettings | None = None
        self._root: FsPath | None = None

    @classmethod
    def lazy(cls, settings: CompareSettings, root: FsPath | None) -> Hooks:
        """The hooks ``settings`` name, each imported the first time a comparison calls it."""
        out = cls()
        out._settings, out._root = settings, root
        return out

    def _get(self, key: str) -> Any:
        fn = self._fns.get(key)
        if fn is None and self._settings is not None:
            spec = self._settings.similarity_hook if key == "similarity" else self._settings.judge_hook
            if spec:
                fn = self._fns[key] = _import_hook(self._settings, key, spec, self._root)
        return fn

    @property
    def similarity(self) -> Callable[[str, str], float] | None:
        fn: Callable[[str, str], float] | None = self._get("similarity")
        return fn

    @property
    def judge(self) -> Callable[[Any, Any, dict[str, Any]], Any] | None:
        fn: Callable[[Any, Any, dict[str, Any]], Any] | None = self._get("judge")
        return fn


@dataclass(frozen=True)
class Rules:
    """The rules of one session, in the order they are tried (a session pattern's before the global ones)."""

    rules: tuple[Rule, ...] = ()
    similarity_hook: str | None = None
    judge_hook: str | None = None
    hook_timeout: float | None = None  # ``[compare] hook_timeout`` in seconds, when the table sets it

    def __bool__(self) -> bool:
        return bool(self.rules)

    @property
    def timeout(self) -> float:
        """How long one call of a similarity or judge hook may take (:data:`HOOK_TIMEOUT` unless set)."""
        return HOOK_TIMEOUT if self.hook_timeout is None else self.hook_timeout

    def needs_hooks(self) -> bool:
        """Whether judging may call a user's function (a judge rule, or similarity with a hook named)."""
        return any(r.kind == "judge" or (r.kind == "similarity" and self.similarity_hook) for r in self.rules)

    def judge(
        self,
        side: str,
        old: Any,
        new: Any,
        *,
        tool: str | None = None,
        hooks: Hooks | None = None,
        ignore: IgnoreRules | None = None,
        context: Mapping[str, Any] | None = None,
        listed: IgnoreRules | None = None,
    ) -> Judged:
        """Compare one side of a step (``args``, ``result``, ``note.KIND``) under the rules.

        ``hooks``: the imported hooks; None runs none (a judge rule, or similarity with a hook named,
        leaves its change unexcused with a remark saying so: a replay never calls a judge).
        ``ignore``: paths left out unseen (``[diff] ignore`` and its volatile defaults on results and notes).
        ``listed``: paths excused but shown, before any rule is tried — each difference they match is an
        :class:`Excuse` naming its pattern (``ignored by [diff] ignore 'trace'``). Arguments are compared
        so: what makes a call's key is never hidden, only excused by what the user wrote.
        ``context``: passed to a judge with ``side``, ``tool`` and ``path``.

        Raises:
            TooDeep: a value nested deeper than Python's recursion limit allows.
        """
        diffs = diff_parts(old, new, ignore)
        if not diffs:
            return Judged()
        ignored: list[Excuse] = []
        if listed is not None and listed.patterns:
            kept: list[tuple[Path, Change]] = []
            for parts, change in diffs:
                pat = listed.matching(parts)
                if pat is None:
                    kept.append((parts, change))
                else:
                    ignored.append(Excuse(change, _ignore_rule(pat), f"ignored by [diff] ignore {pat!r}"))
            diffs = kept
        if not self.rules or not diffs:
            return Judged(tuple(c for _, c in diffs), tuple(ignored))
        head = tuple(side.split(".", 1)) if side.startswith("note.") else (side,)
        mine = [r for r in self.rules if r.tool is None or r.tool == tool]
        changes: list[Change] = []
        excused: list[Excuse] = ignored
        remarks: list[tuple[Change, str]] = []
        errors: list[str] = []
        unordered_cache: dict[Path, bool] = {}
        for parts, change in diffs:
            full = head + tuple(str(p) for p in parts)
            done = False
            for rule, depth in _governing(mine, full):
                got = self._try(
                    rule,
                    change,
                    parts[: max(0, depth - len(head))],
                    old,
                    new,
                    hooks,
                    unordered_cache,
                    side,
                    tool,
                    context,
                )
                if isinstance(got, Excuse):
                    excused.append(got)
                    done = True
                    break
                if got is not None:
                    kind, text = got
                    if kind == "error":
                        errors.append(f"{_joined(side, change.path)}: {text}")
                    remarks.append((change, text))
            if not done:
                changes.append(change)
        if ignored:  # in path order, as the differences come
            excused.sort(key=lambda e: e.change.path)
        return Judged(tuple(changes), tuple(excused), tuple(remarks), tuple(errors))

    def _try(
        self,
        rule: Rule,
        change: Change,
        at: Path,
        old_root: Any,
        new_root: Any,
        hooks: Hooks | None,
        unordered_cache: dict[Path, bool],
        side: str,
        tool: str | None,
        context: Mapping[str, Any] | None,
    ) -> Excuse | tuple[str, str] | None:
        """The rule's word on one change: an excuse, ``("remark"|"error", why)``, or None (not its business)."""
        a, b = change.old, change.new
        kind = rule.kind
        if kind == "ignore":
            return Excuse(change, rule, "ignored")
        if kind == "unordered":
            hit = unordered_cache.get(at)
            if hit is None:
                hit = unordered_cache[at] = _same_multiset(_at(old_root, at), _at(new_root, at))
            return Excuse(change, rule, "same items in another order") if hit else None
        if a is MISSING or b is MISSING:
            return None  # an added or removed value is within no tolerance, regex or similarity
        if kind == "tolerance":
            if not (_is_number(a) and _is_number(b)):
                return None
            diff = abs(a - b)  # two integers: exact, however large
            try:
                limit = rule.value * max(abs(a), abs(b)) if rule.relative else rule.value
                within = diff <= limit * (1 + 1e-12)
                shown = _num(float(diff))
            except OverflowError:  # an integer beyond a float, against a relative tolerance
                within, shown = False, "more than a float holds"
            if within:
                return Excuse(change, rule, f"within {rule.describe()}")
            return ("remark", f"differs by {shown}, outside {rule.describe()}")
        if kind == "regex":
            if _spent(rule):  # it went over its budget once in this process: a hostile tape has many values
                return (
                    "error",
                    f"the rule {rule.key!r} ({rule.describe()}) exceeded its time budget before; not run again",
                )
            try:  # the user's pattern on the tape's text: a backtracking one would run for ever without a budget
                hit = isinstance(b, str) and rule.value.search(b, timeout=REGEX_BUDGET)
            except TimeoutError:
                _spend(rule)
                return (
                    "error",
                    f"the rule {rule.key!r} ({rule.describe()}) exceeded its time budget of {_num(REGEX_BUDGET)} s "
                    "on this value: the pattern backtracks (not run again by this check)",
                )
            if hit:
                return Excuse(change, rule, f"matches {rule.describe()}")
            return ("remark", f"does not match {rule.describe()}")
        if not (isinstance(a, str) and isinstance(b, str)):
            return None
        if kind == "similarity":
            fn = hooks.similarity if hooks is not None else None
            if fn is None:
                if self.similarity_hook:
                    return (
                        "remark",
                        f"similarity hook {self.similarity_hook} not run here (check and diff run it; the app after J)",
                    )
                if len(a) + len(b) > SIMILARITY_MAX_CHARS:  # bounded work on a tape's text
                    return (
                        "error",
                        f"similarity: {len(a) + len(b):,} characters, more than the built-in similarity compares "
                        f"({SIMILARITY_MAX_CHARS:,}); name a similarity hook, or compare the text exactly",
                    )
                guard = _meaning_changed(a, b)  # the built-in one reads wording: numbers and negations it checks
                if guard:
                    return ("remark", guard)
                fn = similarity
            name = f"similarity hook {self.similarity_hook}"
            try:
                raw = fn(a, b) if fn is similarity else _run_hook(lambda: fn(a, b), self.timeout, name, fn)
            except _HookTimeout as e:
                return ("error", str(e))
            except KeyboardInterrupt:
                raise
            except BaseException as e:  # a user's function: its failure is this comparison's error, never a pass
                return ("error", f"{name} raised {_described(e)}")
            if type(raw) not in (int, float) or not 0.0 <= raw <= 1.0:  # NaN fails both comparisons
                return ("error", f"{name} returned {_shown(raw)}, not a number from 0 to 1")
            score = float(raw)
            if score >= rule.value:
                return Excuse(change, rule, f"similarity {score:.2f} ≥ {_num(rule.value)}")
            return ("remark", f"similarity {score:.2f} < {_num(rule.value)}")
        # judge
        if not self.judge_hook:
            return ("error", "a judge rule needs 'compare.judge' (module:function) in tapes.toml")
        judge = hooks.judge if hooks is not None else None
        if judge is None:
            return ("remark", f"judge {self.judge_hook} not run here (check and diff run it; the app after J)")
        ctx = {**(context or {}), "side": side, "tool": tool, "path": _joined(side, change.path)}

        def verdict() -> tuple[Any, str]:  # unpacking and str() run the user's code too: in the hook's thread
            passed, reason = judge(a, b, ctx)
            return passed, str(reason)

        try:
            passed, why = _run_hook(verdict, self.timeout, f"judge {self.judge_hook}", judge)
        except _HookTimeout as e:
            return ("error", str(e))
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a user's function: its failure is this comparison's error, never a pass
            return ("error", f"judge {self.judge_hook} raised {_described(e)}")
        if passed is True:
            return Excuse(change, rule, f"judge: {why}")
        if passed is False:
            return ("remark", f"judge: {why}")
        return ("error", f"judge {self.judge_hook} returned {_shown(passed)} as passed (expected True or False)")


# What a user's hook may raise is its comparison's error: everything but a person's Ctrl-C — a hook that calls
# sys.exit() does not end check, and one that raises a BaseException of its own is no traceback.


def _described(e: BaseException) -> str:
    try:
        name = str(type.__dict__["__name__"].__get__(type(e)))  # type's own: never a metaclass property's code
    except Exception:
        name = "an exception"
    try:
        return f"{name}: {e}"
    except Exception:  # an exception whose __str__ fails
        return name


def _shown(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"a {type(value).__name__}"
    return text if len(text) <= 60 else text[:57] + "..."


@contextmanager
def _quiet() -> Iterator[None]:
    """What a hook's module prints as it is imported goes to stderr: stdout carries ``--json``."""
    with redirect_stdout(sys.stderr):
        yield


REGEX_BUDGET = 1.0
"""Seconds one ``[compare.rules]`` regex may search one value: past it the comparison is an error, never a pass.
The pattern is the user's and the text the tape's; a pattern that backtracks (``^(a|aa)*$``) on a few dozen
characters would otherwise run for ever."""

HOOK_TIMEOUT = 60.0
"""Seconds one call of a similarity or judge hook may take unless ``[compare] hook_timeout`` says otherwise."""

_T = TypeVar("_T")


class _HookTimeout(Exception):
    """A hook did not answer within its timeout (the message says which, and the setting)."""


# Budgets are per value, and a hostile tape has as many values as it likes: a regex that went over its budget, or a
# hook that did not answer in time, is not run again by this process (each later comparison needing it is an
# error saying so), so the time it can take is bounded by the rules and hooks, not by the tape. Kept by the
# object (held here, so its id is never reused).
_SPENT: dict[int, object] = {}


def _spent(obj: object) -> bool:
    return id(obj) in _SPENT


def _spend(obj: object) -> None:
    _SPENT[id(obj)] = obj


def hooks_running() -> bool:
    """Whether a hook that did not answer in time still runs in its thread (the process then ends without
    waiting for it at interpreter shutdown)."""
    return _hooks_running > 0


def _run_hook(fn: Callable[[], _T], timeout: float, name: str, key: object | None = None) -> _T:
    """``fn()`` (a call of the user's hook ``name``) in a thread of its own, waited for ``timeout`` seconds;
    ``key`` (the hook function) is not run again once it timed out.

    A daemon thread, not a pool's: a hook that never returns is left behind, and a pool's threads are joined
    when the interpreter exits, so ``check`` would hang at its end. What the hook prints goes to stderr (see
    :class:`_HookStdout`), during the wait and after it.

    Raises:
        _HookTimeout: no answer in time (the hook runs on, unseen).
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

    if key is not None and _spent(key):
        raise _HookTimeout(f"{name} did not answer in time before ([compare] hook_timeout); not called again")
    _hook_starting()
    thread = threading.Thread(target=run, name=f"tapetui {name}", daemon=True)
    try:
        thread.start()
    except BaseException:  # no thread to run it (the system's limit): nothing will end what was started
        _hook_ended(None)
        raise
    if not done.wait(timeout):
        if key is not None:
            _spend(key)
        raise _HookTimeout(
            f"{name} did not answer within {_num(timeout)} s ([compare] hook_timeout); not called again by this check"
        )
    ok, value = box[0]
    if not ok:
        raise value
    result: _T = value
    return result


# sys.stdout is one for the process, so a hook thread cannot redirect its own prints (redirect_stdout would
# send the main thread's report to stderr while the hook runs, and a hook that timed out would restore stdout
# whenever it ended). While hooks run, sys.stdout is a _HookStdout: a hook thread's writes go to stderr.
_stdout_lock = threading.Lock()
_hook_threads: set[int] = set()  # the threads running a hook now
_hooks_running = 0  # hooks started and not ended (a thread registers itself once it runs)


class _HookStdout:
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
        if not isinstance(sys.stdout, _HookStdout):
            sys.stdout = cast(TextIO, _HookStdout(sys.stdout))  # written to as one


def _hook_ended(thread: int | None) -> None:
    """A hook ended (``thread``: its thread; None when it never started): the last puts stdout back."""
    global _hooks_running
    with _stdout_lock:
        if thread is not None:
            _hook_threads.discard(thread)
        _hooks_running -= 1
        out = sys.stdout
        if _hooks_running == 0 and isinstance(out, _HookStdout):
            sys.stdout = out.inner


_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*|\d+(?:[.,]\d+)*")  # a minus only where it is a sign
_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot"})


def _meaning_changed(a: str, b: str) -> str | None:
    """Why two texts cannot be a rewording of each other however alike their wording, or None: other numbers
    (``1,250,000`` → ``125,000``), or a negation one has and the other lacks (``approved`` → ``not approved``).
    What the built-in similarity cannot see (``approved`` → ``denied``) needs a judge."""
    a, b = a.replace("\u2019", "'"), b.replace("\u2019", "'")  # a typographic apostrophe: don’t is don't
    na, nb = _numbers(a), _numbers(b)
    if sorted(na) != sorted(nb):
        return f"the numbers differ ({', '.join(map(_num, na)) or 'none'} → {', '.join(map(_num, nb)) or 'none'})"
    wa, wb = _words(a), _words(b)
    neg_a = sum(1 for w in wa if w in _NEGATIONS or w.endswith("n't"))
    neg_b = sum(1 for w in wb if w in _NEGATIONS or w.endswith("n't"))
    if neg_a != neg_b:
        return f"a negation differs ({neg_a} → {neg_b})"
    return None


def _numbers(text: str) -> list[float]:
    """The numbers of a text as values (``3.0`` is ``3``; ``1,250,000`` is 1250000)."""
    out = []
    for n in _NUMBER.findall(text):
        try:
            out.append(float(n.replace(",", "")))
        except ValueError:  # "1.2.3": a version, compared as written
            out.append(float(sum(ord(c) for c in n)))
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[\w']+", text.lower())


def _governing(rules: Iterable[Rule], full: tuple[str, ...]) -> list[tuple[Rule, int]]:
    """The rules whose pattern matches ``full`` or a prefix of it, with the length of the prefix:
    the most specific (longest) first, in file order among equals."""
    out: list[tuple[Rule, int]] = []
    for r in rules:
        for depth in range(len(full), 0, -1):
            if match_path(r.segs, full[:depth]):
                out.append((r, depth))
                break
    out.sort(key=lambda rd: -rd[1])
    return out


def _at(root: Any, path: Path) -> Any:
    cur = root
    for p in path:
        if isinstance(cur, dict):
            cur = cur.get(str(p), MISSING)
        elif isinstance(cur, list) and isinstance(p, int) and 0 <= p < len(cur):
            cur = cur[p]
        else:
            return MISSING
    return cur


def _same_multiset(a: Any, b: Any) -> bool:
    if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
        return False
    opt = orjson.OPT_SORT_KEYS
    try:
        return Counter(orjson.dumps(x, option=opt) for x in a) == Counter(orjson.dumps(x, option=opt) for x in b)
    except (TypeError, orjson.JSONEncodeError):
        return False


def _is_number(x: Any) -> bool:
    return type(x) in (int, float) and not (isinstance(x, float) and math.isnan(x))


# ---- similarity ---------------------------------------------------------------------
_FOLD = re.compile(r"[\W_]+", re.UNICODE)


SIMILARITY_MAX_CHARS = 1_000_000
"""The longest pair of texts the built-in similarity compares (a hostile tape's 5 MB answer would take seconds
and hundreds of MB): longer ones are that comparison's error; name a hook or compare them exactly."""


class TooLongToCompare(ValueError):
    """Two texts together longer than :data:`SIMILARITY_MAX_CHARS` for the built-in similarity."""


def similarity(a: str, b: str) -> float:
    """The built-in text similarity in [0, 1]: cosine of character-trigram counts (see the module doc).

    Raises:
        TooLongToCompare: the two texts are together longer than :data:`SIMILARITY_MAX_CHARS`.
    """
    if a == b:
        return 1.0
    if len(a) + len(b) > SIMILARITY_MAX_CHARS:
        raise TooLongToCompare(
            f"{len(a) + len(b):,} characters, more than the built-in similarity compares ({SIMILARITY_MAX_CHARS:,})"
        )
    ca, cb = _trigrams(a), _trigrams(b)
    if not ca or not cb:
        return 0.0
    if len(ca) > len(cb):
        ca, cb = cb, ca
    dot = sum(n * cb.get(g, 0) for g, n in ca.items())
    norm = math.sqrt(sum(n * n for n in ca.values())) * math.sqrt(sum(n * n for n in cb.values()))
    return min(1.0, dot / norm) if norm else 0.0  # rounding may land a hair above 1


def _trigrams(text: str) -> Counter[str]:
    # Trigrams never cross a word (each is padded by a space), so each distinct word is cut once and its
    # trigrams counted as often as it occurs: natural text repeats words, a megabyte answer is quick.
    out: Counter[str] = Counter()
    for word, n in Counter(_FOLD.sub(" ", text.lower()).split()).items():
        w = f" {word} "
        for i in range(len(w) - 2):
            out[w[i : i + 3]] += n
    return out


# ---- settings -----------------------------------------------------------------------
@dataclass(frozen=True)
class CompareSettings:
    """How one session is compared (see the module doc); the defaults are today's strictness."""

    sequence: str = "strict"
    max_tool_edits: int = 0
    max_requested_edits: int = 0
    max_arg_changes: int = 0
    max_result_changes: int = 0
    max_note_changes: int = 0
    samples_required: str | int = "all"
    rules: Rules = field(default_factory=Rules)
    set_keys: frozenset[str] = frozenset()  # the keys the table set (an override changes only those)
    source: str | None = None  # the tapes.toml the settings come from, named in hook errors

    @property
    def similarity_hook(self) -> str | None:
        return self.rules.similarity_hook

    @property
    def judge_hook(self) -> str | None:
        return self.rules.judge_hook

    @property
    def hook_timeout(self) -> float:
        """Seconds one hook call may take (``[compare] hook_timeout``; :data:`HOOK_TIMEOUT` by default)."""
        return self.rules.timeout

    @property
    def configured(self) -> bool:
        """Whether tapes.toml's ``[compare]`` says anything for this session (else: today's strictness)."""
        return bool(self.set_keys or self.rules.rules)

    def overridden_by(self, other: CompareSettings) -> CompareSettings:
        """These settings with what ``other`` (a session pattern's table) set; its rules tried first."""
        kw: dict[str, Any] = {k: getattr(other, k) for k in other.set_keys if k in _SETTING_KEYS}
        rules = Rules(
            other.rules.rules + self.rules.rules,
            other.rules.similarity_hook or self.rules.similarity_hook,
            other.rules.judge_hook or self.rules.judge_hook,
            self.rules.hook_timeout if other.rules.hook_timeout is None else other.rules.hook_timeout,
        )
        return replace(self, **kw, rules=rules, set_keys=self.set_keys | other.set_keys)

    def required(self, n: int) -> int:
        """How many of ``n`` samples must match."""
        req = self.samples_required
        if req == "all":
            return n
        if isinstance(req, int):
            return req
        return max(1, math.ceil(float(req.rstrip("%")) / 100 * n - 1e-9))  # a sample must match, at least


_INT_KEYS = ("max_tool_edits", "max_requested_edits", "max_arg_changes", "max_result_changes", "max_note_changes")
_SETTING_KEYS = ("sequence", *_INT_KEYS, "samples_required")
_TABLE_KEYS = (*_SETTING_KEYS, "similarity", "judge", "hook_timeout", "rules", "sessions")


def compare_settings(
    table: Mapping[str, Any], source: str
) -> tuple[CompareSettings, tuple[tuple[str, CompareSettings], ...]]:
    """``[compare]`` as read from ``source`` (a tapes.toml): the global settings and each session pattern's.

    Raises:
        ConfigError: an unknown key or comparator, a bad threshold, mode or hook spelling, a path
            pattern that cannot match; naming ``source`` and the key.
    """
    if not isinstance(table, Mapping):
        raise ConfigError(f"{source}: 'compare' must be a table")
    glob = _settings(table, source, "compare", allow_sessions=True)
    sessions: list[tuple[str, CompareSettings]] = []
    body = table.get("sessions", {})
    if not isinstance(body, Mapping):
        raise ConfigError(f"{source}: 'compare.sessions' must be a table of session patterns")
    for pattern, sub in body.items():
        where = f'compare.sessions."{pattern}"'
        if not isinstance(sub, Mapping):
            raise ConfigError(f"{source}: '{where}' must be a table")
        if not pattern.strip():
            raise ConfigError(f"{source}: '{where}': an empty session pattern")
        settings = _settings(sub, source, where, allow_sessions=False)
        if any(r.kind == "judge" for r in settings.rules.rules) and not (settings.judge_hook or glob.judge_hook):
            raise ConfigError(
                f"{source}: '{where}.rules' has a judge rule but neither '{where}.judge' nor 'compare.judge' "
                "names a judge (module:function)"
            )
        sessions.append((pattern, settings))
    return glob, tuple(sessions)


def _settings(table: Mapping[str, Any], source: str, where: str, *, allow_sessions: bool) -> CompareSettings:
    kw: dict[str, Any] = {}
    for key, value in table.items():
        at = f"{source}: '{where}.{key}'"
        if key not in _TABLE_KEYS or (key == "sessions" and not allow_sessions):
            known = [k for k in _TABLE_KEYS if allow_sessions or k != "sessions"]
            raise ConfigError(f"{source}: unknown key '{where}.{key}' (known: {', '.join(sorted(known))})")
        if key == "sequence":
            if value not in SEQUENCE_MODES:
                raise ConfigError(f"{at} must be one of {', '.join(SEQUENCE_MODES)}, got {value!r}")
        elif key in _INT_KEYS:
            if type(value) is not int or value < 0:
                raise ConfigError(f"{at} must be a whole number of at least 0, got {value!r}")
        elif key == "samples_required":
            if not _samples_ok(value):
                raise ConfigError(
                    f'{at} must be "all", a percentage such as "80%", or a count of at least 1, got {value!r}'
                )
        elif key in ("similarity", "judge") and (not isinstance(value, str) or not _HOOK.match(value)):
            raise ConfigError(f"{at} must name a function as module:function, got {value!r}")
        elif key == "hook_timeout":
            value = _seconds(value, at)
        if key not in ("rules", "sessions"):
            kw[key] = value
    rules_body = table.get("rules", {})
    if not isinstance(rules_body, Mapping):
        raise ConfigError(f"{source}: '{where}.rules' must be a table of path = comparator")
    rules = tuple(parse_rule(k, v, f"{source}: '{where}.rules.\"{k}\"'") for k, v in rules_body.items())
    hooks = {
        "similarity_hook": kw.pop("similarity", None),
        "judge_hook": kw.pop("judge", None),
        "hook_timeout": kw.pop("hook_timeout", None),
    }
    settings = CompareSettings(
        **kw,
        rules=Rules(rules, **hooks),
        set_keys=frozenset(kw),
        source=source,
    )
    # a session pattern's judge rule may use the global judge (checked when the comparison runs)
    if allow_sessions and any(r.kind == "judge" for r in rules) and not hooks["judge_hook"]:
        raise ConfigError(f"{source}: '{where}.rules' has a judge rule but no '{where}.judge' (module:function)")
    return settings


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*")
_UNIT = {None: 1, "s": 1, "m": 60, "h": 3600}
_MAX_HOOK_TIMEOUT = 86400.0  # a day: longer is a typo (and past what a thread's wait takes)


def _seconds(value: Any, at: str) -> float:
    """``hook_timeout`` in seconds from ``30``, ``0.5`` or ``"30s"``/``"2m"``/``"1h"``. Here rather than
    config's ``parse_duration``: config imports this module (and that one's words are a ttl's).

    Raises:
        ConfigError: naming ``at`` (the file and key): not a duration, not more than 0, or more than a day.
    """
    seconds: float = -1.0
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value) if abs(value) <= _MAX_HOOK_TIMEOUT else -1.0  # NaN too; a huge int is no float
    elif isinstance(value, str) and (m := _DURATION.fullmatch(value)):
        seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if not 0 < seconds <= _MAX_HOOK_TIMEOUT:
        shown = _shown(value)
        raise ConfigError(
            f'{at} must be a number of seconds or a duration such as "30s", "2m" (more than 0, at most a day), '
            f"got {shown}"
        )
    return seconds


def _samples_ok(value: Any) -> bool:
    if value == "all":
        return True
    if type(value) is int:
        return value >= 1
    if isinstance(value, str) and re.fullmatch(r"\d+(\.\d+)?%", value):
        return 0 < float(value[:-1]) <= 100
    return False


def rule_problem(pattern: str) -> str | None:
    """What makes a rule's path pattern unable to match anything, or None."""
    if not pattern or pattern != pattern.strip():
        return "an empty path, or one with spaces around it"
    try:
        segs = parse_pattern(pattern)
    except (ValueError, orjson.JSONDecodeError) as e:
        return str(e)
    if not segs:
        return "no segment"
    if segs[0] in ("**", "*") or any(ch in segs[0] for ch in "*?["):
        return None
    if segs[0] not in _SIDES:
        return f"it must start with args, result, note or a wildcard, not {segs[0]!r}"
    if segs[0] == "note" and len(segs) < 2:
        return "a note path names the note's kind: note.KIND"
    return None


def parse_rule(key: str, value: Any, where: str) -> Rule:
    """One ``[compare.rules]`` entry (``"TOOL:result.price" = { tolerance = 0.01 }``).

    Raises:
        ConfigError: naming ``where`` and what is wrong.
    """
    tool: str | None = None
    pattern = key
    head, colon, rest = key.partition(":")
    if colon and not any(ch in head for ch in '["'):  # a ':' inside a quoted key is the key's
        tool, pattern = head, rest
        if not tool.strip() or tool != tool.strip():
            raise ConfigError(f"{where}: {key!r} has no tool name before ':'")
    problem = rule_problem(pattern)
    if problem:
        raise ConfigError(f"{where}: the path pattern {pattern!r} can never match: {problem}")
    if isinstance(value, str):
        kind, params = value, {}
    elif isinstance(value, Mapping):
        known = [k for k in value if k in RULE_KINDS]
        if len(known) != 1 or len(value) != 1:
            raise ConfigError(
                f"{where} must be one comparator ({', '.join(RULE_KINDS)}), as a name or {{ kind = value }}; "
                f"got {dict(value)!r}"
            )
        kind, params = known[0], {known[0]: value[known[0]]}
    else:
        raise ConfigError(f"{where} must be a comparator name or a table, got {type(value).__name__} {value!r}")
    if kind not in RULE_KINDS:
        raise ConfigError(f"{where}: unknown comparator {kind!r} (known: {', '.join(RULE_KINDS)})")
    segs = parse_pattern(pattern)
    rule = Rule(pattern, kind, None, tool, key, segs=segs)
    arg = params.get(kind)
    if kind == "tolerance":
        if arg is None:
            raise ConfigError(f'{where}: tolerance needs a value: {{ tolerance = 0.01 }} or {{ tolerance = "2%" }}')
        return replace(rule, **_tolerance(arg, where))
    if kind == "regex":
        if not isinstance(arg, str):
            raise ConfigError(f'{where}: regex needs a regular expression string: {{ regex = "^a" }}')
        # deferred: the regex package (its search takes a time budget, REGEX_BUDGET) only for a regex rule
        import regex

        try:  # V0: a pattern is read as re reads it
            return replace(rule, value=regex.compile(arg, regex.V0))
        except (regex.error, OverflowError) as e:
            raise ConfigError(f"{where}: invalid regular expression {arg!r}: {e}") from None
        except RecursionError:  # groups nested thousands deep
            raise ConfigError(f"{where}: invalid regular expression {arg!r}: nested too deeply") from None
    if kind == "similarity":
        if isinstance(arg, bool) or not isinstance(arg, (int, float)) or not 0 < arg <= 1:
            raise ConfigError(f"{where}: similarity needs a threshold in (0, 1]: {{ similarity = 0.8 }}, got {arg!r}")
        return replace(rule, value=float(arg))
    if arg is not None and arg is not True:
        raise ConfigError(f'{where}: {kind} takes no value (write "{kind}"), got {arg!r}')
    return rule


def _tolerance(arg: Any, where: str) -> dict[str, Any]:
    if isinstance(arg, str) and arg.strip().endswith("%"):
        try:
            pct = float(arg.strip()[:-1])
        except ValueError:
            pct = -1.0
        if not (math.isfinite(pct) and pct >= 0):
            raise ConfigError(f'{where}: a relative tolerance is a percentage such as "2%", got {arg!r}')
        return {"value": pct / 100, "relative": True}
    if isinstance(arg, bool) or not isinstance(arg, (int, float)) or not math.isfinite(arg) or arg < 0:
        raise ConfigError(f'{where}: a tolerance is a number of at least 0 or a percentage ("2%"), got {arg!r}')
    return {"value": float(arg), "relative": False}


# ---- hooks --------------------------------------------------------------------------
def import_object(spec: str, root: FsPath | None, what: str) -> Any:
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


def _import_hook(settings: CompareSettings, key: str, spec: str, root: FsPath | None) -> Any:
    what = f"{settings.source or 'tapes.toml'}: 'compare.{key}' = {spec!r}"
    try:
        with _quiet():  # what a module prints as it is imported must not land in --json either
            fn = import_object(spec, root, what)
    except TapeError as e:
        raise ConfigError(str(e)) from None
    if not callable(fn):
        raise ConfigError(f"{what} is not a function")
    return fn
