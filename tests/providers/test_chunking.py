"""Chunk and stitch: consecutive chunks, identical non-input fields, sound usage or none,
the first chunk's id, raw as the per-chunk list, and loud failure on any chunk."""

from __future__ import annotations

from typing import Any

import pytest

from spanledger import EmbeddingUsage, ErrorCategory, ProviderError, Recorder
from spanledger.events import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    Event,
    RerankEvent,
)

from .conftest import (
    FakeServer,
    embed,
    embed_payload,
    make_embedder,
    make_reranker,
    rerank,
    vectors_for,
)

INPUT_KEY = {"openai": "input", "cohere": "texts", "tei": "inputs", "voyage": "input"}


def _queue_chunks(
    server: FakeServer,
    vendor: str,
    sizes: list[int],
    *,
    tokens: list[Any] | None = None,
    ids: list[Any] | None = None,
) -> list[Any]:
    """Queue one sound reply per chunk; vectors are numbered globally. Returns the payloads."""
    payloads = []
    start = 0
    for n, size in enumerate(sizes):
        payload = embed_payload(
            vendor,
            vectors_for(size, width=2, start=start),
            tokens=tokens[n] if tokens else 3,
            response_id=ids[n] if ids else f"id-{n}",
            reverse=vendor != "tei" and vendor != "cohere",
        )
        server.reply(payload)
        payloads.append(payload)
        start += size
    return payloads


def _without_inputs(body: dict[str, Any], vendor: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != INPUT_KEY[vendor]}


# --------------------------------------------------------------------------- defaults and caps


@pytest.mark.parametrize(
    ("vendor", "count", "sizes"),
    [
        ("tei", 32, [32]),
        ("tei", 33, [32, 1]),
        ("tei", 65, [32, 32, 1]),
        ("cohere", 96, [96]),
        ("cohere", 97, [96, 1]),
        ("voyage", 1001, [1000, 1]),
        ("openai", 2049, [2048, 1]),
    ],
)
def test_default_caps(
    server: FakeServer, is_async: bool, vendor: str, count: int, sizes: list[int]
) -> None:
    inputs = [f"t{i}" for i in range(count)]
    _queue_chunks(server, vendor, sizes)
    response = embed(make_embedder(vendor, server), inputs, is_async=is_async)
    sent = [body[INPUT_KEY[vendor]] for body in server.bodies]
    assert [len(batch) for batch in sent] == sizes
    assert [text for batch in sent for text in batch] == inputs, "consecutive, in order"
    assert response.vectors == vectors_for(count, width=2)


def test_jina_is_never_chunked(server: FakeServer) -> None:
    inputs = [f"t{i}" for i in range(150)]
    server.reply(embed_payload("jina", vectors_for(150)))
    response = embed(make_embedder("jina", server), inputs, is_async=False)
    assert server.only.json["input"] == inputs
    assert len(response.vectors) == 150


@pytest.mark.parametrize("vendor", ["openai", "cohere", "voyage", "tei"])
def test_chunk_size_override_and_identical_fields(
    server: FakeServer, is_async: bool, vendor: str
) -> None:
    kw: dict[str, Any] = {"dimensions": 2, "extras": {"user": "u-7"}}
    if vendor in ("cohere", "voyage"):
        kw["input_type"] = "query"
    if vendor == "cohere":
        kw["extras"]["embedding_types"] = ["int8"]
    inputs = ["a", "b", "c", "d", "e"]
    payloads = _queue_chunks(server, vendor, [2, 2, 1])
    provider = make_embedder(vendor, server, chunk_size=2)
    response = embed(provider, inputs, is_async=is_async, **kw)

    bodies = server.bodies
    assert [b[INPUT_KEY[vendor]] for b in bodies] == [["a", "b"], ["c", "d"], ["e"]]
    first = _without_inputs(bodies[0], vendor)
    assert all(_without_inputs(b, vendor) == first for b in bodies[1:])
    assert all(list(b) == list(bodies[0]) for b in bodies[1:]), "same keys, same order"
    assert response.vectors == vectors_for(5, width=2)
    assert response.dimensions == 2
    assert response.raw == payloads
    assert isinstance(response.raw, list)
    assert len(response.raw) == 3


def test_tei_33_inputs_two_requests(server: FakeServer, is_async: bool) -> None:
    inputs = [f"t{i}" for i in range(33)]
    payloads = _queue_chunks(server, "tei", [32, 1])
    response = embed(make_embedder("tei", server), inputs, is_async=is_async)
    assert [len(b["inputs"]) for b in server.bodies] == [32, 1]
    assert response.raw == payloads
    assert response.raw[1] == [[32.5, 32.25]], "per-chunk bare arrays, not merged"
    assert response.usage is None
    assert response.response_id is None


# --------------------------------------------------------------------------- usage and ids


