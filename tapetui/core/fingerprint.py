"""Tool fingerprints: a hash of a tool's contract, and the manifest it is made from.

Fingerprint forms (a tool line's ``form`` field; a line without one is form 1):

* **form 1** hashes the manifest as the tool declares it, parameter defaults and schema
  ``default``/``example``/``examples``/``const`` values included, verbatim.
* **form 2** hashes the manifest with secret-looking values redacted (see
  :func:`redact_manifest`), and the tool line holds exactly what was hashed. Rotating a key
  that a tool takes as a default (``api_key=os.environ[...]``) is then not a contract change.
  A manifest with nothing secret-looking has the same fingerprint in both forms.
* **form 3** covers the whole contract a model sees: name, version, description, input schema,
  output schema, annotations and title, plus the signature (params) of a tool registered from a
  Python function (a contract registered without one has no params). Redacted as form 2 redacts
  (descriptions and titles through the value rules), with no text folding: a zero-width space or a
  bidi character added to a description is a change. The fingerprint is sha256 of the canonical
  manifest (compact JSON, sorted keys, strings as they are), 16 hex chars; the tool line holds
  exactly what was hashed.

New recordings write form 3 (:data:`LATEST_FORM`); a tape is verified in the form it was recorded
with, the live tool's manifest computed in that form: a tape recorded in form 1 or 2 is blind to
what those forms do not cover (a docstring that became the default description included).
A manifest's form-3 fields (``description`` ...) are inert in forms 1 and 2: not hashed, written
or explained there. :func:`tool_fingerprint` (public API) keeps returning form 1.

What each field is (the forms that hash it, its redaction, how an explanation shows it) is declared once,
on the field of :class:`~tapetui.core.declared.Contract`; this module reads those declarations.
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from typing import Any

import orjson

from tapetui.core.canon import canonical_json
from tapetui.core.changes import MISSING, Change, format_changes, short
from tapetui.core.declared import CONTRACT, Contract, Declared
from tapetui.core.errors import InvalidValue, TooDeep
from tapetui.core.jsondiff import IgnoreRules, diff_values
from tapetui.core.manifest_redaction import redact_params, redact_value
from tapetui.core.paths import prefixed
from tapetui.core.redact import DEFAULT_REDACTOR, REDACTED, Redactor

__all__ = [
    "CONTRACT_FIELDS",
    "FORMS",
    "LATEST_FORM",
    "MANIFEST_FIELDS",
    "ToolManifest",
    "content_fingerprint",
    "explain_manifest_change",
    "in_form",
    "redact_manifest",
    "redact_manifest_line",
    "tool_fingerprint",
    "tool_manifest",
    "without_ignored",
]

FORMS = (1, 2, 3)
LATEST_FORM = 3
# The fields form 3 adds to a manifest (None: the tool does not declare it).
CONTRACT_FIELDS = tuple(k for k, d in CONTRACT.items() if d.form not in (None, 1))
# MCP tool annotations: the value that lets a tool do more. It is also each hint's default when absent
# (the spec assumes the worst), so removing `"readOnlyHint": true` widens as flipping it does.
_WIDENS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
_WIDENS_NOTE = " (widens what the tool may do)"


@dataclass(frozen=True, slots=True)
class ToolManifest:
    """The inputs of a fingerprint, kept so a reader can say *why* two fingerprints differ.

    Its fields are ``params`` (the function's signature) and the fields of
    :class:`~tapetui.core.declared.Contract` a fingerprint covers, under the same names (each read,
    written, redacted and explained as it declares). ``description``, ``output_schema``,
    ``annotations`` and ``title`` are part of form 3 only (None: not declared, or not known to the
    form the manifest is in).
    """

    name: str
    version: str
    params: tuple[dict[str, Any], ...]
    schema: dict[str, Any]
    fingerprint: str
    form: int = 1
    description: str | None = None
    output_schema: dict[str, Any] | None = None
    annotations: dict[str, Any] | None = None
    title: str | None = None

    def to_record(self, side_effect: bool) -> dict[str, Any]:
        rec: dict[str, Any] = {
            "type": "tool",
            "name": self.name,
            "version": self.version,
            "fingerprint": self.fingerprint,
        }
        if self.form != 1:
            rec["form"] = self.form
        rec.update(params=list(self.params), schema=self.schema, side_effect=side_effect)
        for k in _held(self.form):
            v = getattr(self, k)
            if k in CONTRACT_FIELDS and v is not None:
                rec[k] = v
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ToolManifest:
        form = rec.get("form", 1)
        form = form if type(form) is int else 0  # 0: not a form this version knows (the reader says so)
        params = rec.get("params")
        return cls(
            params=tuple(params) if isinstance(params, list) else (),
            fingerprint=str(rec.get("fingerprint", "")),
            form=form,
            **{k: _read(CONTRACT[k], k, rec) for k in _held(form)},
        )


# Every field of a manifest a tapes.toml `[fingerprint] ignore` pattern may name.
MANIFEST_FIELDS = tuple(f.name for f in fields(ToolManifest) if f.name not in ("fingerprint", "form"))


@lru_cache(maxsize=16)
def _held(form: int) -> tuple[str, ...]:
    """The Contract fields a form-``form`` manifest holds (form 1's in any form, even one unknown here)."""
    return tuple(k for k, d in CONTRACT.items() if d.form == 1 or (d.form is not None and form >= d.form))


def _read(d: Declared, key: str, rec: dict[str, Any]) -> Any:
    """A field of a tool line as a manifest holds it; what its kind does not take reads as absent."""
    if d.kind in ("name", "version"):
        return str(rec.get(key, ""))
    value = rec.get(key)
    if d.kind == "text":
        return value if isinstance(value, str) else None
    if d.kind == "schema":
        return value if isinstance(value, dict) else {}
    return value if isinstance(value, dict) else None


def _annotation(a: Any) -> str | None:
    if a is inspect.Parameter.empty:
        return None
    if isinstance(a, str):
        return a
    if isinstance(a, type):
        return a.__qualname__ if a.__module__ == "builtins" else f"{a.__module__}.{a.__qualname__}"
    return repr(a).replace("typing.", "")


def _default(d: Any) -> Any:
    try:
        orjson.dumps(d)
    except TypeError:
        return repr(d)
    return d


def _params(fn: Callable[..., Any]) -> tuple[dict[str, Any], ...]:
    params = []
    # follow_wrapped (the default): a functools.wraps wrapper's `*args, **kw` are not the tool's signature
    for p in inspect.signature(fn).parameters.values():
        entry: dict[str, Any] = {"name": p.name, "kind": p.kind.name.lower()}
        ann = _annotation(p.annotation)
        if ann is not None:
            entry["annotation"] = ann
        if p.default is not inspect.Parameter.empty:
            entry["default"] = _default(p.default)
        params.append(entry)
    return tuple(params)


def _hash(name: str, params: Any, schema: Any, version: str) -> str:
    """Forms 1 and 2."""
    signature = canonical_json({"name": name, "params": list(params)})
    digest = hashlib.sha256()
    for part in (signature, canonical_json(schema), version.encode()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:16]


def _hash3(m: ToolManifest) -> str:
    """Form 3: sha256 of the canonical manifest (the form itself included, so no other form's can collide)."""
    body: dict[str, Any] = {"form": 3, "params": list(m.params)}
    for k in _held(3):
        v = getattr(m, k)
        if v is not None or CONTRACT[k].null_hashed:  # a form-1 field is never None
            body[k] = v
    return hashlib.sha256(canonical_json(body)).hexdigest()[:16]


def content_fingerprint(m: ToolManifest) -> str:
    """The fingerprint of what ``m`` holds, hashed in ``m``'s own form (nothing redacted on the way)."""
    if m.form >= 3:
        return _hash3(m)
    return _hash(m.name, m.params, m.schema, m.version)


def _json_copy(value: dict[str, Any] | None) -> Any:
    """Round-tripped through canonical JSON: the manifest holds exactly what is hashed."""
    return None if value is None else orjson.loads(canonical_json(value))


def tool_manifest(
    fn: Callable[..., Any] | None,
    schema: dict[str, Any],
    version: str,
    name: str | None = None,
    *,
    form: int = 1,
    redactor: Redactor | None = None,
    description: str | None = None,
    output_schema: dict[str, Any] | None = None,
    annotations: dict[str, Any] | None = None,
    title: str | None = None,
) -> ToolManifest:
    """Build the manifest of a tool: name, version, ordered params, schema, the form-3 fields, and fingerprint.

    Args:
        fn: the tool's function, whose signature is its params; None for a contract without one (no params).
        form: 1 (values verbatim), 2 or 3 (secret-looking values redacted, by ``redactor`` or the
            default rules); see the module doc. A form-1 manifest keeps the form-3 fields, inert, so
            that :func:`in_form` can make every form from it.

    Raises:
        InvalidValue (a ValueError): no ``name`` for a contract without a function.
    """
    tool_name = name or (fn.__name__ if fn is not None else "")
    if not tool_name:
        raise InvalidValue("a tool contract without a function needs a name")
    declared = Contract(
        tool_name,
        version,
        description=description,
        schema=schema,
        output_schema=output_schema,
        annotations=annotations,
        title=title,
    )
    raw = contract_manifest(declared, fn)
    return raw if form == 1 else in_form(raw, form, redactor)


def contract_manifest(contract: Contract, fn: Callable[..., Any] | None = None) -> ToolManifest:
    """The form-1 manifest of ``contract`` (checked: see :mod:`tapetui.core.registry`), its params ``fn``'s
    signature (none without a function); it keeps the later forms' fields, inert, so that :func:`in_form`
    can make every form from it.

    Raises:
        ValueError, TypeError: ``fn``'s signature cannot be read (``inspect.signature``).
    """
    params = _params(fn) if fn is not None else ()
    hashed = {k: _copied(CONTRACT[k], getattr(contract, k)) for k in _held(LATEST_FORM)}
    fp = _hash(hashed["name"], params, hashed["schema"], hashed["version"])
    return ToolManifest(params=params, fingerprint=fp, form=1, **hashed)


def _copied(d: Declared, value: Any) -> Any:
    """A declared value as a manifest holds it: a version as its str(), a JSON object round-tripped."""
    if d.kind == "version":
        return str(value)
    if d.kind == "schema":
        return _json_copy({} if value is None else value)
    return _json_copy(value) if d.kind == "object" else value


def tool_fingerprint(fn: Callable[..., Any], schema: dict[str, Any], version: str, name: str | None = None) -> str:
    """16 lower-case hex chars: sha256 of the canonical signature, canonical schema and version (form 1)."""
    return tool_manifest(fn, schema, version, name).fingerprint


def in_form(manifest: ToolManifest, form: int, redactor: Redactor | None = None) -> ToolManifest:
    """``manifest`` as a form-``form`` manifest, its fingerprint computed from its content.

    Form 2 can be made from any manifest (redacting is idempotent; form-3 fields are dropped);
    form 1 only from a form-1 manifest (what a later form redacted is gone); form 3 from a form-1
    or form-3 manifest, with the form-3 fields the manifest holds (a tool's raw manifest holds
    them; a form-1 tool line does not, so a tape's form-1 manifest makes a form-3 one without them).

    Raises:
        InvalidValue (a ValueError): a form this version does not know, or one that cannot be made from ``manifest``.
    """
    if form not in FORMS or (form == 1 and manifest.form != 1) or (form == 3 and manifest.form not in (1, 3)):
        raise InvalidValue(f"cannot make a form-{form} fingerprint from a form-{manifest.form} manifest")
    if form == 1:
        return manifest
    r = redactor or DEFAULT_REDACTOR
    params = redact_params(manifest.params, r)
    out = ToolManifest(params=params, fingerprint="", form=form, **_redacted(manifest, _held(form), r))
    out = replace(out, fingerprint=content_fingerprint(out))
    return manifest if out == manifest else out


def _redacted(m: ToolManifest, keys: tuple[str, ...], r: Redactor) -> dict[str, Any]:
    """The fields ``keys`` of ``m`` with secret-looking values redacted, each by its declared rule (texts
    through the value rules, no text folding).

    Raises:
        TooDeep: a manifest nested deeper than Python walks.
    """
    try:
        return {k: redact_value(CONTRACT[k], getattr(m, k), r) for k in keys}
    except RecursionError:
        raise TooDeep("a tool manifest") from None


# ---- ignoring fields (tapes.toml [fingerprint] ignore) -------------------------------
def without_ignored(m: ToolManifest, rules: IgnoreRules) -> ToolManifest:
    """``m`` with the fields ``rules`` match removed, its fingerprint recomputed from what is left.

    Paths are the ones an explanation names: ``title``, ``description``, ``schema.properties.q.title``,
    ``params.NAME.default`` (params by name), ``annotations.readOnlyHint``. Removed: a top-level
    text field becomes empty (``description``, ``title``: None), a nested key is dropped. For comparing
    two manifests of one form only: never written, and never the stored fingerprint.

    Raises:
        TooDeep: a manifest nested deeper than Python walks.
    """

    def walk(node: Any, path: tuple[str | int, ...]) -> Any:
        if isinstance(node, dict):
            return {k: walk(v, (*path, k)) for k, v in node.items() if not rules.ignores((*path, k))}
        if isinstance(node, list):
            return [walk(v, (*path, i)) for i, v in enumerate(node) if not rules.ignores((*path, i))]
        return node

    def gone(field: str) -> bool:
        return rules.ignores((field,))

    try:
        params: list[dict[str, Any]] = []
        for p in () if gone("params") else m.params:
            if not isinstance(p, dict):
                params.append(p)
                continue
            at: tuple[str, ...] = ("params", str(p.get("name")))
            if not rules.ignores(at):
                params.append(
                    {
                        k: v if k == "name" else walk(v, (*at, k))
                        for k, v in p.items()
                        if k == "name" or not rules.ignores((*at, k))
                    }
                )
        kept = {}
        for k in _held(LATEST_FORM):  # a form-1 manifest's inert fields too, as they are kept
            v, kind = getattr(m, k), CONTRACT[k].kind
            if gone(k):  # as a tool line without it reads
                v = _read(CONTRACT[k], k, {})
            elif kind in ("schema", "object") and v is not None:
                v = walk(v, (k,))
            kept[k] = v
        out = ToolManifest(params=tuple(params), fingerprint="", form=m.form, **kept)
    except RecursionError:
        raise TooDeep("a tool manifest") from None
    return replace(out, fingerprint=content_fingerprint(out))


# ---- what form 2 redacts ------------------------------------------------------------
def redact_manifest(
    params: tuple[dict[str, Any], ...], schema: dict[str, Any], redactor: Redactor | None = None
) -> tuple[tuple[dict[str, Any], ...], dict[str, Any]]:
    """Params and schema with secret-looking values redacted; the structure is kept.

    A parameter's default, and a schema's ``default``/``example``/``examples``/``const``, is
    replaced by ``[REDACTED]`` when it is a non-empty string (or strings in a list) and its
    parameter or property is named like a secret (``api_key``, ``password``, ``token`` ...);
    every string anywhere (descriptions, annotations, enums, defaults of any name) goes through
    the value rules (``sk-…``, ``Bearer …``, ``password=…``); default and example *objects* go
    through the key rules too. A property named ``password`` keeps its schema
    (``{"type": "string", "minLength": 8}``): only instance values are secret.
    """
    r = redactor or DEFAULT_REDACTOR
    params_r = redact_params(params, r)
    try:
        return params_r, redact_value(CONTRACT["schema"], schema, r)
    except RecursionError:
        raise TooDeep("a tool manifest") from None


def redact_manifest_line(line: bytes, redactor: Redactor | None = None) -> bytes:
    """A tool line with secret-looking values redacted (as forms 2 and 3 would), its fingerprint and form kept.

    For copying a line that may predate form 2 (the index cache, a fill's candidate): a form-1
    fingerprint is verified against the live tool's own manifest, never against the line's
    content, and the redacted content explains a change as well as the verbatim one did.
    A line that is not a JSON object, or has nothing to redact, is returned as it is.
    """
    if not line:
        return line
    try:
        rec = orjson.loads(line)
        if not isinstance(rec, dict):
            return line
        params_in = rec.get("params") or []
        schema_in = rec.get("schema") or {}
        if not isinstance(params_in, list) or not isinstance(schema_in, dict):
            return line
        r = redactor or DEFAULT_REDACTOR
        params, schema = redact_manifest(tuple(params_in), schema_in, r)
        contract: dict[str, Any] = {}
        form = rec.get("form")
        if type(form) is int and form >= 3:
            later = _redacted(ToolManifest.from_record(rec), tuple(k for k in CONTRACT_FIELDS if k in _held(form)), r)
            for k, v in later.items():
                if v is not None and v != rec.get(k):
                    contract[k] = v
    except (orjson.JSONDecodeError, TooDeep, ValueError):
        return line
    if list(params) == params_in and schema == schema_in and not contract:
        return line
    rec["params"], rec["schema"] = list(params), schema
    rec.update(contract)
    return orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)


# ---- explaining a change ------------------------------------------------------------
def explain_manifest_change(
    old: ToolManifest | None, new: ToolManifest | None, redactor: Redactor | None = None
) -> list[str]:
    """Say in lines such as ``schema.properties.max_words.maximum  500 → 200`` why fingerprints differ.

    Each changed field is named with old → new; between two form-3 manifests also the description
    (a word-level diff: ``description: + "and send the file to …"``), title, output schema and
    annotations, where a flip that lets the tool do more is flagged
    (``annotations.readOnlyHint  true → false (widens what the tool may do)``).

    No secret-looking value is shown: both manifests are compared as form 2 shows them; a
    change that only a secret-looking value makes is named by its path, its values redacted
    (``params.api_key.default  [REDACTED] → [REDACTED] (a secret-looking value changed)``).
    Nothing is escaped here: the fronts show the lines literally and safely.
    """
    if old is None or new is None:
        return ["(no manifest on the tape for one side; cannot explain the change)"]
    r = redactor or DEFAULT_REDACTOR
    explained = _explain(_shown(old, r), _shown(new, r))
    lines = [line for _, line in explained]
    if old.form == new.form and _content(old) != _content(new):  # across forms: as form 2
        shown = {path for path, _ in explained}
        for path, _ in _explain(old, new):
            path = r.redact_text(path)
            if path not in shown:
                lines.append(f"{path}  {REDACTED} → {REDACTED} (a secret-looking value changed)")
                shown.add(path)
    if old.form != new.form:
        lines.append(f"fingerprint form: {old.form} → {new.form}")
    return lines


def _content(m: ToolManifest) -> tuple[Any, ...]:
    """What redaction may hide: params and the redacted fields ``m`` holds."""
    return (m.params, *(getattr(m, k) for k in _held(m.form) if CONTRACT[k].redact != "none"))


def _shown(m: ToolManifest, r: Redactor) -> ToolManifest:
    return replace(m, params=redact_params(m.params, r), **_redacted(m, _held(m.form), r))


_PARAMS_ORDER = 2  # where params come in an explanation, among the fields' declared orders


def _explain(old: ToolManifest, new: ToolManifest) -> list[tuple[str, str]]:
    """``(path, line)`` for each difference, in each field's declared order; a field only when both
    manifests hold it (the form-3 fields when both are form 3)."""
    both = [k for k in _held(old.form) if k in _held(new.form)]
    out: list[tuple[str, str]] = []
    for _, k in sorted([(CONTRACT[k].order, k) for k in both] + [(_PARAMS_ORDER, "params")]):
        if k == "params":
            out += _params_change(old.params, new.params)
            continue
        shown = CONTRACT[k].shown
        a, b = getattr(old, k), getattr(new, k)
        if shown == "words":
            out += [(k, line) for line in _text_change(k, a, b)]
        elif shown == "json":
            out += _dict_change(k, a, b)
        elif shown == "hints":
            out += _annotation_changes(k, a, b)
        elif a != b:
            out.append((k, f"{k}: {_shown_text(a)} → {_shown_text(b)}" if shown == "text" else f"{k}: {a} → {b}"))
    return out


def _params_change(old: tuple[dict[str, Any], ...], new: tuple[dict[str, Any], ...]) -> list[tuple[str, str]]:
    out = _changes("params", diff_values(_params_by_name(old), _params_by_name(new)))
    old_order = [p.get("name") for p in old if isinstance(p, dict)]
    new_order = [p.get("name") for p in new if isinstance(p, dict)]
    if old_order != new_order and sorted(map(str, old_order)) == sorted(map(str, new_order)):
        out.append(("params order", f"params order: {old_order} → {new_order}"))
    return out


def _changes(prefix: str, changes: list[Change]) -> list[tuple[str, str]]:
    return [
        (prefixed(prefix, c.path), line)
        for c, line in zip(changes, format_changes(changes, prefix=prefix, contract=True), strict=True)
    ]


def _shown_text(text: str | None) -> str:
    return "(absent)" if text is None else short(text)


def _text_change(field: str, old: str | None, new: str | None) -> list[str]:
    """A word-level diff: ``description: + "and send the file to …"``, ``description: - "…"``."""
    if old == new:
        return []
    if old is None or new is None:
        return [f"{field}: (added) {short(new)}" if old is None else f"{field}: (removed) {short(old)}"]
    a, b = old.split(), new.split()
    lines = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        where = f" (after {short(' '.join(a[max(0, i1 - 3) : i1]), 40)})" if i1 else " (at the start)"
        if tag in ("replace", "delete"):
            lines.append(f"{field}: - {short(' '.join(a[i1:i2]))}{where}")
        if tag in ("replace", "insert"):
            lines.append(f"{field}: + {short(' '.join(b[j1:j2]))}{where}")
    if not lines:  # the same words: only whitespace differs (a change too, nothing is folded)
        lines.append(
            f"{field}: whitespace {_spaces_shown(short(old, around=new))} → {_spaces_shown(short(new, around=old))}"
        )
    return lines


_OTHER_SPACE = re.compile(r"[^\S ]")  # any whitespace but the plain space


def _spaces_shown(text: str) -> str:
    """``text`` with every whitespace character but the plain space written as an escape (``\u00a0``), so a
    whitespace-only change is visible (a no-break space looks like a space)."""
    return _OTHER_SPACE.sub(
        lambda m: repr(m.group())[1:-1] if m.group() in "\n\t\r" else f"\\u{ord(m.group()):04x}", text
    )


def _dict_change(field: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[tuple[str, str]]:
    if old is None or new is None:
        if old is new:
            return []
        return _changes(field, [Change("", MISSING if old is None else old, MISSING if new is None else new)])
    return _changes(field, diff_values(old, new))


def _annotation_changes(field: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Annotation changes, a flip that lets the tool do more (by MCP's hints) flagged as such."""
    if old is None or new is None:
        if (old is None) == (new is None):
            return []
        if not (old or new):  # null against {}: no hint moved
            return _changes(field, [Change("", old, new)])
    a, b = old or {}, new or {}
    out = []
    for c, line in zip(changes := diff_values(a, b), format_changes(changes, prefix=field, contract=True), strict=True):
        widen = _WIDENS.get(c.path)
        if widen is not None and a.get(c.path, widen) is not widen and b.get(c.path, widen) is widen:
            line += _WIDENS_NOTE
        out.append((prefixed(field, c.path), line))
    return out


def _params_by_name(params: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return {str(p.get("name")): {k: v for k, v in p.items() if k != "name"} for p in params if isinstance(p, dict)}
