from __future__ import annotations

from pathlib import Path

import pytest

from tapetui import ConfigError, load_config
from tests.conftest import ROOT


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "tapes.toml"
    p.write_text(text)
    return p


def test_repository_config_points_at_sample_tapes() -> None:
    cfg = load_config(ROOT / "tapes.toml")
    assert cfg.tapes_dir == ROOT / "sample_tapes"
    assert cfg.registry == "tapetui.sample_agent:registry"
    assert cfg.policy("quote_price").ttl == 3600 and cfg.policy("quote_price").stale_policy == "miss"
    assert cfg.ignore_rules().ignores(["args", "meta", "request_id"])


def test_unknown_key_names_key_and_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tapes\.toml: unknown key 'tapes\.dri'"):
        load_config(write(tmp_path, '[tapes]\ndri = "x"\n'))
    with pytest.raises(ConfigError, match=r"unknown key 'tools\.q\.tll'"):
        load_config(write(tmp_path, "[tools.q]\ntll = 3\n"))
    with pytest.raises(ConfigError, match=r"unknown key 'extra'"):
        load_config(write(tmp_path, "[extra]\na = 1\n"))


def test_wrong_type_names_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"'diff\.ignore' must be a list"):
        load_config(write(tmp_path, '[diff]\nignore = "x"\n'))
    with pytest.raises(ConfigError, match=r"'tools\.q\.live' must be true or false"):
        load_config(write(tmp_path, '[tools.q]\nlive = "yes"\n'))
    with pytest.raises(ConfigError, match=r"'tools\.q\.ttl'.*not a duration"):
        load_config(write(tmp_path, '[tools.q]\nttl = "soon"\n'))
    with pytest.raises(ConfigError, match=r"stale_policy' must be one of warn, miss, error"):
        load_config(write(tmp_path, '[tapes]\nstale_policy = "ignore"\n'))


def test_syntax_error_names_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tapes\.toml:2"):
        load_config(write(tmp_path, "[tapes]\ndir = \n"))


def test_paths_must_stay_in_the_project(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="outside the project"):
        load_config(write(tmp_path, '[tapes]\ndir = "../elsewhere"\n'))
    with pytest.raises(ConfigError, match="outside the project"):
        load_config(write(tmp_path, '[tapes]\nchangelog = "/etc/passwd"\n'))


def test_durations(tmp_path: Path) -> None:
    cfg = load_config(write(tmp_path, '[tools.a]\nttl = "30m"\n[tools.b]\nttl = 2.5\n[tools.c]\nttl = "2d"\n'))
    assert [cfg.policy(t).ttl for t in "abc"] == [1800, 2.5, 172800]
