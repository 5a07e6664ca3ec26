"""LangChain pipelines attributed with no hand-written call: after ``spanledger.instrument()``
the served, selected, rendered and cited sets of a real LangChain run are captured by the
handler langchain-core adds to every run (``spanledger.integrations.langchain``).

Every model and vector store call goes to the loopback stand-in (``ChatOpenAI``,
``OpenAIEmbeddings``, Voyage's reranker); the counts by hand are read from the prompt the
stand-in received. A sentinel rides in every document, question and answer, and must appear in
no span, log line, event-log record or exception.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from langchain_classic.agents import AgentExecutor, create_tool_calling_agent
from langchain_classic.chains import create_retrieval_chain
from langchain_classic.chains.combine_documents import create_stuff_documents_chain
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, PromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from langchain_core.tools import create_retriever_tool
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_openai import ChatOpenAI, OpenAIEmbeddings
from langchain_voyageai import VoyageAIRerank
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import Event, JsonlSink, Recorder
from spanledger.attribution import (
    AttributionReport,
    Evidence,
    Passage,
    ProblemKind,
    RequestScope,
    current_request,
)
from spanledger.attribution.context import ContextCapture
from spanledger.events import AttributionRecord, EmbeddingEvent, RerankEvent
from spanledger.exporters.otel import OtelExporter
from spanledger.integrations.langchain import switch
from spanledger.testing import RecordedRequest, Reply, Route, StandIn, openai_chat_completions

SENTINEL = "SENTINEL-lc-7f3a"
API_KEY = "test-key-lc-0c41"
PRIVATE = (SENTINEL, API_KEY)
PASSAGES = (
    f"Ticks feed on the blood of deer and mice {SENTINEL}.",
    f"Clocks tick every second {SENTINEL}, and some of them chime on the hour.",
    f"Deer carry ticks from one wood to the next {SENTINEL}.",
)
QUESTION = f"What do ticks eat {SENTINEL}?"
SWITCHED = ["langchain_core", "openai", "voyageai"]
AUTO = re.compile(r"langchain:RunnableSequence:[0-9a-f]{12}")


def tokens(text: str) -> int:
    """Accounting tokens of a text: a token per four UTF-8 bytes, rounded up."""
    return math.ceil(len(text.encode("utf-8")) / 4)


def answering(*labels: str) -> Callable[[str], str]:
    """A scripted answer citing ``labels`` (``"1"``: ``[1]``), with the sentinel in it."""
    return lambda prompt: " ".join(f"So the notes say [{label}] {SENTINEL}." for label in labels)


class Kept:
    """A sink keeping the events and the attribution records it is handed."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.records: list[AttributionRecord] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def attribution(self, record: AttributionRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept(standin: StandIn) -> Iterator[Kept]:
    """The switch on for LangChain and the SDKs it calls, a recorder keeping what it hears."""
    standin.reset()
    found = Kept()
    spanledger.instrument(sdks=SWITCHED)
    try:
        with spanledger.use(Recorder([found])):
            yield found
    finally:
        spanledger.uninstrument()
    handler = switch.handler()
    assert handler is not None
    assert len(handler.runs) == 0  # every run that started was forgotten when it ended


# --------------------------------------------------------------------------- the pipelines


def embeddings(standin: StandIn) -> OpenAIEmbeddings:
    options: dict[str, Any] = {
        "model": "text-embedding-3-small",
        "base_url": standin.base_url("openai") + "/v1",
        "api_key": API_KEY,
        "check_embedding_ctx_length": False,  # no tiktoken download
        "max_retries": 0,
    }
    return OpenAIEmbeddings(**options, **clients())


def chat(standin: StandIn) -> ChatOpenAI:
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=standin.base_url("openai") + "/v1",
        api_key=API_KEY,
        max_retries=0,
        **clients(),
    )


def clients() -> dict[str, Any]:
    """HTTP clients of its own for a LangChain OpenAI class: LangChain shares one async client
    per address across instances, which a later test's event loop cannot use."""
    return {
        "http_client": openai.DefaultHttpxClient(),
        "http_async_client": openai.DefaultAsyncHttpxClient(),
    }


