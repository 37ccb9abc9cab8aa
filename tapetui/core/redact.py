"""Redaction: secrets are replaced before anything reaches disk, a log or a screen."""

from __future__ import annotations

import fnmatch
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Iterable
from itertools import islice
from typing import Any

import orjson

from tapetui.core.canon import canon, dumps
from tapetui.core.errorbase import TooDeep
from tapetui.core.escapes import plain
from tapetui.core.freshstack import on_fresh_stack
from tapetui.core.keypattern import key_in_text
from tapetui.core.redactgates import GATES, PROBE, PROBE_MIN, fold, may_hold_default_secret, may_hold_secret_key

__all__ = ["DEFAULT_PATTERNS", "DEFAULT_REDACTOR", "DEFAULT_RULES", "REDACTED", "Redactor"]

REDACTED = "[REDACTED]"
TOO_DEEP_TEXT = "[REDACTED: JSON text nested too deeply to be redacted by its keys]"

# Words (after splitting a key on punctuation and camelCase) that make its value secret.
_SECRET_WORDS = frozenset(
    {
        "token",
        "password",
        "passwd",
        "pwd",
        "passphrase",
        "secret",
        "cookie",
        "authorization",
        "apikey",
        "credential",
        "credentials",
        "sessionid",
        "signature",
    }
)
# Adjacent word pairs that do the same: api_key, private_key, access_key, auth_token ...
_SECRET_PAIRS = frozenset(
    {
        ("api", "key"),
        ("private", "key"),
        ("access", "key"),
        ("secret", "key"),
        ("session", "id"),
        ("client", "secret"),
        ("set", "cookie"),
    }
)

# Words that make "token" a count of model tokens or a tokenizer's token, not a credential: input_token_details,
# token_usage, token_count, max_token_limit, stop_token, eos_token, token_type... (an access_token, a refresh_token,
# a csrf_token, an id_token stay secret)
_TOKEN_COUNT_WORDS = frozenset({
    "usage", "count", "counts", "details", "detail", "limit", "budget", "input", "output", "total", "prompt",
    "completion", "cached", "cache", "reasoning", "max", "num", "stop", "eos", "bos", "pad", "unk", "sep", "mask",
    "special", "logit", "bias", "logprob", "logprobs", "ids", "type", "length",
})  # fmt: skip

_WORD_SPLIT = re.compile(r"[^0-9a-zA-Z]+|(?<=[a-z0-9])(?=[A-Z])")

