"""What spanledger's LangChain callback handler adds to a retriever run and a chat-model run,
against the same runs through langchain-core with no spanledger handler, in the same run.

A retriever run is ``BaseRetriever.invoke`` of a retriever handing back 10 documents of 1 KB;
a model run is ``BaseChatModel.invoke`` of langchain-core's ``GenericFakeChatModel`` answering
at once with a reported usage (no network). Both are measured bare first (langchain-core's
configure hook holds the handler for the life of the process once it is registered, so bare
comes before ``spanledger.instrument(sdks=["langchain_core"])``), then switched on with no
request open, then inside ``with spanledger.request(...)``, then switched off again.

With no request open, a root retriever or model run is not followed (on its own it has nothing
to attribute), so all the handler adds is hearing it. Inside an open request the run joins it,
and the capture's own work, which is spanledger.attribution's and not the handler's, is
measured apart by hand and taken off (the "aside"): serving the 10 documents; matching the
prompt and reading the answer. Targets: <= 20 us added with no
request open, <= 100 us with one open, the aside aside. Absolute times mean little on a busy
machine: the ratio to the bare run of the same process is the figure to compare.

    python benchmarks/bench_langchain_handler.py
"""

from __future__ import annotations

import gc
import itertools
import os
import statistics
import time
from collections.abc import Callable

# No LangSmith tracer (nor network) in any of the runs.
os.environ.pop("LANGSMITH_TRACING", None)
os.environ.pop("LANGSMITH_TRACING_V2", None)
os.environ.pop("LANGCHAIN_TRACING_V2", None)

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.retrievers import BaseRetriever

import spanledger
from framework_texts import TEXTS
from spanledger.attribution import Passage, RequestScope
from spanledger.integrations.langchain import switch

ROUNDS = 2000
OUT = 20.0
"""Target: microseconds added per run with no request open."""
IN = 100.0
"""Target: microseconds added per run inside an open request, the capture's own work aside."""
DOCUMENTS = [Document(page_content=text, id=f"kb-{n}") for n, text in enumerate(TEXTS)]
PASSAGES = [Passage(text, f"kb-{n}") for n, text in enumerate(TEXTS)]
SYSTEM = "Answer from the sources only. Cite as [n]."
PROMPT = "\n".join(f"Source {n + 1}:\n{text}" for n, text in enumerate(TEXTS))
PROMPT += "\n\nWhat do ticks eat?"
MESSAGES: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(PROMPT)]
ANSWER = "They feed on blood [1]. Deer carry them [2]."
REPLY = AIMessage(
    content=ANSWER,
    usage_metadata={"input_tokens": 2600, "output_tokens": 14, "total_tokens": 2614},
)


class Fixed(BaseRetriever):
    """Hands back the same 10 documents."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return DOCUMENTS


RETRIEVER = Fixed()
MODEL = GenericFakeChatModel(messages=itertools.cycle([REPLY]))


def retrieval() -> object:
    return RETRIEVER.invoke("what do ticks eat?")


def model_call() -> object:
    return MODEL.invoke(MESSAGES)


def serve(scope: RequestScope) -> None:
    scope.context.served(PASSAGES, provider_id="Fixed", selected=True)


def match(scope: RequestScope) -> None:
    call = scope.context.prompted([SYSTEM, PROMPT])
    scope.context.answered(call, ANSWER, input_tokens=2600)


Setup = Callable[[RequestScope], object]


def timed(work: Callable[[], object], *, request: Setup | None = None) -> float:
    """The median microseconds of ``work``; with ``request``, each round inside a
    ``spanledger.request`` block of its own, ``request`` done in it untimed first (the block
    opened and closed, and its report made, outside the timing)."""
    samples = []
    gc.disable()
    try:
        for number in range(ROUNDS):
            if request is None:
                start = time.perf_counter_ns()
                work()
                samples.append(time.perf_counter_ns() - start)
                continue
            with spanledger.request(f"bench-{number}") as scope:
                request(scope)
                start = time.perf_counter_ns()
                work()
                samples.append(time.perf_counter_ns() - start)
    finally:
        gc.enable()
    return statistics.median(samples) / 1000


def with_capture(work: Callable[[], object], capture: Setup) -> Callable[[], object]:
    """``work`` (bare), then the capture's own work done by hand in the open request, in the
    same round: what the handler has spanledger.attribution do, without the handler."""

    def both() -> None:
        work()
        capture(spanledger.current_request())  # type: ignore[arg-type]

    return both


def nothing(scope: RequestScope) -> None:
    """No setup: the request opened and nothing in it yet."""


def row(name: str, bare: float, by_hand: float, on: float, target: float | None) -> str:
    """``aside``: the capture by hand (``by_hand`` less ``bare``); ``added``: what the run with
    the handler takes over the bare run with the capture done by hand."""
    added = on - by_hand
    verdict = "" if target is None else ("PASS" if added <= target else "FAIL")
    limit = "" if target is None else f"<={target:.0f}u"
    return (
        f"{name:<32} {bare:8.1f}u {on:8.1f}u {by_hand - bare:8.1f}u {added:8.1f}u"
        f" {on / bare:6.2f} {limit:>7} {verdict}"
    )


def main() -> None:
    with spanledger.use(spanledger.Recorder([])):
        for _ in range(200):  # warm up both paths
            retrieval()
            model_call()
        bare_retrieval = timed(retrieval)
        bare_call = timed(model_call)
        bare_retrieval_in = timed(retrieval, request=nothing)
        bare_call_in = timed(model_call, request=serve)
        hand_retrieval_in = timed(with_capture(retrieval, serve), request=nothing)
        hand_call_in = timed(with_capture(model_call, match), request=serve)

        spanledger.instrument(sdks=["langchain_core"])
        try:
            assert switch.handler() is not None, "the handler is not registered"
            for _ in range(200):
                retrieval()
                model_call()
            on_retrieval = timed(retrieval)
            on_call = timed(model_call)
            on_retrieval_in = timed(retrieval, request=nothing)
            on_call_in = timed(model_call, request=serve)
        finally:
            spanledger.uninstrument()
        off_retrieval = timed(retrieval)
        off_call = timed(model_call)

    print("spanledger's LangChain handler: median per run, against the same run bare")
    print(
        f"{'':<32} {'bare':>9} {'on':>9} {'aside':>9} {'added':>9} {'ratio':>6} "
        f"{'target':>7} verdict"
    )
    print(row("retriever, no request open", bare_retrieval, bare_retrieval, on_retrieval, OUT))
    print(row("model call, no request open", bare_call, bare_call, on_call, OUT))
    print(row("retriever in a request", bare_retrieval_in, hand_retrieval_in, on_retrieval_in, IN))
    print(row("model call in a request", bare_call_in, hand_call_in, on_call_in, IN))
    print(row("retriever, switched off again", bare_retrieval, bare_retrieval, off_retrieval, None))
    print(row("model call, switched off again", bare_call, bare_call, off_call, None))
    print(
        "no request open: a root retriever or model run is not followed (nothing to attribute),"
        " so nothing is aside; a model call's figure includes langchain-core's own checks of"
        " any handler it is given"
    )
    print(
        "aside: the capture done by hand in the same round as the bare run (serving the 10"
        " documents; matching the prompt and answer)"
    )
    print(
        f"targets: <= {OUT:.0f}u added with no request open, <= {IN:.0f}u with one open"
        " (the aside aside); ratio: on / bare"
    )


if __name__ == "__main__":
    main()
