"""Redaction: secrets are replaced before anything reaches disk, a log or a screen."""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Iterable
from typing import Any

from tapetui.errors import TooDeep

__all__ = ["DEFAULT_REDACTOR", "REDACTED", "Redactor"]

REDACTED = "[REDACTED]"
_LEAVES = frozenset({int, bool, float})

# Words (after splitting a key on punctuation and camelCase) that make its value secret.
_SECRET_WORDS = frozenset(
    {"token", "password", "passwd", "pwd", "passphrase", "secret", "cookie", "authorization", "apikey",
     "credential", "credentials", "sessionid", "signature"}
)
# Adjacent word pairs that do the same: api_key, private_key, access_key, auth_token ...
_SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key"),
                           ("session", "id"), ("client", "secret"), ("set", "cookie")})

_WORD_SPLIT = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z0-9])(?=[A-Z])")

# Value shapes that are secrets wherever they appear. Each pattern's group 1, if
# any, is kept (a prefix such as "Bearer "); the rest of the match is replaced.
DEFAULT_PATTERNS: tuple[str, ...] = (
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)",
    r"((?i:\b(?:bearer|token|basic|digest))\s+)[A-Za-z0-9._~+/=-]{8,}",
    r"(://[^/\s:@]+:)[^/\s@]+(?=@)",  # password inside a URL
    r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b",  # AWS access key id
    r"\bgh[pousr]_[A-Za-z0-9]{20,}\b",
    r"\bgithub_pat_[A-Za-z0-9_]{20,}\b",
    r"\bgl(?:pat|ptt|dt)-[A-Za-z0-9_-]{20,}\b",
    r"\bxox[abposr]-[A-Za-z0-9-]{10,}",
    r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+",
    r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}",  # JWT
    r"\b(?:sk|pk|rk)[-_](?:live|test|proj|ant|or)?[-_]?[A-Za-z0-9_-]{16,}",  # OpenAI, Anthropic, Stripe
    r"\bAIza[0-9A-Za-z_-]{35}\b",  # Google API key
    r"\bnpm_[A-Za-z0-9]{36}\b",
    r"\bhf_[A-Za-z0-9]{30,}\b",
    r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",  # SendGrid
    r"((?i:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key)\s*[=:]\s*)[^\s&;,\"']+",
)


# What every default pattern needs in a string before it can match (the list follows DEFAULT_PATTERNS).
# Substring tests are C-speed over any length, where one big alternation costs ~0.4 µs a character.
_NEEDS = ("-----BEGIN ", "://", "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ghp_", "gho_", "ghu_", "ghs_", "ghr_",
          "github_pat_", "glpat-", "glptt-", "gldt-", "xoxa-", "xoxb-", "xoxp-", "xoxo-", "xoxs-", "xoxr-", "eyJ",
          "sk-", "sk_", "pk-", "pk_", "rk-", "rk_", "AIza", "npm_", "hf_", "SG.")
_NEEDS_ANY_CASE = ("bearer", "token", "basic", "digest", "password", "passwd", "pwd", "secret", "api", "access")
# Letters that case-insensitive matching also equates with an ASCII letter (see the docs of re.IGNORECASE).
_FOLD = str.maketrans({"\u017f": "s", "\u212a": "k", "\u0131": "i", "\u0130": "i"})


def _may_hold_default_secret(text: str) -> bool:
    """False only when no default pattern can match ``text`` (an exact pre-check, not a guess)."""
    if len(text) < 20 and text.isalnum():  # every pattern needs punctuation, a space, or 20+ characters
        return False
    for needle in _NEEDS:
        if needle in text:
            return True
    folded = (text if text.isascii() else text.translate(_FOLD)).lower()
    for needle in _NEEDS_ANY_CASE:
        if needle in folded:
            return True
    return False


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(key) if w]


