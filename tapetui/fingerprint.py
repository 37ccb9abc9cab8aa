"""Tool fingerprints: a hash of a tool's contract, and the manifest it is made from."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from tapetui.canon import canonical_json

__all__ = ["ToolManifest", "explain_manifest_change", "tool_fingerprint", "tool_manifest"]


@dataclass(frozen=True, slots=True)
class ToolManifest:
    """The inputs of a fingerprint, kept so a reader can say *why* two fingerprints differ."""

    name: str
    version: str
    params: tuple[dict[str, Any], ...]
    schema: dict[str, Any]
    fingerprint: str

    def to_record(self, side_effect: bool) -> dict[str, Any]:
        return {
            "type": "tool",
            "name": self.name,
            "version": self.version,
            "fingerprint": self.fingerprint,
            "params": list(self.params),
            "schema": self.schema,
            "side_effect": side_effect,
        }

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ToolManifest:
        return cls(
            name=str(rec.get("name", "")),
            version=str(rec.get("version", "")),
            params=tuple(rec.get("params") or ()),
            schema=rec.get("schema") or {},
            fingerprint=str(rec.get("fingerprint", "")),
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


def tool_manifest(fn: Callable[..., Any], schema: dict[str, Any], version: str, name: str | None = None) -> ToolManifest:
    """Build the manifest of a tool: name, version, ordered params, schema and fingerprint."""
    tool_name = name or fn.__name__
    params = _params(fn)
    # Round-trip the schema through canonical JSON: the manifest holds exactly what was hashed.
    schema_c = orjson.loads(canonical_json(schema))
    return ToolManifest(tool_name, str(version), params, schema_c, _hash(tool_name, params, schema_c, str(version)))


def tool_fingerprint(fn: Callable[..., Any], schema: dict[str, Any], version: str, name: str | None = None) -> str:
    """16 lower-case hex chars: sha256 of the canonical signature, canonical schema and version."""
    return tool_manifest(fn, schema, version, name).fingerprint


def explain_manifest_change(old: ToolManifest | None, new: ToolManifest | None) -> list[str]:
    """Say in lines such as ``schema.properties.max_words.maximum: 500 → 200`` why fingerprints differ."""
    from tapetui.jsondiff import diff_values, format_changes

    if old is None or new is None:
        return ["(no manifest on the tape for one side; cannot explain the change)"]
    lines: list[str] = []
    if old.version != new.version:
        lines.append(f"version: {old.version} → {new.version}")
    lines += format_changes(diff_values(_params_by_name(old.params), _params_by_name(new.params)), prefix="params")
    old_order = [p.get("name") for p in old.params]
    new_order = [p.get("name") for p in new.params]
    if old_order != new_order and sorted(map(str, old_order)) == sorted(map(str, new_order)):
        lines.append(f"params order: {old_order} → {new_order}")
    lines += format_changes(diff_values(old.schema, new.schema), prefix="schema")
    if old.name != new.name:
        lines.append(f"name: {old.name} → {new.name}")
    return lines


def _params_by_name(params: tuple[dict[str, Any], ...]) -> dict[str, Any]:
    return {str(p.get("name")): {k: v for k, v in p.items() if k != "name"} for p in params}
