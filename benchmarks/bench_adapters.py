"""Replay of one model turn through each adapter, against the same framework calling an offline model directly.

Run: python benchmarks/bench_adapters.py [--runs 200]
Target (issue "Model turns on tape"): a replayed turn ≤ 1.5× the framework's direct call of an offline model.
Each framework runs a one-turn agent (a question, an answer; one tool offered) ``--runs`` times directly and
``--runs`` times replayed from a tape recorded once (the model that replays raises if called); rounds are
interleaved, the median per run is the figure. A framework that is not installed is skipped, named.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tapetui import Tape, use_tape  # noqa: E402

ROUNDS = 7
ANSWER = "Paris is at 14.5 degrees."


def _median_per_run(fn: Callable[[], Any], runs: int) -> float:
    t0 = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - t0) / runs


def _report(name: str, direct: list[float], replay: list[float]) -> None:
    d, r = statistics.median(direct), statistics.median(replay)
    ratios = statistics.median(b / a for a, b in zip(direct, replay, strict=True))
    print(f"{name:<14} direct {d * 1e6:8.0f} µs   replay {r * 1e6:8.0f} µs   {ratios:.2f}× (target ≤ 1.5×)")


def bench(name: str, direct: Callable[[], Any], taped: Callable[[], Any], tape_dir: Path, runs: int) -> None:
    """``runs`` one-turn runs recorded into one tape, then each round replays them all from it (one open a round:
    a turn's own cost is the figure, not a tape's open)."""
    path = tape_dir / f"{name}.jsonl"
    with Tape(path, "record", run_log=False) as t, use_tape(t):
        for _ in range(runs):
            taped()
    ds, rs = [], []
    for _ in range(ROUNDS):
        ds.append(_median_per_run(direct, runs))
        with Tape(path, "replay", run_log=False) as t, use_tape(t):
            rs.append(_median_per_run(taped, runs))
            assert t.stats()["model_hits"] == runs and t.stats()["live_model_calls"] == 0
    _report(name, ds, rs)


def pydantic_ai_pair() -> tuple[Callable[[], Any], Callable[[], Any]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from tapetui.integrations.pydantic_ai import TapedModel

    def answer(messages: Any, info: Any) -> ModelResponse:
        return ModelResponse(parts=[TextPart(ANSWER)])

    def weather(city: str) -> float:
        """The weather of a city."""
        return 14.5

    direct = Agent(FunctionModel(answer), tools=[weather], instructions="Be brief.")
    taped = Agent(TapedModel(FunctionModel(answer)), tools=[weather], instructions="Be brief.")
    return (lambda: direct.run_sync("How warm is Paris?")), (lambda: taped.run_sync("How warm is Paris?"))


def openai_agents_pair() -> tuple[Callable[[], Any], Callable[[], Any]]:
    from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage, function_tool
    from agents.testing import assistant_message

    from tapetui.integrations.openai_agents import TapedModel

    class Offline(Model):
        model = "offline-1"

        async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ModelResponse(output=[assistant_message(ANSWER)], usage=Usage(requests=1), response_id="r1")

        async def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError
            yield

    @function_tool
    def weather(city: str) -> float:
        """The weather of a city."""
        return 14.5

    config = RunConfig(tracing_disabled=True)
    direct = Agent(name="a", model=Offline(), tools=[weather], instructions="Be brief.")
    taped = Agent(name="a", model=TapedModel(Offline()), tools=[weather], instructions="Be brief.")

    def run(agent: Any) -> Any:
        return asyncio.run(Runner.run(agent, "How warm is Paris?", run_config=config))

    return (lambda: run(direct)), (lambda: run(taped))


def langchain_pair() -> tuple[Callable[[], Any], Callable[[], Any]]:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from tapetui.integrations.langchain import TapedChatModel

    class Offline(BaseChatModel):
        @property
        def _llm_type(self) -> str:
            return "offline"

        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content=ANSWER))])

    @tool
    def weather(city: str) -> float:
        """The weather of a city."""
        return 14.5

    messages = [HumanMessage("How warm is Paris?")]
    direct = Offline().bind_tools([weather])
    taped = TapedChatModel(Offline()).bind_tools([weather])
    return (lambda: direct.invoke(messages)), (lambda: taped.invoke(messages))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--only", choices=["pydantic-ai", "openai-agents", "langchain"], help="one framework")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for name, pair in (
            ("pydantic-ai", pydantic_ai_pair),
            ("openai-agents", openai_agents_pair),
            ("langchain", langchain_pair),
        ):
            if a.only and name != a.only:
                continue
            try:
                direct, taped = pair()
            except ImportError as e:
                print(f"{name:<14} skipped: {e}")
                continue
            bench(name, direct, taped, Path(d), a.runs)


if __name__ == "__main__":
    main()
