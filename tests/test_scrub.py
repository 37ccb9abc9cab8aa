"""``tapetui scrub``: secrets that older rules left on disk are redacted with the current rules, keys
recomputed, one changelog entry per session changed, the removals reported by rule, atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tapetui import Config, Tape, TapeError, ToolRegistry
from tapetui.cli import main as cli_main
from tapetui.core import indexcache
from tapetui.core.redact import Redactor
from tapetui.core.store import candidate_path, runlog_path, samples_of
from tapetui.core.tapefile import read_index, torn_path
from tapetui.review.changelog import read_entries
from tapetui.review.scrub import scrub
from tests.test_forms import KEY_1, KEY_2, _form1_tape
from tests.test_forms import _registry as _search_registry

SECRETS = {
    "arg": "sk-ant-api03-ScrubArg0001abcdefgh",
    "json_text": "ScrubJsonPw0002",
    "result": "ScrubResultTok0003",
    "error": "ghp_ScrubErr0004abcdefghijklmnopqrs",
    "label": "ScrubLabelPw0005",
    "dict_key": "AKIASCRUBDICTKEY0006",
    "default": "sk-live-ScrubDefault0007abcd",
    "torn": "ScrubTornPw0008",
}


class _Raw(Config):
    """What an older tapetui, with fewer rules, left on disk: here, no rules at all."""

    def redactor(self) -> Redactor:
        return Redactor(defaults=False)


def _registry() -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(version="1")
    def fetch(q: str, n: int, api_key: str = SECRETS["default"], map: dict[str, Any] | None = None) -> dict[str, Any]:
        return {"q": q, "session_token": SECRETS["result"]}

    @reg.tool(version="1")
    def fail(n: int) -> None:
        raise RuntimeError(f"rejected {SECRETS['error']}")

    return reg


def _calls(t: Tape, n: int) -> None:
    t.call("fetch", {"q": f"use {SECRETS['arg']}", "n": n})
    t.call("fetch", {"q": '{{"password": "{}"}}'.format(SECRETS["json_text"]), "n": n})
    t.call("fetch", {"q": "keys", "n": n, "map": {SECRETS["dict_key"]: 1}})
    with pytest.raises((RuntimeError, TapeError)):
        t.call("fail", {"n": n})


def _old_folder(tmp_path: Path) -> tuple[Config, Path]:
    """Three sessions: ``agent`` recorded with no rules (golden, run log, candidate, sample, torn bytes),
    ``legacy`` a form-1 tape with a secret default, ``clean`` recorded with today's rules."""
    tapes = tmp_path / "tapes"
    tapes.mkdir()
    raw = _Raw.for_dir(tapes)
    agent = tapes / "agent.jsonl"
    for n in (1, 2, 3):  # the golden, a candidate, then that candidate moves into agent.samples/
        with Tape(agent, "record", _registry(), config=raw, labels={"db": f"password={SECRETS['label']}"}) as t:
            _calls(t, n)
    # a run log with drift (n differs): raw args in it
    with Tape(agent, "replay", _registry(), config=raw) as t, pytest.raises(TapeError):
        _calls(t, 9)
    torn_path(agent).write_bytes(
        b'{"type":"call","seq":4,"tool":"fetch","args":{"password":"%s\n' % SECRETS["torn"].encode()
    )
    with open(candidate_path(agent), "ab") as fh:  # a torn tail in the candidate itself
        fh.write(b'{"type":"call","seq":9,"args":{"token":"%s' % SECRETS["torn"].encode())
    _form1_tape(tapes / "legacy.jsonl")
    with Tape(tapes / "clean.jsonl", "record", _registry(), config=Config.for_dir(tapes)) as t:
        _calls(t, 1)
    assert samples_of(agent) and runlog_path(agent).exists()
    return Config.for_dir(tapes), tapes


def _files(*roots: Path) -> list[Path]:
    """Every file, but the session lock files (empty, created on first use: see tapetui.core.locks)."""
    return sorted(
        p
        for r in roots
        if r.exists()
        for p in r.rglob("*")
        if p.is_file() and not (p.name.startswith(".") and p.name.endswith((".gate", ".lock")))
    )


def _leaks(*roots: Path) -> dict[str, list[str]]:
    out = {}
    for p in _files(*roots):
        data = p.read_bytes()
        found = [s for s in (*SECRETS.values(), KEY_1) if s.encode() in data]
        if found:
            out[str(p)] = found
    return out


