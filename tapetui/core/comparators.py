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
  imported only when a comparison needs them (:meth:`Hooks.lazy`); ``hook_timeout`` (seconds, or ``"30s"``,
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

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tapetui.core.changes import MISSING, Change
from tapetui.core.errors import ConfigError, TapeError
from tapetui.core.hookcalls import HOOK_TIMEOUT, HookStdout, HookTimeout, hooks_running, import_object, quiet, run_hook
from tapetui.core.jsondiff import IgnoreRules, diff_parts
from tapetui.core.judgements import Excuse, Judged, Verdict, try_regex, try_tolerance, try_unordered
from tapetui.core.paths import JsonPath, prefixed
from tapetui.core.rulekinds import RULE_KINDS, Rule, RuleKind, governing, ignore_rule, parse_rule, rule_problem
from tapetui.core.shown import described, shown_number, shown_value
from tapetui.core.textsimilarity import SIMILARITY_MAX_CHARS, meaning_changed, similarity
from tapetui.core.textsimilarity import TooLongToCompare as TooLongToCompare

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
    "token_threshold",
]

# Moved out along their seams and importable from here as before: the rule kinds and their parsing
# (rulekinds), what a judgement is and the comparators that call no user's code (judgements), calling a
# user's hook (hookcalls), the built-in similarity (textsimilarity). Two private names tests use:
_described = described
_HookStdout = HookStdout

SEQUENCE_MODES = ("strict", "unordered", "subset", "superset", "phases")
DIMENSIONS = ("tools", "requested", "arguments", "results", "notes")
"""The dimensions a comparison gives a verdict on, in the order they are reported."""

_HOOK = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


# ---- hooks --------------------------------------------------------------------------
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
        self._root: Path | None = None

    @classmethod
    def lazy(cls, settings: CompareSettings, root: Path | None) -> Hooks:
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


def _import_hook(settings: CompareSettings, key: str, spec: str, root: Path | None) -> Any:
    what = f"{settings.source or 'tapes.toml'}: 'compare.{key}' = {spec!r}"
    try:
        with quiet():  # what a module prints as it is imported must not land in --json either
            fn = import_object(spec, root, what)
    except TapeError as e:
        raise ConfigError(str(e)) from None
    if not callable(fn):
        raise ConfigError(f"{what} is not a function")
    return fn


