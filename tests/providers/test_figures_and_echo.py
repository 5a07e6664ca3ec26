"""The figure rule (usage and ids), the document echo rule, and result ordering."""

from __future__ import annotations

from typing import Any

import pytest

from spanledger import EmbeddingUsage, Recorder, RerankUsage
from spanledger.events import EmbeddingEvent, Event, RerankEvent

from .conftest import (
    EMBEDDING_MODELS,
    FakeServer,
    embed,
    embed_payload,
    make_embedder,
    make_reranker,
    rerank,
    rerank_payload,
    vectors_for,
)

MALFORMED_COUNTS: list[object] = ["12", -3, 6.0, True, False, None, {}, [], "", 1.5, {"n": 3}]
MALFORMED_IDS: list[object] = [12, -3, 6.0, True, None, {}, [], ""]
USAGE_VENDORS = ("openai", "cohere", "jina", "voyage")


def _usage_path(vendor: str) -> tuple[str, ...]:
    if vendor == "openai":
        return ("usage", "prompt_tokens")
    if vendor == "cohere":
        return ("meta", "billed_units", "input_tokens")
    return ("usage", "total_tokens")


def _at(payload: Any, path: tuple[str, ...]) -> Any:
    node = payload
    for key in path:
        node = node[key]
    return node


def _embed_event(events: list[Event]) -> EmbeddingEvent:
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, EmbeddingEvent)
    return event


def _rerank_event(events: list[Event]) -> RerankEvent:
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, RerankEvent)
    return event


# --------------------------------------------------------------------------- embedding usage


@pytest.mark.parametrize("figure", MALFORMED_COUNTS, ids=repr)
@pytest.mark.parametrize("vendor", USAGE_VENDORS)
def test_malformed_input_tokens_is_not_reported(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, figure: object
) -> None:
    provider = make_embedder(vendor, server, recorder)
    server.reply(embed_payload(vendor, vectors_for(2), tokens=figure))
    response = embed(provider, ["a", "b"], is_async=False)
    assert response.usage is None
    assert len(response.vectors) == 2
    kept = _at(response.raw, _usage_path(vendor))
    assert type(kept) is type(figure)
    assert kept == figure
    assert _embed_event(events).usage is None


@pytest.mark.parametrize("figure", [0, 12, 10**12])
@pytest.mark.parametrize("vendor", USAGE_VENDORS)
def test_sound_input_tokens_is_reported(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    vendor: str,
    figure: int,
) -> None:
    provider = make_embedder(vendor, server, recorder)
    server.reply(embed_payload(vendor, vectors_for(1), tokens=figure))
    response = embed(provider, ["a"], is_async=is_async)
    assert response.usage == EmbeddingUsage(input_tokens=figure)
    assert _embed_event(events).usage == response.usage


