"""Call keys: ``"<tool>:" + sha256(canonical JSON of canon(redacted args))[:12]``.

The form is specified in ``docs/format.md`` ("The call key").
"""

from __future__ import annotations

import hashlib
from typing import Any

from tapetui.core.canon import canon, canonical_json
from tapetui.core.redact import DEFAULT_REDACTOR

__all__ = ["call_key", "key_of", "key_of_json"]


def call_key(tool: str, args: Any) -> str:
    """``"<tool>:" + sha256(canonical JSON of canon(redacted args))[:12]``.

    Arguments are redacted with the default rules first (idempotent, so keys of
    args that a tape already redacted with wider rules are unchanged).
    """
    return key_of_json(tool, canonical_json(canon(DEFAULT_REDACTOR.redact(args))))


def key_of(tool: str, redacted_args: Any) -> str:
    """The call key of arguments that are already redacted (see :func:`call_key`)."""
    return key_of_json(tool, canonical_json(canon(redacted_args)))


def key_of_json(tool: str, args_json: bytes) -> str:
    """The call key of arguments already in canonical JSON: the one place the key's form is written."""
    return f"{tool}:{hashlib.sha256(args_json).hexdigest()[:12]}"
