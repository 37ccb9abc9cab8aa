"""One ``Contract`` value for what a tool declares, each field's part declared once, next to the field.

Every field of ``Contract`` must be covered by each place that needs it: the manifest and its fingerprint,
the tool line, redaction, the explanation of a change, ``[fingerprint] ignore``, the registered ``Tool``
and the keyword APIs. These tests walk the declarations, so a field added to ``Contract`` is checked by
them without a change here.
"""

from __future__ import annotations

import inspect
from dataclasses import fields
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Tape, TapeError, ToolRegistry
from tapetui.core.contract import ignore_rules
from tapetui.core.declared import CONTRACT, Contract, Declared
from tapetui.core.fingerprint import (
    CONTRACT_FIELDS,
    LATEST_FORM,
    MANIFEST_FIELDS,
    ToolManifest,
    content_fingerprint,
    explain_manifest_change,
    in_form,
    redact_manifest_line,
    without_ignored,
)
from tapetui.core.registry import Tool, make_contract

SECRET = "sk-abcdefghijklmnopqrstuvwx0123"
SAMPLE_TAPES = Path(__file__).resolve().parent.parent / "sample_tapes"
FINGERPRINTED = [k for k, d in CONTRACT.items() if d.form is not None]
LATER = [k for k, d in CONTRACT.items() if d.form is not None and d.form > 1]  # what form 3 adds


def _value(d: Declared, text: str) -> Any:
    """A value of ``d``'s kind carrying ``text``."""
    return {
        "name": text,
        "version": text,
        "text": f"does {text}",
        "schema": {"type": "object", "properties": {"q": {"type": "string", "description": text}}},
        "object": {"note": text},
    }[d.kind]


def _full() -> Contract:
    return Contract(
        "search",
        "2",
        description="Search the web.",
        schema={"type": "object", "properties": {"q": {"type": "string"}}},
        output_schema={"type": "array"},
        annotations={"readOnlyHint": True},
        title="Search",
        side_effect=True,
        ttl=60,
        returns=list,
    )


def test_every_field_is_declared_and_the_declarations_agree() -> None:
    assert list(CONTRACT) == [f.name for f in fields(Contract)]
    orders = [d.order for d in CONTRACT.values() if d.form is not None]
    assert len(set(orders)) == len(orders) and 2 not in orders  # one place each in an explanation; params at 2
    for k, d in CONTRACT.items():
        if d.seen:  # what the model sees, the latest fingerprint covers
            assert d.form is not None and d.form <= LATEST_FORM, k
        if d.form is not None:
            assert d.shown is not None, f"{k}: a fingerprinted field needs a way to be shown in an explanation"
        if d.form == 1:
            assert d.kind in ("name", "version", "schema"), k  # form 1 is frozen: name, version, schema
    with pytest.raises(ValueError):
        Declared("text", seen=True)  # seen, but no fingerprint covers it


def test_the_manifest_and_the_tool_have_a_field_for_each_declared_one() -> None:
    manifest = {f.name for f in fields(ToolManifest)}
    assert manifest == {"params", "fingerprint", "form", *FINGERPRINTED}
    assert ("name", "version", "params", "schema", *CONTRACT_FIELDS) == MANIFEST_FIELDS
    assert CONTRACT_FIELDS == ("description", "output_schema", "annotations", "title") == tuple(LATER)
    assert set(CONTRACT) <= {f.name for f in fields(Tool)}


@pytest.mark.parametrize(
    "api",
    [make_contract, ToolRegistry.contract, ToolRegistry.register, ToolRegistry.tool, Tape.contract],
    ids=lambda f: f.__qualname__,
)
def test_each_keyword_api_takes_contract_fields_with_their_defaults(api: Any) -> None:
    defaults = {f.name: f.default for f in fields(Contract)}
    for p in inspect.signature(api).parameters.values():
        if p.kind is not inspect.Parameter.KEYWORD_ONLY:
            continue
        assert p.name in defaults, f"{api.__qualname__}: {p.name} is not a field of Contract"
        if not (api in (ToolRegistry.register, ToolRegistry.tool) and p.name in ("name", "returns")):
            assert p.default == defaults[p.name], p.name  # register's come from the function


@pytest.mark.parametrize("field", LATER)
def test_a_field_form_3_adds_is_hashed_written_read_redacted_explained_and_ignorable(field: str) -> None:
    d = CONTRACT[field]
    base = make_contract("t", schema={"type": "object"})
    tool = make_contract("t", schema={"type": "object"}, **{field: _value(d, SECRET)})
    m = tool.manifest
    assert m.fingerprint != base.fingerprint  # form 3 covers it
    assert tool.manifest_for(1).fingerprint == base.manifest_for(1).fingerprint  # forms 1 and 2 do not
    assert tool.manifest_for(2).fingerprint == base.manifest_for(2).fingerprint

    rec = m.to_record(False)
    assert field in rec and SECRET not in orjson.dumps(rec).decode()  # written, redacted by its rule
    back = ToolManifest.from_record(rec)
    assert back == m and content_fingerprint(back) == m.fingerprint
    raw_line = orjson.dumps({**rec, field: _value(d, SECRET)})
    assert SECRET not in redact_manifest_line(raw_line).decode()

    lines = explain_manifest_change(base.manifest, m)
    assert lines and all(line.startswith(field) for line in lines), lines
    assert SECRET not in " ".join(lines)
    rules = ignore_rules((field,))
    assert without_ignored(base.manifest, rules).fingerprint == without_ignored(m, rules).fingerprint


