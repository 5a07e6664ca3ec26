"""Cohere's v1 ``Client`` / ``AsyncClient``: ``embed`` splits its texts into batches of 96 sent
side by side (from a thread pool, or as tasks), and each batch is one recorded call with the
figures the stand-in sent for it, inside the caller's turn and trace.

The parametrised suites (``conftest.OPS``) drive v1 embed and rerank through every rule the
v2 client follows; this file holds what only v1 does.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import cohere
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import EmbeddingEvent, Recorder, RerankEvent
from spanledger.exporters.otel import OtelExporter
from spanledger.testing import StandIn
from tests.instrument.conftest import API_KEY, QUERY, Tape, tokens

SENTINEL = "SENTINEL-cohere-v1-73c2"
MANY = [f"passage {i} on ticks {SENTINEL}" for i in range(200)]  # batches of 96, 96 and 8


def v1(standin: StandIn, *, is_async: bool = False, **options: Any) -> Any:
    kind = cohere.AsyncClient if is_async else cohere.Client
    return kind(api_key=API_KEY, base_url=standin.base_url("cohere"), max_retries=0, **options)


def batch_tokens(texts: list[str]) -> list[int]:
    """What the stand-in bills each batch of 96 that ``embed`` sends, smallest first."""
    return sorted(sum(tokens(t) for t in texts[i : i + 96]) for i in range(0, len(texts), 96))


def embedded(events: list[Any]) -> list[EmbeddingEvent]:
    found = [event for event in events if isinstance(event, EmbeddingEvent)]
    assert len(found) == len(events)
    return sorted(found, key=lambda event: (event.usage and event.usage.input_tokens) or -1)


def test_each_batch_of_a_threaded_embed_is_one_event_in_the_callers_turn_and_trace(
    standin: StandIn, spans: tuple[InMemorySpanExporter, TracerProvider]
) -> None:
    exporter, provider = spans
    bare = v1(standin).embed(model="embed-english-v3.0", texts=MANY, input_type="search_document")
    standin.reset()
    tape = Tape()
    client = spanledger.instrument(v1(standin))
    outer = provider.get_tracer("app")
    recorder = Recorder([tape, OtelExporter(tracer_provider=provider, enable_metrics=False)])
    with (
        spanledger.use(recorder),
        outer.start_as_current_span("retrieve") as parent,
        spanledger.request("turn-v1") as scope,
    ):
        result = client.embed(model="embed-english-v3.0", texts=MANY, input_type="search_document")

    assert result.embeddings == bare.embeddings
    events = embedded(tape.events)
    assert len(events) == len(standin.requests) == 3
    assert [e.usage.input_tokens for e in events if e.usage] == batch_tokens(MANY)
    assert sorted(e.input_count for e in events) == [8, 96, 96]
    assert {e.request_id for e in events} == {"turn-v1"}
    assert sorted(scope.events, key=id) == sorted(events, key=id)
    ours = [span for span in exporter.get_finished_spans() if span.name != "retrieve"]
    assert len(ours) == 3
    context = parent.get_span_context()
    for span in ours:
        assert span.parent is not None
        assert (span.parent.trace_id, span.parent.span_id) == (context.trace_id, context.span_id)
    for event in events:
        assert SENTINEL not in event.model_dump_json()
    assert trace.get_current_span() is trace.INVALID_SPAN


async def test_each_batch_of_an_async_embed_is_one_event(standin: StandIn) -> None:
    standin.reset()
    tape = Tape()
    client = spanledger.instrument(v1(standin, is_async=True))
    with spanledger.use(Recorder([tape])), spanledger.request("turn-async") as scope:
        result = await client.embed(model="embed-english-v3.0", texts=MANY)

    assert len(result.embeddings) == len(MANY)
    events = embedded(tape.events)
    assert [e.usage.input_tokens for e in events if e.usage] == batch_tokens(MANY)
    assert len(scope.events) == len(standin.requests) == 3


def test_uninstrument_gives_the_client_its_own_pool_back(standin: StandIn) -> None:
    pool = ThreadPoolExecutor(2)
    client = v1(standin, thread_pool_executor=pool)
    spanledger.instrument(client)
    assert client._executor is not pool
    assert client._executor.submit(lambda: 7).result() == 7  # the pool still runs other work
    spanledger.uninstrument(client)
    assert client._executor is pool
    pool.shutdown()


def test_the_switch_records_each_batch_of_a_client_made_before_it(standin: StandIn) -> None:
    standin.reset()
    tape = Tape()
    client = v1(standin)
    pool = client._executor
    spanledger.instrument(sdks=["cohere"])
    try:
        with spanledger.use(Recorder([tape])):
            client.embed(model="embed-english-v3.0", texts=MANY)
            client.rerank(model="rerank-v3.5", query=QUERY, documents=MANY[:3])
    finally:
        spanledger.uninstrument()
    assert client._executor is pool
    *embeds, rerank = tape.events
    assert [e.usage.input_tokens for e in embedded(embeds) if e.usage] == batch_tokens(MANY)
    assert isinstance(rerank, RerankEvent)
    assert rerank.usage is not None
    assert rerank.usage.search_units == 1
    assert len(tape.events) == len(standin.requests) == 4


def test_rerank_reads_documents_as_objects_and_its_v1_options(standin: StandIn, tape: Tape) -> None:
    client = spanledger.instrument(v1(standin))
    documents = [{"text": text} for text in MANY[:4]]
    result = client.rerank(
        model="rerank-english-v3.0",
        query=QUERY,
        documents=documents,
        top_n=2,
        return_documents=True,
        max_chunks_per_doc=3,
    )

    assert [r.document.text for r in result.results if r.document] == [
        documents[r.index]["text"] for r in result.results
    ]
    [event] = tape.events
    assert isinstance(event, RerankEvent)
    assert (event.document_count, event.top_k, event.result_count) == (4, 2, 2)
    assert event.request_params == {"return_documents": True}
    assert event.request_extras == {"max_chunks_per_doc": 3}
    assert SENTINEL not in event.model_dump_json()


def test_embed_by_type_and_without_a_model(standin: StandIn, tape: Tape) -> None:
    client = spanledger.instrument(v1(standin))
    typed = client.embed(model="embed-v4.0", texts=MANY[:2], embedding_types=["float"])
    client.embed(texts=MANY[:1])  # Cohere answers with the account's default model

    assert typed.response_type == "embeddings_by_type"
    first, second = tape.events
    assert isinstance(first, EmbeddingEvent)
    assert isinstance(second, EmbeddingEvent)
    assert (first.model, first.dimensions) == ("embed-v4.0", 16)
    assert first.usage is not None
    assert first.usage.input_tokens == sum(tokens(t) for t in MANY[:2])
    assert (second.model, second.input_count) == ("unknown", 1)
