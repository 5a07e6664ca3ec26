"""The integrations that pin older SDKs, with those SDKs: cohere 5.x under langchain-cohere and
LlamaIndex's ``CohereRerank``, voyageai 0.3.x under LlamaIndex's ``VoyageAIRerank`` (by the
switch, and by ``http=True`` with the switch on for other SDKs only).

Each drives the framework's own object against the loopback stand-in, once without spanledger
and once with it: exactly one event per HTTP call, the figures the stand-in sent, the framework's
result unchanged, and no input text or key in any event or log line. Runs in ``.venv-older`` only.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
from collections.abc import Iterator
from typing import Any

import cohere
import pytest
from langchain_cohere import CohereEmbeddings, CohereRerank
from langchain_core.documents import Document
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.postprocessor.cohere_rerank import CohereRerank as LlamaCohereRerank
from llama_index.postprocessor.voyageai_rerank import VoyageAIRerank

import spanledger
from spanledger import EmbeddingEvent, Event, RerankEvent
from spanledger.instrumentation import instrumented_sdks
from spanledger.testing import StandIn
from tests.frameworks.conftest import tokens
from tests.frameworks.privacy import Recording

API_KEY = "sk-older-sdks-4a9d"
SENTINEL = "SENTINEL-older-sdks-19f0"
QUERY = f"what do ticks eat {SENTINEL}"
TEXTS = [f"passage {i} on ticks {SENTINEL}" for i in range(200)]  # v1 batches: 96, 96, 8
FEW = TEXTS[:3]
PRIVATE = (SENTINEL, API_KEY)


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def recording(standin: StandIn, caplog: pytest.LogCaptureFixture) -> Recording:
    """Each framework's work bare, then recorded: the same result, one event per HTTP call,
    nothing of ``PRIVATE`` in an event or a log line."""
    return Recording(standin, caplog, PRIVATE)


def cohere_on() -> None:
    spanledger.instrument(sdks=["cohere"])


def batch_tokens(texts: list[str]) -> list[int]:
    return sorted(sum(tokens(t) for t in texts[i : i + 96]) for i in range(0, len(texts), 96))


def by_tokens(events: list[Event]) -> list[int]:
    found = []
    for event in events:
        assert isinstance(event, EmbeddingEvent)
        assert event.usage is not None
        assert event.usage.input_tokens is not None
        found.append(event.usage.input_tokens)
    return sorted(found)


def test_the_sdks_are_the_pinned_ones() -> None:
    assert importlib.metadata.version("cohere").startswith("5.")
    assert importlib.metadata.version("voyageai").startswith("0.3.")
    assert importlib.metadata.version("openai").startswith("2.")
    assert importlib.metadata.version("ollama") == "0.5.4"


def test_the_switch_takes_voyageai_0_3() -> None:
    spanledger.instrument(sdks=["voyageai", "cohere"])
    try:
        assert instrumented_sdks() == ("voyageai", "cohere")
    finally:
        spanledger.uninstrument()


@pytest.mark.parametrize("kind", ["ClientV2", "Client"])
@pytest.mark.parametrize("mode", ["per-client", "process-wide"])
def test_cohere_5_clients_record_each_http_call(
    standin: StandIn, recording: Recording, kind: str, mode: str
) -> None:
    client = getattr(cohere, kind)(api_key=API_KEY, base_url=standin.base_url("cohere"))

    def work() -> Any:
        embedded = client.embed(
            model="embed-english-v3.0",
            texts=TEXTS if kind == "Client" else FEW,
            input_type="search_document",
            **({"embedding_types": ["float"]} if kind == "ClientV2" else {}),
        )
        reranked = client.rerank(model="rerank-v3.5", query=QUERY, documents=FEW, top_n=2)
        return embedded.embeddings, [(r.index, r.relevance_score) for r in reranked.results]

    def switch_on() -> None:
        if mode == "per-client":
            spanledger.instrument(client)
        else:
            cohere_on()

    _, events = recording.run(work, switch_on)
    *embeds, rerank = events
    assert by_tokens(embeds) == batch_tokens(TEXTS if kind == "Client" else FEW)
    assert isinstance(rerank, RerankEvent)
    assert rerank.usage is not None
    assert (rerank.usage.search_units, rerank.result_count) == (1, 2)
    spanledger.uninstrument(client)


def test_langchain_cohere_embeddings_sync_and_async(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        # made afresh each time: its async client stays bound to the event loop it first ran in
        embedder = CohereEmbeddings(
            model="embed-english-v3.0", cohere_api_key=API_KEY, base_url=standin.base_url("cohere")
        )
        documents = embedder.embed_documents(TEXTS)
        query = asyncio.run(embedder.aembed_query(QUERY))
        return documents, query

    _, events = recording.run(work, cohere_on)
    assert by_tokens(events) == sorted([*batch_tokens(TEXTS), tokens(QUERY)])


def test_langchain_cohere_rerank(standin: StandIn, recording: Recording) -> None:
    reranker = CohereRerank(
        model="rerank-v3.5", cohere_api_key=API_KEY, base_url=standin.base_url("cohere"), top_n=2
    )
    documents = [Document(page_content=text, id=f"d{i}") for i, text in enumerate(FEW)]

    def work() -> Any:
        return [
            (d.id, d.metadata["relevance_score"])
            for d in reranker.compress_documents(documents, QUERY)
        ]

    _, events = recording.run(work, cohere_on)
    [event] = events
    assert isinstance(event, RerankEvent)
    assert (event.document_count, event.result_count) == (3, 2)
    assert event.usage is not None
    assert event.usage.search_units == 1


def nodes() -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=text, id_=f"n{i}")) for i, text in enumerate(FEW)]


def test_llama_index_cohere_rerank(standin: StandIn, recording: Recording) -> None:
    reranker = LlamaCohereRerank(
        top_n=2, model="rerank-v3.5", api_key=API_KEY, base_url=standin.base_url("cohere")
    )

    def work() -> Any:
        ranked = reranker.postprocess_nodes(nodes(), QueryBundle(QUERY))
        return [(n.node.node_id, n.score) for n in ranked]

    _, events = recording.run(work, cohere_on)
    [event] = events
    assert isinstance(event, RerankEvent)
    assert (event.provider, event.document_count, event.result_count) == ("cohere", 3, 2)


@pytest.mark.parametrize("way", ["switch", "http"])
def test_llama_index_voyage_rerank(
    standin: StandIn, recording: Recording, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    """voyageai 0.3 under the switch, or with the switch on for Cohere only, its ``requests``
    calls recorded by ``http=True``. ``VoyageAIRerank`` takes no base URL: the SDK's default is
    pointed at the stand-in, the framework's code is not touched."""
    import voyageai._base

    origin = standin.base_url("voyageai") + "/v1"
    monkeypatch.setattr(voyageai._base, "get_default_base_url", lambda key: origin)
    reranker = VoyageAIRerank(model="rerank-2.5", api_key=API_KEY, top_n=2)

    def work() -> Any:
        ranked = reranker.postprocess_nodes(nodes(), QueryBundle(QUERY))
        return [(n.node.node_id, n.score) for n in ranked]

    def switch_on() -> None:
        if way == "switch":
            spanledger.instrument(sdks=["voyageai"])
        else:
            spanledger.instrument(sdks=["cohere"], http=True)

    _, events = recording.run(work, switch_on)
    [event] = events
    assert isinstance(event, RerankEvent)
    assert (event.provider, event.document_count, event.top_k, event.result_count) == (
        "voyageai",
        3,
        2,
        2,
    )
    assert event.usage is not None
    assert event.usage.input_tokens == tokens(QUERY) * 3 + sum(map(tokens, FEW))
