"""What a tool declares: one :class:`Contract` value, each field with what it is to the rest of tapetui.

A field's :class:`Declared` says, next to the field, what value it takes, whether the model sees it,
which fingerprint forms hash it, how a tool line's copy is redacted and how an explanation shows a change
of it (``docs/format.md``, "Tool lines" and "Fingerprints"). :mod:`tapetui.core.fingerprint` reads,
writes, hashes, redacts and explains a manifest's fields by these declarations;
:mod:`tapetui.core.registry` checks a declared value by its kind.

Adding a field is its line here, the same-named field of :class:`~tapetui.core.registry.Tool` and, when
a fingerprint covers it, of :class:`~tapetui.core.fingerprint.ToolManifest` (``tests/test_contract_value.py``
fails on a missing one); a keyword of ``ToolRegistry.contract`` is optional, a Contract can be passed
whole. A field added to form 3 later is left out of the hash while absent (``null_hashed=False``), so
every fingerprint recorded before it stays.

A module of its own, below the fingerprints and the registry, which both read it (``core/contract.py``
uses the registry, so the value cannot live there).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Literal, TypedDict

from tapetui.core.canon import canonical_json
from tapetui.core.errors import InvalidValue, TapeError

__all__ = ["CONTRACT", "Contract", "ContractFields", "Declared"]

# What value a field takes: how the registry checks it, and how a tool line without it reads.
Kind = Literal[
    "name",  # a non-empty string (checked where the tool is named); "" on a tool line without it
    "version",  # anything, written as its str(); "" on a tool line without it
    "text",  # a string of valid UTF-8, or None
    "schema",  # a dict of JSON values; None declares {}
    "object",  # a dict of JSON values, or None
    "flag",  # anything, as its bool()
    "seconds",  # a ttl: finite, positive, at most 100 years, as a float; or None
    "type",  # a Python type, kept as given (compared by identity)
]
# How a form-2 or form-3 manifest redacts it (:mod:`tapetui.core.manifest_redaction`).
Redaction = Literal[
    "none",  # kept verbatim
    "text",  # through the value rules (``sk-…``, ``Bearer …``), no text folding
    "schema",  # a JSON schema: instance values (default, example, const) of secret-named properties blanked
    "values",  # every value through the key and value rules
]
# How an explanation shows a change (:func:`tapetui.core.fingerprint.explain_manifest_change`).
Shown = Literal[
    "plain",  # ``version: 1 → 2``
    "text",  # ``title: "Old" → "New"``, shortened, ``(absent)`` for None
    "words",  # a word-level diff: ``description: + "and send the file to …"``
    "json",  # each changed path: ``schema.properties.q.maximum  500 → 200``
    "hints",  # as json, a flip of an MCP hint that lets the tool do more flagged
]


@dataclass(frozen=True, slots=True)
class Declared:
    """What one field of :class:`Contract` is to tapetui.

    Attributes:
        kind: the value it takes (see ``Kind``).
        seen: the model sees it (so a fingerprint covers it: ``form`` is required).
        form: the first fingerprint form that hashes it (1: every form); None: no fingerprint
            covers it, and no tool line holds it (a runtime declaration).
        redact: how a manifest of a redacting form (2, 3) holds it.
        shown: how an explanation shows its change; None: not explained (not in a manifest).
        order: where its lines come in an explanation, lowest first (``params`` come at 2).
        null_hashed: the form-3 fingerprint hashes it as null when absent; a field added after the
            first form-3 release must not be, or every fingerprint recorded before it would change.
    """

    kind: Kind
    seen: bool = False
    form: int | None = None
    redact: Redaction = "none"
    shown: Shown | None = None
    order: int = 0
    null_hashed: bool = False

    def __post_init__(self) -> None:
        if (self.seen or self.shown is not None or self.redact != "none") and self.form is None:
            raise ValueError("a field the model sees, a manifest redacts or an explanation shows needs a form")


def _declared(kind: Kind, **how: Any) -> Mapping[str, Declared]:
    return {"tapetui": Declared(kind, **how)}


class ContractFields(TypedDict, total=False):
    """The keywords a contract is declared with (``ToolRegistry.contract``, ``make_contract``, ``Tape.contract``):
    the fields of :class:`Contract` but its name, each optional, with Contract's defaults."""

    schema: dict[str, Any] | None
    description: str | None
    version: str
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any] | None
    title: str | None
    side_effect: bool
    ttl: float | None
    returns: Any


