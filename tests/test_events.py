"""Typed records: validation, immutability, JSON round-trips and payload exclusion."""

from __future__ import annotations

import json
import math
import os
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from spanledger.errors import ErrorCategory, Fingerprint
from spanledger.events import (
    PAYLOAD_FIELDS,
    CallStarted,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingResponse,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankFailedEvent,
    RerankResponse,
    RerankUsage,
    ScoredDocument,
    builder_of,
    new_call_id,
)

SENTINEL = "SENTINEL-7f3a"
STARTED_AT = datetime(2025, 3, 14, 15, 9, 26, 535000, tzinfo=UTC)
EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)


def make_embedding_event(**overrides: Any) -> EmbeddingEvent:
    fields: dict[str, Any] = {
        "call_id": "call-emb-1",
        "provider": "openai",
        "model": "text-embedding-3-small",
        "started_at": STARTED_AT,
        "latency_ms": 12.5,
        "input_count": 3,
        "usage": EmbeddingUsage(input_tokens=42),
        "dimensions": 1536,
        "response_model": "text-embedding-3-small",
        "response_id": "resp-1",
        "request_params": {"encoding_format": "float"},
        "server_address": "api.openai.com",
        "server_port": 443,
    }
    fields.update(overrides)
    return EmbeddingEvent(**fields)


def make_embedding_failed_event(**overrides: Any) -> EmbeddingFailedEvent:
    fields: dict[str, Any] = {
        "call_id": "call-emb-2",
        "provider": "tei",
        "model": "bge-small",
        "started_at": STARTED_AT,
        "latency_ms": 3.0,
        "input_count": 1,
        "error_category": ErrorCategory.MODEL_NOT_LOADED,
        "error_type": "model_loading",
        "status_code": 503,
        "retry_after": 2.5,
        "fingerprint": Fingerprint.of(b'{"error":"loading"}'),
    }
    fields.update(overrides)
    return EmbeddingFailedEvent(**fields)


def make_rerank_event(**overrides: Any) -> RerankEvent:
    fields: dict[str, Any] = {
        "call_id": "call-rr-1",
        "request_id": "turn-42",
        "provider": "cohere",
        "model": "rerank-v3.5",
        "started_at": STARTED_AT,
        "latency_ms": 88.25,
        "query_length": 17,
        "document_count": 5,
        "top_k": 3,
        "result_count": 3,
        "usage": RerankUsage(search_units=1),
    }
    fields.update(overrides)
    return RerankEvent(**fields)


def make_rerank_failed_event(**overrides: Any) -> RerankFailedEvent:
    fields: dict[str, Any] = {
        "call_id": "call-rr-2",
        "provider": "voyage",
        "model": "rerank-2",
        "started_at": STARTED_AT,
        "latency_ms": 0.0,
        "query_length": 4,
        "document_count": 2,
        "error_category": ErrorCategory.RATE_LIMIT,
        "status_code": 429,
        "retry_after": 30.0,
    }
    fields.update(overrides)
    return RerankFailedEvent(**fields)


EVENT_FACTORIES: list[Callable[..., BaseModel]] = [
    make_embedding_event,
    make_embedding_failed_event,
    make_rerank_event,
    make_rerank_failed_event,
]


def make_payload_events() -> list[BaseModel]:
    """One event of each kind, every payload field carrying the sentinel."""
    extras = {"api_key": SENTINEL, "note": [SENTINEL]}
    return [
        make_embedding_event(inputs=[f"doc {SENTINEL}"], request_extras=extras),
        make_embedding_failed_event(inputs=[SENTINEL], request_extras=extras),
        make_rerank_event(
            query=f"query {SENTINEL}",
            documents=[f"a {SENTINEL}", "b"],
            results=[
                ScoredDocument(index=0, relevance_score=0.9, document=SENTINEL),
                ScoredDocument(index=1, relevance_score=0.1, document="b"),
            ],
            request_extras=extras,
        ),
        make_rerank_failed_event(
            query=SENTINEL, documents=[SENTINEL, SENTINEL], request_extras=extras
        ),
    ]


# --- usage ------------------------------------------------------------------------------


def test_rerank_usage_without_any_figure_is_refused() -> None:
    with pytest.raises(ValidationError):
        RerankUsage()
    with pytest.raises(ValidationError):
        RerankUsage(search_units=None, input_tokens=None)


