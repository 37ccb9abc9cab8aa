"""A recorded call's tool contract against the live tool's: the fingerprint, in the form it was recorded in.

Before a recorded call is replayed, the fingerprint on the tape is compared with the registered tool's
(``docs/format.md``, "Verifying an older form"). A tape recorded in fingerprint form 1 is verified in form 1,
a newer one in its own form (see :mod:`tapetui.core.fingerprint`); a change is explained from the two
manifests when the tape holds the old one. Fields tapes.toml ignores (``[fingerprint] ignore``) are removed
from both manifests before they are compared; the stored fingerprint is never touched, so editing that list
never turns a tape red.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from tapetui.core.errors import TapeError
from tapetui.core.fingerprint import FORMS, ToolManifest, explain_manifest_change, in_form, without_ignored
from tapetui.core.jsondiff import IgnoreRules
from tapetui.core.redact import Redactor
from tapetui.core.registry import Tool

__all__ = ["ContractChange", "contract_change", "ignore_rules"]


@dataclass(frozen=True, slots=True)
class ContractChange:
    """The live tool's contract is not the recorded one.

    Attributes:
        recorded: the fingerprint on the tape.
        live: the live tool's fingerprint in the recorded form.
        form: the fingerprint form the call was recorded in.
        explanation: what changed between the manifests, one line each (empty when the old one is unknown).
    """

    recorded: str
    live: str
    form: int
    explanation: list[str]


def contract_change(
    live: Tool,
    recorded: str,
    *,
    form: int,
    old: ToolManifest | None,
    redactor: Redactor,
    where: str,
    ignore: tuple[str, ...] = (),
) -> ContractChange | None:
    """None when ``live`` has the ``recorded`` fingerprint in fingerprint form ``form``, else what changed.

    Args:
        live: the registered tool, as the tape writes it (:func:`tapetui.core.live.tool_as_written`).
        recorded: the call's fingerprint on the tape.
        form: the form it was computed in (the tape's tool line says; 1 when it does not).
        old: the tape's manifest of the tool (any; it explains the change only when its fingerprint is
            ``recorded``).
        redactor: the tape's redaction rules (form 2 hashes what they redact).
        where: ``path:line`` of the call, for the error.
        ignore: manifest field patterns to leave out of the comparison (``Config.fingerprint_ignore(tool)``).
            They apply only when the tape holds the recorded manifest: without it, any difference is a change.

    Raises:
        TapeError: the call was recorded in a form this version of tapetui does not know.
    """
    if form not in FORMS:
        raise TapeError(
            f"{where}: {live.name} was recorded with fingerprint form {form}, "
            f"which this version of tapetui does not know (it knows {', '.join(map(str, FORMS))})"
        )
    expected = live.manifest_for(form, redactor)
    if expected.fingerprint == recorded:
        return None
    old = old if old and old.fingerprint == recorded else None
    if ignore and old is not None:
        rules = ignore_rules(ignore)
        old_kept, live_kept = without_ignored(old, rules), without_ignored(expected, rules)
        if old_kept.fingerprint == live_kept.fingerprint:
            return None
        explanation = explain_manifest_change(old_kept, live_kept, redactor)  # ignored fields are not news
    else:
        explanation = explain_manifest_change(old, expected, redactor)
    if (
        form == 1
        and old is not None
        and old.form == 1
        and in_form(old, 2, redactor).fingerprint == live.manifest_for(2, redactor).fingerprint
    ):
        explanation.append(
            "only secret-looking values changed: this tape was recorded in fingerprint form 1, which "
            "hashes them verbatim; `tapetui scrub` moves it to form 2 (re-recording, to form 3), where "
            "rotating a key is not a contract change"
        )
    return ContractChange(recorded, expected.fingerprint, form, explanation)


@lru_cache(maxsize=64)
def ignore_rules(patterns: tuple[str, ...]) -> IgnoreRules:
    """Rules for manifest field patterns (``schema.properties.*.title``), as ``[diff] ignore`` matches paths."""
    return IgnoreRules(patterns, volatile=False)
