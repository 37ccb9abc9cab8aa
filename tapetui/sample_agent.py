"""A small agent with real tools and no network, and the sessions in ``sample_tapes/``.

Tools: ``fetch_doc`` (fails for an unknown document), ``search_index``, ``summarize``
(``max_words``), ``quote_price`` (time-sensitive, ttl 1 h), ``average_price`` (a 30-day
average, not time-sensitive), ``write_report`` (writes a real file: its side effect) and
``send_email`` (writes a real file into an outbox: its side effect).
``python -m tapetui.sample_agent regenerate [DIR]`` rebuilds the sample tapes byte for byte
(fixed clock, fixed content); ``python -m tapetui.sample_agent replay TAPE`` replays one
session as the agent behaves today, which is what ``tapes.toml``'s ``replay_command`` runs;
``python -m tapetui.sample_agent record TAPE`` records one new candidate of a session with the
agent of today, which is what ``record_command`` runs (``tapetui check --samples N``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

from tapetui.core.config import Config, ToolPolicy, find_config, load_config
from tapetui.core.errors import TapeError
from tapetui.core.registry import ToolRegistry
from tapetui.core.store import candidate_path, runlog_path, samples_of
from tapetui.core.tape import Tape

__all__ = [
    "ANSWERS",
    "FLAKY_SHIFT",
    "SESSIONS",
    "AgentParams",
    "DocNotFound",
    "answer_agent",
    "build_registry",
    "research_agent",
    "research_model",
    "record",
    "regenerate",
    "registry",
    "run_agent",
]

DOCS = {
    "handbook": ("Agent handbook", "Agents call tools. Tools have contracts. Contracts drift. " * 12),
    "appendix": ("Appendix: tool contracts", "Every tool pins a version and a schema so replays stay honest. " * 6),
    "pricing": ("Pricing notes", "Quotes expire after an hour; replaying an old quote is a stale read. " * 4),
}


class DocNotFound(LookupError):
    """The document store has no such document."""


def _reports_dir() -> Path:
    return Path(os.environ.get("TAPETUI_SAMPLE_REPORTS", Path(tempfile.gettempdir()) / "tapetui-sample-reports"))


def fetch_doc(doc_id: str) -> dict[str, Any]:
    if doc_id not in DOCS:
        raise DocNotFound(f"no document {doc_id!r} in the store")
    title, text = DOCS[doc_id]
    return {"doc_id": doc_id, "title": title, "text": text.strip()}


def search_index(query: str, top_k: int = 3) -> list[dict[str, Any]]:
    words = set(query.lower().split())
    scored: list[dict[str, Any]] = []
    for doc_id, (title, text) in sorted(DOCS.items()):
        score = sum(text.lower().count(w) for w in words)
        scored.append({"doc_id": doc_id, "title": title, "score": score})
    scored.sort(key=lambda h: (-h["score"], h["doc_id"]))
    return scored[:top_k]


def summarize(text: str, max_words: int = 120) -> dict[str, Any]:
    words = text.split()
    summary = " ".join(words[:max_words])
    return {"summary": summary, "words": min(len(words), max_words)}


def summarize_legacy(text: str, max_words: int = 120) -> dict[str, Any]:
    return summarize(text, max_words)


def quote_price(symbol: str) -> dict[str, Any]:
    price = round(sum(map(ord, symbol)) / 3.0, 2)
    return {"symbol": symbol, "price": price, "currency": "EUR"}


# 30-day averages, in cents so the sums stay exact; a registry's ``price_shift`` moves them (the market of another day).
AVERAGES = {"ACME": 10125, "INITECH": 5780}


def _average_price(price_shift: float) -> Callable[..., dict[str, Any]]:
    """``average_price`` for a market ``price_shift`` EUR away from the recorded one.

    The same name, signature and (absent) docstring for every shift: the tool's fingerprint is the same,
    only what it returns moves, as a real feed's does from one day to the next.
    """

    def average_price(symbol: str, days: int = 30) -> dict[str, Any]:
        cents = AVERAGES.get(symbol.upper(), 1000) + round(price_shift * 100)
        return {"symbol": symbol.upper(), "days": days, "average": cents / 100, "currency": "EUR"}

    return average_price


def write_report(path: str, body: str) -> dict[str, Any]:
    out = _reports_dir()
    out.mkdir(parents=True, exist_ok=True)
    target = out / Path(path).name  # never outside the reports folder
    target.write_text(body, encoding="utf-8")
    return {"written": target.name, "bytes": len(body.encode())}


def send_email(to: str, subject: str, body: str) -> dict[str, Any]:
    outbox = _reports_dir() / "outbox"
    outbox.mkdir(parents=True, exist_ok=True)
    n = sum(1 for _ in outbox.glob("*.eml")) + 1
    target = outbox / f"{n:04d}.eml"
    target.write_text(f"To: {to}\nSubject: {subject}\n\n{body}", encoding="utf-8")
    return {"queued": target.name, "to": to}


SUMMARIZE_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "max_words": {"type": "integer", "minimum": 10, "maximum": 200}},
    "required": ["text"],
}
LEGACY_SUMMARIZE_SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}, "max_words": {"type": "integer", "minimum": 10, "maximum": 500}},
    "required": ["text"],
}


def build_registry(*, legacy_summarize: bool = False, price_shift: float = 0.0) -> ToolRegistry:
    """The sample tools.

    Args:
        legacy_summarize: the older contract of ``summarize`` (v1.0.0, max 500).
        price_shift: EUR added to what ``average_price`` returns (the same contract and fingerprint; a
            market that moved since the recording).
    """
    if not math.isfinite(price_shift):
        raise ValueError(f"price_shift must be a finite number, got {price_shift!r}")
    reg = ToolRegistry()
    reg.register(
        fetch_doc,
        version="1.0.0",
        schema={"type": "object", "properties": {"doc_id": {"type": "string"}}, "required": ["doc_id"]},
    )
    reg.register(
        search_index,
        version="1.0.0",
        schema={
            "type": "object",
            "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}},
            "required": ["query"],
        },
    )
    if legacy_summarize:
        reg.register(summarize_legacy, name="summarize", version="1.0.0", schema=LEGACY_SUMMARIZE_SCHEMA)
    else:
        reg.register(summarize, version="1.1.0", schema=SUMMARIZE_SCHEMA)
    reg.register(
        quote_price,
        version="2.0.0",
        ttl=3600,
        schema={"type": "object", "properties": {"symbol": {"type": "string"}}, "required": ["symbol"]},
    )
    reg.register(
        _average_price(price_shift),
        version="1.0.0",
        schema={
            "type": "object",
            "properties": {"symbol": {"type": "string"}, "days": {"type": "integer", "minimum": 1}},
            "required": ["symbol"],
        },
    )
    reg.register(
        write_report,
        version="1.0.0",
        side_effect=True,
        schema={
            "type": "object",
            "properties": {"path": {"type": "string"}, "body": {"type": "string"}},
            "required": ["path", "body"],
        },
    )
    reg.register(
        send_email,
        version="1.0.0",
        side_effect=True,
        schema={
            "type": "object",
            "properties": {"to": {"type": "string"}, "subject": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to", "subject", "body"],
        },
    )
    return reg


registry = build_registry()


@dataclass(frozen=True)
class AgentParams:
    """How the sample agent behaves in one session."""

    topic: str = "tool contracts"
    doc_id: str = "handbook"
    max_words: int = 120
    extra_doc: str | None = None
    quote: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    email_to: str | None = None  # also e-mail the report (send_email: a tool the golden of new_tool never used)
    answer: str | None = None  # answer a question instead of writing a report: the wording (a key of ANSWERS)
    gather_order: tuple[str, ...] = ("fetch_doc", "search_index")  # the answer agent's calls in its gather phase
    price_shift: float = 0.0  # the market today: EUR added to what average_price returns when it runs
    model_prompt: str | None = None  # the research agent's instructions: its model's turns go on the tape too


# The answer agent's final answer, worded as each version of its prompt words it. It rounds the average to whole
# euros: a rewording is similar text with the same numbers (the built-in similarity refuses other numbers).
ANSWERS = {
    "v1": "{symbol} averaged about {rounded} {currency} over the last {days} days. "
    "Quotes expire after an hour, so replaying an old quote is a stale read.",
    "v2": "Over the last {days} days, {symbol} averaged about {rounded} {currency}. "
    "A quote expires after one hour: replaying an old quote is a stale read.",
}


def run_agent(tape: Tape, p: AgentParams, delay: float = 0.0) -> str:
    """The agent: fetch → search → summarize → (quote) → write a report (→ e-mail it). Returns the report body.

    With ``p.answer`` it answers a question instead (:func:`answer_agent`) and returns the answer.
    """

    def call(tool: str, args: dict[str, Any]) -> Any:
        result = tape.call(tool, args)
        if delay:
            time.sleep(delay)
        return result

    if p.answer is not None:
        return answer_agent(tape, p, call)
    if p.model_prompt is not None:
        return research_agent(tape, p)
    try:
        doc = call("fetch_doc", {"doc_id": p.doc_id})
        text = doc["text"]
    except DocNotFound:
        text = ""  # fall back on the search results alone
    if p.extra_doc:
        text += " " + call("fetch_doc", {"doc_id": p.extra_doc})["text"]
    hits = call("search_index", {"query": p.topic, "top_k": 3})
    if not text:
        text = " ".join(h["title"] for h in hits)
    summary = call("summarize", {"text": text, "max_words": p.max_words})["summary"]
    lines = [f"# Report: {p.topic}", "", summary, "", "Sources: " + ", ".join(h["doc_id"] for h in hits)]
    if p.quote:
        q = call("quote_price", {"symbol": p.quote})
        lines.append(f"Quote: {q['symbol']} {q['price']} {q['currency']}")
    body = "\n".join(lines) + "\n"
    call("write_report", {"path": "report.md", "body": body})
    if p.email_to:
        call("send_email", {"to": p.email_to, "subject": f"Report: {p.topic}", "body": body})
    return body


def answer_agent(tape: Tape, p: AgentParams, call: Callable[[str, dict[str, Any]], Any]) -> str:
    """The answer agent, in two phases it marks on the tape: ``gather`` (the document and the search, in
    ``p.gather_order``, then the average price) and ``answer`` (a summary); its final answer is a note
    (``final_answer``), compared by wording under tapes.toml's rules, not byte for byte."""
    if p.answer is None or p.quote is None:
        raise ValueError("the answer agent needs the wording of its answer (answer) and a symbol (quote)")
    tape.phase("gather")
    got: dict[str, Any] = {}
    for step in p.gather_order:
        if step == "fetch_doc":
            got[step] = call("fetch_doc", {"doc_id": p.doc_id})
        elif step == "search_index":
            got[step] = call("search_index", {"query": p.topic, "top_k": 3})
        else:
            raise ValueError(f"the answer agent gathers with fetch_doc and search_index, not {step!r}")
    avg = call("average_price", {"symbol": p.quote, "days": 30})
    tape.phase("answer")
    call("summarize", {"text": got["fetch_doc"]["text"], "max_words": p.max_words})
    answer = ANSWERS[p.answer].format(rounded=round(avg["average"]), **avg)
    tape.note("final_answer", answer)
    return answer


