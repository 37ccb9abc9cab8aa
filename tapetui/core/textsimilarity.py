"""The built-in text similarity of ``{ similarity = 0.8 }`` rules: the cosine of character-trigram counts
(why, and what it cannot see: :mod:`tapetui.core.comparators`), its bound on a tape's text, and the check
of numbers and negations that runs before it.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from tapetui.core.errors import TapeError
from tapetui.core.shown import shown_number

__all__ = ["SIMILARITY_MAX_CHARS", "TooLongToCompare", "meaning_changed", "similarity"]

_FOLD = re.compile(r"[\W_]+", re.UNICODE)


SIMILARITY_MAX_CHARS = 1_000_000
"""The longest pair of texts the built-in similarity compares (a hostile tape's 5 MB answer would take seconds
and hundreds of MB): longer ones are that comparison's error; name a hook or compare them exactly."""


class TooLongToCompare(TapeError, ValueError):
    """Two texts together longer than :data:`SIMILARITY_MAX_CHARS` for the built-in similarity (a
    :class:`ValueError` too, as it always was)."""


def similarity(a: str, b: str) -> float:
    """The built-in text similarity in [0, 1]: cosine of character-trigram counts (see the module doc).

    Raises:
        TooLongToCompare: the two texts are together longer than :data:`SIMILARITY_MAX_CHARS`.
    """
    if a == b:
        return 1.0
    if len(a) + len(b) > SIMILARITY_MAX_CHARS:
        raise TooLongToCompare(
            f"{len(a) + len(b):,} characters, more than the built-in similarity compares ({SIMILARITY_MAX_CHARS:,})"
        )
    ca, cb = _trigrams(a), _trigrams(b)
    if not ca or not cb:
        return 0.0
    if len(ca) > len(cb):
        ca, cb = cb, ca
    dot = sum(n * cb.get(g, 0) for g, n in ca.items())
    norm = math.sqrt(sum(n * n for n in ca.values())) * math.sqrt(sum(n * n for n in cb.values()))
    return min(1.0, dot / norm) if norm else 0.0  # rounding may land a hair above 1


def _trigrams(text: str) -> Counter[str]:
    # Trigrams never cross a word (each is padded by a space), so each distinct word is cut once and its
    # trigrams counted as often as it occurs: natural text repeats words, a megabyte answer is quick.
    out: Counter[str] = Counter()
    for word, n in Counter(_FOLD.sub(" ", text.lower()).split()).items():
        w = f" {word} "
        for i in range(len(w) - 2):
            out[w[i : i + 3]] += n
    return out


# ---- what the built-in similarity cannot see: numbers and negations -----------------------------------
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:[.,]\d+)*|\d+(?:[.,]\d+)*")  # a minus only where it is a sign
_NEGATIONS = frozenset({"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot"})


def meaning_changed(a: str, b: str) -> str | None:
    """Why two texts cannot be a rewording of each other however alike their wording, or None: other numbers
    (``1,250,000`` → ``125,000``), or a negation one has and the other lacks (``approved`` → ``not approved``).
    What the built-in similarity cannot see (``approved`` → ``denied``) needs a judge."""
    a, b = a.replace("\u2019", "'"), b.replace("\u2019", "'")  # a typographic apostrophe: don’t is don't
    na, nb = _numbers(a), _numbers(b)
    if sorted(na) != sorted(nb):
        shown_a, shown_b = ", ".join(map(shown_number, na)) or "none", ", ".join(map(shown_number, nb)) or "none"
        return f"the numbers differ ({shown_a} → {shown_b})"
    wa, wb = _words(a), _words(b)
    neg_a = sum(1 for w in wa if w in _NEGATIONS or w.endswith("n't"))
    neg_b = sum(1 for w in wb if w in _NEGATIONS or w.endswith("n't"))
    if neg_a != neg_b:
        return f"a negation differs ({neg_a} → {neg_b})"
    return None


def _numbers(text: str) -> list[float]:
    """The numbers of a text as values (``3.0`` is ``3``; ``1,250,000`` is 1250000)."""
    out = []
    for n in _NUMBER.findall(text):
        try:
            out.append(float(n.replace(",", "")))
        except ValueError:  # "1.2.3": a version, compared as written
            out.append(float(sum(ord(c) for c in n)))
    return out


def _words(text: str) -> list[str]:
    return re.findall(r"[\w']+", text.lower())