def store(standin: StandIn, passages: Sequence[str] = PASSAGES) -> InMemoryVectorStore:
    """The passages in an in-memory vector store, ``kb-<n>`` each, numbered ``ref`` from 1."""
    found = InMemoryVectorStore(embeddings(standin))
    found.add_documents(
        [
            Document(text, id=f"kb-{n}", metadata={"ref": str(n + 1)})
            for n, text in enumerate(passages)
        ]
    )
    return found


def sources(documents: list[Document]) -> str:
    return "\n\n".join(f"Source {n}:\n{doc.page_content}" for n, doc in enumerate(documents, 1))


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer from the sources and cite them as [n].\n\n{context}"), ("human", "{q}")]
)


def lcel(retriever: Runnable[str, list[Document]], llm: Any) -> Runnable[str, str]:
    """retriever -> numbered sources -> prompt -> model -> text."""
    chain: Runnable[str, str] = (
        {"context": retriever | sources, "q": RunnablePassthrough()}
        | PROMPT
        | llm
        | StrOutputParser()
    )
    return chain


def probed(chain: Runnable[Any, Any], seen: list[RequestScope | None]) -> Runnable[Any, Any]:
    """``chain`` followed by a step noting the request current where it runs."""

    def note(value: Any) -> Any:
        seen.append(current_request())
        return value

    return chain | RunnableLambda(note)


def prompt_of(request: RecordedRequest) -> str:
    return "\n".join(m.get("content") or "" for m in request.json()["messages"])


def chats(standin: StandIn) -> list[RecordedRequest]:
    return [r for r in standin.requests if r.path.endswith("/chat/completions")]


def in_order(prompt: str, passages: Sequence[str] = PASSAGES) -> list[str]:
    """The passages ``prompt`` holds, in the order it holds them."""
    return sorted((p for p in passages if p in prompt), key=prompt.index)


def ids(report: AttributionReport, flag: str) -> set[str]:
    """The frame ids of the uses with ``flag`` (``served``: every use)."""
    return {u.frame.frame_id for u in report.uses if flag == "served" or getattr(u, flag)}


def frame_of(text: str) -> str:
    return f"kb-{PASSAGES.index(text)}"


def share(cited: Sequence[str], rendered: Sequence[str]) -> float:
    return sum(map(tokens, cited)) / sum(map(tokens, rendered))


# --------------------------------------------------------------------------- LCEL


def test_an_lcel_chain_is_attributed_with_no_call_of_its_own(standin: StandIn, kept: Kept) -> None:
    standin.route(openai_chat_completions(answer=answering("2")))
    chain = lcel(store(standin).as_retriever(search_kwargs={"k": 2}), chat(standin))
    kept.events.clear()
    with spanledger.request("turn-1") as turn:
        answer = chain.invoke(QUESTION)
        report = turn.report(emit=False)
    assert "[2]" in answer
    [sent] = chats(standin)
    rendered = in_order(prompt_of(sent))
    assert len(rendered) == 2
    assert ids(report.attribution, "served") == {frame_of(p) for p in rendered}
    assert ids(report.attribution, "selected") == {frame_of(p) for p in rendered}
    assert ids(report.attribution, "rendered") == {frame_of(p) for p in rendered}
    assert ids(report.attribution, "cited") == {frame_of(rendered[1])}
    assert {u.evidence for u in report.attribution.uses if u.cited} == {Evidence.PROMPT_LABEL}
    assert report.attribution.cited_token_share() == share([rendered[1]], rendered)
    assert report.attribution.is_reconcilable()
    # the query's embedding, made inside the run, joined the request
    [query] = [e for e in turn.events if isinstance(e, EmbeddingEvent)]
    assert query.request_id == "turn-1"
    # the run joined the open request (which reported itself at its end): none of its own
    assert [record.request_id for record in kept.records] == ["turn-1"]