MODEL_NAME = "function:research_model"
"""The research agent's model, named as pydantic-ai names a ``FunctionModel`` (its system, then its name)."""


def _tool_definitions(p: AgentParams) -> list[dict[str, Any]]:
    """The tools the research agent offers its model, as the neutral request carries them."""
    names = ["search_index", "fetch_doc"] + (["send_email"] if p.email_to else [])
    out = []
    for name in names:
        t = registry[name]
        out.append({"name": name, "description": t.description, "parameters": t.schema})
    return out


def research_model(request: dict[str, Any]) -> dict[str, Any]:
    """The research agent's model, scripted and offline: it searches, fetches the best hit, e-mails the summary
    when it was offered ``send_email`` and told whom to write to, then answers. Its usage counts 4 characters a
    token, so a longer prompt costs more."""
    results = [part for m in request["messages"] for part in m["parts"] if part["type"] == "tool_call_response"]
    offered = {t["name"] for t in request["tools"]}
    n = len(results)
    size = len(str(request))
    if n == 0:
        call = {
            "type": "tool_call",
            "id": "call_1",
            "name": "search_index",
            "arguments": {"query": "tool contracts", "top_k": 3},
        }
        parts: list[dict[str, Any]] = [call]
    elif n == 1:
        best = results[0]["response"][0]["doc_id"]
        parts = [{"type": "tool_call", "id": "call_2", "name": "fetch_doc", "arguments": {"doc_id": best}}]
    elif n == 2 and "send_email" in offered:
        doc = results[1]["response"]
        body = " ".join(doc["text"].split()[:12])
        args = {"to": "team@example.com", "subject": doc["title"], "body": body}
        parts = [{"type": "tool_call", "id": "call_3", "name": "send_email", "arguments": args}]
    else:
        doc = results[1]["response"]
        text = f"{doc['title']}: " + " ".join(doc["text"].split()[:16])
        if "cite" in (request.get("instructions") or ""):
            text += f" [{doc['doc_id']}]"
        parts = [{"type": "text", "content": text}]
    finish = "tool_calls" if parts[0]["type"] == "tool_call" else "stop"
    return {"parts": parts, "finish_reason": finish, "usage": {"input": size // 4, "output": len(str(parts)) // 4}}


def research_agent(tape: Tape, p: AgentParams) -> str:
    """The research agent: a model in a loop (each of its turns on the tape, through ``tape.model``) that calls
    ``search_index`` and ``fetch_doc`` (and ``send_email`` when ``p.email_to``) until it answers. Its requests are
    the neutral requests of ``docs/format.md`` ("Model turns"), pinned here so the sample tapes need no agent
    framework; ``tests/test_models_pydantic_ai.py`` shows pydantic-ai's adapter records the same keys for the
    same run."""
    assert p.model_prompt is not None
    messages: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"type": "text", "content": f"What do the docs say about {p.topic}?"}]}
    ]
    for _ in range(6):
        request = {
            "instructions": p.model_prompt,
            "messages": messages,
            "tools": _tool_definitions(p),
            "settings": {"temperature": 0.0},
        }
        response = tape.model(request, live=partial(research_model, request), model=MODEL_NAME, source="pydantic-ai")
        calls = [part for part in response["parts"] if part["type"] == "tool_call"]
        messages = [*messages, {"role": "assistant", "parts": response["parts"]}]
        if not calls:
            return str(response["parts"][0]["content"])
        results = []
        for c in calls:
            out = tape.call(c["name"], c["arguments"], call_id=c["id"])
            results.append({"type": "tool_call_response", "id": c["id"], "name": c["name"], "response": out})
        messages.append({"role": "tool", "parts": results})
    raise RuntimeError("the research agent did not answer in 6 turns")


