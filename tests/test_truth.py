"""``check`` and ``diff`` never say "identical" when they are not (issue 22, items 2, 3, 4 and 6).

Volatile defaults never hide what makes a call's key (its arguments); a user's ``[diff] ignore`` on
an argument excuses it but lists it; a result that became an error (or back) is always a difference;
a tolerated hit is judged again by value under the rules as they are now; a quoted key in an ignore
rule is read by the one path parser in run-log findings too.
"""

from __future__ import annotations

import contextlib
import json
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Tape, TapeDrift
from tapetui.cli import main
from tapetui.core.config import Config, load_config
from tapetui.core.jsondiff import IgnoreRules, parse_pattern, path_segments
from tapetui.core.runlog import read_run_log
from tapetui.core.store import candidate_path, runlog_path
from tapetui.review import check, compare

STRICT = '[compare.sessions."s"]\nsequence = "strict"\n'


def project(tmp_path: Path, toml: str = "") -> Config:
    """A tapes.toml (tapes in ``tapes/``) with ``toml`` after its ``[tapes]`` table."""
    (tmp_path / "tapes").mkdir(parents=True, exist_ok=True)
    (tmp_path / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n\n' + textwrap.dedent(toml))
    return load_config(tmp_path / "tapes.toml")


def record(cfg: Config, *calls: tuple[str, dict[str, Any], Any]) -> Path:
    """Record ``(tool, args, outcome)`` calls into ``s.jsonl`` (its candidate, when it exists); an
    outcome that is an exception is raised by the tool."""
    g = cfg.tapes_dir / "s.jsonl"
    with Tape(g, "record", config=cfg) as tape:
        for tool, args, outcome in calls:
            with contextlib.suppress(ValueError):
                tape.call(tool, args, live=lambda outcome=outcome: _outcome(outcome))
    return g


def _outcome(outcome: Any) -> Any:
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome


def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["--config", str(tmp_path / "tapes.toml"), *argv])
    return code, capsys.readouterr().out


# ---- item 2: volatile defaults never hide arguments ---------------------------------------------------
def test_a_booking_on_another_date_is_a_difference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = project(tmp_path, STRICT)
    record(cfg, ("book", {"room": "A", "date": "2024-05-01"}, {"booked": True}))
    g = record(cfg, ("book", {"room": "A", "date": "2024-05-02"}, {"booked": True}))
    cmp = compare(g, candidate_path(g), cfg)
    assert not cmp.clean and not cmp.passed
    (step,) = cmp.changed_steps
    assert [(c.path, c.old, c.new) for c in step.arg_changes] == [("date", "2024-05-01", "2024-05-02")]
    code, out = cli(tmp_path, capsys, "diff", "s")
    assert code == 1 and "no differences" not in out
    assert 'book  step 1  args.date  "2024-05-01" → "2024-05-02"' in out
    code, out = cli(tmp_path, capsys, "check")
    assert code == 1 and "identical" not in out and 'args.date  "2024-05-01" → "2024-05-02"' in out
    code, out = cli(tmp_path, capsys, "check", "--json")
    (rep,) = json.loads(out)["reports"]
    assert code == 1 and not rep["ok"]
    assert rep["candidate"]["steps"][0]["arg_changes"][0]["path"] == "date"


def test_volatile_defaults_still_hide_result_paths_and_notes(tmp_path: Path) -> None:
    cfg = project(tmp_path, STRICT)
    g = cfg.tapes_dir / "s.jsonl"
    for stamp in (1, 2):
        with Tape(g, "record", config=cfg) as tape:
            tape.call("book", {"room": "A"}, live=lambda stamp=stamp: {"booked": True, "timestamp": stamp})
            tape.note("final", {"text": "booked", "date": f"2024-05-0{stamp}"})
    assert compare(g, candidate_path(g), cfg).clean