def test_a_run_outside_any_request_is_a_request_of_its_own(standin: StandIn, kept: Kept) -> None:
    standin.route(openai_chat_completions(answer=answering("1")))
    seen: list[RequestScope | None] = []
    chain = probed(lcel(store(standin).as_retriever(search_kwargs={"k": 3}), chat(standin)), seen)
    kept.events.clear()
    chain.invoke(QUESTION)
    [scope] = seen
    assert scope is not None
    assert AUTO.fullmatch(scope.request_id)
    [record] = kept.records
    assert record.request_id == scope.request_id
    assert (record.frames_served, record.frames_rendered, record.frames_cited) == (3, 3, 1)
    assert record.model_calls == 1
    rendered = in_order(prompt_of(chats(standin)[0]))
    assert record.cited_token_share == share(rendered[:1], rendered)
    [query] = kept.events
    assert query.request_id == scope.request_id
    assert current_request() is None  # nothing stays current after the run


# --------------------------------------------------------------------------- reranked


def test_a_compression_retriever_serves_candidates_and_selects_the_reranked(
    standin: StandIn, kept: Kept
) -> None:
    standin.route(openai_chat_completions(answer=answering("1")))
    reranker = VoyageAIRerank(
        model="rerank-2.5",
        api_key=API_KEY,
        base_url=standin.base_url("voyageai") + "/v1",
        top_k=2,
    )
    retriever = ContextualCompressionRetriever(
        base_compressor=reranker,
        base_retriever=store(standin).as_retriever(search_kwargs={"k": 3}),
    )
    chain = lcel(retriever, chat(standin))
    with spanledger.request("turn-2") as turn:
        chain.invoke(QUESTION)
        report = turn.report(emit=False)
    rendered = in_order(prompt_of(chats(standin)[0]))
    assert len(rendered) == 2
    # Voyage's copies carry no id: the reranked documents are the frames served before
    assert ids(report.attribution, "served") == {"kb-0", "kb-1", "kb-2"}
    assert ids(report.attribution, "selected") == {frame_of(p) for p in rendered}
    assert ids(report.attribution, "rendered") == {frame_of(p) for p in rendered}
    assert ids(report.attribution, "cited") == {frame_of(rendered[0])}
    assert {u.frame.provider_id for u in report.attribution.uses} == {"VectorStoreRetriever"}
    assert report.attribution.cited_token_share() == share(rendered[:1], rendered)
    assert report.attribution.is_reconcilable()
    [rerank] = [e for e in turn.events if isinstance(e, RerankEvent)]
    assert rerank.request_id == "turn-2"
    assert (rerank.document_count, rerank.result_count) == (3, 2)


# --------------------------------------------------------------------------- legacy chains


def test_create_retrieval_chain_is_attributed(standin: StandIn, kept: Kept) -> None:
    """The stuffed documents carry their own ``[ref]`` labels; the stand-in's default answer
    cites the first two labels the prompt gives."""
    documents = create_stuff_documents_chain(
        chat(standin),
        ChatPromptTemplate.from_messages(
            [("system", "Cite the notes as [n].\n\n{context}"), ("human", "{input}")]
        ),
        document_prompt=PromptTemplate.from_template("[{ref}] {page_content}"),
    )
    chain = create_retrieval_chain(store(standin).as_retriever(search_kwargs={"k": 3}), documents)
    with spanledger.request("turn-3") as turn:
        out = chain.invoke({"input": QUESTION})
        report = turn.report(emit=False)
    prompt = prompt_of(chats(standin)[0])
    rendered = in_order(prompt)
    first_two = re.findall(r"^\[(\d)\]", prompt, re.MULTILINE)[:2]
    cited = [PASSAGES[int(label) - 1] for label in first_two]
    assert out["answer"].count("[") == 2
    assert (
        ids(report.attribution, "rendered")
        == {frame_of(p) for p in rendered}
        == ids(report.attribution, "served")
    )
    assert ids(report.attribution, "cited") == {frame_of(p) for p in cited}
    assert report.attribution.cited_token_share() == share(cited, rendered)


# --------------------------------------------------------------------------- an agent