# Each session: (params at recording time, params of the agent today, legacy contract when recorded).
SESSIONS: dict[str, tuple[AgentParams, AgentParams, bool]] = {
    "clean": (AgentParams(), AgentParams(), False),
    "drift_summarize": (AgentParams(), AgentParams(max_words=80), False),
    "contract_change": (AgentParams(topic="schemas"), AgentParams(topic="schemas"), True),
    "miss_extra_doc": (AgentParams(topic="versions"), AgentParams(topic="versions", extra_doc="appendix"), False),
    "stale_quote": (AgentParams(topic="pricing", quote="ACME"), AgentParams(topic="pricing", quote="ACME"), False),
    "error_missing_doc": (
        AgentParams(doc_id="retired-faq", topic="faq"),
        AgentParams(doc_id="retired-faq", topic="faq"),
        False,
    ),
    # Compared like a reviewer (tapes.toml's [compare.sessions."reviewed_answer"]): today the agent gathers
    # in another order within its phase, the average moved by 2 cents, and the final answer is reworded.
    "reviewed_answer": (
        AgentParams(topic="pricing", doc_id="pricing", quote="ACME", max_words=40, answer="v1"),
        AgentParams(
            topic="pricing",
            doc_id="pricing",
            quote="ACME",
            max_words=40,
            answer="v2",
            gather_order=("search_index", "fetch_doc"),
            price_shift=0.02,
        ),
        False,
    ),
    # Today the agent also e-mails its report: send_email, a tool the golden never used, is a new capability.
    "new_tool": (
        AgentParams(topic="release notes"),
        AgentParams(topic="release notes", email_to="team@example.com"),
        False,
    ),
    # A research agent whose model's turns are on the tape: today its system prompt asks it to cite its sources and
    # it may e-mail the team, and its model asks for send_email: a prompt drift and [MODEL TOOLS].
    "research_prompt": (
        AgentParams(topic="tool contracts", model_prompt="You are a research assistant. Answer briefly."),
        AgentParams(
            topic="tool contracts",
            model_prompt="You are a research assistant. Answer briefly and cite the document you used.",
            email_to="team@example.com",
        ),
        False,
    ),
}
FLAKY_SHIFT = 0.40
"""What a flaky recording (:func:`record`) adds to ``average_price``: outside reviewed_answer's tolerance."""
EPOCH = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


