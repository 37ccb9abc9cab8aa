"""Text from tapes in exception messages, the pytest drift report and CHANGELOG.md carries no raw
ESC, BEL or C1 control characters: they are written as visible escapes (``\\x1b``)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tapetui import Tape, TapeDrift, TapeError, TapeMiss, TapeReplayedError, ToolDriftError, ToolRegistry
from tapetui.review.changelog import Entry, append_entry
from tests.builders import HEADER, call_line

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parent.parent
OSC52 = "\x1b]52;c;ZXZpbA==\x07"
TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
HOSTILE = OSC52 + TITLE + CLEAR + "\x9b2J\x9d0;c1\x9c\x07\x08\r\u202e"
# Never raw in text meant for a terminal: ESC, BEL, BS, CR, C1 controls, bidi overrides.
RAW = ["\x1b", "\x07", "\x08", "\r", "\x9b", "\x9c", "\x9d", "\u202e"]


def raw_in(text: str) -> list[str]:
    return [repr(c) for c in RAW if c in text]


def test_drift_miss_and_contract_errors_escape_what_they_quote() -> None:
    tool, path = "t" + HOSTILE, "/tapes/s" + HOSTILE + ".jsonl"
    errors: list[TapeError] = [
        TapeDrift(
            path=path,
            seq=1,
            tool=tool,
            recorded_key=tool + ":1",
            new_key=tool + ":2",
            recorded_args={"q": HOSTILE},
            new_args={"q": "x"},
            changes=[("q" + HOSTILE, HOSTILE, "x")],
        ),
        TapeMiss(path=path, seq=1, tool=tool, key=tool + ":1", args={}, nearest_seq=None, changes=[]),
        TapeMiss(
            path=path,
            seq=1,
            tool=tool,
            key=tool + ":1",
            args={},
            nearest_seq=2,
            changes=[(HOSTILE, 1, HOSTILE)],
            reason=HOSTILE,
        ),
        ToolDriftError(path=path, seq=1, tool=tool, recorded=HOSTILE, live="b", explanation=[HOSTILE]),
        TapeReplayedError(tool=tool, seq=1, type_name=HOSTILE, module="m", message=HOSTILE),
        TapeError(f"{path}:3: {HOSTILE}"),
    ]
    for e in errors:
        text = str(e)
        assert not raw_in(text), (type(e).__name__, raw_in(text))
        assert "\\x1b" in text or "\\u001b" in text, text  # shown, not dropped
    drift = errors[0]
    assert isinstance(drift, TapeDrift) and drift.tool == tool  # the attributes keep the data as it is


def test_a_multi_line_message_keeps_its_lines() -> None:
    e = TapeDrift(
        path="p",
        seq=1,
        tool="t",
        recorded_key="a",
        new_key="b",
        recorded_args={},
        new_args={},
        changes=[("x", 1, 2), ("y", 1, 2)],
    )
    assert str(e).count("\n") == 2


def _tape_with(tmp_path: Path, tool: str, args: dict[str, Any], **fields: Any) -> Path:
    tape = tmp_path / "s.jsonl"
    tape.write_bytes(HEADER + call_line(seq=1, tool=tool, args=args, **fields))
    return tape


def test_replayed_errors_escape_the_recorded_text(tmp_path: Path) -> None:
    tool = "t" + HOSTILE
    for module, name in [("builtins", "ValueError"), ("builtins", "SystemExit"), ("nowhere", "Gone" + HOSTILE)]:
        tape = _tape_with(tmp_path, tool, {"a": 1}, error={"type": name, "module": module, "message": HOSTILE})
        with Tape(tape, "replay", None, run_log=False) as t, pytest.raises(Exception) as info:
            t.call(tool, {"a": 1})
        assert not raw_in(str(info.value)), (name, raw_in(str(info.value)))
        assert "\\x1b]52;c;ZXZpbA==\\x07" in str(info.value)
        if isinstance(info.value, TapeReplayedError):
            assert info.value.message == HOSTILE  # the attribute is the data, as recorded


def test_drift_and_miss_from_a_replay_escape_tool_names_and_arguments(tmp_path: Path) -> None:
    tool = "t" + HOSTILE
    tape = _tape_with(tmp_path, tool, {"q": HOSTILE, HOSTILE: 1}, result=1)
    with Tape(tape, "replay", None, run_log=False) as t, pytest.raises(TapeDrift) as drift:
        t.call(tool, {"q": HOSTILE + "!", HOSTILE: 1})
    with Tape(tape, "replay", None, run_log=False) as t, pytest.raises(TapeMiss) as miss:
        t.call("other" + HOSTILE, {"q": HOSTILE})
    for e in (drift.value, miss.value):
        assert not raw_in(str(e)) and "\\x1b" in str(e)


def test_pytest_drift_report_escapes_control_characters(pytester: pytest.Pytester) -> None:
    pytester.makeconftest("""
import pytest
from tapetui import ToolRegistry

