"""Property-based fuzzing of everything that reads input: tapes, run logs, tapes.toml and `check`.

Every outcome must be a success or a TapeError (a clean one-line message and exit 2 on the
command line) — never another exception, never a hang, never a changed input file.

CI runs a fixed, derandomised budget (the ``ci`` profile in conftest). For a longer hunt:
``HYPOTHESIS_PROFILE=fuzz python -m pytest tests/test_fuzz.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tapetui import TapeError
from tapetui.cli import main as cli_main
from tapetui.core.config import load_config
from tapetui.core.runlog import RunLogReader, read_run_log
from tapetui.core.tapefile import dump_line, read_index
from tapetui.review import check_session, load
from tests.builders import HEADER, call_line

# A bound per case, far above what any case needs: a hang fails instead of stalling CI. Generous, because
# hypothesis traces the first run of an explicit example, and a diff of a 1,000-deep value under that
# tracer takes seconds (tens on a busy machine) where it takes milliseconds untraced.
CASE_SECONDS = 120

pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.NonInteractiveExampleWarning")


@contextlib.contextmanager
def bounded(seconds: float = CASE_SECONDS) -> Iterator[None]:
    def fire(signum: int, frame: Any) -> None:
        raise AssertionError(f"a fuzz case ran longer than {seconds} s")

    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def digest(*paths: Path) -> list[str | None]:
    return [hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else None for p in paths]


# ---- what goes into a line ------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)


def _call(seq: Any, tool: str, args: Any, result: Any) -> bytes:
    return (
        orjson.dumps(
            {
                "type": "call",
                "seq": seq,
                "tool": tool,
                "key": f"{tool}:000000000000",
                "fingerprint": "0123456789abcdef",
                "side_effect": False,
                "ms": 1.0,
                "recorded_at": "2026-01-01T00:00:00Z",
                "args": args,
                "result": result,
            },
            option=orjson.OPT_NON_STR_KEYS,
        )
        + b"\n"
    )


good_call = st.builds(
    lambda seq, tool, args, result: call_line(seq=seq, tool=tool, key=f"{tool}:abcdef012345", args=args, result=result),
    st.integers(1, 50),
    st.sampled_from(["fetch", "search", "t"]),
    st.dictionaries(st.text(max_size=5), json_values, max_size=3),
    json_values,
)
odd_call = st.builds(_call, json_values, st.text(max_size=6), json_values, json_values)
line = st.one_of(
    good_call,
    odd_call,
    st.just(HEADER),
    st.builds(lambda v: orjson.dumps(v) + b"\n", json_values),  # any JSON value as a line
    st.builds(lambda t: orjson.dumps({"type": t, "v": 99, "x": 1}) + b"\n", st.text(max_size=10)),  # future types
    st.builds(lambda b: b + b"\n", st.binary(max_size=60)),  # random bytes, NUL and invalid UTF-8 among them
    good_call.flatmap(lambda c: st.integers(0, len(c)).map(lambda n: c[:n])),  # truncated lines
)
tape_bytes = st.lists(line, max_size=12).map(b"".join)

SPECIAL: dict[str, bytes] = {
    "ten_mb_line": HEADER + _call(1, "t", {"blob": "x" * 10_000_000}, 1),
    "deep_nesting": HEADER + b'{"type":"call","seq":1,"tool":"t","key":"t:0",'
    b'"args":' + b"[" * 10_000 + b"]" * 10_000 + b',"result":1}\n',
    "nesting_900": HEADER + b'{"type":"call","seq":1,"tool":"t","key":"t:0",'
    b'"args":{"a":' + b"[" * 900 + b"]" * 900 + b'},"result":' + b"[" * 900 + b"]" * 900 + b"}\n",
    "invalid_utf8": HEADER + b'{"type":"call","seq":1,"tool":"t\xff\xfe","key":"x"}\n',
    "nul_bytes": HEADER + b'{"type":"call","seq":1,"tool":"t\x00","key":"t:0"}\n\x00\n',
    "future_type": dump_line({"type": "session", "v": 7}) + b'{"type":"hologram","seq":1}\n' + _call(1, "t", {}, 1),
    "missing_seq": HEADER + b'{"type":"call","tool":"t","key":"t:0","args":{}}\n',
    "seq_not_int": HEADER + _call("1", "t", {}, 1) + _call(True, "t", {}, 1),
    "deep_args_no_key": HEADER
    + b'{"type":"call","seq":1,"tool":"t","args":'
    + b"[" * 1000
    + b"]" * 1000
    + b',"result":1}\n',
    "deep_result": HEADER + b'{"type":"call","seq":1,"tool":"t","key":"t:0",'
    b'"args":{},"result":' + b"[" * 1000 + b"1" + b"]" * 1000 + b"}\n",
    "torn_tail": HEADER + _call(1, "t", {}, 1)[:30],
    "empty": b"",
    "only_newlines": b"\n\n\n",
    "brace_before_call": _call(1, "t", {}, 1).replace(b"{", b"{{", 1) + _call(2, "t", {}, 1),
    "huge_integer": HEADER + b'{"type":"call","seq":99999999999999999999999,'
    b'"tool":"t","key":"t:0","args":{"n":1e999},"result":-99999999999999999999999}\n',
}


def special_examples(exclude: set[str]) -> Any:
    """Every hand-made input of SPECIAL (but ``exclude``) as a hypothesis example for ``data``."""

    def apply(test: Any) -> Any:
        for name, data in SPECIAL.items():
            if name not in exclude:
                test = example(data=data)(test)
        return test

    return apply


def _tape_outcome(path: Path) -> None:
    """Index (fast and validated), decode every record, and load for review."""
    for validate in (False, True):
        try:
            idx = read_index(path, validate=validate)
        except TapeError:
            continue
        for i in range(len(idx)):
            with contextlib.suppress(TapeError):
                idx.record(i)
    with contextlib.suppress(TapeError):
        load(path)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow], deadline=None)
@given(data=tape_bytes)
@special_examples(exclude={"ten_mb_line", "empty"})  # the 10 MB line has its own test; hypothesis tries b""
def test_tape_reader_only_ever_succeeds_or_raises_tape_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_bytes(data)
    with bounded():
        _tape_outcome(path)
    assert path.read_bytes() == data


def test_tape_reader_ten_megabyte_line(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_bytes(SPECIAL["ten_mb_line"])
    before = digest(path)
    with bounded():
        _tape_outcome(path)
        assert read_index(path, validate=True).record(0).args["blob"] == "x" * 10_000_000
    assert digest(path) == before


runlog_bytes = st.lists(
    st.one_of(
        st.builds(lambda v: orjson.dumps(v) + b"\n", json_values),
        st.builds(
            lambda e, s: orjson.dumps({"event": e, "seq": s, "step": s, "nearest": s}) + b"\n",
            st.sampled_from(
                ["start", "hit", "miss", "drift", "fingerprint", "stale", "unused", "live", "end", "from-the-future"]
            ),
            json_values,
        ),
        st.binary(max_size=40),
    ),
    max_size=15,
).map(b"".join)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(data=runlog_bytes, cuts=st.lists(st.integers(0, 400), max_size=4))
@example(data=b'{"event":"hit","seq":1}\n' + b"[" * 10_000 + b"\n\x00\xff\n", cuts=[5, 30])
@example(data=b'{"event":"hit","seq":1,"pad":"' + b"x" * 10_000_000 + b'"}\n{"event":"end"}\n', cuts=[4_000_000])
def test_run_log_reader_never_raises_even_on_partial_lines(tmp_path: Path, data: bytes, cuts: list[int]) -> None:
    """The file grows in arbitrary pieces (a writer mid-line); the reader sees every complete line once."""
    from tapetui.core.runlog import RunSummary

    path = tmp_path / "s.run.jsonl"
    reader = RunLogReader(path)
    seen: list[dict[str, Any]] = []
    with bounded():
        for cut in [*sorted(cuts), len(data)]:
            path.write_bytes(data[:cut])
            seen += reader.poll()[1]
        assert all(isinstance(ev, dict) and isinstance(ev.get("event"), str) for ev in seen)
        assert len(seen) == len([x for x in data.split(b"\n")[:-1] if x.strip()])
        assert len(read_run_log(path)) == len(seen)
        RunSummary.of(seen)  # the app's summary accepts whatever the reader returns
    assert path.read_bytes() == data


VALID_TOML = (Path(__file__).resolve().parent.parent / "tapes.toml").read_text()
toml_text = st.one_of(
    st.text(max_size=200),
    st.builds(lambda cut, extra: VALID_TOML[:cut] + extra, st.integers(0, len(VALID_TOML)), st.text(max_size=40)),
    st.builds(
        lambda table, key, value: f"[{table}]\n{key} = {value}\n",
        st.sampled_from(["tapes", "diff", "redact", "tools.x", "tools", "nope", "tapes.dir"]),
        st.sampled_from(
            [
                "dir",
                "changelog",
                "registry",
                "stale_policy",
                "ignore",
                "keys",
                "patterns",
                "ttl",
                "live",
                "volatile_defaults",
                "replay_command",
                "unknown",
            ]
        ),
        st.sampled_from(
            [
                '"../../etc"',
                '"/etc"',
                "3",
                "true",
                "[1, 2]",
                '"("',
                '"1h"',
                '"-5"',
                "{a = 1}",
                '"x:y"',
                '"warn"',
                "1e400",
                '"\\u0000"',
                "[]",
            ]
        ),
    ),
)


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(text=toml_text)
@example(text='[tapes]\ndir = "' + "a/" * 5000 + '"\n')
@example(text="a = " + "[" * 10_000 + "]" * 10_000)
@example(text='[tapes]\ndir="\\u0000"')  # found by the long fuzz run: a NUL in a path
@example(text='[tapes]\nreplay_command = "' + "x" * 10_000_000 + '"\n')  # a 10 MB line
def test_tapes_toml_loader_only_succeeds_or_raises_config_error(tmp_path: Path, text: str) -> None:
    from tapetui.core.errors import ConfigError

    path = tmp_path / "tapes.toml"
    path.write_text(text, encoding="utf-8")
    before = path.read_bytes()
    with bounded():
        try:
            load_config(path)
        except ConfigError as e:
            assert str(path) in str(e) and "\n" not in str(e).strip()
    assert path.read_bytes() == before


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(golden=tape_bytes, candidate=st.none() | tape_bytes, run=st.none() | runlog_bytes)
@example(golden=SPECIAL["nesting_900"], candidate=SPECIAL["nesting_900"].replace(b"[]", b"[1]", 1), run=None)
@example(golden=SPECIAL["deep_nesting"], candidate=SPECIAL["future_type"], run=b"\x00\xff\n")
@example(golden=SPECIAL["deep_result"], candidate=SPECIAL["deep_result"].replace(b"[1]", b"[2]"), run=None)
@example(golden=SPECIAL["deep_args_no_key"], candidate=SPECIAL["deep_result"], run=None)
@example(
    golden=SPECIAL["deep_result"],
    candidate=None,
    run=b'{"event":"drift","seq":1,"tool":"t","args":' + b"[" * 1000 + b"]" * 1000 + b"}\n",
)
@example(golden=SPECIAL["missing_seq"], candidate=SPECIAL["seq_not_int"], run=b'{"event":"drift","seq":[]}\n')
@example(
    golden=SPECIAL["ten_mb_line"], candidate=SPECIAL["ten_mb_line"].replace(b'"result":1', b'"result":2'), run=None
)
def test_check_exits_0_1_or_2_with_clean_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], golden: bytes, candidate: bytes | None, run: bytes | None
) -> None:
    d = tmp_path / "tapes"
    d.mkdir(exist_ok=True)
    files = {d / "s.jsonl": golden, d / "s.candidate.jsonl": candidate, d / "s.run.jsonl": run}
    for p, data in files.items():
        p.unlink(missing_ok=True)
        if data is not None:
            p.write_bytes(data)
    before = digest(*files)
    with bounded():
        code = cli_main(["check", str(d)])
        check_session(d / "s.jsonl", load_config_for(d))
    out, err = capsys.readouterr()
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in out + err
    if code == 2:
        assert err.startswith("tapetui: ") and str(d) in err
    assert digest(*files) == before


def load_config_for(d: Path) -> Any:
    from tapetui.core.config import Config

    return Config.for_dir(d)
