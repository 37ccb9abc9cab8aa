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
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from tapetui.core.canon import canonical_json
from tapetui.core.changes import MISSING, Change, format_changes, short
from tapetui.core.errors import TooDeep
from tapetui.core.jsondiff import IgnoreRules, diff_values
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
CONTRACT_FIELDS = ("description", "output_schema", "annotations", "title")
# Every field of a manifest a tapes.toml `[fingerprint] ignore` pattern may name.
MANIFEST_FIELDS = ("name", "version", "params", "schema", *CONTRACT_FIELDS)
# Schema keywords whose values are instances, not structure: redacted when secret-looking.
_VALUE_KEYWORDS = frozenset({"default", "example", "examples", "const"})
# MCP tool annotations: the value that lets a tool do more. It is also each hint's default when absent
# (the spec assumes the worst), so removing `"readOnlyHint": true` widens as flipping it does.
_WIDENS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
_WIDENS_NOTE = " (widens what the tool may do)"


@dataclass(frozen=True, slots=True)
class ToolManifest:
    """The inputs of a fingerprint, kept so a reader can say *why* two fingerprints differ.

    ``description``, ``output_schema``, ``annotations`` and ``title`` are part of form 3 only
    (None: not declared, or not known to the form the manifest is in).
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
        if self.form >= 3:
            for k in CONTRACT_FIELDS:
                v = getattr(self, k)
                if v is not None:
                    rec[k] = v
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ToolManifest:
        form = rec.get("form", 1)
        form = form if type(form) is int else 0  # 0: not a form this version knows (the reader says so)
        params, schema = rec.get("params"), rec.get("schema")
        contract: dict[str, Any] = {}
        if form >= 3:
            description, output_schema, annotations, title = (rec.get(k) for k in CONTRACT_FIELDS)
            contract = {
                "description": description if isinstance(description, str) else None,
                "output_schema": output_schema if isinstance(output_schema, dict) else None,
                "annotations": annotations if isinstance(annotations, dict) else None,
                "title": title if isinstance(title, str) else None,
            }
        return cls(
            name=str(rec.get("name", "")),
            version=str(rec.get("version", "")),
            params=tuple(params) if isinstance(params, list) else (),
            schema=schema if isinstance(schema, dict) else {},
            fingerprint=str(rec.get("fingerprint", "")),
            form=form,
            **contract,
        )


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
    body = {
        "form": 3,
        "name": m.name,
        "version": m.version,
        "params": list(m.params),
        "schema": m.schema,
        "description": m.description,
        "output_schema": m.output_schema,
        "annotations": m.annotations,
        "title": m.title,
    }
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
        ValueError: no ``name`` for a contract without a function.
    """
    tool_name = name or (fn.__name__ if fn is not None else "")
    if not tool_name:
        raise ValueError("a tool contract without a function needs a name")
    params = _params(fn) if fn is not None else ()
    schema_c = _json_copy(schema)
    raw = ToolManifest(
        tool_name,
        str(version),
        params,
        schema_c,
        _hash(tool_name, params, schema_c, str(version)),
        1,
        description,
        _json_copy(output_schema),
        _json_copy(annotations),
        title,
    )
    return raw if form == 1 else in_form(raw, form, redactor)


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
        ValueError: a form this version does not know, or one that cannot be made from ``manifest``.
    """
    if form not in FORMS or (form == 1 and manifest.form != 1) or (form == 3 and manifest.form not in (1, 3)):
        raise ValueError(f"cannot make a form-{form} fingerprint from a form-{manifest.form} manifest")
    if form == 1:
        return manifest
    r = redactor or DEFAULT_REDACTOR
    params, schema = redact_manifest(manifest.params, manifest.schema, r)
    if form == 2:
        fp = _hash(manifest.name, params, schema, manifest.version)
        if (
            form == manifest.form
            and fp == manifest.fingerprint
            and params == manifest.params
            and schema == manifest.schema
        ):
            return manifest
        return ToolManifest(manifest.name, manifest.version, params, schema, fp, 2)
    description, output_schema, annotations, title = _redact_contract(manifest, r)
    out = ToolManifest(
        manifest.name, manifest.version, params, schema, "", 3, description, output_schema, annotations, title
    )
    out = replace(out, fingerprint=_hash3(out))
    return manifest if out == manifest else out


def _redact_contract(
    m: ToolManifest, r: Redactor
) -> tuple[str | None, dict[str, Any] | None, dict[str, Any] | None, str | None]:
    """The form-3 fields with secret-looking values redacted, as form 2 redacts (no text folding)."""
    try:
        description = None if m.description is None else r.redact_text(m.description)
        title = None if m.title is None else r.redact_text(m.title)
        output_schema = None if m.output_schema is None else _schema(m.output_schema, False, r)
        annotations = None if m.annotations is None else r.redact(m.annotations)
    except RecursionError:
        raise TooDeep("a tool manifest") from None
    return description, output_schema, annotations, title


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
        out = ToolManifest(
            name="" if gone("name") else m.name,
            version="" if gone("version") else m.version,
            params=tuple(params),
            schema={} if gone("schema") else walk(m.schema, ("schema",)),
            fingerprint="",
            form=m.form,
            description=None if gone("description") else m.description,
            output_schema=None
            if gone("output_schema") or m.output_schema is None
            else walk(m.output_schema, ("output_schema",)),
            annotations=None if gone("annotations") or m.annotations is None else walk(m.annotations, ("annotations",)),
            title=None if gone("title") else m.title,
        )
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
    try:
        out: list[Any] = []
        for p in params:
            if not isinstance(p, dict):  # not what tapetui writes (a hand-edited tape): redacted as data
                out.append(r.redact(p))
                continue
            q = dict(p)
            secret = isinstance(p.get("name"), str) and r.is_secret_key(p["name"])
            for k, v in p.items():
                if k == "default":
                    q[k] = _instance(v, secret, r)
                elif k != "name":
                    q[k] = r.redact(v)
            out.append(q)
        schema_r = _schema(schema, False, r)
    except RecursionError:
        raise TooDeep("a tool manifest") from None
    return tuple(out), schema_r if isinstance(schema_r, dict) else schema


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
            m = ToolManifest.from_record(rec)
            for k, v in zip(CONTRACT_FIELDS, _redact_contract(m, r), strict=True):
                if v is not None and v != rec.get(k):
                    contract[k] = v
    except (orjson.JSONDecodeError, TooDeep, ValueError):
        return line
    if list(params) == params_in and schema == schema_in and not contract:
        return line
    rec["params"], rec["schema"] = list(params), schema
    rec.update(contract)
    return orjson.dumps(rec, option=orjson.OPT_APPEND_NEWLINE)


def _instance(value: Any, secret: bool, r: Redactor) -> Any:
    """An instance value (a default, an example): blanked when its name is secret, else redacted."""
    if secret:
        if isinstance(value, str):
            return REDACTED if value else value
        if isinstance(value, list):
            return [_instance(v, True, r) for v in value]
    return r.redact(value)


def _schema(node: Any, secret: bool, r: Redactor) -> Any:
    if isinstance(node, dict):
        names = r.renamed_keys(node)
        out: dict[Any, Any] = {}
        for k, v in node.items():
            if k in _VALUE_KEYWORDS:
                out[k] = _instance(v, secret, r)
            elif k in ("properties", "patternProperties") and isinstance(v, dict):
                pnames = r.renamed_keys(v)
                out[k] = {
                    pnames.get(pk, pk): _schema(pv, secret or (isinstance(pk, str) and r.is_secret_key(pk)), r)
                    for pk, pv in v.items()
                }
            else:
                out[names.get(k, k)] = _schema(v, secret, r)
        return out
    if isinstance(node, list):
        return [_schema(v, secret, r) for v in node]
    if isinstance(node, str):
        return r.redact_text(node)
    return node


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
    return (m.params, m.schema) + ((m.description, m.output_schema, m.annotations, m.title) if m.form >= 3 else ())


def _shown(m: ToolManifest, r: Redactor) -> ToolManifest:
    params, schema = redact_manifest(m.params, m.schema, r)
    if m.form < 3:
        return replace(m, params=params, schema=schema)
    description, output_schema, annotations, title = _redact_contract(m, r)
    return replace(
        m,
        params=params,
        schema=schema,
        description=description,
        output_schema=output_schema,
        annotations=annotations,
        title=title,
    )


def _explain(old: ToolManifest, new: ToolManifest) -> list[tuple[str, str]]:
    """``(path, line)`` for each difference; the form-3 fields only when both manifests are form 3."""
    out: list[tuple[str, str]] = []
    if old.version != new.version:
        out.append(("version", f"version: {old.version} → {new.version}"))
    out += _changes("params", diff_values(_params_by_name(old.params), _params_by_name(new.params)))
    old_order = [p.get("name") for p in old.params if isinstance(p, dict)]
    new_order = [p.get("name") for p in new.params if isinstance(p, dict)]
    if old_order != new_order and sorted(map(str, old_order)) == sorted(map(str, new_order)):
        out.append(("params order", f"params order: {old_order} → {new_order}"))
    out += _changes("schema", diff_values(old.schema, new.schema))
    if old.form >= 3 and new.form >= 3:
        out += [("description", line) for line in _text_change("description", old.description, new.description)]
        if old.title != new.title:
            out.append(("title", f"title: {_shown_text(old.title)} → {_shown_text(new.title)}"))
        out += _dict_change("output_schema", old.output_schema, new.output_schema)
        out += _annotation_changes(old.annotations, new.annotations)
    if old.name != new.name:
        out.append(("name", f"name: {old.name} → {new.name}"))
    return out


def _changes(prefix: str, changes: list[Change]) -> list[tuple[str, str]]:
    return [
        (_joined(prefix, c.path), line) for c, line in zip(changes, format_changes(changes, prefix=prefix), strict=True)
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


def _annotation_changes(old: dict[str, Any] | None, new: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Annotation changes, a flip that lets the tool do more (by MCP's hints) flagged as such."""
    if old is None or new is None:
        if (old is None) == (new is None):
            return []
        if not (old or new):  # null against {}: no hint moved
            return _changes("annotations", [Change("", old, new)])
    a, b = old or {}, new or {}
    out = []
    for c, line in zip(changes := diff_values(a, b), format_changes(changes, prefix="annotations"), strict=True):
        widen = _WIDENS.get(c.path)
        if widen is not None and a.get(c.path, widen) is not widen and b.get(c.path, widen) is widen:
            line += _WIDENS_NOTE
        out.append((_joined("annotations", c.path), line))
    return out


def _joined(prefix: str, path: str) -> str:
    return prefix + ("" if path.startswith("[") or not path else ".") + path


def _params_by_name(params: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return {str(p.get("name")): {k: v for k, v in p.items() if k != "name"} for p in params if isinstance(p, dict)}