def agent_turns(query: str) -> Route:
    """OpenAI chat completions for a tool-calling agent: a call of ``search_notes`` until the
    tool answered, then an answer citing the first source the tool's answer labels."""

    def respond(request: RecordedRequest) -> Reply:
        body = request.json()
        messages = body["messages"]
        if not any(m.get("role") == "tool" for m in messages):
            call = {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "search_notes", "arguments": json.dumps({"query": query})},
            }
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            found = re.search(r"Source (\d+):", messages[-1]["content"])
            label = found.group(1) if found else "9"
            message = {"role": "assistant", "content": answering(label)("")}
            finish = "stop"
        usage = {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
        head = {"id": "chatcmpl-agent", "created": 1764806400, "model": "gpt-4o-mini"}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            return Reply(
                200, {**head, "object": "chat.completion", "choices": [choice]} | {"usage": usage}
            )
        chunks = [
            {"index": 0, "delta": message, "finish_reason": None},
            {"index": 0, "delta": {}, "finish_reason": finish},
        ]
        lines = [
            {**head, "object": "chat.completion.chunk", "choices": [chunk]} for chunk in chunks
        ]
        lines.append({**head, "object": "chat.completion.chunk", "choices": [], "usage": usage})
        sse = "".join(f"data: {json.dumps(line)}\n\n" for line in lines) + "data: [DONE]\n\n"
        return Reply(200, raw=sse.encode(), headers={"content-type": "text/event-stream"})

    return Route("openai", "/v1/chat/completions", respond)


def test_an_agent_with_a_retriever_tool_is_attributed(standin: StandIn, kept: Kept) -> None:
    standin.route(agent_turns("ticks"))
    tool = create_retriever_tool(
        store(standin).as_retriever(search_kwargs={"k": 2}),
        "search_notes",
        "Search the notes.",
        document_prompt=PromptTemplate.from_template("Source {ref}:\n{page_content}"),
    )
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Answer from the notes; cite them as [n]."),
            ("human", "{input}"),
            ("placeholder", "{agent_scratchpad}"),
        ]
    )
    agent = AgentExecutor(
        agent=create_tool_calling_agent(chat(standin), [tool], prompt), tools=[tool]
    )
    with spanledger.request("turn-4") as turn:
        out = agent.invoke({"input": QUESTION})
        report = turn.report(emit=False)
    first, second = chats(standin)
    assert in_order(prompt_of(first)) == []
    tool_said = second.json()["messages"][-1]["content"]
    rendered = in_order(tool_said)
    [label, *_] = re.findall(r"Source (\d):", tool_said)
    assert f"[{label}]" in out["output"]
    cited = PASSAGES[int(label) - 1]
    assert len(rendered) == 2
    assert ids(report.attribution, "served") == {frame_of(p) for p in rendered}
    assert ids(report.attribution, "rendered") == {frame_of(p) for p in rendered}
    assert ids(report.attribution, "cited") == {frame_of(cited)}
    assert report.attribution.cited_token_share() == share([cited], rendered)
    assert len(turn.context.calls()) == 2
    assert [call.input_tokens for call in turn.context.calls()] == [40, 40]
    assert {call.provider for call in turn.context.calls()} == {"openai"}
    assert {call.model for call in turn.context.calls()} == {"gpt-4o-mini"}


# --------------------------------------------------------------------------- what is cited


def test_a_label_no_passage_carries_is_an_unknown_label(standin: StandIn, kept: Kept) -> None:
    standin.route(openai_chat_completions(answer=answering("1", "7")))
    chain = lcel(store(standin).as_retriever(search_kwargs={"k": 2}), chat(standin))
    with spanledger.request("turn-5") as turn:
        chain.invoke(QUESTION)
        report = turn.report(emit=False)
    rendered = in_order(prompt_of(chats(standin)[0]))
    assert ids(report.attribution, "cited") == {frame_of(rendered[0])}
    kinds = [problem.kind for problem in report.attribution.problems()]
    assert kinds == [ProblemKind.UNKNOWN_LABEL]


def cited_by_anthropic(text: str, citations: list[dict[str, Any]]) -> AIMessage:
    """An answer as langchain-anthropic hands it over: text blocks carrying the provider's
    citations, which LangChain's own translator turns into ``Citation`` annotations."""
    return AIMessage(
        content=[{"type": "text", "text": text, "citations": citations}],
        response_metadata={"model_provider": "anthropic"},
        usage_metadata={"input_tokens": 120, "output_tokens": 12, "total_tokens": 132},
    )


def as_document_blocks(documents: list[Document]) -> list[HumanMessage]:
    blocks: list[str | dict[str, Any]] = [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": d}}
        for d in (doc.page_content for doc in documents)
    ]
    blocks.append({"type": "text", "text": QUESTION})
    return [HumanMessage(content=blocks)]


