"""Bounded text diffs: always correct, exact where cheap, coarser (and saying so) beyond."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from hypothesis import given
from hypothesis import strategies as st

from tapetui.review.textdiff import Op, diff_lines, diff_text


def applied(a: Sequence[str], b: Sequence[str], ops: Sequence[Op]) -> list[str]:
    """``b`` rebuilt from ``a`` and the opcodes, checking that they tile both sides in order."""
    out: list[str] = []
    i = j = 0
    for tag, i1, i2, j1, j2 in ops:
        assert (i1, j1) == (i, j) and i1 <= i2 and j1 <= j2 and tag in ("equal", "replace", "delete", "insert")
        if tag == "equal":
            assert list(a[i1:i2]) == list(b[j1:j2])
        out += list(b[j1:j2])
        i, j = i2, j2
    assert (i, j) == (len(a), len(b))
    return out


def words(n: int, seed: int) -> str:
    rnd = random.Random(seed)
    vocab = ["".join(rnd.choice("abcdefghij") for _ in range(rnd.randint(2, 8))) for _ in range(500)]
    return " ".join(rnd.choice(vocab) for _ in range(n // 4))[:n]


def edited(text: str, seed: int, edits: int) -> str:
    rnd = random.Random(seed)
    chars = list(text)
    for _ in range(edits):
        p = rnd.randrange(len(chars))
        chars[p : p + rnd.randint(0, 30)] = "".join(rnd.choice("XYZ ") for _ in range(rnd.randint(0, 30)))
    return "".join(chars)


@given(st.text(alphabet="ab c", max_size=60), st.text(alphabet="ab c", max_size=60))
def test_small_texts_are_diffed_exactly(a: str, b: str) -> None:
    d = diff_text(a, b)
    assert d.level == "chars" and applied(a, b, d.opcodes) == list(b)


@given(
    st.integers(0, 10_000),
    st.sampled_from([1_500, 6_000, 40_000]),
    st.integers(0, 8),
    st.sampled_from(["ab", "abcdefgh ", "words"]),
)
def test_long_texts_rebuild_exactly_whatever_the_level(seed: int, n: int, edits: int, alphabet: str) -> None:
    rnd = random.Random(seed)
    a = words(n, seed) if alphabet == "words" else "".join(rnd.choice(alphabet) for _ in range(n))
    b = edited(a, seed, edits) if a else "x"
    d = diff_text(a, b)
    assert applied(a, b, d.opcodes) == list(b)


def test_a_megabyte_changed_in_a_few_places_is_exact_at_characters() -> None:
    a = words(1_000_000, 1)
    chars = list(a)
    for p in (100_000, 400_000, 700_000):
        chars[p : p + 5] = "XXXXX"
    chars[300_000:300_000] = "inserted"
    del chars[600_000:600_100]
    b = "".join(chars)
    d = diff_text(a, b)
    assert d.level == "chars" and not d.timed_out
    changes = [op for op in d.opcodes if op[0] != "equal"]
    assert len(changes) == 5 and sum(op[2] - op[1] for op in changes) <= 100 + 3 * 5
    assert applied(a, b, d.opcodes) == list(b)


def test_one_big_insertion_is_found_as_one() -> None:
    a = words(400_000, 1)
    b = a[:200_000] + words(100_000, 2) + a[200_000:]
    d = diff_text(a, b)
    assert [op[0] for op in d.opcodes] == ["equal", "insert", "equal"] and d.level == "chars"


def test_unrelated_long_texts_are_coarsened_and_say_so() -> None:
    a, b = words(5_000, 1), words(5_000, 2)
    d = diff_text(a, b)
    assert d.level == "words" and applied(a, b, d.opcodes) == list(b)
    a, b = words(300_000, 1), words(300_000, 2)
    d = diff_text(a, b)
    assert d.level == "blocks" and applied(a, b, d.opcodes) == list(b)


def test_a_deadline_or_a_stop_ends_the_work_with_what_is_left_as_one_block() -> None:
    a = words(200_000, 1)
    b = edited(a, 1, 50)
    d = diff_text(a, b, deadline=time.monotonic() - 1)
    assert d.timed_out and d.level == "blocks" and applied(a, b, d.opcodes) == list(b)
    d = diff_text(a, b, stop=lambda: True)
    assert d.timed_out and applied(a, b, d.opcodes) == list(b)


def test_lines_of_repetitive_json_align_a_substitution_as_one() -> None:
    a = ["{", '  "a": 1', "}"] * 10_000
    b = list(a)
    b[4000] = '  "a": 2'
    d = diff_lines(a, b)
    assert d.level == "lines" and [op for op in d.opcodes if op[0] != "equal"] == [("replace", 4000, 4001, 4000, 4001)]
    la = [f"line {i}" for i in range(50_000)]
    lb = la[:100] + ["new"] + la[100:30_000] + la[30_010:]
    d = diff_lines(la, lb)
    assert [op[0] for op in d.opcodes] == ["equal", "insert", "equal", "delete", "equal"]
    assert applied(la, lb, d.opcodes) == lb


def test_common_prefix() -> None:
    from tapetui.review.textdiff import common_prefix

    a = words(300_000, 1)
    assert common_prefix(a, a) == len(a) and common_prefix("", a) == 0
    for p in (0, 1, 63, 64, 65, 1000, 299_999):
        assert common_prefix(a, a[:p] + "\x00" + a[p + 1 :]) == p
