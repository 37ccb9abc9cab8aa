from __future__ import annotations

import re
from typing import Any

import pytest

from tapetui import call_key, canon, tool_fingerprint
from tapetui.core.fingerprint import explain_manifest_change, tool_manifest


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
        "t", {"q": 1, "api_key": "sk-new-bbbbbbbbbbbbbbbbbbbb"}
    )


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


# ---- the replay hot path's one-pass form must give exactly the two-pass key ---------------
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tapetui.core.canon import canonical_json  # noqa: E402
from tapetui.core.redact import DEFAULT_REDACTOR, Redactor  # noqa: E402

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
    | st.sampled_from(["  padded  ", "Bearer abcdefgh12345678", "\u3000x", "sk-" + "a" * 20])
)
_keys = (
    st.text(max_size=8) | st.sampled_from(["token", "API_KEY", "password", "q", "x-api-key", "Cookie"]) | st.integers()
)
_values = st.recursive(
    _scalars,
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.tuples(kids, kids)
        | st.dictionaries(_keys, kids, max_size=4)
        | st.frozensets(st.integers(-(2**63), 2**63 - 1), max_size=3)
    ),
    max_leaves=25,
)


@given(args=_values, extra=st.booleans())
def test_one_pass_form_hashes_like_canon_of_redact(args: Any, extra: bool) -> None:
    r = Redactor(["x-*"], [r"secret\d+"]) if extra else DEFAULT_REDACTOR

    def outcome(fn: Any) -> Any:
        try:
            return canonical_json(fn())
        except TypeError as e:  # both forms refuse the same values the same way
            return type(e)

    assert outcome(lambda: r.canon_form(args)) == outcome(lambda: canon(r.redact(args)))


# ---- redaction's pre-check never hides a string a default pattern would redact ------------
from tapetui.core.redact import DEFAULT_PATTERNS  # noqa: E402
from tapetui.core.redactgates import GATES as _GATES  # noqa: E402
from tapetui.core.redactgates import PROBE as _PROBE  # noqa: E402
from tapetui.core.redactgates import PROBE_MIN as _PROBE_MIN  # noqa: E402
from tapetui.core.redactgates import fold as _fold  # noqa: E402
from tapetui.core.redactgates import may_hold_default_secret as _may_hold_default_secret  # noqa: E402

_PATTERNS = [re.compile(p) for p in DEFAULT_PATTERNS]


def _rule_may_match(i: int, text: str) -> bool:
    """Whether default rule ``i``'s gate admits ``text``, as ``Redactor`` reads its gate before running the rule."""
    exact, any_case, probe = _GATES[i]
    if any(n in text for n in exact):
        return True
    if any_case:
        return any(n in _fold(text) for n in any_case)
    return probe and len(text) >= _PROBE_MIN and _PROBE.search(text) is not None


@pytest.mark.parametrize("i", range(len(DEFAULT_PATTERNS)))
def test_pre_check_admits_every_match_of_each_default_pattern(i: int) -> None:
    pattern = DEFAULT_PATTERNS[i].replace("(?=@)", "@")  # hypothesis cannot generate from a lookahead

    @given(st.from_regex(pattern), st.text(max_size=5), st.text(max_size=5))
    def check(body: str, before: str, after: str) -> None:
        text = before + body + after
        if _PATTERNS[i].search(text):
            assert _may_hold_default_secret(text), text
            assert _rule_may_match(i, text), text  # the rule's own gate, which decides whether it runs

    check()


@given(
    st.text(alphabet=st.characters(codec="utf-8"), max_size=60)
    | st.builds(
        lambda a, b: a + b,
        st.sampled_from(
            [
                "PaſſWord=",
                "TO\u212aEN ",
                "apı_key:",
                "Bearer ",
                "Coo\u212aie: ",
                "AccountKey=",
                "&sig=",
                '"passwd": "',
                "Set-Cookie:",
                "SK0123456789abcdef0123456789abcdef",
                "N" + "a" * 24 + ".abcdef." + "b" * 27,
            ]
        ),
        st.text(max_size=30),
    )
)
def test_pre_check_admits_any_text_a_default_pattern_matches(text: str) -> None:
    if any(p.search(text) for p in _PATTERNS):
        assert _may_hold_default_secret(text)
    for i, p in enumerate(_PATTERNS):
        if p.search(text):
            assert _rule_may_match(i, text), (i, text)
