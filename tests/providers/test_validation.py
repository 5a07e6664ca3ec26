"""Pre-send validation: refused calls raise provider_invalid_request, send nothing, and still
emit exactly one failure event."""

from __future__ import annotations

from typing import Any

import pytest

from spanledger import ErrorCategory, ProviderError, Recorder
from spanledger.events import EmbeddingFailedEvent, Event, RerankFailedEvent

from .conftest import (
    EMBEDDING_VENDORS,
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

BAD_EMBED_CALLS: list[tuple[str, Any, dict[str, Any]]] = [
    ("empty inputs", [], {}),
    ("bare string", "hello", {}),
    ("bare bytes", b"hello", {}),
    ("int item", ["a", 1], {}),
    ("none item", [None], {}),
    ("bytes item", [b"a"], {}),
    ("dimensions 0", ["a"], {"dimensions": 0}),
    ("dimensions -1", ["a"], {"dimensions": -1}),
    ("dimensions bool", ["a"], {"dimensions": True}),
    ("dimensions float", ["a"], {"dimensions": 8.0}),
]

BAD_RERANK_CALLS: list[tuple[str, Any, Any, dict[str, Any]]] = [
    ("empty query", "", ["x"], {}),
    ("non-string query", 5, ["x"], {}),
    ("empty documents", "q", [], {}),
    ("bare string documents", "q", "x", {}),
    ("non-string document", "q", ["x", 3], {}),
    ("top_k 0", "q", ["x"], {"top_k": 0}),
    ("top_k -1", "q", ["x"], {"top_k": -1}),
    ("top_k bool", "q", ["x"], {"top_k": True}),
]


def _assert_refused(
    exc: pytest.ExceptionInfo[ProviderError], server: FakeServer, events: list[Event]
) -> None:
    assert exc.value.category is ErrorCategory.INVALID_REQUEST
    assert exc.value.status_code is None
    assert server.requests == [], "nothing may be sent for a refused call"
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, EmbeddingFailedEvent | RerankFailedEvent)
    assert event.error_category is ErrorCategory.INVALID_REQUEST
    assert event.status_code is None


@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
@pytest.mark.parametrize(
    ("inputs", "kw"), [(c[1], c[2]) for c in BAD_EMBED_CALLS], ids=[c[0] for c in BAD_EMBED_CALLS]
)
def test_embed_refused_before_sending(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    vendor: str,
    inputs: Any,
    kw: dict[str, Any],
) -> None:
    provider = make_embedder(vendor, server, recorder)
    with pytest.raises(ProviderError) as exc:
        embed(provider, inputs, is_async=is_async, **kw)
    _assert_refused(exc, server, events)
    assert isinstance(events[0], EmbeddingFailedEvent)


@pytest.mark.parametrize("vendor", RERANK_VENDORS)
@pytest.mark.parametrize(
    ("query", "documents", "kw"),
    [(c[1], c[2], c[3]) for c in BAD_RERANK_CALLS],
    ids=[c[0] for c in BAD_RERANK_CALLS],
)
def test_rerank_refused_before_sending(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    vendor: str,
    query: Any,
    documents: Any,
    kw: dict[str, Any],
) -> None:
    provider = make_reranker(vendor, server, recorder)
    with pytest.raises(ProviderError) as exc:
        rerank(provider, query, documents, is_async=is_async, **kw)
    _assert_refused(exc, server, events)
    assert isinstance(events[0], RerankFailedEvent)


@pytest.mark.parametrize(
    ("vendor", "input_type", "ctor"),
    [
        ("cohere", "image", {}),
        ("cohere", "search_query", {}),
        ("cohere", "Query", {}),
        ("jina", "classification", {}),
        ("jina", "clustering", {}),
        ("jina", "retrieval.query", {}),
        ("voyage", "classification", {}),
        ("voyage", "clustering", {}),
        ("tei", "document", {"input_type_prompt_map": {"query": "query"}}),
        ("tei", "classification", {"input_type_prompt_map": {"query": "q", "document": "p"}}),
    ],
)
def test_unsupported_input_type_refused_before_sending(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    vendor: str,
    input_type: str,
    ctor: dict[str, Any],
) -> None:
    provider = make_embedder(vendor, server, recorder, **ctor)
    with pytest.raises(ProviderError) as exc:
        embed(provider, ["a"], input_type=input_type, is_async=is_async)
    _assert_refused(exc, server, events)
    event = events[0]
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.input_type == input_type


