from __future__ import annotations

import re
from typing import Any

import pytest

from tapetui import call_key, canon, tool_fingerprint
from tapetui.fingerprint import explain_manifest_change, tool_manifest


def test_key_ignores_key_order_and_surrounding_whitespace() -> None:
    a = call_key("t", {"q": "hello", "n": 1})
    assert a == call_key("t", {"n": 1, "q": "  hello\n"})
    assert a == call_key("t", {"n": 1, "q": "\u3000hello\u3000"})  # ideographic space


def test_key_keeps_types_distinct() -> None:
    assert call_key("t", {"n": 3}) != call_key("t", {"n": "3"})
    assert call_key("t", {"n": True}) != call_key("t", {"n": 1})


def test_none_values_dropped_and_floats_rounded() -> None:
    assert canon({"a": None, "b": {"c": None, "d": 1}}) == {"b": {"d": 1}}
    assert canon([None, 1]) == [None, 1]  # only dict values are dropped
    assert call_key("t", {"x": 0.1 + 0.2}) == call_key("t", {"x": 0.3})
    assert call_key("t", {"x": 0.3000001}) == call_key("t", {"x": 0.3})  # 6 places
    assert call_key("t", {"x": 0.300001}) != call_key("t", {"x": 0.3})
    assert list(canon({"b": 1, "a": 2})) == ["a", "b"]


def test_key_shape_and_tool_prefix() -> None:
    key = call_key("summarize", {"text": "x"})
    assert re.fullmatch(r"summarize:[0-9a-f]{12}", key)
    assert call_key("other", {"text": "x"}).split(":")[1] == key.split(":")[1]


def test_key_is_computed_on_redacted_args() -> None:
    assert call_key("t", {"q": 1, "api_key": "sk-old-aaaaaaaaaaaaaaaaaaaa"}) == call_key(
        "t", {"q": 1, "api_key": "sk-new-bbbbbbbbbbbbbbbbbbbb"})


def fn(text: str, max_words: int = 120) -> str:
    return text


SCHEMA = {"type": "object", "properties": {"max_words": {"type": "integer", "maximum": 500}}}


def test_fingerprint_stable_across_schema_formatting() -> None:
    fp = tool_fingerprint(fn, SCHEMA, "1.0")
    assert re.fullmatch(r"[0-9a-f]{16}", fp)
    reordered = {"properties": {"max_words": {"maximum": 500, "type": "integer"}}, "type": "object"}
    assert tool_fingerprint(fn, reordered, "1.0") == fp
    import json

    pretty = json.loads(json.dumps(SCHEMA, indent=4))
    assert tool_fingerprint(fn, pretty, "1.0") == fp


def test_fingerprint_changes_with_contract() -> None:
    fp = tool_fingerprint(fn, SCHEMA, "1.0")
    assert tool_fingerprint(fn, SCHEMA, "1.1") != fp

    def flipped(text: str, max_words: int = 80) -> str:
        return text

    def annotated(text: bytes, max_words: int = 120) -> str:
        return ""

    assert tool_fingerprint(flipped, SCHEMA, "1.0", name="fn") != fp
    assert tool_fingerprint(annotated, SCHEMA, "1.0", name="fn") != fp
    assert tool_fingerprint(fn, {**SCHEMA, "required": ["text"]}, "1.0") != fp


def test_manifest_explains_change() -> None:
    old = tool_manifest(fn, SCHEMA, "1.0")
    new_schema: dict[str, Any] = {"type": "object", "properties": {"max_words": {"type": "integer", "maximum": 200}}}
    new = tool_manifest(fn, new_schema, "1.1")
    lines = explain_manifest_change(old, new)
    assert "version: 1.0 → 1.1" in lines
    assert "schema.properties.max_words.maximum  500 → 200" in lines


def test_canon_rejects_non_json() -> None:
    with pytest.raises(TypeError):
        canon({"x": object()})