def test_rerank_usage_accepts_either_figure_alone() -> None:
    assert RerankUsage(search_units=2).input_tokens is None
    assert RerankUsage(input_tokens=300).search_units is None
    both = RerankUsage(search_units=1, input_tokens=10)
    assert (both.search_units, both.input_tokens) == (1, 10)


@pytest.mark.parametrize(
    "build",
    [
        lambda: EmbeddingUsage(input_tokens=-1),
        lambda: EmbeddingUsage(input_tokens=True),
        lambda: EmbeddingUsage(input_tokens=False),
        lambda: EmbeddingUsage.model_validate({"input_tokens": 6.0}),
        lambda: EmbeddingUsage.model_validate({"input_tokens": "12"}),
        lambda: EmbeddingUsage.model_validate({}),
        lambda: RerankUsage(search_units=-1),
        lambda: RerankUsage(input_tokens=-5, search_units=1),
        lambda: RerankUsage(search_units=True),
        lambda: RerankUsage.model_validate({"input_tokens": 1.0}),
        lambda: EmbeddingUsage.model_validate({"input_tokens": 1, "extra": 2}),
    ],
)
def test_bad_usage_figures_are_refused(build: Callable[[], object]) -> None:
    with pytest.raises(ValidationError):
        build()


def test_usage_from_json_refuses_bool_and_float() -> None:
    with pytest.raises(ValidationError):
        EmbeddingUsage.model_validate_json('{"input_tokens": true}')
    with pytest.raises(ValidationError):
        EmbeddingUsage.model_validate_json('{"input_tokens": 6.0}')
    assert EmbeddingUsage.model_validate_json('{"input_tokens": 6}').input_tokens == 6


# --- responses --------------------------------------------------------------------------


def test_embedding_response_accepts_consistent_vectors() -> None:
    response = EmbeddingResponse(
        vectors=[[0.1, 0.2, 0.3], [1, 2, 3]], dimensions=3, model="m", raw=None
    )
    assert response.dimensions == 3
    assert len(response.vectors) == 2


@pytest.mark.parametrize(
    "vectors",
    [
        [[0.1, 0.2]],
        [[0.1, 0.2, 0.3], [0.1, 0.2]],
        [[0.1, 0.2, 0.3, 0.4]],
    ],
)
def test_embedding_response_dimensions_must_match_every_vector(
    vectors: list[list[float]],
) -> None:
    with pytest.raises(ValidationError):
        EmbeddingResponse(vectors=vectors, dimensions=3, model="m", raw=None)


@pytest.mark.parametrize(
    "vectors",
    [
        [[0.1, "0.2", 0.3]],
        [[0.1, True, 0.3]],
        [[0.1, None, 0.3]],
        [[0.1, 0.2, 0.3], "abc"],
        [(0.1, 0.2, 0.3)],
        "not a list",
        [],
    ],
    ids=repr,
)
def test_embedding_response_refuses_malformed_vectors(vectors: object) -> None:
    with pytest.raises(ValidationError):
        EmbeddingResponse.model_validate(
            {"vectors": vectors, "dimensions": 3, "model": "m", "raw": None}
        )


@pytest.mark.parametrize("dimensions", [0, -3, True])
def test_embedding_response_refuses_bad_dimensions(dimensions: int) -> None:
    with pytest.raises(ValidationError):
        EmbeddingResponse(vectors=[[0.5]], dimensions=dimensions, model="m", raw=None)


def test_scored_document_accepts_good_values() -> None:
    doc = ScoredDocument(index=0, relevance_score=0.25)
    assert (doc.index, doc.relevance_score, doc.document) == (0, 0.25, None)
    assert ScoredDocument(index=2, relevance_score=-1.5, document="d").document == "d"


