"""``tapetui check --format junit|github|markdown``: the verdicts of the text output, in the forms CI shows, on a copy
of the sample tapes (every kind of finding: drift, contract, miss, stale, error, new tool, pending candidates)."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tapetui.ci_formats import _command, github, junit, markdown
from tapetui.cli import main
from tapetui.cli_output import Out, print_json
from tapetui.review.finding import Finding
from tapetui.review.findings import SessionReport


@pytest.fixture
def samples(sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The committed samples' copy (conftest's sample_dir), as the working folder."""
    monkeypatch.chdir(sample_dir)
    return sample_dir


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["check", *args])
    return code, capsys.readouterr().out


def text_verdict(out: str) -> tuple[int, int, list[str]]:
    """(sessions, with findings, the sessions the text output lists) of ``tapetui check``'s text."""
    m = re.search(r"^(\d+) session\(s\) checked, (\d+) with findings$", out, re.M)
    assert m, out
    listed = [line for line in out.splitlines() if line and not line.startswith(" ") and line != m.group(0)]
    return int(m.group(1)), int(m.group(2)), listed


def test_every_format_gives_the_text_outputs_verdict_and_exit_code(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, text = check(capsys)
    sessions, failing, _ = text_verdict(text)
    assert code == 1 and failing > 0
    for fmt in ("junit", "github", "markdown", "json"):
        assert check(capsys, "--format", fmt)[0] == code, fmt
    _, xml = check(capsys, "--format", "junit")
    suite = ET.fromstring(xml).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    assert len(cases) == sessions and int(suite.get("failures", "0")) == failing
    failed = {c.get("name") for c in cases if c.find("failure") is not None}
    assert len(failed) == failing
    drift = next(c for c in cases if c.get("name") == "drift_summarize")
    assert drift.get("file") == "sample_tapes/drift_summarize.jsonl"
    body = drift.findtext("failure") or ""
    assert "summarize  step 3  [DRIFT]" in body or "args.max_words" in body
    _, md = check(capsys, "--format", "markdown")
    assert md.startswith("## tapetui check") and f"❌ {failing} of {sessions} sessions with findings" in md
    assert all(f"### `{name}`" in md for name in failed)


def test_github_annotations_point_at_the_drifted_steps_line(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = check(capsys, "--format", "github")
    assert code == 1
    lines = out.splitlines()
    assert lines and all(
        re.match(r"^::(error|warning|notice) file=[^,:]+(,line=\d+)?,title=[^:]*::", ln) for ln in lines
    )
    # a candidate's passing verdict is no annotation; an excused difference is a notice, never an error
    assert not [ln for ln in lines if "[VERDICT]" in ln and " pass " in ln]
    assert [ln for ln in lines if ln.startswith("::notice") and "new_tool::[TOOLS]" in ln]
    tape = (samples / "sample_tapes" / "drift_summarize.jsonl").read_text().splitlines()
    step3 = next(n for n, ln in enumerate(tape, 1) if '"type":"call"' in ln and '"seq":3,' in ln)
    drifts = [ln for ln in lines if "drift_summarize step 3::" in ln and ln.startswith("::error")]
    assert drifts and all(f",line={step3}," in ln for ln in drifts)


def test_github_escapes_what_would_end_a_command() -> None:
    line = _command("error", {"file": "a,b:c.jsonl", "title": "x"}, "100% done\nnext line\r")
    assert line == "::error file=a%2Cb%3Ac.jsonl,title=x::100%25 done%0Anext line\\x0d"  # CR: a visible escape


def test_hostile_text_stays_inert_in_every_format(tmp_path: Path) -> None:
    r = SessionReport(
        session="evil\x1b]0;pwned\x07",
        golden=tmp_path / "evil.jsonl",
        findings=[Finding("drift", "args.q  'a' → 'b\x1b[2J\x00' *bold* `code` <b>", seq=None)],
    )
    xml = junit([r])
    ET.fromstring(xml)  # XML 1.0 takes no control character: escaped, it parses
    assert "\x1b" not in xml and "\\x1b" in xml
    for out in (github([r]), markdown([r])):
        assert "\x1b" not in out and "\x00" not in out and "\x07" not in out
    # a finding's line is a code span (its fence longer than any backtick run in it): no markup of it renders
    assert "- `` args.q  'a' → 'b\\x1b[2J\\x00' *bold* `code` <b> ``" in markdown([r])


def test_markdown_carries_no_bare_link_and_junit_no_noncharacter(tmp_path: Path) -> None:
    """GitHub links a bare https://… or www.… in Markdown text; U+FFFE and U+FFFF are not XML 1.0 characters."""
    r = SessionReport(
        session="s",
        golden=tmp_path / "s.jsonl",
        findings=[Finding("drift", 'args.t  "a\ufffeb" → "see https://evil.example/login or www.evil.example"')],
    )
    md = markdown([r])
    line = next(x for x in md.splitlines() if "evil.example" in x)
    assert re.fullmatch(r"- (`+) .* \1", line), line  # the whole line inside one code span
    xml = junit([r])
    ET.fromstring(xml)
    assert "\ufffe" not in xml and "\\ufffe" in xml


def _a_runner_reads(line: str) -> bool:
    """Whether a GitHub runner takes ``line`` of a job's log for a workflow command: ``::`` after it trimmed every
    Unicode space (.NET's TrimStart), or the older ``##[command]`` anywhere in it."""
    return line.lstrip().startswith("::") or "##[" in line


COMMANDS = [
    "::error file=README.md,line=1::PWNED",
    "  ::add-mask::x",
    "::stop-commands::tok",
    "\u00a0::stop-commands::tok",  # a no-break space: the runner trims it
    "j\n\u3000::add-mask::X",  # an ideographic space after a newline (JUnit keeps the newline)
    "\u2007\u205f::add-mask::X",
    "x ##[add-mask]LEGACY",  # the older syntax, read anywhere in a line
]


@pytest.mark.parametrize("name", COMMANDS)
def test_no_output_line_is_a_workflow_command(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A session or finding text must never make a line of the text, JUnit, Markdown or JSON output a command: a
    GitHub runner reads such a line of a job's log as one (an annotation, a mask, commands switched off)."""
    r = SessionReport(session=name, golden=tmp_path / "s.jsonl", findings=[Finding("note", name)])
    for out in (junit([r]), markdown([r])):
        assert not [x for x in out.splitlines() if _a_runner_reads(x)], out
    buf = io.StringIO()
    Out(buf).line(name)
    assert not _a_runner_reads(buf.getvalue())
    print_json({"session": name})
    out = capsys.readouterr().out
    assert not [x for x in out.splitlines() if _a_runner_reads(x)] and json.loads(out) == {"session": name}


def test_json_and_another_format_at_once_is_a_usage_error(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--json", "--format", "junit"]) == 2
    assert "--json is --format json" in capsys.readouterr().err


def test_a_markdown_summary_shows_why_a_session_fails_first(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, md = check(capsys, "--format", "markdown")
    section = md.split("### `drift_summarize`")[1].split("###")[0]
    shown = [ln for ln in section.splitlines() if ln.startswith("- ` ")]
    assert any("[VERDICT] arguments  FAIL" in ln for ln in shown) and not any(" pass " in ln for ln in shown)


def test_a_merged_reports_finding_kind_is_xml_text_in_junit(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = []
    for k in (1, 2):
        assert main(["check", "--shard", f"{k}/2", "--json"]) in (0, 1)
        doc = json.loads(capsys.readouterr().out)
        for rep in doc["reports"]:
            for f in rep["findings"]:
                f["kind"] = "\x1b[2J::warning::k"  # a report is a file anyone's job may have written
        paths.append(samples / f"s{k}.json")
        paths[-1].write_text(json.dumps(doc))
    code = main(["check", "--merge", *map(str, paths), "--format", "junit"])
    out = capsys.readouterr().out
    assert code == 1 and "\x1b" not in out
    ET.fromstring(out)  # well-formed