@pytest.mark.parametrize("vendor", ["openai", "cohere", "voyage"])
def test_usage_summed_over_sound_chunks(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    _queue_chunks(server, vendor, [2, 2, 1], tokens=[4, 5, 6])
    provider = make_embedder(vendor, server, recorder, chunk_size=2)
    response = embed(provider, list("abcde"), is_async=False)
    assert response.usage == EmbeddingUsage(input_tokens=15)
    event = events[0]
    assert isinstance(event, EmbeddingEvent)
    assert event.usage == response.usage


@pytest.mark.parametrize("bad", ["5", -1, 2.0, True, None, {}], ids=repr)
@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("vendor", ["openai", "cohere"])
def test_usage_none_when_any_chunk_figure_is_malformed(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    vendor: str,
    position: int,
    bad: object,
) -> None:
    tokens: list[Any] = [4, 5, 6]
    tokens[position] = bad
    payloads = _queue_chunks(server, vendor, [2, 2, 1], tokens=tokens)
    provider = make_embedder(vendor, server, recorder, chunk_size=2)
    response = embed(provider, list("abcde"), is_async=False)
    assert response.usage is None, "never a partial sum"
    assert response.raw == payloads
    event = events[0]
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is None


def test_usage_none_when_a_chunk_reports_none(server: FakeServer) -> None:
    payloads = _queue_chunks(server, "openai", [2, 1], tokens=[4, 5])
    del payloads[1]["usage"]
    response = embed(make_embedder("openai", server, chunk_size=2), list("abc"), is_async=False)
    assert response.usage is None


def test_response_id_is_the_first_chunks(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    _queue_chunks(server, "cohere", [2, 1], ids=["first-id", "second-id"])
    provider = make_embedder("cohere", server, recorder, chunk_size=2)
    response = embed(provider, list("abc"), is_async=False)
    assert response.response_id == "first-id"
    event = events[0]
    assert isinstance(event, EmbeddingEvent)
    assert event.response_id == "first-id"


@pytest.mark.parametrize("bad_first", ["", 7, None, True, {}], ids=repr)
def test_malformed_first_id_does_not_fall_through(
    server: FakeServer, recorder: Recorder, events: list[Event], bad_first: object
) -> None:
    _queue_chunks(server, "cohere", [2, 2, 1], ids=[bad_first, "second-id", "third-id"])
    provider = make_embedder("cohere", server, recorder, chunk_size=2)
    response = embed(provider, list("abcde"), is_async=False)
    assert response.response_id is None
    event = events[0]
    assert isinstance(event, EmbeddingEvent)
    assert event.response_id is None


def test_response_model_from_first_chunk(server: FakeServer) -> None:
    payloads = _queue_chunks(server, "openai", [1, 1])
    payloads[0]["model"] = "served-a"
    payloads[1]["model"] = "served-b"
    response = embed(make_embedder("openai", server, chunk_size=1), ["a", "b"], is_async=False)
    assert response.model == "served-a"


# --------------------------------------------------------------------------- failing chunks


@pytest.mark.parametrize("vendor", ["openai", "cohere", "tei", "voyage"])
def test_failing_second_chunk_fails_the_call(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    _queue_chunks(server, vendor, [2])
    server.reply({"error": "slow down"}, status=429, headers={"Retry-After": "3"})
    server.reply(embed_payload(vendor, vectors_for(1)))  # must never be requested
    provider = make_embedder(vendor, server, recorder, chunk_size=2)
    with pytest.raises(ProviderError) as exc:
        embed(provider, list("abcde"), is_async=is_async)
    assert exc.value.category is ErrorCategory.RATE_LIMIT
    assert exc.value.retry_after == 3.0
    assert len(server.requests) == 2, "chunk A sent, chunk B failed, chunk C never sent"
    assert server.pending == 1
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_category is ErrorCategory.RATE_LIMIT
    assert event.input_count == 5


def test_invalid_second_chunk_fails_the_call(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    _queue_chunks(server, "openai", [2])
    server.reply(embed_payload("openai", vectors_for(2)))  # 2 vectors for a 1-input chunk
    provider = make_embedder("openai", server, recorder, chunk_size=2)
    with pytest.raises(ProviderError) as exc:
        embed(provider, list("abc"), is_async=False)
    assert exc.value.category is ErrorCategory.INVALID_RESPONSE
    assert len(server.requests) == 2
    assert [e.kind for e in events] == ["embedding_failed"]


def test_chunks_with_different_widths_fail(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    server.reply(embed_payload("tei", vectors_for(2, width=3)))
    server.reply(embed_payload("tei", vectors_for(1, width=2)))
    provider = make_embedder("tei", server, recorder, chunk_size=2)
    with pytest.raises(ProviderError) as exc:
        embed(provider, list("abc"), is_async=False)
    assert exc.value.category is ErrorCategory.INVALID_RESPONSE
    assert [e.kind for e in events] == ["embedding_failed"]


def test_conflict_refused_before_any_chunk_is_sent(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    provider = make_embedder("openai", server, recorder, chunk_size=1)
    with pytest.raises(ProviderError) as exc:
        embed(provider, list("abc"), dimensions=4, extras={"dimensions": 8}, is_async=False)
    assert exc.value.category is ErrorCategory.INVALID_REQUEST
    assert server.requests == []
    assert len(events) == 1


# --------------------------------------------------------------------------- TEI rerank


def test_tei_rerank_chunks_rebases_sorts_globally_and_cuts_top_k(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool
) -> None:
    documents = ["d0", "d1", "d2", "d3", "d4"]
    chunk_replies: list[list[dict[str, Any]]] = [
        [{"index": 1, "score": 0.2}, {"index": 0, "score": 0.6}],  # d1, d0
        [{"index": 0, "score": 0.9}, {"index": 1, "score": 0.1}],  # d2, d3
        [{"index": 0, "score": 0.7}],  # d4
    ]
    for reply in chunk_replies:
        server.reply(reply)
    provider = make_reranker("tei", server, recorder, chunk_size=2)
    response = rerank(provider, "q", documents, top_k=3, is_async=is_async)

    bodies = server.bodies
    assert [b["texts"] for b in bodies] == [["d0", "d1"], ["d2", "d3"], ["d4"]]
    assert all(
        {k: v for k, v in b.items() if k != "texts"}
        == {
            "query": "q",
            "truncate": False,
            "return_text": False,
        }
        for b in bodies
    )
    assert all("top_n" not in b and "top_k" not in b for b in bodies)
    assert [(r.index, r.relevance_score) for r in response.results] == [
        (2, 0.9),
        (4, 0.7),
        (0, 0.6),
    ]
    assert response.raw == chunk_replies, "per-chunk arrays, chunk-local indices, provider order"
    assert response.usage is None
    event = events[0]
    assert isinstance(event, RerankEvent)
    assert event.result_count == 3
    assert event.top_k == 3
    assert event.document_count == 5


def test_tei_rerank_without_top_k_returns_everything_sorted(server: FakeServer) -> None:
    server.reply([{"index": 0, "score": 0.1}, {"index": 1, "score": 0.8}])
    server.reply([{"index": 0, "score": 0.5}])
    provider = make_reranker("tei", server, chunk_size=2)
    response = rerank(provider, "q", ["a", "b", "c"], is_async=False)
    assert [r.index for r in response.results] == [1, 2, 0]


def test_tei_rerank_top_k_applied_after_sort_on_one_chunk(server: FakeServer) -> None:
    server.reply(
        [{"index": 0, "score": 0.1}, {"index": 2, "score": 0.8}, {"index": 1, "score": 0.5}]
    )
    provider = make_reranker("tei", server)
    response = rerank(provider, "q", ["a", "b", "c"], top_k=2, is_async=False)
    assert [r.index for r in response.results] == [2, 1]
    assert isinstance(response.raw, list)
    assert len(response.raw) == 3, "a single request's raw is its own array"


def test_tei_rerank_default_chunk_size_is_32(server: FakeServer) -> None:
    documents = [f"d{i}" for i in range(33)]
    server.reply([{"index": i, "score": i / 100} for i in range(32)])
    server.reply([{"index": 0, "score": 0.99}])
    response = rerank(make_reranker("tei", server), "q", documents, is_async=False)
    assert [len(b["texts"]) for b in server.bodies] == [32, 1]
    assert response.results[0].index == 32
    assert response.results[1].index == 31
    assert len(response.results) == 33


def test_tei_rerank_chunk_local_index_out_of_range(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    server.reply([{"index": 0, "score": 0.1}, {"index": 1, "score": 0.8}])
    server.reply([{"index": 1, "score": 0.5}])  # the last chunk holds one document
    provider = make_reranker("tei", server, recorder, chunk_size=2)
    with pytest.raises(ProviderError) as exc:
        rerank(provider, "q", ["a", "b", "c"], is_async=False)
    assert exc.value.category is ErrorCategory.INVALID_RESPONSE
    assert [e.kind for e in events] == ["rerank_failed"]


def test_tei_rerank_failing_chunk_fails_the_call(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool
) -> None:
    server.reply([{"index": 0, "score": 0.1}, {"index": 1, "score": 0.8}])
    server.reply({"error": "overloaded"}, status=503)
    provider = make_reranker("tei", server, recorder, chunk_size=2)
    with pytest.raises(ProviderError) as exc:
        rerank(provider, "q", ["a", "b", "c"], is_async=is_async)
    assert exc.value.category is ErrorCategory.UNAVAILABLE
    assert len(server.requests) == 2
    assert [e.kind for e in events] == ["rerank_failed"]
