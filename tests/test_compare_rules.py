"""Comparing like a reviewer (issue 16): [compare] settings, per-path rules, sequence modes, notes,
dimension verdicts, new capabilities, hooks, accept --rule, repeated samples."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Tape
from tapetui.cli import main
from tapetui.core.comparators import Hooks, similarity
from tapetui.core.config import Config, load_config
from tapetui.core.errors import ConfigError
from tapetui.core.runlog import read_run_log
from tapetui.core.store import candidate_path, samples_of
from tapetui.core.tapefile import read_index
from tapetui.review import check, compare, judge_run, parse_rule_spec, suggest_rule
from tapetui.review.verdicts import pass_hat, sequence_distance

Op = tuple[Any, ...]

BASE = [
    ("phase", "gather"),
    ("call", "fetch", {"doc": "a"}, {"text": "alpha"}),
    ("call", "search", {"q": "tools"}, {"hits": ["x", "y", "z"]}),
    ("phase", "answer"),
    ("call", "quote", {"symbol": "ACME"}, {"price": 101.25, "currency": "USD"}),
    ("note", "final", "It will rain in Paris tomorrow, so take an umbrella."),
]


def project(tmp_path: Path, compare_toml: str = "") -> Config:
    (tmp_path / "tapes").mkdir(parents=True, exist_ok=True)
    (tmp_path / "tapes.toml").write_text(
        '# my project\n[tapes]\ndir = "tapes"  # goldens here\n\n' + textwrap.dedent(compare_toml)
    )
    return load_config(tmp_path / "tapes.toml")


def record(path: Path, cfg: Config, ops: list[Op]) -> None:
    with Tape(path, "record", config=cfg) as tape:
        for op in ops:
            if op[0] == "call":
                _, tool, args, result = op
                tape.call(tool, args, live=lambda result=result: result)
            elif op[0] == "note":
                tape.note(op[1], op[2])
            else:
                tape.phase(op[1])


def pair(tmp_path: Path, new_ops: list[Op], compare_toml: str = "", old_ops: list[Op] | None = None) -> Config:
    cfg = project(tmp_path, compare_toml)
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, old_ops or BASE)
    record(g, cfg, new_ops)
    assert candidate_path(g).exists()
    return cfg


def changed(ops: list[Op], i: int, op: Op) -> list[Op]:
    out = list(ops)
    out[i] = op
    return out


REORDERED = [BASE[0], BASE[2], BASE[1], *BASE[3:]]
REWORDED = changed(BASE, 5, ("note", "final", "Tomorrow it will rain in Paris: take an umbrella."))
NUDGED = changed(BASE, 4, ("call", "quote", {"symbol": "ACME"}, {"price": 101.27, "currency": "USD"}))

RULES = """
[compare]
sequence = "phases"
[compare.rules]
"quote:result.price" = { tolerance = 0.05 }
"note.final" = { similarity = 0.6 }
"""


def cmp_of(cfg: Config) -> Any:
    g = cfg.tapes_dir / "s.jsonl"
    return compare(g, candidate_path(g), cfg)


# ---- the Done-when case: reorder in a phase, a number within tolerance, a reworded answer ------------
def test_reorder_tolerance_and_rewording_pass_with_rules_and_fail_without(tmp_path: Path) -> None:
    new = [BASE[0], BASE[2], BASE[1], BASE[3], NUDGED[4], REWORDED[5]]
    cfg = pair(tmp_path, new, RULES)
    cmp = cmp_of(cfg)
    assert cmp.passed, cmp.lines()
    assert {v.dimension: v.passed for v in cmp.verdicts} == dict.fromkeys(
        ("tools", "requested", "arguments", "results", "notes"), True
    )
    text = "\n".join(cmp.lines())
    assert "result.price  101.25 → 101.27  — within tolerance ±0.05" in text
    assert "note.final" in text and "— similarity" in text
    assert [s.kind for s in cmp.steps if s.tool == "quote"] == ["tolerated"]
    # the same files with the rules off: tools (strict), results and notes fail
    off = project(tmp_path, "")
    cmp_off = cmp_of(off)
    assert not cmp_off.passed
    assert {v.dimension for v in cmp_off.failing} == {"tools", "results", "notes"}
    assert main(["--config", str(tmp_path / "tapes.toml"), "check"]) == 1
    project(tmp_path, RULES)
    assert main(["--config", str(tmp_path / "tapes.toml"), "check"]) == 0


def test_check_json_carries_every_dimension(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pair(tmp_path, NUDGED, RULES)
    assert main(["--config", str(tmp_path / "tapes.toml"), "check", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    cand = doc["reports"][0]["candidate"]
    assert set(cand["dimensions"]) == {"tools", "requested", "arguments", "results", "notes"}
    assert cand["dimensions"]["results"] == {
        "passed": True,
        "judged": True,
        "value": 0,
        "threshold": 0,
        "excused": 1,
        "errors": 0,
    }
    assert cand["passed"] is True and cand["new_capabilities"] == []
    step = cand["steps"][0]
    assert step["kind"] == "tolerated"
    assert step["excused"] == [{"path": "result.price", "rule": "tolerance", "text": "within tolerance ±0.05"}]


# ---- sequence modes ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "old", "new", "expected"),
    [
        ("strict", "abc", "acb", 2),
        ("unordered", "abc", "acb", 0),
        ("unordered", "abc", "abd", 1),
        ("subset", "abc", "ac", 0),
        ("subset", "abc", "acd", 1),
        ("superset", "abc", "abcd", 0),
        ("superset", "abc", "ab", 1),
        ("subset", "aab", "ab", 0),
        ("superset", "ab", "aab", 0),
        ("unordered", "aab", "ab", 1),
    ],
)
def test_sequence_distance(mode: str, old: str, new: str, expected: int) -> None:
    assert sequence_distance(mode, list(old), list(new)) == expected


def test_phases_keep_order_across_phases() -> None:
    old, phases = list("abcd"), ["p", "p", "q", "q"]
    assert sequence_distance("phases", old, list("badc"), phases, phases) == 0
    # c moved into the first phase: one missing in q, one extra in p
    assert sequence_distance("phases", old, list("abcd"), phases, ["p", "p", "p", "q"]) == 2
    # the phases swapped: the phases' own order counts
    assert sequence_distance("phases", old, list("cdab"), phases, ["q", "q", "p", "p"]) > 0


@pytest.mark.parametrize(
    ("mode", "new", "passes"),
    [
        ("strict", REORDERED, False),
        ("unordered", REORDERED, True),
        ("phases", REORDERED, True),
        ("subset", [op for op in BASE if op[1] != "search"], True),
        ("superset", [op for op in BASE if op[1] != "search"], False),
        ("superset", [*BASE[:5], ("call", "fetch", {"doc": "b"}, {"text": "beta"}), BASE[5]], True),
        ("subset", [*BASE[:5], ("call", "fetch", {"doc": "b"}, {"text": "beta"}), BASE[5]], False),
    ],
)
def test_modes_on_tapes(tmp_path: Path, mode: str, new: list[Op], passes: bool) -> None:
    cfg = pair(tmp_path, new, f'[compare]\nsequence = "{mode}"\n')
    cmp = cmp_of(cfg)
    assert cmp.verdict("tools").passed is passes, cmp.lines()
    assert cmp.verdict("tools").mode == mode
    if mode != "strict" and new is REORDERED:
        assert all(s.kind == "same" for s in cmp.steps)  # paired by tool: a reorder is no change of a step


def test_phases_mode_fails_a_call_moved_to_another_phase(tmp_path: Path) -> None:
    moved = [BASE[0], BASE[1], BASE[3], BASE[2], BASE[4], BASE[5]]  # search now in "answer"
    cmp = cmp_of(pair(tmp_path, moved, '[compare]\nsequence = "phases"\n'))
    assert not cmp.verdict("tools").passed


def test_new_tool_is_a_capability_in_every_mode(tmp_path: Path) -> None:
    new = [*BASE[:5], ("call", "send_email", {"to": "a@b"}, {"sent": True}), BASE[5]]
    cfg = pair(tmp_path, new, '[compare]\nsequence = "superset"\n')
    cmp = cmp_of(cfg)
    assert cmp.verdict("tools").passed  # superset allows an extra call...
    assert cmp.new_capabilities == ("send_email",) and not cmp.passed  # ...never an unseen tool
    assert any(line.startswith("[NEW TOOL] send_email") for line in cmp.lines())
    rep = check(cfg.tapes_dir, cfg)[0]
    assert [f.tool for f in rep.findings if f.kind == "capability"] == ["send_email"]
    assert not rep.ok


def test_thresholds_per_dimension(tmp_path: Path) -> None:
    extra = [*BASE[:5], ("call", "fetch", {"doc": "b"}, {"text": "beta"}), BASE[5]]
    cfg = pair(tmp_path, extra, "[compare]\nmax_tool_edits = 1\nmax_requested_edits = 1\n")
    cmp = cmp_of(cfg)
    assert cmp.verdict("tools").passed and cmp.verdict("tools").value == 1
    assert cmp.passed and check(cfg.tapes_dir, cfg)[0].ok
    cfg = project(tmp_path, "[compare]\nmax_result_changes = 0\n")
    assert not cmp_of(cfg).passed


def test_arguments_threshold_counts_unexcused_paths(tmp_path: Path) -> None:
    new = changed(BASE, 1, ("call", "fetch", {"doc": "b"}, {"text": "alpha"}))
    cfg = pair(tmp_path, new, "[compare]\nmax_arg_changes = 1\n")
    v = cmp_of(cfg).verdict("arguments")
    assert v.value == 1 and v.passed
    project(tmp_path, "")
    assert not cmp_of(load_config(tmp_path / "tapes.toml")).verdict("arguments").passed


def test_default_settings_keep_todays_strictness(tmp_path: Path) -> None:
    cfg = pair(tmp_path, NUDGED, "")
    cmp = cmp_of(cfg)
    assert not cmp.passed and [v.dimension for v in cmp.failing] == ["results"]
    assert cmp.verdict("tools").mode == "strict"


# ---- comparators ----------------------------------------------------------------------------------
def judged(rules: str, side: str, old: Any, new: Any, tmp_path: Path, tool: str | None = None, **kw: Any) -> Any:
    cfg = project(tmp_path, "[compare.rules]\n" + rules)
    return cfg.compare.rules.judge(side, old, new, tool=tool, **kw)


def test_tolerance_absolute_and_relative(tmp_path: Path) -> None:
    assert judged('"result.p" = { tolerance = 0.01 }', "result", {"p": 1.0}, {"p": 1.009}, tmp_path).ok
    j = judged('"result.p" = { tolerance = 0.01 }', "result", {"p": 1.0}, {"p": 1.02}, tmp_path)
    assert not j.ok and "outside tolerance ±0.01" in j.remarks[0][1]
    assert judged('"result.p" = { tolerance = "2%" }', "result", {"p": 100}, {"p": 101.9}, tmp_path).ok
    assert not judged('"result.p" = { tolerance = "2%" }', "result", {"p": 100}, {"p": 103}, tmp_path).ok
    # a rule on a parent governs every number inside it; a string is within no tolerance
    assert judged(
        '"result.q" = { tolerance = 1 }', "result", {"q": {"a": 1, "b": [2]}}, {"q": {"a": 2, "b": [3]}}, tmp_path
    ).ok
    assert not judged('"result.p" = { tolerance = 1 }', "result", {"p": "1"}, {"p": "2"}, tmp_path).ok
    assert not judged('"result.p" = { tolerance = 1 }', "result", {"p": True}, {"p": False}, tmp_path).ok


def test_unordered_regex_ignore_similarity(tmp_path: Path) -> None:
    assert judged(
        '"result.xs" = "unordered"', "result", {"xs": [1, {"a": 2}, 3]}, {"xs": [3, 1, {"a": 2}]}, tmp_path
    ).ok
    assert not judged('"result.xs" = "unordered"', "result", {"xs": [1, 2]}, {"xs": [2, 2]}, tmp_path).ok
    assert judged(
        '"args.q" = { regex = "^weather in" }', "args", {"q": "weather in Oslo"}, {"q": "weather in Paris"}, tmp_path
    ).ok
    j = judged('"args.q" = { regex = "^weather in" }', "args", {"q": "weather in Oslo"}, {"q": "rain?"}, tmp_path)
    assert not j.ok and "does not match" in j.remarks[0][1]
    j = judged(
        '"result.debug" = "ignore"', "result", {"debug": {"t": 1}, "v": 1}, {"debug": {"t": 2}, "v": 1}, tmp_path
    )
    assert j.ok and j.excused[0].text == "ignored"
    a, b = "The build passed on every platform.", "On every platform the build passed."
    assert judged('"note.final" = { similarity = 0.6 }', "note.final", a, b, tmp_path).ok
    assert not judged(
        '"note.final" = { similarity = 0.6 }', "note.final", a, "Totally unrelated words here.", tmp_path
    ).ok


def test_tool_scoped_rule_and_wildcards(tmp_path: Path) -> None:
    rules = '"quote:result.price" = { tolerance = 1 }\n"*.request_id" = "ignore"\n'
    assert judged(rules, "result", {"price": 1}, {"price": 1.5}, tmp_path, tool="quote").ok
    assert not judged(rules, "result", {"price": 1}, {"price": 1.5}, tmp_path, tool="other").ok
    assert judged(rules, "result", {"a": {"request_id": 1}}, {"a": {"request_id": 2}}, tmp_path, tool="other").ok


def test_session_patterns_override_and_come_first(tmp_path: Path) -> None:
    cfg = project(
        tmp_path,
        """
        [compare]
        max_tool_edits = 3
        [compare.rules]
        "result.p" = { tolerance = 1 }
        [compare.sessions."support/*"]
        sequence = "unordered"
        [compare.sessions."support/*".rules]
        "result.p" = { tolerance = 5 }
        """,
    )
    s = cfg.compare_for("support/refund")
    assert (s.sequence, s.max_tool_edits) == ("unordered", 3)
    assert [r.value for r in s.rules.rules] == [5.0, 1.0]
    assert cfg.compare_for("billing/x").sequence == "strict"


def test_similarity_is_symmetric_bounded_and_lexical() -> None:
    a, b = "It will rain in Paris tomorrow.", "Tomorrow, Paris is expected to get rain."
    assert similarity(a, b) == pytest.approx(similarity(b, a))
    assert 0.5 < similarity(a, b) < 1.0
    assert similarity(a, a) == 1.0 and similarity("", a) == 0.0
    assert similarity("abc", "xyz") == 0.0


# ---- hooks ------------------------------------------------------------------------------------------
HOOKS = """
import sys
CALLS = []
def judge(a, b, context):
    CALLS.append(context)
    return ("umbrella" in b, "mentions the umbrella" if "umbrella" in b else "forgets the umbrella")
