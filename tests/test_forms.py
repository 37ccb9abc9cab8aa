"""Fingerprint forms: form-1 tapes keep verifying as they always did; form 2 redacts secret-looking
defaults and examples, so rotating a key is not a contract change; no contract text leaks a secret."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Config, Tape, TapeError, ToolDriftError, ToolRegistry, tool_fingerprint
from tapetui.core.fingerprint import explain_manifest_change, in_form, redact_manifest, tool_manifest
from tapetui.core.runlog import read_run_log
from tapetui.core.store import candidate_path, runlog_path
from tapetui.core.tapefile import dump_line, read_index
from tapetui.review import compare
from tests import builders

KEY_1 = "sk-live-FormOneKey0001abcdefgh"
KEY_2 = "sk-live-RotatedKey0002abcdefgh"
PW = "schemaPw-0003"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string"},
        "password": {"type": "string", "minLength": 8, "default": PW, "examples": [PW + "x"]},
        "token_limit": {"type": "integer", "default": 1000},
    },
}


def _registry(key: str = KEY_1, version: str = "1", extra: bool = False) -> ToolRegistry:
    reg = ToolRegistry()
    if extra:

        def search(query: str, api_key: str = key, limit: int = 5) -> dict[str, Any]:
            return {"hits": [query]}
    else:

        def search(query: str, api_key: str = key) -> dict[str, Any]:  # type: ignore[misc]
            return {"hits": [query]}

    reg.register(search, schema=SCHEMA, version=version)
    return reg


def _form1_tape(path: Path, key: str = KEY_1) -> Path:
    """A tape as tapetui wrote it before forms: the manifest verbatim, the form-1 fingerprint."""
    tool = _registry(key)["search"]
    raw = tool.raw_manifest
    assert raw is not None and raw.form == 1
    lines = [
        dump_line({"type": "session", "v": 1, "created_at": "2026-01-01T00:00:00Z"}),
        dump_line(raw.to_record(False)),
    ]
    for seq, q in enumerate(("a", "b"), 1):
        args = {"query": q}
        lines.append(
            builders.call_line(seq=seq, tool="search", args=args, result={"hits": [q]}, fingerprint=raw.fingerprint)
        )
    path.write_bytes(b"".join(lines))
    assert "form" not in orjson.loads(lines[1]) and key.encode() in path.read_bytes()  # as old tapes are
    return path


def _replay(path: Path, reg: ToolRegistry) -> list[Any]:
    with Tape(path, "replay", reg, config=Config.for_dir(path.parent)) as t:
        return [t.call("search", {"query": "a"}), t.call("search", {"query": "b"})]


def test_tool_fingerprint_keeps_form_1_and_forms_agree_without_secrets() -> None:
    tool = _registry()["search"]
    assert tool_fingerprint(tool.fn, SCHEMA, "1", "search") == tool.raw_manifest.fingerprint  # public API: form 1
    assert tool.fingerprint == tool.manifest.fingerprint != tool.raw_manifest.fingerprint
    assert tool.manifest.form == 3 and tool.raw_manifest.form == 1  # new recordings: form 3

    def plain(query: str, limit: int = 5) -> None: ...

    m1 = tool_manifest(plain, {"type": "object"}, "1")
    assert in_form(m1, 2).fingerprint == m1.fingerprint  # nothing secret-looking: the same fingerprint


def test_form_2_redacts_values_and_keeps_the_schema_structure() -> None:
    m = _registry()["search"].manifest
    text = orjson.dumps(m.to_record(False)).decode()
    assert KEY_1 not in text and PW not in text
    params = {p["name"]: p for p in m.params}
    assert params["api_key"]["default"] == "[REDACTED]" and params["api_key"]["annotation"] == "str"
    prop = m.schema["properties"]["password"]
    assert prop == {"type": "string", "minLength": 8, "default": "[REDACTED]", "examples": ["[REDACTED]"]}
    assert m.schema["properties"]["token_limit"]["default"] == 1000  # a number under a key-like name stays
    # by value shape, whatever the name; objects by their keys; descriptions too
    params_r, schema_r = redact_manifest(
        ({"name": "endpoint", "default": "https://u:UrlPw0004@h/"}, {"name": "opts", "default": {"token": "T0005"}}),
        {"properties": {"m": {"description": "Bearer DescTok0006abc", "enum": ["sk-live-EnumKey0007abcdefgh"]}}},
    )
    assert "UrlPw0004" not in str(params_r) and "T0005" not in str(params_r)
    assert "DescTok0006abc" not in str(schema_r) and "EnumKey0007" not in str(schema_r)


def test_a_form_1_tape_verifies_as_before(tmp_path: Path) -> None:
    tape = _form1_tape(tmp_path / "old.jsonl")
    assert _replay(tape, _registry()) == [{"hits": ["a"]}, {"hits": ["b"]}]  # same contract: no drift
    with pytest.raises(ToolDriftError) as e:  # form 1 hashes the key verbatim: rotating it is drift, as before
        _replay(tape, _registry(KEY_2))
    msg = str(e.value)
    assert KEY_1 not in msg and KEY_2 not in msg
    assert "params.api_key.default  [REDACTED] → [REDACTED]" in msg and "form 1" in msg and "scrub" in msg
    assert e.value.live == _registry(KEY_2)["search"].raw_manifest.fingerprint  # compared in form 1
    log = runlog_path(tape).read_text()
    assert KEY_1 not in log and KEY_2 not in log and '"form":1' in log


def test_form_2_rotating_a_key_is_not_drift_but_a_contract_change_is(tmp_path: Path) -> None:
    tape = tmp_path / "new.jsonl"
    with Tape(tape, "record", _registry(), config=Config.for_dir(tmp_path)) as t:
        t.call("search", {"query": "a"})
        t.call("search", {"query": "b"})
    data = tape.read_bytes()
    assert KEY_1.encode() not in data and PW.encode() not in data
    tool_line = orjson.loads(next(x for x in data.splitlines() if b'"type":"tool"' in x))
    assert tool_line["form"] == 3  # the latest form; it redacts as form 2 does
    calls = [orjson.loads(x) for x in data.splitlines() if b'"type":"call"' in x]
    assert {c["fingerprint"] for c in calls} == {tool_line["fingerprint"]}  # call lines carry the form-2 fingerprint
    assert read_index(tape).fp_forms == {tool_line["fingerprint"]: 3}
    assert _replay(tape, _registry(KEY_2)) == [{"hits": ["a"]}, {"hits": ["b"]}]
    with pytest.raises(ToolDriftError) as e:
        _replay(tape, _registry(KEY_2, extra=True))
    assert "params.limit" in str(e.value) and KEY_2 not in str(e.value)


def test_an_unknown_form_is_an_error_naming_the_line(tmp_path: Path) -> None:
    tape = _form1_tape(tmp_path / "t.jsonl")
    lines = tape.read_bytes().splitlines(keepends=True)
    rec = orjson.loads(lines[1])
    rec["form"] = 9
    tape.write_bytes(lines[0] + dump_line(rec) + b"".join(lines[2:]))
    with pytest.raises(TapeError, match=r"t\.jsonl:3: search was recorded with fingerprint form 9"):
        _replay(tape, _registry())
    rec["form"] = "2"
    tape.write_bytes(lines[0] + dump_line(rec) + b"".join(lines[2:]))
    with pytest.raises(TapeError, match=r"t\.jsonl:2: tool manifest 'form' must be a positive integer"):
        read_index(tape)


def test_fill_over_a_form_1_golden_verifies_each_call_in_its_form(tmp_path: Path) -> None:
    tape = _form1_tape(tmp_path / "t.jsonl")
    reg = _registry()
    with Tape(tape, "fill", reg, config=Config.for_dir(tmp_path)) as t:
        t.call("search", {"query": "a"})  # hits, carried (form-1 fingerprint)
        t.call("search", {"query": "b"})
        t.call("search", {"query": "new"})  # a miss, run live (form-2 fingerprint)
    cand = candidate_path(tape)
    assert KEY_1.encode() not in cand.read_bytes()  # the carried tool line is redacted too
    with Tape(cand, "replay", reg, config=Config.for_dir(tmp_path)) as t:
        assert t.call("search", {"query": "a"}) == {"hits": ["a"]}
        assert t.call("search", {"query": "b"}) == {"hits": ["b"]}
        assert t.call("search", {"query": "new"}) == {"hits": ["new"]}
    idx = read_index(cand)
    assert len(set(idx.fingerprints)) == 2 and len(idx.fp_forms) == 1  # one call in each form
    cmp = compare(tape, cand, Config.for_dir(tmp_path))
    assert not cmp.contracts, cmp.contracts  # form 1 and form 2 of one contract: compared in form 2


def test_compare_across_forms_ignores_a_rotated_key_but_names_a_change(tmp_path: Path) -> None:
    cfg = Config.for_dir(tmp_path)
    golden = _form1_tape(tmp_path / "g.jsonl")
    for reg, contract_changed in ((_registry(KEY_2), False), (_registry(KEY_2, version="2"), True)):
        cand = candidate_path(golden)
        cand.unlink(missing_ok=True)
        with Tape(golden, "record", reg, config=cfg) as t:
            t.call("search", {"query": "a"})
            t.call("search", {"query": "b"})
        cmp = compare(golden, cand, cfg)
        assert bool(cmp.contracts) is contract_changed
        text = "\n".join(cmp.lines()) + orjson.dumps(cmp.to_json()).decode()
        assert KEY_1 not in text and KEY_2 not in text
        if contract_changed:
            assert "version: 1 → 2" in text and "fingerprint form: 1 → 3" in text


def test_explanations_never_show_a_secret_looking_value() -> None:
    old = _registry(KEY_1)["search"].raw_manifest
    new = _registry(KEY_2, extra=True)["search"].raw_manifest
    lines = explain_manifest_change(old, new)
    assert not [x for x in lines if KEY_1 in x or KEY_2 in x], lines
    assert any(x.startswith("params.limit") for x in lines)
    assert "params.api_key.default  [REDACTED] → [REDACTED] (a secret-looking value changed)" in lines


def test_configured_redact_keys_reach_the_tool_line(tmp_path: Path) -> None:
    from dataclasses import replace

    reg = ToolRegistry()

    @reg.tool(version="1")
    def fetch(q: str, tenant_ref: str = "TenantRef-0008") -> str:
        return q

    cfg = replace(Config.for_dir(tmp_path), redact_keys=("tenant_ref",))
    with Tape(tmp_path / "t.jsonl", "record", reg, config=cfg) as t:
        t.call("fetch", {"q": "x"})
    assert b"TenantRef-0008" not in (tmp_path / "t.jsonl").read_bytes()
    with Tape(tmp_path / "t.jsonl", "replay", reg, config=cfg) as t:  # verified in form 2 under the same rules
        assert t.call("fetch", {"q": "x"}) == "x"
    assert not [e for e in read_run_log(runlog_path(tmp_path / "t.jsonl")) if e["event"] == "fingerprint"]


@pytest.mark.parametrize(
    "bad",
    [
        {"params": 5, "schema": "x"},
        {"params": [1, "x", None], "schema": []},
        {"schema": {"properties": {"p": {"default": {"token": "HostileTok0009"}}}}},
        {"schema": "deep"},
    ],
)
def test_a_hostile_tool_line_gets_an_answer_not_a_traceback(tmp_path: Path, bad: dict[str, Any]) -> None:
    tape = _form1_tape(tmp_path / "t.jsonl")
    lines = tape.read_bytes().splitlines(keepends=True)
    rec = orjson.loads(lines[1])
    deep = bad.get("schema") == "deep"  # nested as deep as a JSON reader takes (orjson: 1024), deeper than Python
    rec.update({"schema": "DEEP"} if deep else bad)
    line = dump_line(rec)
    if deep:
        line = line.replace(b'"DEEP"', b'{"a":' * 1000 + b"{}" + b"}" * 1000)
    tape.write_bytes(lines[0] + line + b"".join(lines[2:]))
    try:
        _replay(tape, _registry(KEY_2))  # the contract differs: the explanation reads the hostile line
    except ToolDriftError as e:
        assert "HostileTok0009" not in str(e)
    except TapeError as e:
        assert "t.jsonl" in str(e) or "nested too deeply" in str(e)
    cmp_cfg = Config.for_dir(tmp_path)
    with Tape(tape, "record", _registry(KEY_2), config=cmp_cfg) as t:
        t.call("search", {"query": "a"})
    try:
        text = "\n".join(compare(tape, candidate_path(tape), cmp_cfg).lines())
        assert "HostileTok0009" not in text
    except TapeError:
        pass