@pytest.fixture
def tape_registry():
    reg = ToolRegistry()
    @reg.tool(version="1", name="echo\\x1b]0;pwned\\x07")
    def echo(text: str) -> str:
        return text
    return reg
""")
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    test = 'def test_agent(tape):\n    tape.call("echo\\x1b]0;pwned\\x07", {"text": TEXT})\n'
    pytester.makepyfile(test_agent=test.replace("TEXT", repr("hello")))
    args = ("-p", "no:asyncio", "-p", "no:textual-snapshot", "--color=no")
    pytester.runpytest("--tape-mode=record", *args).assert_outcomes(passed=1)
    pytester.makepyfile(test_agent=test.replace("TEXT", repr("hello" + HOSTILE)))
    res = pytester.runpytest(*args)
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "argument drift at step 1" in out and "\\x1b]0;pwned\\x07" in out
    report = out[out.index("tapetui: ") :]
    assert not raw_in(report), raw_in(report)


def test_pytest_drift_report_holds_no_workflow_command(pytester: pytest.Pytester) -> None:
    """A model picks a tool's name: one named "x\\n::error::…" (or an argument holding "##[add-mask]…") must not make a
    line of the report that a GitHub runner reads as a workflow command in the test job's log."""
    pytester.makefile(".toml", tapes='[tapes]\ndir = "tapes"\n')
    test = 'def test_agent(tape):\n    tape.call("x\\n::error::pwned1", {"q": TEXT}, live=lambda: 1)\n'
    pytester.makepyfile(test_agent=test.replace("TEXT", repr("a")))
    args = ("-p", "no:asyncio", "-p", "no:textual-snapshot", "--color=no")
    pytester.runpytest("--tape-mode=record", *args).assert_outcomes(passed=1)
    pytester.makepyfile(test_agent=test.replace("TEXT", repr("b\n\u00a0::add-mask::pwned2 ##[error]pwned3")))
    res = pytester.runpytest(*args)
    res.assert_outcomes(failed=1)
    lines = res.stdout.lines
    assert any("pwned1" in line for line in lines) and any("pwned3" in line for line in lines)
    assert not [line for line in lines if line.lstrip().startswith("::") or "##[" in line]


def test_changelog_entries_carry_no_raw_control_characters(tmp_path: Path) -> None:
    changelog = tmp_path / "CHANGELOG.md"
    entry = Entry(
        id="abc123",
        when="2026-01-01T00:00:00Z",
        action="accept",
        session="s" + HOSTILE + "\n## forged",
        steps=(1,),
        details=("t" + HOSTILE + "  step 1  args.q  " + HOSTILE,),
        rationale="because " + HOSTILE + "\r\nsecond line\u2028third",
    )
    append_entry(changelog, entry)
    text = changelog.read_text(encoding="utf-8")
    assert not raw_in(text), raw_in(text)
    assert "\\x1b]52;c;ZXZpbA==\\x07" in text and "\\x1b]0;pwned\\x07" in text
    assert text.count("\n## ") == 1  # the session name cannot start a heading of its own
    assert "> second line\\u2028third" in text  # CRLF is a line break; other separators are shown
    assert "<!-- tapetui:entry abc123 -->" in text


def test_an_entry_makes_the_changelogs_folder_when_there_is_none(tmp_path: Path) -> None:
    changelog = tmp_path / "docs" / "tapes" / "CHANGELOG.md"
    entry = Entry("e1", "2026-01-01T00:00:00Z", "accept", "s", steps=(1,), details=(), rationale=None)
    append_entry(changelog, entry)
    append_entry(changelog, replace(entry, id="e2"))
    text = changelog.read_text(encoding="utf-8")
    assert text.count("<!-- tapetui:entry e1 -->") == text.count("<!-- tapetui:entry e2 -->") == 1


def _sh(cwd: Path, *argv: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "tapetui", *argv],
        cwd=cwd,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_cli_accept_why_cannot_retitle_a_terminal_through_the_changelog(tmp_path: Path) -> None:
    d = tmp_path / "tapes"
    d.mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    tool = "t" + HOSTILE
    golden = _tape_with(d, tool, {"q": 1}, result=1)
    cand = _tape_with(tmp_path, tool, {"q": 2}, result=2)
    cand.rename(d / "s.candidate.jsonl")
    assert golden.name == "s.jsonl"
    r = _sh(tmp_path, "accept", "tapes/s.jsonl", "--why", "ok " + OSC52 + TITLE)
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr
    text = (d / "CHANGELOG.md").read_text(encoding="utf-8")
    assert not raw_in(text), raw_in(text)
    assert "ok \\x1b]52;c;ZXZpbA==\\x07\\x1b]0;pwned\\x07" in text
    assert not raw_in((r.stdout + r.stderr).decode())


def test_registry_names_with_control_characters_are_escaped_in_errors() -> None:
    reg = ToolRegistry()
    with pytest.raises(TapeError) as info:
        reg["missing" + HOSTILE]
    assert not raw_in(str(info.value))