def boom(a, b, context):
    raise RuntimeError("judge is down")
def sim(a, b):
    return 0.99
"""


def hook_project(tmp_path: Path, judge: str, module: str = "myhooks") -> Config:
    (tmp_path / f"{module}.py").write_text(HOOKS)
    return project(tmp_path, f'[compare]\njudge = "{module}:{judge}"\n[compare.rules]\n"note.final" = "judge"\n')


def test_judge_hook_decides_and_its_reason_is_shown(tmp_path: Path) -> None:
    cfg = hook_project(tmp_path, "judge", "hooks_a")
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, BASE)
    record(g, cfg, REWORDED)
    assert "hooks_a" not in sys.modules  # reading tapes.toml checks the spelling only
    cmp = cmp_of(cfg)
    assert cmp.passed and "judge: mentions the umbrella" in "\n".join(cmp.lines())
    assert sys.modules["hooks_a"].CALLS[0]["path"] == "note.final"
    record(g, cfg, changed(BASE, 5, ("note", "final", "It will rain in Paris tomorrow.")))
    cmp = cmp_of(cfg)
    assert not cmp.passed and "(judge: forgets the umbrella)" in "\n".join(cmp.lines())


def test_hooks_are_not_imported_when_nothing_needs_them(tmp_path: Path) -> None:
    cfg = hook_project(tmp_path, "judge", "hooks_b")
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, BASE)
    record(g, cfg, BASE)
    assert cmp_of(cfg).passed
    assert "hooks_b" not in sys.modules
    record(g, cfg, REWORDED)
    c = compare(g, candidate_path(g), cfg, hooks=None)  # the app's default: never imported
    assert "hooks_b" not in sys.modules and not c.passed
    assert "not run here (check and diff run it" in "\n".join(c.lines())


def test_a_hook_that_raises_is_an_error_never_a_pass(tmp_path: Path) -> None:
    cfg = hook_project(tmp_path, "boom", "hooks_c")
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, BASE)
    record(g, cfg, REWORDED)
    cmp = cmp_of(cfg)
    v = cmp.verdict("notes")
    assert not v.passed and v.errors == 1
    assert "RuntimeError: judge is down" in "\n".join(cmp.lines())


def test_similarity_hook_replaces_the_builtin(tmp_path: Path) -> None:
    (tmp_path / "hooks_d.py").write_text(HOOKS)
    cfg = project(
        tmp_path, '[compare]\nsimilarity = "hooks_d:sim"\n[compare.rules]\n"note.final" = { similarity = 0.95 }\n'
    )
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, BASE)
    record(g, cfg, changed(BASE, 5, ("note", "final", "nothing alike")))
    assert cmp_of(cfg).passed  # the hook says 0.99
    assert compare(g, candidate_path(g), cfg, hooks=Hooks(similarity=lambda a, b: 0.1)).passed is False


def test_a_hook_that_cannot_be_imported_is_exit_2_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = project(tmp_path, '[compare]\njudge = "no_such_module_x:judge"\n[compare.rules]\n"note.final" = "judge"\n')
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, BASE)
    record(g, cfg, REWORDED)
    with pytest.raises(ConfigError, match="'compare.judge'"):
        cmp_of(cfg)
    assert main(["--config", str(tmp_path / "tapes.toml"), "check"]) == 2
    err = capsys.readouterr().err
    assert "tapes.toml" in err and "compare.judge" in err and "Traceback" not in err


# ---- bad configuration ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[compare.rules]\n"result.p" = "fuzzy"\n', "unknown comparator 'fuzzy'"),
        ('[compare.rules]\n"result.p" = { tolerance = -1 }\n', "compare.rules"),
        ('[compare.rules]\n"result.p" = { tolerance = "x%" }\n', "compare.rules"),
        ('[compare.rules]\n"result.p" = { similarity = 1.5 }\n', "(0, 1]"),
        ('[compare.rules]\n"args.q" = { regex = "(" }\n', "invalid regular expression"),
        ('[compare.rules]\n"output.p" = "ignore"\n', "can never match"),
        ('[compare.rules]\n"note" = "ignore"\n', "can never match"),
        ('[compare.rules]\n"result..p" = "ignore"\n', "can never match"),
        ('[compare.rules]\n"result.p" = { tolerance = 1, regex = "a" }\n', "one comparator"),
        ("[compare]\nmax_tool_edits = -1\n", "'compare.max_tool_edits'"),
        ('[compare]\nmax_arg_changes = "2"\n', "'compare.max_arg_changes'"),
        ('[compare]\nsequence = "sorted"\n', "'compare.sequence'"),
        ('[compare]\nsamples_required = "120%"\n', "'compare.samples_required'"),
        ('[compare]\njudge = "not a hook"\n', "'compare.judge'"),
        ("[compare]\nthreshold = 1\n", "unknown key 'compare.threshold'"),
        ('[compare.sessions."x"]\nsessions = 1\n', "unknown key"),
        ('[compare.rules]\n"note.final" = "judge"\n', "no 'compare.judge'"),
    ],
)
def test_bad_configuration_names_the_file_and_key(tmp_path: Path, toml: str, named: str) -> None:
    with pytest.raises(ConfigError) as e:
        project(tmp_path, toml)
    assert str(tmp_path / "tapes.toml") in str(e.value) and named in str(e.value)


def test_bad_configuration_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tapes").mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n[compare.rules]\n"result.p" = "fuzzy"\n')
    assert main(["--config", str(tmp_path / "tapes.toml"), "check"]) == 2
    assert "fuzzy" in capsys.readouterr().err


# ---- notes ------------------------------------------------------------------------------------------
def test_notes_compare_by_kind_and_position(tmp_path: Path) -> None:
    cfg = pair(tmp_path, [*BASE, ("note", "final", "second answer")], "")
    cmp = cmp_of(cfg)
    assert not cmp.verdict("notes").passed
    assert any("note.final #2  (added)" in line for line in cmp.lines())
    # tapes without notes compare as before
    cfg = pair(tmp_path / "b", [op for op in BASE if op[0] != "note"], "", [op for op in BASE if op[0] != "note"])
    assert cmp_of(cfg).clean


# ---- accept --rule ----------------------------------------------------------------------------------------
def test_accept_rule_writes_tapes_toml_keeping_comments_and_a_changelog_entry(tmp_path: Path) -> None:
    cfg = pair(tmp_path, NUDGED, "")
    toml = tmp_path / "tapes.toml"
    args = ["--config", str(toml)]
    assert main([*args, "check"]) == 1
    assert main([*args, "accept", "s", "--rule", "tolerance:quote:result.price=0.05", "--why", "prices move"]) == 0
    text = toml.read_text()
    assert "# my project" in text and "# goldens here" in text
    cfg = load_config(toml)
    assert [r.describe() for r in cfg.compare_for("s").rules.rules] == ["tolerance ±0.05"]
    assert cfg.compare_for("other").rules.rules == ()
    log = cfg.changelog.read_text()
    assert "prices move" in log and "quote:result.price" in log and "accept" in log
    assert not candidate_path(cfg.tapes_dir / "s.jsonl").exists()
    # the next candidate with the same kind of move passes
    record(
        cfg.tapes_dir / "s.jsonl",
        cfg,
        changed(BASE, 4, ("call", "quote", {"symbol": "ACME"}, {"price": 101.3, "currency": "USD"})),
    )
    assert main([*args, "check"]) == 0


def test_accept_bad_rule_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = pair(tmp_path, NUDGED, "")
    toml = tmp_path / "tapes.toml"
    before = toml.read_bytes(), (cfg.tapes_dir / "s.jsonl").read_bytes()
    assert main(["--config", str(toml), "accept", "s", "--rule", "fuzzy:result.price", "--why", "x"]) == 2
    assert "unknown comparator" in capsys.readouterr().err
    assert (toml.read_bytes(), (cfg.tapes_dir / "s.jsonl").read_bytes()) == before
    assert candidate_path(cfg.tapes_dir / "s.jsonl").exists() and not cfg.changelog.exists()


def test_rule_specs_and_suggestions() -> None:
    assert parse_rule_spec("tolerance:result.price=2%").rule.relative
    assert parse_rule_spec("regex:args.q=^a=b").rule.value.pattern == "^a=b"
    assert parse_rule_spec("ignore:result.debug").toml_text() == '"result.debug" = "ignore"'
    for bad in ("tolerance:result.p", "ignore:result.p=1", "nope:result.p", "similarity:note.x=abc", "ignore"):
        with pytest.raises(ConfigError):
            parse_rule_spec(bad)
    assert suggest_rule("result.price", 101.25, 101.27) == "tolerance:result.price=0.02"
    assert suggest_rule("result.xs", [1], [2]) == "unordered:result.xs"
    assert suggest_rule("args.id", "a", "b") == "ignore:args.id"


# ---- repeated samples ------------------------------------------------------------------------------------
def test_samples_from_the_folder_k_of_n_and_pass_hat(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = pair(tmp_path, NUDGED, RULES)  # sample 1 matches under the rules
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, REWORDED)  # sample 2 matches
    record(g, cfg, changed(BASE, 4, ("call", "quote", {"symbol": "ACME"}, {"price": 150, "currency": "USD"})))
    assert len(samples_of(g)) == 2
    args = ["--config", str(tmp_path / "tapes.toml")]
    assert main([*args, "check", "--samples", "--json"]) == 1  # required: all
    doc = json.loads(capsys.readouterr().out)
    s = doc["reports"][0]["samples"]
    assert (s["n"], s["matched"], s["required"], s["ok"]) == (3, 2, 3, False)
    assert s["dimensions"]["results"] == 2 and s["dimensions"]["tools"] == 3
    assert s["pass_hat"]["1"] == pytest.approx(2 / 3) and s["pass_hat"]["3"] == 0.0
    (tmp_path / "tapes.toml").write_text(
        (tmp_path / "tapes.toml").read_text().replace("[compare]\n", '[compare]\nsamples_required = "60%"\n')
    )
    assert main([*args, "check", "--samples"]) == 1  # the pending candidate itself still fails check
    out = capsys.readouterr().out
    assert "[SAMPLES] 2 of 3 samples match (required 2)" in out and "pass^1 0.67" in out


def test_samples_named_files_and_run_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = pair(tmp_path, NUDGED, RULES)
    g = cfg.tapes_dir / "s.jsonl"
    with Tape(g, "replay", config=cfg) as tape:
        tape.phase("gather")
        tape.call("search", {"q": "tools"})
        tape.call("fetch", {"doc": "a"})
        tape.phase("answer")
        tape.call("quote", {"symbol": "ACME"})
        tape.note("final", "Tomorrow it will rain in Paris: take an umbrella.")
    run = g.with_name("s.run.jsonl")
    args = ["--config", str(tmp_path / "tapes.toml"), "check", "--json"]
    assert main([*args, "--sample", str(run), "--sample", str(candidate_path(g))]) == 0
    s = json.loads(capsys.readouterr().out)["reports"][0]["samples"]
    assert (s["n"], s["matched"]) == (2, 2), s


def test_no_samples_anywhere_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = project(tmp_path)
    record(cfg.tapes_dir / "s.jsonl", cfg, BASE)
    assert main(["--config", str(tmp_path / "tapes.toml"), "check", "--samples"]) == 2
    assert "no samples" in capsys.readouterr().err


RECORDER = """
import sys
from tapetui import Tape
from tapetui.core.config import load_config
cfg = load_config("tapes.toml")
n = len(list((cfg.tapes_dir / "s.samples").glob("*.jsonl"))) if (cfg.tapes_dir / "s.samples").exists() else 0
n += (cfg.tapes_dir / "s.candidate.jsonl").exists()
with Tape(sys.argv[1], "record", config=cfg) as tape:
    tape.call("fetch", {"doc": "a"}, live=lambda: {"text": "alpha"})
    tape.call("search", {"q": "tools"}, live=lambda: {"hits": ["x", "y", "z"]})
    tape.call("quote", {"symbol": "ACME"}, live=lambda: {"price": 101.25 if n % 2 == 0 else 999, "currency": "USD"})
