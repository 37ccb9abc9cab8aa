"""Model turns: the cost of normalising and keying a request, and replaying a long session of turns.

Run: python benchmarks/bench_turns.py [--turns 1000] [--messages 50]
Targets (issue "Model turns on tape"): normalising and keying a request of 100 messages of 1 KB each
≤ 2 ms when 99 of them were seen in an earlier turn of the session (the cold figure is printed beside it);
a session of 1,000 turns × 50 messages replays in time linear in its size (the per-turn time at 250, 500 and
1,000 turns is printed: flat is linear) and its tape opens (the index the app reads) in ≤ 1 s.
Medians of interleaved rounds; these machines are noisy.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tapetui import Tape  # noqa: E402
from tapetui.core.redact import Redactor  # noqa: E402
from tapetui.core.tapefile import read_index  # noqa: E402
from tapetui.core.turns import RequestForm, split_request, turn_key_of  # noqa: E402

ROUNDS = 9
SEARCH = {"name": "search", "description": "search the docs", "parameters": {"type": "object"}}


def message(i: int, size: int = 1024) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    text = (f"message {i}: " + "lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def request(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"instructions": "Be brief.", "messages": messages, "tools": [SEARCH], "settings": {"temperature": 0}}


def keying(n_messages: int = 100) -> tuple[float, float]:
    """(warm ms, cold ms): one request of ``n_messages`` × 1 KB, 99 seen before (warm) or none (cold)."""
    warm: list[float] = []
    cold: list[float] = []
    msgs = [message(i) for i in range(n_messages)]
    for r in range(ROUNDS):
        form = RequestForm(Redactor())
        stored, _ = split_request(request(msgs[:-1]), "bench")
        form.redacted(stored)  # the earlier turn: its 99 messages seen
        t0 = time.perf_counter()
        stored, _ = split_request(request(msgs), "bench")
        turn_key_of("m:1", form.redacted(stored))
        warm.append((time.perf_counter() - t0) * 1000)
        fresh = [message(i + 1000 * (r + 1)) for i in range(n_messages)]
        form = RequestForm(Redactor())
        t0 = time.perf_counter()
        stored, _ = split_request(request(fresh), "bench")
        turn_key_of("m:1", form.redacted(stored))
        cold.append((time.perf_counter() - t0) * 1000)
    return statistics.median(warm), statistics.median(cold)


def session(path: Path, turns: int, window: int) -> list[list[dict[str, Any]]]:
    """Record a session of ``turns`` turns, each sending the last ``window`` messages; returns the requests."""
    history = [message(i, 400) for i in range(window)]
    reqs = []
    with Tape(path, "record", run_log=False) as tape:
        for k in range(turns):
            msgs = history[-window:]
            reqs.append(msgs)
            answer = {"parts": [{"type": "text", "content": f"answer {k}"}], "usage": {"input": 500, "output": 5}}
            tape.model(request(msgs), live=lambda a=answer: a, model="m:1")
            history.append({"role": "assistant", "parts": [{"type": "text", "content": f"answer {k}"}]})
            history.append(message(window + k, 400))
    return reqs


def replay(path: Path, reqs: list[list[dict[str, Any]]]) -> float:
    t0 = time.perf_counter()
    with Tape(path, "replay", run_log=False) as tape:
        for msgs in reqs:
            tape.model(request(msgs), live=_boom, model="m:1")
    return time.perf_counter() - t0


def _boom() -> dict[str, Any]:
    raise RuntimeError("the model was called during replay")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=1000)
    ap.add_argument("--messages", type=int, default=50)
    a = ap.parse_args()
    warm, cold = keying()
    print(f"normalise + key, 100 messages × 1 KB: warm (99 seen) {warm:.3f} ms (target ≤ 2 ms), cold {cold:.3f} ms")
    with tempfile.TemporaryDirectory() as d:
        sizes = sorted({max(1, a.turns // 4), max(1, a.turns // 2), a.turns})
        for n in sizes:
            path = Path(d) / f"s{n}.jsonl"
            reqs = session(path, n, a.messages)
            times = [replay(path, reqs) for _ in range(3)]
            med = statistics.median(times)
            opens = []
            for _ in range(3):
                t0 = time.perf_counter()
                read_index(path)
                opens.append(time.perf_counter() - t0)
            mb = path.stat().st_size / 1e6
            print(
                f"{n:>5} turns × {a.messages} messages ({mb:.1f} MB): replay {med * 1000:.0f} ms "
                f"({med / n * 1e6:.0f} µs a turn), open {statistics.median(opens) * 1000:.0f} ms"
            )


if __name__ == "__main__":
    main()