def test_scrub_redacts_every_file_recomputes_keys_and_writes_one_entry_per_session(tmp_path: Path) -> None:
    cfg, tapes = _old_folder(tmp_path)
    assert _leaks(tapes)  # the secrets really are on disk
    clean_before = (tapes / "clean.jsonl").read_bytes()
    report = scrub(cfg)
    assert not report.errors, report.errors
    assert _leaks(tapes) == {}
    assert report.changed_sessions == ["agent", "legacy"]
    assert (tapes / "clean.jsonl").read_bytes() == clean_before
    entries = read_entries(cfg.changelog)
    assert len(entries) == 2 and all("scrub" in e for e in entries)
    text = orjson.dumps(report.to_json()).decode()
    assert not [s for s in SECRETS.values() if s in text] and KEY_1 not in text
    rules = report.rules
    for rule in (
        "prefixed-api-key",
        "secret-dict-key",
        "secret-key-name",
        "json-text",
        "github-token",
        "secret-assignment",
    ):
        assert rules[rule] > 0, (rule, rules)
    assert "secret-key-name ×" in "\n".join(entries)  # the entry says what was removed, by rule
    kinds = {(f.session, f.kind) for f in report.files}
    assert {
        ("agent", "golden"),
        ("agent", "candidate"),
        ("agent", "sample"),
        ("agent", "run log"),
        ("agent", "torn"),
        ("legacy", "golden"),
    } <= kinds
    # keys were recomputed: today's rules replay the scrubbed golden with no miss
    with Tape(tapes / "agent.jsonl", "replay", _registry(), config=cfg) as t:
        _calls(t, 1)
        assert t.stats()["tape_hits"] == 4 and t.stats()["tape_misses"] == 0
    # the legacy tool line moved to form 2: rotating its key is no longer drift
    legacy = [orjson.loads(x) for x in (tapes / "legacy.jsonl").read_bytes().splitlines()]
    assert next(r for r in legacy if r.get("type") == "tool")["form"] == 2
    with Tape(tapes / "legacy.jsonl", "replay", _search_registry(KEY_2), config=cfg) as t:
        assert t.call("search", {"query": "a"}) == {"hits": ["a"]}
    # the torn tail of the candidate is still a torn tail, redacted
    cand = read_index(candidate_path(tapes / "agent.jsonl"))
    assert cand.torn is not None
    # and again: nothing left to do, no new entry
    again = scrub(cfg)
    assert not again.files and not again.errors and len(read_entries(cfg.changelog)) == 2


