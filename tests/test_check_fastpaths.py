"""``check``'s fast paths say exactly what the slow ones say.

``check`` reads a golden's lines in one decode and checks its calls a column at a time, reads a run log
the same way, and asks a listing of each folder which files a session has instead of the file system.
Each of these has a plain line-by-line (or ask-the-file-system) twin; these tests hold them to it, on
ordinary and on odd inputs.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import orjson
import pytest

from tapetui.core.config import Config, load_config
from tapetui.core.errors import TapeError
from tapetui.core.index import TapeIndex
from tapetui.core.keys import key_of
from tapetui.core.lineparse import _line_by_line, _slow
from tapetui.core.listing import Listing
from tapetui.core.runlog import RunLogReader
from tapetui.core.store import iter_goldens
from tapetui.core.tapefile import read_index
from tapetui.review import checkcache, findings
from tapetui.review.findings import check, check_session
from tapetui.review.plainrun import read_plain_run

from .builders import call_line

COLUMNS = ("seqs", "tools", "keys", "fingerprints", "side_effects", "ms", "offsets", "lengths", "lines")


def _index_both_ways(data: bytes) -> tuple[TapeIndex | str, TapeIndex | str]:
    """The index of ``data`` (whole lines) by the bulk scan and line by line, or the error each raised."""
    out: list[TapeIndex | str] = []
    for bulk in (True, False):
        idx = TapeIndex(Path("t.jsonl"))
        try:
            if bulk:
                _slow(idx, data, 0, len(data), 0, 0)
            else:
                raws = data.split(b"\n")[:-1]
                _line_by_line(idx, raws, 0, 0)
        except TapeError as e:
            out.append(str(e))
            continue
        out.append(idx)
    return out[0], out[1]


def _same_index(a: TapeIndex | str, b: TapeIndex | str) -> None:
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
        return
    for name in COLUMNS:
        assert list(getattr(a, name)) == list(getattr(b, name)), name
    assert a.expires == b.expires
    assert a.key_mismatches == b.key_mismatches
    assert a.header == b.header and set(a.manifests) == set(b.manifests)
    assert [(n.kind, n.value, n.line) for n in a.notes] == [(n.kind, n.value, n.line) for n in b.notes]
    assert a.extra_spans == b.extra_spans and a.unknown_lines == b.unknown_lines


def _line(obj: object) -> bytes:
    return orjson.dumps(obj) + b"\n"


HEADER = _line({"type": "session", "v": 1})
TOOL = _line({"type": "tool", "name": "fetch", "fingerprint": "f" * 16})
NOTE = _line({"type": "note", "kind": "answer", "value": "42", "after": 2})


def _calls(n: int, **extra: object) -> bytes:
    return b"".join(call_line(seq=i + 1, tool="fetch", args={"n": i}, result={"ok": i}, **extra) for i in range(n))


DROP = object()


def _raw(**fields: object) -> bytes:
    """A call line as the writer lays it out, with ``fields`` changed (``DROP``: left out)."""
    line: dict[str, object] = {
        "type": "call",
        "seq": 1,
        "tool": "fetch",
        "key": key_of("fetch", {}),
        "fingerprint": "",
        "side_effect": False,
        "ms": 1,
        "expires_at": None,
        "args": {},
        "result": 1,
    }
    line.update(fields)
    return _line({k: v for k, v in line.items() if v is not DROP})


DEEP = _raw(key="fetch:x", args={"a": 1}).replace(b'{"a":1}', b'{"a":' + b"[" * 300 + b"]" * 300 + b"}")
ODD_TAPES = {
    "plain": HEADER + TOOL + _calls(5),
    "notes and unknown kinds among the calls": HEADER + _calls(2) + NOTE + _line({"type": "later"}) + _calls(2),
    "a call with an expiry": HEADER + _calls(2, expires_at="2030-01-01T00:00:00Z"),
    "a key edited by hand": HEADER + _raw(key="fetch:000000000000", args={"n": 1}),
    "arguments stored in another order": HEADER + _raw(key=key_of("fetch", {"a": 1, "b": 2}), args={"b": 2, "a": 1}),
    "a call with no type, between typed ones": HEADER
    + _calls(1)
    + _line({"seq": 2, "tool": "fetch", "args": {"n": 9}, "result": 1})
    + _calls(1),
    "a call missing its fingerprint": HEADER + _raw(fingerprint=DROP, key=DROP),
    "a seq that is not a number": HEADER + _raw(seq="1"),
    "a side effect that is not a flag": HEADER + _raw(side_effect=1),
    "an error that is not an object": HEADER + _raw(error="boom"),
    "a blank line": HEADER + _calls(1) + b"   \n" + _calls(1),
    "a malformed line after a good one": HEADER + _calls(1) + b'{"type": "call", \n' + _calls(1),
    "a line that is not an object": HEADER + b"[1, 2]\n" + _calls(1),
    "arguments nested past what is written": HEADER + DEEP,
}


@pytest.mark.parametrize("data", ODD_TAPES.values(), ids=ODD_TAPES.keys())
def test_the_bulk_scan_indexes_what_the_line_by_line_scan_indexes(data: bytes) -> None:
    bulk, lines = _index_both_ways(data)
    _same_index(bulk, lines)


def test_a_hand_edited_key_is_still_found_by_the_bulk_scan() -> None:
    bulk, _ = _index_both_ways(ODD_TAPES["a key edited by hand"])
    assert isinstance(bulk, TapeIndex) and [m[0] for m in bulk.key_mismatches] == [2]
    fine, _ = _index_both_ways(ODD_TAPES["arguments stored in another order"])
    assert isinstance(fine, TapeIndex) and fine.key_mismatches == []  # canon sorts them: the key is theirs


def test_a_validating_read_of_a_small_tape_is_the_read_in_chunks(tmp_path: Path) -> None:
    tape = tmp_path / "t.jsonl"
    tape.write_bytes(ODD_TAPES["notes and unknown kinds among the calls"] + b'{"type":"call","seq":9')  # torn
    small = read_index(tape, validate=True, keep_bytes=True)
    chunked = read_index(tape)
    for name in COLUMNS:
        assert list(getattr(small, name)) == list(getattr(chunked, name)), name
    assert small.torn == chunked.torn and small.torn is not None
    assert small.size == chunked.size == tape.stat().st_size and small.data == tape.read_bytes()


HIT = {"event": "hit", "seq": 1, "tool": "t", "key": "t:1", "step": 1}
RUN_LOGS = {
    "a replay": [{"event": "start", "mode": "replay"}, HIT, {"event": "end", "stats": {}}],
    "a field of the wrong type": [{"event": "hit", "seq": "1", "tool": "t"}, {"event": "end", "stats": []}],
    "a note without its label": [{"event": "note", "value": 1}, {"event": "phase", "name": "x", "after": -1}],
    "not an object": [[1], "x", {"event": 3}],
}


@pytest.mark.parametrize("events", RUN_LOGS.values(), ids=RUN_LOGS.keys())
def test_a_run_log_read_in_bulk_is_the_run_log_read_line_by_line(tmp_path: Path, events: list[object]) -> None:
    log = tmp_path / "t.run.jsonl"
    log.write_bytes(b"".join(_line(e) for e in events))
    bulk = RunLogReader(log).poll()[1]
    by_line: list[dict[str, object]] = []
    RunLogReader(log)._line_by_line(log.read_bytes().split(b"\n")[:-1], by_line)
    assert bulk == by_line and len(bulk) == len(events)


def _hostile_folder(d: Path, outside: Path) -> None:
    """Beside the samples: a candidate linking out, a journal left behind, a lock file, a run log that is a FIFO."""
    outside.write_text("secret\n")
    goldens = sorted(d.glob("*.jsonl"))
    plain = [g for g in goldens if not g.name.endswith((".run.jsonl", ".candidate.jsonl"))]
    os.symlink(outside, plain[0].with_name(plain[0].name[: -len(".jsonl")] + ".candidate.jsonl"))
    plain[1].with_name(plain[1].name + ".journal").write_text("{}")
    plain[2].with_name(f".{plain[2].name}.lock").write_text("")
    fifo = plain[3].with_name(plain[3].name[: -len(".jsonl")] + ".run.jsonl")
    fifo.unlink(missing_ok=True)
    os.mkfifo(fifo)
    # files never what tapetui writes: a golden and a run log that lead nowhere, a golden leading out with no run
    # log, a run log whose golden is gone
    os.symlink(d / "nowhere.jsonl", d / "zz_dangling.jsonl")
    run_log = plain[4].with_name(plain[4].name[: -len(".jsonl")] + ".run.jsonl")
    run_log.unlink(missing_ok=True)
    os.symlink(d / "nowhere.run.jsonl", run_log)
    (outside.parent / "elsewhere.jsonl").write_bytes(plain[5].read_bytes())
    os.symlink(outside.parent / "elsewhere.jsonl", d / "zz_out.jsonl")
    gone = next(g for g in plain[6:] if not g.with_name(g.name[: -len(".jsonl")] + ".candidate.jsonl").exists())
    orphan = gone.with_name(gone.name[: -len(".jsonl")] + ".run.jsonl")
    if not orphan.exists():
        orphan.write_text('{"event": "start", "mode": "replay"}\n{"event": "end", "stats": {}}\n')
    gone.unlink()  # its run log stays: a session with nothing to judge the run by


def test_a_check_from_a_listing_says_what_asking_the_file_system_says(sample_dir: Path, tmp_path: Path) -> None:
    tapes = sample_dir / "sample_tapes"
    _hostile_folder(tapes, tmp_path / "outside.txt")
    cfg = Config.for_dir(tapes)
    listing = Listing()
    goldens = list(iter_goldens(tapes, listing, links_out=True))
    with_listing = [check_session(g, cfg, listing.files(g), parked=False).to_json() for g in goldens]
    asking = [check_session(g, cfg).to_json() for g in goldens]
    assert with_listing == asking
    assert [r.to_json() for r in check(tapes, cfg)] == asking
    errors = [r["error"] for r in asking if r["error"]]
    assert any("outside the tapes folder" in e for e in errors) and any("not a regular file" in e for e in errors)
    assert any(f["kind"] == "journal" for r in asking for f in r["findings"])
    # every file that is not what tapetui writes fails the check, never passed over (a pull request could plant one)
    by_name = {r["session"]: r for r in asking}
    assert (
        "leads nowhere" in by_name["zz_dangling"]["error"] and "outside the tapes folder" in by_name["zz_out"]["error"]
    )
    assert sum(".run.jsonl: a symlink that leads nowhere" in e for e in errors) == 1
    orphans = [f for r in asking for f in r["findings"] if "a run log with no golden" in f["text"]]
    assert len(orphans) == 1 and orphans[0]["kind"] == "stale_run"


def _hit(step: int | None, n: int | None, **more: object) -> dict[str, object]:
    from tapetui.core.keys import key_of

    ev: dict[str, object] = {"event": "hit", "seq": step, "tool": "fetch", "step": step, **more}
    if n is not None:
        ev["key"] = key_of("fetch", {"n": n})
    return {k: v for k, v in ev.items() if v is not None}


HIT_SHAPES = {  # hits of a replay of a golden of fetch n=1, 2, 3 → what check says of them (None: nothing)
    "another golden's run": ([_hit(1, 6), _hit(2, 7), _hit(3, 8)], "is not the golden's call there"),
    "steps it does not hold": ([_hit(1, 1), _hit(99, 2), _hit(100, 3)], "is not the golden's call there"),
    "a step served twice": ([_hit(1, 1), _hit(1, 1), _hit(3, 3)], "served twice in one run"),
    "a hit naming no step": ([_hit(1, 1), _hit(None, 9), _hit(3, 3)], "names no step"),
    "override: false": ([_hit(1, 1), _hit(2, 9, override=False), _hit(3, 3)], "is not the golden's call there"),
    "tolerated: []": ([_hit(1, 1), _hit(2, 9, tolerated=[]), _hit(3, 3)], "is not the golden's call there"),
    "an earlier fill's hit in a replay": ([_hit(1, 1), _hit(2, 9, source="candidate"), _hit(3, 3)], "is not the"),
    "honest: tolerated, then an override": (
        [
            _hit(1, 1),
            {
                **_hit(2, 9, tolerated=[{"path": "args.n", "rule": "tolerance", "text": "within 10"}]),
                "recorded_key": _hit(2, 2)["key"],
                "args": {"n": 9},
            },
            {"event": "hit", "seq": 3, "tool": "fetch", "key": "fetch:000000000000", "override": True},
            _hit(3, 3),
        ],
        None,
    ),
}


@pytest.mark.parametrize("shape", HIT_SHAPES)
def test_a_hit_the_golden_does_not_hold_is_a_finding(tmp_path: Path, shape: str) -> None:
    """A run log copied from another session (the same tools, other arguments), hits of steps and keys on no line
    of the golden, a step served twice, a hit naming no step in a run log that knows its golden, a hit whose mark
    of another source is false or empty: another golden's run, or an edited run log, never a pass, read the fast way
    or as events. A tolerated hit is held to its recorded key, an override to nothing: an honest run passes."""
    import hashlib

    golden = tmp_path / "a.jsonl"
    golden.write_bytes(b"".join([HEADER, *(call_line(seq=n, tool="fetch", args={"n": n}) for n in (1, 2, 3))]))
    sha = hashlib.sha256(golden.read_bytes()).hexdigest()
    hits, expected = HIT_SHAPES[shape]
    events = [{"event": "start", "mode": "replay", "tape": "a.jsonl", "golden_sha256": sha}, *hits]
    events.append({"event": "end", "stats": {}})
    (tmp_path / "a.run.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    cfg = Config.for_dir(tmp_path)
    for slow in (False, True):
        if slow:  # the fast way (a plain run read typed) stepped aside: the events' judgement alone
            findings.read_plain_run = lambda path: None  # type: ignore[assignment]
        try:
            rep = check_session(golden, cfg)
        finally:
            findings.read_plain_run = read_plain_run
        said = [f.text for f in rep.findings if f.kind == "stale_run"]
        assert rep.error is None
        if expected is None:
            assert not said, (slow, said)
        else:
            assert said and all(expected in t for t in said[:1]), (slow, said)


def test_a_file_gone_since_the_listing_is_read_again_without_it(sample_dir: Path) -> None:
    tapes = sample_dir / "sample_tapes"
    cfg = Config.for_dir(tapes)
    listing = Listing()
    golden = next(g for g in iter_goldens(tapes, listing) if g.with_name(g.stem + ".candidate.jsonl").exists())
    files = listing.files(golden)
    assert files is not None and files.candidate
    golden.with_name(golden.stem + ".candidate.jsonl").unlink()  # an accept or a reject, just after the listing
    assert check_session(golden, cfg, files).to_json() == check_session(golden, cfg).to_json()


# ---- the verdict cache (tapetui.review.checkcache) ---------------------------------------------------------
def _aged(folder: Path) -> None:
    """Every file written an hour ago: a file written in the last seconds is never kept (racy clean)."""
    then = time.time() - 3600
    for p in folder.rglob("*"):
        os.utime(p, (then, then), follow_symlinks=False)


@pytest.fixture
def cached(sample_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Config, list[Path]]:
    monkeypatch.setenv("TAPETUI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(checkcache, "RACY_NS", 0)  # a file's ctime cannot be set back: old enough here
    tapes = sample_dir / "sample_tapes"
    _aged(tapes)
    checked: list[Path] = []
    real = findings.check_session

    def counting(golden: Path, *args: object, **kw: object) -> findings.SessionReport:
        checked.append(golden)
        return real(golden, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(findings, "check_session", counting)
    return tapes, Config.for_dir(tapes), checked


def _reports(tapes: Path, cfg: Config) -> list[dict[str, object]]:
    return [r.to_json() for r in check(tapes, cfg, cache=True)]


def test_an_unchanged_session_is_served_from_the_cache_with_the_same_report(
    cached: tuple[Path, Config, list[Path]],
) -> None:
    tapes, cfg, checked = cached
    first = _reports(tapes, cfg)
    assert len(checked) == len(first)
    checked.clear()
    assert _reports(tapes, cfg) == first  # the same reports, findings, verdicts and order
    with_candidate = {g for g in iter_goldens(tapes) if g.with_name(g.stem + ".candidate.jsonl").exists()}
    assert set(checked) == with_candidate and with_candidate  # only the sessions a cache never holds
    assert [r.to_json() for r in check(tapes, cfg)] == first  # and as without the cache


@pytest.mark.parametrize("which", ["golden", "run log"])
def test_a_file_rewritten_at_the_same_size_and_time_is_checked_again(
    cached: tuple[Path, Config, list[Path]], which: str
) -> None:
    tapes, cfg, checked = cached
    _reports(tapes, cfg)
    golden = next(g for g in iter_goldens(tapes) if g.name == "clean.jsonl")
    target = golden if which == "golden" else golden.with_name("clean.run.jsonl")
    st = target.stat()
    data = target.read_bytes()
    changed = data.replace(b'"seq":1', b'"seq":7', 1) if which == "golden" else data.replace(b'_doc"', b'_dox"', 1)
    assert len(changed) == len(data) and changed != data
    target.write_bytes(changed)
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # the stamp a racy rewrite leaves
    checked.clear()
    after = {r["session"]: r for r in _reports(tapes, cfg)}
    assert golden in checked
    assert after == {r.session: r.to_json() for r in check(tapes, cfg)}  # what a check without the cache says


def test_an_edited_tapes_toml_or_a_foreign_cache_file_is_not_trusted(
    cached: tuple[Path, Config, list[Path]], tmp_path: Path
) -> None:
    tapes, cfg, checked = cached
    _reports(tapes, cfg)
    (entry,) = (tmp_path / "cache" / "check").iterdir()
    entry.chmod(0o666)  # anybody could have written it: never read
    checked.clear()
    _reports(tapes, cfg)
    assert len(checked) == len(list(iter_goldens(tapes)))
    entry.write_bytes(b"{not json")
    entry.chmod(0o600)
    checked.clear()
    _reports(tapes, cfg)  # a damaged file: checked as if there were none, and written again
    assert len(checked) == len(list(iter_goldens(tapes)))
    toml = tmp_path / "tapes.toml"
    toml.write_text(f'[tapes]\ndir = "{tapes}"\n\n[compare]\nsequence = "unordered"\n')
    checked.clear()
    check(tapes, load_config(toml), cache=True)
    assert len(checked) == len(list(iter_goldens(tapes)))  # other settings: nothing kept under the old ones


def test_the_cache_switched_off_writes_nothing(
    cached: tuple[Path, Config, list[Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tapes, cfg, checked = cached
    monkeypatch.setenv("TAPETUI_CACHE_DIR", "off")
    _reports(tapes, cfg)
    _reports(tapes, cfg)
    assert len(checked) == 2 * len(list(iter_goldens(tapes))) and not (tmp_path / "cache").exists()


def test_a_golden_rewritten_during_its_check_with_its_mtime_set_back_is_not_kept(
    cached: tuple[Path, Config, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    tapes, cfg, _ = cached
    golden = tapes / "clean.jsonl"
    bad = golden.read_bytes().replace(b'"seq":1', b'"seq":7', 1)
    real = findings.check_session

    def racing(g: Path, *args: object, **kw: object) -> findings.SessionReport:
        if g == golden:  # after the cache hashed it, before the check reads it: other bytes, the same stamp
            st = golden.stat()
            good = golden.read_bytes()
            golden.write_bytes(bad)
            os.utime(golden, ns=(st.st_atime_ns, st.st_mtime_ns))
            rep = real(g, *args, **kw)  # type: ignore[arg-type]
            golden.write_bytes(good)
            os.utime(golden, ns=(st.st_atime_ns, st.st_mtime_ns))
            return rep
        return real(g, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(findings, "check_session", racing)
    check(tapes, cfg, cache=True)
    monkeypatch.setattr(findings, "check_session", real)
    served = {r.session: r.to_json() for r in check(tapes, cfg, cache=True)}
    fresh = {r.session: r.to_json() for r in check(tapes, cfg)}
    assert served["clean"] == fresh["clean"] and served["clean"]["ok"]  # the report of its bytes, not the edit's


def test_two_folders_under_one_config_never_share_entries(
    cached: tuple[Path, Config, list[Path]], tmp_path: Path
) -> None:
    tapes, cfg, _ = cached
    other = tmp_path / "other"
    other.mkdir()
    edited = (tapes / "clean.jsonl").read_bytes().replace(b'"key":"fetch_doc:', b'"key":"fetch_doc:0', 1)
    for d in (tapes, other):
        (d / "edited.jsonl").write_bytes(edited)
    _aged(tapes)
    _aged(other)
    check(tapes, cfg, cache=True)
    (rep,) = [r for r in check(other, cfg, [other / "edited.jsonl"], cache=True)]
    assert str(other / "edited.jsonl") in rep.findings[0].text and str(tapes) not in rep.findings[0].text


def test_what_no_json_can_hold_is_checked_and_never_breaks_the_cache(
    cached: tuple[Path, Config, list[Path]], tmp_path: Path
) -> None:
    tapes, cfg, checked = cached
    name = os.fsencode(tapes) + b"/bad\xff"
    for suffix in (b".jsonl", b".run.jsonl"):
        Path(os.fsdecode(name + suffix)).write_bytes((tapes / ("clean" + suffix.decode())).read_bytes())
    _aged(tapes)
    first = _reports(tapes, cfg)  # a name that is not UTF-8: checked, not kept, and the rest still kept
    checked.clear()
    assert _reports(tapes, cfg) == first
    assert [g.name for g in checked if "bad" in g.name] == [os.fsdecode(b"bad\xff.jsonl")]
    (entry,) = (tmp_path / "cache" / "check").iterdir()
    doc = orjson.loads(entry.read_bytes())
    for e in doc["sessions"].values():
        e["v"] = [["tools", "x", 0, 0, 0, None, True]]  # an entry of the wrong shape: distrusted, not a crash
    entry.write_bytes(orjson.dumps(doc))
    checked.clear()
    assert _reports(tapes, cfg) == first and len(checked) == len(list(iter_goldens(tapes)))
