"""Importing OTLP JSON Lines: time, its ratio to a plain ``orjson.loads`` of every line, and peak memory.

Run: python benchmarks/bench_otel.py                  (100,000 spans in traces of 4, about 200 MB)
     python benchmarks/bench_otel.py --per-trace 40   (the same spans in traces of 40: fewer tapes)
     python benchmarks/bench_otel.py --gb 1           (also: peak RSS growth importing a 1 GB file)

Targets (issue "Traces in and out"): the import's own work within 3x of orjson.loads of the same lines (redaction,
which must run, timed apart); peak RSS growth on a 1 GB input below 100 MB (streamed, spilled to disk). The last line
is a floor, not a target: the bare os calls that putting each trace's tape in place takes under the session lock
protocol (no Python work), as a ratio to the same orjson.loads.

The file: traces of 4 spans each (an agent span, two chat spans with their messages, a tool span), each span's
messages padded so that 100,000 spans make about 200 MB. Each figure is measured in a child process of its own, so
one's memory never counts in another's.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PAD = "x" * 1500  # a message's text: a span of about 2 KB


def _attr(k: str, v: object) -> dict[str, object]:
    if isinstance(v, int):
        return {"key": k, "value": {"intValue": str(v)}}
    return {"key": k, "value": {"stringValue": v if isinstance(v, str) else json.dumps(v)}}


def write_file(path: Path, spans: int, per_trace: int = 4) -> int:
    """``spans`` spans in traces of ``per_trace``: an agent span, then (chat asking for a tool, the tool) pairs, then
    the final chat."""
    traces = max(1, spans // per_trace)
    pairs = max(1, (per_trace - 2) // 2)
    t0 = 1_764_000_000_000_000_000
    with open(path, "w") as fh:
        for t in range(traces):
            trace = f"{t:032x}"
            user = [{"role": "user", "parts": [{"type": "text", "content": f"question {t} {PAD}"}]}]
            chat = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-4o"}
            shape: list[tuple[str, dict[str, object]]] = [
                ("invoke_agent bot", {"gen_ai.operation.name": "invoke_agent"})
            ]
            history = list(user)
            for k in range(pairs):
                call = {"type": "tool_call", "id": f"c{t}_{k}", "name": "lookup", "arguments": {"q": t, "k": k}}
                out_msg = [{"role": "assistant", "parts": [call]}]
                shape.append(
                    (
                        "chat gpt-4o",
                        {
                            **chat,
                            "gen_ai.input.messages": list(history),
                            "gen_ai.output.messages": out_msg,
                            "gen_ai.usage.input_tokens": 40,
                            "gen_ai.usage.output_tokens": 5,
                        },
                    )
                )
                result = {"found": PAD[:300]}
                shape.append(
                    (
                        "execute_tool lookup",
                        {
                            "gen_ai.operation.name": "execute_tool",
                            "gen_ai.tool.name": "lookup",
                            "gen_ai.tool.call.id": f"c{t}_{k}",
                            "gen_ai.tool.call.arguments": {"q": t, "k": k},
                            "gen_ai.tool.call.result": result,
                        },
                    )
                )
                response = {"type": "tool_call_response", "id": f"c{t}_{k}", "response": result}
                history += [*out_msg, {"role": "tool", "parts": [response]}]
            final = [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
            shape.append(("chat gpt-4o", {**chat, "gen_ai.input.messages": history, "gen_ai.output.messages": final}))
            out = []
            base = t * len(shape)
            for n, (name, attrs) in enumerate(shape):
                start = t0 + (base + n) * 1_000_000
                span = {
                    "traceId": trace,
                    "spanId": f"{base + n + 1:016x}",
                    "name": name,
                    "kind": 1,
                    "startTimeUnixNano": str(start),
                    "endTimeUnixNano": str(start + 500_000),
                    "attributes": [_attr(k, v) for k, v in attrs.items()],
                    "status": {},
                }
                if n:
                    span["parentSpanId"] = f"{base + 1:016x}"
                out.append(span)
            doc = {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [{"spans": out}]}]}
            fh.write(json.dumps(doc) + "\n")
    return path.stat().st_size


CHILD = r"""
import os, resource, shutil, sys, time, tempfile
from pathlib import Path
sys.path.insert(0, {root!r})
what, path = sys.argv[1], Path(sys.argv[2])
import orjson
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
if what == "orjson":
    with open(path, "rb") as fh:
        for line in fh:
            orjson.loads(line)
