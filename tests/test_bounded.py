"""Bounded work on tape data (issue 22): a value of any depth is shown with a marker and diffed, never a
traceback; a user's regex rule searches a tape's text within a time budget; a comparison hook answers within
``[compare] hook_timeout`` or fails its comparison. Tapes are written by hand, as a hostile file would be."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui.cli import main
from tapetui.core import comparators
from tapetui.core.canon import dumps
from tapetui.core.changes import DEEPER, MISSING, SHOWN_DEPTH, Change, json_text, short
from tapetui.core.comparators import HOOK_TIMEOUT, parse_rule
from tapetui.core.config import load_config
from tapetui.core.errors import ConfigError
from tapetui.core.jsondiff import diff_values
from tapetui.core.keys import key_of
from tapetui.core.tapefile import dump_line
from tests.builders import HEADER, call_line
from tests.conftest import tapetui_cli, tapetui_process

ARGS = {"q": "weather"}


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tapetui_cli(cwd, *args, env={"NO_COLOR": "1"})


def answered(r: subprocess.CompletedProcess[str], code: int) -> None:
    assert r.returncode == code, (r.returncode, r.stdout[-800:], r.stderr[-800:])
    assert "Traceback" not in r.stderr, r.stderr


def call(result: Any) -> bytes:
    return call_line(seq=1, tool="lookup", args=ARGS, result=result)


def note(value: Any) -> bytes:
    return dump_line({"type": "note", "kind": "final", "value": value, "after": 1, "phase": None})


def nested(depth: int, leaf: Any = 1) -> Any:
    """``[[[…leaf…]]]``, ``depth`` lists deep: readable (a reader takes 1,024 levels), deeper than orjson writes."""
    v = leaf
    for _ in range(depth):
        v = [v]
    return v


def project(root: Path, toml: str = "") -> Path:
    (root / "tapes").mkdir(parents=True, exist_ok=True)
    (root / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n' + toml)
    return root / "tapes"


@pytest.fixture
def deep(tmp_path: Path) -> Path:
    """Three sessions, each with a value nested 400 deep: a candidate's result (``res``), a candidate's note
    (``note``), a note in the latest run log (``log``)."""
    tapes = project(tmp_path)
    v = nested(400)
    (tapes / "res.jsonl").write_bytes(HEADER + call(1))
    (tapes / "res.candidate.jsonl").write_bytes(HEADER + call(v))
    (tapes / "note.jsonl").write_bytes(HEADER + call(1) + note("x"))
    (tapes / "note.candidate.jsonl").write_bytes(HEADER + call(1) + note(v))
    (tapes / "log.jsonl").write_bytes(HEADER + call(1) + note("x"))
    events = [
        {"event": "start", "at": 1.0, "mode": "replay", "tape": "log.jsonl", "started": "2026-01-01T00:00:00Z"},
        {"event": "hit", "seq": 1, "tool": "lookup", "key": key_of("lookup", ARGS), "step": 1, "at": 2.0},
        {"event": "note", "kind": "final", "value": v, "after": 1, "phase": None, "at": 3.0},
        {"event": "end", "stats": {"mode": "replay", "steps": 1}, "at": 4.0},
    ]
    (tapes / "log.run.jsonl").write_bytes(b"".join(dumps(e, newline=True) for e in events))
    return tmp_path


# ---- depth: shown with a marker, never a traceback ---------------------------------------------------------
def test_json_text_marks_what_is_too_deep_to_print() -> None:
    shallow = {"a": [1, {"b": "c"}], "d": None}
    assert json_text(shallow) == orjson.dumps(shallow).decode()  # what orjson prints is printed as it is
    assert json_text(nested(SHOWN_DEPTH)) == orjson.dumps(nested(SHOWN_DEPTH)).decode()
    text = json_text({"v": nested(400)}, indent=True, sort_keys=True)
    assert json.loads(text) is not None and DEEPER in text  # still JSON: the marker is a string
    assert json_text(nested(400)) == orjson.dumps(nested(SHOWN_DEPTH, DEEPER)).decode()
    assert DEEPER in short(nested(400))  # the one-line form shows where it was cut, not only brackets


def test_check_shows_every_400_deep_value_with_a_marker(deep: Path) -> None:
    r = run(deep, "check")
    answered(r, 1)
    for line in ("note.final", "result"):
        assert any(line in x and DEEPER in x for x in r.stdout.splitlines()), r.stdout
    assert r.stdout.count(DEEPER) >= 3, r.stdout  # the result, the note, the run log's note


def test_check_json_is_json_with_a_marker(deep: Path) -> None:
    r = run(deep, "check", "--json")
    answered(r, 1)
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and r.stdout.count(DEEPER) >= 3


@pytest.mark.parametrize("session", ["res", "note", "log"])
def test_diff_shows_a_400_deep_value_with_a_marker(deep: Path, session: str) -> None:
    r = run(deep, "diff", session)
    answered(r, 1)
    assert DEEPER in r.stdout
    r = run(deep, "diff", session, "--json")
    answered(r, 1)
    assert json.loads(r.stdout) and DEEPER in r.stdout


@pytest.mark.parametrize("session", ["res", "note"])
def test_accept_copies_a_400_deep_value_as_recorded(deep: Path, session: str) -> None:
    tapes = deep / "tapes"
    recorded = (tapes / f"{session}.candidate.jsonl").read_bytes()
    r = run(deep, "accept", session, "--why", "deeper on purpose")
    answered(r, 0)
    assert (tapes / f"{session}.jsonl").read_bytes() == recorded  # the golden holds the value whole
    assert DEEPER in (tapes / "CHANGELOG.md").read_text()  # what a person reads of it is cut, and says so
    answered(run(deep, "diff", session, "--json"), 2)  # no candidate left: nothing to compare with


def test_accept_a_rule_for_a_400_deep_run_log_note(deep: Path) -> None:
    answered(run(deep, "accept", "log", "--rule", "ignore:note.final", "--why", "the note is noise"), 0)
    r = run(deep, "diff", "log")
    answered(r, 0)
    assert DEEPER in r.stdout and "ignored" in r.stdout


def test_the_app_shows_a_400_deep_value_with_a_marker() -> None:
    from tapetui.tui.widgets import detail, diff_view, runlog_pane

    v = nested(400)
    assert any(DEEPER in line for line in diff_view.pretty(v))
    assert diff_view.build_diff(v, nested(400, 2)) is not None
    assert detail.json_block(v) is not None
    assert DEEPER in runlog_pane.event_line({"event": "note", "kind": "final", "value": v})


def test_a_difference_400_deep_is_found_at_its_path(tmp_path: Path) -> None:
    assert diff_values(nested(400, 1), nested(400, 2)) == [Change("[0]" * 400, 1, 2)]
    deep_dicts_a: Any = {"k": 1, "z": [1, 2, 3]}
    deep_dicts_b: Any = {"k": 1, "z": [1, 3]}
    for _ in range(400):
        deep_dicts_a, deep_dicts_b = {"k": deep_dicts_a, "same": [1]}, {"k": deep_dicts_b, "same": [1]}
    deep_dicts_b["new"] = True
    got = diff_values(deep_dicts_a, deep_dicts_b)
    assert [(c.path, c.old, c.new) for c in got] == [("k." * 400 + "z[1]", 2, MISSING), ("new", MISSING, True)]
    tapes = project(tmp_path)
    (tapes / "s.jsonl").write_bytes(HEADER + call(nested(400, 1)))
    (tapes / "s.candidate.jsonl").write_bytes(HEADER + call(nested(400, 2)))
    r = run(tmp_path, "diff", "s")
    answered(r, 1)
    assert "result" + "[0]" * 400 + "  1 → 2" in r.stdout


def test_deeper_than_python_walks_is_a_clean_message(tmp_path: Path) -> None:
    tapes = project(tmp_path)
    n = 1020  # readable (a reader takes 1,024 levels), deeper than Python's recursion limit
    deep_result = b"[" * n + b"1" + b"]" * n
    line = call("@@").replace(b'"@@"', deep_result)
    (tapes / "s.jsonl").write_bytes(HEADER + line)
    (tapes / "s.candidate.jsonl").write_bytes(HEADER + line.replace(b"[1]", b"[2]"))
    for args in (("check",), ("diff", "s")):
        r = run(tmp_path, *args)
        answered(r, 2)
        assert "nested too deeply" in r.stderr and "s.candidate.jsonl" in r.stderr, r.stderr


# ---- regex rules: a time budget per rule and value ---------------------------------------------------------
def regex_project(tmp_path: Path, pattern: str, answer: str) -> Path:
    tapes = project(tmp_path, f'[compare.rules]\n"result.answer" = {{ regex = {json.dumps(pattern)} }}\n')
    (tapes / "s.jsonl").write_bytes(HEADER + call({"answer": "ok"}))
    (tapes / "s.candidate.jsonl").write_bytes(HEADER + call({"answer": answer}))
    return tmp_path


def test_a_backtracking_regex_rule_does_not_hang_check(tmp_path: Path) -> None:
    pattern = r"^(\w+\s?)*$"  # the rule: with re, 66 characters never finish
    answer = "a" * 65 + "!"
    r = run(regex_project(tmp_path, pattern, answer), "check")
    answered(r, 1)
    assert "result.answer" in r.stdout and repr(pattern) in r.stdout, r.stdout


def test_a_regex_over_its_budget_fails_its_dimension_naming_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(comparators, "REGEX_BUDGET", 0.05)  # 1 s in earnest; the search takes years
    root = regex_project(tmp_path, "^(a|aa)*$", "a" * 65 + "!")
    assert main(["--config", str(root / "tapes.toml"), "check"]) == 1
    out = capsys.readouterr().out
    assert "[ERROR] result.answer: the rule 'result.answer' (regex '^(a|aa)*$') exceeded its time budget" in out
    assert "results    FAIL" in out and "1 comparison error" in out, out
    assert comparators.REGEX_BUDGET == 0.05 and "of 0.05 s" in out


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_regex_over_its_budget_on_one_session_still_judges_the_next_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, jobs: str
) -> None:
    """A session's verdict depends on its own values alone: a rule that went over its budget on another session
    (checked before it in this process, or in another one with --jobs) runs again on this one."""
    monkeypatch.setattr(comparators, "REGEX_BUDGET", 0.05)
    tapes = regex_project(tmp_path, "^(a|aa)*$", "a" * 65 + "!").joinpath("tapes")
    for name in ("t1", "t2", "t3"):  # checked after s, in name order: each matches at once
        (tapes / f"{name}.jsonl").write_bytes(HEADER + call({"answer": "ok"}))
        (tapes / f"{name}.candidate.jsonl").write_bytes(HEADER + call({"answer": "aaaa"}))
    assert main(["--config", str(tmp_path / "tapes.toml"), "check", "--jobs", jobs]) == 1
    out = capsys.readouterr().out
    assert out.count("[ERROR] result.answer") == 1 and "4 session(s) checked, 1 with findings" in out, out
    assert out.count("matches regex '^(a|aa)*$'") == 3


def test_a_regex_spent_on_one_comparison_runs_again_on_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the app and `diff` show of a session does not depend on which session was compared before it (one
    session's comparisons, each of its samples, share the budget: a rule spent on one is not run on the next)."""
    from tapetui.core.config import load_config
    from tapetui.review.diffs import diff

    monkeypatch.setattr(comparators, "REGEX_BUDGET", 0.05)
    tapes = regex_project(tmp_path, "^(a|aa)*$", "a" * 65 + "!").joinpath("tapes")
    (tapes / "t.jsonl").write_bytes(HEADER + call({"answer": "ok"}))
    (tapes / "t.candidate.jsonl").write_bytes(HEADER + call({"answer": "aaaa"}))
    config = load_config(tmp_path / "tapes.toml")
    hostile, fine = (diff(config, tapes / f"{name}.jsonl").comparison for name in ("s", "t"))
    assert hostile is not None and fine is not None
    assert any(v.errors for v in hostile.verdicts) and not any(v.errors for v in fine.verdicts)
    assert all(v.passed for v in fine.verdicts)


