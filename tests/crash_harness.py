"""Crash harness: SIGKILL a child at a random moment of record, fill, accept, reject, expire,
re-record or ``check --samples`` (its pending candidate parked), then check that nothing is broken or lost.

A child runs one operation in a loop and prints ``ack N`` after each one returns. The parent
kills it after a random delay, runs recovery (what every command and the app do first) and
checks the invariants of that operation:

- every tape is valid JSONL, or has only a torn tail which the next append sets aside;
- no golden is half-written (goldens are only ever replaced whole);
- no golden changed without its changelog entry, and no entry exists for a change that did
  not happen;
- nothing acknowledged is lost (an acked record or fill is on the tape, an acked accept or
  expire is in the golden);
- a pending candidate parked while samples record is back in place, byte for byte.

Used by tests/test_crash.py (a CI-sized subset) and benchmarks/crash_harness.py (the full run).
"""

from __future__ import annotations

import itertools
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OPS = ("record", "fill", "accept", "reject", "expire", "rerecord", "samples")
PENDING_OP = 999  # the op of the pending candidate the samples trials start with
STEPS = 6  # steps of the golden the review operations start from
BASE_TIME = datetime(2030, 1, 1, tzinfo=UTC)
# Expire N sets step 3's expiry to BASE_TIME - N seconds: each strictly earlier than the one before (expiring
# an entry that has expired already is refused), all of them before the recorded one (TICK_TTL from now).
TICK_TTL = 10 * 365 * 86400


# ---- shared by parent and child ---------------------------------------------------------
def registry(counter: Path | None = None) -> Any:
    from tapetui import ToolRegistry

    reg = ToolRegistry()

    @reg.tool(schema={"type": "object"}, version="1")
    def echo(n: int, pad: str = "", op: int = 0) -> dict[str, Any]:
        return {"n": n, "pad": pad, "op": op}

    @reg.tool(schema={"type": "object"}, version="1")
    def echo2(n: int, pad: str = "") -> dict[str, Any]:
        return {"n2": n, "pad": pad}

    @reg.tool(schema={"type": "object"}, version="1", side_effect=True, ttl=TICK_TTL)
    def tick(n: int) -> dict[str, Any]:
        count = 0
        if counter is not None:
            count = int(counter.read_text() or 0) + 1 if counter.exists() else 1
            counter.write_text(str(count))
        return {"tick": count}

    return reg


# what the samples trials' record_command runs: one new candidate, at once (a copy of the golden)
RECORD_ONE = (
    "import shutil, sys, pathlib; g = pathlib.Path(sys.argv[1]); shutil.copy(g, g.with_suffix('.candidate.jsonl'))"
)


def config(tapes: Path) -> Any:
    from dataclasses import replace

    from tapetui import Config

    # ``python -c CODE {tape}``: the tape is an argument after the code, never inside it
    return replace(Config.for_dir(tapes), record_command=f'{sys.executable} -c "{RECORD_ONE}" {{tape}}')


def make_golden(tapes: Path) -> Path:
    """A golden of STEPS steps: echo, echo, tick, echo, ... (made in the parent, not killed)."""
    from tapetui import Tape

    golden = tapes / "s.jsonl"
    with Tape(golden, "record", registry(), config=config(tapes), run_log=False) as t:
        for i in range(1, STEPS + 1):
            t.call("tick" if i == 3 else "echo", {"n": i} if i == 3 else {"n": i, "pad": "p" * 50})
    return golden


def candidate_with_op(golden: Path, op: int) -> bytes:
    """The golden's bytes with step 1's args carrying ``op`` (a distinct candidate per op)."""
    import orjson

    from tapetui.core.keys import key_of
    from tapetui.core.tapefile import call_line

    lines = golden.read_bytes().splitlines(keepends=True)
    out = []
    for raw in lines:
        obj = orjson.loads(raw)
        if obj.get("type") == "call" and obj["seq"] == 1:
            args = {**obj["args"], "op": op}
            raw = call_line(
                seq=1,
                tool="echo",
                key=key_of("echo", args),
                fingerprint=obj["fingerprint"],
                side_effect=False,
                ms=1.0,
                expires_at=None,
                recorded_at=obj["recorded_at"],
                args=args,
                result={"n": 1, "op": op},
            )
        out.append(raw)
    return b"".join(out)


def golden_op(golden: Path) -> int:
    from tapetui.core.tapefile import read_index

    idx = read_index(golden, validate=True)
    return int((idx.record(idx.at_seq(1)).args or {}).get("op", 0))


