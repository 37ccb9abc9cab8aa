"""What a text must hold before a default redaction rule can match it: the exact, cheap pre-checks that let
:class:`~tapetui.core.redact.Redactor` run a rule's regular expression only over text it may match.

Each gate is exact (never a guess): a text it rules out holds nothing its rule matches. Substring tests run at
C speed over any length, where a regex pass costs ~0.1-0.4 µs a character.
"""

from __future__ import annotations

import re

__all__ = [
    "GATES",
    "LONG",
    "NEEDS",
    "NEEDS_ANY_CASE",
    "PROBE",
    "PROBE_MIN",
    "fold",
    "may_hold_default_secret",
    "may_hold_secret_key",
]

# What each default rule needs in a string before it can match (in the order of DEFAULT_RULES): substrings
# (exact), substrings of the case-folded text, or the probe below. Substring tests are C-speed over any
# length, where a regex pass costs ~0.1-0.4 µs a character: a rule runs only where its gate admits the text.
# No needle holds "[" or "]", so redacting ("…[REDACTED]…") never makes a gate admit what it did not.
GATES: tuple[tuple[tuple[str, ...], tuple[str, ...], bool], ...] = (
    (("-----BEGIN ",), (), False),
    ((), ("bearer", "token", "basic", "digest"), False),
    (("://",), (), False),
    (("AKIA", "ASIA", "AGPA", "AIDA", "AROA"), (), False),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), (), False),
    (("github_pat_",), (), False),
    (("glpat-", "glptt-", "gldt-"), (), False),
    (("xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-"), (), False),
    (("hooks.slack.com",), (), False),
    (("eyJ",), (), False),
    (("sk-", "sk_", "pk-", "pk_", "rk-", "rk_"), (), False),
    (("AIza",), (), False),
    (("npm_",), (), False),
    (("hf_",), (), False),
    (("SG.",), (), False),
    (("SK",), (), False),
    ((), (), True),
    ((), ("account", "access"), False),
    (("sig=",), (), False),
    ((), ("auth", "cookie", "api", "token"), False),
    ((), ("passw", "pwd", "passphrase", "secret", "token", "api", "access", "private", "auth", "session"), False),
)
NEEDS = tuple(dict.fromkeys(n for exact, _, _ in GATES for n in exact))
NEEDS_ANY_CASE = tuple(dict.fromkeys(n for _, folded, _ in GATES for n in folded))
# Rules with no literal part (the Discord token): what any match of them holds, found by one scan
# that starts at a literal '.' (the regex engine's fast prefix search), only in strings long enough.
PROBE = re.compile(r"\.[A-Za-z0-9_-]{6}\.")
PROBE_MIN = 59  # the shortest Discord token (24 + 1 + 6 + 1 + 27)
# Words (any case) a dict key of JSON text needs to be secret by the default key rules.
_KEY_NEEDS = re.compile(
    b"token|passw|pwd|passphrase|secret|cookie|auth|api|credential|session|signature|private|access"
)
_NOT_ALNUM = bytes(c for c in range(128) if not chr(c).isalnum())
# Letters that case-insensitive matching also equates with an ASCII letter (see the docs of re.IGNORECASE).
_FOLD = str.maketrans({"\u017f": "s", "\u212a": "k", "\u0131": "i", "\u0130": "i"})


def fold(text: str) -> str:
    return (text if text.isascii() else text.translate(_FOLD)).lower()


# Long texts: each needle is looked for only where one of its characters is (a single character is found at
# memchr speed, a needle at about 1 ns a byte): the needles grouped by their least common character, in an order
# of how rarely text holds it. Exact: a text without the character holds no needle with it.
LONG = 4096
_RARE = "_=J:KQZXVWYUGPDRSO.ANBMCEFHILT-zjqxkvwybgpfmuhlcdrsoinate0123456789"


def _by_rare_char(needles: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    groups: dict[str, list[str]] = {}
    for n in needles:
        ch = min(n, key=lambda c: _RARE.find(c) if c in _RARE else len(_RARE))  # one _RARE lacks: common
        groups.setdefault(ch, []).append(n)
    return tuple((ch, tuple(ns)) for ch, ns in groups.items())


_NEEDS_BY_CHAR = _by_rare_char(NEEDS)
_NEEDS_ANY_CASE_BY_CHAR = _by_rare_char(NEEDS_ANY_CASE)


def may_hold_default_secret(text: str) -> bool:
    """False only when no default pattern can match ``text`` (an exact pre-check, not a guess)."""
    if len(text) < 20 and text.isalnum():  # every pattern needs punctuation, a space, or 20+ characters
        return False
    if len(text) >= LONG:
        return _may_hold_long(text)
    for needle in NEEDS:
        if needle in text:
            return True
    folded = fold(text)
    for needle in NEEDS_ANY_CASE:
        if needle in folded:
            return True
    return len(text) >= PROBE_MIN and PROBE.search(text) is not None


def _may_hold_long(text: str) -> bool:
    for ch, needles in _NEEDS_BY_CHAR:
        if ch in text:
            for needle in needles:
                if needle in text:
                    return True
    folded = fold(text)
    for ch, needles in _NEEDS_ANY_CASE_BY_CHAR:
        if ch in folded:
            for needle in needles:
                if needle in folded:
                    return True
    return PROBE.search(text) is not None


def may_hold_secret_key(text: str) -> bool:
    """False only when no dict key in JSON ``text`` can be secret by the default key words.

    A key's words are its ASCII letter and digit runs, so each secret word (and each joined
    form such as ``apikey``) is a substring of the text with every other character removed."""
    squeezed = text.encode("ascii", "ignore").translate(None, _NOT_ALNUM).lower()
    return _KEY_NEEDS.search(squeezed) is not None