class Fixed(BaseRetriever):
    """A retriever handing back the same documents every time (after ``wait``, if given)."""

    documents: list[Document]
    wait: Any = None

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.wait is not None:
            self.wait()
        return list(self.documents)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        if self.wait is not None:
            await self.wait()
        return list(self.documents)


DOCUMENTS = [Document(text, id=f"kb-{n}") for n, text in enumerate(PASSAGES)]


def test_the_providers_own_citations_are_the_strongest_evidence(kept: Kept) -> None:
    """Anthropic-style citations: one names the document by its index among the request's
    document blocks, one only quotes a passage whole; a label in the text is weaker."""
    answer = cited_by_anthropic(
        f"Ticks drink blood [3] {SENTINEL}.",
        [
            {"type": "char_location", "cited_text": "feed on", "document_index": 0},
            {"type": "char_location", "cited_text": PASSAGES[1]},
        ],
    )
    model = GenericFakeChatModel(messages=iter([answer]))
    chain = Fixed(documents=DOCUMENTS) | RunnableLambda(as_document_blocks) | model
    with spanledger.request("turn-6") as turn:
        chain.invoke(QUESTION)
        report = turn.report(emit=False)
    attribution = report.attribution
    assert ids(attribution, "rendered") == {"kb-0", "kb-1", "kb-2"}
    assert ids(attribution, "cited") == {"kb-0", "kb-1"}
    assert {u.frame.frame_id: u.evidence for u in attribution.uses if u.cited} == {
        "kb-0": Evidence.PROVIDER_CITATION,
        "kb-1": Evidence.PROVIDER_CITATION,
    }
    assert attribution.cited_token_share() == share(PASSAGES[:2], PASSAGES)
    [call] = turn.context.calls()
    assert call.input_tokens == 120