"""


def test_samples_n_runs_the_record_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = project(tmp_path)
    (tmp_path / "rec.py").write_text(RECORDER)
    toml = tmp_path / "tapes.toml"
    toml.write_text(
        toml.read_text().replace("[tapes]\n", f'[tapes]\nrecord_command = "{sys.executable} rec.py {{tape}}"\n')
    )
    cfg = load_config(toml)
    record(cfg.tapes_dir / "s.jsonl", cfg, [op for op in BASE if op[0] == "call"])
    assert main(["--config", str(toml), "check", "--samples", "3", "--json"]) == 1
    s = json.loads(capsys.readouterr().out)["reports"][0]["samples"]
    assert (s["n"], s["matched"]) == (3, 2)  # runs 1 and 3 match, run 2 quotes 999
    assert [x["matched"] for x in s["samples"]] == [True, False, True]
    assert s["pass_hat"] == {"1": pytest.approx(2 / 3), "2": pytest.approx(1 / 3), "3": 0.0}


def test_pass_hat() -> None:
    assert pass_hat(5, 5) == {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0, 5: 1.0}
    assert pass_hat(0, 2) == {1: 0.0, 2: 0.0}
    assert pass_hat(3, 4)[1] == 0.75 and pass_hat(3, 4)[4] == 0.0


def test_raw_note_and_phase_lines_on_disk(tmp_path: Path) -> None:
    cfg = project(tmp_path)
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, BASE)
    kinds = [orjson.loads(line).get("type") for line in g.read_bytes().splitlines()]
    assert kinds.count("note") == 1 and kinds.count("phase") == 2


# ---- what a hostile tester found ------------------------------------------------------------------------
def test_without_compare_a_pending_candidate_still_fails_check(tmp_path: Path) -> None:
    cfg = pair(tmp_path, BASE, "")  # identical: with no [compare], review is still outstanding
    rep = check(cfg.tapes_dir, cfg)[0]
    assert not rep.ok and any(f.kind == "pending" and not f.warning for f in rep.findings)


def test_bool_and_int_are_different_values(tmp_path: Path) -> None:
    new = changed(BASE, 4, ("call", "quote", {"symbol": "ACME"}, {"price": 101.25, "currency": "USD", "ok": 1}))
    old = changed(BASE, 4, ("call", "quote", {"symbol": "ACME"}, {"price": 101.25, "currency": "USD", "ok": True}))
    cmp = cmp_of(pair(tmp_path, new, RULES, old))
    assert not cmp.passed and "result.ok  true → 1" in "\n".join(cmp.lines())


@pytest.mark.parametrize("raised", ["SystemExit(0)", "GeneratorExit()", "ValueError(Bad())"])
def test_a_hook_raising_anything_is_an_error_and_check_goes_on(tmp_path: Path, raised: str) -> None:
    mod = f"hooks_x{abs(hash(raised))}"
    (tmp_path / f"{mod}.py").write_text(
        "class Bad:\n    def __str__(self):\n        raise RuntimeError('no')\n"
        f"def judge(a, b, c):\n    raise {raised}\n"
    )
    cfg = project(tmp_path, f'[compare]\njudge = "{mod}:judge"\n[compare.rules]\n"note.final" = "judge"\n')
    record(cfg.tapes_dir / "s.jsonl", cfg, BASE)
    record(cfg.tapes_dir / "s.jsonl", cfg, REWORDED)
    record(cfg.tapes_dir / "t.jsonl", cfg, BASE)
    record(cfg.tapes_dir / "t.jsonl", cfg, REWORDED)
    reports = check(cfg.tapes_dir, cfg)
    assert len(reports) == 2 and not any(r.ok for r in reports)
    assert all(r.comparison is not None and r.comparison.verdict("notes").errors == 1 for r in reports)


@pytest.mark.parametrize("returned", ["5.0", "float('inf')", "'0.95'", "True", "None", "float('nan')"])
def test_a_similarity_hook_must_return_a_score_from_0_to_1(tmp_path: Path, returned: str) -> None:
    mod = f"hooks_s{abs(hash(returned))}"
    (tmp_path / f"{mod}.py").write_text(f"def sim(a, b):\n    return {returned}\n")
    cfg = project(
        tmp_path, f'[compare]\nsimilarity = "{mod}:sim"\n[compare.rules]\n"note.final" = {{ similarity = 0.5 }}\n'
    )
    record(cfg.tapes_dir / "s.jsonl", cfg, BASE)
    record(cfg.tapes_dir / "s.jsonl", cfg, REWORDED)
    v = cmp_of(cfg).verdict("notes")
    assert not v.passed and v.errors == 1


def test_builtin_similarity_refuses_other_numbers_and_negations(tmp_path: Path) -> None:
    rules = '"note.final" = { similarity = 0.5 }'
    j = judged(rules, "note.final", "The loan was approved.", "The loan was not approved.", tmp_path)
    assert not j.ok and "negation" in j.remarks[0][1]
    j = judged(rules, "note.final", "Revenue was 1,250,000 USD.", "Revenue was 125,000 USD.", tmp_path)
    assert not j.ok and "numbers differ" in j.remarks[0][1]
    assert judged(rules, "note.final", "Revenue was 1,250,000 USD.", "The revenue: 1250000 USD.", tmp_path).ok


def test_a_rule_added_for_a_session_with_glob_characters_names_it_alone(tmp_path: Path) -> None:
    cfg = project(tmp_path)
    for name in ("star*", "starX"):
        record(cfg.tapes_dir / f"{name}.jsonl", cfg, BASE)
        record(cfg.tapes_dir / f"{name}.jsonl", cfg, NUDGED)
    args = ["--config", str(tmp_path / "tapes.toml")]
    assert main([*args, "accept", "star*", "--rule", "tolerance:result.price=1", "--why", "w"]) == 0
    cfg = load_config(tmp_path / "tapes.toml")
    assert cfg.compare_for("star*").rules and not cfg.compare_for("starX").rules


def test_strict_thresholds_never_hide_a_moved_calls_arguments(tmp_path: Path) -> None:
    moved = [BASE[0], BASE[4], BASE[2], BASE[3], ("call", "fetch", {"doc": "zzz"}, {"text": "other"}), BASE[5]]
    cmp = cmp_of(pair(tmp_path, moved, "[compare]\nmax_tool_edits = 2\nmax_requested_edits = 2\n"))
    assert cmp.verdict("tools").passed
    assert not cmp.verdict("arguments").passed and not cmp.verdict("results").passed
    fetch = [s for s in cmp.steps if s.tool == "fetch"]
    assert [s.kind for s in fetch] == ["changed"] and fetch[0].arg_changes[0].new == "zzz"


def test_a_requested_tool_the_golden_never_used_is_a_new_capability(tmp_path: Path) -> None:
    cfg = project(tmp_path, '[compare]\nsequence = "superset"\n')
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, BASE)
    with Tape(g, "record", config=cfg) as tape:
        tape.phase("gather")
        tape.call("fetch", {"doc": "a"}, live=lambda: {"text": "alpha"}, requested_tool="wire_money")
    assert "wire_money" in cmp_of(cfg).new_capabilities


def test_integer_tolerance_is_exact_and_required_samples_at_least_one(tmp_path: Path) -> None:
    rules = '"result.n" = { tolerance = 0.5 }'
    assert not judged(rules, "result", {"n": 2**53}, {"n": 2**53 + 1}, tmp_path).ok
    assert judged('"result.n" = { tolerance = 1 }', "result", {"n": 2**70}, {"n": 2**70 + 1}, tmp_path).ok
    cfg = project(tmp_path, '[compare]\nsamples_required = "0.0000001%"\n')
    assert cfg.compare.required(1) == 1


def test_a_replay_that_stopped_is_no_matching_sample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = pair(tmp_path, NUDGED, RULES.replace("[compare]\n", "[compare]\nmax_arg_changes = 5\n"))
    g = cfg.tapes_dir / "s.jsonl"
    with pytest.raises(Exception), Tape(g, "replay", config=cfg) as tape:  # noqa: B017, PT011
        tape.call("fetch", {"doc": "drifted"})
    run = g.with_name("s.run.jsonl")
    assert main(["--config", str(tmp_path / "tapes.toml"), "check", "--json", "--sample", str(run)]) == 1
    s = json.loads(capsys.readouterr().out)["reports"][0]["samples"]
    assert s["matched"] == 0 and "stopped with" in s["samples"][0]["problems"][0]


def test_a_tolerated_hit_under_a_rule_since_removed_fails_check(tmp_path: Path) -> None:
    cfg = project(tmp_path, '[compare.rules]\n"fetch:args.n" = { tolerance = 100 }\n')
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, [("call", "fetch", {"n": 1}, {"t": "a"})])
    with Tape(g, "replay", config=cfg) as tape:
        tape.call("fetch", {"n": 50})
        assert tape.stats()["tolerated_hits"] == 1
    assert check(cfg.tapes_dir, cfg)[0].ok
    cfg = project(tmp_path, "")
    rep = check(cfg.tapes_dir, cfg)[0]
    assert not rep.ok and any("excuses args.n now" in f.text for f in rep.findings if f.kind == "tolerated")


def test_accept_rule_that_cannot_be_added_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = pair(tmp_path, NUDGED, "")
    toml = tmp_path / "tapes.toml"
    toml.write_text(toml.read_text() + '[compare]\nsessions = { x = { sequence = "strict" } }\n')
    before = (cfg.tapes_dir / "s.jsonl").read_bytes(), toml.read_bytes()
    assert main(["--config", str(toml), "accept", "s", "--rule", "ignore:result.price", "--why", "w"]) == 2
    assert "is written inline" in capsys.readouterr().err
    assert ((cfg.tapes_dir / "s.jsonl").read_bytes(), toml.read_bytes()) == before
    assert candidate_path(cfg.tapes_dir / "s.jsonl").exists()


def test_rule_paths_as_check_prints_them(tmp_path: Path) -> None:
    assert judged('"result[\\"my key\\"]" = { tolerance = 1 }', "result", {"my key": 1}, {"my key": 2}, tmp_path).ok
    assert judged('"result[\\"a:b\\"]" = "ignore"', "result", {"a:b": 1}, {"a:b": 2}, tmp_path).ok
    assert judged('"result.**.id" = "ignore"', "result", {"x": {"y": {"id": 1}}}, {"x": {"y": {"id": 2}}}, tmp_path).ok
    with pytest.raises(ConfigError, match="ignore takes no value"):
        project(tmp_path, '[compare.rules]\n"result.p" = { ignore = 1 }\n')
    with pytest.raises(ConfigError, match="names a judge"):
        project(tmp_path, '[compare.sessions."s".rules]\n"note.final" = "judge"\n')


def test_note_labels_are_redacted(tmp_path: Path) -> None:
    cfg = project(tmp_path)
    g = cfg.tapes_dir / "s.jsonl"
    with Tape(g, "record", config=cfg) as tape:
        tape.note("api_key", "sk-LEAKLEAKLEAKLEAKLEAK12345")
        tape.phase("sk-proj-abcdefghijklmnopqrstuvwxyz0123")
    text = g.read_text() + g.with_name("s.run.jsonl").read_text()
    assert "LEAK" not in text and "abcdefghijklmnop" not in text


def test_a_fills_miss_answered_live_is_one_call_of_the_sequence(tmp_path: Path) -> None:
    cfg = project(tmp_path, "[compare]\nmax_tool_edits = 1\n")
    g = cfg.tapes_dir / "s.jsonl"
    record(g, cfg, [("call", "a", {}, 1), ("call", "b", {}, 2)])
    with Tape(g, "fill", config=cfg) as tape:
        for tool, value in (("a", 1), ("b", 2), ("c", 3)):
            tape.call(tool, {}, live=lambda value=value: value)
    findings, verdicts = judge_run(read_index(g), read_run_log(g.with_name("s.run.jsonl")), cfg)
    tools = next(v for v in verdicts if v.dimension == "tools")
    assert (tools.value, tools.passed) == (1, True)
    assert next(v for v in verdicts if v.dimension == "arguments").passed


def test_samples_n_leave_the_pending_candidate_and_run_log_as_they_were(tmp_path: Path) -> None:
    cfg = project(tmp_path)
    (tmp_path / "rec.py").write_text(RECORDER)
    toml = tmp_path / "tapes.toml"
    toml.write_text(
        toml.read_text().replace("[tapes]\n", f'[tapes]\nrecord_command = "{sys.executable} rec.py {{tape}}"\n')
    )
    cfg = load_config(toml)
    g = cfg.tapes_dir / "s.jsonl"
    calls = [op for op in BASE if op[0] == "call"]
    record(g, cfg, calls)
    record(g, cfg, changed(calls, 0, ("call", "fetch", {"doc": "reviewed"}, {"text": "x"})))  # a person's candidate
    with Tape(g, "replay", config=cfg) as tape:
        tape.call("fetch", {"doc": "a"})
    pending, log = candidate_path(g).read_bytes(), g.with_name("s.run.jsonl").read_bytes()
    assert main(["--config", str(toml), "check", "--samples", "2"]) == 1
    assert candidate_path(g).read_bytes() == pending and g.with_name("s.run.jsonl").read_bytes() == log
    assert len(samples_of(g)) == 2
    (tmp_path / "rec.py").write_text("import sys\nsys.exit(3)\n")  # a run that fails: put back all the same
    assert main(["--config", str(toml), "check", "--samples", "2"]) == 2
    assert candidate_path(g).read_bytes() == pending and g.with_name("s.run.jsonl").read_bytes() == log


def test_requested_is_judged_only_where_a_call_records_it(tmp_path: Path) -> None:
    cfg = pair(tmp_path, REORDERED, "[compare]\nmax_tool_edits = 2\n")
    v = cmp_of(cfg).verdict("requested")
    assert v is not None and not v.judged and v.passed and "n/a" in v.line()
    assert cmp_of(cfg).passed  # raising max_tool_edits alone lets a reorder pass
