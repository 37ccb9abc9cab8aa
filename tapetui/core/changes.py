"""A difference at one JSON path, and how differences are written for a person.

Apart from :mod:`tapetui.core.jsondiff` (which finds them) so that the errors a replay raises
(:mod:`tapetui.core.errors`) can describe changes without importing the differ.

Every value shown here is redacted as it is shown: a tape that holds a secret in clear (written by hand, recorded
before a rule existed, brought by a pull request) never prints it — not in an error, ``check``'s output in any
format, ``diff`` or the app. A path under a secret key (``args.api_key``) shows ``[REDACTED]`` on both sides, a
secret in a path's key is redacted in the path, and a value elsewhere has its secret-shaped parts redacted
(``Bearer [REDACTED]``). The rules are the default ones until a front (the command line, the app, a ``check``
worker) has read the project's ``tapes.toml``: then its ``[redact]`` rules too (:func:`show_redacted_by`).
Names — of sessions, tools, files — are shown as they are: they are the project's own words, and scripts read
them back (:func:`shown_doc`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

import orjson

from tapetui.core.errorbase import TooDeep
from tapetui.core.paths import join as format_path
from tapetui.core.paths import prefixed, split
from tapetui.core.redact import DEFAULT_REDACTOR, REDACTED, Redactor

__all__ = [
    "DEEPER",
    "MISSING",
    "SHOWN_DEPTH",
    "Change",
    "event_changes",
    "format_changes",
    "format_path",
    "hidden_sides",
    "json_name",
    "json_text",
    "secret_path",
    "short",
    "shown_path",
    "show_redacted_by",
    "shown_doc",
    "shown_redactor",
]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "(absent)"

    def __reduce__(self) -> str:
        return "MISSING"  # one instance in every process: a report checked in another (check --jobs) keeps it


MISSING: Any = _Missing()

_SHOWN: list[Redactor] = [DEFAULT_REDACTOR]  # what redacts what is shown in this process


def show_redacted_by(redactor: Redactor) -> None:
    """Redact what this process shows with ``redactor`` from now on (a front does, with its project's
    ``Config.redactor()``: the default rules and the project's ``[redact]`` rules)."""
    if redactor is not _SHOWN[0]:
        _SHOWN[0] = redactor
        _PATHS.clear()


def shown_redactor() -> Redactor:
    """What redacts what this process shows (see :func:`show_redacted_by`)."""
    return _SHOWN[0]


class Change(NamedTuple):
    """One differing JSON path. ``old`` or ``new`` is :data:`MISSING` when added or removed."""

    path: str
    old: Any
    new: Any

    @property
    def kind(self) -> str:
        if self.old is MISSING:
            return "added"
        if self.new is MISSING:
            return "removed"
        return "changed"


def event_changes(changes: Iterable[Change | tuple[str, Any, Any]]) -> list[list[Any]]:
    """Changes as a run-log event holds them: ``[path, old, new]`` each, an absent side as ``"(absent)"``."""
    return [[p, "(absent)" if o is MISSING else o, "(absent)" if n is MISSING else n] for p, o, n in changes]


def short(value: Any, width: int = 60, around: str | None = None) -> str:
    """Compact JSON of ``value``, shortened to about ``width`` chars.

    Args:
        around: the other side's string; when both are long strings the window is
            placed at their first difference so that what changed stays visible.
    """
    if value is MISSING:
        return "(absent)"
    text, cut = _json(_redacted(value), 0, repr)
    if len(text) <= width:
        return text
    start = 0
    if cut:  # the window shows where the value was cut, or a person sees only brackets and no marker
        start = max(0, text.find(_DEEPER_JSON) - width // 3)
    elif isinstance(value, str):  # the window at the first difference of both sides as they are shown: redacted
        return _string_window(text, width, None if around is None else _SHOWN[0].redact_text(around))
    piece = text[start : start + width]
    return ("…" if start else "") + piece + ("…" if start + width < len(text) else "")


def _string_window(text: str, width: int, around: str | None) -> str:
    """A long JSON string shortened inside its quotes (``"…at the change…"``), so that both quotes always show;
    with ``around`` the window starts a little before the first difference."""
    inner, room = text[1:-1], max(width - 2, 8)
    start = 0
    if around is not None:
        other = orjson.dumps(around).decode()[1:-1]
        first = next((i for i, (a, b) in enumerate(zip(inner, other, strict=False)) if a != b), None)
        start = max(0, (min(len(inner), len(other)) if first is None else first) - room // 3)
    piece = inner[start : start + room].rstrip("\\")  # never end on half an escape: it would hide the quote
    return '"' + ("…" if start else "") + piece + ("…" if start + room < len(inner) else "") + '"'


SHOWN_DEPTH = 254
"""How many levels of nesting a value is shown to (:func:`json_text`): as deep as orjson writes. A tape may
hold a value nested deeper (a reader takes 1,024 levels); what is below this depth is shown as :data:`DEEPER`."""

DEEPER = "…(deeper)"
"""What stands for the containers nested past :data:`SHOWN_DEPTH` in a value shown: a string, so that
``--json`` stays valid JSON."""

_DEEPER_JSON = orjson.dumps(DEEPER).decode()


def json_text(
    value: Any, *, indent: bool = False, sort_keys: bool = False, default: Any = repr, redact: bool = True
) -> str:
    """JSON text of a value from a tape, for a person or ``--json``: of any depth, never an error for it.

    orjson refuses a value nested past :data:`SHOWN_DEPTH` levels (``TypeError: Recursion limit reached``),
    which a tape may hold: such a value is shown to that depth, with :data:`DEEPER` in place of what is
    below. Only for showing: what is written back to a tape or golden is the bytes as recorded
    (:func:`tapetui.core.canon.dumps` writes any depth whole).

    Args:
        indent: two spaces per level, one item a line.
        sort_keys: object keys in sorted order.
        default: what an object JSON has no form for is shown as (``repr``).
        redact: redact the value as it is shown (see the module's doc); False for a value redacted already
            (a ``--json`` document, through :func:`shown_doc`).
    """
    option = (orjson.OPT_INDENT_2 if indent else 0) | (orjson.OPT_SORT_KEYS if sort_keys else 0)
    return _json(_redacted(value) if redact else value, option, default)[0]


def _redacted(value: Any) -> Any:
    """``value`` as it is shown: redacted by :func:`shown_redactor` (see the module's doc); one nested past what
    redaction walks is cut at :data:`SHOWN_DEPTH` first, as it is shown anyway."""
    try:
        return _SHOWN[0].redact(value)
    except TooDeep:
        return _SHOWN[0].redact(_clipped(value, SHOWN_DEPTH))


def _json(value: Any, option: int, default: Any) -> tuple[str, bool]:
    """The text of :func:`json_text`, and whether the value was cut at :data:`SHOWN_DEPTH`."""
    try:
        return orjson.dumps(value, option=option, default=default).decode(), False
    except TypeError as e:  # orjson.JSONEncodeError is one
        if "surrogates" in str(e):  # a name from a file name that is not UTF-8 (``\udcff``): shown as its escape
            return _json(_clipped(value, SHOWN_DEPTH, json_name), option, default)[0], False
        if "Recursion limit" not in str(e):
            raise
    return orjson.dumps(_clipped(value, SHOWN_DEPTH), option=option, default=default).decode(), True


def json_name(text: str) -> str:
    """``text`` as JSON output holds it: a lone surrogate (a file name that is not UTF-8) as its escape, ``\\udcff``;
    any other text as it is."""
    return text.encode("utf-8", "backslashreplace").decode()


def _clipped(value: Any, room: int, text: Any = None) -> Any:
    """A copy of ``value`` with the containers below ``room`` levels replaced by :data:`DEEPER`. It recurses
    at most ``room`` levels, whatever the value's depth: well within Python's recursion limit. ``text``: what each
    string (a key too) becomes, when not itself."""
    if isinstance(value, dict):
        if room <= 0:
            return DEEPER
        if text is None:
            return {k: _clipped(v, room - 1) for k, v in value.items()}
        return {text(k) if isinstance(k, str) else k: _clipped(v, room - 1, text) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clipped(v, room - 1, text) for v in value] if room > 0 else DEEPER
    if text is not None and isinstance(value, str):
        return text(value)
    return value


def format_changes(
    changes: Iterable[Change | tuple[str, Any, Any]], prefix: str = "", width: int = 60, *, contract: bool = False
) -> list[str]:
    """Lines such as ``args.max_words  120 → 80``; added and removed paths say so.

    ``contract``: the changes are of a tool's contract (its schema, its params): a path through a parameter named
    ``password`` is structure, not a secret's value (``schema.properties.password.maxLength  64 → 128``); the
    values still go through the value rules."""
    lines = []
    for path, old, new in changes:
        full = shown_path(prefixed(prefix, path))
        secret = not contract and secret_path(path)
        if secret:
            old, new = hidden_sides(old, new)
        if old is MISSING:
            lines.append(f"{full}  (added) {short(new, width)}")
        elif new is MISSING:
            lines.append(f"{full}  (removed) {short(old, width)}")
        else:
            o = short(old, width, around=new if isinstance(new, str) else None)
            n = short(new, width, around=old if isinstance(old, str) else None)
            # both sides alike as shown: they differ where redaction hides a value (one side holds it in clear)
            hidden = (
                "  (they differ where [REDACTED] stands: one side holds a secret in clear)"
                if o == n and not secret
                else ""
            )
            lines.append(f"{full}  {o} → {n}{hidden}")
    return lines


def hidden_sides(old: Any, new: Any) -> tuple[Any, Any]:
    """A change's sides under a secret key's path (:func:`secret_path`) as they are shown: ``[REDACTED]``, an
    absent side still :data:`MISSING` (so an added or removed secret says so)."""
    return (old if old is MISSING else REDACTED), (new if new is MISSING else REDACTED)


def shown_path(path: str) -> str:
    """A change's path as it is shown: a secret that is a key on it (``args["Bearer …"]``) redacted."""
    return _path(path)[0]


def secret_path(path: str) -> bool:
    """Whether a change's path goes through a key whose value the rules redact (``api_key``, ``token``)."""
    return _path(path)[1]


_PATHS: dict[str, tuple[str, bool]] = {}  # path → (shown, secret): a folder's sessions share their paths


def _path(path: str) -> tuple[str, bool]:
    known = _PATHS.get(path)
    if known is not None:
        return known
    r = _SHOWN[0]
    try:
        segments = split(path)
    except ValueError:  # not a path as join writes it: its words are looked at as they are
        segments = tuple(path.replace("[", ".").replace("]", ".").split("."))
    found = (r.redact_text(path), any(r.is_secret_key(s) for s in segments if s and not s.isdigit()))
    if len(_PATHS) >= 10_000:
        _PATHS.clear()
    _PATHS[path] = found
    return found


# Keys of a --json document whose values are names (of sessions, tools, files, dimensions, keys) or the report's
# own words: kept as they are. Under VALUE_KEYS a tape's values: redacted whole, their own keys' rules applied.
_NAME_KEYS = frozenset(
    {"session", "golden", "other", "tape", "folder", "tapetui", "sessions_digest", "shard", "tool", "tools", "name",
     "kind", "dimension", "mode", "level", "outcome", "key", "old_key", "new_key", "recorded_key", "stored_key",
     "computed_key", "fingerprint", "seq", "new_seq", "line", "format", "requested", "sessions", "ok", "failing",
     "files_digest"}
)  # fmt: skip
_VALUE_KEYS = frozenset({"old", "new", "value", "args", "result", "recorded_args", "request", "response", "values"})
_DOC_DEPTH = 32


def shown_doc(doc: Any, depth: int = 0) -> Any:
    """A ``--json`` document as it is printed: every value from a tape in it redacted (:func:`show_redacted_by`),
    every name kept — a session called ``login basic authentication`` is still that in the JSON a script or
    ``check --merge`` reads. Dict keys are kept (``stats --json`` is keyed by session)."""
    if depth > _DOC_DEPTH:  # deeper than any report's own structure: a tape's value, redacted whole
        return _redacted(doc)
    kind = type(doc)
    if kind is dict:
        text = _SHOWN[0].redact_text
        out = {}
        for k, v in doc.items():  # a report's leaves handled here: a call per container, not per value
            vt = type(v)
            if k in _NAME_KEYS or vt in _PLAIN:
                out[k] = v
            elif k in _VALUE_KEYS:
                out[k] = _redacted(v)
            else:
                out[k] = text(v) if vt is str else shown_doc(v, depth + 1)
        return out
    if kind is list or kind is tuple:
        return [v if type(v) in _PLAIN else shown_doc(v, depth + 1) for v in doc]
    if kind is str:
        return _SHOWN[0].redact_text(doc)
    return doc


_PLAIN = frozenset({int, float, bool, type(None)})
