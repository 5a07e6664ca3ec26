"""Payload defects raise provider_invalid_response; base64 vectors decode exactly."""

from __future__ import annotations

import base64
import json
import struct
from typing import Any

import pytest

from spanledger import ErrorCategory, ProviderError, Recorder
from spanledger.events import EmbeddingFailedEvent, Event, RerankFailedEvent

from .conftest import (
    BODY_SENTINEL,
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

INDEXED_VENDORS = ("openai", "jina", "voyage")  # data[].index wires
TOP_N_VENDORS = ("cohere", "jina", "voyage")  # the server applies top_k
ECHO_VENDORS = ("jina", "tei", "voyage")  # rerank wires that may echo documents


def _embed_fails(
    vendor: str,
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    inputs: list[str],
    payload: Any,
    *,
    is_async: bool = False,
) -> ProviderError:
    provider = make_embedder(vendor, server, recorder)
    server.reply(payload)
    with pytest.raises(ProviderError) as exc:
        embed(provider, inputs, is_async=is_async)
    assert exc.value.category is ErrorCategory.INVALID_RESPONSE
    assert len(server.requests) == 1
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_category is ErrorCategory.INVALID_RESPONSE
    return exc.value


def _rerank_fails(
    vendor: str,
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    documents: list[str],
    payload: Any,
    *,
    is_async: bool = False,
    **kw: Any,
) -> ProviderError:
    provider = make_reranker(vendor, server, recorder)
    server.reply(payload)
    with pytest.raises(ProviderError) as exc:
        rerank(provider, "q", documents, is_async=is_async, **kw)
    assert exc.value.category is ErrorCategory.INVALID_RESPONSE
    assert len(server.requests) == 1
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, RerankFailedEvent)
    assert event.error_category is ErrorCategory.INVALID_RESPONSE
    return exc.value


# --------------------------------------------------------------------------- embeddings


@pytest.mark.parametrize("returned", [1, 3])
@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_vector_count_mismatch(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    vendor: str,
    returned: int,
) -> None:
    payload = embed_payload(vendor, vectors_for(returned))
    _embed_fails(vendor, server, recorder, events, ["a", "b"], payload, is_async=is_async)