# ---- judging ------------------------------------------------------------------------
REGEX_BUDGET = 1.0
"""Seconds one ``[compare.rules]`` regex may search one value: past it the comparison is an error, never a pass.
The pattern is the user's and the text the tape's; a pattern that backtracks (``^(a|aa)*$``) on a few dozen
characters would otherwise run for ever."""


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
            kept: list[tuple[JsonPath, Change]] = []
            for parts, change in diffs:
                pat = listed.matching(parts)
                if pat is None:
                    kept.append((parts, change))
                else:
                    ignored.append(Excuse(change, ignore_rule(pat), f"ignored by [diff] ignore {pat!r}"))
            diffs = kept
        if not self.rules or not diffs:
            return Judged(tuple(c for _, c in diffs), tuple(ignored))
        head = tuple(side.split(".", 1)) if side.startswith("note.") else (side,)
        mine = [r for r in self.rules if r.tool is None or r.tool == tool]
        changes: list[Change] = []
        excused: list[Excuse] = ignored
        remarks: list[tuple[Change, str]] = []
        errors: list[str] = []
        unordered_cache: dict[JsonPath, bool] = {}
        for parts, change in diffs:
            full = head + tuple(str(p) for p in parts)
            done = False
            for rule, depth in governing(mine, full):
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
                        errors.append(f"{prefixed(side, change.path)}: {text}")
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
        at: JsonPath,
        old_root: Any,
        new_root: Any,
        hooks: Hooks | None,
        unordered_cache: dict[JsonPath, bool],
        side: str,
        tool: str | None,
        context: Mapping[str, Any] | None,
    ) -> Verdict:
        """The rule's word on one change: an excuse, ``("remark"|"error", why)``, or None (not its business)."""
        a, b = change.old, change.new
        kind = rule.kind
        if kind == "ignore":
            return Excuse(change, rule, "ignored")
        if kind == "unordered":
            return try_unordered(rule, change, at, old_root, new_root, unordered_cache)
        if a is MISSING or b is MISSING:
            return None  # an added or removed value is within no tolerance, regex or similarity
        if kind == "tolerance":
            return try_tolerance(rule, change)
        if kind == "regex":
            return try_regex(rule, change, REGEX_BUDGET)  # read here: the budget is this module's to set
        if not (isinstance(a, str) and isinstance(b, str)):
            return None
        if kind == "similarity":
            return self._try_similarity(rule, change, a, b, hooks)
        return self._try_judge(rule, change, a, b, hooks, side, tool, context)

    # What a user's hook may raise is its comparison's error: everything but a person's Ctrl-C — a hook that calls
    # sys.exit() does not end check, and one that raises a BaseException of its own is no traceback.

    def _try_similarity(self, rule: Rule, change: Change, a: str, b: str, hooks: Hooks | None) -> Verdict:
        """``similarity``: the similarity hook's score of two texts, or the built-in one's (see the module doc)."""
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
            guard = meaning_changed(a, b)  # the built-in one reads wording: numbers and negations it checks
            if guard:
                return ("remark", guard)
            fn = similarity
        name = f"similarity hook {self.similarity_hook}"
        try:
            raw = fn(a, b) if fn is similarity else run_hook(lambda: fn(a, b), self.timeout, name, fn)
        except HookTimeout as e:
            return ("error", str(e))
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a user's function: its failure is this comparison's error, never a pass
            return ("error", f"{name} raised {described(e)}")
        if type(raw) not in (int, float) or not 0.0 <= raw <= 1.0:  # NaN fails both comparisons
            return ("error", f"{name} returned {shown_value(raw)}, not a number from 0 to 1")
        score = float(raw)
        if score >= rule.value:
            return Excuse(change, rule, f"similarity {score:.2f} ≥ {shown_number(rule.value)}")
        return ("remark", f"similarity {score:.2f} < {shown_number(rule.value)}")

    def _try_judge(
        self,
        rule: Rule,
        change: Change,
        a: str,
        b: str,
        hooks: Hooks | None,
        side: str,
        tool: str | None,
        context: Mapping[str, Any] | None,
    ) -> Verdict:
        """``judge``: the judge hook's ``(passed, reason)`` on two texts, given ``context`` and where they are."""
        if not self.judge_hook:
            return ("error", "a judge rule needs 'compare.judge' (module:function) in tapes.toml")
        judge = hooks.judge if hooks is not None else None
        if judge is None:
            return ("remark", f"judge {self.judge_hook} not run here (check and diff run it; the app after J)")
        ctx = {**(context or {}), "side": side, "tool": tool, "path": prefixed(side, change.path)}

        def verdict() -> tuple[Any, str]:  # unpacking and str() run the user's code too: in the hook's thread
            passed, reason = judge(a, b, ctx)
            return passed, str(reason)

        try:
            passed, why = run_hook(verdict, self.timeout, f"judge {self.judge_hook}", judge)
        except HookTimeout as e:
            return ("error", str(e))
        except KeyboardInterrupt:
            raise
        except BaseException as e:  # a user's function: its failure is this comparison's error, never a pass
            return ("error", f"judge {self.judge_hook} raised {described(e)}")
        if passed is True:
            return Excuse(change, rule, f"judge: {why}")
        if passed is False:
            return ("remark", f"judge: {why}")
        return ("error", f"judge {self.judge_hook} returned {shown_value(passed)} as passed (expected True or False)")


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
    tokens: str | None = None  # "+20%" or "+5000": a run that spends more tokens than its golden by more is a finding
    model_turns: str = "by_key"  # "by_place": serve the turn at its place when only tool results in it changed
    model_names: str = "same"  # "any": a turn may serve a request for another model name (reported)
    live_results: str = "warn"  # "must_match": a live tool's result that differs from the recording fails
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
_CHOICES = {
    "model_turns": ("by_key", "by_place"),
    "model_names": ("same", "any"),
    "live_results": ("warn", "must_match"),
}
_SETTING_KEYS = ("sequence", *_INT_KEYS, "samples_required", "tokens", *_CHOICES)
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
        elif key in _CHOICES:
            if value not in _CHOICES[key]:
                raise ConfigError(
                    f"{at} must be one of {', '.join(map(repr, _CHOICES[key]))}, got {shown_value(value)}"
                )
        elif key == "tokens":
            if token_threshold(value) is None:
                raise ConfigError(f'{at} must be a growth such as "+20%" or "+5000", got {shown_value(value)}')
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
        shown = shown_value(value)
        raise ConfigError(
            f'{at} must be a number of seconds or a duration such as "30s", "2m" (more than 0, at most a day), '
            f"got {shown}"
        )
    return seconds


def token_threshold(value: Any) -> tuple[float, bool] | None:
    """``[compare] tokens`` as ``(amount, is_percent)``: ``"+20%"`` → ``(20.0, True)``, ``"+5000"`` →
    ``(5000.0, False)``; None when it is neither."""
    if not isinstance(value, str):
        return None
    m = re.fullmatch(r"\s*\+?\s*(\d+(?:\.\d+)?)\s*(%?)\s*", value)
    if m is None:
        return None
    return float(m.group(1)), m.group(2) == "%"


def _samples_ok(value: Any) -> bool:
    if value == "all":
        return True
    if type(value) is int:
        return value >= 1
    if isinstance(value, str) and re.fullmatch(r"\d+(\.\d+)?%", value):
        return 0 < float(value[:-1]) <= 100
    return False