def test_regex_rules_read_as_before() -> None:
    rule = parse_rule("result.answer", {"regex": r"^\d+ items?$"}, "tapes.toml")
    assert rule.describe() == r"regex '^\\d+ items?$'" and rule.value.pattern == r"^\d+ items?$"
    assert rule.value.search("12 items") and not rule.value.search("many items")
    assert parse_rule("result.a", {"regex": "[[a]]"}, "t").value.search("[]")  # no FutureWarning: read as re does
    for bad, why in [("(", "invalid regular expression"), ("a{99999999999}", "invalid"), ("(" * 5000, "invalid")]:
        with pytest.raises(ConfigError, match=why):
            parse_rule("result.a", {"regex": bad}, "t")


# ---- hooks: [compare] hook_timeout --------------------------------------------------------------------------
STUCK = """
import threading
RELEASE = threading.Event()

def judge(a, b, context):
    print("judging")
    RELEASE.wait(30)  # the test releases it; 30 s only so a broken timeout fails instead of hanging
    print("late")
    return True, "fine"

def sim(a, b):
    print("judging")
    RELEASE.wait(30)
    print("late")
    return 1.0
"""


@pytest.fixture
def stuck(tmp_path: Path) -> Iterator[str]:
    """A hook module whose hooks block until the test ends; its name."""
    name = f"hooks_stuck_{abs(hash(str(tmp_path)))}"
    (tmp_path / f"{name}.py").write_text(STUCK)
    yield name
    mod = sys.modules.pop(name, None)
    if mod is not None:
        mod.RELEASE.set()
    for t in threading.enumerate():
        if t.name.startswith("tapetui ") and t.daemon:
            t.join(10)


