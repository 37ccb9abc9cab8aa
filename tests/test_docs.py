"""The project's own documents stay true to the code and to each other.

- Every relative link in README.md, SECURITY.md, CHANGELOG.md and ``docs/*.md`` leads to a file that exists,
  and its ``#anchor`` to a heading there (anchors as GitHub makes them from headings).
- Every ``docs/NAME.md`` or ``docs/NAME.md#anchor`` that code, tests, benchmarks, examples or those documents
  cite exists, and so does each section they name after it in quotes (``docs/format.md`` ("The call key")).
- ``docs/format.md`` names every line kind the tape reader knows, every run-log event kind (``EventKind``) and
  every key of ``Tape.stats()``, each in its own section; and its example lines are lines tapetui reads.
"""

from __future__ import annotations

import ast
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tapetui.core.config import Config
from tapetui.core.runlog import EVENT_KINDS, event_problem
from tapetui.core.tape import Tape
from tapetui.core.tapefile import read_index

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
FORMAT = DOCS / "format.md"
MARKDOWN = sorted([ROOT / "README.md", ROOT / "SECURITY.md", ROOT / "CHANGELOG.md", *DOCS.glob("*.md")])
CODE_DIRS = ("tapetui", "tests", "benchmarks", "examples")

_FENCE = re.compile(r"^\s*(```|~~~)")
_LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
_CITATION = re.compile(r"docs/([A-Za-z0-9_.-]+\.md)(#[A-Za-z0-9_-]+)?")
# section names quoted right after a citation: ``docs/format.md`` ("A", "B") or ``docs/format.md``, "A"
_NAMED = re.compile(r'`{0,2},?\s*\(?\s*("[^"\n]+"(?:\s*,\s*"[^"\n]+")*)')


def _prose(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a Markdown text outside its fenced code blocks."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def _headings(path: Path) -> list[str]:
    """The headings of a Markdown file, as written (without the ``#`` marks)."""
    return [line.lstrip("#").strip() for _, line in _prose(path.read_text()) if re.match(r"#{1,6}\s", line)]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: links as their text, lower case, punctuation dropped, spaces → ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in _headings(path):
        base = _slug(h)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def _section(path: Path, title: str) -> str:
    """The text of the section headed ``title`` (its subsections included), up to the next heading of its level."""
    lines = path.read_text().splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#{1,6})\s+(.*)", line)
        if m and m.group(2).strip() == title:
            level = len(m.group(1))
            end = next(
                (j for j in range(i + 1, len(lines)) if re.match(rf"#{{1,{level}}}\s", lines[j])),
                len(lines),
            )
            return "\n".join(lines[i:end])
    raise AssertionError(f"{path.name} has no section {title!r}")


def test_the_documents_exist() -> None:
    assert FORMAT.is_file() and (DOCS / "architecture.md").is_file()


@pytest.mark.parametrize("doc", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(doc: Path) -> None:
    broken = []
    for n, line in _prose(doc.read_text()):
        for target in _LINK.findall(_CODE_SPAN.sub("", line)):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            file_part, _, anchor = target.partition("#")
            dest = (doc.parent / file_part).resolve() if file_part else doc
            if not dest.exists():
                broken.append(f"{doc.name}:{n}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{doc.name}:{n}: {target} (no such heading in {dest.name})")
    assert broken == []


def _citing_files() -> Iterator[Path]:
    for folder in CODE_DIRS:
        for p in sorted((ROOT / folder).rglob("*.py")):
            if p != Path(__file__).resolve():
                yield p
    yield from MARKDOWN


def test_every_cited_document_and_section_exists() -> None:
    found = 0
    wrong = []
    for path in _citing_files():
        text = path.read_text()
        for m in _CITATION.finditer(text):
            found += 1
            where = f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            doc = DOCS / m.group(1)
            if not doc.is_file():
                wrong.append(f"{where}: docs/{m.group(1)} does not exist")
                continue
            anchor = m.group(2)
            if anchor and anchor[1:] not in _anchors(doc):
                wrong.append(f"{where}: docs/{m.group(1)}{anchor}: no such heading")
            named = _NAMED.match(text, m.end())
            if named:
                titles = {h.replace("`", "").lower() for h in _headings(doc)}
                for name in re.findall(r'"([^"\n]+)"', named.group(1)):
                    if name.replace("`", "").lower() not in titles:
                        wrong.append(f'{where}: docs/{m.group(1)} has no section "{name}"')
    assert found, "no code cites docs/: the scan is broken"
    assert wrong == []


def _line_kinds() -> set[str]:
    """The ``type`` values the tape reader tells apart: what ``_parse_line`` compares a line's kind with."""
    tree = ast.parse((ROOT / "tapetui" / "core" / "lineparse.py").read_text())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_parse_line")
    kinds = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Name) and node.left.id == "kind":
            kinds |= {c.value for c in node.comparators if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return kinds


def test_format_names_every_line_kind() -> None:
    kinds = _line_kinds()
    assert {"session", "tool", "call", "note", "phase"} <= kinds, kinds  # guards the scan itself
    section = _section(FORMAT, "Tape lines")
    missing = sorted(k for k in kinds if f"`{k}`" not in section)
    assert missing == [], f"docs/format.md 'Tape lines' does not name the line kinds {missing}"


def test_format_names_every_run_log_event() -> None:
    section = _section(FORMAT, "The run log")
    missing = sorted(k for k in EVENT_KINDS if f"`{k}`" not in section)
    assert missing == [], f"docs/format.md 'The run log' does not name the event kinds {missing}"


def test_format_names_every_counter(tmp_path: Path) -> None:
    tape = tmp_path / "clean.jsonl"
    shutil.copy(ROOT / "sample_tapes" / "clean.jsonl", tape)
    with Tape(tape, "replay", config=Config.for_dir(tmp_path), run_log=False) as t:
        keys = set(t.stats())
    section = _section(FORMAT, "Counters")
    missing = sorted(k for k in keys if f"`{k}`" not in section)
    assert missing == [], f"docs/format.md 'Counters' does not name the stats() keys {missing}"


def _example_lines() -> list[str]:
    """The lines of the ``json`` code blocks of docs/format.md."""
    out: list[str] = []
    inside = False
    for line in FORMAT.read_text().splitlines():
        if _FENCE.match(line):
            inside = not inside and line.strip() == "```json"
            continue
        if inside and line.strip():
            out.append(line)
    return out


def test_format_examples_are_lines_tapetui_reads(tmp_path: Path) -> None:
    lines = _example_lines()
    events = [orjson.loads(line) for line in lines if '"event":' in line[:12]]
    tape_lines = [line for line in lines if line.startswith('{"type":')]
    assert len(events) + len(tape_lines) == len(lines), "an example is neither a tape line nor an event"
    assert events and tape_lines
    assert [(e["event"], event_problem(e)) for e in events if event_problem(e) or e["event"] not in EVENT_KINDS] == []
    path = tmp_path / "examples.jsonl"
    path.write_text("\n".join(tape_lines) + "\n")
    idx = read_index(path, validate=True)  # raises, naming the line, for one the reader refuses
    assert idx.key_mismatches == []  # every example call's key is the key of its arguments
    assert idx.unknown_lines == 0 and idx.torn is None
