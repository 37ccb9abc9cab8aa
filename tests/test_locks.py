"""The session lock protocol (tapetui/locks.py, SECURITY.md): concurrent and interrupted review commands.

Children are synchronised by pipes (a child prints ``paused`` while it holds a session and waits for
a line on stdin), never by sleeping.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import orjson
import pytest

import tapetui.review.journal as journal
from tapetui import Config, Tape, TapeError, ToolRegistry, review
from tapetui.core import locks
from tapetui.core.store import candidate_path, iter_goldens, journal_path, samples_of
from tapetui.core.tapefile import read_index

ROOT = Path(__file__).resolve().parent.parent


def _registry(counter: Path | None = None) -> ToolRegistry:
    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    def echo(n: int, who: str = "") -> dict[str, object]:
        return {"n": n, "who": who}

    def count() -> None:
        if counter is not None:
            counter.write_text(str(int(counter.read_text()) + 1 if counter.exists() else 1))

    @reg.tool(schema={"type": "object"}, version="1", side_effect=True)
    def send(n: int) -> dict[str, object]:
        count()
        return {"sent": n}

    @reg.tool(schema={"type": "object"}, version="1", side_effect=True)
    def notify(n: int) -> dict[str, object]:
        count()
        return {"notified": n}

    return reg


def _session(tmp_path: Path, with_candidate: bool = True) -> tuple[Config, Path]:
    tapes = tmp_path / "tapes"
    tapes.mkdir()
    cfg = Config.for_dir(tapes)
    golden = tapes / "s.jsonl"
    with Tape(golden, "record", _registry(), config=cfg, run_log=False) as t:
        t.call("echo", {"n": 1})
        t.call("echo", {"n": 2})
    if with_candidate:
        with Tape(golden, "record", _registry(), config=cfg, run_log=False) as t:
            t.call("echo", {"n": 1})
            t.call("echo", {"n": 20})
    return cfg, golden


PAUSED_ACCEPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    import tapetui.review.journal as g
    from tapetui.review import accept
    from tapetui import Config
    real = g.atomic_write
    def paused(path, data, **kw):
        # the temp golden is written; the journal is not yet: the window where recover used to delete it
        print("paused", flush=True)
        sys.stdin.readline()
        return real(path, data, **kw)
    g.atomic_write = paused
    tapes = Path(sys.argv[1])
    accept(Config.for_dir(tapes), tapes / "s.jsonl", "from the paused child")
    print("accepted", flush=True)
""")