@pytest.mark.parametrize(
    ("hook", "rule", "said"),
    [("judge", '"judge"', "judge"), ("similarity", "{ similarity = 0.8 }", "similarity hook")],
)
def test_a_hook_that_does_not_answer_fails_its_comparison(
    tmp_path: Path, stuck: str, capsys: pytest.CaptureFixture[str], hook: str, rule: str, said: str
) -> None:
    fn = "judge" if hook == "judge" else "sim"
    tapes = project(
        tmp_path, f'[compare]\n{hook} = "{stuck}:{fn}"\nhook_timeout = 0.2\n[compare.rules]\n"result.answer" = {rule}\n'
    )
    (tapes / "s.jsonl").write_bytes(HEADER + call({"answer": "It will rain in Paris tomorrow."}))
    (tapes / "s.candidate.jsonl").write_bytes(HEADER + call({"answer": "Tomorrow it rains in Paris."}))
    assert main(["--config", str(tmp_path / "tapes.toml"), "check", "--json"]) == 1
    got = capsys.readouterr()
    doc = json.loads(got.out)  # the hook's print went to stderr: stdout is the report alone
    message = f"{said} {stuck}:{fn} did not answer within 0.2 s ([compare] hook_timeout)"
    assert message in got.out and doc["ok"] is False
    assert "judging" in got.err and "judging" not in got.out
    # released after check returned: what it prints now still goes to stderr, and stdout is put back
    sys.modules[stuck].RELEASE.set()
    for t in threading.enumerate():
        if t.name.startswith("tapetui "):
            t.join(10)
    print("report")
    late = capsys.readouterr()
    assert "late" in late.err and late.out == "report\n"
    assert not isinstance(sys.stdout, comparators._HookStdout)