def test_refused_call_event_counts_what_was_given(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    provider = make_reranker("jina", server, recorder)
    with pytest.raises(ProviderError):
        provider.rerank("héllo", ["a", "b", "c"], top_k=0)
    event = events[0]
    assert isinstance(event, RerankFailedEvent)
    assert event.document_count == 3
    assert event.query_length == 6
    assert event.top_k is None
    assert server.requests == []


# --------------------------------------------------------------------------- accepted edges


@pytest.mark.parametrize("input_type", ["query", "document", "classification", "anything"])
def test_openai_accepts_any_input_type(server: FakeServer, input_type: str) -> None:
    provider = make_embedder("openai", server)
    server.reply(embed_payload("openai", vectors_for(1)))
    response = embed(provider, ["a"], input_type=input_type, is_async=False)
    assert len(response.vectors) == 1
    assert len(server.requests) == 1


@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_top_k_may_exceed_document_count(server: FakeServer, vendor: str) -> None:
    provider = make_reranker(vendor, server)
    server.reply(rerank_payload(vendor, [(1, 0.9), (0, 0.1)]))
    response = rerank(provider, "q", ["x", "y"], top_k=10, is_async=False)
    assert [r.index for r in response.results] == [1, 0]


@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_tuple_of_strings_is_accepted_as_inputs(server: FakeServer, vendor: str) -> None:
    provider = make_embedder(vendor, server)
    server.reply(embed_payload(vendor, vectors_for(2)))
    response = embed(provider, ("a", "b"), is_async=False)
    assert len(response.vectors) == 2


# --------------------------------------------------------------------------- unencodable calls
# Every failure must surface as a ProviderError category, with exactly one failure event.
# A call whose body cannot be encoded as JSON text (strict JSON, UTF-8) is refused before
# sending. The mapping code shared by every vendor encodes bodies, so two vendors per
# endpoint kind are enough here.

UNENCODABLE_EXTRAS: list[object] = [{1, 2}, b"raw", object(), float("nan"), float("inf")]
UNENCODABLE_IDS = ["set", "bytes", "object", "nan", "inf"]


@pytest.mark.parametrize("value", UNENCODABLE_EXTRAS, ids=UNENCODABLE_IDS)
@pytest.mark.parametrize("vendor", ["openai", "tei"])
def test_embed_unencodable_extras_refused_before_sending(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, value: object
) -> None:
    provider = make_embedder(vendor, server, recorder)
    server.reply(embed_payload(vendor, vectors_for(1)))
    with pytest.raises(ProviderError) as exc:
        embed(provider, ["a"], extras={"custom": value}, is_async=False)
    _assert_refused(exc, server, events)


@pytest.mark.parametrize("value", UNENCODABLE_EXTRAS, ids=UNENCODABLE_IDS)
@pytest.mark.parametrize("vendor", ["jina", "tei"])
def test_rerank_unencodable_extras_refused_before_sending(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, value: object
) -> None:
    provider = make_reranker(vendor, server, recorder)
    server.reply(rerank_payload(vendor, [(0, 0.5)]))
    with pytest.raises(ProviderError) as exc:
        rerank(provider, "q", ["x"], extras={"custom": value}, is_async=False)
    _assert_refused(exc, server, events)


@pytest.mark.parametrize("vendor", ["openai", "cohere"])
def test_embed_lone_surrogate_refused_before_sending(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    provider = make_embedder(vendor, server, recorder)
    server.reply(embed_payload(vendor, vectors_for(2)))
    with pytest.raises(ProviderError) as exc:
        embed(provider, ["fine", "bad \ud800 text"], is_async=is_async)
    _assert_refused(exc, server, events)


@pytest.mark.parametrize(
    ("query", "documents"),
    [("bad \ud800 query", ["x"]), ("q", ["x", "bad \udfff doc"])],
    ids=["query", "document"],
)
@pytest.mark.parametrize("vendor", ["jina", "tei"])
def test_rerank_lone_surrogate_refused_before_sending(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    vendor: str,
    query: str,
    documents: list[str],
) -> None:
    provider = make_reranker(vendor, server, recorder)
    server.reply(rerank_payload(vendor, [(0, 0.5)]))
    with pytest.raises(ProviderError) as exc:
        rerank(provider, query, documents, is_async=False)
    _assert_refused(exc, server, events)