def _paused_accept(tapes: Path) -> subprocess.Popen[bytes]:
    p = subprocess.Popen(
        [sys.executable, "-c", PAUSED_ACCEPT, str(tapes)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.stdout is not None
    assert p.stdout.readline() == b"paused\n", p.stderr.read() if p.stderr else b""
    return p


def _resume(p: subprocess.Popen[bytes]) -> tuple[int, str, str]:
    out, err = p.communicate(b"\n", timeout=60)
    return p.returncode, out.decode(), err.decode()


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tapetui", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=60,
    )


@pytest.mark.slow
def test_recover_and_check_leave_an_accept_in_flight_alone(tmp_path: Path) -> None:
    cfg, golden = _session(tmp_path)
    new = candidate_path(golden).read_bytes()
    p = _paused_accept(cfg.tapes_dir)
    tmp = journal.tmp_of(golden)
    assert tmp.exists()
    notes = review.recover(cfg)  # another open file description: the lock is held against it
    assert tmp.exists() and any("in use by another process" in n for n in notes)
    r = _cli("check", str(cfg.tapes_dir), cwd=tmp_path)
    assert "Traceback" not in r.stderr and r.returncode in (0, 1), r.stderr
    assert tmp.exists()
    rc, out, err = _resume(p)
    assert rc == 0 and "accepted" in out, err
    assert golden.read_bytes() == new  # the accept really happened
    assert not candidate_path(golden).exists()
    assert cfg.changelog.read_text().count("from the paused child") == 1


def test_two_accepts_of_one_session_make_one_change_and_one_entry(tmp_path: Path) -> None:
    cfg, golden = _session(tmp_path)
    new = candidate_path(golden).read_bytes()
    first = _paused_accept(cfg.tapes_dir)
    second = subprocess.Popen(
        [sys.executable, "-m", "tapetui", "accept", str(golden), "--why", "second"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    rc, _, err = _resume(first)  # the second waits on the session lock until the first is done
    assert rc == 0, err
    out2, err2 = second.communicate(timeout=60)
    assert second.returncode == 2 and "no pending candidate" in err2 and "Traceback" not in err2, err2
    assert golden.read_bytes() == new
    text = cfg.changelog.read_text()
    assert text.count("<!-- tapetui:entry") == 1 and "second" not in text


RECORDER = textwrap.dedent("""
    import sys
    from pathlib import Path
    from tapetui import Config, Tape, ToolRegistry
    reg = ToolRegistry()
    @reg.tool(schema={"type": "object"}, version="1")
    def echo(n: int, who: str = "") -> dict:
        return {"n": n, "who": who}
    tapes, who = Path(sys.argv[1]), sys.argv[2]
    with Tape(tapes / "new.jsonl", "record", reg, config=Config.for_dir(tapes)) as t:
        print("ready", flush=True)
        sys.stdin.readline()  # every recorder has claimed its file before any records
        for n in range(1, 41):
            t.call("echo", {"n": n, "who": who})
            print(f"ack {n}", flush=True)
""")


def test_processes_recording_one_new_session_never_mix_and_lose_nothing(tmp_path: Path) -> None:
    tapes = tmp_path / "tapes"
    tapes.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RECORDER, str(tapes), f"p{i}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for i in range(4)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline() == b"ready\n"
    results = [p.communicate(b"go\n", timeout=120) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err.decode()
        assert out.decode().count("ack ") == 40
    golden = tapes / "new.jsonl"
    files = [golden, candidate_path(golden), *samples_of(golden)]
    assert len(files) == 4 and all(f.exists() for f in files)  # one golden, one candidate, two displaced samples
    owners = set()
    for f in files:
        recs = list(read_index(f, validate=True).records())
        assert [r.seq for r in recs] == list(range(1, 41)), f  # one whole session per file, never two mixed
        who = {r.args["who"] for r in recs}
        assert len(who) == 1, (f, who)
        owners |= who
    assert owners == {"p0", "p1", "p2", "p3"}


def test_record_over_a_pending_candidate_moves_it_to_samples(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg, golden = _session(tmp_path)
    old = candidate_path(golden).read_bytes()
    with Tape(golden, "record", _registry(), config=cfg, run_log=False) as t:
        t.call("echo", {"n": 3})
    (moved,) = samples_of(golden)
    assert moved.read_bytes() == old
    assert any("moved to" in n for n in t.notices) and "moved to" in caplog.text
    assert iter_goldens(cfg.tapes_dir).__next__() == golden  # samples are not sessions
    assert [p.name for p in iter_goldens(cfg.tapes_dir)] == ["s.jsonl"]


def _die(t: Tape) -> None:
    """What a SIGKILL does to an open tape: descriptors and locks go, nothing is finished or written."""
    t._closed = True
    t._release()


def test_fill_after_an_interrupted_fill_runs_no_side_effect_again(tmp_path: Path) -> None:
    tapes = tmp_path / "tapes"
    tapes.mkdir()
    cfg = Config.for_dir(tapes)
    golden = tapes / "s.jsonl"
    counter = tmp_path / "sent"
    with Tape(golden, "record", _registry(), config=cfg, run_log=False) as t:
        for n in (1, 2, 3):
            t.call("send", {"n": n})
    reg = _registry(counter)
    session = [("send", 1), ("notify", 9), ("send", 2), ("send", 3)]  # a new step 2, a miss
    # A fill that runs the new step live, then dies (never closed) before steps 3 and 4.
    t = Tape(golden, "fill", reg, config=cfg, run_log=False)
    for tool, n in session[:2]:
        t.call(tool, {"n": n})
    assert counter.read_text() == "1"
    _die(t)
    with Tape(golden, "fill", reg, config=cfg) as again:
        for tool, n in session:
            again.call(tool, {"n": n})
    assert again.stats()["real_side_effects"] == 0 and again.stats()["live_tool_calls"] == 0
    assert counter.read_text() == "1"
    played = [(r.tool, r.args["n"]) for r in read_index(candidate_path(golden), validate=True).records()]
    assert played == session  # the new candidate is the whole session as played
    (partial,) = samples_of(golden)  # the partial one is kept, not replaced
    assert [(r.tool, r.args["n"]) for r in read_index(partial, validate=True).records()] == session[:2]


def test_review_action_during_a_recording_waits_then_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, golden = _session(tmp_path)
    monkeypatch.setattr(locks, "DEFAULT_WAIT", 0.2)
    t = Tape(golden, "fill", _registry(), config=cfg, run_log=False)
    done = threading.Event()
    errors: list[BaseException] = []

    def accept() -> None:
        try:
            review.accept(cfg, golden, "while recording")
        except BaseException as e:
            errors.append(e)
        done.set()

    th = threading.Thread(target=accept)
    th.start()
    assert done.wait(30)
    th.join()
    t.close()
    assert len(errors) == 1 and isinstance(errors[0], locks.LockBusy) and "in use" in str(errors[0])
    assert candidate_path(golden).exists() and not cfg.changelog.exists()
    review.accept(cfg, golden, "after the recording")  # the lock was released at close
    assert not candidate_path(golden).exists()


def test_session_lock_is_reentrant_within_a_thread(tmp_path: Path) -> None:
    _, golden = _session(tmp_path, with_candidate=False)
    with locks.session_lock(golden), locks.session_lock(golden), locks.try_session_lock(golden) as held:
        assert held
    with locks.try_session_lock(golden) as held:  # released after the outermost exit
        assert held


BAD_JOURNALS = {
    "list": b"[]",
    "empty object": b"{}",
    "null": b"null",
    "not json": b'{"id": ',
    "missing entry": None,  # filled in below from a good journal
    "tmp escapes": None,
    "tmp names another golden": None,
    "sha256 mismatch": None,
}


def _good_journal(golden: Path) -> dict[str, object]:
    return {
        "id": "abcdef012345",
        "golden": golden.name,
        "tmp": journal.tmp_of(golden).name,
        "sha256": "0" * 64,
        "remove_candidate": True,
        "entry": {
            "when": "2030-01-01T00:00:00Z",
            "action": "accept",
            "session": "s",
            "steps": [2],
            "details": ["x"],
            "rationale": "why",
        },
    }


@pytest.mark.parametrize("shape", list(BAD_JOURNALS))
def test_a_malformed_journal_is_reported_never_trusted(tmp_path: Path, shape: str) -> None:
    cfg, golden = _session(tmp_path)
    other = cfg.tapes_dir / "other.jsonl"
    other.write_bytes(golden.read_bytes())
    before, other_before = golden.read_bytes(), other.read_bytes()
    j = _good_journal(golden)
    data = BAD_JOURNALS[shape]
    if shape == "missing entry":
        del j["entry"]
    elif shape == "tmp escapes":
        j["tmp"] = "../../x"
    elif shape == "tmp names another golden":
        j["tmp"] = "other.jsonl"
    if data is None:
        data = orjson.dumps(j)
    if shape == "sha256 mismatch":
        journal.tmp_of(golden).write_bytes(b"not the journaled bytes\n")
    journal_path(golden).write_bytes(data)
    notes = review.recover(cfg)  # no traceback, and nothing renamed over anything
    assert any(str(journal_path(golden)) in n or "journal" in n for n in notes), notes
    assert golden.read_bytes() == before and other.read_bytes() == other_before
    assert not cfg.changelog.exists()
    r = _cli("check", str(cfg.tapes_dir), cwd=tmp_path)
    assert "Traceback" not in r.stderr, r.stderr
    with pytest.raises(TapeError, match="journal"):
        review.accept(cfg, golden, "must not overwrite the journal")
    assert golden.read_bytes() == before


def test_killed_journal_writes_leave_no_temp_files(tmp_path: Path) -> None:
    cfg, golden = _session(tmp_path)
    junk = [cfg.tapes_dir / f".{golden.name}.journal.k1z2x3c4.tmp", cfg.tapes_dir / ".s.candidate.jsonl.q9w8e7r6.tmp"]
    for j in junk:
        j.write_bytes(b"{")
    notes = review.recover(cfg)
    assert not any(j.exists() for j in junk), notes
    assert candidate_path(golden).exists()  # only the dead process's temp files went


def test_a_symlinked_changelog_is_never_written_through(tmp_path: Path) -> None:
    cfg, golden = _session(tmp_path)
    victim = tmp_path / "bashrc"
    victim.write_text("# mine\n")
    cfg.changelog.symlink_to(victim)
    before = golden.read_bytes()
    with pytest.raises(TapeError, match="symlink"):
        review.accept(cfg, golden, "secret rationale")
    assert victim.read_text() == "# mine\n"
    review.recover(cfg)
    assert golden.read_bytes() == before  # journaled but unfinished: still not promoted without its entry
    assert victim.read_text() == "# mine\n"


def test_disk_full_writing_the_new_golden_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, golden = _session(tmp_path)
    before, cand = golden.read_bytes(), candidate_path(golden).read_bytes()

    def full(path: Path, data: bytes) -> None:
        with open(path, "wb") as fh:
            fh.write(data[:5])
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(journal, "write_new", full)
    with pytest.raises(TapeError, match="No space left on device.*nothing was changed"):
        review.accept(cfg, golden, "full disk")
    assert golden.read_bytes() == before and candidate_path(golden).read_bytes() == cand
    assert not journal.tmp_of(golden).exists() and not journal_path(golden).exists()
    assert not cfg.changelog.exists()


def test_disk_full_writing_the_changelog_finishes_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, golden = _session(tmp_path)
    before, new = golden.read_bytes(), candidate_path(golden).read_bytes()
    cfg.changelog.write_text("# Tape changelog\n\nolder entries\n")
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        if b"full disk later" in bytes(data):
            real_write(fd, bytes(data)[:20])  # a short write, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(TapeError, match="journaled"):
        review.accept(cfg, golden, "full disk later")
    monkeypatch.setattr(os, "write", real_write)
    assert golden.read_bytes() == before  # no golden without its entry
    assert cfg.changelog.read_text() == "# Tape changelog\n\nolder entries\n"  # the half entry was cut off
    review.recover(cfg)
    assert golden.read_bytes() == new and cfg.changelog.read_text().count("full disk later") == 1


def test_read_only_folder_gives_a_clear_error_and_replay_still_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg, golden = _session(tmp_path)
    real_open = os.open

    def ro_open(path: object, flags: int, *a: object, **k: object) -> int:
        if str(path).startswith(str(cfg.tapes_dir)) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, flags, *a, **k)  # type: ignore[arg-type]

    before = golden.read_bytes()
    monkeypatch.setattr(os, "open", ro_open)
    for action in (
        lambda: review.accept(cfg, golden, "ro"),
        lambda: review.reject(cfg, golden, "ro"),
        lambda: review.expire(cfg, golden, [1], why="ro"),
    ):
        with pytest.raises(TapeError, match="Read-only file system"):
            action()
    with Tape(golden, "replay", _registry(), config=cfg, run_log=False) as t:  # unlocked, and still offline
        assert t.call("echo", {"n": 1}) == {"n": 1, "who": ""}
    monkeypatch.setattr(os, "open", real_open)
    assert golden.read_bytes() == before and candidate_path(golden).exists()


def test_pending_shows_the_candidates_a_newer_recording_displaced(tmp_path: Path) -> None:
    cfg, golden = _session(tmp_path)
    with Tape(golden, "record", _registry(), config=cfg, run_log=False) as t:
        t.call("echo", {"n": 3})
    r = _cli("pending", "--json", cwd=cfg.tapes_dir)
    (item,) = orjson.loads(r.stdout)
    assert [Path(p).name for p in item["older_candidates"]] == [samples_of(golden)[0].name]
    text = _cli("pending", cwd=cfg.tapes_dir).stdout
    assert "1 older candidate(s)" in text and "s.samples" in text


def test_the_journal_never_holds_a_secret_from_the_rationale(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg, golden = _session(tmp_path)
    secret = "sk-ant-api03-" + "Q" * 40
    seen: list[bytes] = []
    real = journal.atomic_write

    def spy(path: Path, data: bytes, **kw: object) -> None:
        if Path(path) == journal_path(golden):
            seen.append(bytes(data))
        real(path, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(journal, "atomic_write", spy)
    review.accept(cfg, golden, f"rotated the key {secret}")
    assert seen and all(secret.encode() not in j for j in seen)
    assert secret not in cfg.changelog.read_text()


def test_a_tape_name_too_long_for_its_side_files_is_refused_before_any_tool_runs(tmp_path: Path) -> None:
    counter = tmp_path / "sent"
    long = tmp_path / ("x" * 230 + ".jsonl")
    with pytest.raises(TapeError, match="too long"):
        Tape(long, "record", _registry(counter), run_log=False)
    assert not counter.exists() and not long.exists()
    with pytest.raises(TapeError, match="too long|no tape to replay"):  # never a raw OSError
        Tape(tmp_path / ("y" * 300 + ".jsonl"), "replay", _registry(), run_log=False)


def test_a_journal_recover_cannot_finish_fails_check_and_recover(sample_dir: Path) -> None:
    from tests.conftest import tapetui_cli

    journal = sample_dir / "sample_tapes" / "clean.jsonl.journal"
    journal.write_text('{"bad":1}')
    r = tapetui_cli(sample_dir, "check")
    assert r.returncode == 1 and "clean.jsonl.journal: an interrupted change could not be finished" in r.stdout
    r = tapetui_cli(sample_dir, "recover")
    assert r.returncode == 2 and r.stderr.startswith("tapetui: ") and "malformed journal" in r.stderr
    assert journal.read_text() == '{"bad":1}'  # left in place for a person to look at
