"""Tool fingerprints: a hash of a tool's contract, and the manifest it is made from.

Fingerprint forms (a tool line's ``form`` field; a line without one is form 1):

* **form 1** hashes the manifest as the tool declares it, parameter defaults and schema
  ``default``/``example``/``examples``/``const`` values included, verbatim.
* **form 2** hashes the manifest with secret-looking values redacted (see
  :func:`redact_manifest`), and the tool line holds exactly what was hashed. Rotating a key
  that a tool takes as a default (``api_key=os.environ[...]``) is then not a contract change.
  A manifest with nothing secret-looking has the same fingerprint in both forms.

New recordings write form 2; a tape is verified in the form it was recorded with.
:func:`tool_fingerprint` (public API) keeps returning form 1.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import orjson

from tapetui.core.canon import canonical_json
from tapetui.core.changes import format_changes
from tapetui.core.errors import TooDeep
from tapetui.core.jsondiff import diff_values
from tapetui.core.redact import DEFAULT_REDACTOR, REDACTED, Redactor

__all__ = [
    "FORMS",
    "LATEST_FORM",
    "ToolManifest",
    "explain_manifest_change",
    "in_form",
    "redact_manifest",
    "redact_manifest_line",
    "tool_fingerprint",
    "tool_manifest",
]

FORMS = (1, 2)
LATEST_FORM = 2
# Schema keywords whose values are instances, not structure: redacted when secret-looking.
_VALUE_KEYWORDS = frozenset({"default", "example", "examples", "const"})


@dataclass(frozen=True, slots=True)
class ToolManifest:
    """The inputs of a fingerprint, kept so a reader can say *why* two fingerprints differ."""

    name: str
    version: str
    params: tuple[dict[str, Any], ...]
    schema: dict[str, Any]
    fingerprint: str
    form: int = 1

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
        return rec

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ToolManifest:
        form = rec.get("form", 1)
        params, schema = rec.get("params"), rec.get("schema")
        return cls(
            name=str(rec.get("name", "")),
            version=str(rec.get("version", "")),
            params=tuple(params) if isinstance(params, list) else (),
            schema=schema if isinstance(schema, dict) else {},
            fingerprint=str(rec.get("fingerprint", "")),
            form=form if type(form) is int else 0,  # 0: not a form this version knows (the reader says so)
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
    signature = canonical_json({"name": name, "params": list(params)})
    digest = hashlib.sha256()
    for part in (signature, canonical_json(schema), version.encode()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:16]


def tool_manifest(
    fn: Callable[..., Any],
    schema: dict[str, Any],
    version: str,
    name: str | None = None,
    *,
    form: int = 1,
    redactor: Redactor | None = None,
) -> ToolManifest:
    """Build the manifest of a tool: name, version, ordered params, schema and fingerprint.

    Args:
        form: 1 (values verbatim) or 2 (secret-looking values redacted, by ``redactor`` or the
            default rules); see the module doc.
    """
    tool_name = name or fn.__name__
    params = _params(fn)
    # Round-trip the schema through canonical JSON: the manifest holds exactly what was hashed.
    schema_c = orjson.loads(canonical_json(schema))
    raw = ToolManifest(tool_name, str(version), params, schema_c, _hash(tool_name, params, schema_c, str(version)))
    return raw if form == 1 else in_form(raw, form, redactor)


def tool_fingerprint(fn: Callable[..., Any], schema: dict[str, Any], version: str, name: str | None = None) -> str:
    """16 lower-case hex chars: sha256 of the canonical signature, canonical schema and version (form 1)."""
    return tool_manifest(fn, schema, version, name).fingerprint


def in_form(manifest: ToolManifest, form: int, redactor: Redactor | None = None) -> ToolManifest:
    """``manifest`` as a form-``form`` manifest, its fingerprint computed from its content.

    Form 2 can be made from any manifest (redacting is idempotent); form 1 only from a form-1
    manifest (what a form-2 manifest redacted is gone).

    Raises:
        ValueError: a form this version does not know, or form 1 from a form-2 manifest.
    """
    if form not in FORMS or (form == 1 and manifest.form != 1):
        raise ValueError(f"cannot make a form-{form} fingerprint from a form-{manifest.form} manifest")
    if form == 1:
        return manifest
    params, schema = redact_manifest(manifest.params, manifest.schema, redactor)
    fp = _hash(manifest.name, params, schema, manifest.version)
    if form == manifest.form and fp == manifest.fingerprint and params == manifest.params and schema == manifest.schema:
        return manifest
    return replace(manifest, params=params, schema=schema, fingerprint=fp, form=form)


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
    """A tool line with secret-looking values redacted (as form 2 would), its fingerprint and form kept.

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
        params, schema = redact_manifest(tuple(params_in), schema_in, redactor)
    except (orjson.JSONDecodeError, TooDeep, ValueError):
        return line
    if list(params) == params_in and schema == schema_in:
        return line
    rec["params"], rec["schema"] = list(params), schema
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
    """Say in lines such as ``schema.properties.max_words.maximum: 500 → 200`` why fingerprints differ.

    No secret-looking value is shown: both manifests are compared as form 2 shows them; a
    change that only a secret-looking value makes is named by its path, its values redacted
    (``params.api_key.default  [REDACTED] → [REDACTED] (a secret-looking value changed)``).
    """
    if old is None or new is None:
        return ["(no manifest on the tape for one side; cannot explain the change)"]
    r = redactor or DEFAULT_REDACTOR
    old_r, new_r = _shown(old, r), _shown(new, r)
    lines = _explain(old_r, new_r)
    if old.form == new.form and (old.params != new.params or old.schema != new.schema):  # across forms: as form 2
        shown = {line.split("  ", 1)[0] for line in lines}
        for line in _explain(old, new, paths_only=True):
            path = r.redact_text(line)
            if path not in shown:
                lines.append(f"{path}  {REDACTED} → {REDACTED} (a secret-looking value changed)")
                shown.add(path)
    if old.form != new.form:
        lines.append(f"fingerprint form: {old.form} → {new.form}")
    return lines


def _shown(m: ToolManifest, r: Redactor) -> ToolManifest:
    params, schema = redact_manifest(m.params, m.schema, r)
    return replace(m, params=params, schema=schema)


def _explain(old: ToolManifest, new: ToolManifest, paths_only: bool = False) -> list[str]:
    lines: list[str] = []
    if old.version != new.version and not paths_only:
        lines.append(f"version: {old.version} → {new.version}")
    params = diff_values(_params_by_name(old.params), _params_by_name(new.params))
    schema = diff_values(old.schema, new.schema)
    if paths_only:
        return [_joined("params", c.path) for c in params] + [_joined("schema", c.path) for c in schema]
    lines += format_changes(params, prefix="params")
    old_order = [p.get("name") for p in old.params if isinstance(p, dict)]
    new_order = [p.get("name") for p in new.params if isinstance(p, dict)]
    if old_order != new_order and sorted(map(str, old_order)) == sorted(map(str, new_order)):
        lines.append(f"params order: {old_order} → {new_order}")
    lines += format_changes(schema, prefix="schema")
    if old.name != new.name:
        lines.append(f"name: {old.name} → {new.name}")
    return lines


def _joined(prefix: str, path: str) -> str:
    return prefix + ("" if path.startswith("[") or not path else ".") + path


def _params_by_name(params: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return {str(p.get("name")): {k: v for k, v in p.items() if k != "name"} for p in params if isinstance(p, dict)}
