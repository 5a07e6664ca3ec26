"""OtelExporter spans: one live CLIENT span per call, GenAI attributes, failures, parenting."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import httpx
import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

import spanledger
from spanledger import ProviderError
from spanledger.events import EmbeddingEvent, Event, RerankEvent
from spanledger.exporters.otel import OtelExporter
from spanledger.providers import CohereEmbeddings
from spanledger.testing import StandIn

from .conftest import (
    STARTED_AT,
    OtelRig,
    Providers,
    all_text,
    closed_port,
    embedding_event,
    embedding_failed_event,
    rerank_event,
    rerank_failed_event,
)

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

RESPONSE_DERIVED = (
    "gen_ai.usage.input_tokens",
    "gen_ai.response.id",
    "gen_ai.response.model",
    "gen_ai.embeddings.dimension.count",
    "spanledger.rerank.result_count",
    "spanledger.usage.search_units",
)


def exact_ns(moment: datetime) -> int:
    """``moment`` in integer nanoseconds since the epoch, without float rounding."""
    return (moment - EPOCH) // timedelta(microseconds=1) * 1000


def port_of(standin: StandIn) -> int:
    port = urlsplit(standin.url).port
    assert port is not None
    return port


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    value: int = span.context.span_id
    return value


def parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


# --------------------------------------------------------------------------- attributes


def test_embedding_span_name_kind_and_attributes(
    otel: OtelRig, providers: Providers, standin: StandIn
) -> None:
    embedder = providers.embedder("cohere", "embed-v4.0", otel.recorder)
    with spanledger.request("r1"):
        embedder.embed(["hello world", "second text"], input_type="query")

    span = otel.only_span()
    (event,) = otel.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is not None
    assert span.name == "embeddings embed-v4.0"
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is not StatusCode.ERROR
    attributes = dict(span.attributes or {})
    expected = {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "cohere",
        "gen_ai.request.model": "embed-v4.0",
        "gen_ai.response.id": event.response_id,
        "gen_ai.usage.input_tokens": event.usage.input_tokens,
        "gen_ai.embeddings.dimension.count": 16,
        "server.address": "127.0.0.1",
        "server.port": port_of(standin),
        "spanledger.embedding.input_count": 2,
        "spanledger.embedding.input_type": "query",
        "spanledger.call_id": event.call_id,
        "spanledger.request_id": "r1",
    }
    assert expected.items() <= attributes.items()
    assert event.response_id is not None
    assert event.response_id.startswith("standin-")
    assert event.usage.input_tokens == 6  # ceil(11 / 4) + ceil(11 / 4) from the stand-in
    assert "gen_ai.response.model" not in attributes  # Cohere embed reports no model
    assert "gen_ai.request.top_k" not in attributes


def test_reported_response_model_is_set_and_unreported_id_is_absent(
    otel: OtelRig, providers: Providers
) -> None:
    providers.embedder("openai", "text-embedding-3-small", otel.recorder).embed(["a"])

    attributes = dict(otel.only_span().attributes or {})
    assert attributes["gen_ai.response.model"] == "text-embedding-3-small"
    assert "gen_ai.response.id" not in attributes  # the OpenAI stand-in sends no id


def test_optional_request_attributes_are_absent_when_not_set(
    otel: OtelRig, providers: Providers
) -> None:
    providers.embedder("cohere", "embed-v4.0", otel.recorder).embed(["a"])

    attributes = dict(otel.only_span().attributes or {})
    assert "spanledger.embedding.input_type" not in attributes
    assert "spanledger.request_id" not in attributes
    assert attributes["spanledger.call_id"] == otel.events[0].call_id


@pytest.mark.parametrize(
    ("vendor", "model"),
    [("tei", "BAAI/bge-small-en-v1.5"), ("cohere", "usage-missing"), ("openai", "usage-missing")],
)
def test_input_tokens_are_absent_never_zero_when_not_reported(
    otel: OtelRig, providers: Providers, vendor: str, model: str
) -> None:
    providers.embedder(vendor, model, otel.recorder).embed(["some text"])

    (event,) = otel.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is None
    attributes = dict(otel.only_span().attributes or {})
    assert "gen_ai.usage.input_tokens" not in attributes
    assert 0 not in [v for k, v in attributes.items() if "usage" in k]
    assert attributes["gen_ai.embeddings.dimension.count"] == 16


def test_cohere_rerank_span_attributes(
    otel: OtelRig, providers: Providers, standin: StandIn
) -> None:
    reranker = providers.reranker("cohere", "rerank-v3.5", otel.recorder)
    with spanledger.request("r1"):
        reranker.rerank("héllo wörld", ["hello doc", "world doc", "other"], top_k=2)

    span = otel.only_span()
    (event,) = otel.events
    assert isinstance(event, RerankEvent)
    assert span.name == "rerank rerank-v3.5"
    assert span.kind is SpanKind.CLIENT
    attributes = dict(span.attributes or {})
    expected = {
        "gen_ai.operation.name": "rerank",
        "gen_ai.provider.name": "cohere",
        "gen_ai.request.model": "rerank-v3.5",
        "gen_ai.request.top_k": 2,
        "gen_ai.response.id": "standin-rerank",
        "server.address": "127.0.0.1",
        "server.port": port_of(standin),
        "spanledger.rerank.query_length": len("héllo wörld".encode()),
        "spanledger.rerank.document_count": 3,
        "spanledger.rerank.result_count": 2,
        "spanledger.usage.search_units": 1,
        "spanledger.call_id": event.call_id,
        "spanledger.request_id": "r1",
    }
    assert expected.items() <= attributes.items()
    assert "gen_ai.usage.input_tokens" not in attributes  # Cohere bills search units only


def test_token_billed_rerank_without_top_k(otel: OtelRig, providers: Providers) -> None:
    providers.reranker("jina", "jina-reranker-v2", otel.recorder).rerank("q", ["a", "b", "c"])

    (event,) = otel.events
    assert isinstance(event, RerankEvent)
    assert event.usage is not None
    assert event.usage.input_tokens is not None
    attributes = dict(otel.only_span().attributes or {})
    assert "gen_ai.request.top_k" not in attributes
    assert "spanledger.usage.search_units" not in attributes
    assert attributes["gen_ai.usage.input_tokens"] == event.usage.input_tokens
    assert attributes["spanledger.rerank.result_count"] == 3
    assert attributes["gen_ai.response.model"] == "jina-reranker-v2"


def test_rerank_without_reported_usage_has_no_usage_attributes(
    otel: OtelRig, providers: Providers
) -> None:
    providers.reranker("cohere", "usage-missing", otel.recorder).rerank("q", ["a", "b"])

    attributes = dict(otel.only_span().attributes or {})
    assert "spanledger.usage.search_units" not in attributes
    assert "gen_ai.usage.input_tokens" not in attributes
    assert attributes["spanledger.rerank.result_count"] == 2


# --------------------------------------------------------------------------- live span


def test_span_parents_under_the_callers_span_and_context_is_restored(
    otel: OtelRig, providers: Providers
) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    embedder = providers.embedder("cohere", "embed-v4.0", otel.recorder)
    with tracer.start_as_current_span("parent") as parent:
        embedder.embed(["a"])
        assert trace.get_current_span() is parent
        with pytest.raises(ProviderError):
            embedder.embed([])  # refused before sending: still one span, still restored
        assert trace.get_current_span() is parent
    assert trace.get_current_span() is trace.INVALID_SPAN

    spans = otel.call_spans()
    assert len(spans) == 2
    parent_context = parent.get_span_context()
    for span in spans:
        assert span.context is not None
        assert parent_id(span) == parent_context.span_id
        assert span.context.trace_id == parent_context.trace_id


def test_two_exporters_in_one_recorder_restore_the_callers_context(
    otel: OtelRig, providers: Providers
) -> None:
    second = OtelExporter(tracer_provider=otel.tracer_provider, enable_metrics=False)
    recorder = spanledger.Recorder([otel.exporter, second])
    tracer = otel.tracer_provider.get_tracer("test")
    embedder = providers.embedder("cohere", "embed-v4.0", recorder)
    with tracer.start_as_current_span("parent") as parent:
        embedder.embed(["a"])
        assert trace.get_current_span() is parent
        embedder.embed(["b"])
        assert trace.get_current_span() is parent

    spans = otel.call_spans()
    assert len(spans) == 4
    outer = [span for span in spans if parent_id(span) == parent.get_span_context().span_id]
    inner = [span for span in spans if span not in outer]
    assert len(outer) == 2  # the first exporter's spans; the second's nest under them
    assert {parent_id(span) for span in inner} == {span_id(span) for span in outer}


def test_http_client_span_from_an_event_hook_is_a_child_of_the_call_span(
    otel: OtelRig, providers: Providers
) -> None:
    tracer = otel.tracer_provider.get_tracer("http-client")
    seen_current: list[str] = []

    def on_request(request: httpx.Request) -> None:
        current = trace.get_current_span()
        seen_current.append(getattr(current, "name", ""))
        tracer.start_span(f"HTTP {request.method}").end()

    with httpx.Client(event_hooks={"request": [on_request]}) as client:
        providers.embedder("cohere", "embed-v4.0", otel.recorder, http_client=client).embed(["a"])

    call_span = otel.only_span()
    (hook_span,) = [span for span in otel.spans() if span.name == "HTTP POST"]
    assert seen_current == ["embeddings embed-v4.0"]
    assert parent_id(hook_span) == span_id(call_span)


class _SpanningTransport(httpx.BaseTransport):
    """Wraps the real transport in a span covering the whole exchange (as HTTP instrumentation)."""

    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer
        self._inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        with self._tracer.start_as_current_span("HTTP exchange"):
            response = self._inner.handle_request(request)
            response.read()
            return response

    def close(self) -> None:
        self._inner.close()


def test_call_span_covers_the_real_call(otel: OtelRig, providers: Providers) -> None:
    transport = _SpanningTransport(otel.tracer_provider.get_tracer("http-client"))
    with httpx.Client(transport=transport) as client:
        providers.embedder("cohere", "slow-200", otel.recorder, http_client=client).embed(["a"])

    call_span = otel.only_span()
    (exchange,) = [span for span in otel.spans() if span.name == "HTTP exchange"]
    assert call_span.start_time is not None
    assert call_span.end_time is not None
    assert exchange.start_time is not None
    assert exchange.end_time is not None
    assert call_span.end_time - call_span.start_time >= 200_000_000
    assert parent_id(exchange) == span_id(call_span)
    assert call_span.start_time <= exchange.start_time
    assert exchange.end_time <= call_span.end_time


class _AsyncSpanningTransport(httpx.AsyncBaseTransport):
    def __init__(self, tracer: trace.Tracer) -> None:
        self._tracer = tracer
        self._inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        with self._tracer.start_as_current_span("HTTP exchange"):
            response = await self._inner.handle_async_request(request)
            await response.aread()
            return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def test_concurrent_async_reranks_each_get_their_own_span(
    otel: OtelRig, providers: Providers
) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    transport = _AsyncSpanningTransport(otel.tracer_provider.get_tracer("http-client"))
    async with httpx.AsyncClient(transport=transport) as client:
        reranker = providers.reranker("cohere", "slow-150", otel.recorder, async_http_client=client)
        with tracer.start_as_current_span("parent") as parent:
            results = await asyncio.gather(
                *(reranker.arerank(f"query {i}", ["a", "b", "c"]) for i in range(4))
            )
            assert trace.get_current_span() is parent
    assert len(results) == 4

    call_spans = otel.call_spans()
    exchanges = [span for span in otel.spans() if span.name == "HTTP exchange"]
    assert len(call_spans) == 4
    assert len(exchanges) == 4
    parent_span_id = parent.get_span_context().span_id
    assert all(parent_id(span) == parent_span_id for span in call_spans)
    # each exchange nests under its own call span: a one-to-one match
    assert sorted(parent_id(span) or 0 for span in exchanges) == sorted(
        span_id(span) for span in call_spans
    )
    call_ids = {(span.attributes or {})["spanledger.call_id"] for span in call_spans}
    assert call_ids == {event.call_id for event in otel.events}
    # the calls really overlapped: every span starts before every other one ends
    latest_start = max(span.start_time or 0 for span in call_spans)
    earliest_end = min(span.end_time or 0 for span in call_spans)
    assert latest_start < earliest_end
    for span in call_spans:
        assert span.end_time is not None
        assert span.start_time is not None
        assert span.end_time - span.start_time >= 150_000_000


def test_concurrent_threads_each_parent_their_span_under_their_own_caller(
    make_otel: Callable[..., OtelRig], providers: Providers
) -> None:
    otel = make_otel(capture_payload=True)  # the payload names the calling thread
    tracer = otel.tracer_provider.get_tracer("test")
    embedder = providers.embedder("cohere", "slow-100", otel.recorder)
    parents: dict[str, int] = {}
    leftovers: list[object] = []
    lock = threading.Lock()

    def worker(name: str) -> None:
        with tracer.start_as_current_span(name) as parent:
            embedder.embed([name])
            with lock:
                parents[name] = parent.get_span_context().span_id
                leftovers.append(trace.get_current_span() is parent)
        with lock:
            leftovers.append(trace.get_current_span() is trace.INVALID_SPAN)

    threads = [threading.Thread(target=worker, args=(f"caller-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)

    assert leftovers == [True] * 8
    call_spans = otel.call_spans()
    assert len(call_spans) == 4
    by_caller = {
        json.loads(str((span.attributes or {})["spanledger.embedding.inputs"]))[0]: parent_id(span)
        for span in call_spans
    }
    assert by_caller == parents


async def test_cancelled_async_call_ends_its_span_and_restores_context(
    otel: OtelRig, providers: Providers
) -> None:
    tracer = otel.tracer_provider.get_tracer("test")
    async with httpx.AsyncClient() as client:
        embedder = providers.embedder(
            "cohere", "slow-2000", otel.recorder, async_http_client=client
        )
        with tracer.start_as_current_span("parent") as parent:
            task = asyncio.ensure_future(embedder.aembed(["a"]))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert trace.get_current_span() is parent

    span = otel.only_span()
    assert span.end_time is not None
    assert span.status.status_code is StatusCode.ERROR
    assert parent_id(span) == parent.get_span_context().span_id


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("operation", ["embeddings", "rerank"])
def test_failed_call_span(otel: OtelRig, providers: Providers, operation: str) -> None:
    call = providers.failing_call(operation, otel.recorder)
    with pytest.raises(ProviderError):
        call()

    span = otel.only_span()
    assert span.name == f"{operation} fail-429"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "provider_rate_limit"
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == "provider_rate_limit"
    assert attributes["http.response.status_code"] == 429
    assert attributes["spanledger.call_id"] == otel.events[0].call_id
    for name in RESPONSE_DERIVED:
        assert name not in attributes, name
    (exception,) = [event for event in span.events if event.name == "exception"]
    exception_attributes = dict(exception.attributes or {})
    assert exception_attributes["exception.type"]
    assert exception_attributes["exception.message"]
    # the vendor's error body ("stand-in error 429") never reaches the span
    assert "stand-in error" not in all_text([span])


def test_transport_failure_has_no_status_code(otel: OtelRig) -> None:
    unreachable = CohereEmbeddings(
        "embed-v4.0",
        base_url=f"http://127.0.0.1:{closed_port()}",
        api_key="k",
        recorder=otel.recorder,
    )
    with unreachable, pytest.raises(ProviderError):
        unreachable.embed(["a"])

    span = otel.only_span()
    attributes = dict(span.attributes or {})
    assert span.status.status_code is StatusCode.ERROR
    assert attributes["error.type"] == "provider_unavailable"
    assert span.status.description == "provider_unavailable"
    assert "http.response.status_code" not in attributes
    for name in RESPONSE_DERIVED:
        assert name not in attributes, name


# --------------------------------------------------------------------------- no start notice


@pytest.mark.parametrize(
    "make_event",
    [embedding_event, embedding_failed_event, rerank_event, rerank_failed_event],
    ids=["embedding", "embedding_failed", "rerank", "rerank_failed"],
)
def test_event_without_start_notice_spans_its_recorded_interval(
    otel: OtelRig, make_event: Callable[[], Event]
) -> None:
    event = make_event()
    otel.exporter.emit(event)

    span = otel.only_span()
    assert span.kind is SpanKind.CLIENT
    assert span.start_time is not None
    assert span.end_time is not None
    assert span.end_time - span.start_time == round(event.latency_ms * 1_000_000)
    assert abs(span.start_time - exact_ns(event.started_at)) < 1_000
    assert (span.attributes or {})["spanledger.call_id"] == event.call_id


@pytest.mark.parametrize("microsecond", [123456, 654321, 999999])
def test_event_without_start_notice_starts_exactly_at_started_at(
    otel: OtelRig, microsecond: int
) -> None:
    started_at = STARTED_AT.replace(microsecond=microsecond)
    otel.exporter.emit(embedding_event(started_at=started_at))

    span = otel.only_span()
    assert span.start_time == exact_ns(started_at)  # to the nanosecond: no float rounding


def test_hand_built_success_event_renders_reported_fields(otel: OtelRig) -> None:
    otel.exporter.emit(embedding_event(input_type="document", request_id="req-7"))

    span = otel.only_span()
    assert span.name == "embeddings text-embedding-3-small"
    assert span.status.status_code is not StatusCode.ERROR
    expected = {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "text-embedding-3-small",
        "gen_ai.response.model": "text-embedding-3-small-2024",
        "gen_ai.response.id": "resp-emb-1",
        "gen_ai.usage.input_tokens": 42,
        "gen_ai.embeddings.dimension.count": 1536,
        "server.address": "api.openai.com",
        "server.port": 443,
        "spanledger.embedding.input_count": 2,
        "spanledger.embedding.input_type": "document",
        "spanledger.call_id": "call-emb-1",
        "spanledger.request_id": "req-7",
    }
    assert expected.items() <= dict(span.attributes or {}).items()


def test_hand_built_failure_event_renders_error(otel: OtelRig) -> None:
    otel.exporter.emit(rerank_failed_event(error_message="provider_rate_limit: HTTP 429"))

    span = otel.only_span()
    assert span.name == "rerank jina-reranker-v2"
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "provider_rate_limit"
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == "provider_rate_limit"
    assert attributes["http.response.status_code"] == 429
    for name in RESPONSE_DERIVED:
        assert name not in attributes, name
    (exception,) = [event for event in span.events if event.name == "exception"]
    exception_attributes = dict(exception.attributes or {})
    assert exception_attributes["exception.message"] == "provider_rate_limit: HTTP 429"
    assert exception_attributes["exception.type"]
