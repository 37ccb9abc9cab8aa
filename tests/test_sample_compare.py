"""The sample sessions of issue 16, as the README shows them: ``reviewed_answer`` passes ``check`` under the
repository's ``[compare.sessions."reviewed_answer"]`` and fails without it, dimension by dimension;
``new_tool`` is a new capability; ``check --samples N`` runs tapes.toml's ``record_command``.

Every test works on the sample agent's tapes written afresh into ``tmp_path`` (``regenerate``: the bytes
the repository commits) beside a copy of the repository's ``tapes.toml``: never the working tree.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import tomlkit

from tapetui.core.comparators import similarity
from tapetui.core.config import load_config
from tapetui.core.runlog import read_run_log
from tapetui.core.store import candidate_path, runlog_path, samples_of
from tapetui.sample_agent import ANSWERS, FLAKY_SHIFT, build_registry, record, regenerate, replay
from tests.conftest import tapetui_cli

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def _samples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("samples") / "sample_tapes"
    regenerate(d)
    return d


def project(tmp_path: Path, samples: Path, *sessions: str, edit: Any = None) -> Path:
    """A project in ``tmp_path``: the repository's tapes.toml (changed by ``edit(doc)``), and the files of
    ``sessions`` in its sample_tapes/."""
    proj = tmp_path / "proj"
    (proj / "sample_tapes").mkdir(parents=True)
    for name in sessions:
        for f in samples.glob(f"{name}.*"):
            shutil.copy(f, proj / "sample_tapes" / f.name)
    doc = tomlkit.parse((ROOT / "tapes.toml").read_text(encoding="utf-8"))
    if edit is not None:
        edit(doc)
    (proj / "tapes.toml").write_text(tomlkit.dumps(doc), encoding="utf-8")
    return proj


def check_json(proj: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    r = tapetui_cli(proj, "check", "--json", *args, env=env)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.stdout, r.stderr
    return r.returncode, orjson.loads(r.stdout)


def report(doc: dict[str, Any], session: str) -> dict[str, Any]:
    return next(r for r in doc["reports"] if r["session"] == session)


def failing(dimensions: dict[str, Any]) -> set[str]:
    return {d for d, v in dimensions.items() if not v["passed"]}


def reviewed(doc: Any) -> Any:
    return doc["compare"]["sessions"]["reviewed_answer"]


def no_rules(doc: Any) -> None:
    del doc["compare"]["sessions"]["reviewed_answer"]


def strict(doc: Any) -> None:
    reviewed(doc)["sequence"] = "strict"


def no_tolerance(doc: Any) -> None:
    del reviewed(doc)["rules"]["average_price:result.average"]


def no_similarity(doc: Any) -> None:
    del reviewed(doc)["rules"]["note.final_answer"]


# ---- reviewed_answer: a reorder within a phase, a number within tolerance, a reworded answer ------------------
def test_reviewed_answer_passes_check_under_the_repository_rules(tmp_path: Path, _samples: Path) -> None:
    proj = project(tmp_path, _samples, "reviewed_answer")
    code, doc = check_json(proj)
    assert code == 0 and doc["ok"] is True and doc["failing"] == 0
    rep = report(doc, "reviewed_answer")
    cand = rep["candidate"]
    assert failing(cand["dimensions"]) == set() and cand["passed"] is True
    assert cand["sequence_mode"] == "phases" and cand["new_capabilities"] == []
    assert cand["dimensions"]["results"]["excused"] == 1 and cand["dimensions"]["notes"]["excused"] == 1
    assert failing(rep["run"]["dimensions"]) == set()
    # the pending candidate and every excused difference are shown, as warnings
    assert rep["findings"] and all(f["warning"] for f in rep["findings"])
    texts = [f["text"] for f in rep["findings"]]
    assert any("result.average  101.25 → 101.27  — within tolerance ±0.05" in t for t in texts), texts
    assert any(t.startswith("note.final_answer") and "— similarity 0.95 ≥ 0.85" in t for t in texts), texts
    # the replay of today's agent: the reorder within the phase is tolerated, the reworded note excused
    tools = next(f for f in rep["findings"] if f["kind"] == "tools")
    assert "phases order: 0 edits" in tools["text"] and tools["warning"] is True
    assert rep["run"]["dimensions"]["notes"]["excused"] == 1


def test_reviewed_answer_fails_without_its_rules_on_tools_results_and_notes(tmp_path: Path, _samples: Path) -> None:
    proj = project(tmp_path, _samples, "reviewed_answer", edit=no_rules)
    code, doc = check_json(proj)
    assert code == 1 and doc["ok"] is False
    rep = report(doc, "reviewed_answer")
    assert failing(rep["candidate"]["dimensions"]) == {
        "tools",
        "results",
        "notes",
    }  # no call records requested_tool: requested is n/a
    assert failing(rep["run"]["dimensions"]) == {"tools", "notes"}
    assert {f["kind"] for f in rep["findings"] if not f["warning"]} >= {"tools", "note", "pending"}


@pytest.mark.parametrize(
    ("edit", "candidate_fails", "run_fails"),
    [
        (strict, {"tools"}, {"tools"}),  # the reorder within the phase is an edit in strict order
        (no_tolerance, {"results"}, set()),  # the replay serves the recorded price: only the candidate's moved
        (no_similarity, {"notes"}, {"notes"}),  # the reworded answer, in the candidate and in the replay
    ],
    ids=["phases-vs-strict", "results-tolerance", "notes-similarity"],
)
def test_each_rule_of_reviewed_answer_decides_its_own_dimension(
    tmp_path: Path, _samples: Path, edit: Any, candidate_fails: set[str], run_fails: set[str]
) -> None:
    proj = project(tmp_path, _samples, "reviewed_answer", edit=edit)
    code, doc = check_json(proj)
    rep = report(doc, "reviewed_answer")
    assert failing(rep["candidate"]["dimensions"]) == candidate_fails
    assert failing(rep["run"]["dimensions"]) == run_fails
    assert code == 1 and rep["ok"] is False


def test_the_similarity_threshold_has_a_margin_over_the_measured_rewording() -> None:
    """tapes.toml's 0.85 sits below the sample's rewording with a margin, and above an unrelated answer; the
    answer rounds the average, so a price within tolerance keeps its numbers (the built-in similarity refuses
    other numbers), and a flaky one does not."""
    threshold = load_config(ROOT / "tapes.toml").compare_for("reviewed_answer").rules.rules[1].value
    fields = {"symbol": "ACME", "days": 30, "currency": "EUR"}

    def answer(version: str, average: float) -> str:
        return ANSWERS[version].format(rounded=round(average), average=average, **fields)

    golden = answer("v1", 101.25)
    assert similarity(golden, answer("v2", 101.27)) >= threshold + 0.05
    assert similarity(golden, "ACME is a buy. Prices only go up; nothing here expires.") < threshold
    assert answer("v2", 101.27) == answer("v2", 101.25) != answer("v2", 101.25 + 0.02 + FLAKY_SHIFT)


def test_the_replay_of_reviewed_answer_logs_its_phases_and_note_and_hits_every_call(
    tmp_path: Path, _samples: Path
) -> None:
    proj = project(tmp_path, _samples, "reviewed_answer")
    golden = proj / "sample_tapes" / "reviewed_answer.jsonl"
    assert replay(golden) == 0
    events = read_run_log(runlog_path(golden))
    kinds = [e["event"] for e in events]
    assert kinds == ["start", "phase", "hit", "hit", "hit", "phase", "hit", "note", "end"]
    assert [e["tool"] for e in events if e["event"] == "hit"] == [
        "search_index",
        "fetch_doc",
        "average_price",
        "summarize",
    ]
    note = next(e for e in events if e["event"] == "note")
    assert note["kind"] == "final_answer" and "about 101 EUR" in note["value"] and note["phase"] == "answer"


# ---- new_tool: a tool the golden never used ----------------------------------------------------------------
def test_new_tool_is_a_new_capability_and_fails_check_whatever_the_sequence_mode(
    tmp_path: Path, _samples: Path
) -> None:
    proj = project(tmp_path, _samples, "new_tool")
    code, doc = check_json(proj)
    assert code == 1
    rep = report(doc, "new_tool")
    cap = [f for f in rep["findings"] if f["kind"] == "capability"]
    assert [f["tool"] for f in cap] == ["send_email"] and not cap[0]["warning"]
    assert "[NEW TOOL] send_email" in cap[0]["text"]
    cand = rep["candidate"]
    assert cand["new_capabilities"] == ["send_email"] and cand["passed"] is False
    # superset mode allows the extra call: the tools dimension passes, the new capability fails the check alone
    assert cand["sequence_mode"] == "superset" and cand["dimensions"]["tools"]["passed"] is True
    r = tapetui_cli(proj, "check")
    assert r.returncode == 1 and "[NEW TOOL] send_email" in r.stdout


# ---- samples: check --samples N runs record_command --------------------------------------------------------
@pytest.mark.slow
def test_check_samples_runs_record_command_and_counts_pass_hat(tmp_path: Path, _samples: Path) -> None:
    def python_here(doc: Any) -> None:  # the interpreter running the tests, whatever PATH says
        doc["tapes"]["record_command"] = str(doc["tapes"]["record_command"]).replace("python", sys.executable, 1)

    proj = project(tmp_path, _samples, "reviewed_answer", edit=python_here)
    golden = proj / "sample_tapes" / "reviewed_answer.jsonl"
    committed = candidate_path(golden).read_bytes()
    code, doc = check_json(proj, "--samples", "3", env={"TAPETUI_SAMPLE_REPORTS": str(tmp_path / "out")})
    rep = report(doc, "reviewed_answer")
    samples = rep["samples"]
    # the committed candidate is parked while they record: these are samples 1, 2 and 3, and every third is flaky
    assert samples["n"] == 3 and samples["matched"] == 2 and samples["required"] == 3 and samples["ok"] is False
    assert samples["pass_hat"] == {"1": 2 / 3, "2": 1 / 3, "3": 0.0}
    # the flaky sample's price is outside the tolerance, and its answer rounds to another number
    assert samples["dimensions"]["results"] == 2 and samples["dimensions"]["notes"] == 2
    assert [s["matched"] for s in samples["samples"]] == [True, True, False]
    assert any(f["kind"] == "samples" and "2 of 3 samples match" in f["text"] for f in rep["findings"])
    assert code == 1 and doc["ok"] is False
    # the three samples are in NAME.samples/; the candidate pending before is pending again, as it was
    assert len(samples_of(golden)) == 3
    assert candidate_path(golden).read_bytes() == committed


def test_record_makes_every_third_sample_flaky_and_keeps_the_contract(tmp_path: Path, _samples: Path) -> None:
    proj = project(tmp_path, _samples, "reviewed_answer")
    golden = proj / "sample_tapes" / "reviewed_answer.jsonl"
    got = [record(golden) for _ in range(4)]  # samples 2 to 5 (the committed candidate is sample 1)
    assert [flaky for _, flaky in got] == [False, True, False, False]
    assert all(path == candidate_path(golden) for path, _ in got)
    averages = []
    for f in [*samples_of(golden), candidate_path(golden)]:
        calls = [orjson.loads(x) for x in f.read_bytes().splitlines()]
        averages += [c["result"]["average"] for c in calls if c.get("tool") == "average_price"]
    assert averages == [101.27, 101.27, round(101.27 + FLAKY_SHIFT, 2), 101.27, 101.27]
    assert record(golden, flaky_every=0)[1] is False
    # the market moves, the contract does not: the same fingerprint for every shift
    fps = {build_registry(price_shift=x)["average_price"].fingerprint for x in (0.0, 0.02, FLAKY_SHIFT)}
    assert len(fps) == 1
