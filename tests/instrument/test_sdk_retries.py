"""An SDK that retries: every HTTP attempt is its own event, so a retried 429 stays visible."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import cohere
import httpx
import openai
import pytest
import voyageai.error
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import spanledger
from spanledger import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
    Recorder,
    RerankFailedEvent,
)
from spanledger.exporters.otel import OtelExporter
from spanledger.testing import StandIn
from tests.instrument.conftest import API_KEY, OPS, QUERY, TEXTS, Tape, openai_over

OPENAI_BODY = {
    "object": "list",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}],
    "model": "text-embedding-3-small",
    "usage": {"prompt_tokens": 7, "total_tokens": 7},
}
COHERE_BODY = {
    "id": "emb-1",
    "embeddings": {"float": [[0.5, 0.25]]},
    "texts": ["x"],
    "meta": {"billed_units": {"input_tokens": 7}},
}
FAST_RETRY = {"retry-after-ms": "1", "retry-after": "0"}


def scripted(replies: Iterator[httpx.Response | Exception]) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    return httpx.MockTransport(handler)


def limited() -> httpx.Response:
    return httpx.Response(429, json={"message": "slow down"}, headers=FAST_RETRY)


def test_openai_retry_after_a_429_gives_one_event_per_attempt(tape: Tape) -> None:
    replies = iter([limited(), httpx.Response(200, json=OPENAI_BODY)])
    client = spanledger.instrument(openai_over(scripted(replies), max_retries=2))

    with spanledger.request("turn-retry"):
        result = client.embeddings.create(model="text-embedding-3-small", input=["x"])

    assert result.usage.prompt_tokens == 7
    failed, succeeded = tape.events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert (failed.error_category, failed.status_code) == (ErrorCategory.RATE_LIMIT, 429)
    assert failed.retry_after == 0.0
    assert isinstance(succeeded, EmbeddingEvent)
    assert succeeded.usage == EmbeddingUsage(input_tokens=7)
    assert failed.call_id != succeeded.call_id
    assert {failed.request_id, succeeded.request_id} == {"turn-retry"}
    assert [kind for kind, _ in tape.log] == ["start", "event", "event"]
    started = tape.log[0][1]
    assert {failed.logical_call_id, succeeded.logical_call_id} == {failed.call_id}
    assert started.call_id == failed.call_id
    assert [(e.attempt, e.retried) for e in (failed, succeeded)] == [(1, True), (2, False)]


@pytest.mark.parametrize(
    ("failure", "estimated"),
    [
        (httpx.ConnectError("refused"), None),  # never sent: nothing to bill
        (httpx.ReadTimeout("slow"), EmbeddingUsage(input_tokens=1)),  # sent: may be billed
        (httpx.RemoteProtocolError("dropped"), EmbeddingUsage(input_tokens=1)),
    ],
)
def test_a_transport_failure_the_sdk_retried_is_named_and_estimated(
    tape: Tape, failure: Exception, estimated: EmbeddingUsage | None
) -> None:
    replies: Iterator[httpx.Response | Exception] = iter(
        [failure, httpx.Response(200, json=OPENAI_BODY)]
    )
    client = spanledger.instrument(openai_over(scripted(replies), max_retries=1))

    client.embeddings.create(model="text-embedding-3-small", input=["x"])

    failed, succeeded = tape.events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert (failed.error_category, failed.error_type) == (
        ErrorCategory.UNAVAILABLE,
        type(failure).__name__,
    )
    assert failed.estimated_usage == estimated
    assert failed.latency_ms < 250  # ended when it failed, not after the SDK's backoff
    assert isinstance(succeeded, EmbeddingEvent)


def test_cohere_retry_after_a_transport_failure_is_named_at_once(tape: Tape) -> None:
    replies: Iterator[httpx.Response | Exception] = iter(
        [httpx.ConnectError("refused"), httpx.Response(200, json=COHERE_BODY)]
    )
    client = spanledger.instrument(
        cohere.ClientV2(
            api_key=API_KEY,
            httpx_client=httpx.Client(transport=scripted(replies)),
        )
    )

    client.embed(model="embed-v4.0", texts=["x"], input_type="search_query")

    failed, succeeded = tape.events
    assert isinstance(failed, EmbeddingFailedEvent)
    assert failed.error_type == "ConnectError"
    assert failed.latency_ms < 250
    assert isinstance(succeeded, EmbeddingEvent)


def test_cohere_retry_after_a_429_gives_one_event_per_attempt(tape: Tape) -> None:
    replies = iter([limited(), limited(), httpx.Response(200, json=COHERE_BODY)])
    client = cohere.ClientV2(
        api_key=API_KEY,
        base_url="https://api.cohere.com",
        max_retries=2,
        httpx_client=httpx.Client(transport=scripted(replies)),
    )
    spanledger.instrument(client)

    client.embed(model="embed-v4.0", texts=["x"], input_type="search_query")

    first, second, last = tape.events
    assert isinstance(first, EmbeddingFailedEvent)
    assert isinstance(second, EmbeddingFailedEvent)
    assert isinstance(last, EmbeddingEvent)
    assert last.usage == EmbeddingUsage(input_tokens=7)
    assert len({event.call_id for event in tape.events}) == 3
    assert {event.logical_call_id for event in tape.events} == {first.call_id}
    assert [event.attempt for event in tape.events] == [1, 2, 3]
    assert [event.retried for event in tape.events] == [True, True, False]
    assert tape.events[0].server_address == "api.cohere.com"


def test_voyage_retries_that_run_out_are_each_recorded(standin: StandIn, tape: Tape) -> None:
    client = spanledger.instrument(OPS[4].client(standin, max_retries=2))

    with pytest.raises(voyageai.error.RateLimitError):
        client.rerank(QUERY, TEXTS, model="fail-429")

    assert len(tape.events) == 2
    for event in tape.events:
        assert isinstance(event, RerankFailedEvent)
        assert (event.status_code, event.retry_after) == (429, 2.0)
    assert [(e.attempt, e.retried) for e in tape.events] == [(1, True), (2, False)]


@pytest.mark.parametrize(
    "read",
    [
        lambda c: c.embeddings.with_raw_response.create(model="m", input=["x"]).parse(),
        lambda c: c.embeddings.create(model="m", input=["x"]),
    ],
)
def test_figures_are_read_even_when_the_sdk_decodes_lazily(
    read: Callable[[openai.OpenAI], object], tape: Tape
) -> None:
    body = json.dumps(OPENAI_BODY).encode()
    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    client = spanledger.instrument(openai_over(transport))

    read(client)

    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage == EmbeddingUsage(input_tokens=7)


def test_a_retried_call_is_one_span_under_the_callers(
    tape: Tape, caplog: pytest.LogCaptureFixture
) -> None:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    recorder = Recorder([OtelExporter(tracer_provider=provider, enable_metrics=False)])
    replies = iter([limited(), httpx.Response(200, json=OPENAI_BODY)])
    client = spanledger.instrument(openai_over(scripted(replies), max_retries=1))

    with spanledger.use(recorder), provider.get_tracer("t").start_as_current_span("turn") as turn:
        client.embeddings.create(model="text-embedding-3-small", input=["x"])
        assert trace.get_current_span() is turn

    call, outer = spans.get_finished_spans()
    assert outer.name == "turn"
    assert call.parent is not None
    assert call.parent.span_id == outer.context.span_id
    assert call.context.trace_id == outer.context.trace_id
    assert call.status.status_code is StatusCode.UNSET
    assert call.attributes is not None
    assert call.attributes["gen_ai.usage.input_tokens"] == 7
    [attempt] = [event for event in call.events if event.name == "spanledger.attempt"]
    assert attempt.attributes is not None
    assert attempt.attributes["http.response.status_code"] == 429
    assert attempt.attributes["error.type"] == "provider_rate_limit"
    assert "Failed to detach context" not in caplog.text
