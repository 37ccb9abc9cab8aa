"""Text from tapes shown safely: terminal control bytes are escaped, never sent raw.

A tape may hold anything a tool returned: ANSI CSI/OSC sequences (clear screen, set
the title, write the clipboard with OSC 52), C1 controls, bidi overrides that reorder
what a reviewer reads. Everything here turns them into visible escapes.
"""

from __future__ import annotations

import re

__all__ = ["inert_commands", "inert_json_commands", "safe_json_text", "safe_text", "xml_text"]

# C0 controls but tab and newline, DEL, C1 controls, bidi embeddings/overrides/isolates,
# zero-width and line/paragraph separators, lone surrogates.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)
_UNSAFE_ALL = re.compile(
    "[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff\ud800-\udfff]"
)  # a lone surrogate too: a file name that is not UTF-8 (\udcff) is shown as its escape, never as raw bytes


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def safe_text(text: str, *, newlines: bool = True) -> str:
    """``text`` with every control and bidi character written as an escape (``\\x1b``).

    Args:
        newlines: keep newlines and tabs as they are (multi-line display); when False
            they are escaped too (one-line display).
    """
    return (_UNSAFE if newlines else _UNSAFE_ALL).sub(_escape, text)


_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u200b-\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ufeff]")


def safe_json_text(text: str) -> str:
    """JSON text (whose C0 controls are escaped already) with the characters JSON allows raw but
    terminals act on — C1 controls, bidi overrides — escaped as ``\\uXXXX``; still valid JSON."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# Characters XML 1.0 cannot hold, even escaped: C0 controls but tab, newline and carriage return, surrogates,
# U+FFFE and U+FFFF (what safe_text leaves of them: it escapes the controls already). Named as what it takes, not as
# the complement of what XML takes: the same set, compiled in a tenth of a millisecond instead of ten (every command)
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: str) -> str:
    """:func:`safe_text`, and what XML 1.0 cannot hold (U+FFFE, U+FFFF, a lone surrogate) written as a visible
    escape too: text an XML document (JUnit) can carry."""
    return _NOT_XML.sub(_escape, safe_text(text))


# A line that starts with "::" after any whitespace (the runner trims every Unicode space, U+00A0 and U+3000 among
# them) is a workflow command to a CI runner (GitHub Actions reads ``::error …::``, ``::add-mask::``,
# ``::stop-commands::`` from a job's output); so is ``##[command]`` anywhere in a line (the older syntax it still
# reads). Python's ``\s`` takes every character .NET's Char.IsWhiteSpace does.
_COMMAND = re.compile(r"(?m)^(\s*):(?=:)")
_LEGACY_COMMAND = "##["


def inert_commands(text: str) -> str:
    """``text`` with no line a CI runner takes for a workflow command: the first colon of a line that starts with
    ``::`` after whitespace (a session named ``::error file=…::`` printed on a line of its own) written as ``\x3a``,
    and the bracket of every ``##[`` as ``\x5b``."""
    if "::" in text:
        text = _COMMAND.sub(r"\1\\x3a", text)
    if _LEGACY_COMMAND in text:
        text = text.replace(_LEGACY_COMMAND, "##\\x5b")
    return text


def inert_json_commands(text: str) -> str:
    """JSON text with no ``##[`` a CI runner would read as a command: its bracket written ``\u005b``, which JSON
    reads as the same character (no line of indented JSON starts with ``::``: a string is quoted)."""
    return text.replace(_LEGACY_COMMAND, "##\\u005b") if _LEGACY_COMMAND in text else text