# ---- the child --------------------------------------------------------------------------
def child(op: str, tapes: Path) -> None:
    from tapetui import Tape, TapeError, review
    from tapetui.core.files import atomic_write
    from tapetui.core.store import candidate_path

    cfg = config(tapes)
    reg = registry(tapes.parent / "counter")
    golden = tapes / "s.jsonl"
    print("ready", flush=True)
    n = 0
    if op == "record":
        with Tape(tapes / "new.jsonl", "record", reg, config=cfg) as t:
            while True:
                n += 1
                t.call("echo", {"n": n, "pad": "x" * (n * 997 % 9000)})
                print(f"ack {n}", flush=True)
    if op == "fill":
        with Tape(golden, "fill", reg, config=cfg) as t:
            for n in itertools.count(1):
                tool = "echo2" if n % 2 == 0 or n > STEPS else ("tick" if n == 3 else "echo")
                args = {"n": n} if tool == "tick" else {"n": n, "pad": "p" * 50}
                t.call(tool, args)
                print(f"ack {n} {tool}", flush=True)
    while True:
        n += 1
        if op == "accept":
            atomic_write(candidate_path(golden), candidate_with_op(golden, n))
            review.accept(cfg, golden, f"op-{n}")
        elif op == "reject":
            atomic_write(candidate_path(golden), candidate_with_op(golden, n))
            review.reject(cfg, golden, f"op-{n}")
        elif op == "expire":
            review.expire(cfg, golden, [3], why=f"op-{n}", now=BASE_TIME - timedelta(seconds=n))
        elif op == "samples":
            review.record_samples(cfg, golden, 1)
        elif op == "rerecord":
            try:
                review.rerecord(cfg, golden, 3, yes=True, registry=reg)
            except TapeError as e:
                print(f"error {e}", flush=True)
                raise
        print(f"ack {n}", flush=True)


# ---- the parent -------------------------------------------------------------------------
@dataclass
class Trial:
    op: str
    delay_ms: float
    acked: int
    problems: list[str]


def _rationales(changelog: Path) -> list[int]:
    if not changelog.exists():
        return []
    return [int(m) for m in re.findall(r"^> op-(\d+)$", changelog.read_text(), flags=re.M)]


def _check_tape(path: Path, problems: list[str], *, may_tear: bool) -> Any:
    from tapetui import TapeError
    from tapetui.core.tapefile import read_index

    try:
        idx = read_index(path, validate=True)
    except TapeError as e:
        problems.append(f"{path.name} is not valid JSONL: {e}")
        return None
    if idx.torn is not None and not may_tear:
        problems.append(f"{path.name} has a torn tail but is only ever replaced whole")
    return idx


