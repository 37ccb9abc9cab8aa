"""``tapetui check --shard K/N`` and ``--merge``: a folder's check split over CI runners gives the verdict of one run,
and a merge is never green by leaving a shard, a folder or a version out."""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

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


def shard_reports(
    capsys: pytest.CaptureFixture[str], folder: Path, n: int, codes: tuple[int, ...] = (0, 1)
) -> list[Path]:
    paths = []
    for k in range(1, n + 1):
        code, out, err = run(capsys, "check", "--shard", f"{k}/{n}", "--json")
        assert code in codes, err
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
    assert m["reports"] == whole["reports"]  # every session's report, in the order one check lists them
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
        said = "its sessions are not this folder's" if key == "sessions_digest" else f"its {key} is"
        assert code == 2 and said in err, key
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


def test_a_merged_text_is_the_text_of_one_check(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [str(p) for p in shard_reports(capsys, samples, 3)]
    single = run(capsys, "check")
    merged = run(capsys, "check", "--merge", *paths)
    assert merged[0] == single[0] == 1
    # every session's lines (its findings, its run dimensions), then the summary, which names the shards
    assert merged[1].splitlines()[:-1] == single[1].splitlines()[:-1]


def test_a_merge_checks_what_each_report_says(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """What a report says that can be checked is: a hand-edited or forged count, verdict, entry or session is
    refused (exit 2), never merged into a verdict, let alone a green one."""
    paths = shard_reports(capsys, samples, 2)
    docs = [json.loads(p.read_text()) for p in paths]
    k = next(i for i, d in enumerate(docs) if d["reports"])  # a shard with a session with findings
    entry = docs[k]["reports"][0]
    other = docs[1 - k]
    edits = {
        "failing 0": {**docs[k], "failing": 0},
        "ok flipped": {**docs[k], "reports": [{**entry, "ok": not entry["ok"]}, *docs[k]["reports"][1:]]},
        "an entry that is no object": {**docs[k], "reports": ["x", *docs[k]["reports"]]},
        "findings that are text": {**docs[k], "reports": [{**entry, "findings": "x"}, *docs[k]["reports"][1:]]},
        "an entry without its error": {
            **docs[k],
            "reports": [{f: v for f, v in entry.items() if f != "error"}, *docs[k]["reports"][1:]],
        },
        "require_run that is no flag": {**docs[k], "require_run": "yes"},
        "a session of the other shard": {**other, "reports": [*other["reports"], entry]},
        "sessions counted twice": {**docs[k], "sessions": docs[k]["sessions"] * 2},
        "negative sessions": {**docs[k], "sessions": -85},
        "a session the folder has not": {
            **docs[k],
            "reports": [*docs[k]["reports"], {**entry, "session": _named_in_shard(k + 1, 2)}],
            "failing": docs[k]["failing"] + (not entry["ok"]),
        },
    }
    for what, doc in edits.items():
        bad = samples / "edited.json"
        bad.write_text(json.dumps(doc))
        given = (
            [str(bad), str(paths[1 - k])]
            if doc is not edits["a session of the other shard"]
            else [
                str(paths[k]),
                str(bad),
            ]
        )
        code, out, err = run(capsys, "check", "--merge", *given)
        assert code == 2 and "Traceback" not in err and not out, (what, err)
    everyone = [{**d, "tapetui": "0.0.1-other"} for d in docs]  # each report of another tapetui, all alike
    for i, d in enumerate(everyone):
        (samples / f"other{i}.json").write_text(json.dumps(d))
    code, _, err = run(capsys, "check", "--merge", str(samples / "other0.json"), str(samples / "other1.json"))
    assert code == 2 and "its tapetui is '0.0.1-other', and here it is" in err


def _named_in_shard(k: int, n: int) -> str:
    return next(name for i in range(1000) if in_shard(name := f"ghost/session_{i}", k, n))


def test_a_merge_of_an_unreadable_session_exits_as_one_check_does(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden = next(p for p in samples.rglob("*.jsonl") if not p.name.endswith((".run.jsonl", ".candidate.jsonl")))
    with golden.open("ab") as fh:
        fh.write(b"not json\n{}\n")
    single = run(capsys, "check")
    code, _, err = run(capsys, "check", "--merge", *map(str, shard_reports(capsys, samples, 3, (0, 1, 2))))
    assert single[0] == code == 2 and "invalid JSON" in err


def test_a_report_that_is_no_regular_file_is_refused(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = shard_reports(capsys, samples, 2)
    fifo = samples / "fifo.json"
    os.mkfifo(fifo)  # no writer will ever come: opened, the merge would wait for one for ever
    code, _, err = run(capsys, "check", "--merge", str(paths[0]), str(fifo))
    assert code == 2 and "not a regular file (a FIFO)" in err


def test_merge_and_shard_options_that_are_not_one_are_usage_errors(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "check", "--shard", "")
    assert code == 2 and "--shard takes K/N" in err and not out  # never the whole folder, quietly
    paths = [str(p) for p in shard_reports(capsys, samples, 2)]
    code, _, err = run(capsys, "check", "--merge", *paths, "--jobs", "0")
    assert code == 2 and "without --shard, --jobs, --require-run or samples" in err


def test_a_merge_refuses_reports_of_other_files_or_shifted_counts(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each shard's report names the files it checked (a digest of its goldens): reports of another
    commit of the same sessions, or counts moved from one shard to another, are refused."""
    paths = shard_reports(capsys, samples, 2)
    docs = [json.loads(p.read_text()) for p in paths]
    shifted = [{**docs[0], "sessions": docs[0]["sessions"] + 1}, {**docs[1], "sessions": docs[1]["sessions"] - 1}]
    for i, d in enumerate(shifted):
        (samples / f"shifted{i}.json").write_text(json.dumps(d))
    code, _, err = run(capsys, "check", "--merge", str(samples / "shifted0.json"), str(samples / "shifted1.json"))
    assert code == 2 and "it has" in err and "an edited report" in err
    golden = next(p for p in samples.rglob("*.jsonl") if not p.name.endswith((".run.jsonl", ".candidate.jsonl")))
    # a shard's job may fill or replay before it checks: candidates and run logs it wrote are no other commit
    golden.with_name(golden.stem + ".candidate.jsonl").write_bytes(golden.read_bytes())
    assert run(capsys, "check", "--merge", *map(str, paths))[0] in (0, 1)
    golden.write_bytes(golden.read_bytes() + b"\n")  # another commit: the same sessions, other bytes
    code, _, err = run(capsys, "check", "--merge", *map(str, paths))
    assert code == 2 and "another commit" in err


def test_a_session_whose_file_name_is_not_utf8_is_checked_sharded_and_merged(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A file name that is not UTF-8 (a session name with lone surrogates in Python) is shown as its escape in text
    and JSON (never a traceback, never raw bytes), and its shard's report merges."""
    tapes = samples / "sample_tapes"
    for suffix in (".jsonl", ".run.jsonl"):  # a session with findings: its report is in the JSON
        os.link(tapes / f"miss_extra_doc{suffix}", os.fsencode(tapes) + b"/bad\xff\xfe" + suffix.encode())
    code, out, err = run(capsys, "check", "--json")
    assert code == 1 and "Traceback" not in err and "bad\\\\udcff\\\\udcfe" in out
    text = run(capsys, "check")[1]
    assert "\udcff" not in text
    paths = shard_reports(capsys, samples, 2)
    assert run(capsys, "check", "--merge", *map(str, paths))[0] == 1


def test_reports_from_check_processes_are_the_reports_one_process_makes(samples: Path) -> None:
    """Clean sessions come back from a worker as their name and verdicts' fields: made whole again, every report
    (its verdicts too, which the check cache keeps) is the one process's."""
    from tapetui.core.config import load_config
    from tapetui.review.findings import check

    cfg = load_config(samples / "tapes.toml")

    def seen(jobs: int) -> list[tuple[object, ...]]:
        reports = check(cfg.tapes_dir, cfg, jobs=jobs)
        return [(r.session, r.golden, r.ok, r.findings, r.error, r.run_verdicts) for r in reports]

    one = seen(1)
    assert any(r[2] and r[5] for r in one)  # clean sessions with verdicts: the compact way is taken
    assert seen(2) == one


def test_a_report_too_deep_to_send_back_from_a_check_process_is_made_in_the_parent(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A candidate whose result is nested 500 deep (the recorder takes it, and one process compares it) makes a
    report pickle cannot send back from a check process: that session is checked again in the parent, and the
    output is one process's, never "nested too deeply" with no report at all."""
    from tests.builders import HEADER, call_line

    def nest(n: int, leaf: object) -> object:
        for i in range(n):
            leaf = {"a": leaf} if i % 2 else [leaf]
        return leaf

    tapes = samples / "sample_tapes"
    (tapes / "deep.jsonl").write_bytes(HEADER + call_line(seq=1, tool="fetch", args={"q": 1}, result=nest(500, "a")))
    cand = HEADER + call_line(seq=1, tool="fetch", args={"q": 1}, result=nest(500, "b"))
    (tapes / "deep.candidate.jsonl").write_bytes(cand)
    one = run(capsys, "check", "--jobs", "1")
    assert one[0] == 1 and "deep" in one[1]
    assert run(capsys, "check", "--jobs", "2") == one


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_require_run_makes_a_golden_no_run_replayed_a_finding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], jobs: str
) -> None:
    """A test deleted or skipped leaves its golden without a run log: green by default (nothing to judge), a finding
    with --require-run, in one process or several, from the check cache or not."""
    from tests.builders import HEADER, call_line

    tapes = tmp_path / "tapes"
    tapes.mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    line = call_line(seq=1, tool="t", args={"i": 1}, result=1)
    for name in ("replayed", "forgotten"):
        (tapes / f"{name}.jsonl").write_bytes(HEADER + line)
    (tapes / "replayed.run.jsonl").write_bytes(
        b'{"event":"start","mode":"replay"}\n{"event":"hit","seq":1,"tool":"t","key":"%s","step":1}\n'
        % json.loads(line)["key"].encode()
        + b'{"event":"end","stats":{}}\n'
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TAPETUI_CACHE_DIR", str(tmp_path / "cache"))
    assert run(capsys, "check", "--jobs", jobs)[0] == 0
    for _ in range(2):  # the second from the check cache
        code, out, _ = run(capsys, "check", "--jobs", jobs, "--require-run")
        assert code == 1 and "forgotten\n  no run log: no run replayed this session" in out and "replayed\n" not in out
    assert run(capsys, "check", "--jobs", jobs)[0] == 0  # what the cache kept does not depend on the option


def test_a_value_nested_about_as_deep_as_python_walks_gets_one_verdict_with_any_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A check process runs its sessions under its pool's frames: a candidate nested just shallow enough for one
    process to compare was an error there (exit 2 for --jobs 2, a diff for --jobs 1). Each process now checks with
    the frames one process has: at the deepest value one process compares, and below it, every --jobs agrees."""
    from tests.builders import HEADER, call_line

    tapes = tmp_path / "tapes"
    tapes.mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    line = call_line(seq=1, tool="f", args={"x": 1}, result="LEAF")
    for name in ("aaa", "zzz"):  # so that --jobs 2 does start two processes
        (tapes / f"{name}.jsonl").write_bytes(HEADER + line)
    monkeypatch.chdir(tmp_path)

    def deep(depth: int) -> None:
        for name, leaf in (("deep.jsonl", b"1"), ("deep.candidate.jsonl", b"2")):
            (tapes / name).write_bytes(HEADER + line.replace(b'"LEAF"', b"[" * depth + leaf + b"]" * depth))

    low, high = 100, 3000  # one process compares `low` levels, not `high`: the deepest it compares is found
    while high - low > 1:
        mid = (low + high) // 2
        deep(mid)
        low, high = (mid, high) if run(capsys, "check", "--jobs", "1")[0] == 1 else (low, mid)
    for depth in (low, low - 4, low - 12, high):
        deep(depth)
        one, two = run(capsys, "check", "--jobs", "1"), run(capsys, "check", "--jobs", "2")
        assert one == two, depth
        assert one[0] == (1 if depth < high else 2)


def test_arguments_keyed_again_on_a_stack_of_their_own_get_one_verdict_with_any_jobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A call's arguments too deep for the caller's stack are keyed again on a fresh thread's stack: in a check
    process (whose recursion limit is raised for its pool's frames) that stack held more, and a golden one process
    calls unkeyable was green with --jobs 2. Around the deepest arguments a fresh stack keys, every --jobs agrees."""
    import threading

    from tapetui.core.keys import key_of
    from tests.builders import HEADER, call_line

    tapes = tmp_path / "tapes"
    tapes.mkdir()
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    for name in ("aaa", "zzz"):  # so that --jobs 2 does start two processes
        (tapes / f"{name}.jsonl").write_bytes(HEADER + call_line(seq=1, tool="f", args={"x": 1}, result=1))
    monkeypatch.chdir(tmp_path)

    def deep(depth: int) -> None:  # a golden whose stored key is the key of its arguments, keyed on a deep stack
        args: Any = 1
        for _ in range(depth):
            args = [args]
        box: list[str] = []
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(limit + 5000)
        try:
            worker = threading.Thread(target=lambda: box.append(key_of("f", {"a": args})))
            worker.start()
            worker.join()
        finally:
            sys.setrecursionlimit(limit)
        line = call_line(seq=1, tool="f", args={"a": "ARGS"}, result=1)
        line = line.replace(json.loads(line)["key"].encode(), box[0].encode())
        (tapes / "deep.jsonl").write_bytes(HEADER + line.replace(b'"ARGS"', b"[" * depth + b"1" + b"]" * depth))

    low, high = 100, 1020  # one process keys `low` levels, not `high` (past it orjson reads no tape line)
    while high - low > 1:
        mid = (low + high) // 2
        deep(mid)
        low, high = (mid, high) if run(capsys, "check", "--jobs", "1")[0] == 0 else (low, mid)
    for depth in (low, low - 4, high, high + 4):
        deep(depth)
        one, two = run(capsys, "check", "--jobs", "1"), run(capsys, "check", "--jobs", "2")
        assert one == two, depth
        assert one[0] == (0 if depth < high else 1), (depth, one)


def test_json_text_as_deep_as_a_stack_walks_is_keyed_alike_from_any_depth(tmp_path: Path) -> None:
    """A tool's arguments holding JSON text nested deep enough to exhaust a deep caller's stack (an agent framework
    under pytest) are redacted, and keyed, as from a shallow one: the replay serves the call, never a drift."""
    from tapetui import Tape, ToolRegistry
    from tapetui.core.config import load_config

    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "."\n[redact]\nkeys = ["zorkfield"]\n')  # JSON text is walked
    config = load_config(tmp_path / "tapes.toml")
    doc = "[" * 850 + '{"n": 1}' + "]" * 850
    reg = ToolRegistry()
    reg.register(lambda doc: {"doc": doc}, name="echo", version="1")

    def at_depth(frames: int, mode: str) -> Any:
        if frames:
            return at_depth(frames - 1, mode)
        with Tape(tmp_path / "s.jsonl", mode, reg, config=config) as tape:
            return tape.call("echo", {"doc": doc})

    assert at_depth(300, "record") == {"doc": doc}
    assert at_depth(0, "replay") == {"doc": doc}  # what the tape holds: the text, as redacted from any depth
    assert at_depth(300, "replay") == {"doc": doc}


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork")
def test_a_check_process_killed_midway_is_an_error_never_a_verdict(
    samples: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tapetui.review import findings

    checked = findings._worker_check

    def dies_on_the_second(i: int) -> object:  # the forked worker has this module as patched here
        if i == 1:
            os._exit(137)  # as the out-of-memory killer leaves a process: no exception, no report
        return checked(i)

    dies_on_the_second.__module__, dies_on_the_second.__qualname__ = findings.__name__, "_worker_check"  # sent by name
    monkeypatch.setattr(findings, "_worker_check", dies_on_the_second)
    code, out, err = run(capsys, "check", "--jobs", "2")
    assert code == 2 and "a check process ended abruptly" in err and "Traceback" not in err
    assert "checked" not in out  # no verdict line: nothing is concluded


class _NoProcesses:  # as ProcessPoolExecutor fails where the platform has no fork to give or no shared memory
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise OSError(38, "Function not implemented")


def test_where_no_check_process_can_start_auto_checks_in_one_and_an_explicit_count_is_an_error(
    samples: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tapetui.review import findings

    one = run(capsys, "check", "--jobs", "1")
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor", _NoProcesses)  # as the check imports it
    monkeypatch.setattr(findings, "AUTO_JOBS_FROM", 1)  # auto would use every core even for the samples
    monkeypatch.setattr(findings, "usable_cores", lambda: 2)
    code, out, err = run(capsys, "check", "--jobs", "auto")
    assert (code, out) == one[:2] and "no check processes could be started here" in err
    code, out, err = run(capsys, "check", "--jobs", "2")
    assert code == 2 and "cannot run 2 check processes here (Function not implemented)" in err and not out


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="needs fork")
def test_a_check_process_sent_sigterm_is_an_error_never_a_silent_exit(
    samples: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal

    from tapetui import cli
    from tapetui.review import findings

    checked = findings._worker_check

    def terminated_on_the_second(i: int) -> object:
        if i == 1:
            os.kill(os.getpid(), signal.SIGTERM)  # one worker only, as `kill PID` of it does
        return checked(i)

    terminated_on_the_second.__module__ = findings.__name__
    terminated_on_the_second.__qualname__ = "_worker_check"
    monkeypatch.setattr(findings, "_worker_check", terminated_on_the_second)
    before = signal.signal(signal.SIGTERM, cli._terminated)  # as `tapetui` (cli.run) has it, and forks it
    try:
        code, out, err = run(capsys, "check", "--jobs", "2")
    finally:
        signal.signal(signal.SIGTERM, before)
    assert code == 2 and "a check process ended abruptly" in err and "checked" not in out


# ---- what a hostile tester found: every shard lists what one check lists, and a merge holds to one config -------
def _merged_is_single(
    capsys: pytest.CaptureFixture[str], folder: Path, n: int, *fmt: str, paths: list[Path] | None = None
) -> tuple[int, str]:
    """``check`` and the merge of its ``n`` shards (``paths``: their reports, made here when None), in format
    ``fmt``: the same exit code and output (the text's summary line aside, which names the shards); returns them."""
    single = run(capsys, "check", *fmt)
    paths = paths or shard_reports(capsys, folder, n, (0, 1, 2))
    merged = run(capsys, "check", "--merge", *map(str, paths), *fmt)
    assert merged[0] == single[0], (single, merged)
    if not fmt:
        assert merged[1].splitlines()[:-1] == single[1].splitlines()[:-1]
    elif fmt == ("--json",):  # the merge says how many shards it merged, too
        assert {k: v for k, v in json.loads(merged[1]).items() if k != "shards"} == json.loads(single[1])
    elif "junit" in fmt:  # a merge has a testcase for each session with findings, in order; the others counted
        cases = [c for c in ET.fromstring(single[1]).iter("testcase") if len(c)]
        assert [ET.tostring(c) for c in ET.fromstring(merged[1]).iter("testcase")] == [ET.tostring(c) for c in cases]
    else:
        assert merged[1] == single[1]
    return single[0], single[1]


def test_a_symlink_out_of_the_folder_fails_every_shard_it_falls_in_and_the_merge(
    samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tapes = samples / "sample_tapes"
    outside = tmp_path / "outside"
    (outside / "folder").mkdir(parents=True)
    (outside / "ext.jsonl").write_bytes((tapes / "clean.jsonl").read_bytes())
    (outside / "folder" / "inner.jsonl").write_bytes((tapes / "clean.jsonl").read_bytes())
    (tapes / "ext.jsonl").symlink_to(outside / "ext.jsonl")
    (tapes / "linked").symlink_to(outside / "folder")
    code, out = _merged_is_single(capsys, samples, 3)
    assert code == 2 and "ext" in out and "linked" in out and "outside the tapes folder" in out
    assert _merged_is_single(capsys, samples, 2, "--format", "github")[0] == 2


def test_a_symlink_loop_where_a_tape_should_be_is_an_error_never_passed_over(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tapes = samples / "sample_tapes"
    (tapes / "loop.jsonl").symlink_to("loop.jsonl")
    (tapes / "a.jsonl").symlink_to("b.jsonl")
    (tapes / "b.jsonl").symlink_to("a.jsonl")
    (tapes / "dirloop").symlink_to("dirloop")  # a loop not named like a tape: nothing to check
    code, out, err = run(capsys, "check")
    assert code == 2 and "Traceback" not in err
    for name in ("loop", "a", "b"):
        assert f"{name}\n  error: " in out and f"{name}.jsonl: Too many levels of symbolic links" in err
    assert _merged_is_single(capsys, samples, 2)[0] == 2


def test_a_folder_check_cannot_list_is_an_error_never_passed_over(
    samples: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sub-folder of the tapes folder that cannot be listed (made by another user with a restrictive umask) holds
    sessions check cannot see: an error naming the folder, never a green check of the others."""
    from tests.builders import refuse_listing

    tapes = samples / "sample_tapes"
    suite = tapes / "suite"
    suite.mkdir()
    for name in ("drift_summarize.jsonl", "drift_summarize.run.jsonl"):
        (suite / name).write_bytes((tapes / name).read_bytes())
    refuse_listing(monkeypatch, "suite")
    code, out, err = run(capsys, "check")
    assert code == 2 and "Traceback" not in err
    assert "suite\n  error: " in out and "suite: a folder check cannot list (Permission denied)" in err
    assert _merged_is_single(capsys, samples, 2)[0] == 2


def test_a_merge_refuses_shards_checked_under_another_config_or_other_options(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The verdicts follow from tapes.toml's rules and from --require-run: shards that differ in either are no
    check of one folder, and their merge is refused, never green."""
    loose = shard_reports(capsys, samples, 2)
    toml = samples / "tapes.toml"
    toml.write_text(toml.read_text().replace('stale_policy = "warn"', 'stale_policy = "miss"'))
    code, _, err = run(capsys, "check", "--merge", *map(str, loose))
    assert code == 2 and "another tapes.toml" in err
    first = run(capsys, "check", "--shard", "1/2", "--json", "--require-run")[1]
    (samples / "required.json").write_text(first)
    strict_second = shard_reports(capsys, samples, 2)[1]
    code, _, err = run(capsys, "check", "--merge", str(samples / "required.json"), str(strict_second))
    assert code == 2 and "with --require-run" in err and "under one set of options" in err


def test_a_shard_lists_the_sessions_as_check_does_after_recover_and_sees_a_parked_new_session(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tapetui.core.config import load_config
    from tapetui.core.locks import session_lock
    from tapetui.review import parking

    cfg = load_config(samples / "tapes.toml")
    fresh = cfg.tapes_dir / "fresh.jsonl"
    fresh.with_name("fresh.candidate.jsonl").write_bytes((cfg.tapes_dir / "clean.jsonl").read_bytes())
    with session_lock(fresh):  # a check --samples killed while it had parked a new session's candidate
        parking._park(cfg, fresh)
    assert not fresh.with_name("fresh.candidate.jsonl").exists()
    code, out, err = run(capsys, "check", "--shard", "1/1")  # recover puts it back first: then it is listed
    assert code == 1 and "put the pending candidate back" in err and "pending new session fresh" in out
    # a journal this machine did not write (a pull request's) stays, and its session is a finding of every front
    forged = cfg.tapes_dir / ".tapetui" / "parked" / "ghost"
    forged.mkdir(parents=True)
    (forged / "parked.json").write_text(json.dumps({"v": 1, "candidate": None, "run_log": None}))
    code, out, _ = run(capsys, "check")
    assert code == 1 and "ghost\n  its pending candidate is parked" in out
    assert _merged_is_single(capsys, samples, 3)[0] == 1
    assert "ghost" in run(capsys, "check", "--format", "github")[1]


def test_usage_errors_come_before_samples_are_recorded(
    samples: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--samples N`` runs the agent (tokens, side effects): a command line that is not one runs nothing."""
    marker = tmp_path / "ran"
    toml = samples / "tapes.toml"
    script = tmp_path / "rec.py"
    script.write_text(f"open({str(marker)!r}, 'a').write('x')\n")
    lines = toml.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("record_command"))
    lines[at] = f'record_command = "{sys.executable} {script}"'
    toml.write_text("\n".join(lines) + "\n")
    paths = [str(p) for p in shard_reports(capsys, samples, 2)]
    for argv in (
        ["--merge", *paths, "--samples", "2"],
        ["--shard", "1/2", "--samples", "2"],
        ["--jobs", "0", "--samples", "1"],
        ["--json", "--format", "junit", "--samples", "1"],
        ["--shard", "0/2", "--samples", "1"],
    ):
        code, out, err = run(capsys, "check", *argv)
        assert code == 2 and not out and "Traceback" not in err, (argv, err)
        assert not marker.exists(), argv


def test_sessions_named_alike_in_json_and_in_any_order_merge_as_one_check_lists_them(
    samples: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Names that sort differently as text and as paths ("a/x", "a x", "a-x", "a.x"), and two that JSON writes
    alike (a name that is not UTF-8, another whose text is that escape): the merge gives one check's output."""
    tapes = samples / "sample_tapes"
    (tapes / "a").mkdir()
    names = [b"a/x", b"a x", b"a-x", b"a.x", b"n\xff", b"n\\udcff"]
    for name in names:
        for suffix in (b".jsonl", b".run.jsonl"):  # each with findings: each in the reports
            os.link(tapes / f"miss_extra_doc{suffix.decode()}", os.fsencode(tapes) + b"/" + name + suffix)
    paths = shard_reports(capsys, samples, 3)
    for fmt in ((), ("--json",), ("--format", "github"), ("--format", "junit"), ("--format", "markdown")):
        assert _merged_is_single(capsys, samples, 3, *fmt, paths=paths)[0] == 1


def test_a_parked_folder_named_like_a_run_log_is_no_session(samples: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forged = samples / "sample_tapes" / ".tapetui" / "parked" / "clean.run"
    forged.mkdir(parents=True)
    (forged / "parked.json").write_text(json.dumps({"v": 1, "candidate": None, "run_log": None}))
    code, out, _ = run(capsys, "check")
    assert code == 1 and "clean.run.jsonl:1" not in out and "\nclean.run\n" not in out
