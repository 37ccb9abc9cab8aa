"""Path safety: nothing in a tape folder, a session name or tapes.toml leads tapetui outside the
project, and opening a folder never imports or runs code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tapetui import ConfigError, load_config
from tapetui.core.store import candidate_path, iter_goldens, runlog_path
from tapetui.review import accept, check_session, compare
from tests.conftest import tapetui_cli

ROOT = Path(__file__).resolve().parent.parent


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return tapetui_cli(cwd, *args)


@pytest.fixture
def outside(sample_dir: Path) -> Path:
    """Files beside the project: a valid tape and a 'private key' that must never be read."""
    d = sample_dir.parent / "outside"
    d.mkdir()
    (d / "other.jsonl").write_bytes((sample_dir / "sample_tapes" / "clean.jsonl").read_bytes())
    (d / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE\n")
    return d


@pytest.mark.parametrize("name", ["../outside/other", "../../outside/other.jsonl", "ABS", "sub/../../outside/other"])
@pytest.mark.parametrize(
    "command",
    [
        ["accept", "--why", "x"],
        ["reject"],
        ["expire", "--step", "1"],
        ["diff"],
        ["stats"],
        ["rerecord", "--step", "1", "--yes"],
    ],
)
def test_session_names_cannot_leave_the_tapes_folder(
    sample_dir: Path, outside: Path, name: str, command: list[str]
) -> None:
    before = {p: p.read_bytes() for p in outside.iterdir()}
    target = str(outside / "other.jsonl") if name == "ABS" else name
    r = cli(sample_dir, command[0], target, *command[1:])
    assert r.returncode == 2, r.stdout + r.stderr
    assert "outside the tapes folder" in r.stderr and "Traceback" not in r.stderr
    assert {p: p.read_bytes() for p in outside.iterdir()} == before
    assert not (sample_dir / "sample_tapes" / "CHANGELOG.md").exists()


def test_symlinks_leading_out_are_not_followed(sample_dir: Path, outside: Path) -> None:
    cfg = load_config(sample_dir / "tapes.toml")
    tapes = cfg.tapes_dir
    (tapes / "linked.jsonl").symlink_to(outside / "other.jsonl")  # a golden that lives outside
    (tapes / "linkdir").symlink_to(outside, target_is_directory=True)  # a folder that leads outside
    clean = tapes / "clean.jsonl"
    candidate_path(clean).symlink_to(outside / "id_rsa")  # a planted candidate
    runlog_path(tapes / "miss_extra_doc.jsonl").unlink()
    runlog_path(tapes / "miss_extra_doc.jsonl").symlink_to(outside / "id_rsa")  # a planted run log
    names = [p.name for p in iter_goldens(tapes)]
    assert "linked.jsonl" not in names and not any("other" in n for n in names)

    rep = check_session(clean, cfg)
    assert rep.error is not None and "outside the tapes folder" in rep.error and "not followed" in rep.error
    assert "b3BlbnNzaC1rZXktdjE" not in rep.error
    rep = check_session(tapes / "miss_extra_doc.jsonl", cfg)
    assert rep.error is not None and "outside the tapes folder" in rep.error
    before = clean.read_bytes()
    with pytest.raises(Exception, match="outside the tapes folder"):
        accept(cfg, clean, "would copy a private key into the golden")
    with pytest.raises(Exception, match="outside the tapes folder"):
        compare(clean, candidate_path(clean), cfg)
    assert clean.read_bytes() == before and not cfg.changelog.exists()

    r = cli(sample_dir, "check")
    assert r.returncode == 2 and "b3BlbnNzaC1rZXktdjE" not in r.stdout + r.stderr
    # the golden leading out is refused by name, never read (nor passed over: a pull request could plant one)
    assert "linked.jsonl: a symlink to" in r.stdout and "outside the tapes folder" in r.stdout
    assert "linkdir: a symlink to" in r.stdout  # a folder of sessions leading out too, by its name
    r = cli(sample_dir, "accept", "linked", "--why", "x")
    assert r.returncode == 2 and "outside the tapes folder" in r.stderr


@pytest.mark.slow
async def test_app_does_not_follow_planted_symlinks(sample_dir: Path, outside: Path) -> None:
    from tapetui.tui.app import TapeApp
    from tests.test_tui import _visible, goto_session, wait_for

    cfg = load_config(sample_dir / "tapes.toml")
    clean = cfg.tapes_dir / "clean.jsonl"
    clean.rename(outside / "clean.jsonl")
    clean.symlink_to(outside / "clean.jsonl")  # the golden itself now leads out
    runlog_path(clean).unlink()
    runlog_path(clean).symlink_to(outside / "id_rsa")
    miss = cfg.tapes_dir / "miss_extra_doc.jsonl"
    runlog_path(miss).unlink()
    runlog_path(miss).symlink_to(outside / "id_rsa")  # a planted run log beside a real golden
    app = TapeApp(cfg, watch=True)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: app.feed.summarised.is_set() and app.feed.watching.is_set())
        assert "clean" not in {s.name for s in app.sessions.values()}  # not listed at all
        assert app.sessions[miss].summary.invalid == 1  # refused, and said once (not at every poll)
        assert app.sessions[miss].summary.hits == 0
        await goto_session(pilot, app, "drift_summarize")
        assert "b3BlbnNzaC1rZXktdjE" not in _visible(app)


@pytest.mark.parametrize(
    "text",
    [
        '[tapes]\ndir = "../outside"\n',
        '[tapes]\ndir = "/tmp"\n',
        '[tapes]\nchangelog = "../CHANGELOG.md"\n',
        '[tapes]\ndir = "link"\n',
    ],
)
def test_tapes_toml_cannot_point_outside_the_project(tmp_path: Path, text: str) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (tmp_path / "outside").mkdir()
    (proj / "link").symlink_to(tmp_path / "outside", target_is_directory=True)
    (proj / "tapes.toml").write_text(text)
    with pytest.raises(ConfigError, match="outside the project"):
        load_config(proj / "tapes.toml")


EVIL_REGISTRY = """
from pathlib import Path
Path(__file__).with_name("IMPORTED").write_text("the registry module ran")
from tapetui.sample_agent import registry
"""


@pytest.mark.slow
async def test_opening_a_folder_never_imports_the_registry(sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tapetui.tui.app import TapeApp
    from tapetui.tui.screens.confirm import ConfirmScreen
    from tests.test_tui import _visible, goto_session, wait_for

    (sample_dir / "evilreg.py").write_text(EVIL_REGISTRY)
    toml = sample_dir / "tapes.toml"
    toml.write_text(toml.read_text().replace('"tapetui.sample_agent:registry"', '"evilreg:registry"'))
    marker = sample_dir / "IMPORTED"
    monkeypatch.setenv("TAPETUI_SAMPLE_REPORTS", str(sample_dir / "reports"))
    for argv in (["check"], ["diff", "drift_summarize"], ["stats", "clean"], ["pending"]):
        cli(sample_dir, *argv)
    assert not marker.exists(), "a read-only command imported the registry"

    monkeypatch.syspath_prepend(str(sample_dir))
    app = TapeApp(load_config(toml), watch=True)
    async with app.run_test(size=(140, 44)) as pilot:
        await goto_session(pilot, app, "clean")
        await pilot.press("enter", "j", "j")
        await pilot.pause(0.3)
        assert not marker.exists(), "browsing imported the registry"
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "evilreg:registry" in _visible(app)  # says which module it will import, before it does
        assert not marker.exists()
        await pilot.press("n")
        await pilot.pause(0.2)
        assert not marker.exists()
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, marker.exists)
    sys.modules.pop("evilreg", None)