def test_a_retriever_or_a_model_run_on_its_own_opens_no_request(kept: Kept) -> None:
    """With no request open, a bare retriever or model call serves or renders nothing another
    run could attribute: no request is opened for it, and no record written."""
    seen: list[RequestScope | None] = []

    class Probe(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            seen.append(current_request())
            return DOCUMENTS

    Probe().invoke(QUESTION)
    FakeListChatModel(responses=["So [1]."]).invoke([HumanMessage(sources(DOCUMENTS))])
    assert seen == [None]
    assert kept.records == []
    with spanledger.request("turn-9") as turn:  # inside a request, the same runs join it
        Probe().invoke(QUESTION)
        FakeListChatModel(responses=["So [1]."]).invoke([HumanMessage(sources(DOCUMENTS))])
        report = turn.report(emit=False)
    assert seen[1] is turn
    assert ids(report.attribution, "cited") == {"kb-0"}


def test_documents_passed_beside_the_messages_are_rendered(kept: Kept) -> None:
    """A chat model given ``documents=`` (Cohere's grounded chat) renders them though no
    message holds them."""
    model = FakeListChatModel(responses=[f"Ticks drink blood {SENTINEL}."])
    with spanledger.request("turn-7") as turn:
        served = Fixed(documents=DOCUMENTS).invoke(QUESTION)
        model.invoke([HumanMessage(QUESTION)], documents=served[:2])
        report = turn.report(emit=False)
    assert ids(report.attribution, "rendered") == {"kb-0", "kb-1"}
    assert ids(report.attribution, "cited") == set()


def test_model_calls_inside_a_retriever_are_retrieval_not_answers(kept: Kept) -> None:
    """A retriever whose own model call judges every candidate (a filter, a query rewriter):
    only the answering call renders frames and counts."""

    class Judged(BaseRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            judge = FakeListChatModel(responses=["YES"])
            judge.invoke(sources(DOCUMENTS), config={"callbacks": run_manager.get_child()})
            return DOCUMENTS[:1]

    model = FakeListChatModel(responses=[f"So the notes say [1] {SENTINEL}."])
    with spanledger.request("turn-8") as turn:
        lcel(Judged(), model).invoke(QUESTION)
        report = turn.report(emit=False)
    assert len(turn.context.calls()) == 1
    assert ids(report.attribution, "served") == {"kb-0"}
    assert ids(report.attribution, "rendered") == ids(report.attribution, "cited") == {"kb-0"}


# --------------------------------------------------------------------------- requests apart


HALVES = (
    [Document(f"Apples grow on trees in the orchard {SENTINEL}.", id="a-0")],
    [Document(f"Bees make honey from the nectar of flowers {SENTINEL}.", id="b-0")],
)


def two_chains(
    standin: StandIn, wait: Any
) -> tuple[Runnable[str, Any], Runnable[str, Any], list[RequestScope | None]]:
    """Two chains over disjoint documents whose retrievers wait for each other (so the runs
    overlap), each embedding its query first, and the requests current where they end."""
    seen: list[RequestScope | None] = []
    embedder = embeddings(standin)
    embedder.embed_query("warm")  # the SDK switch takes a client over at its first call
    chains = []
    for half in HALVES:

        def embedded(query: str) -> str:
            embedder.embed_query(query)
            return query

        async def aembedded(query: str) -> str:
            await embedder.aembed_query(query)
            return query

        step = RunnableLambda(embedded, afunc=aembedded)
        chains.append(probed(lcel(step | Fixed(documents=half, wait=wait), chat(standin)), seen))
    return chains[0], chains[1], seen


def assert_apart(kept: Kept, scopes: Sequence[RequestScope | None]) -> None:
    """Each request holds only its own documents and its own query's embedding."""
    assert len({id(scope) for scope in scopes}) == 2
    for scope in scopes:
        assert scope is not None
        report = scope.report(emit=False).attribution
        served = ids(report, "served")
        assert served in ({"a-0"}, {"b-0"})
        assert ids(report, "cited") == served
        mine = [e for e in kept.events if e.request_id == scope.request_id]
        print(
            "DBG",
            scope.request_id,
            [(type(e).__name__, e.request_id) for e in kept.events],
            scope.events,
        )
        assert [type(e) for e in mine] == [EmbeddingEvent]
    assert all(e.request_id is not None for e in kept.events)


@pytest.mark.parametrize("opened", [False, True], ids=["own requests", "in requests"])
def test_runs_in_threads_at_once_never_mix(standin: StandIn, kept: Kept, opened: bool) -> None:
    standin.route(openai_chat_completions(answer=answering("1")))
    barrier = threading.Barrier(2, timeout=10)
    first, second, seen = two_chains(standin, barrier.wait)
    kept.events.clear()

    def run(chain: Runnable[str, Any], name: str) -> None:
        if opened:
            with spanledger.request(name):
                chain.invoke(QUESTION)
        else:
            chain.invoke(QUESTION)

    with ThreadPoolExecutor(2) as pool:  # carry: the threads hear the test's recorder
        runs = [pool.submit(spanledger.carry(run), first, "t-a")]
        runs.append(pool.submit(spanledger.carry(run), second, "t-b"))
        for done in runs:
            done.result()
    assert_apart(kept, seen)
    assert len(kept.records) == 2


@pytest.mark.parametrize("opened", [False, True], ids=["own requests", "in requests"])
async def test_async_runs_at_once_never_mix(standin: StandIn, kept: Kept, opened: bool) -> None:
    standin.route(openai_chat_completions(answer=answering("1")))
    arrived = 0
    both = asyncio.Event()

    async def meet() -> None:
        nonlocal arrived
        arrived += 1
        if arrived == 2:
            both.set()
        await asyncio.wait_for(both.wait(), 10)

    first, second, seen = two_chains(standin, meet)
    kept.events.clear()

    async def run(chain: Runnable[str, Any], name: str) -> None:
        if opened:
            with spanledger.request(name):
                await chain.ainvoke(QUESTION)
        else:
            await chain.ainvoke(QUESTION)

    await asyncio.gather(run(first, "t-a"), run(second, "t-b"))
    assert_apart(kept, seen)
    assert len(kept.records) == 2
    # LangChain ends an async run in a copy of the caller's context: nothing the runs made
    # current stays current here, so a call after them joins no request
    assert current_request() is None
    await embeddings(standin).aembed_query("after")
    assert kept.events[-1].request_id is None


def test_a_batch_is_one_request_per_input(standin: StandIn, kept: Kept) -> None:
    """``RunnableSequence.batch`` starts every input's run in one context before any step runs
    and ends them in order (here the roots, and the bound sequence inside them): each input is
    still a request of its own, and nothing stays current after the batch."""
    standin.route(openai_chat_completions(answer=answering("1")))
    seen: list[RequestScope | None] = []
    inner = lcel(store(standin).as_retriever(), chat(standin)).with_config(run_name="answer")
    chain = probed(RunnableLambda(lambda q: q) | inner, seen)
    kept.events.clear()
    chain.batch([QUESTION, f"Where do deer live {SENTINEL}?"])
    assert len({id(scope) for scope in seen}) == 2
    names = {scope.request_id for scope in seen if scope is not None}
    assert {record.request_id for record in kept.records} == names
    assert sorted(e.request_id or "" for e in kept.events) == sorted(names)
    assert current_request() is None


def test_a_failed_root_run_closes_its_request(standin: StandIn, kept: Kept) -> None:
    standin.route(openai_chat_completions().failing(400))
    chain = lcel(store(standin).as_retriever(search_kwargs={"k": 2}), chat(standin))
    with pytest.raises(Exception, match="400"):
        chain.invoke(QUESTION)
    [record] = kept.records
    assert AUTO.fullmatch(record.request_id)
    assert (record.frames_served, record.frames_rendered, record.frames_cited) == (2, 2, 0)
    assert current_request() is None


# --------------------------------------------------------------------------- by hand, alike


def test_the_hand_api_and_the_capture_agree_on_one_turn(standin: StandIn, kept: Kept) -> None:
    """The same documents, prompt and answer, once captured from LangChain and once handed to
    the capture API by hand, give the same report."""
    said = answering("2")("")
    standin.route(openai_chat_completions(answer=said))
    chain = lcel(store(standin).as_retriever(search_kwargs={"k": 3}), chat(standin))
    with spanledger.request("captured") as captured:
        chain.invoke(QUESTION)
        auto = captured.report(emit=False)
    [sent] = chats(standin)
    messages = [message["content"] for message in sent.json()["messages"]]
    served = in_order("\n".join(messages))
    with spanledger.request("by-hand") as hand:
        hand.context.served(
            [Passage(text, frame_of(text)) for text in served], provider_id="VectorStoreRetriever"
        )
        call = hand.context.prompted(messages)
        hand.context.answered(
            call,
            said,
            input_tokens=tokens("\n".join(messages)),
            provider="openai",
            model="gpt-4o-mini",
        )
        manual = hand.report(emit=False)
    assert auto.attribution.uses == manual.attribution.uses
    assert auto.attribution.problems() == manual.attribution.problems() == []
    assert auto.attribution.cited_token_share() == manual.attribution.cited_token_share()
    assert auto.attribution.rendered_tokens() == manual.attribution.rendered_tokens()
    [(auto_call, manual_call)] = zip(captured.context.calls(), hand.context.calls(), strict=True)
    assert captured.context.rendered_chars(auto_call) == hand.context.rendered_chars(manual_call)
    for field in ("input_tokens", "provider", "model", "answered"):
        assert getattr(auto_call, field) == getattr(manual_call, field)


# --------------------------------------------------------------------------- never in the way


def test_no_text_reaches_a_span_a_log_line_or_the_event_log(
    standin: StandIn, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    standin.reset()
    standin.route(openai_chat_completions(answer=answering("1", "2")))
    caplog.set_level(logging.DEBUG)
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    log = tmp_path / "events.jsonl"
    sinks = [OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider)]
    recorder = Recorder([*sinks, JsonlSink(log)])
    spanledger.instrument(sdks=SWITCHED)
    try:
        with spanledger.use(recorder):
            chain = lcel(store(standin).as_retriever(search_kwargs={"k": 2}), chat(standin))
            chain.invoke(QUESTION)
            asyncio.run(chain.ainvoke(QUESTION))
            with spanledger.request("turn-9"):
                chain.invoke(QUESTION)
        recorder.shutdown()
    finally:
        spanledger.uninstrument()
        tracer_provider.shutdown()
        meter_provider.shutdown()
    written = log.read_text()
    assert written.count('"kind":"attribution"') == 3
    finished = spans.get_finished_spans()
    assert len([s for s in finished if s.attributes and "spanledger.request_id" in s.attributes])
    for span in finished:
        shown = " ".join(
            [span.name, repr(dict(span.attributes or {})), repr(span.status.description)]
            + [f"{event.name} {dict(event.attributes or {})}" for event in span.events]
        )
        for private in PRIVATE:
            assert private not in shown
    for private in PRIVATE:
        assert private not in written
        assert private not in caplog.text


def test_a_failure_of_the_capture_never_reaches_the_run(
    standin: StandIn, kept: Kept, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The capture raising (with the run's text in its message) leaves the run's result as it
    was, raises nothing, and is logged once, by type."""
    standin.route(openai_chat_completions(answer=answering("1")))
    chain = lcel(store(standin).as_retriever(search_kwargs={"k": 2}), chat(standin))
    bare = chain.invoke(QUESTION)

    def broken(self: ContextCapture, parts: Sequence[str]) -> Any:
        raise ValueError(f"cannot read {parts[0]}")

    monkeypatch.setattr(ContextCapture, "prompted", broken)
    caplog.set_level(logging.DEBUG)
    with spanledger.request("turn-10"):
        assert chain.invoke(QUESTION) == bare
        assert chain.invoke(QUESTION) == bare
    failed = [r for r in caplog.records if "instrumentation_failed" in r.getMessage()]
    assert [r.getMessage() for r in failed] == ["instrumentation_failed error_type='ValueError'"]
    for private in PRIVATE:
        assert private not in caplog.text


def test_the_handler_is_registered_once_and_inert_when_switched_off(
    standin: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_core.tracers import context as hooks

    from spanledger.integrations.langchain.handler import LedgerCallbackHandler as Handler

    for _ in range(3):
        spanledger.instrument(sdks=["langchain_core"])
        spanledger.uninstrument()
    registered = [var for var, *_ in hooks._configure_hooks if isinstance(var.get(), Handler)]
    assert len(registered) == 1
    handler = switch.handler()
    assert handler is not None
    assert not handler.on
    heard: list[str] = []
    monkeypatch.setattr(Handler, "_guarded", lambda self, work, *args: heard.append(work.__name__))
    model = FakeListChatModel(responses=[f"So the notes say [1] {SENTINEL}."])
    with spanledger.request("turn-11") as turn:
        lcel(Fixed(documents=DOCUMENTS), model).invoke(QUESTION)
    assert heard == []
    assert not turn.context.captured
    assert turn.frames.report().uses == ()


def test_switching_off_mid_run_ends_what_was_in_flight(standin: StandIn) -> None:
    """A run still going when the switch goes off is heard no more: its request ends then,
    and nothing of it is kept."""
    records: list[AttributionRecord] = []
    sink = type("Records", (), {"emit": lambda self, e: None, "attribution": records.append})()
    model = FakeListChatModel(responses=[f"So the notes say [1] {SENTINEL}."])

    def switch_off(documents: list[Document]) -> list[Document]:
        spanledger.uninstrument()
        return documents

    chain = lcel(Fixed(documents=DOCUMENTS) | RunnableLambda(switch_off), model)
    spanledger.instrument(sdks=["langchain_core"])
    with spanledger.use(Recorder([sink])):
        chain.invoke(QUESTION)
    assert current_request() is None
    handler = switch.handler()
    assert handler is not None
    assert len(handler.runs) == 0
    [record] = records
    assert record.frames_served == 3


def test_the_switch_waits_for_the_program_to_import_langchain() -> None:
    """Switching on imports nothing of LangChain; the handler is registered when langchain-core
    itself first imports its hooks (configuring a first run), and hears that run."""
    code = """
import sys
import spanledger
from spanledger.integrations.langchain import switch
spanledger.instrument(sdks=["langchain_core"])
assert "langchain_core" not in sys.modules
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
assert switch.handler() is None or "langchain_core.tracers.context" in sys.modules
model = FakeListChatModel(responses=["It says so [1]."])
with spanledger.request("first") as turn:
    model.invoke("Source 1: ticks feed on blood")
print(len(turn.context.calls()), switch.handler() is not None)
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "True"]
