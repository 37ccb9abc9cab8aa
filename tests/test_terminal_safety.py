"""Hostile text in tapes: the CLI's bytes and the app's screen show it literally, never act on it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tapetui.core.keys import key_of
from tests.builders import call_line, session_line

ROOT = Path(__file__).resolve().parent.parent

HOSTILE = {
    "rich_markup": "[bold red]boom[/]",
    "rich_link": "[link=https://evil.example]click[/link]",
    "rich_unbalanced": "[/] [/bold] [",
    "csi_clear": "\x1b[2J\x1b[1;1H",
    "csi_colour": "\x1b[31mred\x1b[0m",
    "osc52_clipboard": "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x07",
    "osc_title": "\x1b]0;pwned\x07",
    "osc8_hyperlink": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "c1_csi": "\x9b2J",
    "c1_osc": "\x9d0;c1 title\x9c",
    "bidi_override": "abc\u202edcba\u202c",
    "bidi_isolate": "\u2066isolated\u2069",
    "bell_backspace_cr": "ok\x07\x08\rOVERWRITE",
    "nul": "a\x00b",
    "zero_width_and_separators": "x\u200by\u2028z",
}
# What must never be written raw: ESC, BEL, BS, CR, NUL, C1 controls, bidi controls, separators.
RAW = [
    "\x1b",
    "\x07",
    "\x08",
    "\r",
    "\x00",
    "\x9b",
    "\x9c",
    "\x9d",
    "\u202e",
    "\u202c",
    "\u2066",
    "\u2069",
    "\u200b",
    "\u2028",
]


def _hostile_project(tmp_path: Path) -> Path:
    """A tapes folder whose golden, candidate and run log carry every hostile string, in keys,
    values, a tool name and an error message; the session's own file name is hostile too."""
    d = tmp_path / "tapes"
    d.mkdir()
    name = "evil\x1b]0;title\x07[b]x[-b]\u202e"
    golden = d / f"{name}.jsonl"
    lines = [session_line(labels={"model": HOSTILE["osc_title"]})]
    cand = [lines[0]]
    events = [orjson.dumps({"event": "start", "mode": "replay"}) + b"\n"]
    for seq, (case, text) in enumerate(HOSTILE.items(), start=1):
        tool = f"tool_{case}" if seq > 1 else "t\x1b[2J[red]ool"
        args = {"case": case, "text": text, text: "as a key"}
        new = {**args, "text": text + "!"}
        error = {"type": "ValueError", "module": "builtins", "message": text} if case == "osc52_clipboard" else None
        lines.append(call_line(seq=seq, tool=tool, args=args, result={"out": text}, error=error))
        cand.append(call_line(seq=seq, tool=tool, args=new, result={"out": text + "?"}))
        events.append(
            orjson.dumps(
                {
                    "event": "drift",
                    "seq": seq,
                    "step": seq,
                    "tool": tool,
                    "key": key_of(tool, new),
                    "recorded_key": key_of(tool, args),
                    "recorded_args": args,
                    "args": new,
                    "changes": [["text", text, text + "!"]],
                }
            )
            + b"\n"
        )
    events.append(
        orjson.dumps({"event": "end", "stats": {"tape_hits": 0}, "error": {"message": HOSTILE["csi_clear"]}}) + b"\n"
    )
    golden.write_bytes(b"".join(lines))
    golden.with_name(f"{name}.candidate.jsonl").write_bytes(b"".join(cand))
    golden.with_name(f"{name}.run.jsonl").write_bytes(b"".join(events))
    return d


def _cli(cwd: Path, *args: str) -> bytes:
    r = subprocess.run(
        [sys.executable, "-m", "tapetui", *args],
        cwd=cwd,
        capture_output=True,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT), "FORCE_COLOR": "1", "TERM": "xterm-256color"},
    )
    assert r.returncode in (0, 1, 2), r.stderr
    assert b"Traceback" not in r.stderr
    return r.stdout + r.stderr


@pytest.mark.parametrize(
    "command", [["check", "."], ["diff", "GOLDEN"], ["diff", "GOLDEN", "RUNLOG"], ["stats", "GOLDEN"], ["pending"]]
)
def test_cli_writes_no_raw_control_bytes(tmp_path: Path, command: list[str]) -> None:
    d = _hostile_project(tmp_path)
    golden = next(
        p for p in d.iterdir() if p.name.endswith(".jsonl") and ".candidate." not in p.name and ".run." not in p.name
    )
    argv = [{"GOLDEN": str(golden), "RUNLOG": str(golden)[: -len(".jsonl")] + ".run.jsonl"}.get(a, a) for a in command]
    out = _cli(d, *argv).decode("utf-8")
    # FORCE_COLOR lets the CLI colour its own output; strip only those well-formed SGR codes it writes itself.
    import re

    own = re.sub(r"\x1b\[[0-9;]*m", "", out)
    leaked = [repr(c) for c in RAW if c in own]
    assert not leaked, f"{command}: raw control characters reached the terminal: {leaked}"
    assert "\\x1b" in own or "\\u001b" in own  # shown, escaped, not dropped
    if command[0] in ("diff", "check"):
        assert "[bold red]boom[/]" in own  # markup stays literal text


@pytest.mark.slow
async def test_screen_shows_hostile_text_literally(tmp_path: Path) -> None:
    from tapetui.core.config import Config
    from tapetui.tui.app import TapeApp
    from tests.test_tui import _visible, wait_for

    d = _hostile_project(tmp_path)
    app = TapeApp(Config.for_dir(d), watch=False)
    async with app.run_test(size=(180, 60)) as pilot:
        await wait_for(pilot, lambda: all(s.loaded for s in app.sessions.values()))
        screens = [_visible(app)]
        await pilot.press("enter")
        for case in HOSTILE:
            await pilot.press("j")
            await wait_for(pilot, lambda case=case: case in _visible(app))  # type: ignore[misc]
            screens.append(_visible(app))
        await pilot.press("t")  # the unified diff view too
        await pilot.pause(0.1)
        screens.append(_visible(app))
        text = "\n".join(screens)
        leaked = [repr(c) for c in RAW if c in text]
        assert not leaked, f"raw control characters reached the screen: {leaked}"
        assert "[bold red]boom[/]" in text and "[link=https://evil.example]click[/link]" in text
        assert "\\x1b]52;c;Y3VybCBldmlsIHwgc2g=" in text or "\\u001b]52;c;Y3VybCBldmlsIHwgc2g=" in text
        assert "\\u202e" in text
        assert app.title == "tapetui"
