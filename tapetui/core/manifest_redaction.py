"""What fingerprint forms 2 and 3 redact in a manifest: its params, and each field of a tool's contract by
the rule the field declares (:mod:`tapetui.core.declared`). :mod:`tapetui.core.fingerprint` says when.

A schema keeps its structure (a property named ``password`` keeps ``{"type": "string", "minLength": 8}``);
only its instance values (``default``, ``example``, ``examples``, ``const``) under a secret-looking name
are blanked, and every string goes through the value rules (``sk-…``, ``Bearer …``).
"""

from __future__ import annotations

from typing import Any

from tapetui.core.declared import Declared
from tapetui.core.errors import TooDeep
from tapetui.core.redact import REDACTED, Redactor

__all__ = ["redact_params", "redact_value"]

# Schema keywords whose values are instances, not structure: redacted when secret-looking.
_VALUE_KEYWORDS = frozenset({"default", "example", "examples", "const"})


def redact_value(d: Declared, value: Any, r: Redactor) -> Any:
    """A field's value as forms 2 and 3 hold it, redacted by the field's declared rule (``d.redact``);
    None stays None.

    Raises:
        RecursionError: a value nested deeper than Python walks (the caller says what it was).
    """
    if value is None or d.redact == "none":
        return value
    if d.redact == "text":
        return r.redact_text(value)
    if d.redact == "schema":
        out = _schema(value, False, r)
        return out if isinstance(out, dict) else value
    return r.redact(value)


def redact_params(params: tuple[dict[str, Any], ...], r: Redactor) -> tuple[dict[str, Any], ...]:
    """A manifest's params (a function's signature: not a field of a Contract) with secret-looking values
    redacted: a default is blanked when the parameter is named like a secret, every other value goes
    through the value rules.

    Raises:
        TooDeep: params nested deeper than Python walks.
    """
    out: list[Any] = []
    try:
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
    except RecursionError:
        raise TooDeep("a tool manifest") from None
    return tuple(out)


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