def run_trial(op: str, work: Path, rng: random.Random, max_delay_ms: float = 250) -> Trial:
    from tapetui import review
    from tapetui.core.runlog import read_run_log
    from tapetui.core.store import candidate_path, runlog_path
    from tapetui.core.tapefile import Appender, dump_line

    if work.exists():
        shutil.rmtree(work)
    tapes = work / "tapes"
    tapes.mkdir(parents=True)
    golden = make_golden(tapes) if op != "record" else tapes / "s.jsonl"
    cfg = config(tapes)
    before = golden.read_bytes() if golden.exists() else b""
    if op == "samples":
        from tapetui.core.files import atomic_write

        atomic_write(candidate_path(golden), candidate_with_op(golden, PENDING_OP))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from tests.crash_harness import child; "
            "child(sys.argv[1], __import__('pathlib').Path(sys.argv[2]))",
            op,
            str(tapes),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if first.strip() != b"ready":
        raise RuntimeError(f"child did not start: {first!r} {proc.stderr.read() if proc.stderr else b''!r}")
    delay = rng.uniform(0, max_delay_ms)
    time.sleep(delay / 1000)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=30)
    problems: list[str] = []
    if proc.returncode != -signal.SIGKILL:
        problems.append(f"child ended by itself ({proc.returncode}): {err.decode()[-300:]}")
    acks = [line.split() for line in out.decode().splitlines() if line.startswith("ack ")]
    acked = int(acks[-1][1]) if acks else 0

    _wait_for_commands(tapes)  # a record_command the child started is not killed with it: let it finish
    _wait_for_park_lock(tapes / "s.jsonl")  # one that was still starting holds the park lock it inherited
    review.recover(cfg)  # what every command and the app do first
    leftovers = [p.name for p in tapes.iterdir() if p.name.endswith((".next", ".journal"))]
    if leftovers:
        problems.append(f"left behind after recovery: {leftovers}")
    log = runlog_path(golden if op != "record" else tapes / "new.jsonl")
    if log.exists():
        try:
            read_run_log(log)
        except Exception as e:  # the reader must never fail on a killed writer's log
            problems.append(f"run log unreadable: {type(e).__name__}: {e}")

    if op == "record":
        tape = tapes / "new.jsonl"
        if tape.exists():
            idx = _check_tape(tape, problems, may_tear=True)
            if idx is not None:
                if list(idx.seqs) != list(range(1, len(idx) + 1)):
                    problems.append("recorded steps are not 1..n")
                if len(idx) < acked:
                    problems.append(f"acked {acked} calls but the tape holds {len(idx)}")
                with Appender(tape) as a:  # the next append sets a torn tail aside
                    a.append(
                        dump_line(
                            {
                                "type": "call",
                                "seq": len(idx) + 1,
                                "tool": "echo",
                                "key": "echo:x",
                                "args": {},
                                "result": None,
                            }
                        )
                    )
                after = _check_tape(tape, problems, may_tear=False)
                if after is not None and len(after) != len(idx) + 1:
                    problems.append("appending after the crash lost a line")
        elif acked:
            problems.append("acked calls but no tape")
    elif op == "fill":
        if golden.read_bytes() != before:
            problems.append("fill changed the golden")
        cand = candidate_path(golden)
        filled = {int(a[1]) for a in acks if a[2] == "echo2"}
        if cand.exists():
            idx = _check_tape(cand, problems, may_tear=True)
            if idx is not None:
                missing = filled - set(idx.seqs)
                if missing:
                    problems.append(f"acked filled steps {sorted(missing)} are not in the candidate")
        elif filled:
            problems.append(f"filled steps {sorted(filled)} acked but no candidate")
    elif op in ("accept", "expire"):
        _check_tape(golden, problems, may_tear=False)
        now_op = golden_op(golden) if op == "accept" else _expire_op(golden)
        entries = _rationales(cfg.changelog)
        if entries != list(range(1, now_op + 1)):
            problems.append(f"golden is at op {now_op} but the changelog holds entries {entries[-5:]}")
        if now_op < acked:
            problems.append(f"op {acked} was acknowledged but the golden is at op {now_op}")
    elif op == "reject":
        if golden.read_bytes() != before:
            problems.append("reject changed the golden")
        entries = _rationales(cfg.changelog)
        if entries != list(range(1, len(entries) + 1)) or len(entries) < acked:
            problems.append(f"reject entries {entries[-5:]} after {acked} acks")
        cand = candidate_path(golden)
        if cand.exists():
            _check_tape(cand, problems, may_tear=False)
    elif op == "samples":
        if golden.read_bytes() != before:
            problems.append("check --samples changed the golden")
        cand = candidate_path(golden)
        if not cand.exists() or cand.read_bytes() != candidate_with_op(golden, PENDING_OP):
            problems.append("the pending candidate is not back byte for byte after recover")
        left = [str(p.relative_to(tapes)) for p in (tapes / ".tapetui" / "parked").rglob("*")]
        if (tapes / ".tapetui" / "parked").exists():
            problems.append(f"a parked folder is left after recover: {left} {review.recover(cfg)}")
        if runlog_path(golden).exists():
            problems.append("the session had no run log, and has one after recover")
    elif op == "rerecord":
        if golden.read_bytes() != before:
            problems.append("re-record changed the golden")
        cand = candidate_path(golden)
        if cand.exists():
            idx = _check_tape(cand, problems, may_tear=False)
            if idx is not None and acked and idx.record(2).result["tick"] < acked:
                problems.append("an acknowledged re-record is not in the candidate")
        elif acked:
            problems.append("re-record acked but no candidate")
    return Trial(op, delay, acked, problems)


def _wait_for_commands(tapes: Path) -> None:
    """Wait (up to 60 s) for the record_commands a killed child started: they run in their own session."""
    import psutil

    mine = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if any(str(tapes) in arg for arg in p.info["cmdline"] or ()) and RECORD_ONE in (p.info["cmdline"] or ()):
                mine.append(p)
        except (psutil.Error, TypeError):
            continue
    psutil.wait_procs(mine, timeout=60)


def _wait_for_park_lock(golden: Path) -> None:
    """Wait (up to 60 s) until no process holds the session's park lock: a record_command a killed child
    started keeps it (it inherits it, so that recover never puts the candidate back under it)."""
    from tapetui.core.locks import try_park_lock

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with try_park_lock(golden) as free:
            if free:
                return
        time.sleep(0.05)