def test_a_stuck_hook_does_not_keep_check_from_exiting(tmp_path: Path) -> None:
    (tmp_path / "hooks_forever.py").write_text(
        "import threading\ndef judge(a, b, c):\n    threading.Event().wait()\n"  # never returns
    )
    tapes = project(
        tmp_path,
        '[compare]\njudge = "hooks_forever:judge"\nhook_timeout = "0.2s"\n[compare.rules]\n"result" = "judge"\n',
    )
    (tapes / "s.jsonl").write_bytes(HEADER + call("sunny"))  # a judge compares text
    (tapes / "s.candidate.jsonl").write_bytes(HEADER + call("rainy"))
    # its thread is a daemon: the process ends with the check
    r = tapetui_process(tmp_path, "check", env={"NO_COLOR": "1"}, timeout=60)
    answered(r, 1)
    assert "judge hooks_forever:judge did not answer within 0.2 s ([compare] hook_timeout)" in r.stdout


@pytest.mark.parametrize(
    ("written", "seconds"), [(None, HOOK_TIMEOUT), ("0.5", 0.5), ('"30s"', 30.0), ('"2m"', 120.0), ('"1h"', 3600.0)]
)
def test_hook_timeout_values(tmp_path: Path, written: str | None, seconds: float) -> None:
    line = "" if written is None else f"hook_timeout = {written}\n"
    cfg = load_config(_toml(tmp_path, f'[compare]\n{line}[compare.sessions."s"]\nsequence = "unordered"\n'))
    assert cfg.compare.hook_timeout == seconds == cfg.compare_for("s").hook_timeout
    assert HOOK_TIMEOUT == 60.0
    cfg = load_config(_toml(tmp_path, f'[compare]\n{line}[compare.sessions."s"]\nhook_timeout = 5\n'))
    assert cfg.compare_for("s").hook_timeout == 5.0 and cfg.compare_for("t").hook_timeout == seconds


@pytest.mark.parametrize("written", ["0", "-1", '"soon"', "true", "nan", "inf", '"2d"', "86401", '""', "[1]"])
def test_a_bad_hook_timeout_names_the_file_and_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], written: str
) -> None:
    path = _toml(tmp_path, f"[compare]\nhook_timeout = {written}\n")
    with pytest.raises(ConfigError, match=r"tapes\.toml: 'compare\.hook_timeout' must be a number of seconds"):
        load_config(path)
    assert main(["--config", str(path), "check"]) == 2
    err = capsys.readouterr().err
    assert "compare.hook_timeout" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def _toml(tmp_path: Path, compare: str) -> Path:
    project(tmp_path, compare)
    return tmp_path / "tapes.toml"
