"""Terminal injection through the app: a tape's text reaches the terminal as visible text.

The app runs with a driver that keeps every byte Textual writes to the terminal, so the test
checks the real output stream, not only the rendered screen: no raw CSI, no OSC 52 clipboard
write, no title change, no BEL, no C1 control may come out of a tape.
"""

from __future__ import annotations

import re
from pathlib import Path

import orjson
import pytest
from textual.drivers.headless_driver import HeadlessDriver

from tapetui.core.config import Config
from tapetui.core.keys import key_of
from tests.builders import call_line, session_line

MARKUP = "[bold red]x[/]"
OSC52 = "\x1b]52;c;ZXZpbA==\x07"
CLEAR = "\x1b[2J"
BEL = "\x07"
TITLE = "\x1b]0;pwned\x1b\\"
C1 = "\x9b2J"
HOSTILE = MARKUP + OSC52 + CLEAR + BEL + TITLE + C1
TOOL = "t" + MARKUP + OSC52 + CLEAR + BEL + "ool"
# Sequences a tape carries that must never be written raw (the driver's own OSC 22 pointer shape aside).
RAW = [OSC52, "\x1b]52", CLEAR, "\x1b]0;", C1, "\x9b"]


class CaptureDriver(HeadlessDriver):
    """A headless driver that renders like a real terminal one and keeps what it writes."""

    written: list[str] = []

    @property
    def is_headless(self) -> bool:
        return False

    def write(self, data: str) -> None:
        CaptureDriver.written.append(data)