# Value shapes that are secrets wherever they appear, by rule name (the name is what
# ``tapetui scrub`` reports, never the secret). Each rule's groups, if any, are kept (a
# prefix such as "Bearer " or 'password: "'); the rest of the match is replaced.
_QUOTED = (  # a value after a key word or header name: quoted ("…", '…', \"…\") or bare
    r"(?:(\\{1,3}\")[^\"\\\r\n]+|(\")(?:[^\"\\\r\n]|\\[^\r\n])+|(')(?:[^'\\\r\n]|\\[^\r\n])+|"
)
_KEY_WORDS = (
    r"(?i:passw(?:or)?d|pwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|auth[_-]?key|session[_-]?id)(?:[_-]?(?i:key))?"
)
_HEADERS = (
    r"(?i:proxy-authorization|authorization|set-cookie|cookie|x-api-key|api-key|x-auth-token"
    r"|x-amz-security-token|x-goog-api-key)"
)
_CRED = r"[A-Za-z0-9._~+/=-]"  # a character of a credential sent after its scheme (RFC 6750's token68, and .)
# A word start, or just after a JSON escape letter (\\n, \\t...) that is not itself an escaped backslash's
_START = r"(?:\b|(?<=(?<!\\)\\[nrtbf]))"
DEFAULT_RULES: tuple[tuple[str, str], ...] = (
    (
        "private-key-block",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|$)",
    ),
    # A credential after its scheme's word, not prose ("basic arithmetic", "token classification", "Bearer
    # Certificates"): it holds a digit, a + / = ~ _, a dot inside it, a lower letter then a capital (base64), or it is
    # longer than any word (21 characters and more)
    (
        "auth-scheme",
        r"((?i:\b(?:bearer|token|basic|digest))\s+)"
        r"(?=" + _CRED + r"*?(?:[0-9+/=~_]|\.[A-Za-z0-9]|[a-z][A-Z])|" + _CRED + r"{21})" + _CRED + r"{8,}",
    ),
    ("url-password", r"(://[^/\s:@]+:)[^/\s@]+(?=@)"),
    # A token right after a JSON escape ("…\\nsk-…" in JSON text held as a string: the escape's letter is a word
    # letter, so no word boundary comes) is found as at a word start (_START); AWS key ids also glued to text.
    ("aws-access-key-id", r"(?<![0-9A-Z])(?:AKIA|ASIA|AGPA|AIDA|AROA)[0-9A-Z]{16}\b"),
    ("github-token", _START + r"gh[pousr]_[A-Za-z0-9]{20,}\b"),
    ("github-fine-grained-token", _START + r"github_pat_[A-Za-z0-9_]{20,}\b"),
    ("gitlab-token", _START + r"gl(?:pat|ptt|dt)-[A-Za-z0-9_-]{20,}\b"),
    ("slack-token", _START + r"xox[abposr]-[A-Za-z0-9-]{10,}"),
    ("slack-webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"),
    ("jwt", _START + r"eyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}"),
    # OpenAI, Anthropic, Stripe
    ("prefixed-api-key", _START + r"(?:sk|pk|rk)[-_](?:live|test|proj|ant|or)?[-_]?[A-Za-z0-9_-]{16,}"),
    ("google-api-key", _START + r"AIza[0-9A-Za-z_-]{35}\b"),
    ("npm-token", _START + r"npm_[A-Za-z0-9]{36}\b"),
    ("huggingface-token", _START + r"hf_[A-Za-z0-9]{30,}\b"),
    ("sendgrid-key", _START + r"SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),
    ("twilio-api-key", _START + r"SK[0-9a-fA-F]{32}\b"),
    ("discord-bot-token", r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}"),
    ("azure-account-key", r"((?i:account[_-]?key|shared[_-]?access[_-]?key)[ \t]*=[ \t]*)[A-Za-z0-9+/=]{8,}"),
    ("azure-sas-signature", r"((?:^|[?&;\s\"'])sig=)[A-Za-z0-9%+/=_-]{8,}"),
    # Header text: "Cookie: a=b; c=d", "Set-Cookie: …", "Authorization: Bot …", '"x-api-key": "…"'
    (
        "secret-header",
        r"("
        + _HEADERS
        + r"\\{0,3}[\"']?[ \t]*:[ \t]*(?:(?i:bearer|basic|digest|token|bot)[ \t]+)?)"
        + _QUOTED
        + r"[^\"'\s][^\r\n]*)",
    ),
    # key = value, key: value, "key": "value" (JSON text), key: 'value' (YAML), key := value
    ("secret-assignment", r"(" + _KEY_WORDS + r"\\{0,3}[\"']?\s*[=:]{1,3}>?\s*)" + _QUOTED + r"[^\s&;,\"']+)"),
)
DEFAULT_PATTERNS: tuple[str, ...] = tuple(pattern for _, pattern in DEFAULT_RULES)


def _key_assignment(keys: Iterable[str]) -> str | None:
    """A value rule for ``[redact] keys`` written in text (``"key": "value"``, ``key=value``), as
    ``secret-assignment`` is for the built-in key words (None: no key names anything in text). A key is read as
    fnmatch reads it (``*``, ``?``, ``[...]``, ``[!...]``), a wildcard standing for at most 64 name characters, so
    that the rule takes time linear in the text; a key that is only wildcards names no text."""
    names = [key_in_text(key) for key in keys if key.strip("*?")]
    if not names:
        return None
    return r"((?i:" + "|".join(names) + r")\\{0,3}[\"']?\s*[=:]{1,3}>?\s*)" + _QUOTED + r"[^\s&;,\"']+)"