@pytest.mark.parametrize(
    "fields",
    [
        {"index": -1, "relevance_score": 0.5},
        {"index": True, "relevance_score": 0.5},
        {"index": 1.0, "relevance_score": 0.5},
        {"index": 0, "relevance_score": math.nan},
        {"index": 0, "relevance_score": math.inf},
        {"index": 0, "relevance_score": -math.inf},
        {"index": 0, "relevance_score": True},
        {"index": 0, "relevance_score": "0.5"},
    ],
    ids=repr,
)
def test_scored_document_refuses_bad_index_or_score(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        ScoredDocument.model_validate(fields)


def _docs(*pairs: tuple[int, float]) -> list[ScoredDocument]:
    return [ScoredDocument(index=i, relevance_score=s) for i, s in pairs]


def test_rerank_response_accepts_descending_unique_results() -> None:
    response = RerankResponse(results=_docs((2, 0.9), (0, 0.5), (1, 0.5)), model="m", raw=None)
    assert [r.index for r in response.results] == [2, 0, 1]
    assert RerankResponse(results=[], model="m", raw=None).results == []


def test_rerank_response_refuses_duplicate_index() -> None:
    with pytest.raises(ValidationError):
        RerankResponse(results=_docs((1, 0.9), (1, 0.5)), model="m", raw=None)


def test_rerank_response_refuses_ascending_results() -> None:
    with pytest.raises(ValidationError):
        RerankResponse(results=_docs((0, 0.1), (1, 0.9)), model="m", raw=None)
    with pytest.raises(ValidationError):
        RerankResponse(results=_docs((0, 0.9), (1, 0.2), (2, 0.3)), model="m", raw=None)


# --- events -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [
        {"call_id": ""},
        {"latency_ms": -0.5},
        {"input_count": -1},
        {"input_count": True},
        {"usage": {"input_tokens": -1}},
        {"error_category": "provider_timeout"},
        {"unknown_field": 1},
    ],
    ids=repr,
)
def test_bad_event_fields_are_refused(fields: dict[str, Any]) -> None:
    base = make_embedding_failed_event().model_dump()
    base.update(fields)
    with pytest.raises(ValidationError):
        EmbeddingFailedEvent.model_validate(base)


@pytest.mark.parametrize(
    "fields",
    [
        {"call_id": ""},
        {"latency_ms": -0.5},
        {"input_count": True},
        {"usage": {"input_tokens": -1}},
        {"inputs": "not a list"},
        {"unknown_field": 1},
    ],
    ids=repr,
)
def test_a_built_event_is_validated_like_a_constructed_one(fields: dict[str, Any]) -> None:
    good = {**make_embedding_event().model_dump(), "inputs": ["a", "b"]}
    build = builder_of(EmbeddingEvent)

    assert build(good) == EmbeddingEvent(**good)
    assert build(good).inputs == ["a", "b"]
    with pytest.raises(ValidationError):
        EmbeddingEvent(**{**good, **fields})
    with pytest.raises(ValidationError):
        build({**good, **fields})


def test_rerank_event_refuses_bad_counts() -> None:
    with pytest.raises(ValidationError):
        make_rerank_event(result_count=-1)
    with pytest.raises(ValidationError):
        make_rerank_event(document_count=True)
    with pytest.raises(ValidationError):
        make_rerank_event(top_k=0)


def test_event_kind_defaults() -> None:
    assert make_embedding_event().kind == "embedding"
    assert make_embedding_failed_event().kind == "embedding_failed"
    assert make_rerank_event().kind == "rerank"
    assert make_rerank_failed_event().kind == "rerank_failed"


def test_failed_event_accepts_category_string() -> None:
    event = make_rerank_failed_event(error_category="provider_unavailable")
    assert event.error_category is ErrorCategory.UNAVAILABLE


# --- immutability -----------------------------------------------------------------------


def test_records_are_frozen() -> None:
    usage = EmbeddingUsage(input_tokens=1)
    with pytest.raises(ValidationError):
        usage.input_tokens = 5  # type: ignore[misc]
    assert usage.input_tokens == 1

    event = make_embedding_event()
    with pytest.raises(ValidationError):
        event.latency_ms = 0.0  # type: ignore[misc]
    with pytest.raises(ValidationError):
        event.inputs = ["x"]  # type: ignore[misc]
    assert event.latency_ms == 12.5

    doc = ScoredDocument(index=0, relevance_score=1.0)
    with pytest.raises(ValidationError):
        doc.index = 3  # type: ignore[misc]

    response = RerankResponse(results=[doc], model="m", raw=None)
    with pytest.raises(ValidationError):
        response.model = "other"  # type: ignore[misc]

    failed = make_rerank_failed_event()
    with pytest.raises(ValidationError):
        failed.status_code = 500  # type: ignore[misc]


# --- JSON round-trips -------------------------------------------------------------------


