"""Opening a session of 1,000 model turns × 50 messages in the app, against one of 1,000 tool calls.

Run: python benchmarks/bench_turns_app.py        (CALLS=1: the 1,000-call session instead)
Target (issue "Model turns on tape"): the session opens in the app in ≤ 1 s. Prints how long the app takes to
show the session, then to show the first page of its steps (enter on it), and the two together: from launch to the
steps on screen, the tape never opened before (no index cache yet).
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import bench_turns  # noqa: E402

from tapetui import Tape  # noqa: E402
from tapetui.core.config import load_config  # noqa: E402
from tapetui.tui.app import TapeApp  # noqa: E402


def folder() -> Path:
    root = Path(tempfile.mkdtemp())
    (root / "tapes").mkdir()
    (root / "tapes.toml").write_text('[tapes]\ndir = "tapes"\n')
    path = root / "tapes" / "long.jsonl"
    if os.environ.get("CALLS"):
        with Tape(path, "record", run_log=False) as t:
            for i in range(1000):
                t.call("lookup", {"q": i}, live=lambda: {"r": 1})
    else:
        bench_turns.session(path, 1000, 50)
    return root


async def main() -> None:
    app = TapeApp(load_config(folder() / "tapes.toml"), watch=False)
    t0 = time.perf_counter()
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(2000):  # until the tree is mounted and lists the session
            if app.is_mounted and app.query("SessionTree") and app.session_tree.session_nodes:
                break
            await pilot.pause(0.01)
        t1 = time.perf_counter()
        node = next(iter(app.session_tree.session_nodes.values()))
        app.session_tree.move_cursor(node)
        await pilot.press("enter")
        for _ in range(2000):
            if len(node.children) > 10:
                break
            await pilot.pause(0.01)
        t2 = time.perf_counter()
    shown, steps = (t1 - t0) * 1000, (t2 - t1) * 1000
    print(
        f"the app shows the session: {shown:.0f} ms; its first {len(node.children)} steps: {steps:.0f} ms more; "
        f"from launch to its steps on screen: {shown + steps:.0f} ms (target ≤ 1000 ms)"
    )


if __name__ == "__main__":
    asyncio.run(main())
