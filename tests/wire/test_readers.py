"""The endpoint readers' shortcuts read exactly what the full readers read."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from spanledger.errors import ProviderError
from spanledger.events import EmbeddingUsage
from spanledger.wire import read
from spanledger.wire.endpoints import (
    COHERE_EMBEDDINGS,
    COHERE_V1_EMBEDDINGS,
    JINA_RERANK,
    OPENAI_EMBEDDINGS,
    VOYAGE_RERANK,
    Endpoint,
)
from spanledger.wire.read import embedding_usage, read_embeddings, read_rerank


def rerank_body(*results: dict[str, Any]) -> dict[str, Any]:
    return {"results": list(results), "meta": {"billed_units": {"search_units": 1}}}


GOOD = rerank_body(
    {"index": 1, "relevance_score": 0.9, "document": {"text": "b"}},
    {"index": 0, "relevance_score": 0.5},
)
BAD = [
    rerank_body({"index": 2, "relevance_score": 0.9}),
    rerank_body({"index": 0, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.1}),
    rerank_body({"index": 0, "relevance_score": "high"}),
    rerank_body({"index": 0, "relevance_score": 0.9, "document": 7}),
    rerank_body(*({"index": n, "relevance_score": 0.1} for n in range(2)), {"index": 9}),
]


def test_results_not_kept_are_counted_and_read_alike() -> None:
    kept = read_rerank(JINA_RERANK, GOOD, 2, None)
    counted = read_rerank(JINA_RERANK, GOOD, 2, None, keep_results=False)
    assert counted.results == []
    assert counted.count == kept.count == len(kept.results) == 2
    assert (counted.usage, counted.response_id, counted.model) == (
        kept.usage,
        kept.response_id,
        kept.model,
    )


@pytest.mark.parametrize("body", BAD)
def test_results_not_kept_are_refused_as_strictly(body: dict[str, Any]) -> None:
    with pytest.raises(ProviderError) as kept:
        read_rerank(JINA_RERANK, body, 2, 2)
    with pytest.raises(ProviderError) as counted:
        read_rerank(JINA_RERANK, body, 2, 2, keep_results=False)
    assert counted.value.error_type == kept.value.error_type
    assert counted.value.category == kept.value.category


def test_one_usage_record_per_token_count_is_shared() -> None:
    first, again = embedding_usage(12), embedding_usage(12)
    assert first == EmbeddingUsage(input_tokens=12)
    assert first is again
    assert embedding_usage(13) == EmbeddingUsage(input_tokens=13)
    assert embedding_usage(-1) is None
    assert embedding_usage(True) is None


def test_the_shared_usage_records_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read, "_embedding_usages", {})
    monkeypatch.setattr(read, "_USAGES_KEPT", 3)
    for tokens in range(10):
        assert embedding_usage(tokens) == EmbeddingUsage(input_tokens=tokens)
    assert len(read._embedding_usages) == 3


def test_an_endpoint_built_at_run_time_is_read_by_its_own_paths() -> None:
    body = {
        "data": [{"index": 0, "embedding": [0.5, 1]}],
        "usage": {"prompt_tokens": 4, "total_tokens": 9},
        "model": "m",
    }
    declared = read_embeddings(OPENAI_EMBEDDINGS, body, 1)
    assert declared.usage == EmbeddingUsage(input_tokens=4)
    for _ in range(3):  # a fresh object each time: none may be read by another's getters
        variant = dataclasses.replace(OPENAI_EMBEDDINGS, tokens_at=("usage", "total_tokens"))
        assert read_embeddings(variant, body, 1).usage == EmbeddingUsage(input_tokens=9)
        quiet = dataclasses.replace(OPENAI_EMBEDDINGS, tokens_at=None, model_at=None)
        part = read_embeddings(quiet, body, 1)
        assert (part.usage, part.model) == (None, None)
    assert read_embeddings(OPENAI_EMBEDDINGS, body, 1).usage == EmbeddingUsage(input_tokens=4)


def test_readers_cached_under_a_reused_identity_are_not_taken(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = {"data": [{"index": 0, "embedding": [0.5]}], "usage": {"total_tokens": 9}}
    variant = dataclasses.replace(OPENAI_EMBEDDINGS, tokens_at=("usage", "total_tokens"))
    stale = read._readers_of(OPENAI_EMBEDDINGS)  # as if a freed endpoint had this object's id
    monkeypatch.setitem(read._readers, id(variant), stale)
    assert read_embeddings(variant, body, 1).usage == EmbeddingUsage(input_tokens=9)


def test_a_body_that_is_the_results_list_is_read_from_itself() -> None:
    assert VOYAGE_RERANK.results_at == ("data",)
    bare = dataclasses.replace(VOYAGE_RERANK, results_at=())
    part = read_rerank(bare, [{"index": 0, "relevance_score": 0.3}], 1, None)
    assert part.count == 1
    assert part.results[0].relevance_score == 0.3


@pytest.mark.parametrize(
    ("vector", "accepted"),
    [
        ([0.25, 0.5], True),
        ([0, 0.5, 1], True),  # a JSON integer is a number
        ([0.25, True], False),  # a boolean is not
        ([0.25, None], False),
        ([0.25, "0.5"], False),
        ([0.25, float("nan")], False),
    ],
)
def test_float_vectors_take_numbers_only(vector: list[Any], accepted: bool) -> None:
    body = {"data": [{"index": 0, "embedding": vector}], "model": "m"}
    if accepted:
        assert read_embeddings(OPENAI_EMBEDDINGS, body, 1).dimensions == len(vector)
    else:
        with pytest.raises(ProviderError):
            read_embeddings(OPENAI_EMBEDDINGS, body, 1)


V1_VECTORS = [[0.5, 0.25], [0.125, 1.0]]


@pytest.mark.parametrize(
    ("endpoint", "embeddings"),
    [
        (COHERE_V1_EMBEDDINGS, V1_VECTORS),
        (COHERE_V1_EMBEDDINGS, {"float": V1_VECTORS}),
        (COHERE_EMBEDDINGS, {"float": V1_VECTORS}),
    ],
    ids=["v1-floats", "v1-by-type", "v2-by-type"],
)
def test_cohere_float_vectors_are_read_as_a_list_or_by_type(
    endpoint: Endpoint, embeddings: object
) -> None:
    body = {"id": "e1", "embeddings": embeddings, "meta": {"billed_units": {"input_tokens": 5}}}
    part = read_embeddings(endpoint, body, 2)
    assert (part.vectors, part.dimensions) == (V1_VECTORS, 2)
    assert part.usage == EmbeddingUsage(input_tokens=5)


@pytest.mark.parametrize(
    ("endpoint", "embeddings", "dtype"),
    [
        (COHERE_EMBEDDINGS, V1_VECTORS, None),  # v2 never answers with a plain list
        (COHERE_V1_EMBEDDINGS, V1_VECTORS, "int8"),  # a plain list is only ever floats
        (COHERE_V1_EMBEDDINGS, [[0.5, 0.25]], None),  # one vector for two inputs
        (COHERE_V1_EMBEDDINGS, [[0.5, True], [0.125, 1.0]], None),
        (COHERE_V1_EMBEDDINGS, {"int8": [[1, 2], [3, 4]]}, None),  # floats asked for, none sent
    ],
    ids=["v2-list", "v1-list-for-int8", "v1-too-few", "v1-bool", "v1-wrong-type"],
)
def test_cohere_vectors_that_do_not_answer_the_request_are_refused(
    endpoint: Endpoint, embeddings: object, dtype: str | None
) -> None:
    body = {"embeddings": embeddings, "meta": {"billed_units": {"input_tokens": 5}}}
    with pytest.raises(ProviderError) as raised:
        read_embeddings(endpoint, body, 2, dtype)
    assert raised.value.category.value == "provider_invalid_response"
