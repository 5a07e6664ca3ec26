"""The RAG frameworks' own components, with the process-wide switch on, against the loopback
stand-in: each HTTP call is exactly one event, its figures are what the stand-in sent, the
framework's result is what it is with the switch off, and no input text reaches an event.

Covered here (all build their SDK client inside, so only the switch can reach them; each is
pointed at the stand-in through its own base-URL setting):
LangChain ``OpenAIEmbeddings``, ``VoyageAIEmbeddings`` and ``VoyageAIRerank``; LlamaIndex
``OpenAIEmbedding``; Haystack's ``CohereRanker`` and ``CohereDocumentEmbedder``.

Jina has no SDK: LangChain-community's ``JinaRerank`` posts through a ``requests`` session, and
Haystack's Jina components through a fresh ``httpx.Client`` per call, so they are recorded with
``http=True``. ``JinaRerank`` has no base-URL setting: its module's URL constant is pointed at
the stand-in. The frameworks that pin older SDKs are in ``tests/older_sdks``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from haystack import Document as HaystackDocument
from haystack.utils import Secret
from haystack_integrations.components.embedders.cohere import CohereDocumentEmbedder
from haystack_integrations.components.embedders.jina import JinaTextEmbedder
from haystack_integrations.components.rankers.cohere import CohereRanker
from haystack_integrations.components.rankers.jina import JinaRanker
from langchain_community.document_compressors import jina_rerank
from langchain_community.document_compressors.jina_rerank import JinaRerank
from langchain_core.documents import Document
from langchain_openai import OpenAIEmbeddings
from langchain_voyageai import VoyageAIEmbeddings, VoyageAIRerank
from llama_index.embeddings.openai import OpenAIEmbedding  # type: ignore[import-untyped]
from voyageai.client import Client as VoyageClient

import spanledger
from spanledger import EmbeddingEvent, Event, RerankEvent
from spanledger.testing import StandIn
from tests.frameworks.conftest import tokens
from tests.frameworks.privacy import Recording

API_KEY = "sk-framework-key-3f9a"
SENTINEL = "SENTINEL-framework-5c2e"
QUERY = f"what do ticks eat {SENTINEL}"
TEXTS = [
    f"ticks feed on the blood of mammals {SENTINEL}",
    f"the clock ticks every second {SENTINEL}",
    f"deer carry ticks through the woods {SENTINEL}",
]
PRIVATE = (SENTINEL, API_KEY)


def run(
    recording: Recording, work: Callable[[], Any], *, http: bool = False, **vendors: str
) -> tuple[Any, list[Event], int]:
    """``work``'s result with the switch on (``http``: other code's HTTP too, ``vendors``
    naming the stand-in's prefixes), the events it made, one per HTTP call and each private,
    and the HTTP calls it sent; checked against the same work with the switch off."""
    named = {recording.standin.base_url(name): vendor for name, vendor in vendors.items()}

    def switch_on() -> None:
        if http:
            spanledger.instrument(http=True, vendors=named or None)
        else:
            spanledger.instrument()

    result, events = recording.run(work, switch_on, comparable=_comparable)
    return result, events, len(recording.standin.requests)


def _comparable(result: Any) -> Any:
    if isinstance(result, list):
        return [_comparable(item) for item in result]
    if isinstance(result, dict):
        return {key: _comparable(value) for key, value in result.items()}
    if isinstance(result, Document):
        return (result.page_content, result.metadata)
    if isinstance(result, HaystackDocument):
        return (result.content, result.score, result.embedding)
    return result


def embedding_events(events: list[Event], calls: int, provider: str) -> list[EmbeddingEvent]:
    assert len(events) == calls
    assert all(isinstance(event, EmbeddingEvent) for event in events)
    found = [event for event in events if isinstance(event, EmbeddingEvent)]
    assert {event.provider for event in found} == {provider}
    return found


def test_langchain_openai_embeddings(standin: StandIn, recording: Recording) -> None:
    options: dict[str, Any] = {
        "model": "text-embedding-3-small",
        "base_url": standin.base_url("openai") + "/v1",
        "api_key": API_KEY,
        "check_embedding_ctx_length": False,  # no tiktoken download
        "max_retries": 0,
    }
    embedder = OpenAIEmbeddings(**options)
    vectors, events, calls = run(recording, lambda: embedder.embed_documents(TEXTS))
    assert len(vectors) == len(TEXTS)
    [event] = embedding_events(events, calls, "openai")
    assert event.usage is not None
    assert event.usage.input_tokens == sum(tokens(text) for text in TEXTS)
    assert event.input_count == len(TEXTS)


def test_langchain_voyage_embeddings(
    standin: StandIn, recording: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    # LangChain sizes Voyage batches with the SDK's tokenizer, which it downloads from Hugging
    # Face: stood in by a local one (no wire call; the tests touch only 127.0.0.1).
    monkeypatch.setattr(
        VoyageClient, "tokenize", lambda self, texts, model=None: [t.split() for t in texts]
    )
    options: dict[str, Any] = {
        "model": "voyage-3.5",
        "api_key": API_KEY,
        "base_url": standin.base_url("voyageai") + "/v1",
        "batch_size": 2,
    }
    embedder = VoyageAIEmbeddings(**options)
    vectors, events, calls = run(recording, lambda: embedder.embed_documents(TEXTS))
    assert len(vectors) == len(TEXTS)
    found = embedding_events(events, calls, "voyageai")
    assert calls == 2  # two batches, two HTTP calls, two events
    assert [event.input_count for event in found] == [2, 1]
    assert [event.usage.input_tokens if event.usage else None for event in found] == [
        tokens(TEXTS[0]) + tokens(TEXTS[1]),
        tokens(TEXTS[2]),
    ]


def test_langchain_voyage_rerank(standin: StandIn, recording: Recording) -> None:
    options: dict[str, Any] = {
        "model": "rerank-2.5",
        "api_key": API_KEY,
        "base_url": standin.base_url("voyageai") + "/v1",
        "top_k": 2,
    }
    reranker = VoyageAIRerank(**options)
    documents = [Document(page_content=text, id=f"kb-{n}") for n, text in enumerate(TEXTS)]
    kept, events, calls = run(recording, lambda: reranker.compress_documents(documents, QUERY))
    assert len(kept) == 2
    assert calls == 1
    [event] = events
    assert isinstance(event, RerankEvent)
    assert event.document_count == len(TEXTS)
    assert event.result_count == 2
    assert event.usage is not None
    assert event.usage.input_tokens == tokens(QUERY) * len(TEXTS) + sum(map(tokens, TEXTS))


def test_llama_index_openai_embedding(standin: StandIn, recording: Recording) -> None:
    embedder = OpenAIEmbedding(
        model="text-embedding-3-small",
        api_base=standin.base_url("openai") + "/v1",
        api_key=API_KEY,
        max_retries=0,
    )
    vectors, events, calls = run(recording, lambda: embedder.get_text_embedding_batch(TEXTS))
    assert len(vectors) == len(TEXTS)
    [event] = embedding_events(events, calls, "openai")
    assert event.usage is not None
    assert event.usage.input_tokens == sum(tokens(text) for text in TEXTS)


def test_haystack_cohere_ranker(standin: StandIn, recording: Recording) -> None:
    def rank() -> Any:
        ranker = CohereRanker(
            model="rerank-v3.5",
            api_key=Secret.from_token(API_KEY),
            api_base_url=standin.base_url("cohere"),
            top_k=2,
        )
        documents = [HaystackDocument(content=text) for text in TEXTS]
        return ranker.run(query=QUERY, documents=documents)["documents"]

    ranked, events, calls = run(recording, rank)
    assert len(ranked) == 2
    assert calls == 1
    [event] = events
    assert isinstance(event, RerankEvent)
    assert event.provider == "cohere"
    assert event.usage is not None
    assert event.usage.search_units == 1
    assert event.usage.input_tokens is None  # Cohere sent none: not reported, never 0


def test_haystack_cohere_document_embedder(standin: StandIn, recording: Recording) -> None:
    def embed() -> Any:
        embedder = CohereDocumentEmbedder(
            model="embed-v4.0",
            api_key=Secret.from_token(API_KEY),
            api_base_url=standin.base_url("cohere"),
            batch_size=2,
            progress_bar=False,
        )
        documents = [HaystackDocument(content=text) for text in TEXTS]
        embedded = embedder.run(documents)["documents"]
        return [getattr(document, "embedding", None) for document in embedded]

    vectors, events, calls = run(recording, embed)
    assert len(vectors) == len(TEXTS)
    found = embedding_events(events, calls, "cohere")
    assert calls == 2
    assert [event.input_count for event in found] == [2, 1]


def test_langchain_community_jina_rerank(
    standin: StandIn, recording: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jina_rerank, "JINA_API_URL", standin.base_url("jina") + "/v1/rerank")
    reranker = JinaRerank(jina_api_key=API_KEY, model="jina-reranker-v2-base-multilingual", top_n=2)
    documents = [Document(page_content=text) for text in TEXTS]

    ranked, events, calls = run(
        recording, lambda: reranker.compress_documents(documents, QUERY), http=True
    )
    assert len(ranked) == 2
    assert calls == 1
    [event] = events
    assert isinstance(event, RerankEvent)
    assert (event.provider, event.document_count, event.top_k, event.result_count) == (
        "jina",
        3,
        2,
        2,
    )
    assert event.usage is not None
    assert event.usage.input_tokens == tokens(QUERY) * 3 + sum(map(tokens, TEXTS))


def test_haystack_jina_ranker(standin: StandIn, recording: Recording) -> None:
    def rank() -> Any:
        ranker = JinaRanker(
            api_key=Secret.from_token(API_KEY),
            model="jina-reranker-v2-base-multilingual",
            top_k=2,
            base_url=standin.base_url("jina") + "/v1/rerank",
        )
        documents = [HaystackDocument(content=text) for text in TEXTS]
        return ranker.run(query=QUERY, documents=documents)["documents"]

    ranked, events, calls = run(recording, rank, http=True)
    assert (len(ranked), calls) == (2, 1)
    [event] = events
    assert isinstance(event, RerankEvent)
    assert (event.provider, event.result_count) == ("jina", 2)
    assert event.usage is not None


def test_haystack_jina_text_embedder(standin: StandIn, recording: Recording) -> None:
    """On a host that is not Jina's, its ``jina-`` model names the vendor."""

    def embed() -> Any:
        embedder = JinaTextEmbedder(
            api_key=Secret.from_token(API_KEY),
            model="jina-embeddings-v3",
            base_url=standin.base_url("jina") + "/v1/embeddings",
        )
        return embedder.run(QUERY)["embedding"]

    vector, events, calls = run(recording, embed, http=True)
    [event] = embedding_events(events, calls, "jina")
    assert (event.input_count, event.dimensions) == (1, len(vector))
    assert event.usage is not None
    assert event.usage.input_tokens == tokens(QUERY)
