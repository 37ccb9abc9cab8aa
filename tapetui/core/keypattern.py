"""A ``[redact] keys`` pattern (fnmatch's: ``*``, ``?``, ``[...]``, ``[!...]``) as a pattern over text.

The key names a secret by its name in data; in text that is no JSON document (JSON Lines, a log line) the same name is
found as a word (:func:`tapetui.core.redact.Redactor` builds its rule from these). A wildcard stands for at most 64
name characters: the rule's time stays linear in the text, whatever the keys.
"""

from __future__ import annotations

import re

__all__ = ["key_in_text"]


def _class_start(key: str, i: int) -> int:
    """Where the closing ``]`` of a class opened just before ``i`` is looked for: past a ``!`` and a ``]`` first."""
    if key[i : i + 1] == "!":
        i += 1
    return i + 1 if key[i : i + 1] == "]" else i


def key_in_text(key: str) -> str:
    """One key of ``[redact] keys`` as a pattern over text: a name that starts where a word starts (a ``*`` first:
    anywhere), as fnmatch reads it."""
    out, i = [], 0
    if not key.startswith("*"):
        out.append(r"(?<![A-Za-z0-9_])")
    key = key.lstrip("*")
    while i < len(key):
        c = key[i]
        i += 1
        if c == "*":
            out.append(r"[\w.-]{0,64}")
        elif c == "?":
            out.append(r"[\w.-]")
        elif c == "[" and (end := key.find("]", _class_start(key, i))) != -1:  # a class, as fnmatch finds its end
            negated = key[i : i + 1] == "!"
            body = re.escape(key[i + negated : end]).replace(r"\-", "-")  # a range stays one
            out.append(("[^" if negated else "[") + body + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
    return "".join(out)