@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_inconsistent_dimensions(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    payload = embed_payload(vendor, [[0.1, 0.2, 0.3], [0.4, 0.5]])
    _embed_fails(vendor, server, recorder, events, ["a", "b"], payload, is_async=is_async)


@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_empty_vectors(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    payload = embed_payload(vendor, [[], []])
    _embed_fails(vendor, server, recorder, events, ["a", "b"], payload)


@pytest.mark.parametrize("bad_index", [2, 5, -1, None])
@pytest.mark.parametrize("vendor", INDEXED_VENDORS)
def test_data_index_out_of_range_or_missing(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, bad_index: object
) -> None:
    payload = embed_payload(vendor, vectors_for(2))
    payload["data"][1]["index"] = bad_index
    _embed_fails(vendor, server, recorder, events, ["a", "b"], payload)


@pytest.mark.parametrize("vendor", INDEXED_VENDORS)
def test_data_duplicate_index(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    payload = embed_payload(vendor, vectors_for(2))
    payload["data"][1]["index"] = 0
    _embed_fails(vendor, server, recorder, events, ["a", "b"], payload, is_async=is_async)


@pytest.mark.parametrize(
    "embedding",
    [None, 5, 0.5, True, {"values": [0.1]}, ["a", "b"], [0.1, "x"], [0.1, True], [None], [[0.1]]],
    ids=[
        "null",
        "int",
        "float",
        "bool",
        "object",
        "strings",
        "mixed",
        "bool-element",
        "null-element",
        "nested",
    ],
)
@pytest.mark.parametrize("vendor", INDEXED_VENDORS)
def test_embedding_of_the_wrong_shape(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, embedding: object
) -> None:
    payload = embed_payload(vendor, vectors_for(2, width=1))
    payload["data"][0]["embedding"] = embedding
    _embed_fails(vendor, server, recorder, events, ["a", "b"], payload)


@pytest.mark.parametrize(
    "row", [None, 5, "AAAAPw==", {"a": 1}, ["x"], [True]], ids=lambda r: repr(r)
)
@pytest.mark.parametrize("vendor", ["cohere", "tei"])
def test_bare_vector_rows_of_the_wrong_shape(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, row: object
) -> None:
    payload = embed_payload(vendor, vectors_for(2, width=1))
    rows = payload if vendor == "tei" else payload["embeddings"]["float"]
    rows[1] = row
    _embed_fails(vendor, server, recorder, events, ["a", "b"], payload)


@pytest.mark.parametrize(
    "encoded",
    [
        "!!!not base64!!!",
        "AAAAPw",  # length not a multiple of 4 (missing padding)
        "AAAAP",
        "AAA=",  # 2 bytes: not a whole float32
        "AAAAPwA=",  # 5 bytes
        "AAAAPwAAgD4AAAA+AABAPw==garbage",
    ],
)
def test_invalid_base64(
    server: FakeServer, recorder: Recorder, events: list[Event], encoded: str
) -> None:
    payload = embed_payload("openai", vectors_for(1))
    payload["data"][0]["embedding"] = encoded
    _embed_fails("openai", server, recorder, events, ["a"], payload)


@pytest.mark.parametrize(
    "payload",
    [
        {"id": "x", "embeddings": {"int8": [[1, 2]]}, "meta": {}},
        {"id": "x", "meta": {}},
        {"id": "x", "embeddings": [[0.1, 0.2]]},
        {"id": "x", "embeddings": {"float": None}},
        {"id": "x", "embeddings": {"float": "AAAAPw=="}},
    ],
    ids=["only-int8", "no-embeddings", "embeddings-list", "float-null", "float-string"],
)
def test_cohere_missing_embeddings_float(
    server: FakeServer, recorder: Recorder, events: list[Event], payload: Any
) -> None:
    _embed_fails("cohere", server, recorder, events, ["a"], payload)


@pytest.mark.parametrize(
    "payload",
    [{"object": "list"}, {"data": None}, {"data": {"0": [0.1]}}, [[0.1]], "data", None],
    ids=["no-data", "data-null", "data-object", "bare-array", "string", "null"],
)
@pytest.mark.parametrize("vendor", INDEXED_VENDORS)
def test_missing_or_malformed_data(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, payload: Any
) -> None:
    _embed_fails(vendor, server, recorder, events, ["a"], payload)


@pytest.mark.parametrize(
    "payload", [{"embeddings": [[0.1]]}, None, "x"], ids=["object", "null", "str"]
)
def test_tei_embed_not_a_bare_array(
    server: FakeServer, recorder: Recorder, events: list[Event], payload: Any
) -> None:
    _embed_fails("tei", server, recorder, events, ["a"], payload)


# --------------------------------------------------------------------------- base64


def test_openai_base64_decodes_little_endian_float32(server: FakeServer, is_async: bool) -> None:
    provider = make_embedder("openai", server)
    payload = embed_payload("openai", vectors_for(1, width=4))
    payload["data"][0]["embedding"] = "AAAAPwAAgD4AAAA+AABAPw=="
    server.reply(payload)
    response = embed(provider, ["a"], extras={"encoding_format": "base64"}, is_async=is_async)
    assert response.vectors == [[0.5, 0.25, 0.125, 0.75]]
    assert response.dimensions == 4
    assert response.raw["data"][0]["embedding"] == "AAAAPwAAgD4AAAA+AABAPw=="
    assert server.only.json["encoding_format"] == "base64"


def test_openai_base64_and_arrays_mix_by_shape(server: FakeServer) -> None:
    provider = make_embedder("openai", server)
    encoded = base64.b64encode(struct.pack("<3f", 1.5, -2.0, 0.0)).decode()
    payload = embed_payload("openai", [[9.0, 8.0, 7.0], [0.0, 0.0, 0.0]], reverse=True)
    for item in payload["data"]:
        if item["index"] == 1:
            item["embedding"] = encoded
    server.reply(payload)
    response = embed(provider, ["a", "b"], is_async=False)
    assert response.vectors == [[9.0, 8.0, 7.0], [1.5, -2.0, 0.0]]


def test_base64_dimension_mismatch_is_invalid_response(
    server: FakeServer, recorder: Recorder, events: list[Event]
) -> None:
    payload = embed_payload("openai", vectors_for(2, width=4))
    payload["data"][0]["embedding"] = "AAAAPwAAgD4AAAA+AABAPw=="
    payload["data"][1]["embedding"] = "AAAAPwAAgD4="
    _embed_fails("openai", server, recorder, events, ["a", "b"], payload)


# --------------------------------------------------------------------------- rerank


@pytest.mark.parametrize("bad_index", [3, 10, -1, None])
@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_rerank_index_out_of_range_or_missing(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, bad_index: object
) -> None:
    payload = rerank_payload(vendor, [(0, 0.9), (1, 0.5)])
    entries = payload if vendor == "tei" else payload["data" if vendor == "voyage" else "results"]
    entries[1]["index"] = bad_index
    _rerank_fails(vendor, server, recorder, events, ["x", "y", "z"], payload)


@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_rerank_duplicate_index(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    payload = rerank_payload(vendor, [(1, 0.9), (1, 0.5)])
    _rerank_fails(vendor, server, recorder, events, ["x", "y"], payload, is_async=is_async)


@pytest.mark.parametrize("vendor", TOP_N_VENDORS)
def test_more_results_than_top_k(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    payload = rerank_payload(vendor, [(0, 0.9), (1, 0.5), (2, 0.1)])
    _rerank_fails(
        vendor, server, recorder, events, ["x", "y", "z"], payload, is_async=is_async, top_k=2
    )


@pytest.mark.parametrize("echo", [5, 0.5, True, False, ["x"], []], ids=repr)
@pytest.mark.parametrize("vendor", ECHO_VENDORS)
def test_document_echo_of_a_corrupt_shape(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, echo: object
) -> None:
    payload = rerank_payload(vendor, [(0, 0.9), (1, 0.5)], documents=["x", echo])
    _rerank_fails(vendor, server, recorder, events, ["x", "y"], payload, return_documents=True)


@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_rerank_score_missing(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    payload = rerank_payload(vendor, [(0, 0.9), (1, 0.5)])
    entries = payload if vendor == "tei" else payload["data" if vendor == "voyage" else "results"]
    del entries[1]["score" if vendor == "tei" else "relevance_score"]
    _rerank_fails(vendor, server, recorder, events, ["x", "y"], payload)


@pytest.mark.parametrize("vendor", INDEXED_VENDORS)
def test_data_entry_without_embedding(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    payload = embed_payload(vendor, vectors_for(2))
    del payload["data"][0]["embedding"]
    _embed_fails(vendor, server, recorder, events, ["a", "b"], payload)


@pytest.mark.parametrize(
    "payload",
    [{"model": "m"}, {"results": None}, {"results": {"0": 1}}, {"results": [5]}, None],
    ids=["no-results", "null", "object", "entry-not-object", "body-null"],
)
@pytest.mark.parametrize("vendor", ["cohere", "jina"])
def test_rerank_results_missing_or_malformed(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, payload: Any
) -> None:
    _rerank_fails(vendor, server, recorder, events, ["x"], payload)


# --------------------------------------------------------------------------- not JSON


@pytest.mark.parametrize(
    "body",
    [f"<html>{BODY_SENTINEL}</html>".encode(), b"", b'{"data": [', b"\xff\xfe\x00"],
    ids=["html", "empty", "truncated", "binary"],
)
@pytest.mark.parametrize("vendor", EMBEDDING_VENDORS)
def test_embed_body_not_json(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str, body: bytes
) -> None:
    provider = make_embedder(vendor, server, recorder)
    server.reply(raw=body)
    with pytest.raises(ProviderError) as exc:
        embed(provider, ["a"], is_async=False)
    assert exc.value.category is ErrorCategory.INVALID_RESPONSE
    assert exc.value.fingerprint is not None
    assert exc.value.fingerprint.byte_length == len(body)
    assert BODY_SENTINEL not in str(exc.value)
    assert len(events) == 1
    assert BODY_SENTINEL not in events[0].model_dump_json()


@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_rerank_body_not_json(
    server: FakeServer, recorder: Recorder, events: list[Event], is_async: bool, vendor: str
) -> None:
    provider = make_reranker(vendor, server, recorder)
    server.reply(raw=f"oops {BODY_SENTINEL}".encode())
    with pytest.raises(ProviderError) as exc:
        rerank(provider, "q", ["x"], is_async=is_async)
    assert exc.value.category is ErrorCategory.INVALID_RESPONSE
    assert BODY_SENTINEL not in str(exc.value)
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, RerankFailedEvent)
    assert event.error_category is ErrorCategory.INVALID_RESPONSE


@pytest.mark.parametrize("vendor", ["jina", "tei"])
def test_rerank_score_beyond_float_range(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    # A JSON integer too large for a float: like 1e400 (inf), not a finite score.
    payload = rerank_payload(vendor, [(0, 0.9), (1, 0.5)])
    entries = payload if vendor == "tei" else payload["data" if vendor == "voyage" else "results"]
    entries[1]["score" if vendor == "tei" else "relevance_score"] = 10**400
    _rerank_fails(vendor, server, recorder, events, ["x", "y"], payload)


@pytest.mark.parametrize("vendor", RERANK_VENDORS)
def test_rerank_score_infinite(
    server: FakeServer, recorder: Recorder, events: list[Event], vendor: str
) -> None:
    score_key = "score" if vendor == "tei" else "relevance_score"
    payload = rerank_payload(vendor, [(0, 0.9)])
    entries = payload if vendor == "tei" else payload["data" if vendor == "voyage" else "results"]
    entries[0][score_key] = "__INF__"
    provider = make_reranker(vendor, server, recorder)
    server.reply(raw=json.dumps(payload).replace('"__INF__"', "1e400").encode())
    with pytest.raises(ProviderError) as exc:
        rerank(provider, "q", ["x"], is_async=False)
    assert exc.value.category is ErrorCategory.INVALID_RESPONSE
    assert [e.kind for e in events] == ["rerank_failed"]
