"""What spanledger's LlamaIndex handlers add to a retrieval and a model call, against the same
calls through LlamaIndex's own instrumentation with its default handlers only, in the same run.

A retrieval is ``BaseRetriever.retrieve`` of a retriever handing back 10 nodes of 1 KB (its
spans and events, no vector store); a model call is ``CustomLLM.complete`` of an LLM that
answers at once with a reported usage (its spans, callbacks and events, no network). Each is
measured bare (spanledger's handlers off), with the handlers on and no request open (work
inside a span that is no run, as an index being built), and inside an open request: the
retrieval serves its nodes, the model call's prompt holds them and is matched and its answer
read. The matching itself (``ContextCapture.prompted`` and ``answered`` on the same prompt and
answer: spanledger.attribution's work, not the handlers') is measured apart and taken off. So is
the request a top-level run opens for itself (once per query, not per call). Targets: <= 20 us
added with no request open; <= 100 us added with one open, the matching aside.

    python benchmarks/bench_llama_index_handlers.py
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index_instrumentation import get_dispatcher

import spanledger
from framework_texts import TEXTS
from spanledger.attribution import OpenRequest, Passage, current_request, open_request
from spanledger.integrations.llama_index import handlers

ROUNDS = 2000
NODES = [
    NodeWithScore(node=TextNode(text=text, id_=f"kb-{n}"), score=1.0)
    for n, text in enumerate(TEXTS)
]
PROMPT = "Cite as [n].\n" + "\n".join(f"Source {n + 1}:\n{text}" for n, text in enumerate(TEXTS))
ANSWER = "They feed on blood [1]. Deer carry them [2]."
dispatcher = get_dispatcher(__name__)


class Fixed(BaseRetriever):
    """Hands back the same 10 nodes."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return NODES


class Answering(CustomLLM):
    """Answers every prompt at once, reporting the tokens it read."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="bench-1")

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=ANSWER, raw={"usage": {"prompt_tokens": 2600}})

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        yield self.complete(prompt)


RETRIEVER = Fixed()
LLM = Answering()


@dispatcher.span
def inside_no_run(work: Callable[[], object]) -> object:
    """A top-level span that is no run (as an index being built): no request opens."""
    return work()


def retrieval() -> object:
    return RETRIEVER.retrieve("what do ticks eat?")


def model_call() -> object:
    return LLM.complete(PROMPT)


def timed(work: Callable[[], object], *, before: Callable[[], object] | None = None) -> float:
    """The median microseconds of ``work``, each round after an untimed ``before``."""
    samples = []
    gc.disable()
    try:
        for _ in range(ROUNDS):
            state = before() if before is not None else None
            start = time.perf_counter_ns()
            work()
            samples.append(time.perf_counter_ns() - start)
            if isinstance(state, OpenRequest):
                state.close()
    finally:
        gc.enable()
    return statistics.median(samples) / 1000


def fresh_request() -> OpenRequest:
    return open_request("bench")


def fresh_request_served() -> OpenRequest:
    opened = open_request("bench")
    opened.scope.context.served(
        [Passage(text, f"kb-{n}") for n, text in enumerate(TEXTS)], provider_id="Fixed"
    )
    return opened


def matching_alone() -> None:
    scope = current_request()
    assert scope is not None
    call = scope.context.prompted([PROMPT])
    scope.context.answered(call, ANSWER, input_tokens=2600)


def row(name: str, bare: float, on: float, aside: float = 0.0) -> str:
    added = on - bare - aside
    return f"{name:<34} {bare:8.1f}u {on:8.1f}u {aside:8.1f}u {added:8.1f}u {on / bare:6.2f}"


def main() -> None:
    with spanledger.use(spanledger.Recorder([])):
        for _ in range(200):  # warm up both paths
            inside_no_run(retrieval)
            inside_no_run(model_call)
        bare_retrieval = timed(lambda: inside_no_run(retrieval))
        bare_call = timed(lambda: inside_no_run(model_call))
        bare_in_request = timed(lambda: inside_no_run(retrieval), before=fresh_request)
        bare_call_in_request = timed(lambda: inside_no_run(model_call), before=fresh_request_served)
        bare_run = timed(retrieval)
        handlers.register()
        try:
            on_retrieval = timed(lambda: inside_no_run(retrieval))
            on_call = timed(lambda: inside_no_run(model_call))
            on_in_request = timed(lambda: inside_no_run(retrieval), before=fresh_request)
            on_call_in_request = timed(
                lambda: inside_no_run(model_call), before=fresh_request_served
            )
            run = timed(retrieval)  # a top-level retrieve on its own: heard, not followed
        finally:
            handlers.unregister()
        served = timed(
            lambda: current_request().context.served(  # type: ignore[union-attr]
                [Passage(text, f"kb-{n}") for n, text in enumerate(TEXTS)], provider_id="Fixed"
            ),
            before=fresh_request,
        )
        matching = timed(matching_alone, before=fresh_request_served)
    assert len(get_dispatcher().event_handlers) == 1
    print("spanledger's LlamaIndex handlers: median per call, against the same call bare")
    print(f"{'':<34} {'bare':>9} {'on':>9} {'aside':>9} {'added':>9} {'ratio':>6}")
    print(row("retrieval, no request open", bare_retrieval, on_retrieval))
    print(row("model call, no request open", bare_call, on_call))
    print(row("retrieval in a request", bare_in_request, on_in_request, served))
    print(row("model call in a request", bare_call_in_request, on_call_in_request, matching))
    print(row("a top-level retrieve, no request", bare_run, run))
    print(f"aside: serving 10 nodes {served:.1f}u; matching the prompt and answer {matching:.1f}u")
    print("targets: <= 20u added with no request open, <= 100u with one open (the aside aside)")


if __name__ == "__main__":
    main()