class Redactor:
    """Replaces secret values with ``[REDACTED]`` in nested JSON-like data.

    Args:
        keys: extra key names (case-insensitive, ``fnmatch`` globs allowed) whose values are secret.
        patterns: extra regular expressions for secret values inside strings.
        defaults: keep the built-in key words and value patterns (on by default).
    """

    def __init__(self, keys: Iterable[str] = (), patterns: Iterable[str] = (), *, defaults: bool = True) -> None:
        self._defaults = defaults
        self._extra_keys = tuple(k.lower() for k in keys)
        pats = (list(DEFAULT_PATTERNS) if defaults else []) + list(patterns)
        self._patterns = [re.compile(p) for p in pats]
        user = list(patterns)
        try:  # one combined pass over a string for the user's patterns
            self._user: re.Pattern[str] | None = re.compile("|".join(f"(?:{p})" for p in user)) if user else None
        except re.error:  # a user pattern with global flags cannot be combined
            self._user = re.compile(".") if user else None
        self._key_cache: dict[str, bool] = {}

    def is_secret_key(self, key: str) -> bool:
        """Whether a dict key's value must be redacted."""
        hit = self._key_cache.get(key)
        if hit is None:
            hit = self._classify(key)
            if len(self._key_cache) < 10_000:
                self._key_cache[key] = hit
        return hit

    def _classify(self, key: str) -> bool:
        low = key.lower()
        if any(fnmatch.fnmatchcase(low, pat) for pat in self._extra_keys):
            return True
        if not self._defaults:
            return False
        words = _words(key)
        if any(w in _SECRET_WORDS for w in words):
            return True
        joined = "".join(words)
        if joined in _SECRET_WORDS or joined.endswith(("apikey", "secretkey", "privatekey", "accesskey")):
            return True
        return any(pair in _SECRET_PAIRS for pair in zip(words, words[1:]))

    def redact_text(self, text: str) -> str:
        """Redact secret-shaped substrings of one string."""
        if not (self._defaults and _may_hold_default_secret(text)) and not (self._user and self._user.search(text)):
            return text
        for pat in self._patterns:
            text = pat.sub(_keep_prefix, text)
        return text

    def redact(self, value: Any) -> Any:
        """Return ``value`` with secrets replaced; unchanged parts are shared, not copied.

        Raises:
            TooDeep: a value nested deeper than Python's recursion limit allows.
        """
        try:
            return self._redact(value)
        except RecursionError:
            raise TooDeep("value") from None

    def _redact(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, dict):
            out = {}
            changed = False
            secret, text = self.is_secret_key, self.redact_text
            for k, v in value.items():
                tv = type(v)
                if v is None or tv is int or tv is bool or tv is float:  # leaves inline: no call per leaf
                    nv: Any = REDACTED if v is not None and isinstance(k, str) and secret(k) else v
                elif isinstance(k, str) and secret(k):
                    nv = REDACTED
                else:
                    nv = text(v) if tv is str else self._redact(v)
                if nv is not v:
                    changed = True
                out[k] = nv
            return out if changed else value
        if isinstance(value, (list, tuple)):
            text = self.redact_text
            items = [text(v) if type(v) is str else v if v is None or type(v) in _LEAVES else self._redact(v)
                     for v in value]
            if any(a is not b for a, b in zip(items, value)):
                return items
            return value
        return value

    def canon_form(self, value: Any) -> Any:
        """``canon(self.redact(value))`` in one pass, with dict keys left in their order.

        The replay hot path hashes this with :func:`tapetui.canon.canonical_json`, which
        sorts keys itself, so the bytes — and the call key — are those of the two-pass form.

        Raises:
            TypeError: a value that has no JSON form.
            TooDeep: a value nested deeper than Python's recursion limit allows.
        """
        try:
            return self._canon_form(value)
        except RecursionError:
            raise TooDeep("value") from None

    def _canon_form(self, value: Any) -> Any:
        t = type(value)
        if t is str:
            return self.redact_text(value).strip()
        if t is dict:
            out = {}
            secret = self.is_secret_key
            for k, v in value.items():
                if v is None:  # canon drops None values (a redacted None stays None)
                    continue
                if isinstance(k, str) and secret(k):
                    out[str(k)] = REDACTED
                    continue
                tv = type(v)  # scalars inline: most arguments are flat
                if tv is str:
                    out[str(k)] = self.redact_text(v).strip()
                elif tv is int or tv is bool:
                    out[str(k)] = v
                else:
                    out[str(k)] = self._canon_form(v)
            return out
        if t is int or t is bool or value is None:
            return value
        if t is float:
            return round(value, 6) if math.isfinite(value) else value
        if t is list or t is tuple:
            return [self._canon_form(v) for v in value]
        from tapetui.canon import canon  # subclasses, sets (never redacted), and type errors: the two-pass form

        return canon(self.redact(value))


def _keep_prefix(m: re.Match[str]) -> str:
    prefix = next((g for g in m.groups() if g), "")
    return prefix + REDACTED


DEFAULT_REDACTOR = Redactor()
