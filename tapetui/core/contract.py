"""A recorded call's tool contract against the live tool's: the fingerprint, in the form it was recorded in.

Before a recorded call is replayed, the fingerprint on the tape is compared with the registered tool's
(DESIGN §3). A tape recorded in fingerprint form 1 is verified in form 1, a newer one in its own form
(see :mod:`tapetui.core.fingerprint`); a change is explained from the two manifests when the tape holds
the old one.
"""

from __future__ import annotations

from dataclasses import dataclass

from tapetui.core.errors import TapeError
from tapetui.core.fingerprint import FORMS, LATEST_FORM, ToolManifest, explain_manifest_change, in_form
from tapetui.core.redact import Redactor
from tapetui.core.registry import Tool

__all__ = ["ContractChange", "contract_change"]


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
    explanation = explain_manifest_change(old, expected, redactor)
    if (
        form == 1
        and old is not None
        and old.form == 1
        and in_form(old, LATEST_FORM, redactor).fingerprint == live.manifest_for(LATEST_FORM, redactor).fingerprint
    ):
        explanation.append(
            "only secret-looking values changed: this tape was recorded in fingerprint form 1, which "
            "hashes them verbatim; `tapetui scrub` (or re-recording) moves it to form 2, where "
            "rotating a key is not a contract change"
        )
    return ContractChange(recorded, expected.fingerprint, form, explanation)