assert len(GATES) == len(DEFAULT_RULES)  # one gate a rule (tapetui.core.redactgates), in their order

_MEMO_MAX = 1 << 18  # characters: a longer text is not remembered (a big result is not kept alive by the redactor)
_MEMO_BYTES = 4 << 20  # the memory a redactor's remembered texts and their redacted forms may take ...
_MEMO_TEXTS = 20_000  # ... and how many: past either, it forgets them all
_UNSEEN: Any = object()


def _json_like(text: str) -> bool:
    head = text[:1]
    if head.isspace():
        head = text.lstrip()[:1]
    return head == "{" or head == "["


def _words(key: str) -> list[str]:
    return [w.lower() for w in _WORD_SPLIT.split(key) if w]


class Redactor:
    """Replaces secrets with ``[REDACTED]`` in nested JSON-like data.

    What is redacted: the value of a dict key whose name says it is secret (token, password,
    api_key, ... and the configured ``keys``); every substring of a string that a value rule
    matches (the defaults in :data:`DEFAULT_RULES` and the configured ``patterns``); a dict key
    that is itself a secret by a value rule (``{"sk-ant-…": 1}``), renamed ``[REDACTED]``,
    ``[REDACTED#2]``, ... (numbered in the sorted order of the original keys, skipping names
    the dict already has, so equal dicts get equal names); and JSON text inside a string
    (``'{"api_key": "…"}'``), decoded and redacted by the same rules. Redacting twice changes
    nothing more than redacting once.

    Args:
        keys: extra key names (case-insensitive, ``fnmatch`` globs allowed) whose values are secret.
        patterns: extra regular expressions for secret values inside strings (group 1, if any, is kept).
        defaults: keep the built-in key words and value rules (on by default).
    """

    def __init__(self, keys: Iterable[str] = (), patterns: Iterable[str] = (), *, defaults: bool = True) -> None:
        self._defaults = defaults
        self._extra_keys = tuple(k.lower() for k in keys)
        self._extra_patterns = tuple(patterns)
        rules = list(DEFAULT_RULES) if defaults else []
        user = list(self._extra_patterns)
        self._rules: list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]]] = []
        self._rules += [(name, re.compile(p), _keep_groups) for name, p in rules]
        self._rules += [(f"config-pattern-{i + 1}", re.compile(p), _keep_prefix) for i, p in enumerate(user)]
        in_text = _key_assignment(self._extra_keys)  # keys in text that is no JSON document (JSON Lines, a log line)
        if in_text is not None:
            user.append(in_text)
            self._rules.append(("config-key-in-text", re.compile(in_text), _keep_groups))
        self._patterns = [pat for _, pat, _ in self._rules]
        try:  # one combined pass over a string for the user's patterns
            self._user: re.Pattern[str] | None = re.compile("|".join(f"(?:{p})" for p in user)) if user else None
        except re.error:  # a user pattern with global flags cannot be combined
            self._user = re.compile(".") if user else None
        self._key_cache: dict[Any, int] = {}
        # texts redacted before (a conversation's history comes again in each later turn's request):
        # text → its redacted form, None when it has no secret. A cache of a pure function of the text (the rules
        # never change), so sharing it between threads can only miss; bounded by the memory it holds.
        self._text_memo: dict[str, str | None] = {}
        self._memo_bytes = 0
        self._counts: Counter[str] | None = None

    @property
    def is_default(self) -> bool:
        """Whether these are exactly the built-in rules (nothing configured)."""
        return self._defaults and not self._extra_keys and not self._extra_patterns

    def counting(self) -> Redactor:
        """A redactor with the same rules that counts what it removes, by rule name (see :attr:`counts`)."""
        twin = Redactor(self._extra_keys, self._extra_patterns, defaults=self._defaults)
        twin._counts = Counter()
        twin._rules = [(name, pat, _counted(twin._counts, name, keep)) for name, pat, keep in twin._rules]
        return twin

    @property
    def counts(self) -> Counter[str]:
        """What a :meth:`counting` redactor removed so far: rule name → count (never the secrets)."""
        return self._counts if self._counts is not None else Counter()

    # ---- keys --------------------------------------------------------------------
    def is_secret_key(self, key: str) -> bool:
        """Whether a dict key's value must be redacted."""
        return bool(self._key_class(key) & _VALUE)

    def is_secret_text(self, text: str) -> bool:
        """Whether a value rule finds a secret in ``text`` (then, as a dict key, it is renamed)."""
        return self._scrub_text(text, count=False) != text if self._may_hold(text) else False

    def _key_class(self, key: Any) -> int:
        """``_VALUE`` when the key's value is secret, ``_ITSELF`` when the key is a secret; cached."""
        hit = self._key_cache.get(key)
        if hit is None:
            hit = 0
            if isinstance(key, str):
                hit = (_VALUE if self._classify(key) else 0) | (_ITSELF if self.is_secret_text(key) else 0)
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
        secret = [w for w in words if w in _SECRET_WORDS]
        if secret and not (secret == ["token"] and any(w in _TOKEN_COUNT_WORDS for w in words)):
            return True
        joined = "".join(words)
        if joined in _SECRET_WORDS or joined.endswith(("apikey", "secretkey", "privatekey", "accesskey")):
            return True
        return any(pair in _SECRET_PAIRS for pair in zip(words, words[1:], strict=False))

    def renamed_keys(self, keys: Iterable[Any]) -> dict[str, str]:
        """New names for the keys of one dict that are secrets themselves (see the class doc)."""
        keys = list(keys)
        secret = sorted(k for k in keys if type(k) is str and self._key_class(k) & _ITSELF)
        taken = {str(k) for k in keys if not (type(k) is str and self._key_class(k) & _ITSELF)}
        out: dict[str, str] = {}
        n = 0
        for k in secret:
            while True:
                n += 1
                name = REDACTED if n == 1 else f"[REDACTED#{n}]"
                if name not in taken:
                    break
            out[k] = name
            if self._counts is not None:
                self._counts["secret-dict-key"] += 1
        return out

    # ---- text --------------------------------------------------------------------
    def _may_hold(self, text: str) -> bool:
        if self._defaults and may_hold_default_secret(text):
            return True
        if self._user is not None and self._user.search(text) is not None:
            return True
        return (
            (self._defaults or bool(self._extra_keys))
            and _json_like(text)
            and (bool(self._extra_keys) or may_hold_secret_key(text))
        )

    def redact_text(self, text: str) -> str:
        """Redact secret-shaped substrings of one string (and secrets in JSON text it holds).

        A secret written with escapes (``sk%2Dproj…`` in a URL, ``\\u0073k-…`` in JSON text inside a string,
        ``pass%77ord=…``) is found in the text with its ``%XX`` and ``\\uXXXX`` escapes decoded; then the
        text is kept decoded, the secret redacted (the escapes are lost only where a secret hid behind them)."""
        if len(text) < 20 and self._user is None and text.isalnum():  # the hot path: a short word or number
            return text
        count = self._counts is not None
        # Remembered: plain text only. A str subclass may hash and compare as another text does; JSON text is walked
        # as data each time (a conversation's JSON arguments are seldom repeated whole).
        memo = type(text) is str and len(text) <= _MEMO_MAX and not count and not _json_like(text)
        if memo:
            known = self._text_memo.get(text, _UNSEEN)
            if known is not _UNSEEN:
                return text if known is None else known  # the text itself: unchanged parts are shared, not copied
        out = self._scrub_text(text, count=count) if self._may_hold(text) else text
        decoded = plain(out)
        if decoded is not out:
            memo = memo and not _json_like(decoded)
            if self._may_hold(decoded):
                red = self._scrub_text(decoded, count=count)
                if red != decoded:
                    out = red
        if memo:
            kept = None if out == text else out
            size = sys.getsizeof(text) + (0 if kept is None else sys.getsizeof(kept))
            if self._memo_bytes + size > _MEMO_BYTES or len(self._text_memo) >= _MEMO_TEXTS:
                self._text_memo, self._memo_bytes = {}, 0
            self._text_memo[text] = kept
            self._memo_bytes += size
        return out

    def _scrub_text(self, text: str, count: bool) -> str:
        if _json_like(text):
            text = self._json_text(text, count)
        rules = self._rules if count else self._quiet_rules()
        n = len(DEFAULT_RULES) if self._defaults else 0
        folded: str | None = None  # fold(text), once a rule needs it
        for (_, pat, keep), (exact, any_case, probe) in zip(rules[:n], GATES, strict=False):
            for needle in exact:
                if needle in text:
                    break
            else:
                if any_case:
                    if folded is None:
                        folded = fold(text)
                    if not any(needle in folded for needle in any_case):
                        continue
                elif not (probe and len(text) >= PROBE_MIN and PROBE.search(text)):
                    continue
            new = pat.sub(keep, text)
            if new != text:
                text, folded = new, None
        if n < len(rules) and self._user is not None and self._user.search(text):
            for _, pat, keep in rules[n:]:
                text = pat.sub(keep, text)
        return text

    def _quiet_rules(self) -> list[tuple[str, re.Pattern[str], Callable[[re.Match[str]], str]]]:
        if self._counts is None:
            return self._rules
        return [(n, p, _keep_prefix if n.startswith("config-pattern-") else _keep_groups) for n, p, _ in self._rules]

    def _json_text(self, text: str, count: bool) -> str:
        """JSON text inside a string, redacted as data: its keys' words count, not only value shapes."""
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError as e:  # not JSON: the value rules run over the text
            if str(e).startswith("depth limit"):
                return self._too_deep(count)
            if "\n" in text:  # JSON Lines: each line that is a document is redacted as data
                lines = "\n".join(self._json_text(ln, count) if _json_like(ln) else ln for ln in text.split("\n"))
                return text if lines == text else lines  # unchanged: the text itself, as callers tell by identity
            return text
        if not isinstance(obj, (dict, list)):
            return text
        try:
            return self._walk_text(text, obj, self._counts if count else None)
        except (RecursionError, TooDeep):  # deeper than a whole stack of its own walks: whatever the caller's stack
            return self._too_deep(count)

    def _walk_text(self, text: str, obj: Any, counts: Counter[str] | None) -> str:
        """``text`` (JSON, its value ``obj``) redacted as data, its redactions added to ``counts``; where the
        caller's stack runs out, done again on a stack of its own (:mod:`tapetui.core.freshstack`): what is kept of
        a text (and the key of a call that holds it) never depends on how deep the caller was."""

        def walk() -> str:
            before = self._counts
            self._counts = Counter() if counts is not None else None
            try:
                red, made = self._redact(obj), self._counts
            finally:
                self._counts = before
            if red is obj:
                return text
            if counts is not None:
                counts.update(made or ())
                counts["json-text"] += 1
            return dumps(red).decode()  # canon's: any depth (orjson refuses past 254 levels)

        try:
            return walk()
        except (RecursionError, TooDeep):  # TooDeep: writing it back (canon's dumps) ran out of stack
            return on_fresh_stack(walk)

    def _too_deep(self, count: bool) -> str:
        """What is kept of JSON text nested deeper than it can be read as data: nothing (a key's value is a secret
        by its key's name, which no rule over the text sees)."""
        if count and self._counts is not None:
            self._counts["json-text"] += 1
        return TOO_DEEP_TEXT

    # ---- values ------------------------------------------------------------------
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
            out: dict[Any, Any] | None = None  # a copy once a value changes: most values have no secret
            cache, text, kclass = self._key_cache, self.redact_text, self._key_class
            for n, (k, v) in enumerate(value.items()):  # n: the keys before this one
                c = cache.get(k)
                if c is None:
                    c = kclass(k)
                if c & _ITSELF:  # a key that is a secret: rename (all keys of this dict take part)
                    return self._redact_renaming(value)
                tv = type(v)
                if v is None or tv is int or tv is bool or tv is float:  # leaves inline: no call per leaf
                    nv: Any = REDACTED if v is not None and c else v
                elif c:
                    nv = REDACTED if v != REDACTED else v
                else:
                    nv = text(v) if tv is str else self._redact(v)
                if out is not None:
                    out[k] = nv
                elif nv is not v:
                    out = dict(islice(value.items(), n))
                    out[k] = nv
                if nv is not v and c and self._counts is not None and v != REDACTED:
                    self._counts["secret-key-name"] += 1
            return value if out is None else out
        if isinstance(value, (list, tuple)):
            if len(value) == 2 and _secret_pair(self, value):
                if self._counts is not None and value[1] != REDACTED:
                    self._counts["secret-key-name"] += 1
                return [self.redact_text(value[0]), REDACTED]
            text = self.redact_text
            items: list[Any] | None = None  # a copy once an item changes (a comprehension and a zip cost ~3 µs a list)
            for i, v in enumerate(value):
                tv = type(v)
                if v is None or tv is int or tv is bool or tv is float:
                    nv = v
                elif tv is str:
                    nv = text(v)
                else:
                    nv = self._redact(v)
                if items is not None:
                    items.append(nv)
                elif nv is not v:
                    items = list(value[:i])
                    items.append(nv)
            return value if items is None else items
        return value

    def _redact_renaming(self, value: dict[Any, Any]) -> dict[Any, Any]:
        names = self.renamed_keys(value)
        out: dict[Any, Any] = {}
        for k, v in value.items():
            c = self._key_class(k)
            if v is not None and c & _VALUE:
                if self._counts is not None and v != REDACTED:
                    self._counts["secret-key-name"] += 1
                nv: Any = REDACTED
            else:
                nv = self._redact(v)
            out[names.get(k, k)] = nv
        return out

    def canon_form(self, value: Any) -> Any:
        """``canon(self.redact(value))`` in one pass, with dict keys left in their order.

        The replay hot path hashes this with :func:`tapetui.core.canon.canonical_json`, which
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
            cache, kclass = self._key_cache, self._key_class
            names: dict[str, str] | None = None
            for k, v in value.items():
                c = cache.get(k)
                if c is None:
                    c = kclass(k)
                if c & _ITSELF:
                    if names is None:
                        names = self.renamed_keys(value)
                    k = names[k]
                if v is None:  # canon drops None values (a redacted None stays None)
                    continue
                if c & _VALUE:
                    out[str(k)] = REDACTED
                    if self._counts is not None and v != REDACTED:
                        self._counts["secret-key-name"] += 1
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
            if len(value) == 2 and _secret_pair(self, value):
                if self._counts is not None and value[1] != REDACTED:
                    self._counts["secret-key-name"] += 1
                return [self.redact_text(value[0]).strip(), REDACTED]
            return [self._canon_form(v) for v in value]
        # subclasses, sets (never redacted), and type errors: the two-pass form
        return canon(self.redact(value))


def _secret_pair(r: Redactor, pair: Any) -> bool:
    """``["Cookie", "sid=…"]``: a name/value pair (headers as a list of pairs) whose name is secret."""
    name, value = pair[0], pair[1]
    if type(name) is not str or value is None:
        return False
    return bool(r._key_class(plain(name)) & _VALUE)  # a name written with escapes read as redact_text reads it


_VALUE = 1  # a key class bit: the key's value is secret
_ITSELF = 2  # a key class bit: the key is a secret itself


def _keep_prefix(m: re.Match[str]) -> str:
    """A configured pattern: its first captured group is kept (only that: other groups may hold the secret)."""
    prefix = next((g for g in m.groups() if g), "")
    return prefix + REDACTED


def _keep_groups(m: re.Match[str]) -> str:
    """A built-in rule: every group it captured is a prefix to keep ('password: "', 'Bearer ')."""
    return "".join(g for g in m.groups() if g) + REDACTED


def _counted(counts: Counter[str], name: str, keep: Callable[[re.Match[str]], str]) -> Callable[[re.Match[str]], str]:
    def sub(m: re.Match[str]) -> str:
        out = keep(m)
        if out != m.group(0):
            counts[name] += 1
        return out

    return sub


DEFAULT_REDACTOR = Redactor()