@pytest.mark.parametrize(
    "build",
    [
        lambda: EmbeddingUsage(input_tokens=0),
        lambda: EmbeddingUsage(input_tokens=123456),
        lambda: RerankUsage(search_units=1),
        lambda: RerankUsage(input_tokens=77),
        lambda: RerankUsage(search_units=2, input_tokens=900),
        lambda: Fingerprint.of(b"body"),
        lambda: ScoredDocument(index=4, relevance_score=0.5, document="doc"),
        lambda: EmbeddingResponse(
            vectors=[[0.1, -0.2], [3.5, 1e-9]],
            dimensions=2,
            model="m",
            usage=EmbeddingUsage(input_tokens=8),
            response_id="r-1",
            raw={"object": "list", "data": [1, 2]},
        ),
        lambda: EmbeddingResponse(vectors=[[1.0]], dimensions=1, model="m", raw=None),
        lambda: RerankResponse(
            results=[
                ScoredDocument(index=1, relevance_score=0.75, document="one"),
                ScoredDocument(index=0, relevance_score=0.25),
            ],
            model="rr",
            usage=RerankUsage(search_units=1),
            response_id="r-2",
            raw=[{"index": 1}],
        ),
        lambda: RerankResponse(results=[], model="rr", raw=None),
        lambda: CallStarted(
            call_id="c",
            operation="rerank",
            provider="jina",
            model="jina-reranker",
            request_id="turn-1",
            started_at=STARTED_AT,
        ),
    ],
    ids=[
        "embedding-usage-zero",
        "embedding-usage",
        "rerank-usage-units",
        "rerank-usage-tokens",
        "rerank-usage-both",
        "fingerprint",
        "scored-document",
        "embedding-response",
        "embedding-response-minimal",
        "rerank-response",
        "rerank-response-empty",
        "call-started",
    ],
)
def test_records_round_trip_through_json(build: Callable[[], BaseModel]) -> None:
    record = build()
    again = type(record).model_validate_json(record.model_dump_json())
    assert again == record
    assert type(again) is type(record)


@pytest.mark.parametrize("factory", EVENT_FACTORIES)
def test_events_round_trip_through_json(factory: Callable[..., BaseModel]) -> None:
    event = factory()
    text = event.model_dump_json()
    assert type(event).model_validate_json(text) == event
    parsed = EVENT_ADAPTER.validate_json(text)
    assert type(parsed) is type(event)
    assert parsed == event


def test_event_round_trip_keeps_minimal_and_nondefault_fields() -> None:
    offset = timezone(timedelta(hours=-5, minutes=-30))
    events: list[BaseModel] = [
        make_embedding_event(usage=None, dimensions=None, response_id=None, server_port=None),
        make_rerank_event(usage=RerankUsage(input_tokens=5), top_k=None),
        make_embedding_failed_event(fingerprint=None, status_code=None, retry_after=None),
        make_rerank_failed_event(started_at=datetime(2024, 2, 29, 23, 59, tzinfo=offset)),
    ]
    for event in events:
        parsed = EVENT_ADAPTER.validate_json(event.model_dump_json())
        assert parsed == event
        assert parsed.started_at.utcoffset() == event.started_at.utcoffset()


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        ("embedding", EmbeddingEvent),
        ("embedding_failed", EmbeddingFailedEvent),
        ("rerank", RerankEvent),
        ("rerank_failed", RerankFailedEvent),
    ],
)
def test_event_union_dispatches_on_kind(kind: str, cls: type[BaseModel]) -> None:
    factory = {
        "embedding": make_embedding_event,
        "embedding_failed": make_embedding_failed_event,
        "rerank": make_rerank_event,
        "rerank_failed": make_rerank_failed_event,
    }[kind]
    data = factory().model_dump(mode="json")
    assert data["kind"] == kind
    assert type(EVENT_ADAPTER.validate_python(data)) is cls


def test_event_union_refuses_unknown_kind() -> None:
    data = make_embedding_event().model_dump(mode="json")
    data["kind"] = "completion"
    with pytest.raises(ValidationError):
        EVENT_ADAPTER.validate_python(data)


# --- payload fields ---------------------------------------------------------------------


def test_payload_fields_constant() -> None:
    assert set(PAYLOAD_FIELDS) == {"inputs", "query", "documents", "results", "request_extras"}


