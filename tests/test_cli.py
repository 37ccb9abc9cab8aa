from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from tapetui.core.store import candidate_path
from tests.conftest import tapetui_cli, tapetui_process

ROOT = Path(__file__).resolve().parent.parent


def run(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return tapetui_cli(cwd, *args, env=env)


@pytest.mark.parametrize(
    "args",
    [
        ("check",),
        ("check", "--json"),
        ("diff", "drift_summarize"),
        ("check", "--jobs", "0"),
        ("--help",),
        ("--version",),
    ],
)
def test_a_command_run_in_the_tests_process_answers_as_a_child_process_does(
    sample_dir: Path, args: tuple[str, ...]
) -> None:
    """The harness most CLI tests use (``tapetui_cli``: ``main`` in this process) against ``python -m tapetui``."""
    inside, child = tapetui_cli(sample_dir, *args), tapetui_process(sample_dir, *args)
    assert (inside.returncode, inside.stdout, inside.stderr) == (child.returncode, child.stdout, child.stderr)
    assert inside.stdout or inside.stderr


def test_check_readable_output_and_exit_codes(sample_dir: Path) -> None:
    r = run(sample_dir, "check")
    assert r.returncode == 1
    assert "summarize  step 3  args.max_words  120 → 80" in r.stdout
    assert "[CONTRACT] schema.properties.max_words.maximum  500 → 200" in r.stdout
    assert "fetch_doc  step 2  miss" in r.stdout
    assert "\x1b[" not in r.stdout  # not a TTY: no colour
    assert "Traceback" not in r.stderr


def test_check_json(sample_dir: Path) -> None:
    r = run(sample_dir, "check", "--json")
    doc = orjson.loads(r.stdout)
    assert r.returncode == 1 and doc["ok"] is False and doc["sessions"] == 9
    failing = {rep["session"] for rep in doc["reports"] if not rep["ok"]}
    # reviewed_answer's candidate differs but passes under tapes.toml's [compare] rules; new_tool's is a new tool
    assert failing == {
        "drift_summarize",
        "contract_change",
        "miss_extra_doc",
        "stale_quote",
        "new_tool",
        "research_prompt",
    }


@pytest.mark.slow
def test_review_workflow_accept_needs_why(sample_dir: Path) -> None:
    r = run(sample_dir, "accept", "drift_summarize")
    assert r.returncode == 2 and "needs a rationale" in r.stderr
    assert candidate_path(sample_dir / "sample_tapes/drift_summarize.jsonl").exists()
    r = run(sample_dir, "accept", "drift_summarize", "--why", "shorter summaries are intended")
    assert r.returncode == 0, r.stderr
    assert "shorter summaries are intended" in (sample_dir / "sample_tapes/CHANGELOG.md").read_text()
    r = run(sample_dir, "pending", "--json")
    pending = ["contract_change", "new_tool", "research_prompt", "reviewed_answer"]
    assert [p["session"] for p in orjson.loads(r.stdout)] == pending
    assert run(sample_dir, "reject", "contract_change", "--why", "not yet").returncode == 0
    r = run(sample_dir, "expire", "stale_quote", "--all-time-sensitive")  # expired on 2026-01-09 already
    assert r.returncode == 0 and "already expired" in r.stdout and "nothing to do" in r.stdout
    assert run(sample_dir, "expire", "clean", "--step", "2").returncode == 0
    assert run(sample_dir, "rerecord", "clean", "--step", "4").returncode == 2  # side effect, no --yes
    assert (
        run(
            sample_dir,
            "rerecord",
            "clean",
            "--step",
            "4",
            "--yes",
            env={"TAPETUI_SAMPLE_REPORTS": str(sample_dir / "out")},
        ).returncode
        == 0
    )
    assert (sample_dir / "out" / "report.md").exists()


@pytest.mark.slow
def test_bad_input_is_one_line_with_file_and_line(sample_dir: Path) -> None:
    bad = sample_dir / "sample_tapes" / "broken.jsonl"
    bad.write_text('{"type":"session","v":1}\n{"type":"call", nope}\n{"type":"call"}\n')
    r = run(sample_dir, "check")
    assert r.returncode == 2
    assert "broken.jsonl:2: invalid JSON" in r.stderr and "Traceback" not in r.stderr
    (sample_dir / "tapes.toml").write_text("[tapes]\ndirr = 'x'\n")
    r = run(sample_dir, "check")
    assert r.returncode == 2 and "unknown key 'tapes.dirr'" in r.stderr and "tapes.toml" in r.stderr


@pytest.mark.slow
def test_usage_errors_exit_2(sample_dir: Path) -> None:
    assert run(sample_dir, "check", "/no/such/dir").returncode == 2
    assert run(sample_dir, "expire", "clean").returncode == 2
    assert run(sample_dir, "diff", "nope").returncode == 2
    r = run(sample_dir)  # the app without a terminal
    assert r.returncode == 2 and "no terminal" in r.stderr


@pytest.mark.slow
def test_diff_and_stats(sample_dir: Path) -> None:
    r = run(sample_dir, "diff", "drift_summarize", "--json")
    doc = orjson.loads(r.stdout)
    assert r.returncode == 1 and doc["steps"][0]["arg_changes"] == [
        {"path": "max_words", "kind": "changed", "old": 120, "new": 80}
    ]
    r = run(sample_dir, "diff", "clean")  # no candidate: the run log
    assert r.returncode == 0 and "no differences" in r.stdout
    r = run(sample_dir, "stats", "--json")
    assert orjson.loads(r.stdout)["stale_quote"]["time_sensitive"] == 1


@pytest.mark.slow
def test_cli_output_escapes_terminal_sequences(sample_dir: Path) -> None:
    g = sample_dir / "sample_tapes" / "drift_summarize.jsonl"
    cand = candidate_path(g)
    evil = "\x1b]52;c;cGF3bmVk\x07\x1b[2J[bold red]x[/]\u202e"
    cand.write_text(cand.read_text().replace('"max_words":80', '"max_words":' + orjson.dumps(evil).decode()))
    r = run(sample_dir, "diff", "drift_summarize")
    assert "\x1b" not in r.stdout and "\x07" not in r.stdout and "\u202e" not in r.stdout
    assert "\\u001b]52;c;cGF" in r.stdout and "\\u202e" in r.stdout
    r = run(sample_dir, "diff", "drift_summarize", "--json")
    assert "\x1b" not in r.stdout and "\u202e" not in r.stdout
    assert evil in orjson.loads(r.stdout)["steps"][0]["arg_changes"][0]["new"]


@pytest.mark.parametrize("var", ["NO_COLOR"])
def test_no_color_respected(sample_dir: Path, var: str) -> None:
    r = run(sample_dir, "check", env={var: "1"})
    assert "\x1b[" not in r.stdout


def test_check_on_a_folder_with_no_tapes_exits_2(sample_dir: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    r = run(sample_dir, "check", str(missing))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert f"no tapes found in {missing} (tapes.toml: {sample_dir / 'tapes.toml'})" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run(empty, "check")  # no tapes.toml above it: the folder itself, which holds nothing
    assert r.returncode == 2 and f"no tapes found in {empty} (tapes.toml: none found)" in r.stderr
    for f in (sample_dir / "sample_tapes").glob("*.jsonl"):
        f.unlink()
    r = run(sample_dir, "check", "--json")
    assert r.returncode == 2 and "no tapes found in" in r.stderr and "0 session(s)" not in r.stdout


def test_check_exits_1_for_a_killed_replay_and_a_hand_edited_key(sample_dir: Path) -> None:
    tapes = sample_dir / "sample_tapes"
    log = tapes / "clean.run.jsonl"
    events = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join(events[:3]))  # killed after two steps: no end
    r = run(sample_dir, "check")
    assert r.returncode == 1 and "run log has no end: the replay was killed or is still running (3 events)" in r.stdout
    log.write_bytes(b"".join(events))
    g = tapes / "clean.jsonl"
    g.write_bytes(g.read_bytes().replace(b'"doc_id":"handbook"', b'"doc_id":"handbook-v2"', 1))
    r = run(sample_dir, "check", "--json")
    doc = orjson.loads(r.stdout)
    (clean,) = [rep for rep in doc["reports"] if rep["session"] == "clean"]
    (f,) = [f for f in clean["findings"] if f["kind"] == "key"]
    assert r.returncode == 1 and f["text"].startswith(f"{g}:") and f["line"] > 1


def test_an_os_error_is_one_line_and_exit_2(
    sample_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tapetui import cli

    def denied(args: object) -> int:
        raise PermissionError(13, "Permission denied", "/srv/tapes/x.jsonl")

    monkeypatch.setattr(cli, "cmd_stats", denied)
    assert cli.main(["stats"]) == 2
    assert capsys.readouterr().err == "tapetui: /srv/tapes/x.jsonl: Permission denied\n"


@pytest.mark.slow
def test_the_config_option_before_a_command(sample_dir: Path) -> None:
    r = run(sample_dir, "--config", "tapes.toml", "check")
    assert r.returncode == 1 and "summarize  step 3" in r.stdout
    r = run(sample_dir, "--config", "tapes.toml", "undo", "clean")
    assert r.returncode == 2 and "nothing to undo" in r.stderr
    r = run(sample_dir, "--config=tapes.toml", "pending")
    assert r.returncode == 0 and "drift_summarize" in r.stdout


@pytest.mark.slow
def test_diff_finds_b_beside_the_golden_and_names_a_missing_one(sample_dir: Path) -> None:
    r = run(sample_dir, "diff", "drift_summarize.jsonl", "drift_summarize.candidate.jsonl")
    assert r.returncode == 1 and "args.max_words  120 → 80" in r.stdout
    r = run(sample_dir, "diff", "clean.jsonl", "clean.candidate.jsonl")
    assert r.returncode == 2 and "clean.candidate.jsonl: no such file to compare clean.jsonl with" in r.stderr


@pytest.mark.parametrize("action", ["accept", "reject"])
def test_a_rationale_with_a_byte_that_is_not_utf8_is_kept_as_its_escape(sample_dir: Path, action: str) -> None:
    """``--why`` typed in another encoding (a lone surrogate here) is written as its escape: the action happens,
    its entry says so, and nothing is left half done."""
    r = run(sample_dir, action, "drift_summarize", "--why", "caf\udce9 in latin-1")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "caf\\udce9 in latin-1" in (sample_dir / "sample_tapes/CHANGELOG.md").read_text()
    assert not candidate_path(sample_dir / "sample_tapes/drift_summarize.jsonl").exists()
    assert not list((sample_dir / "sample_tapes").glob(".drift_summarize.jsonl.next*"))


@pytest.mark.parametrize("name", ["agent.run.jsonl", "agent.candidate.jsonl", ".agent.jsonl", "agent.samples/x.jsonl"])
def test_a_recording_to_a_name_of_tapetuis_own_files_is_refused(tmp_path: Path, name: str) -> None:
    """A tape recorded as ``agent.run.jsonl`` was taken for agent's run log (and overwritten as one): nothing
    recorded is lost, so such a name is refused before anything is written."""
    from tapetui import Tape, TapeError

    for mode in ("record", "fill"):
        with pytest.raises(TapeError, match="a recording needs a tape's own name"):
            Tape(tmp_path / name, mode)
    assert not (tmp_path / name).exists()
