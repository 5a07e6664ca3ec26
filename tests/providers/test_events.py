"""One typed event per call, emitted before the call returns or raises, with the right fields."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

import spanledger
from spanledger import ErrorCategory, Fingerprint, ProviderError, Recorder
from spanledger.events import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    Event,
    RerankEvent,
    RerankFailedEvent,
)
from spanledger.recording import call as recording_core

from .conftest import (
    API_KEY,
    BODY_SENTINEL,
    EMBEDDING_MODELS,
    EMBEDDING_VENDORS,
    PROVIDER_NAMES,
    RERANK_MODELS,
    RERANK_VENDORS,
    FakeServer,
    embed,
    embed_payload,
    make_embedder,
    make_reranker,
    rerank,
    rerank_payload,
    vectors_for,
)


def _one(events: list[Event]) -> Event:
    assert len(events) == 1, f"expected exactly one event, got {[e.kind for e in events]}"
    return events[0]


# --------------------------------------------------------------------------- one event


@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_embed_success_emits_one_event(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    server.reply(embed_payload(vendor, vectors_for(2, width=3)))
    response = embed(make_embedder(vendor, server, recorder), ["a", "b"], is_async=is_async)
    event = _one(events)
    assert isinstance(event, EmbeddingEvent)
    assert event.provider == PROVIDER_NAMES[vendor]
    assert event.model == EMBEDDING_MODELS[vendor]
    assert event.input_count == 2
    assert event.dimensions == 3
    assert event.usage == response.usage
    assert event.response_id == response.response_id
    assert event.inputs == ["a", "b"]
    assert event.call_id


@pytest.mark.parametrize("builder", ["_embedding_event", "_rerank_event"])
def test_an_event_that_cannot_be_built_still_ends_the_call(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    monkeypatch: pytest.MonkeyPatch,
    builder: str,
) -> None:
    def broken(fields: Any) -> Any:
        raise ValueError("cannot build")

    monkeypatch.setattr(recording_core, builder, broken)
    if builder == "_embedding_event":
        server.reply(embed_payload("openai", vectors_for(1, width=3)))
        embed(make_embedder("openai", server, recorder), ["a"], is_async=False)
        expected: type[Event] = EmbeddingFailedEvent
    else:
        server.reply(rerank_payload("cohere", [(0, 0.9)]))
        rerank(make_reranker("cohere", server, recorder), "q", ["a"], is_async=False)
        expected = RerankFailedEvent

    event = _one(events)
    assert isinstance(event, expected)
    assert isinstance(event, EmbeddingFailedEvent | RerankFailedEvent)
    assert (event.error_category, event.error_type) == (
        ErrorCategory.INVALID_RESPONSE,
        "unrecordable_outcome",
    )


@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_rerank_success_emits_one_event(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    server.reply(rerank_payload(vendor, [(1, 0.8), (0, 0.3)]))
    provider = make_reranker(vendor, server, recorder)
    response = rerank(provider, "héllo", ["x", "y", "z"], top_k=2, is_async=is_async)
    event = _one(events)
    assert isinstance(event, RerankEvent)
    assert event.provider == PROVIDER_NAMES[vendor]
    assert event.model == RERANK_MODELS[vendor]
    assert event.query_length == 6, "UTF-8 bytes, not characters"
    assert event.document_count == 3
    assert event.top_k == 2
    assert event.result_count == 2
    assert event.results == response.results
    assert event.usage == response.usage
    assert event.response_id == response.response_id


@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_embed_failure_emits_one_failure_event_only(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    body = f'{{"error":"{BODY_SENTINEL} {API_KEY}"}}'.encode()
    server.reply(raw=body, status=503, headers={"Retry-After": "7"})
    with pytest.raises(ProviderError):
        embed(make_embedder(vendor, server, recorder), ["a"], is_async=is_async)
    event = _one(events)
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.provider == PROVIDER_NAMES[vendor]
    assert event.error_category is ErrorCategory.UNAVAILABLE
    assert event.status_code == 503
    assert event.retry_after == 7.0
    assert event.fingerprint == Fingerprint(
        byte_length=len(body), sha256=hashlib.sha256(body).hexdigest()
    )
    assert event.error_type
    dumped = event.model_dump_json()
    assert BODY_SENTINEL not in dumped
    assert API_KEY not in dumped


@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_rerank_failure_emits_one_failure_event_only(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    body = f"{BODY_SENTINEL}".encode()
    server.reply(raw=body, status=422)
    with pytest.raises(ProviderError):
        rerank(make_reranker(vendor, server, recorder), "héllo", ["x"], is_async=is_async)
    event = _one(events)
    assert isinstance(event, RerankFailedEvent)
    assert event.error_category is ErrorCategory.INVALID_REQUEST
    assert event.status_code == 422
    assert event.fingerprint is not None
    assert event.fingerprint.sha256 == hashlib.sha256(body).hexdigest()
    assert event.query_length == 6
    assert event.document_count == 1
    assert BODY_SENTINEL not in event.model_dump_json()


def test_event_emitted_before_the_call_returns(server: FakeServer, is_async: bool) -> None:
    state = {"returned": False}
    seen: list[bool] = []

    def sink(event: Event) -> None:
        seen.append(state["returned"])

    server.reply(embed_payload("openai", vectors_for(1)))
    embed(make_embedder("openai", server, Recorder([sink])), ["a"], is_async=is_async)
    state["returned"] = True
    assert seen == [False]


def test_event_emitted_before_the_call_raises(server: FakeServer, is_async: bool) -> None:
    seen: list[str] = []
    sink_calls: list[Event] = []

    def sink(event: Event) -> None:
        seen.append("event")
        sink_calls.append(event)

    server.reply({}, status=500)
    provider = make_reranker("jina", server, Recorder([sink]))
    with pytest.raises(ProviderError):
        rerank(provider, "q", ["x"], is_async=is_async)
    seen.append("raised")
    assert seen == ["event", "raised"]
    assert sink_calls[0].kind == "rerank_failed"


def test_a_failing_sink_does_not_break_the_call(server: FakeServer) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError(API_KEY)

    collected: list[Event] = []
    server.reply(embed_payload("jina", vectors_for(1)))
    provider = make_embedder("jina", server, Recorder([broken, collected.append]))
    response = embed(provider, ["a"], is_async=False)
    assert len(response.vectors) == 1
    assert len(collected) == 1


# --------------------------------------------------------------------------- request_params


@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_embed_request_params_empty_by_default(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    server.reply(embed_payload(vendor, vectors_for(1)))
    embed(make_embedder(vendor, server, recorder), ["a"], is_async=False)
    event = _one(events)
    assert event.request_params == {}
    assert isinstance(event, EmbeddingEvent)
    assert event.input_type is None


def test_cohere_wire_default_input_type_not_recorded(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    server.reply(embed_payload("cohere", vectors_for(1)))
    embed(make_embedder("cohere", server, recorder), ["a"], is_async=False)
    assert server.only.json["input_type"] == "search_document"
    event = _one(events)
    assert event.request_params == {}
    assert isinstance(event, EmbeddingEvent)
    assert event.input_type is None


@pytest.mark.parametrize(
    ("vendor", "input_type"),
    [("openai", "query"), ("cohere", "query"), ("jina", "document"), ("voyage", "query")],
)
def test_embed_request_params_hold_what_the_caller_set(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, input_type: str
) -> None:
    server.reply(embed_payload(vendor, vectors_for(1, width=4)))
    embed(
        make_embedder(vendor, server, recorder),
        ["a"],
        input_type=input_type,
        dimensions=4,
        extras={"user": "u"},
        is_async=False,
    )
    event = _one(events)
    assert event.request_params == {"input_type": input_type, "dimensions": 4}
    assert event.request_extras == {"user": "u"}


def test_prefix_not_reflected_in_request_params(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    server.reply(embed_payload("openai", vectors_for(1)))
    provider = make_embedder("openai", server, recorder, query_prefix="search_query: ")
    embed(provider, ["a"], input_type="query", is_async=False)
    assert server.only.json["input"] == ["search_query: a"]
    event = _one(events)
    assert isinstance(event, EmbeddingEvent)
    assert event.request_params == {"input_type": "query"}
    assert event.input_type == "query"
    assert event.inputs == ["a"]


@pytest.mark.parametrize(
    ("kw", "params"),
    [
        ({}, {}),
        ({"top_k": 1}, {}),
        ({"return_documents": False}, {"return_documents": False}),
        ({"return_documents": True}, {"return_documents": True}),
    ],
)
@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_rerank_request_params(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    vendor: str,
    kw: dict[str, Any],
    params: dict[str, Any],
) -> None:
    server.reply(rerank_payload(vendor, [(0, 0.5)]))
    rerank(make_reranker(vendor, server, recorder), "q", ["x", "y"], is_async=False, **kw)
    assert _one(events).request_params == params


def test_failure_event_request_params(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    server.reply({}, status=400)
    with pytest.raises(ProviderError):
        embed(
            make_embedder("cohere", server, recorder),
            ["a"],
            input_type="clustering",
            is_async=False,
        )
    event = _one(events)
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.request_params == {"input_type": "clustering"}


# --------------------------------------------------------------------------- request scope


def test_request_id_from_request_scope(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool
) -> None:
    server.reply(embed_payload("tei", vectors_for(1)))
    server.reply(rerank_payload("tei", [(0, 0.1)]))
    with spanledger.request("r1") as scope:
        embed(make_embedder("tei", server, recorder), ["a"], is_async=is_async)
        rerank(make_reranker("tei", server, recorder), "q", ["x"], is_async=is_async)
    assert [e.request_id for e in events] == ["r1", "r1"]
    assert [e.kind for e in scope.events] == ["embedding", "rerank"]


def test_request_id_is_none_outside_a_scope(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    server.reply(embed_payload("tei", vectors_for(1)))
    embed(make_embedder("tei", server, recorder), ["a"], is_async=False)
    assert _one(events).request_id is None


def test_failure_event_carries_request_id(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    with spanledger.request("r1"), pytest.raises(ProviderError):
        embed(make_embedder("openai", server, recorder), [], is_async=False)
    assert _one(events).request_id == "r1"


def test_scope_alone_collects_events_without_a_recorder(server: FakeServer) -> None:
    server.reply(embed_payload("jina", vectors_for(1)))
    with spanledger.request("only-scope") as scope:
        embed(make_embedder("jina", server), ["a"], is_async=False)
    assert [e.request_id for e in scope.events] == ["only-scope"]


def test_use_makes_a_recorder_current(server: FakeServer) -> None:
    collected: list[Event] = []
    server.reply(embed_payload("voyage", vectors_for(1)))
    with spanledger.use(Recorder([collected.append])):
        embed(make_embedder("voyage", server), ["a"], is_async=False)
    assert [e.provider for e in collected] == ["voyageai"]


@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_calls_work_with_no_recorder_and_no_scope(
    server: FakeServer, is_async: bool, vendor: str
) -> None:
    assert spanledger.current_request() is None
    server.reply(embed_payload(vendor, vectors_for(2)))
    response = embed(make_embedder(vendor, server), ["a", "b"], is_async=is_async)
    assert len(response.vectors) == 2
    server.reply({}, status=401)
    with pytest.raises(ProviderError) as exc:
        embed(make_embedder(vendor, server), ["a"], is_async=is_async)
    assert exc.value.category is ErrorCategory.AUTHENTICATION


def test_rerank_works_with_no_recorder_and_no_scope(server: FakeServer) -> None:
    server.reply(rerank_payload("cohere", [(0, 0.5)]))
    response = rerank(make_reranker("cohere", server), "q", ["x"], is_async=False)
    assert [r.index for r in response.results] == [0]


# --------------------------------------------------------------------------- timing and models


def test_latency_covers_every_chunk(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool
) -> None:
    server.delay = 0.02
    for n in range(3):
        server.reply(embed_payload("openai", vectors_for(1, start=n)))
    provider = make_embedder("openai", server, recorder, chunk_size=1)
    embed(provider, ["a", "b", "c"], is_async=is_async)
    assert len(server.requests) == 3
    assert _one(events).latency_ms >= 60.0


def test_latency_of_a_failure_covers_the_wait(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    server.delay = 0.02
    server.reply(rerank_payload("tei", [(0, 0.1)]))
    server.reply({}, status=500)
    with pytest.raises(ProviderError):
        rerank(
            make_reranker("tei", server, recorder, chunk_size=1), "q", ["x", "y"], is_async=False
        )
    assert _one(events).latency_ms >= 40.0


@pytest.mark.parametrize("vendor", ["openai", "jina", "voyage"])
def test_response_model_is_echoed_model(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    server.reply(embed_payload(vendor, vectors_for(1), model="served-model-0613"))
    response = embed(make_embedder(vendor, server, recorder), ["a"], is_async=False)
    assert response.model == "served-model-0613"
    event = _one(events)
    assert isinstance(event, EmbeddingEvent)
    assert event.response_model == "served-model-0613"
    assert event.model == EMBEDDING_MODELS[vendor]


@pytest.mark.parametrize("vendor", ["tei", "cohere"])
def test_response_model_none_when_not_echoed(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    server.reply(embed_payload(vendor, vectors_for(1)))
    response = embed(make_embedder(vendor, server, recorder), ["a"], is_async=False)
    assert response.model == EMBEDDING_MODELS[vendor], "the bound id"
    event = _one(events)
    assert isinstance(event, EmbeddingEvent)
    assert event.response_model is None


@pytest.mark.parametrize("vendor", ["tei", "cohere"])
def test_rerank_response_model_none_when_not_echoed(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    server.reply(rerank_payload(vendor, [(0, 0.5)]))
    response = rerank(make_reranker(vendor, server, recorder), "q", ["x"], is_async=False)
    assert response.model == RERANK_MODELS[vendor]
    event = _one(events)
    assert isinstance(event, RerankEvent)
    assert event.response_model is None


def test_event_round_trips_through_json_without_payload(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    server.reply(rerank_payload("jina", [(0, 0.5)], documents=["secret doc"]))
    rerank(
        make_reranker("jina", server, recorder),
        "secret query",
        ["secret doc"],
        return_documents=True,
        is_async=False,
    )
    dumped = _one(events).model_dump_json()
    assert "secret" not in dumped
    assert '"provider":"jina"' in dumped
    assert '"request_params":{"return_documents":true}' in dumped