@pytest.mark.parametrize("index", range(4))
def test_payload_fields_are_never_serialized_or_shown(index: int) -> None:
    event = make_payload_events()[index]
    dumped = event.model_dump()
    dumped_json_mode = event.model_dump(mode="json")
    for field in PAYLOAD_FIELDS:
        assert field not in dumped
        assert field not in dumped_json_mode
    assert SENTINEL not in repr(dumped)
    assert SENTINEL not in repr(dumped_json_mode)
    assert SENTINEL not in event.model_dump_json()
    assert SENTINEL not in repr(event)
    assert SENTINEL not in str(event)
    # The payload is still there for exporters that opted in to it.
    assert any(SENTINEL in repr(getattr(event, f, None)) for f in PAYLOAD_FIELDS)


def test_payload_fields_are_readable_by_opted_in_exporters() -> None:
    embedding, _, rerank, _ = make_payload_events()
    assert isinstance(embedding, EmbeddingEvent)
    assert embedding.inputs == [f"doc {SENTINEL}"]
    assert embedding.request_extras["api_key"] == SENTINEL
    assert isinstance(rerank, RerankEvent)
    assert rerank.query == f"query {SENTINEL}"
    assert rerank.results is not None
    assert rerank.results[0].document == SENTINEL


def test_event_without_payload_equals_its_parsed_copy_but_payload_is_dropped() -> None:
    with_payload = make_embedding_event(inputs=[SENTINEL])
    parsed = EVENT_ADAPTER.validate_json(with_payload.model_dump_json())
    assert isinstance(parsed, EmbeddingEvent)
    assert parsed.inputs is None
    assert parsed == make_embedding_event()


def test_response_content_is_kept_out_of_repr() -> None:
    embedding = EmbeddingResponse(
        vectors=[[0.125]], dimensions=1, model="m", raw={"secret": SENTINEL}
    )
    rerank = RerankResponse(
        results=[ScoredDocument(index=0, relevance_score=1.0, document=SENTINEL)],
        model="m",
        raw=SENTINEL,
    )
    for record in (embedding, rerank, rerank.results[0]):
        assert SENTINEL not in repr(record)
    assert "0.125" not in repr(embedding)


def test_call_ids_are_32_hex_digits_and_do_not_repeat() -> None:
    ids = [new_call_id() for _ in range(10_000)]
    assert len(set(ids)) == len(ids)
    assert all(len(call_id) == 32 and int(call_id, 16) >= 0 for call_id in ids)


def test_call_ids_ignore_the_applications_own_seeding() -> None:
    state = random.getstate()
    try:
        random.seed(42)
        first = new_call_id()
        random.seed(42)
        second = new_call_id()
        random.seed(42)
        drawn = random.random()
    finally:
        random.setstate(state)
    assert first != second
    random.seed(42)
    try:
        assert random.random() == drawn  # and drawing ids did not move the application's stream
    finally:
        random.setstate(state)


def test_a_forked_child_draws_different_call_ids_from_its_parent() -> None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next id and leave at once
        os.write(write_end, new_call_id().encode())
        os._exit(0)
    os.close(write_end)
    parent_id = new_call_id()
    with os.fdopen(read_end, "rb") as pipe:
        child_id = pipe.read().decode()
    os.waitpid(pid, 0)
    assert len(child_id) == 32
    assert child_id != parent_id


def test_payload_texts_are_kept_as_they_were_when_the_call_was_recorded() -> None:
    inputs = [f"passage {n}" for n in range(2048)]
    documents = ["one", "two"]
    embedding = make_embedding_event(inputs=inputs)
    rerank = make_rerank_event(documents=documents)
    inputs.clear()
    documents.append("three")
    assert embedding.inputs is not None
    assert len(embedding.inputs) == 2048
    assert rerank.documents == ["one", "two"]
    assert make_embedding_event(inputs=("a", "b")).inputs == ["a", "b"]


def test_payload_texts_are_described_as_texts_in_the_schema() -> None:
    schema = json.dumps(EmbeddingEvent.model_json_schema())
    assert '"inputs"' in schema
    inputs = EmbeddingEvent.model_json_schema()["properties"]["inputs"]
    assert {"type": "array", "items": {"type": "string"}} in inputs["anyOf"]


@pytest.mark.parametrize("bad", ["one text", {"a": 1}, 7])
def test_payload_texts_must_be_a_list(bad: object) -> None:
    with pytest.raises(ValidationError):
        make_embedding_event(inputs=bad)
    with pytest.raises(ValidationError):
        make_rerank_event(documents=bad)