@pytest.mark.parametrize("vendor", USAGE_VENDORS)
def test_absent_usage_is_none_not_zero(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    payload = embed_payload(vendor, vectors_for(1))
    if vendor == "cohere":
        del payload["meta"]
    else:
        del payload["usage"]
    provider = make_embedder(vendor, server, recorder)
    server.reply(payload)
    response = embed(provider, ["a"], is_async=False)
    assert response.usage is None
    assert _embed_event(events).usage is None


def test_tei_reports_no_usage_no_id_and_the_bound_model(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool
) -> None:
    provider = make_embedder("tei", server, recorder)
    payload = embed_payload("tei", vectors_for(2))
    server.reply(payload)
    response = embed(provider, ["a", "b"], is_async=is_async)
    assert response.usage is None
    assert response.response_id is None
    assert response.model == EMBEDDING_MODELS["tei"]
    assert response.raw == payload
    event = _embed_event(events)
    assert event.usage is None
    assert event.response_id is None
    assert event.response_model is None


# --------------------------------------------------------------------------- response ids


@pytest.mark.parametrize("bad_id", MALFORMED_IDS, ids=repr)
def test_malformed_embed_response_id_is_none(
    server: FakeServer, recorder: Recorder, events: list[Event], bad_id: object
) -> None:
    provider = make_embedder("cohere", server, recorder)
    server.reply(embed_payload("cohere", vectors_for(1), response_id=bad_id, tokens=4))
    response = embed(provider, ["a"], is_async=False)
    assert response.response_id is None
    assert response.usage == EmbeddingUsage(input_tokens=4), "other figures are unaffected"
    assert type(response.raw["id"]) is type(bad_id)
    assert response.raw["id"] == bad_id
    event = _embed_event(events)
    assert event.response_id is None
    assert event.usage == response.usage


@pytest.mark.parametrize("bad_id", MALFORMED_IDS, ids=repr)
def test_malformed_rerank_response_id_is_none(
    server: FakeServer, recorder: Recorder, events: list[Event], bad_id: object
) -> None:
    provider = make_reranker("cohere", server, recorder)
    server.reply(rerank_payload("cohere", [(0, 0.5)], response_id=bad_id, tokens=1))
    response = rerank(provider, "q", ["x"], is_async=False)
    assert response.response_id is None
    assert response.usage == RerankUsage(search_units=1)
    assert response.raw["id"] == bad_id
    event = _rerank_event(events)
    assert event.response_id is None
    assert event.usage == response.usage


@pytest.mark.parametrize("vendor", ["cohere", "openai"])
def test_sound_response_id_is_kept(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    payload = embed_payload(vendor, vectors_for(1))
    payload["id"] = "12"
    provider = make_embedder(vendor, server, recorder)
    server.reply(payload)
    response = embed(provider, ["a"], is_async=is_async)
    assert response.response_id == "12"
    assert _embed_event(events).response_id == "12"


# --------------------------------------------------------------------------- rerank usage


@pytest.mark.parametrize("figure", MALFORMED_COUNTS, ids=repr)
@pytest.mark.parametrize("vendor", ["jina", "voyage"])
def test_malformed_rerank_total_tokens_gives_no_usage(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, figure: object
) -> None:
    provider = make_reranker(vendor, server, recorder)
    server.reply(rerank_payload(vendor, [(0, 0.5)], tokens=figure))
    response = rerank(provider, "q", ["x"], is_async=False)
    assert response.usage is None
    assert response.raw["usage"]["total_tokens"] == figure
    assert type(response.raw["usage"]["total_tokens"]) is type(figure)
    assert _rerank_event(events).usage is None


@pytest.mark.parametrize("figure", MALFORMED_COUNTS, ids=repr)
def test_malformed_cohere_search_units_gives_no_usage(
    server: FakeServer, recorder: Recorder, events: list[Event], figure: object
) -> None:
    provider = make_reranker("cohere", server, recorder)
    payload = rerank_payload("cohere", [(0, 0.5)], tokens=figure)
    payload["meta"]["billed_units"]["input_tokens"] = 40  # Cohere rerank bills search units only
    server.reply(payload)
    response = rerank(provider, "q", ["x"], is_async=False)
    assert response.usage is None
    assert response.raw["meta"]["billed_units"]["search_units"] == figure
    assert _rerank_event(events).usage is None


@pytest.mark.parametrize("vendor", ["jina", "voyage"])
def test_rerank_total_tokens_is_input_tokens_only(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    provider = make_reranker(vendor, server, recorder)
    payload = rerank_payload(vendor, [(0, 0.5)], tokens=21)
    payload["usage"]["search_units"] = 3  # not read on this wire
    server.reply(payload)
    response = rerank(provider, "q", ["x"], is_async=is_async)
    assert response.usage == RerankUsage(input_tokens=21, search_units=None)
    assert _rerank_event(events).usage == response.usage


def test_cohere_search_units_only(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool
) -> None:
    provider = make_reranker("cohere", server, recorder)
    payload = rerank_payload("cohere", [(0, 0.5)], tokens=2, response_id="rid-9")
    payload["meta"]["billed_units"]["input_tokens"] = "garbage"
    server.reply(payload)
    response = rerank(provider, "q", ["x"], is_async=is_async)
    assert response.usage == RerankUsage(search_units=2, input_tokens=None)
    assert response.response_id == "rid-9"
    event = _rerank_event(events)
    assert event.usage == response.usage
    assert event.response_id == "rid-9"


def test_tei_rerank_reports_no_usage(server: FakeServer, recorder: Recorder) -> None:
    provider = make_reranker("tei", server, recorder)
    server.reply(rerank_payload("tei", [(0, 0.5)]))
    response = rerank(provider, "q", ["x"], is_async=False)
    assert response.usage is None
    assert response.response_id is None


# --------------------------------------------------------------------------- document echo

_MISSING = object()


def _echo_payload(vendor: str, entries: list[tuple[int, float, object]]) -> Any:
    payload = rerank_payload(vendor, [(i, s) for i, s, _ in entries])
    items = payload if vendor == "tei" else payload["data" if vendor == "voyage" else "results"]
    key = "text" if vendor == "tei" else "document"
    for item, (_, _, echo) in zip(items, entries, strict=True):
        if echo is not _MISSING:
            item[key] = echo
    return payload


@pytest.mark.parametrize("vendor", ["jina", "voyage"])
def test_document_echo_shapes_carried_to_sorted_positions(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    documents = [f"input document {i}" for i in range(7)]
    payload = _echo_payload(
        vendor,
        [
            (0, 0.1, "alpha"),
            (1, 0.9, {"text": "beta"}),
            (2, 0.5, ""),
            (3, 0.7, {"image": "data:image/png;base64,AAAA"}),
            (4, 0.3, {"text": 5}),
            (5, 0.8, None),
            (6, 0.2, _MISSING),
        ],
    )
    provider = make_reranker(vendor, server, recorder)
    server.reply(payload)
    response = rerank(provider, "q", documents, return_documents=True, is_async=is_async)
    assert [(r.index, r.document) for r in response.results] == [
        (1, "beta"),
        (5, None),
        (3, None),
        (2, ""),
        (4, None),
        (6, None),
        (0, "alpha"),
    ]
    assert response.raw == payload, "raw keeps every echo verbatim, objects included"
    event = _rerank_event(events)
    assert event.results == response.results


def test_tei_text_echo(server: FakeServer) -> None:
    payload = _echo_payload("tei", [(0, 0.2, "zero"), (1, 0.9, ""), (2, 0.5, _MISSING)])
    provider = make_reranker("tei", server)
    server.reply(payload)
    response = rerank(provider, "q", ["a", "b", "c"], return_documents=True, is_async=False)
    assert [(r.index, r.document) for r in response.results] == [(1, ""), (2, None), (0, "zero")]


@pytest.mark.parametrize("vendor", ["jina", "voyage", "tei", "cohere"])
def test_documents_never_filled_from_inputs(server: FakeServer, vendor: str) -> None:
    provider = make_reranker(vendor, server)
    server.reply(rerank_payload(vendor, [(1, 0.9), (0, 0.4)]))
    response = rerank(provider, "q", ["x", "y"], return_documents=True, is_async=False)
    assert [r.document for r in response.results] == [None, None]


def test_cohere_never_surfaces_an_echo(server: FakeServer) -> None:
    provider = make_reranker("cohere", server)
    server.reply(rerank_payload("cohere", [(0, 0.9)], documents=["echoed"]))
    response = rerank(provider, "q", ["x"], return_documents=True, is_async=False)
    assert response.results[0].document is None


# --------------------------------------------------------------------------- order


@pytest.mark.parametrize("vendor", ["openai", "jina", "voyage"])
def test_vectors_assembled_by_data_index(server: FakeServer, is_async: bool, vendor: str) -> None:
    vectors = vectors_for(4)
    payload = embed_payload(vendor, vectors, reverse=True)
    assert [item["index"] for item in payload["data"]] == [3, 2, 1, 0]
    provider = make_embedder(vendor, server)
    server.reply(payload)
    response = embed(provider, ["a", "b", "c", "d"], is_async=is_async)
    assert response.vectors == vectors
    assert response.raw["data"][0]["index"] == 3, "raw is not reordered"


@pytest.mark.parametrize("vendor", ["openai", "jina", "voyage"])
def test_vectors_assembled_by_data_index_shuffled(server: FakeServer, vendor: str) -> None:
    vectors = vectors_for(5)
    payload = embed_payload(vendor, vectors)
    order = [2, 4, 0, 3, 1]
    payload["data"] = [payload["data"][i] for i in order]
    provider = make_embedder(vendor, server)
    server.reply(payload)
    assert embed(provider, list("abcde"), is_async=False).vectors == vectors


@pytest.mark.parametrize("vendor", ["cohere", "tei"])
def test_bare_vectors_kept_in_order(server: FakeServer, vendor: str) -> None:
    vectors = vectors_for(4)
    provider = make_embedder(vendor, server)
    server.reply(embed_payload(vendor, vectors))
    assert embed(provider, list("abcd"), is_async=False).vectors == vectors


@pytest.mark.parametrize("vendor", ["cohere", "jina", "tei", "voyage"])
def test_rerank_sorted_descending_stable_on_ties(
    server: FakeServer, is_async: bool, vendor: str
) -> None:
    documents = ["d0", "d1", "d2", "d3", "d4"]
    provider = make_reranker(vendor, server)
    server.reply(rerank_payload(vendor, [(2, 0.5), (0, 0.9), (4, -1.25), (1, 0.5), (3, 0.5)]))
    response = rerank(provider, "q", documents, is_async=is_async)
    assert [r.index for r in response.results] == [0, 2, 1, 3, 4]
    assert [r.relevance_score for r in response.results] == [0.9, 0.5, 0.5, 0.5, -1.25]
    assert [documents[r.index] for r in response.results] == ["d0", "d2", "d1", "d3", "d4"]


@pytest.mark.parametrize("vendor", ["cohere", "jina", "voyage", "tei"])
def test_rerank_may_return_fewer_results(server: FakeServer, vendor: str) -> None:
    provider = make_reranker(vendor, server)
    server.reply(rerank_payload(vendor, [(3, 0.2), (1, 0.7)]))
    response = rerank(provider, "q", ["a", "b", "c", "d"], is_async=False)
    assert [r.index for r in response.results] == [1, 3]


@pytest.mark.parametrize("vendor", ["jina", "voyage"])
def test_response_model_is_the_echoed_model(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    provider = make_reranker(vendor, server, recorder)
    server.reply(rerank_payload(vendor, [(0, 0.5)], model="served-model-2025"))
    response = rerank(provider, "q", ["x"], is_async=False)
    assert response.model == "served-model-2025"
    assert _rerank_event(events).response_model == "served-model-2025"


@pytest.mark.parametrize("figures", [{"tokens": 5}, {"tokens": None}])
def test_single_request_raw_is_the_body_itself(server: FakeServer, figures: dict[str, Any]) -> None:
    provider = make_embedder("openai", server)
    payload = embed_payload("openai", vectors_for(2), **figures)
    server.reply(payload)
    response = embed(provider, ["a", "b"], is_async=False)
    assert response.raw == payload
    assert isinstance(response.raw, dict)
