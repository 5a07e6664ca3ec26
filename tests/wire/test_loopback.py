"""Every vendor over a real socket on 127.0.0.1, through both the sync and the async driver."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import spanledger
from spanledger import ErrorCategory, Event, ProviderError
from spanledger.events import EmbeddingResponse, RerankResponse
from spanledger.providers import (
    CohereEmbeddings,
    CohereReranker,
    EmbeddingProvider,
    JinaEmbeddings,
    JinaReranker,
    OpenAIEmbeddings,
    RerankProvider,
    TEIEmbeddings,
    TEIReranker,
    VoyageEmbeddings,
    VoyageReranker,
)
from spanledger.testing import StandIn

EMBEDDERS: dict[str, tuple[Callable[..., EmbeddingProvider], bool]] = {
    "openai": (OpenAIEmbeddings, True),
    "cohere": (CohereEmbeddings, True),
    "jina": (JinaEmbeddings, True),
    "tei": (TEIEmbeddings, False),
    "voyageai": (VoyageEmbeddings, True),
}
RERANKERS: dict[str, Callable[..., RerankProvider]] = {
    "cohere": CohereReranker,
    "jina": JinaReranker,
    "tei": TEIReranker,
    "voyageai": VoyageReranker,
}
MODES = ["sync", "async"]
DOCS = ["the moon pulls the sea", "lighthouses warn ships", "tides follow the moon"]


def embed(
    provider: EmbeddingProvider, mode: str, inputs: list[str], **kw: Any
) -> EmbeddingResponse:
    if mode == "sync":
        return provider.embed(inputs, **kw)

    async def run() -> EmbeddingResponse:
        try:
            return await provider.aembed(inputs, **kw)
        finally:
            await provider.aclose()

    return asyncio.run(run())


def rerank(
    provider: RerankProvider, mode: str, query: str, docs: list[str], **kw: Any
) -> RerankResponse:
    if mode == "sync":
        return provider.rerank(query, docs, **kw)

    async def run() -> RerankResponse:
        try:
            return await provider.arerank(query, docs, **kw)
        finally:
            await provider.aclose()

    return asyncio.run(run())


def make_embedder(standin: StandIn, vendor: str, model: str, **kw: Any) -> EmbeddingProvider:
    cls, _ = EMBEDDERS[vendor]
    base_url = standin.base_url(vendor, model if vendor == "tei" else None)
    return cls(model, base_url=base_url, api_key="test-key", **kw)


def make_reranker(standin: StandIn, vendor: str, model: str, **kw: Any) -> RerankProvider:
    base_url = standin.base_url(vendor, model if vendor == "tei" else None)
    return RERANKERS[vendor](model, base_url=base_url, api_key="test-key", **kw)


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture(autouse=True)
def recording(events: list[Event]) -> Any:
    with spanledger.use(spanledger.Recorder([events.append])):
        yield


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vendor", sorted(EMBEDDERS))
def test_embed_succeeds_with_one_event(
    standin: StandIn, events: list[Event], vendor: str, mode: str
) -> None:
    provider = make_embedder(standin, vendor, "embed-model")
    with provider:
        response = embed(provider, mode, ["alpha beta", "gamma"])
    assert len(response.vectors) == 2
    assert response.dimensions == 16
    reports_usage = EMBEDDERS[vendor][1]
    assert (response.usage is not None) is reports_usage
    [event] = events
    assert isinstance(event, spanledger.EmbeddingEvent)
    assert event.usage == response.usage
    assert event.server_address == "127.0.0.1"
    assert event.server_port == int(standin.url.rsplit(":", 1)[1])
    assert event.input_count == 2


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vendor", sorted(RERANKERS))
def test_rerank_succeeds_sorted_with_one_event(
    standin: StandIn, events: list[Event], vendor: str, mode: str
) -> None:
    provider = make_reranker(standin, vendor, "rerank-model")
    with provider:
        response = rerank(provider, mode, "moon tides", DOCS, top_k=2)
    assert [r.index for r in response.results] == [2, 0]
    scores = [r.relevance_score for r in response.results]
    assert scores == sorted(scores, reverse=True)
    [event] = events
    assert isinstance(event, spanledger.RerankEvent)
    assert event.result_count == 2
    assert event.usage == response.usage
    if vendor == "cohere":
        assert response.usage == spanledger.RerankUsage(search_units=1)
    elif vendor == "tei":
        assert response.usage is None
    else:
        assert response.usage is not None
        assert response.usage.input_tokens


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vendor", sorted(EMBEDDERS))
def test_rate_limit_carries_retry_after(
    standin: StandIn, events: list[Event], vendor: str, mode: str
) -> None:
    before = len(standin.requests)
    provider = make_embedder(standin, vendor, "fail-429")
    with provider, pytest.raises(ProviderError) as caught:
        embed(provider, mode, ["x"])
    assert caught.value.category is ErrorCategory.RATE_LIMIT
    assert caught.value.retry_after == 2.0
    assert len(standin.requests) - before == 1  # never retried
    [event] = events
    assert isinstance(event, spanledger.EmbeddingFailedEvent)
    assert (event.status_code, event.retry_after) == (429, 2.0)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("status", "category"),
    [
        (400, ErrorCategory.INVALID_REQUEST),
        (401, ErrorCategory.AUTHENTICATION),
        (404, ErrorCategory.INVALID_MODEL),
        (413, ErrorCategory.INVALID_REQUEST),
        (422, ErrorCategory.INVALID_REQUEST),
        (500, ErrorCategory.UNAVAILABLE),
        (503, ErrorCategory.UNAVAILABLE),
    ],
)
@pytest.mark.parametrize("vendor", sorted(RERANKERS))
def test_error_statuses_classify_by_status(
    standin: StandIn,
    events: list[Event],
    vendor: str,
    status: int,
    category: ErrorCategory,
    mode: str,
) -> None:
    provider = make_reranker(standin, vendor, f"fail-{status}")
    with provider, pytest.raises(ProviderError) as caught:
        rerank(provider, mode, "q", DOCS)
    assert caught.value.category is category
    assert caught.value.status_code == status
    assert caught.value.fingerprint is not None
    [event] = events
    assert isinstance(event, spanledger.RerankFailedEvent)
    assert event.error_category is category


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vendor", ["openai", "tei"])
def test_slow_response_trips_timeout(
    standin: StandIn, events: list[Event], vendor: str, mode: str
) -> None:
    provider = make_embedder(standin, vendor, "slow-1500", timeout=0.2)
    with provider, pytest.raises(ProviderError) as caught:
        embed(provider, mode, ["x"])
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    [event] = events
    assert isinstance(event, spanledger.EmbeddingFailedEvent)
    assert event.error_type == "ReadTimeout"
    assert 150 <= event.latency_ms < 1400


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("vendor", ["cohere", "jina", "voyageai"])
def test_connection_reset_is_unavailable(
    standin: StandIn, events: list[Event], vendor: str, mode: str
) -> None:
    provider = make_reranker(standin, vendor, "reset")
    with provider, pytest.raises(ProviderError) as caught:
        rerank(provider, mode, "q", DOCS)
    assert caught.value.category is ErrorCategory.UNAVAILABLE
    assert caught.value.status_code is None
    assert len(events) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", ["usage-malformed", "usage-missing"])
@pytest.mark.parametrize("vendor", ["openai", "cohere", "jina", "voyageai"])
def test_bad_or_missing_usage_is_not_reported(
    standin: StandIn, events: list[Event], vendor: str, model: str, mode: str
) -> None:
    provider = make_embedder(standin, vendor, model)
    with provider:
        response = embed(provider, mode, ["x", "y"])
    assert response.usage is None
    assert events[0].usage is None  # type: ignore[union-attr]
    assert len(response.vectors) == 2


@pytest.mark.parametrize("mode", MODES)
def test_tei_chunks_what_the_server_would_refuse(
    standin: StandIn, events: list[Event], mode: str
) -> None:
    before = len(standin.requests)
    texts = [f"text {i}" for i in range(70)]
    provider = make_embedder(standin, "tei", "bge")
    with provider:
        response = embed(provider, mode, texts)
    sent = standin.requests[before:]
    assert [len(r.json()["inputs"]) for r in sent] == [32, 32, 6]
    assert len(response.vectors) == 70
    assert isinstance(response.raw, list)
    assert len(response.raw) == 3
    assert len(events) == 1


@pytest.mark.parametrize("mode", MODES)
def test_tei_rerank_chunks_and_rebases(standin: StandIn, events: list[Event], mode: str) -> None:
    docs = [f"filler {i}" for i in range(40)]
    docs[37] = "moon tides moon"
    docs[3] = "tides"
    provider = make_reranker(standin, "tei", "bge-reranker")
    with provider:
        response = rerank(provider, mode, "moon tides", docs, top_k=2)
    assert [r.index for r in response.results] == [37, 3]
    assert len(events) == 1


def test_async_calls_run_concurrently_one_event_each(standin: StandIn, events: list[Event]) -> None:
    async def run() -> list[RerankResponse]:
        async with JinaReranker("rr", base_url=standin.base_url("jina")) as provider:
            with spanledger.request("turn-7") as scope:
                results = await asyncio.gather(*(provider.arerank("moon", DOCS) for _ in range(12)))
            assert len(scope.events) == 12
            return list(results)

    results = asyncio.run(run())
    assert len(results) == 12
    assert len(events) == 12
    assert len({e.call_id for e in events}) == 12
    assert {e.request_id for e in events} == {"turn-7"}
