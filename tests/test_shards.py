"""``tapetui check --shard K/N`` and ``--merge``: a folder's check split over CI runners gives the verdict of one run,
and a merge is never green by leaving a shard, a folder or a version out."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tapetui.cli import main
from tapetui.review.shards import in_shard


@pytest.fixture
def samples(sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The committed samples' copy (conftest's sample_dir), as the working folder."""
    monkeypatch.chdir(sample_dir)
    return sample_dir


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def shard_reports(capsys: pytest.CaptureFixture[str], folder: Path, n: int) -> list[Path]:
    paths = []
    for k in range(1, n + 1):
        code, out, err = run(capsys, "check", "--shard", f"{k}/{n}", "--json")
        assert code in (0, 1), err
        (folder / f"shard{k}.json").write_text(out)
        paths.append(folder / f"shard{k}.json")
    return paths


def test_the_shards_merged_are_the_verdict_of_one_check(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, single, _ = run(capsys, "check", "--json")
    whole = json.loads(single)
    paths = shard_reports(capsys, samples, 3)
    docs = [json.loads(p.read_text()) for p in paths]
    assert sum(d["sessions"] for d in docs) == whole["sessions"]  # every session in exactly one shard
    assert {d["shard"]["k"] for d in docs} == {1, 2, 3} and len({d["sessions_digest"] for d in docs}) == 1
    merged_code, merged, err = run(capsys, "check", "--merge", *map(str, paths), "--json")
    assert merged_code == code == 1, err
    m = json.loads(merged)
    assert (m["ok"], m["sessions"], m["failing"]) == (whole["ok"], whole["sessions"], whole["failing"])
    assert [r["session"] for r in m["reports"]] == sorted(r["session"] for r in whole["reports"])
    assert [r["findings"] for r in m["reports"]] == [
        r["findings"] for r in sorted(whole["reports"], key=lambda r: r["session"])
    ]
    text_code, text, _ = run(capsys, "check", "--merge", *map(str, paths))
    assert text_code == 1 and f"{whole['sessions']} session(s) checked in 3 shard(s), {whole['failing']}" in text


def test_a_sessions_shard_depends_on_its_name_alone() -> None:
    names = [f"suite/case_{i}" for i in range(200)]
    before = {n: next(k for k in range(1, 5) if in_shard(n, k, 4)) for n in names}
    after = {n: next(k for k in range(1, 5) if in_shard(n, k, 4)) for n in [*names, "suite/new_one"]}
    assert all(after[n] == before[n] for n in names)  # adding a session moves no other
    assert len(set(before.values())) == 4  # and the split uses every shard


@pytest.mark.parametrize("shard", ["0/3", "3/2", "a/b", "1", "1/0", "/", "1/99999999"])
def test_a_shard_that_is_not_one_is_a_usage_error(
    samples: Path, capsys: pytest.CaptureFixture[str], shard: str
) -> None:
    code, out, err = run(capsys, "check", "--shard", shard)
    assert code == 2 and "--shard takes K/N" in err and not out


def test_a_merge_that_leaves_something_out_is_never_green(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = shard_reports(capsys, samples, 3)
    code, out, err = run(capsys, "check", "--merge", str(paths[0]), str(paths[2]))
    assert code == 2 and "shard(s) 2/3 missing" in err and not out
    code, _, err = run(capsys, "check", "--merge", str(paths[0]), str(paths[0]), str(paths[1]), str(paths[2]))
    assert code == 2 and "shard 1/3 again" in err
    doc = json.loads(paths[1].read_text())
    for key, value in (("folder", "elsewhere"), ("tapetui", "0.0.1"), ("sessions_digest", "0" * 64)):
        bad = samples / f"bad_{key}.json"
        bad.write_text(json.dumps({**doc, key: value}))
        code, _, err = run(capsys, "check", "--merge", str(paths[0]), str(bad), str(paths[2]))
        assert code == 2 and f"its {key} is" in err, key
    truncated = samples / "truncated.json"
    truncated.write_text(paths[1].read_text()[:40])
    code, _, err = run(capsys, "check", "--merge", str(paths[0]), str(truncated), str(paths[2]))
    assert code == 2 and "truncated.json: not a check report" in err and "Traceback" not in err
    plain = samples / "plain.json"
    plain.write_text(run(capsys, "check", "--json")[1])  # a whole check's report: no shard identity
    code, _, err = run(capsys, "check", "--merge", str(plain))
    assert code == 2 and "not a shard's check report" in err


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "github", "markdown"])
def test_check_in_two_processes_prints_what_one_prints(
    samples: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    one = run(capsys, "check", "--format", fmt, "--jobs", "1")
    two = run(capsys, "check", "--format", fmt, "--jobs", "2")
    assert one[0] == two[0] == 1
    assert one[1] == two[1]  # the same reports, in the same order, the same text to the byte


@pytest.mark.parametrize("jobs", ["0", "-1", "two", "99999"])
def test_jobs_that_are_not_a_number_of_processes_are_a_usage_error(
    samples: Path, capsys: pytest.CaptureFixture[str], jobs: str
) -> None:
    code, out, err = run(capsys, "check", f"--jobs={jobs}")
    assert code == 2 and "--jobs takes a number of processes" in err and not out


def test_a_merge_prints_every_ci_format_as_one_check_does(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in shard_reports(capsys, samples, 3)]
    for fmt in ("github", "markdown"):
        single = run(capsys, "check", "--format", fmt)
        merged = run(capsys, "check", "--merge", *paths, "--format", fmt)
        assert merged[0] == single[0] == 1
        assert merged[1] == single[1], fmt  # the same annotations (file and line of each step), the same summary
    whole = ET.fromstring(run(capsys, "check", "--format", "junit")[1])
    code, out, _ = run(capsys, "check", "--merge", *paths, "--format", "junit")
    merged_xml = ET.fromstring(out)
    assert code == 1 and merged_xml.get("tests") == whole.get("tests")  # every session counted
    suite, whole_suite = merged_xml.find("testsuite"), whole.find("testsuite")
    assert suite is not None and whole_suite is not None
    assert (suite.get("failures"), suite.get("errors")) == (whole_suite.get("failures"), whole_suite.get("errors"))
    failing = {c.get("name") for c in whole_suite if c.find("failure") is not None}
    assert failing and failing <= {c.get("name") for c in suite}  # each failing session, a testcase of its own