def _project(tmp_path: Path) -> Path:
    """One session (its name hostile too) with a candidate whose changed step is of a hostile tool,
    hostile labels (keys and values), arguments, results, an error, and a run log."""
    d = tmp_path / "tapes"
    d.mkdir()
    name = "sess[bold red]y[b]\x1b]0;t\x07"  # no "/" in a file name
    golden = d / f"{name}.jsonl"
    header = session_line(labels={"model" + HOSTILE: "m" + HOSTILE})
    args = {"q": HOSTILE, HOSTILE: "as a key"}
    new = {**args, "q": HOSTILE + "!"}
    golden.write_bytes(
        header
        + b"".join(
            [
                call_line(seq=1, tool=TOOL, args=args, result={"out": HOSTILE}),
                call_line(
                    seq=2,
                    tool=TOOL,
                    args={"n": 2},
                    error={"type": "ValueError" + HOSTILE, "module": "builtins", "message": HOSTILE},
                ),
            ]
        )
    )
    golden.with_name(f"{name}.candidate.jsonl").write_bytes(
        header
        + b"".join(
            [
                call_line(seq=1, tool=TOOL, args=new, result={"out": HOSTILE + "?"}),
                call_line(seq=2, tool=TOOL, args={"n": 2}, result=HOSTILE),
            ]
        )
    )
    events = [
        {"event": "start", "mode": "replay" + HOSTILE},
        {
            "event": "drift",
            "seq": 1,
            "step": 1,
            "tool": TOOL,
            "key": key_of(TOOL, new),
            "recorded_key": key_of(TOOL, args),
            "recorded_args": args,
            "args": new,
            "changes": [["q", HOSTILE, HOSTILE + "!"]],
        },
        {"event": "fingerprint", "seq": 2, "tool": TOOL, "recorded": HOSTILE, "live": "x", "explanation": [HOSTILE]},
        {"event": "end", "stats": {"tape_hits": 0}, "error": {"type": HOSTILE, "message": HOSTILE}},
    ]
    golden.with_name(f"{name}.run.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    return d


def _escapes(data: str) -> set[str]:
    """The distinct escape sequences in ``data`` (CSI with parameters collapsed to their final byte)."""
    out = set()
    for m in re.finditer(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|.)", data, re.S):
        seq = m.group()
        out.add(re.sub(r"^\x1b\[[0-9;]*(?=[@-~]$)", "\x1b[", seq) if seq.startswith("\x1b[") else seq)
    return out


@pytest.mark.slow
async def test_hostile_tape_text_never_reaches_the_terminal_raw(tmp_path: Path) -> None:
    from tapetui.tui.app import TapeApp
    from tests.test_tui import _visible, wait_for

    d = _project(tmp_path)
    app = TapeApp(Config.for_dir(d), watch=False)
    app.driver_class = CaptureDriver
    CaptureDriver.written = []
    screens: list[str] = []
    async with app.run_test(size=(200, 70), headless=False) as pilot:
        await wait_for(pilot, lambda: all(s.loaded for s in app.sessions.values()))
        await wait_for(pilot, lambda: "candidate vs golden" in _visible(app))  # the session: diff titles, labels
        screens.append(_visible(app))
        await pilot.press("t")  # unified diffs
        await pilot.pause(0.1)
        screens.append(_visible(app))
        await pilot.press("enter", "j")  # step 1: arguments, result, the candidate's diff
        await wait_for(pilot, lambda: "candidate differs" in _visible(app))
        screens.append(_visible(app))
        await pilot.press("j")  # step 2: the recorded error
        await wait_for(pilot, lambda: "error" in _visible(app) and "ValueError" in _visible(app))
        screens.append(_visible(app))
        await pilot.press("R")  # the confirm modal names the tool
        await wait_for(pilot, lambda: "Re-record this step?" in _visible(app))
        screens.append(_visible(app))
        await pilot.press("n")
        await pilot.press("a")  # the rationale modal names session and tool
        await wait_for(pilot, lambda: "Accept as the new golden" in _visible(app))
        screens.append(_visible(app))
        await pilot.press("escape")
        await pilot.press("F")  # the live log's border title
        await pilot.pause(0.1)
        screens.append(_visible(app))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: "search keys" in _visible(app))
        screens.append(_visible(app))
        await pilot.press("escape")
        await pilot.press("ctrl+p")  # the command palette
        await pilot.pause(0.2)
        screens.append(_visible(app))
        await pilot.press("escape")
        await pilot.pause(0.1)
    text = "\n".join(screens)
    written = "".join(CaptureDriver.written)
    assert written, "the capture driver saw no output"

    # On screen: markup literal, control characters as visible escapes.
    assert MARKUP in text and "t" + MARKUP in text and "model" + MARKUP in text
    assert "\\x1b]52;c;ZXZpbA==\\x07" in text or "\\u001b]52;c;ZXZpbA==\\u0007" in text
    assert "\\x1b[2J" in text or "\\u001b[2J" in text
    assert "\\x9b2J" in text or "\\u009b2J" in text
    assert "[following]" in text  # the app's own border title is literal too
    leaked = [repr(c) for c in [*RAW, BEL, "\x1b"] if c in text]
    assert not leaked, f"raw control characters on the screen: {leaked}"

    # On the wire: none of the tape's sequences, and only the escapes Textual itself uses.
    leaked = [repr(c) for c in RAW if c in written]
    assert not leaked, f"raw sequences written to the terminal: {leaked}"
    assert BEL not in written.replace("\x1b]22;default\x07", "").replace("\x1b]22;pointer\x07", "")
    allowed = {
        "\x1b[m",
        "\x1b[H",
        "\x1b[h",
        "\x1b[l",
        "\x1b]22;default\x07",
        "\x1b]22;pointer\x07",
        "\x1b[A",
        "\x1b[B",
        "\x1b[C",
        "\x1b[D",
        "\x1b[K",
        "\x1b[J",
    }
    unknown = {
        repr(e) for e in _escapes(written) if e not in allowed and not re.fullmatch(r"\x1b\[\?[0-9;]*[hl]", e)
    }  # private modes: sync, cursor
    assert not unknown, f"unexpected escape sequences written: {sorted(unknown)}"
    assert "\x1b[2J" not in written
    assert app.title == "tapetui"