def run(
    trials_per_op: int,
    work: Path,
    seed: int = 0,
    ops: tuple[str, ...] = OPS,
    progress: Callable[[Trial], None] | None = None,
) -> list[Trial]:
    rng = random.Random(seed)
    return _trials(
        [
            (f"{op}-{i}", lambda w, op=op: run_trial(op, w, rng))  # type: ignore[misc]
            for i in range(trials_per_op)
            for op in ops
        ],
        work,
        progress,
    )


def _trials(
    plan: list[tuple[str, Callable[[Path], Any]]], work: Path, progress: Callable[[Any], None] | None
) -> list[Any]:
    """Run each trial in its own folder; a folder is kept only when its trial found a problem."""
    out = []
    for name, trial in plan:
        t = trial(work / name)
        if not t.problems:
            shutil.rmtree(work / name, ignore_errors=True)
        out.append(t)
        if progress is not None:
            progress(t)
    return out


# ---- concurrent commands ----------------------------------------------------------------
# Several children work on ONE session at once, each looping over one kind of command, and
# all are SIGKILLed at independent random moments. The commands follow the session lock
# protocol (tapetui/locks.py); the invariants after recovery:
#
# - the golden is valid and whole, no journal or temp file is left;
# - the changelog, read in order, is exactly the golden's history: every accept and expire
#   entry names the state it started from ("prev-N"), which must be the state the entry
#   before it left, and the last entry's state is the golden's now (no golden change
#   without its entry, no entry without its golden change);
# - every filled call a child acknowledged is in the pending candidate or in NAME.samples/;
# - no child printed a traceback.
MIXED = ("accept", "expire", "reject", "fill", "check", "recover", "app")


def _expire_op(golden: Path) -> int:
    from tapetui.core.tapefile import read_index

    exp = read_index(golden, validate=True).expires.get(2)  # call index 2 is step 3
    when = None if exp is None else datetime.fromisoformat(exp)
    return 0 if when is None or when > BASE_TIME else int((BASE_TIME - when).total_seconds())


def mixed_child(op: str, tapes: Path, me: int) -> None:
    import traceback

    import tapetui.review.journal as journal
    from tapetui import Tape, review
    from tapetui.core.errors import TapeError
    from tapetui.core.files import atomic_write
    from tapetui.core.store import candidate_path, rotate_candidate

    cfg = config(tapes)
    reg = registry(tapes.parent / f"counter-{me}")
    golden = tapes / "s.jsonl"
    print("ready", flush=True)
    try:
        if op == "app":
            import asyncio

            from tapetui.tui.app import TapeApp

            async def start() -> None:
                app = TapeApp(cfg, watch=False)
                async with app.run_test(size=(100, 30)) as pilot:
                    await pilot.pause()

            for n in itertools.count(1):
                asyncio.run(start())
                print(f"ack {n}", flush=True)
        for n in itertools.count(1):
            op_id = me * 100_000 + n
            if op == "accept":
                with journal.session(cfg, golden):  # the candidate is made from the golden as it is now
                    prev = golden_op(golden)
                    rotate_candidate(golden)
                    atomic_write(candidate_path(golden), candidate_with_op(golden, op_id))
                    review.accept(cfg, golden, f"op-{op_id} accept prev-{prev}")
            elif op == "expire":
                with journal.session(cfg, golden):
                    prev = _expire_op(golden)
                    try:
                        review.expire(
                            cfg,
                            golden,
                            [3],
                            why=f"op-{op_id} expire prev-{prev}",
                            now=BASE_TIME - timedelta(seconds=op_id),
                        )
                    except review.AlreadyExpired:  # another child expired it to an earlier time: a no-op
                        print("already", flush=True)
            elif op == "reject":
                with journal.session(cfg, golden):
                    rotate_candidate(golden)
                    atomic_write(candidate_path(golden), candidate_with_op(golden, op_id))
                    review.reject(cfg, golden, f"rej-{op_id}")
            elif op == "fill":
                from tapetui.core.errors import TapeDrift

                try:
                    with Tape(golden, "fill", reg, config=cfg) as t:
                        for k in range(1, STEPS + 3):
                            tool = "echo2" if k > STEPS else ("tick" if k == 3 else "echo")
                            if tool == "echo2":
                                t.call(tool, {"n": op_id * 10 + k, "pad": "f"})
                                print(f"filled {op_id * 10 + k}", flush=True)
                            else:
                                t.call(tool, {"n": k} if tool == "tick" else {"n": k, "pad": "p" * 50})
                except TapeDrift:  # an accept changed step 1 of the golden: the right answer, not a crash
                    print("drift", flush=True)
            elif op == "check":
                import contextlib
                import io

                from tapetui.cli import main as cli

                err = io.StringIO()
                with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                    rc = cli(["check", str(tapes)])
                if rc not in (0, 1):
                    print(f"check exited {rc}: {err.getvalue()[-300:]!r}", flush=True)
            elif op == "recover":
                review.recover(cfg)
            print(f"ack {n}", flush=True)
    except TapeError as e:  # e.g. a drift the other children caused: a clean answer, not a crash
        print(f"tapeerror {e}", flush=True)
    except BaseException:
        traceback.print_exc()
        raise