def test_dry_run_changes_nothing_and_the_cli_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg, tapes = _old_folder(tmp_path)
    before = {p: p.read_bytes() for p in _files(tapes)}
    assert cli_main(["scrub", str(tapes), "--dry-run"]) == 1  # something would be removed
    out = capsys.readouterr().out
    assert "agent" in out and "would remove" in out
    assert {p: p.read_bytes() for p in _files(tapes)} == before
    assert cli_main(["scrub", str(tapes), "--json"]) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["ok"] and doc["sessions_changed"] == ["agent", "legacy"] and doc["removed_by_rule"]
    assert not [s for s in SECRETS.values() if s in str(doc)]
    assert cli_main(["scrub", str(tapes), "--dry-run"]) == 0  # nothing left
    assert cli_main(["scrub", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


def test_scrub_is_atomic_with_its_changelog_entry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tapetui.review.journal as journal

    cfg, tapes = _old_folder(tmp_path)
    before = {p: p.read_bytes() for p in _files(tapes)}

    def full(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(journal, "write_new", full)
    assert cli_main(["scrub", str(tapes)]) == 2
    assert "No space left on device" in capsys.readouterr().err
    after = {p: p.read_bytes() for p in _files(tapes)}
    assert after == before  # no golden, candidate or run log changed, and no changelog entry
    assert not cfg.changelog.exists()


def test_scrub_drops_index_cache_entries_that_hold_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, tapes = _old_folder(tmp_path)
    cache = tmp_path / "cache"
    monkeypatch.setenv("TAPETUI_CACHE_DIR", str(cache))
    monkeypatch.setattr(indexcache, "MIN_BYTES", 0)
    monkeypatch.setattr(indexcache, "RACY_NS", 0)
    read_index(tapes / "clean.jsonl")  # an entry with nothing to remove: kept
    (tmp_path / "elsewhere").mkdir()
    with monkeypatch.context() as m:  # entries as an older tapetui saved them: the tool line verbatim
        m.setattr(indexcache, "_safe_manifest_line", lambda line: line)
        read_index(tapes / "legacy.jsonl")
        read_index(_form1_tape(tmp_path / "elsewhere" / "other.jsonl"))  # a tape outside the folder scrubbed
    assert len(_files(cache)) == 3 and _leaks(cache)
    report = scrub(cfg)
    assert report.cache_dropped == 2 and _leaks(cache) == {} and len(_files(cache)) == 1


def test_replaying_an_old_tape_puts_no_old_secret_in_its_run_log_or_errors(tmp_path: Path) -> None:
    """Until it is scrubbed, a tape from older rules is redacted again on its way to a run log or an error."""
    cfg, tapes = _old_folder(tmp_path)
    agent = tapes / "agent.jsonl"
    with Tape(agent, "replay", _registry(), config=cfg) as t:
        with pytest.raises(TapeError) as drift:  # n differs: drift at step 1, the recorded arguments shown
            t.call("fetch", {"q": f"use {SECRETS['arg']}", "n": 7})
        with pytest.raises(TapeError) as miss:  # a miss: the nearest recorded call's arguments compared
            t.call("fetch", {"q": "other", "n": 7, "map": {"k": 1}})
    text = str(drift.value) + str(miss.value) + runlog_path(agent).read_text()
    assert "args.n  1 → 7" in str(drift.value)
    assert not [s for s in SECRETS.values() if s in text]


def test_a_session_another_process_holds_is_reported_and_the_rest_scrubbed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from tapetui.core import locks

    cfg, tapes = _old_folder(tmp_path)
    monkeypatch.setattr(locks, "DEFAULT_WAIT", 0.2)
    held, done = threading.Event(), threading.Event()

    def hold() -> None:  # another thread: its own descriptors, so its flock excludes ours as another process's would
        with locks.session_lock(tapes / "agent.jsonl"):
            held.set()
            done.wait(30)

    th = threading.Thread(target=hold)
    th.start()
    try:
        assert held.wait(30)
        report = scrub(cfg)
    finally:
        done.set()
        th.join()
    assert report.changed_sessions == ["legacy"]
    assert len(report.errors) == 1 and "agent.jsonl" in report.errors[0] and "in use" in report.errors[0]
    leaks = _leaks(tapes)
    assert leaks and all(Path(p).relative_to(tapes).parts[0].startswith("agent") for p in leaks), leaks  # held: kept


def test_scrub_drops_undo_history_that_kept_what_the_rules_remove_now(sample_dir: Path) -> None:
    from dataclasses import replace

    from tapetui import load_config
    from tapetui.review import accept, undo

    cfg = load_config(sample_dir / "tapes.toml")
    g = cfg.tapes_dir / "drift_summarize.jsonl"
    secret = "SECRETZZZ123456"  # an opaque value the rules in force missed when it was recorded
    g.write_bytes(g.read_bytes().replace(b"Agents call tools", secret.encode() + b" call tools"))
    accept(cfg, g, "shorter summaries")  # the history keeps the golden before: the secret with it
    history = sample_dir / ".tapetui" / "history"
    assert any(secret.encode() in p.read_bytes() for p in history.rglob("*") if p.is_file())
    stricter = replace(cfg, redact_patterns=(*cfg.redact_patterns, "SECRETZZZ[0-9]+"))
    assert scrub(stricter, dry_run=True).history_dropped == 1
    report = scrub(stricter)
    assert report.history_dropped == 1
    held = [p for p in sample_dir.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert held == [cfg.changelog]  # the changelog is not rewritten (README: what scrub does not touch)
    with pytest.raises(TapeError, match="history is gone"):
        undo(stricter, g)  # the secret cannot come back through an undo


def test_a_folder_scrub_cannot_list_is_an_error_never_passed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Secrets in a sub-folder scrub cannot list (another user's, a restrictive umask) stay on disk: scrub says so,
    naming the folder, and the sessions it can list are scrubbed."""
    from tests.builders import refuse_listing

    cfg, tapes = _old_folder(tmp_path)
    (tapes / "suite").mkdir()
    refuse_listing(monkeypatch, "suite")
    report = scrub(cfg, dry_run=True)
    assert report.sessions == 3
    assert any(f"{tapes / 'suite'}: a folder scrub cannot list (Permission denied)" in e for e in report.errors)
    refuse_listing(monkeypatch, "tapes")  # the tapes folder itself
    report = scrub(cfg, dry_run=True)
    assert report.sessions == 0 and any(f"{tapes}: a folder scrub cannot list" in e for e in report.errors)