def test_an_argument_a_user_ignores_is_listed_as_excused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = project(tmp_path, '[diff]\nignore = ["trace"]\n\n' + STRICT)
    record(cfg, ("book", {"room": "A", "trace": "t-1"}, {"booked": True}))
    g = record(cfg, ("book", {"room": "A", "trace": "t-2"}, {"booked": True}))
    cmp = compare(g, candidate_path(g), cfg)
    assert not cmp.clean and cmp.passed  # excused by the user's rule, and shown
    line = 'book  step 1  args.trace  "t-1" → "t-2"  — ignored by [diff] ignore \'trace\''
    assert line in cmp.lines()
    code, out = cli(tmp_path, capsys, "diff", "s")
    assert code == 0 and line in out and "no differences" not in out
    code, out = cli(tmp_path, capsys, "check")
    assert code == 0 and line in out and "identical" not in out
    code, out = cli(tmp_path, capsys, "check", "--json")
    (step,) = json.loads(out)["reports"][0]["candidate"]["steps"]
    assert step["kind"] == "tolerated"
    assert step["excused"] == [{"path": "args.trace", "rule": "ignore", "text": "ignored by [diff] ignore 'trace'"}]


# ---- item 3: the outcome kind ---------------------------------------------------------------------------
def _error_of(tmp_path: Path) -> dict[str, Any]:
    """The error a tool raising ValueError("boom") is recorded with."""
    scratch = project(tmp_path / "scratch")
    g = record(scratch, ("lookup", {"q": "x"}, ValueError("boom")))
    err: dict[str, Any] = orjson.loads(g.read_bytes().splitlines()[-1])["error"]
    return err


@pytest.mark.parametrize("raises_now", [True, False])
def test_a_result_that_became_an_error_is_a_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], raises_now: bool
) -> None:
    err = _error_of(tmp_path)
    cfg = project(tmp_path, STRICT)
    shaped_like_it = {"error": err}  # a result that happens to look like the recorded error
    before, after = (shaped_like_it, ValueError("boom")) if raises_now else (ValueError("boom"), shaped_like_it)
    record(cfg, ("lookup", {"q": "x"}, before))
    g = record(cfg, ("lookup", {"q": "x"}, after))
    cmp = compare(g, candidate_path(g), cfg)
    assert not cmp.clean and not cmp.passed
    (step,) = cmp.changed_steps
    assert step.kind == "changed" and len(step.result_changes) == 1
    want = "a result became an error" if raises_now else "an error became a result"
    assert any(want in line for line in cmp.lines())
    assert step.to_json()["outcome"] == (
        {"old": "result", "new": "error"} if raises_now else {"old": "error", "new": "result"}
    )
    code, out = cli(tmp_path, capsys, "diff", "s")
    assert code == 1 and "no differences" not in out and want in out


def test_an_outcome_change_is_never_excused_by_a_rule(tmp_path: Path) -> None:
    err = _error_of(tmp_path)
    cfg = project(tmp_path, STRICT + '[compare.sessions."s".rules]\n"result" = "ignore"\n')
    record(cfg, ("lookup", {"q": "x"}, {"error": err}))
    g = record(cfg, ("lookup", {"q": "x"}, ValueError("boom")))
    assert not compare(g, candidate_path(g), cfg).passed


# ---- item 4: tolerated hits are judged by value ---------------------------------------------------------
TOLERANCE = '[compare.rules]\n"fetch:args.n" = {{ tolerance = {} }}\n'


def _tolerated_run(tmp_path: Path, args: dict[str, Any] | None = None) -> tuple[Config, Path]:
    cfg = project(tmp_path, TOLERANCE.format(1.5))
    g = record(cfg, ("fetch", {"n": 1, **(args or {})}, {"t": "a"}))
    with Tape(g, "replay", config=cfg) as tape:
        tape.call("fetch", {"n": 2.4, **(args or {})})  # 1.4 apart: within ±1.5
        assert tape.stats()["tolerated_hits"] == 1
    assert check(cfg.tapes_dir, cfg)[0].ok
    return cfg, g