@dataclass
class MixedTrial:
    ops: tuple[str, ...]
    delays_ms: tuple[float, ...]
    acked: int
    problems: list[str]


def run_mixed_trial(work: Path, rng: random.Random, children: int = 3, max_delay_ms: float = 1500) -> MixedTrial:
    from tapetui import review
    from tapetui.core.store import candidate_path, samples_of

    if work.exists():
        shutil.rmtree(work)
    tapes = work / "tapes"
    tapes.mkdir(parents=True)
    golden = make_golden(tapes)
    cfg = config(tapes)
    ops = tuple(rng.choice(MIXED) for _ in range(children))
    procs = []
    for me, op in enumerate(ops, start=1):
        procs.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-c",
                    "import sys, pathlib; from tests.crash_harness import mixed_child; "
                    "mixed_child(sys.argv[1], pathlib.Path(sys.argv[2]), int(sys.argv[3]))",
                    op,
                    str(tapes),
                    str(me),
                ],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
        )
    for p in procs:
        assert p.stdout is not None
        first = p.stdout.readline()
        if first.strip() != b"ready":
            raise RuntimeError(f"child did not start: {first!r}")
    start = time.monotonic()
    delays = sorted((rng.uniform(0, max_delay_ms), i) for i in range(len(procs)))
    for delay, i in delays:
        time.sleep(max(0.0, start + delay / 1000 - time.monotonic()))
        procs[i].send_signal(signal.SIGKILL)
    problems: list[str] = []
    acked = 0
    filled: set[int] = set()
    for op, p in zip(ops, procs, strict=True):
        out, err = p.communicate(timeout=60)
        text = out.decode()
        acked += sum(1 for line in text.splitlines() if line.startswith("ack "))
        filled |= {int(line.split()[1]) for line in text.splitlines() if line.startswith("filled ")}
        if "Traceback" in err.decode():
            problems.append(f"{op} child printed a traceback: {err.decode()[-400:]}")
        if p.returncode != -signal.SIGKILL:
            problems.append(f"{op} child ended by itself ({p.returncode}): {err.decode()[-300:]} {text[-300:]}")
        for line in text.splitlines():
            if line.startswith(("tapeerror", "check exited")):
                problems.append(f"{op} child: {line[:300]}")

    review.recover(cfg)
    leftovers = [p.name for p in tapes.iterdir() if p.name.endswith((".next", ".journal", ".tmp"))]
    if leftovers:
        problems.append(f"left behind after recovery: {leftovers}")
    idx = _check_tape(golden, problems, may_tear=False)
    if idx is not None:
        state = {"accept": 0, "expire": 0}
        text = cfg.changelog.read_text() if cfg.changelog.exists() else ""
        for m in re.finditer(r"^> op-(\d+) (accept|expire) prev-(\d+)$", text, flags=re.M):
            new, kind, prev = int(m[1]), m[2], int(m[3])
            if state[kind] != prev:
                problems.append(
                    f"changelog: {kind} op-{new} starts from {prev}, but the entry before left {state[kind]}"
                )
            state[kind] = new
        now = {"accept": golden_op(golden), "expire": _expire_op(golden)}
        if now != state:
            problems.append(f"the golden is at {now} but the changelog's last entries say {state}")
    found: set[int] = set()
    for tape in [candidate_path(golden), *samples_of(golden)]:
        if tape.exists():
            t = _check_tape(tape, problems, may_tear=True)
            if t is not None:
                found |= {int(r.args["n"]) for r in t.records() if r.tool == "echo2"}
    lost = filled - found
    if lost:
        problems.append(f"acknowledged filled calls lost: {sorted(lost)[:10]}")
    return MixedTrial(ops, tuple(d for d, _ in delays), acked, problems)


def run_mixed(
    trials: int, work: Path, seed: int = 0, progress: Callable[[MixedTrial], None] | None = None
) -> list[MixedTrial]:
    rng = random.Random(seed)
    return _trials([(f"mixed-{i}", lambda w: run_mixed_trial(w, rng)) for i in range(trials)], work, progress)