def _fixed_clock(start: datetime) -> tuple[Callable[[], datetime], Callable[[], float]]:
    ticks = iter(range(10**9))
    timer_ticks = iter(range(10**9))

    def clock() -> datetime:
        return start + timedelta(seconds=next(ticks))

    def timer() -> float:
        return next(timer_ticks) * 0.0125

    return clock, timer


def _labels(name: str, p: AgentParams) -> dict[str, Any]:
    return {"agent": "sample_agent", "session": name, "model": "sample-model-1", "prompt": "v3", **p.labels}


def regenerate(out_dir: Path) -> list[Path]:
    """Rebuild every sample session in ``out_dir``: the same bytes on every run."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    # The same policy as the repository's tapes.toml: an expired quote is re-recorded by fill.
    config = replace(Config.for_dir(out_dir), tools={"quote_price": ToolPolicy(ttl=3600, stale_policy="miss")})
    written = []
    with tempfile.TemporaryDirectory() as reports:
        old = os.environ.get("TAPETUI_SAMPLE_REPORTS")
        os.environ["TAPETUI_SAMPLE_REPORTS"] = reports
        try:
            for n, (name, (then, now, legacy)) in enumerate(SESSIONS.items()):
                tape_path = out_dir / f"{name}.jsonl"
                for stale in (tape_path, candidate_path(tape_path), runlog_path(tape_path)):
                    stale.unlink(missing_ok=True)
                start = EPOCH + timedelta(days=n)
                clock, timer = _fixed_clock(start)
                with Tape(
                    tape_path,
                    "record",
                    build_registry(legacy_summarize=legacy, price_shift=then.price_shift),
                    config=config,
                    labels=_labels(name, then),
                    clock=clock,
                    timer=timer,
                    run_log=False,
                ) as tape:
                    run_agent(tape, then)
                written.append(tape_path)
                later, timer2 = _fixed_clock(start + timedelta(hours=2))
                if then != now and name != "miss_extra_doc":
                    with Tape(
                        tape_path,
                        "record",
                        build_registry(price_shift=now.price_shift),
                        config=config,
                        labels=_labels(name, now),
                        clock=later,
                        timer=timer2,
                        run_log=False,
                    ) as tape:
                        run_agent(tape, now)
                    written.append(candidate_path(tape_path))
                if legacy:
                    with Tape(
                        tape_path,
                        "record",
                        registry,
                        config=config,
                        labels=_labels(name, now),
                        clock=later,
                        timer=timer2,
                        run_log=False,
                    ) as tape:
                        run_agent(tape, now)
                    written.append(candidate_path(tape_path))
                later, _ = _fixed_clock(start + timedelta(hours=3))
                try:
                    with Tape(tape_path, "replay", registry, config=config, clock=later) as tape:
                        run_agent(tape, now)
                except TapeError:
                    pass  # the run log keeps the drift, miss or contract change
                written.append(runlog_path(tape_path))
        finally:
            if old is None:
                os.environ.pop("TAPETUI_SAMPLE_REPORTS", None)
            else:
                os.environ["TAPETUI_SAMPLE_REPORTS"] = old
    return written


def _session(tape_path: Path) -> tuple[str, AgentParams]:
    name = Path(tape_path).name.removesuffix(".jsonl")
    _, now, _ = SESSIONS.get(name, (None, AgentParams(), False))
    return name, now


def _config_for(tape_path: Path) -> Config:
    cfg_path = find_config(Path(tape_path).parent)
    return load_config(cfg_path) if cfg_path else Config.for_dir(Path(tape_path).parent)


def replay(tape_path: Path, mode: str = "replay", delay: float = 0.0) -> int:
    """Replay one sample session as the agent behaves today; exit status 0 clean, 1 otherwise."""
    _, now = _session(tape_path)
    config = _config_for(tape_path)
    try:
        with Tape(tape_path, mode, build_registry(price_shift=now.price_shift), config=config) as tape:
            run_agent(tape, now, delay=delay)
            stats = tape.stats()
    except TapeError as e:
        print(e, file=sys.stderr)
        return 1
    print(" ".join(f"{k}={v}" for k, v in stats.items() if not isinstance(v, list)))
    failed = stats["drift_events"] or (stats["tape_misses"] and mode == "replay")
    return 1 if failed else 0


def record(tape_path: Path, *, flaky_every: int = 3) -> tuple[Path, bool]:
    """Record one new candidate of a sample session with the agent of today: what ``record_command`` runs.

    A pending candidate moves into ``NAME.samples/`` first (a recording never replaces one silently). The
    recordings vary, deterministically: the session's k-th sample (k = 1 + its older samples + its pending
    candidate) is *flaky* when k is a multiple of ``flaky_every`` (0: never), and then ``average_price``
    returns :data:`FLAKY_SHIFT` EUR more than today's market, outside reviewed_answer's tolerance. From the
    committed samples, ``tapetui check --samples 3`` (which parks the pending candidate while it records)
    records samples 1, 2 and 3 and reports 2 of 3 matching for reviewed_answer. Only sessions that call
    ``average_price`` notice.

    Returns:
        The candidate written, and whether this recording was the flaky one.

    Raises:
        TapeError: the recording failed (the agent's own errors, such as a missing document, are recorded).
    """
    name, now = _session(tape_path)
    golden = Path(tape_path)
    k = 1 + len(samples_of(golden)) + (1 if candidate_path(golden).exists() else 0)
    flaky = flaky_every > 0 and k % flaky_every == 0
    params = replace(now, price_shift=now.price_shift + (FLAKY_SHIFT if flaky else 0.0))
    labels = {**_labels(name, now), "sample": str(k), **({"variant": "flaky"} if flaky else {})}
    with Tape(
        golden,
        "record",
        build_registry(price_shift=params.price_shift),
        config=_config_for(golden),
        labels=labels,
        run_log=False,
    ) as tape:
        run_agent(tape, params)
    return candidate_path(golden) if golden.exists() else golden, flaky


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tapetui.sample_agent", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("regenerate", help="rebuild the sample tapes (deterministic)")
    g.add_argument("dir", nargs="?", default="sample_tapes", type=Path)
    r = sub.add_parser("replay", help="replay one sample session as the agent behaves today")
    r.add_argument("tape", type=Path)
    r.add_argument("--mode", choices=["replay", "fill", "record"], default="replay")
    r.add_argument("--delay", type=float, default=0.0, help="seconds to wait after each call (to watch it live)")
    c = sub.add_parser(
        "record", help="record one new candidate of a session with the agent of today (tapes.toml's record_command)"
    )
    c.add_argument("tape", type=Path)
    c.add_argument(
        "--flaky-every",
        type=int,
        default=3,
        metavar="N",
        help="every N-th sample of a session gets an average price outside its tolerance (0: never; default 3)",
    )
    a = ap.parse_args(argv)
    if a.cmd == "regenerate":
        for p in regenerate(a.dir):
            print(p)
        return 0
    if a.cmd == "record":
        if a.flaky_every < 0:
            ap.error("--flaky-every takes 0 or more")
        try:
            written, flaky = record(a.tape, flaky_every=a.flaky_every)
        except TapeError as e:
            print(e, file=sys.stderr)
            return 1
        print(f"{written}{' (flaky: average_price moved)' if flaky else ''}")
        return 0
    return replay(a.tape, a.mode, a.delay)


if __name__ == "__main__":
    # Run as `python -m tapetui.sample_agent`, this file is `__main__`: its tools and errors must be the ones
    # of `tapetui.sample_agent`, so a recorded DocNotFound names the module a replay can import it from.
    from tapetui.sample_agent import main as _main  # deferred: importing itself under its own name

    sys.exit(_main())