def _tolerated_finding(tmp_path: Path) -> Any:
    (rep,) = check(tmp_path / "tapes", load_config(tmp_path / "tapes.toml"))
    (f,) = [f for f in rep.findings if f.kind == "tolerated"]
    return rep, f


def test_a_narrowed_tolerance_no_longer_excuses_a_tolerated_hit(tmp_path: Path) -> None:
    _tolerated_run(tmp_path)
    project(tmp_path, TOLERANCE.format(1))  # 'tolerance ±1' is in 'within tolerance ±1.5'; 1.4 is not within ±1
    rep, f = _tolerated_finding(tmp_path)
    assert not rep.ok and not f.warning and f.data["no_longer_excused"] == ["args.n"]
    assert "no rule of tapes.toml excuses args.n now: run the replay again" in f.text
    project(tmp_path, TOLERANCE.format(2))  # wider: the values are still within it
    rep, f = _tolerated_finding(tmp_path)
    assert rep.ok and f.warning and f.data["no_longer_excused"] == []


def test_a_tolerated_hit_of_an_old_run_log_without_its_arguments_is_not_excused(tmp_path: Path) -> None:
    _, g = _tolerated_run(tmp_path)
    log = runlog_path(g)
    events = read_run_log(log)
    for ev in events:
        if ev["event"] == "hit":
            del ev["args"]  # as a run log written before hits carried their arguments
    log.write_bytes(b"".join(orjson.dumps(ev) + b"\n" for ev in events))
    rep, f = _tolerated_finding(tmp_path)
    assert not rep.ok and not f.warning and "run the replay again" in f.text and "args.n" in f.text


def test_the_arguments_a_tolerated_hit_logs_are_redacted(tmp_path: Path) -> None:
    _, g = _tolerated_run(tmp_path, {"password": "hunter2-very-secret"})
    text = runlog_path(g).read_text()
    assert "hunter2" not in text
    (hit,) = [e for e in read_run_log(runlog_path(g)) if e["event"] == "hit"]
    assert hit["args"]["n"] == 2.4 and hit["args"]["password"] != "hunter2-very-secret"


# ---- item 6: quoted keys in run-log findings ------------------------------------------------------------
def test_path_segments_reads_a_printed_path_literally() -> None:
    assert path_segments('args["a.b"][0].c') == ("args", "a.b", "0", "c")
    assert path_segments('x["*"]') == ("x", "*") and parse_pattern('x["*"]') == ("x", "[*]")
    assert path_segments("*.x") == ("*", "x")  # a concrete path: no wildcard is made of it
    assert IgnoreRules(['x["a.b"]'], volatile=False).ignores(path_segments('x["a.b"]'))
    with pytest.raises(ValueError):
        path_segments('x["a')


def test_an_ignore_rule_with_a_quoted_key_hides_it_in_run_log_findings(tmp_path: Path) -> None:
    cfg = project(tmp_path, "[diff]\nignore = ['x[\"a.b\"]']\n")
    g = record(cfg, ("fetch", {"x": {"a.b": 1}, "y": 1}, {"t": "a"}))
    with pytest.raises(TapeDrift), Tape(g, "replay", config=cfg) as tape:
        tape.call("fetch", {"x": {"a.b": 2}, "y": 2})  # y is not ignored: a drift
    (rep,) = check(cfg.tapes_dir, cfg)
    failing = [f.text for f in rep.findings if not f.warning]
    assert not rep.ok and "fetch  step 1  args.y  1 → 2" in failing
    assert not any("a.b" in t for t in failing)
    listed = [f.text for f in rep.findings if f.warning and f.kind == "drift"]
    assert listed == ['fetch  step 1  args.x["a.b"]  1 → 2  — ignored by [diff] ignore \'x["a.b"]\'']
