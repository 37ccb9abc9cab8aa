"""README "Notes and phases": the block replays a session it takes as recorded, with the sample agent's tools;
here it is recorded first."""

# ruff: noqa: F821 (tape is the README block's)
from tapetui import Tape
from tapetui.sample_agent import build_registry

registry = build_registry()
path = "tapes/answer.jsonl"


def write_answer(doc: dict, hits: list) -> str:
    return f"{doc['title']}: {len(hits)} sources"


with Tape(path, mode="record", registry=registry) as tape:  # the session the block replays
    tape.phase("gather")
    tape.call("fetch_doc", {"doc_id": "pricing"})
    tape.call("search_index", {"query": "pricing"})

# readme-block
stats = tape.stats()
assert stats["tape_hits"] == 2 and stats["live_tool_calls"] == 0, stats
