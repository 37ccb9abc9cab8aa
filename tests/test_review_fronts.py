"""The review layer behind both fronts: check's progress, one diff, accept --all, replay."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tapetui import TapeError, load_config
from tapetui.core.store import candidate_path
from tapetui.review import check, diff, replay_argv
from tapetui.review.changelog import logged_entries
from tests.conftest import tapetui_cli

ROOT = Path(__file__).resolve().parent.parent


def tapetui(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tapetui_cli(cwd, *args)


def test_check_reports_progress_up_to_n_of_n(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    seen: list[tuple[int, int]] = []
    reports = check(cfg.tapes_dir, cfg, progress=lambda done, total: seen.append((done, total)))
    n = len(reports)
    assert n == 9 and seen == [(i, n) for i in range(n + 1)]


@pytest.mark.parametrize("name", ["drift_summarize", "miss_extra_doc"])  # a candidate; a run log
def test_diff_text_and_json_come_from_one_function(sample_dir: Path, name: str) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    d = diff(cfg, cfg.tapes_dir / f"{name}.jsonl")
    assert d.source == ("candidate" if name == "drift_summarize" else "run_log") and d.differs
    text = tapetui(sample_dir, "diff", name)
    assert text.returncode == 1
    assert text.stdout.splitlines() == [d.title] + [f"  {line}" for line in d.lines()]
    js = tapetui(sample_dir, "diff", name, "--json")
    assert js.returncode == 1 and orjson.loads(js.stdout) == orjson.loads(orjson.dumps(d.to_json(), default=str))


def test_diff_with_nothing_to_compare_is_an_error(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "clean.jsonl"
    (cfg.tapes_dir / "clean.run.jsonl").unlink()
    with pytest.raises(TapeError, match="nothing to compare with"):
        diff(cfg, g)


@pytest.mark.slow
def test_accept_all_with_a_filter_then_without(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    pending = ["contract_change", "drift_summarize", "new_tool", "reviewed_answer"]
    r = tapetui(sample_dir, "accept", "--all")
    assert r.returncode == 2 and "rationale" in r.stderr  # nothing accepted without one
    assert all(candidate_path(cfg.tapes_dir / f"{p}.jsonl").exists() for p in pending)
    r = tapetui(sample_dir, "accept", "--all", "--why", "x", "--filter", "status:bogus")
    assert r.returncode == 2 and "Unknown status" in r.stderr
    r = tapetui(sample_dir, "accept", "--all", "--filter", "tool:summarize", "--why", "shorter")
    assert r.returncode == 0 and "4 of 4 candidate(s) accepted" in r.stdout, r.stderr  # all call summarize
    for name in pending:
        r = tapetui(sample_dir, "undo", name)
        assert r.returncode == 0
    r = tapetui(sample_dir, "accept", "--all", "--filter", "drift_summ", "--why", "only this one")
    assert r.returncode == 0 and "1 of 1 candidate(s) accepted" in r.stdout
    assert not candidate_path(cfg.tapes_dir / "drift_summarize.jsonl").exists()
    assert candidate_path(cfg.tapes_dir / "contract_change.jsonl").exists()
    r = tapetui(sample_dir, "accept", "--all", "--why", "the rest")
    assert r.returncode == 0 and "accepted contract_change" in r.stdout and "4 of 4" in r.stdout
    assert not any(candidate_path(cfg.tapes_dir / f"{p}.jsonl").exists() for p in pending)
    r = tapetui(sample_dir, "accept", "--all", "--why", "again")
    assert r.returncode == 0 and "no pending candidates" in r.stdout
    accepts = [e for e in logged_entries(cfg.changelog) if e.action == "accept"]
    assert len(accepts) == 9


def test_accept_all_refuses_a_tape_or_steps(sample_dir: Path) -> None:
    r = tapetui(sample_dir, "accept", "drift_summarize", "--all", "--why", "x")
    assert r.returncode == 2 and "--all" in r.stderr


def test_replay_runs_the_configured_command_with_the_tape(tmp_path: Path, sample_dir: Path) -> None:
    script = sample_dir / "record_arg.py"
    script.write_text("import sys, pathlib\npathlib.Path('replayed.txt').write_text(sys.argv[1])\nsys.exit(3)\n")
    toml = sample_dir / "tapes.toml"
    text = toml.read_text()
    start = text.index("replay_command")
    end = text.index("\n", start)
    toml.write_text(text[:start] + f"replay_command = '{sys.executable} record_arg.py {{tape}}'" + text[end:])
    cfg = load_config(toml)
    g = cfg.tapes_dir / "clean.jsonl"
    assert replay_argv(cfg, g) == [sys.executable, "record_arg.py", str(g)]
    r = tapetui(sample_dir, "replay", "clean")
    assert r.returncode == 3  # the command's own exit code
    assert (sample_dir / "replayed.txt").read_text() == str(g)  # run in the folder of tapes.toml


def test_no_character_of_a_tape_name_is_parsed_by_the_replay_command(sample_dir: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    evil = cfg.tapes_dir / "y;touch PWNED;'q\" $(id).jsonl"
    evil.write_bytes((cfg.tapes_dir / "clean.jsonl").read_bytes())
    toml = sample_dir / "tapes.toml"
    text = toml.read_text()
    start = text.index("replay_command")
    end = text.index("\n", start)
    toml.write_text(text[:start] + "replay_command = 'printf %s {tape}'" + text[end:])
    cfg = load_config(toml)
    # a name with characters a shell acts on never reaches a command at all, whatever the command does with it
    with pytest.raises(TapeError, match="Rename the tape"):
        replay_argv(cfg, evil)
    r = tapetui(sample_dir, "replay", str(evil))
    assert r.returncode == 2 and "Rename the tape" in r.stderr, r.stderr
    plain = cfg.tapes_dir / "plain-name_2.jsonl"
    plain.write_bytes(evil.read_bytes())
    assert replay_argv(cfg, plain) == ["printf", "%s", str(plain)]  # one argument
    for command in (
        "sh -c 'wc -c {tape}'",
        'sh -c "wc -c {tape}"',
        "bash -lc 'wc -c < {tape}'",
    ):  # a shell would parse these: refused, with the safe form
        toml.write_text(text[:start] + "replay_command = " + json.dumps(command) + text[end:])
        r = tapetui(sample_dir, "replay", str(plain))
        assert r.returncode == 2 and "$TAPETUI_TAPE" in r.stderr, (command, r.stderr)
    toml.write_text(text[:start] + "replay_command = " + json.dumps("sh -c 'wc -c < \"$TAPETUI_TAPE\"'") + text[end:])
    r = tapetui(sample_dir, "replay", str(plain))
    assert r.returncode == 0, r.stderr
    assert not (sample_dir / "PWNED").exists()


def test_replay_without_a_command_says_so(sample_dir: Path) -> None:
    toml = sample_dir / "tapes.toml"
    toml.write_text("\n".join(line for line in toml.read_text().splitlines() if "replay_command" not in line))
    r = tapetui(sample_dir, "replay", "clean")
    assert r.returncode == 2 and "no replay_command" in r.stderr


def test_help_says_how_to_open_a_folder_named_like_a_command(sample_dir: Path) -> None:
    r = tapetui(sample_dir, "--help")
    assert "tapetui ./undo" in r.stdout
    for verb in ("undo", "replay"):
        r = tapetui(sample_dir, verb, "--help")
        assert r.returncode == 0 and "exit codes" in r.stdout


def test_accept_all_of_drift_never_promotes_a_changed_contract(sample_dir: Path) -> None:
    r = tapetui(sample_dir, "accept", "--all", "--filter", "status:drift", "--why", "argument drift is fine")
    assert r.returncode == 0, r.stderr
    assert "drift_summarize" in r.stdout and "contract_change" not in r.stdout
    assert (sample_dir / "sample_tapes" / "contract_change.candidate.jsonl").exists()