else:
    from tapetui.core.config import Config
    from tapetui.core import redact
    from tapetui.traces.importer import import_otlp
    out = Path(tempfile.mkdtemp())
    cfg = Config.for_dir(out)
    if what == "import-without-redaction":  # the redactor's own time, measured by leaving it out
        redact.Redactor.redact = lambda self, v, *a, **k: v
        redact.Redactor.redact_text = lambda self, v, *a, **k: v
    import_otlp([path], out, config=cfg)
took = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
if what != "orjson":
    shutil.rmtree(out)  # tens of thousands of tapes a run: left behind, they slowed every later run's file system
print(took, base, peak)
"""


def child(what: str, path: Path) -> tuple[float, float]:
    """(seconds, peak RSS growth in MB above the interpreter with its imports) of one measurement."""
    code = CHILD.format(root=str(Path(__file__).resolve().parent.parent))
    out = subprocess.run([sys.executable, "-c", code, what, str(path)], capture_output=True, text=True, check=True)
    took, base, peak = out.stdout.split()
    return float(took), (int(peak) - int(base)) / 1024


def file_floor(tapes: int, size: int) -> float:
    """Seconds for the bare os calls that publishing ``tapes`` tapes of ``size`` bytes takes under the session lock
    protocol, with no Python work around them: each tape's two lock files created and locked, its changelog entry
    appended under the changelog's lock, its temp file written and renamed into place. What no import that writes a
    tape per trace can go below on this file system."""
    data, entry = b"x" * size, b"## imported\n" * 8
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        for i in range(tapes):
            gate = os.open(f"{d}/.t{i}.jsonl.gate", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(gate, fcntl.LOCK_EX)
            lock = os.open(f"{d}/.t{i}.jsonl.lock", os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(lock, fcntl.LOCK_SH)
            log = os.open(f"{d}/CHANGELOG.md", os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            fcntl.flock(log, fcntl.LOCK_EX)
            os.write(log, entry)
            os.close(log)
            tmp = os.open(f"{d}/.t{i}.jsonl.tmp", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            os.write(tmp, data)
            os.close(tmp)
            os.rename(f"{d}/.t{i}.jsonl.tmp", f"{d}/t{i}.jsonl")
            os.close(lock)
            os.close(gate)
        return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spans", type=int, default=100_000)
    ap.add_argument("--gb", type=float, default=0.0, help="also import a file of this many GB for peak RSS")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--per-trace", type=int, default=4, help="spans per trace (one tape each)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "trace.jsonl"
        size = write_file(path, a.spans, a.per_trace)
        print(f"{a.spans:,} spans in traces of {a.per_trace}, {size / 1e6:.0f} MB of OTLP JSON Lines")
        rows = {"orjson": [], "import": [], "import-without-redaction": []}
        for _ in range(a.runs):  # interleaved: a noisy machine slows each alike
            for what in rows:
                rows[what].append(child(what, path))

        def med(what: str, i: int) -> float:
            values = sorted(r[i] for r in rows[what])
            return values[len(values) // 2]

        plain, full, bare = med("orjson", 0), med("import", 0), med("import-without-redaction", 0)
        print(f"orjson.loads of every line   {plain:7.2f} s")
        print(f"import                       {full:7.2f} s   {full / plain:.2f}x   peak RSS +{med('import', 1):.0f} MB")
        print(f"  its own work (no redaction) {bare:7.2f} s   {bare / plain:.2f}x (target within 3x)")
        print(f"  redaction                   {full - bare:7.2f} s")
        tapes = max(1, a.spans // a.per_trace)
        floor = statistics.median(file_floor(tapes, size // tapes) for _ in range(a.runs))
        print(
            f"  the files of {tapes:,} tapes     {floor:7.2f} s   {floor / plain:.2f}x  (floor: bare os calls, per "
            "tape two lock files, a changelog entry, a temp file renamed)"
        )
        if a.gb:
            big = Path(d) / "big.jsonl"
            spans = int(a.spans * a.gb * 1e9 / size)
            size = write_file(big, spans, a.per_trace)
            path.unlink()
            took, grew = child("import", big)
            print(f"{spans:,} spans, {size / 1e9:.2f} GB: import {took:.1f} s, peak RSS +{grew:.0f} MB (target < 100)")


if __name__ == "__main__":
    main()
