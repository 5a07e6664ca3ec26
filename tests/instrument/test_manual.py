"""record_embedding / record_rerank: one event per block, figures judged, errors propagated."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
import structlog

import spanledger
from spanledger import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
    ProviderError,
    Recorder,
    RerankEvent,
    RerankFailedEvent,
    RerankUsage,
    ScoredDocument,
)
from spanledger.instrumentation import EmbeddingRecord, RerankRecord
from tests.instrument.conftest import Tape


def embed_block(**overrides: Any) -> EmbeddingRecord:
    fields: dict[str, Any] = {"provider": "acme", "model": "m", "inputs": ["a", "b"]}
    return spanledger.record_embedding(**(fields | overrides))


def rerank_block(**overrides: Any) -> RerankRecord:
    fields: dict[str, Any] = {
        "provider": "acme",
        "model": "r",
        "query": "q",
        "documents": ["x", "y"],
    }
    return spanledger.record_rerank(**(fields | overrides))


def test_a_successful_block_is_one_event_after_its_start_notice(tape: Tape) -> None:
    with embed_block(input_type="query", dimensions=8, server_address="emb.local") as call:
        call.succeeded(vectors=[[0.1] * 8, [0.2] * 8], usage={"input_tokens": 12}, response_id="r1")

    assert [kind for kind, _ in tape.log] == ["start", "event"]
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model, event.input_count, event.inputs) == (
        "acme",
        "m",
        2,
        ["a", "b"],
    )
    assert event.usage == EmbeddingUsage(input_tokens=12)
    assert (event.response_id, event.dimensions) == ("r1", 8)
    assert event.request_params == {"input_type": "query", "dimensions": 8}
    assert (event.server_address, event.server_port) == ("emb.local", None)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"input_tokens": 12}, EmbeddingUsage(input_tokens=12)),
        (EmbeddingUsage(input_tokens=3), EmbeddingUsage(input_tokens=3)),
        ({"input_tokens": "12"}, None),
        ({"input_tokens": -1}, None),
        ({"input_tokens": True}, None),
        ({"input_tokens": 12.0}, None),
        ({"prompt_tokens": 12}, None),
        ("12", None),
        (type("SdkUsage", (), {"input_tokens": 5})(), EmbeddingUsage(input_tokens=5)),
    ],
)
def test_embedding_usage_goes_through_the_figure_rule(
    usage: object, expected: EmbeddingUsage | None, tape: Tape
) -> None:
    with embed_block() as call:
        call.succeeded(usage=usage)

    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage == expected


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"search_units": 1}, RerankUsage(search_units=1)),
        ({"search_units": 1.0}, None),
        ({"search_units": "abc", "input_tokens": 5}, RerankUsage(input_tokens=5)),
        (RerankUsage(search_units=2), RerankUsage(search_units=2)),
        ({}, None),
    ],
)
def test_rerank_usage_judges_each_figure_alone(
    usage: object, expected: RerankUsage | None, tape: Tape
) -> None:
    with rerank_block() as call:
        call.succeeded(results=[], usage=usage)

    [event] = tape.events
    assert isinstance(event, RerankEvent)
    assert event.usage == expected


def test_a_known_vendors_raw_body_supplies_the_figures_not_given(tape: Tape) -> None:
    body = {
        "id": "co-1",
        "results": [{"index": 1, "relevance_score": 0.9}],
        "meta": {"billed_units": {"search_units": 1}},
    }

    with rerank_block(provider="cohere") as call:
        call.succeeded(raw=body)
    with rerank_block(provider="cohere") as call:
        call.succeeded(raw=b'{"results": [], "meta": {"billed_units": {"search_units": 1.0}}}')
    with rerank_block(provider="cohere") as call:
        call.succeeded(raw=body, usage={"search_units": 3}, response_id="mine")
    with rerank_block(provider="acme") as call:
        call.succeeded(raw=body, result_count=1)

    vendor, malformed, explicit, unknown = tape.events
    assert isinstance(vendor, RerankEvent)
    assert isinstance(malformed, RerankEvent)
    assert isinstance(explicit, RerankEvent)
    assert isinstance(unknown, RerankEvent)
    assert (vendor.usage, vendor.response_id, vendor.result_count) == (
        RerankUsage(search_units=1),
        "co-1",
        1,
    )
    assert malformed.usage is None
    assert (explicit.usage, explicit.response_id) == (RerankUsage(search_units=3), "mine")
    assert (unknown.usage, unknown.response_id) == (None, None)


def test_results_are_counted_and_kept_for_opted_in_exporters(tape: Tape) -> None:
    sdk_like = type("Result", (), {"index": 1, "relevance_score": 0.5, "document": None})()
    with rerank_block(top_k=2, return_documents=False) as call:
        call.succeeded(results=[{"index": 0, "relevance_score": 0.9, "document": "x"}, sdk_like])

    [event] = tape.events
    assert isinstance(event, RerankEvent)
    assert (event.result_count, event.top_k) == (2, 2)
    assert event.request_params == {"return_documents": False}
    assert event.results == [
        ScoredDocument(index=0, relevance_score=0.9, document="x"),
        ScoredDocument(index=1, relevance_score=0.5),
    ]
    assert "results" not in event.model_dump()


def test_a_rerank_needs_something_to_count(tape: Tape) -> None:
    with rerank_block() as call:
        with pytest.raises(TypeError, match="results"):
            call.succeeded(usage={"search_units": 1})
        call.succeeded(result_count=0)

    [event] = tape.events
    assert isinstance(event, RerankEvent)
    assert event.result_count == 0


@pytest.mark.parametrize(
    "raw",
    [
        '{"id": "rr-1", "meta": {"billed_units": {"search_units": 1}}}',
        b'{"results": "none"}',
        "[" * 100_000,
        {"results": None},
    ],
)
def test_a_known_vendors_body_without_results_is_an_invalid_response(
    tape: Tape, raw: object
) -> None:
    with rerank_block(provider="cohere") as call:
        call.succeeded(raw=raw)

    [event] = tape.events
    assert isinstance(event, RerankFailedEvent)
    assert (event.error_category, event.error_type) == (
        ErrorCategory.INVALID_RESPONSE,
        "invalid_json" if raw == "[" * 100_000 else "missing_field",
    )
    assert (event.fingerprint is not None) == isinstance(raw, str | bytes)


def test_an_unknown_vendors_raw_body_cannot_be_counted(tape: Tape) -> None:
    with rerank_block(provider="acme") as call:
        with pytest.raises(TypeError, match="raw body"):
            call.succeeded(raw={"results": [{"index": 0}]})
        call.succeeded(result_count=1)

    [event] = tape.events
    assert isinstance(event, RerankEvent)


def test_query_length_is_in_utf8_bytes(tape: Tape) -> None:
    with rerank_block(query="café ✓") as call:
        call.succeeded(results=[])

    [event] = tape.events
    assert isinstance(event, RerankEvent)
    assert event.query_length == len("café ✓".encode())


def test_an_exception_in_the_block_is_recorded_and_propagates_unchanged(tape: Tape) -> None:
    problem = ValueError("secret payload text")

    with pytest.raises(ValueError, match="secret") as caught, embed_block():
        raise problem

    assert caught.value is problem
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.error_type) == (ErrorCategory.UNAVAILABLE, "ValueError")
    assert "secret" not in event.model_dump_json()


def test_a_provider_error_keeps_its_category(tape: Tape) -> None:
    with pytest.raises(ProviderError), rerank_block():
        raise ProviderError(ErrorCategory.INVALID_MODEL, status_code=404, error_type="http_404")

    [event] = tape.events
    assert isinstance(event, RerankFailedEvent)
    assert (event.error_category, event.status_code) == (ErrorCategory.INVALID_MODEL, 404)


def test_an_http_status_error_is_categorised_by_status(tape: Tape) -> None:
    request = httpx.Request("POST", "https://emb.local/v1/embed")
    response = httpx.Response(
        429, headers={"retry-after": "7"}, content=b"too many", request=request
    )

    with pytest.raises(httpx.HTTPStatusError), embed_block():
        response.raise_for_status()

    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_category is ErrorCategory.RATE_LIMIT
    assert (event.status_code, event.retry_after, event.error_type) == (429, 7.0, "http_429")
    assert event.fingerprint is not None
    assert event.fingerprint.byte_length == 8


def test_a_timeout_after_sending_carries_an_estimate(tape: Tape) -> None:
    with pytest.raises(httpx.ReadTimeout), embed_block(provider="openai", inputs=["abcd" * 10]):
        raise httpx.ReadTimeout("slow")

    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.estimated_usage == EmbeddingUsage(input_tokens=10)


def test_failed_records_a_handled_error_without_raising(tape: Tape) -> None:
    with rerank_block() as call:
        call.failed("provider_rate_limit", status_code=429, retry_after=3, body=b"{}")

    [event] = tape.events
    assert isinstance(event, RerankFailedEvent)
    assert (event.error_category, event.status_code, event.retry_after) == (
        ErrorCategory.RATE_LIMIT,
        429,
        3.0,
    )
    assert event.fingerprint is not None
    assert event.fingerprint.byte_length == 2


@pytest.mark.parametrize("wait", [float("inf"), float("nan"), -1.0])
def test_a_retry_after_that_is_no_wait_is_not_reported(tape: Tape, wait: float) -> None:
    with rerank_block() as call:
        call.failed("provider_rate_limit", status_code=429, retry_after=wait)

    [event] = tape.events
    assert isinstance(event, RerankFailedEvent)
    assert event.retry_after is None
    assert "inf" not in (event.error_message or "")


def test_a_block_without_an_outcome_is_a_failure_with_a_warning(tape: Tape) -> None:
    with structlog.testing.capture_logs() as logs, embed_block():
        pass

    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.error_type) == (
        ErrorCategory.INVALID_RESPONSE,
        "no_outcome",
    )
    assert [entry["event"] for entry in logs] == ["recorded_call_without_outcome"]


def test_exactly_one_event_per_block(tape: Tape) -> None:
    def block() -> None:
        with embed_block() as call:
            call.succeeded(usage={"input_tokens": 1})
            with pytest.raises(RuntimeError, match="already"):
                call.succeeded()
            raise KeyError("after the call")

    with pytest.raises(KeyError):
        block()

    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)


def test_a_block_is_entered_once_and_reports_only_inside(tape: Tape) -> None:
    block = embed_block()
    with pytest.raises(RuntimeError, match="with"):
        block.succeeded()
    with block as call:
        call.succeeded()
    with pytest.raises(RuntimeError, match="once"), block:
        pass

    assert len(tape.events) == 1


async def test_async_blocks_run_concurrently_with_their_own_events(tape: Tape) -> None:
    async def one(n: int) -> None:
        async with embed_block(inputs=[f"text {n}"]) as call:
            await asyncio.sleep(0.001 * (n % 3))
            call.succeeded(usage={"input_tokens": n})

    await asyncio.gather(*(one(n) for n in range(10)))

    assert len({event.call_id for event in tape.events}) == 10
    for event in tape.events:
        assert isinstance(event, EmbeddingEvent)
        assert event.usage is not None
        assert event.inputs == [f"text {event.usage.input_tokens}"]


def test_an_explicit_recorder_is_used_and_an_inactive_one_records_nothing(tape: Tape) -> None:
    own = Tape()
    with embed_block(recorder=Recorder([own])) as call:
        call.succeeded()
    with embed_block(recorder=Recorder()) as call:
        call.succeeded()

    assert len(own.events) == 1
    assert tape.events == []


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [("provider", None, TypeError), ("model", "", ValueError), ("model", 3, TypeError)],
)
def test_the_call_identity_is_required(field: str, value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=field):
        embed_block(**{field: value})


def test_failed_with_an_unknown_category_is_refused_and_the_block_still_ends(tape: Tape) -> None:
    with embed_block() as call:
        with pytest.raises(ValueError, match="provider_oops"):
            call.failed("provider_oops")
        call.failed(ErrorCategory.UNAVAILABLE)

    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.error_type) == (
        ErrorCategory.UNAVAILABLE,
        "provider_unavailable",
    )
