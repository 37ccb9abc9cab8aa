"""The decision for one request at a boundary: served from the tape, a drift, a miss, or run live.

A *boundary* is where a session meets the world: today a tool call, next a model turn. Each request
at a boundary has a kind-specific payload but the same shape for deciding: its step ``seq``, the name
it is for (the tool's), its **key** (``<name>:`` + a hash of its redacted, canonical payload:
:mod:`tapetui.core.keys`), the redacted payload itself, and optionally its place (``order``). Deciding
needs nothing else, so nothing here knows what a tool is:

- :class:`Decider` judges a request against the golden's recordings (:class:`~tapetui.core.matching.Matcher`,
  the matching rules), the overrides a test set, the calls an earlier fill ran live
  (:class:`~tapetui.core.fill.Filled`) and the session's tolerance rules (:class:`Tolerance`), and
  returns a :class:`Decision` value. It consumes the recording it chose from the earlier fill only;
  a golden recording is marked used when the decision is served.
- The tape then *serves* the decision: a hit returns the recorded outcome (after the kind's own
  checks: a tool's fingerprint, an expiry), a drift or a miss is logged and raised (or, in a fill, the
  miss runs live), a tolerated hit is served and logged with its excuses.

How a new boundary kind plugs in (see ``docs/architecture.md``, "Adding a boundary kind"): its lines
carry a key made by :mod:`tapetui.core.keys` with its own prefix, so keys of two kinds never collide and
one index and one :class:`Matcher` hold both; its front (a ``Tape`` method, like ``call``) builds the
redacted payload and key, asks :meth:`Decider.decide`, and serves the decision with the shared run-log
events (``hit``, ``drift``, ``miss``, ``live``, ``record``), the shared fill candidate
(:class:`~tapetui.core.fill.FillCandidate`) and the shared live-call object
(:class:`~tapetui.core.live.LiveStep`). Review reads the same events and lines, so a new kind is
compared, reported and accepted without new review code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from tapetui.core.canon import canon
from tapetui.core.comparators import Rules
from tapetui.core.config import Config
from tapetui.core.errors import TapeError
from tapetui.core.fill import Filled
from tapetui.core.jsondiff import IgnoreRules, diff_parts
from tapetui.core.matching import DRIFT, HIT, MISS, OPEN_UNPLACED, Matcher
from tapetui.core.paths import join
from tapetui.core.redact import Redactor

__all__ = ["Decider", "Decision", "DecisionKind", "Tolerance"]

DecisionKind = Literal["hit", "tolerated", "drift", "miss", "override", "earlier_fill"]
"""``hit``: a recording with the request's key, served; ``tolerated``: one whose differences the session's rules
all excuse, served; ``drift``: the recording this request is, with other content, raised; ``miss``: nothing on
the tape is this request, raised in replay and run live in fill; ``override``: the test replaced this step's
outcome (``Tape.override``); ``earlier_fill``: served from what an earlier, unreviewed fill ran live."""

Decision = tuple[DecisionKind, int | None, list[dict[str, Any]] | None]
"""What to do with one request, ``(kind, at, excuses)`` (a plain tuple: the hit path builds it per call).

- ``kind``: a :data:`DecisionKind`.
- ``at``: the recording it names: the golden's index for ``hit``, ``tolerated``, ``drift`` and ``override``
  (None when the overridden step is not on the tape), the earlier fill's index for ``earlier_fill``; None for
  ``miss``.
- ``excuses``: ``tolerated``: the differences the rules excused, each ``{"path", "rule", "text"}``; ``drift``:
  those they excused (the others were not); else None.
