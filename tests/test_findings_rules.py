"""The rules of ``check`` on hand-built run facts (tapetui.review.facts → tapetui.review.findings)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

import pytest

from tapetui.core.changes import MISSING, Change
from tapetui.core.comparators import CompareSettings
from tapetui.core.errors import TapeError
from tapetui.core.index import TapeIndex
from tapetui.core.jsondiff import IgnoreRules
from tapetui.review.comparison import pair_notes
from tapetui.review.facts import Drift, EndError, Miss, RunFacts, Stale, collect_run
from tapetui.review.findings import (
    capability_findings,
    drift_findings,
    event_findings,
    miss_finding,
    no_end_findings,
    note_findings,
    run_verdicts,
    stop_findings,
    tools_findings,
    tools_verdict,
    unused_findings,
)

END_OK: dict[str, Any] = {"event": "end", "error": None}


def golden(*tools: str) -> TapeIndex:
    """What the sequence rules read of a golden: its tools, their seqs, no phase lines."""
    return cast(TapeIndex, SimpleNamespace(tools=list(tools), seqs=list(range(1, len(tools) + 1)), phases=()))


def test_collect_run_reads_each_fact_once_in_run_order() -> None:
    facts = collect_run(
        [
            {"event": "start"},
            {"event": "phase", "name": "plan"},
            {"event": "hit", "seq": 1, "tool": "search"},
            {"event": "miss", "seq": 2, "tool": "fetch", "key": "k2"},
            {"event": "live", "seq": 2, "tool": "fetch"},  # the fill answering that miss: the same call
            {"event": "drift", "seq": 3, "tool": "fetch", "changes": [["url", "a", "b"]]},
            {"event": "note", "kind": "answer", "value": 42},
            {"event": "unused", "seq": 4, "tool": "summarize"},
            END_OK,
        ]
    )
    assert facts.events == 9
    assert facts.executed == ("search", "fetch", "fetch")
    assert facts.phases == ("plan", "plan", "plan") and facts.phased
    assert [type(r) for r in facts.reported] == [Miss, Drift]
    assert facts.drifts[0].changes == (Change("url", "a", "b"),)
    assert facts.notes == (("answer", 42),)
    assert [e["seq"] for e in facts.unused] == [4]
    assert facts.judged and facts.stopped_by is None
    assert (facts.last_seq, facts.last_tool) == (3, "fetch")


def test_collect_run_names_the_line_of_a_malformed_event() -> None:
    with pytest.raises(TapeError, match=r"x\.run\.jsonl:7: bad"):
        collect_run([{"event": "invalid", "line": 7, "problem": "bad"}], checked=True, where="x.run.jsonl")


def test_a_drift_lists_what_diff_ignore_excuses_as_a_warning() -> None:
    d = Drift(3, "fetch", (Change("url", "a", "b"), Change("trace", "t1", "t2")), "rk", "k")
    found = drift_findings(d, IgnoreRules(["trace"], volatile=False))
    assert [(f.text, f.warning) for f in found] == [
        ('fetch  step 3  args.url  "a" → "b"', False),
        ('fetch  step 3  args.trace  "t1" → "t2"  — ignored by [diff] ignore \'trace\'', True),
    ]


def test_a_run_stopped_at_a_drift_only_in_ignored_paths_says_so_in_its_words() -> None:
    d = Drift(2, "fetch", (Change("token", 1, 2),), "rk", "k")
    (hidden,) = drift_findings(d, IgnoreRules(["token"], volatile=False))
    assert hidden.data["ignored_paths"] == ["args.token"] and not hidden.warning
    end = {"event": "end", "error": {"type": "TapeDrift", "message": "drift"}}
    facts = RunFacts(events=2, executed=("fetch",), reported=(d, EndError(end["error"])), end=end, last_seq=2)
    (out,) = stop_findings(facts, [hidden], hidden)
    assert out.text == (
        "fetch  step 2  run ended with TapeDrift at step 2; the changed paths are ignored in diffs but still "
        "part of the call key (args.token)"
    )
    assert out.data["error"] == "TapeDrift"
    # without a rule the path is shown: the drift itself says why the run stopped, nothing is added
    found, hidden_now = event_findings(facts, golden("fetch"), CompareSettings(), None)
    assert hidden_now is None and stop_findings(facts, found, hidden_now) == found


def test_a_replay_error_nothing_explains_is_an_error_at_the_last_call() -> None:
    end = {"event": "end", "error": {"type": "TapeMiss", "message": "no such call\nmore"}}
    stale = Stale(5, "fetch", "2024-01-01", "warn")
    facts = RunFacts(events=3, reported=(stale, EndError(end["error"])), end=end, last_seq=5, last_tool="fetch")
    found, hidden = event_findings(facts, golden(), CompareSettings(), None)
    assert [f.warning for f in found] == [True] and hidden is None
    out = stop_findings(facts, found, hidden)
    assert out[-1].text == "run ended with TapeMiss at step 5: no such call"
    assert (out[-1].seq, out[-1].tool, out[-1].warning) == (5, "fetch", False)


def test_an_error_of_the_run_itself_and_a_missing_end() -> None:
    err = EndError({"type": "ValueError", "message": "boom"})
    facts = RunFacts(events=1, reported=(err,), end={"event": "end", "error": err.error})
    found, _ = event_findings(facts, golden(), CompareSettings(), None)
    assert [f.text for f in found] == ["run ended with ValueError: boom"]
    assert no_end_findings(facts) == []
    (no_end,) = no_end_findings(RunFacts(events=4))
    assert no_end.kind == "error" and "(4 events)" in no_end.text


def test_a_miss_names_the_nearest_recorded_call() -> None:
    near = miss_finding(Miss(4, "fetch", "k4", None, 2, (Change("url", "a", "b"),)))
    assert near.text == 'fetch  step 4  miss: k4 not on tape; nearest is step 2: args.url  "a" → "b"'
    none = miss_finding(Miss(4, "fetch", "k4", "fill", None, ()))
    assert none.text == "fetch  step 4  miss (fill): k4 not on tape; no recorded fetch call"


def test_unused_steps_after_a_stop_were_not_reached() -> None:
    unused = ({"event": "unused", "seq": 3, "tool": "b"}, {"event": "unused", "seq": 4, "tool": "c"})
    stopped = RunFacts(events=4, executed=("a",), unused=unused, end={"event": "end", "error": {"type": "TapeMiss"}})
    (f,) = unused_findings(stopped, "strict", loose=False)
    assert f.text == "run stopped at step 1 (TapeMiss); step(s) 3, 4 not reached"
    # a contract change raises at step 3 before its recording is used: step 3 was reached, only 4 was not
    at_three = RunFacts(events=4, executed=("a", "b", "c"), unused=unused, end={"event": "end", "error": {"type": "X"}})
    (f,) = unused_findings(at_three, "strict", loose=False)
    assert f.text == "run stopped at step 3 (X); step(s) 4 not reached" and f.data == {"steps": [4]}
    clean = RunFacts(events=4, executed=("a",), unused=unused, end=END_OK)
    found = unused_findings(clean, "subset", loose=True)
    assert [(f.seq, f.warning) for f in found] == [(3, True), (4, True)]
    assert found[0].text.endswith("(within the subset sequence threshold)")


def test_the_sequence_is_judged_in_its_mode_and_only_for_a_run_that_ended() -> None:
    g = golden("a", "b")
    ended = RunFacts(events=3, executed=("b", "a"), end=END_OK)
    loose = CompareSettings(sequence="unordered")
    v = tools_verdict(ended, g, loose)
    assert v.passed and v.value == 0
    (f,) = tools_findings(ended, g, v)
    assert f.warning
    assert (
        f.text == "[TOOLS] executed sequence changed (unordered order: 0 edits, within max 0): ['a', 'b'] → ['b', 'a']"
    )
    strict = tools_verdict(ended, g, CompareSettings())
    assert not strict.passed and tools_findings(ended, g, strict)[0].data["edit_distance"] == 2
    _, notes_v = note_findings([], [], CompareSettings(), None, None)
    verdicts = run_verdicts(ended, CompareSettings(), [], strict, notes_v)
    assert [x.dimension for x in verdicts] == ["tools", "arguments", "notes"]
    killed = RunFacts(events=3, executed=("b", "a"))  # no end: the sequence is not judged
    assert tools_findings(killed, g, tools_verdict(killed, g, CompareSettings())) == []
    verdicts = run_verdicts(killed, CompareSettings(), [], strict, notes_v)
    assert [x.dimension for x in verdicts] == ["arguments", "notes"]


def test_a_tool_the_golden_never_used_is_a_capability() -> None:
    found = capability_findings(golden("a"), RunFacts(events=2, executed=("a", "rm", "rm")))
    assert [(f.kind, f.tool) for f in found] == [("capability", "rm")]


def test_notes_are_paired_by_kind_and_position() -> None:
    old = [("answer", 1), ("plan", "x"), ("answer", 2)]
    new = [("answer", 1), ("extra", True)]
    assert pair_notes(old, new) == [
        ("answer", 0, 1, 1),
        ("answer", 1, 2, MISSING),
        ("plan", 0, "x", MISSING),
        ("extra", 0, MISSING, True),
    ]
    found, v = note_findings(old, new, CompareSettings(), None, None)
    assert [f.text for f in found] == [
        "note.answer #2  (removed) the run wrote no such note",
        "note.plan  (removed) the run wrote no such note",
        "note.extra  (added) true",
    ]
    assert (v.dimension, v.value, v.passed) == ("notes", 3, False)
    within, v = note_findings(old, new, CompareSettings(max_note_changes=3), None, None)
    assert v.passed and all(f.warning for f in within)
