"""``Tape(path, mode, registry)`` without ``config=`` finds tapes.toml from the tape's folder up to the
repository root, like pytest's ini files; its [redact] and [tools] apply; ``config=`` overrides."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tapetui import Config, ConfigError, Tape, ToolRegistry
from tapetui.core.config import config_for_tape, find_tape_config

TOML = """
[tapes]
dir = "tapes"

[redact]
keys = ["tenant_ref"]
patterns = ["internal-[0-9]{4}"]

[tools.clock]
live = true
"""


def _registry(calls: list[str]) -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(version="1")
    def lookup(q: str, tenant_ref: str = "") -> dict[str, Any]:
        calls.append("lookup")
        return {"q": q, "note": "see internal-4242"}

    @reg.tool(version="1")
    def clock() -> int:
        calls.append("clock")
        return len(calls)

    return reg


def test_tapes_toml_is_found_and_its_redact_and_tools_apply(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "tapes" / "deep").mkdir(parents=True)
    (proj / "tapes.toml").write_text(TOML)
    calls: list[str] = []
    reg = _registry(calls)
    tape = proj / "tapes" / "deep" / "s.jsonl"
    with Tape(tape, "record", reg) as t:
        assert t.config.path == proj / "tapes.toml" and t.config.tapes_dir == proj / "tapes"
        t.call("lookup", {"q": "a", "tenant_ref": "TenantRef-1234"})
        t.call("clock")
    data = tape.read_bytes()
    assert b"TenantRef-1234" not in data and b"internal-4242" not in data  # [redact] keys and patterns
    with Tape(tape, "replay", reg) as t:  # [tools.clock] live = true: runs in replay
        t.call("lookup", {"q": "a", "tenant_ref": "TenantRef-1234"})
        t.call("clock")
    assert calls == ["lookup", "clock", "clock"]


def test_config_argument_overrides(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "tapes").mkdir(parents=True)
    (proj / "tapes.toml").write_text(TOML)
    calls: list[str] = []
    tape = proj / "tapes" / "s.jsonl"
    with Tape(tape, "record", _registry(calls), config=Config.for_dir(proj / "tapes")) as t:
        assert t.config.path is None
        t.call("lookup", {"q": "a", "tenant_ref": "Tenant-Visible"})
    assert b"Tenant-Visible" in tape.read_bytes()


def test_search_stops_at_the_repository_root(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    (outer / "repo" / ".git").mkdir(parents=True)
    (outer / "repo" / "tapes").mkdir()
    (outer / "tapes.toml").write_text(TOML)  # above the repository: not this tape's
    tape = outer / "repo" / "tapes" / "s.jsonl"
    assert find_tape_config(tape) is None
    cfg = config_for_tape(tape)
    assert cfg.path is None and cfg.tapes_dir == (outer / "repo" / "tapes").resolve()
    (outer / "repo" / "tapes.toml").write_text(TOML)  # at the root itself: found
    assert find_tape_config(tape) == outer / "repo" / "tapes.toml"


def test_a_tape_outside_the_tapes_folder_is_its_own_folders_session(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    (proj / "elsewhere").mkdir(parents=True)
    (proj / "tapes.toml").write_text(TOML)
    cfg = config_for_tape(proj / "elsewhere" / "s.jsonl")
    assert cfg.path == (proj / "tapes.toml").resolve()
    assert cfg.redact_keys == ("tenant_ref",) and cfg.policy("clock").live  # the rules apply
    assert cfg.tapes_dir == (proj / "elsewhere").resolve()  # paths are not taken from a folder it is not in
    assert cfg.changelog == (proj / "elsewhere" / "CHANGELOG.md").resolve()


def test_no_tapes_toml_means_defaults(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    cfg = config_for_tape(tmp_path / "t" / "s.jsonl")
    assert cfg == Config.for_dir(tmp_path / "t")


def test_a_malformed_tapes_toml_is_an_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "tapes.toml").write_text("[redact]\nkeys = 3\n")
    with pytest.raises(ConfigError, match=r"tapes\.toml: 'redact\.keys' must be"):
        Tape(tmp_path / "s.jsonl", "record", ToolRegistry())


@pytest.mark.parametrize("kind", ["folder", "fifo", "dangling symlink"])
def test_a_tapes_toml_that_is_no_plain_file_is_an_error_naming_it_never_passed_over(tmp_path: Path, kind: str) -> None:
    """A tapes.toml that cannot be read (a folder, a FIFO, a symlink whose target is gone) is an error: passed over,
    a recording took a parent's tapes.toml or the defaults, and the [redact] keys it names went to disk as they are."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "tapes.toml").write_text('[redact]\nkeys = ["zorkfield"]\n')
    inner = tmp_path / "inner"
    inner.mkdir()
    there = inner / "tapes.toml"
    if kind == "folder":
        there.mkdir()
    elif kind == "fifo":
        os.mkfifo(there)
    else:
        there.symlink_to(tmp_path / "gone.toml")
    with pytest.raises(ConfigError, match=r"tapes\.toml"):
        Tape(inner / "s.jsonl", "record", ToolRegistry())
    assert find_tape_config(inner / "s.jsonl") == there and not (inner / "s.jsonl").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to give a file to another user")
def test_a_tapes_toml_of_another_user_is_ignored(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    planted = tmp_path / "tapes.toml"
    planted.write_text("[tools.clock]\nlive = true\n")
    os.chown(planted, 4321, 4321)
    with pytest.warns(UserWarning, match="belongs to another user"):
        cfg = config_for_tape(tmp_path / "s.jsonl")
    assert cfg.path is None and not cfg.policy("clock").live


@pytest.mark.skipif(os.geteuid() != 0, reason="needs to give a symlink to another user")
def test_a_tapes_toml_symlink_another_user_planted_is_ignored_wherever_it_leads(tmp_path: Path) -> None:
    """Owned by its link: one planted by another user (in a shared folder) to a file root owns, or to nowhere, is
    passed over with a warning, as a planted file is; one of ours that leads nowhere is an error naming it."""
    (tmp_path / ".git").mkdir()
    planted = tmp_path / "tapes.toml"
    for target in ("/etc/hostname", str(tmp_path / "gone.toml")):
        planted.unlink(missing_ok=True)
        planted.symlink_to(target)
        os.lchown(planted, 4321, 4321)
        with pytest.warns(UserWarning, match="belongs to another user"):
            assert find_tape_config(tmp_path / "s.jsonl") is None
    os.lchown(planted, os.getuid(), os.getgid())
    assert find_tape_config(tmp_path / "s.jsonl") == planted
    hop = tmp_path / "shared.toml"  # ours, to a link of another user's, to a root-owned file: a hop of the chain
    hop.symlink_to("/etc/hostname")
    os.lchown(hop, 4321, 4321)
    planted.unlink()
    planted.symlink_to(hop)
    with pytest.warns(UserWarning, match="belongs to another user"):
        assert find_tape_config(tmp_path / "s.jsonl") is None