"""

_MISS: Decision = ("miss", None, None)


class Decider:
    """Decides requests against one golden (``matcher`` None when there is none yet).

    Args:
        overrides: the steps a test replaced (the tape's own dict: later overrides count).
        earlier_fill: fill only, the calls an earlier unreviewed fill ran live.
        recorded_under: the contract fingerprint a request of this name must have been recorded under to be
            served from the earlier fill (None: any).
        expired: whether an ``expires_at`` stamp has passed.
        tolerance: the session's tolerance rules (None: nothing is tolerated).
    """

    __slots__ = ("_earlier", "_expired", "_overrides", "_recorded_under", "matcher", "tolerance")

    def __init__(
        self,
        matcher: Matcher | None,
        *,
        overrides: dict[int, Any],
        earlier_fill: Filled | None,
        recorded_under: Callable[[str], str | None],
        expired: Callable[[str], bool],
        tolerance: Tolerance | None,
    ) -> None:
        self.matcher = matcher
        self._overrides = overrides
        self._earlier = earlier_fill
        self._recorded_under = recorded_under
        self._expired = expired
        self.tolerance = tolerance

    def decide(
        self, seq: int, name: str, key: str, redacted: Any, place: bytes | None, alone: bool, pos: int | None = None
    ) -> Decision:
        """The decision for request ``seq`` (``place``: its order's canonical JSON; ``alone``: no other request
        of this tape is running live; ``pos``: its position among the requests of its kind, ``seq`` when None:
        a session's model turns take steps too). The caller holds the tape's lock."""
        m = self.matcher
        if m is None:
            verdict, j = OPEN_UNPLACED, -1
        else:
            hit = m.used.take(key) if place is None else None  # the common hit, first: decided here
            if hit is not None and not self._overrides:
                return ("hit", hit, None)
            verdict, j = (HIT, hit) if hit is not None else m.judge(name, key, place)
        if self._overrides and seq in self._overrides:
            return ("override", j if verdict == HIT else None, None)
        if verdict == HIT:
            return ("hit", j, None)
        if verdict == MISS:
            return _MISS
        if verdict != DRIFT:  # no recording with this key and none at its place: which one it drifted from
            earlier = self.from_earlier_fill(name, key)
            if earlier is not None:
                return earlier
            target = None
            if m is not None:
                target = m.drift_target(
                    name,
                    seq if pos is None else pos,
                    redacted,
                    alone=alone and place is None,
                    unplaced=verdict == OPEN_UNPLACED,
                )
            if target is None:
                return _MISS
            j = target
        if self.tolerance is not None:
            excuses, excused = self.tolerance.judge(name, redacted, j)
            if excuses is not None:
                return ("tolerated", j, excuses)
            return ("drift", j, excused)
        return ("drift", j, None)

    def from_earlier_fill(self, name: str, key: str) -> Decision | None:
        """Request ``key`` served from what an earlier fill ran live (taken from it), or None."""
        if self._earlier is None:
            return None
        a = self._earlier.take(key, self._expired, self._recorded_under(name))
        return None if a is None else ("earlier_fill", a, None)


class Tolerance:
    """Whether a request may be served a recording whose key differs: the session's ``[compare.rules]`` and
    ``[diff] ignore`` (without the volatile defaults: an argument named ``date`` selects data) excuse every
    difference between the two payloads. Looked up once, on the first request that needs it."""

    __slots__ = ("_found", "_matcher", "_redactor", "config", "dimension", "session")

    def __init__(
        self, config: Config, session: str, redactor: Redactor, matcher: Matcher, *, dimension: str = "args"
    ) -> None:
        self.config = config
        self.session = session
        self.dimension = dimension
        self._redactor = redactor
        self._matcher = matcher
        self._found: tuple[Rules | None, IgnoreRules] | None = None

    def rules(self) -> tuple[Rules | None, IgnoreRules]:
        """The rules that may excuse a request's differences; None when there are none."""
        found = self._found
        if found is None:
            settings = self.config.compare_for(self.session)
            ignore = self.config.replay_ignore()
            found = self._found = (settings.rules if settings.rules or ignore.patterns else None, ignore)
        return found

    def judge(self, name: str, redacted: Any, j: int) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]]]:
        """``(excuses, [])`` when every difference from recording ``j`` is excused, else ``(None, the differences
        that were excused)``. No difference at all (a tape written under older redaction rules, a hand edit)
        excuses nothing: that stays a drift."""
        rules, ignore = self.rules()
        if rules is None:
            return None, []
        dim = self.dimension
        try:
            recorded = canon(self._redactor.redact(self._matcher.index.record(j, self._matcher.fh).args))
            judged = rules.judge(dim, recorded, redacted, tool=name, hooks=None, ignore=ignore)
            excused = [e.to_json(dim) for e in judged.excused]
            if not judged.ok:
                return None, excused
            if ignore.patterns:  # what [diff] ignore left out of the comparison is excused too: say so
                excused += [
                    {"path": join(parts, dim), "rule": "ignore", "text": "ignored ([diff] ignore)"}
                    for parts, _ in diff_parts(recorded, redacted)
                    if ignore.ignores(parts)
                ]
        except TapeError:  # nested too deeply to compare: the drift says so
            return None, []
        if not excused:
            return None, []
        excused.sort(key=lambda e: str(e["path"]))
        return excused, []
