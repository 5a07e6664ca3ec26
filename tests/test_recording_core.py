"""The one recording core: trusted construction equals validation, and a retried call's
attempts are joined by one id while a single attempt carries none of it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

import spanledger
from spanledger import CallStarted, EmbeddingEvent, RerankFailedEvent
from spanledger.errors import ErrorCategory, ProviderError
from spanledger.events import (
    EmbeddingFailedEvent,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankUsage,
    ScoredDocument,
    builder_of,
    trusted_builder_of,
)
from spanledger.recording import EmbedFacts, Figures, Recording, RerankFacts

COMMON: dict[str, Any] = {
    "call_id": "c" * 32,
    "request_id": "turn-1",
    "provider": "cohere",
    "model": "embed-v4.0",
    "started_at": datetime(2026, 12, 1, tzinfo=UTC),
    "latency_ms": 12.5,
    "request_params": {"input_type": "query"},
    "request_extras": {"truncate": "NONE"},
    "server_address": "api.cohere.com",
    "server_port": 443,
}
CASES: list[tuple[type[Any], dict[str, Any]]] = [
    (
        EmbeddingEvent,
        {
            **COMMON,
            "input_count": 2,
            "input_type": "query",
            "inputs": ["a", "b"],
            "dimensions": 1024,
            "usage": EmbeddingUsage(input_tokens=7),
            "response_id": "r-1",
            "response_model": None,
        },
    ),
    (
        EmbeddingFailedEvent,
        {
            **COMMON,
            "input_count": 1,
            "input_type": None,
            "inputs": ["a"],
            "error_category": ErrorCategory.UNAVAILABLE,
            "error_type": "ReadTimeout",
            "error_message": "provider_unavailable: timed out",
            "status_code": None,
            "retry_after": None,
            "fingerprint": None,
            "estimated_usage": EmbeddingUsage(input_tokens=1),
            "logical_call_id": "f" * 32,
            "attempt": 2,
            "retried": True,
        },
    ),
    (
        RerankEvent,
        {
            **COMMON,
            "query_length": 5,
            "document_count": 3,
            "top_k": 2,
            "query": "query",
            "documents": ["x", "y", "z"],
            "result_count": 2,
            "results": [ScoredDocument(index=1, relevance_score=0.5)],
            "usage": RerankUsage(search_units=1),
            "response_id": None,
            "response_model": None,
        },
    ),
    (
        RerankFailedEvent,
        {
            **COMMON,
            "query_length": 5,
            "document_count": 3,
            "top_k": None,
            "query": None,
            "documents": None,
            "error_category": ErrorCategory.RATE_LIMIT,
            "error_type": "http_429",
            "error_message": "provider_rate_limit: HTTP 429",
            "status_code": 429,
            "retry_after": 2.0,
            "fingerprint": None,
            "estimated_usage": None,
        },
    ),
    (
        CallStarted,
        {
            "call_id": "c" * 32,
            "operation": "rerank",
            "provider": "voyageai",
            "model": "rerank-2.5",
            "request_id": None,
            "started_at": datetime(2026, 12, 1, tzinfo=UTC),
            "server_address": None,
            "server_port": None,
        },
    ),
]


@pytest.mark.parametrize(("model", "fields"), CASES, ids=lambda case: getattr(case, "__name__", ""))
def test_trusted_construction_equals_validation(model: type[Any], fields: dict[str, Any]) -> None:
    trusted = trusted_builder_of(model)(dict(fields))
    validated = builder_of(model)(dict(fields))

    assert type(trusted) is model
    assert trusted == validated
    assert trusted.model_dump_json() == validated.model_dump_json()
    assert repr(trusted) == repr(validated)
    assert trusted.model_fields_set == validated.model_fields_set


class Tape:
    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []

    def call_started(self, started: CallStarted) -> None:
        self.log.append(("start", started))

    def emit(self, event: Event) -> None:
        self.log.append(("event", event))

    @property
    def events(self) -> list[Any]:
        return [item for kind, item in self.log if kind == "event"]


def facts() -> EmbedFacts:
    return EmbedFacts(provider="openai", model="m", input_count=1, inputs=["x"], billing="tokens")


LIMITED = ProviderError(ErrorCategory.RATE_LIMIT, status_code=429, retry_after=1.0)


def test_a_call_of_one_attempt_carries_no_retry_fields() -> None:
    tape = Tape()
    recording = Recording(spanledger.Recorder([tape]), facts())
    recording.succeeded(Figures(usage=EmbeddingUsage(input_tokens=3)))

    [event] = tape.events
    assert (event.logical_call_id, event.attempt, event.retried) == (None, 1, False)
    assert "logical_call_id" not in event.model_fields_set


def test_a_retried_call_is_announced_once_and_its_attempts_share_one_id() -> None:
    tape = Tape()
    recording = Recording(spanledger.Recorder([tape]), facts())
    first_id = recording.call_id
    recording.failed(LIMITED, hold=True)
    assert tape.events == []  # held until the SDK decides
    recording.restart()
    recording.failed(LIMITED, hold=True)
    recording.restart()
    recording.succeeded(Figures())
    recording.release()

    assert [kind for kind, _ in tape.log] == ["start", "event", "event", "event"]
    started = tape.log[0][1]
    first, _, last = tape.events
    assert started.call_id == first.call_id == first_id
    assert {e.logical_call_id for e in tape.events} == {first_id}
    assert [(e.attempt, e.retried) for e in tape.events] == [(1, True), (2, True), (3, False)]
    assert len({e.call_id for e in tape.events}) == 3
    assert isinstance(last, EmbeddingEvent)


def test_a_held_failure_the_sdk_gives_up_on_is_the_calls_last() -> None:
    tape = Tape()
    recording = Recording(spanledger.Recorder([tape]), facts())
    recording.failed(LIMITED, hold=True)
    recording.restart()
    recording.failed(LIMITED, hold=True)
    recording.release()

    first, last = tape.events
    assert [(e.attempt, e.retried) for e in tape.events] == [(1, True), (2, False)]
    assert last.logical_call_id == first.call_id
    assert last.status_code == 429


def test_a_rerank_estimate_needs_every_document_to_be_text() -> None:
    tape = Tape()
    timed_out = ProviderError(ErrorCategory.UNAVAILABLE, error_type="ReadTimeout")
    for documents in (["a", "b"], ["a", 3]):
        rerank = RerankFacts(
            provider="voyageai",
            model="m",
            query_length=1,
            document_count=2,
            query="q",
            documents=documents,
            billing="tokens",
        )
        Recording(spanledger.Recorder([tape]), rerank).failed(timed_out)

    with_texts, with_a_number = tape.events
    assert with_texts.estimated_usage is not None
    assert with_a_number.estimated_usage is None


def test_a_call_whose_one_attempt_failed_carries_no_retry_fields() -> None:
    tape = Tape()
    recording = Recording(spanledger.Recorder([tape]), facts())
    recording.failed(LIMITED, hold=True)
    recording.release()

    [event] = tape.events
    assert (event.logical_call_id, event.attempt, event.retried) == (None, 1, False)
