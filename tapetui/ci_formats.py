"""``tapetui check --format junit|github|markdown``: the same reports as the text output, in the forms CI shows.

- **junit**: JUnit XML, one ``testcase`` per session (``classname`` the session's folder, ``file`` its golden); a
  session with findings is a ``failure`` whose message is its first finding and whose text is every line the text
  output prints for it; an unreadable session is an ``error``; a session with warnings only passes, its warnings in
  ``system-out``. Written with ``xml.etree.ElementTree`` (it escapes), every text made safe first (XML 1.0 takes no
  control characters: they are written as visible escapes, as on a terminal).
- **github**: GitHub Actions workflow commands, one per finding: ``::error file=…,line=…,title=…::text`` (a warning:
  ``::warning``), ``file`` the golden relative to the working folder and ``line`` the line of the finding's step in
  it, so the drift is shown on the pull request's diff; the data escaped as the runner requires (``%``, CR, LF, and
  ``:`` ``,`` in properties).
- **markdown**: a summary for ``$GITHUB_STEP_SUMMARY``: sessions checked and failing, findings per kind, and each
  failing session with its first findings; a session's recorded tokens once it has model turns.

Everything here is text the text output prints already: redacted as it is, and escaped again for its format.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from tapetui.core.errors import TapeError
from tapetui.core.tapefile import read_index
from tapetui.core.textsafe import inert_commands, safe_text, xml_text
from tapetui.review.findings import SessionReport

__all__ = ["FORMATS", "github", "junit", "markdown", "report_lines"]

FORMATS = ("text", "json", "junit", "github", "markdown")


def report_lines(r: SessionReport) -> list[str]:
    """The lines the text output prints under a session (its error, then its findings)."""
    out = [f"error: {r.error}"] if r.error else []
    out += [f"{'warning: ' if f.warning else ''}{f.text}" for f in r.findings]
    dims = r.dimension_line()
    if dims:
        out.append(dims)
    return out


def junit(reports: Sequence[SessionReport], total: int | None = None) -> str:
    """JUnit XML of every session checked (see the module doc); ``total``: the sessions checked, when ``reports``
    holds only those with findings (a merge of shards' reports: the others passed, and are counted)."""
    failing = [r for r in reports if r.error is None and not r.ok]
    errors = [r for r in reports if r.error is not None]
    tests = str(len(reports) if total is None else total)
    suites = ET.Element("testsuites", name="tapetui check", tests=tests)
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="tapetui check",
        tests=tests,
        failures=str(len(failing)),
        errors=str(len(errors)),
        skipped="0",
    )
    for r in reports:
        folder = r.session.rpartition("/")[0]
        case = ET.SubElement(
            suite,
            "testcase",
            classname=_xml(("tapetui." + folder.replace("/", ".")) if folder else "tapetui"),
            name=_xml(r.session),
            file=_xml(_relative(r.golden)),
        )
        text = _xml("\n".join(report_lines(r)))
        if r.error is not None:
            ET.SubElement(case, "error", message=_xml(r.error), type="unreadable").text = text
        elif not r.ok:
            first = next((f for f in r.findings if not f.warning), None)
            message = first.text if first is not None else "findings"
            kind = _xml(first.kind) if first else "finding"  # a merged report's kind is text from a file
            ET.SubElement(case, "failure", message=_xml(message), type=kind).text = text
        elif r.findings:
            ET.SubElement(case, "system-out").text = text
    ET.indent(suites)
    # printed to a CI job's log too: no line of a finding's text may read as a workflow command there
    return inert_commands('<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n")


def _xml(text: str) -> str:
    """Text XML 1.0 can hold: control characters, U+FFFE and U+FFFF (which it refuses even escaped) written as
    visible escapes."""
    return xml_text(text)


def _relative(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive
        return str(path)


def github(reports: Sequence[SessionReport]) -> str:
    """GitHub Actions annotations, one per finding (see the module doc)."""
    out: list[str] = []
    for r in reports:
        file = _relative(r.golden)
        if r.error is not None:
            out.append(_command("error", {"file": file, "title": f"tapetui: {r.session}"}, r.error))
            continue
        lines = _step_lines(r.golden) if any(f.seq is not None for f in r.findings) else {}
        for f in r.findings:
            if f.level == "pass":  # a candidate's passing verdict line: said in the text output, not an annotation
                continue
            props = {"file": file}
            line = lines.get(f.seq) if f.seq is not None else None
            if line is not None:
                props["line"] = str(line)
            props["title"] = f"tapetui: {r.session}" + (f" step {f.seq}" if f.seq is not None else "")
            # a difference a rule excused does not fail: a notice, as a warning is a warning
            kind = "warning" if f.warning else "notice" if f.level == "excused" else "error"
            out.append(_command(kind, props, f.text))
    return "".join(line + "\n" for line in out)


def _step_lines(golden: Path) -> dict[int, int]:
    """Step → its line in the golden (calls and model turns): where an annotation points."""
    try:
        idx = read_index(golden)
    except TapeError:
        return {}
    lines = dict(zip(idx.seqs, idx.lines, strict=True))
    lines.update((t.seq, t.line) for t in idx.turns)
    return lines


def _command(kind: str, props: dict[str, str], message: str) -> str:
    shown = ",".join(f"{k}={_escape_property(safe_text(v, newlines=False))}" for k, v in props.items())
    return f"::{kind} {shown}::{_escape_data(safe_text(message))}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def markdown(reports: Sequence[SessionReport], first: int = 5, total: int | None = None) -> str:
    """A Markdown job summary (see the module doc): ``first`` findings shown per failing session; ``total`` as for
    :func:`junit`."""
    failing = [r for r in reports if not r.ok]
    checked = len(reports) if total is None else total
    # findings per kind, each counted where it fails (a candidate's passing verdict lines are not findings)
    kinds = Counter(f.kind for r in reports for f in r.findings if not f.warning and f.level not in _SAID_ONLY)
    warnings = sum(1 for r in reports for f in r.findings if f.warning)
    verdict = "✅ every session matches" if not failing else f"❌ {len(failing)} of {checked} sessions with findings"
    out = [
        "## tapetui check",
        "",
        verdict,
        "",
        "| sessions | with findings | warnings |",
        "| ---: | ---: | ---: |",
        f"| {checked} | {len(failing)} | {warnings} |",
        "",
    ]
    if kinds:
        out += ["| finding | count |", "| --- | ---: |"]
        ranked = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        out += [f"| {_cell(k)} | {n} |" for k, n in ranked]
        out.append("")
    for r in failing:
        out.append(f"### `{_code(r.session)}`")
        tokens = _tokens(r.golden)
        if tokens:
            out.append(f"recorded model tokens: {tokens:,}")
        out.append("")
        shown = _failing_first(r)
        out += [f"- {_code_span(line)}" for line in shown[:first]]
        if len(shown) > first:
            out.append(f"- … {len(shown) - first} more (`tapetui check` prints them all)")
        out.append("")
    return inert_commands("\n".join(out))


_SAID_ONLY = ("pass", "excused")  # a candidate's lines that fail nothing: a passing verdict, an excused difference


def _failing_first(r: SessionReport) -> list[str]:
    """:func:`report_lines`, what fails first: the first lines a summary shows are why the session fails."""
    rank = {id(f): 2 if f.warning else 1 if f.level in _SAID_ONLY else 0 for f in r.findings}
    ordered = sorted(r.findings, key=lambda f: rank[id(f)])  # stable: each rank in the text output's order
    return report_lines(replace(r, findings=ordered))


def _tokens(golden: Path) -> int:
    try:
        idx = read_index(golden)
    except TapeError:
        return 0
    return sum(t.tokens for t in idx.turns) if idx.turns else 0


def _cell(text: str) -> str:
    """Text in a Markdown table's cell: a code span, its pipes escaped (GitHub splits a row at a pipe even in one)."""
    return _code_span(text).replace("|", "\\|")


def _code_span(line: str) -> str:
    """A finding's line as a Markdown code span: shown as it is, and nothing in it is markup — no HTML, no link
    (not even a bare ``https://…``, which GitHub links in text), no image. Its fence is longer than any run of
    backticks in the line, so the line needs no change."""
    safe = safe_text(line, newlines=False)
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(safe)), default=0) + 1)
    return f"{fence} {safe} {fence}"


_BACKTICKS = re.compile("`+")


def _code(text: str) -> str:
    return safe_text(text, newlines=False).replace("`", "'")