@pytest.mark.parametrize("field", ["name", "version", "schema"])
def test_a_form_1_field_is_in_every_form_and_explained(field: str) -> None:
    d = CONTRACT[field]
    a = make_contract("t", schema={"type": "object"})
    b = make_contract(**{"name": "t", "schema": {"type": "object"}, field: _value(d, "other")})
    for form in (1, 2, 3):
        old, new = a.manifest_for(form), b.manifest_for(form)
        assert old.fingerprint != new.fingerprint
        assert any(line.startswith(field) for line in explain_manifest_change(old, new)), form


def test_fields_no_fingerprint_covers_are_the_tools_but_not_its_manifests() -> None:
    full = _full()
    plain = Contract(**{k: getattr(full, k) for k in FINGERPRINTED})  # the rest at their defaults
    tool, other = make_contract(full), make_contract(plain)
    assert tool.fingerprint == other.fingerprint and tool.raw_manifest == other.raw_manifest
    assert (tool.side_effect, tool.ttl, tool.returns) == (True, 60.0, list)
    assert tool.manifest.to_record(tool.side_effect)["side_effect"] is True  # written on the line, not hashed


def test_a_contract_passed_whole_is_the_keywords_tool() -> None:
    c = _full()
    by_value = make_contract(c)
    by_keywords = make_contract(
        "search",
        version="2",
        description="Search the web.",
        schema={"type": "object", "properties": {"q": {"type": "string"}}},
        output_schema={"type": "array"},
        annotations={"readOnlyHint": True},
        title="Search",
        side_effect=True,
        ttl=60,
        returns=list,
    )
    assert by_value == by_keywords
    assert by_value.contract == Contract(**{**{k: getattr(c, k) for k in CONTRACT}, "ttl": 60.0})
    assert make_contract(by_value.contract) == by_value  # a tool's contract makes the same tool
    assert by_value.fingerprint == "2a8f3434e842e149"  # pinned (as before Contract): form 3, every field

    reg = ToolRegistry()
    assert reg.contract(c) == by_value and reg["search"] is not None
    with pytest.raises(TapeError, match="already registered"):
        reg.contract(c)
    with pytest.raises(TapeError, match="not both .got title, ttl"):
        make_contract(c, title="Other", ttl=5)
    assert make_contract(c, version="0", schema=None) == by_value  # defaults are not "given"


def test_a_contract_is_checked_when_a_tool_is_made_of_it() -> None:
    assert make_contract(Contract("t", 3)).version == "3"  # as before: str(version)
    with pytest.raises(TapeError, match="schema must be a dict"):
        make_contract(Contract("t", schema=[1]))  # type: ignore[arg-type]  (a wrong value, on purpose)
    with pytest.raises(TapeError, match="a tool contract needs a name"):
        make_contract(Contract(""))


def test_the_identity_tells_definitions_apart_as_json_does() -> None:
    assert Contract("t", schema={"a": 1}).identity() == Contract("t", schema={"a": 1}).identity()
    assert Contract("t", schema={"a": 1}).identity() != Contract("t", schema={"a": True}).identity()
    assert Contract("t", returns=int).identity() != Contract("t", returns=float).identity()
    with pytest.raises(TypeError):
        Contract("t", schema={"a": {1, 2}}).identity()


def test_tape_contract_caches_one_definition_and_redefines_on_any_field(tmp_path: Path) -> None:
    with Tape(tmp_path / "s.jsonl", "record") as tape:
        first = tape.contract("t", schema={"type": "object"}, ttl=5)
        assert tape.contract("t", schema={"type": "object"}, ttl=5) is first
        for field in CONTRACT:
            if field == "name":
                continue
            given: dict[str, Any] = {"schema": {"type": "object"}, "ttl": 5, field: _changed(field)}
            changed = tape.contract("t", **given)
            assert changed is not first and getattr(changed, field) != getattr(first, field), field
            first = tape.contract("t", schema={"type": "object"}, ttl=5)


def _changed(field: str) -> Any:
    d = CONTRACT[field]
    if d.kind == "flag":
        return True
    if d.kind == "seconds":
        return 7
    if d.kind == "type":
        return int
    return _value(d, "x")


def test_the_sample_tapes_tool_lines_keep_their_fingerprints() -> None:
    seen = 0
    for path in sorted(SAMPLE_TAPES.glob("*.jsonl")):
        for line in path.read_bytes().splitlines():
            rec = orjson.loads(line)
            if rec.get("type") != "tool":
                continue
            m = ToolManifest.from_record(rec)
            assert content_fingerprint(m) == m.fingerprint, (path.name, rec["name"])
            if m.form in (2, 3):  # a tool line holds exactly what was hashed
                assert in_form(m, m.form) == m
            seen += 1
    assert seen


def test_an_unknown_contract_keyword_names_the_field_not_an_internal_class(tmp_path: Path) -> None:
    from tapetui import InvalidValue, Tape, ToolRegistry

    with Tape(tmp_path / "t.jsonl", "record", run_log=False) as tape:
        for declare in (ToolRegistry().contract, tape.contract):
            with pytest.raises(InvalidValue, match="has no field 'bogus'") as e:
                declare("x", bogus=1)  # type: ignore[call-arg]
            assert isinstance(e.value, TypeError) and "Contract.__init__" not in str(e.value)