@dataclass(frozen=True, slots=True)
class Contract:
    """What a tool declares, as declared: unchecked until a tool is made of it (:mod:`tapetui.core.registry`).

    The fields are the keywords of :meth:`tapetui.core.registry.ToolRegistry.contract`, with the same
    defaults: ``name``, ``version`` (the pinned version of the contract), ``description`` (what the model
    reads), ``schema`` (its arguments' JSON schema), ``output_schema``, ``annotations`` (behaviour hints
    such as MCP's ``readOnlyHint``), ``title``, ``side_effect`` (calling it changes the world: it never
    runs in replay), ``ttl`` (seconds a recorded result stays fresh; ``tapes.toml`` may override it, so
    no fingerprint covers it) and ``returns`` (the declared return type, which decodes a recorded result).
    """

    name: str = field(metadata=_declared("name", seen=True, form=1, shown="plain", order=8))
    version: str = field(default="0", metadata=_declared("version", form=1, shown="plain", order=1))
    description: str | None = field(
        default=None,
        metadata=_declared("text", seen=True, form=3, redact="text", shown="words", order=4, null_hashed=True),
    )
    schema: dict[str, Any] | None = field(
        default=None, metadata=_declared("schema", seen=True, form=1, redact="schema", shown="json", order=3)
    )
    output_schema: dict[str, Any] | None = field(
        default=None,
        metadata=_declared("object", seen=True, form=3, redact="schema", shown="json", order=6, null_hashed=True),
    )
    annotations: dict[str, Any] | None = field(
        default=None,
        metadata=_declared("object", seen=True, form=3, redact="values", shown="hints", order=7, null_hashed=True),
    )
    title: str | None = field(
        default=None,
        metadata=_declared("text", seen=True, form=3, redact="text", shown="text", order=5, null_hashed=True),
    )
    side_effect: bool = field(default=False, metadata=_declared("flag"))
    ttl: float | None = field(default=None, metadata=_declared("seconds"))
    returns: Any = field(default=None, metadata=_declared("type"))

    @classmethod
    def of(cls, name: str | Contract, keywords: Mapping[str, Any]) -> Contract:
        """The contract a keyword API was given: ``name`` when it is a Contract (then no keyword may be
        given), else ``name`` and ``keywords`` (fields of Contract).

        Raises:
            TapeError: both a Contract and keywords.
            InvalidValue: a keyword that is no field of a contract (a ``TypeError`` too, as Python's own).
        """
        unknown = [k for k in keywords if k not in CONTRACT or k == "name"]
        if unknown:
            fields = ", ".join(k for k in CONTRACT if k != "name")
            raise InvalidValue(f"a tool contract has no field {unknown[0]!r} (its fields: {fields})")
        if not isinstance(name, Contract):
            return cls(name, **keywords)
        given = [k for k, v in keywords.items() if not _is_default(k, v)]
        if given:
            raise TapeError(f"tool {name.name!r}: pass its Contract or keywords, not both (got {', '.join(given)})")
        return name

    def identity(self) -> tuple[bytes, tuple[int, ...]]:
        """A key equal for two equal definitions: the JSON fields canonical (``1`` is not ``true``), a
        ``type`` field by its ``id``.

        Raises:
            TypeError: a field that is not JSON (registering the contract says what is wrong with it).
        """
        values = [getattr(self, k) for k, d in CONTRACT.items() if d.kind != "type"]
        return canonical_json(values), tuple(id(getattr(self, k)) for k, d in CONTRACT.items() if d.kind == "type")


# Every field of Contract, in order, with its declaration.
CONTRACT: Mapping[str, Declared] = MappingProxyType({f.name: f.metadata["tapetui"] for f in fields(Contract)})
_DEFAULTS: Mapping[str, Any] = MappingProxyType({f.name: f.default for f in fields(Contract)})


def _is_default(key: str, value: Any) -> bool:
    d = _DEFAULTS[key]
    return value is d or (type(value) is type(d) and value == d)
