"""Request bodies byte for byte, routes, auth headers, extras and managed-key collisions."""

from __future__ import annotations

from typing import Any

import pytest

from spanledger import ErrorCategory, ProviderError, Recorder
from spanledger.events import EmbeddingFailedEvent, Event, RerankFailedEvent

from .conftest import (
    API_KEY,
    EMBEDDING_MODELS,
    HOSTED_EMBEDDING_VENDORS,
    HOSTED_RERANK_VENDORS,
    RERANK_MODELS,
    TEI_URL,
    FakeServer,
    compact,
    embed,
    embed_payload,
    make_embedder,
    make_reranker,
    rerank,
    rerank_payload,
    vectors_for,
)

OPENAI = EMBEDDING_MODELS["openai"]
COHERE = EMBEDDING_MODELS["cohere"]
JINA = EMBEDDING_MODELS["jina"]
VOYAGE = EMBEDDING_MODELS["voyage"]
COHERE_RR = RERANK_MODELS["cohere"]
JINA_RR = RERANK_MODELS["jina"]
VOYAGE_RR = RERANK_MODELS["voyage"]


def _embed_once(
    vendor: str, server: FakeServer, inputs: list[str], *, is_async: bool = False, **kw: Any
) -> bytes:
    """Run one embed call against a sound reply; return the bytes that went on the wire."""
    ctor_keys = ("query_prefix", "document_prefix", "base_url", "input_type_prompt_map")
    ctor: dict[str, Any] = {k: kw.pop(k) for k in ctor_keys if k in kw}
    provider = make_embedder(vendor, server, **ctor)
    before = len(server.requests)
    server.reply(embed_payload(vendor, vectors_for(len(inputs))))
    response = embed(provider, inputs, is_async=is_async, **kw)
    assert len(response.vectors) == len(inputs)
    assert len(server.requests) == before + 1
    return server.requests[-1].content


def _rerank_once(
    vendor: str,
    server: FakeServer,
    query: str,
    documents: list[str],
    *,
    is_async: bool = False,
    **kw: Any,
) -> bytes:
    provider = make_reranker(vendor, server)
    before = len(server.requests)
    server.reply(rerank_payload(vendor, [(i, 1.0 - i / 10) for i in range(len(documents))]))
    response = rerank(provider, query, documents, is_async=is_async, **kw)
    assert len(response.results) == len(documents)
    assert len(server.requests) == before + 1
    return server.requests[-1].content


# --------------------------------------------------------------------------- OpenAI


def test_openai_body_is_model_and_input_only(server: FakeServer, is_async: bool) -> None:
    content = _embed_once("openai", server, ["a", "héllo"], is_async=is_async)
    assert content == ('{"model":"' + OPENAI + '","input":["a","héllo"]}').encode()
    assert b"encoding_format" not in content
    assert server.only.url == "https://api.openai.com/v1/embeddings"
    assert server.only.method == "POST"


def test_openai_body_with_dimensions(server: FakeServer, is_async: bool) -> None:
    content = _embed_once("openai", server, ["a"], dimensions=256, is_async=is_async)
    assert content == compact({"model": OPENAI, "input": ["a"], "dimensions": 256})


@pytest.mark.parametrize("input_type", ["query", "document", "classification"])
def test_openai_input_type_is_a_noop_without_prefixes(server: FakeServer, input_type: str) -> None:
    plain = _embed_once("openai", server, ["a", "b"], dimensions=8)
    typed = _embed_once("openai", server, ["a", "b"], dimensions=8, input_type=input_type)
    assert typed == plain
    assert b"input_type" not in typed


@pytest.mark.parametrize(
    ("input_type", "expected"),
    [("query", ["q: a", "q: b"]), ("document", ["d: a", "d: b"]), (None, ["a", "b"])],
)
def test_openai_prefixes_bound(
    server: FakeServer, is_async: bool, input_type: str | None, expected: list[str]
) -> None:
    content = _embed_once(
        "openai",
        server,
        ["a", "b"],
        is_async=is_async,
        query_prefix="q: ",
        document_prefix="d: ",
        input_type=input_type,
    )
    assert content == compact({"model": OPENAI, "input": expected})


@pytest.mark.parametrize(
    "base_url",
    [
        "http://vllm.invalid",
        "http://vllm.invalid/",
        "http://vllm.invalid/v1",
        "http://vllm.invalid/v1/",
    ],
)
def test_openai_base_url_origin_or_v1_posts_to_one_route(server: FakeServer, base_url: str) -> None:
    _embed_once("openai", server, ["a"], base_url=base_url)
    assert server.only.url == "http://vllm.invalid/v1/embeddings"


def test_openai_encoding_format_extra_rides_at_root(server: FakeServer) -> None:
    _embed_once("openai", server, ["a"], extras={"encoding_format": "base64", "user": "u-1"})
    assert server.only.json == {
        "model": OPENAI,
        "input": ["a"],
        "encoding_format": "base64",
        "user": "u-1",
    }
    assert list(server.only.json)[:2] == ["model", "input"]


# --------------------------------------------------------------------------- Cohere


@pytest.mark.parametrize(
    ("input_type", "wire"),
    [
        (None, "search_document"),
        ("query", "search_query"),
        ("document", "search_document"),
        ("classification", "classification"),
        ("clustering", "clustering"),
    ],
)
def test_cohere_embed_body(
    server: FakeServer, is_async: bool, input_type: str | None, wire: str
) -> None:
    content = _embed_once("cohere", server, ["a", "b"], input_type=input_type, is_async=is_async)
    assert content == compact(
        {
            "model": COHERE,
            "input_type": wire,
            "texts": ["a", "b"],
            "embedding_types": ["float"],
            "truncate": "NONE",
        }
    )
    assert server.only.url == "https://api.cohere.com/v2/embed"


def test_cohere_embed_body_with_dimensions(server: FakeServer) -> None:
    content = _embed_once("cohere", server, ["a"], input_type="query", dimensions=512)
    assert content == compact(
        {
            "model": COHERE,
            "input_type": "search_query",
            "texts": ["a"],
            "embedding_types": ["float"],
            "truncate": "NONE",
            "output_dimension": 512,
        }
    )


def test_cohere_rerank_body(server: FakeServer, is_async: bool) -> None:
    content = _rerank_once("cohere", server, "q", ["x", "y"], is_async=is_async)
    assert content == compact({"model": COHERE_RR, "query": "q", "documents": ["x", "y"]})
    assert server.only.url == "https://api.cohere.com/v2/rerank"


def test_cohere_rerank_top_n(server: FakeServer) -> None:
    provider = make_reranker("cohere", server)
    server.reply(rerank_payload("cohere", [(1, 0.9)]))
    rerank(provider, "q", ["x", "y"], top_k=1, is_async=False)
    assert server.only.content == compact(
        {"model": COHERE_RR, "query": "q", "documents": ["x", "y"], "top_n": 1}
    )


def test_cohere_rerank_return_documents_is_byte_identical(server: FakeServer) -> None:
    plain = _rerank_once("cohere", server, "q", ["x", "y"])
    with_docs = _rerank_once("cohere", server, "q", ["x", "y"], return_documents=True)
    without = _rerank_once("cohere", server, "q", ["x", "y"], return_documents=False)
    assert with_docs == plain == without


# --------------------------------------------------------------------------- Jina


@pytest.mark.parametrize(
    ("input_type", "task"),
    [(None, None), ("query", "retrieval.query"), ("document", "retrieval.passage")],
)
def test_jina_embed_body(
    server: FakeServer, is_async: bool, input_type: str | None, task: str | None
) -> None:
    content = _embed_once("jina", server, ["a", "b"], input_type=input_type, is_async=is_async)
    expected: dict[str, Any] = {"model": JINA, "input": ["a", "b"]}
    if task is not None:
        expected["task"] = task
    expected["truncate"] = False
    assert content == compact(expected)
    assert server.only.url == "https://api.jina.ai/v1/embeddings"


def test_jina_embed_body_with_dimensions(server: FakeServer) -> None:
    content = _embed_once("jina", server, ["a"], input_type="query", dimensions=64)
    assert content == (
        b'{"model":"' + JINA.encode() + b'","input":["a"],"task":"retrieval.query",'
        b'"dimensions":64,"truncate":false}'
    )


@pytest.mark.parametrize(
    ("kw", "expected_tail"),
    [
        ({}, {"return_documents": False, "truncation": False}),
        ({"return_documents": False}, {"return_documents": False, "truncation": False}),
        ({"return_documents": True}, {"return_documents": True, "truncation": False}),
        ({"top_k": 2}, {"top_n": 2, "return_documents": False, "truncation": False}),
    ],
)
def test_jina_rerank_body(
    server: FakeServer, is_async: bool, kw: dict[str, Any], expected_tail: dict[str, Any]
) -> None:
    content = _rerank_once("jina", server, "q", ["x", "y"], is_async=is_async, **kw)
    assert content == compact(
        {"model": JINA_RR, "query": "q", "documents": ["x", "y"], **expected_tail}
    )
    assert server.only.url == "https://api.jina.ai/v1/rerank"


# --------------------------------------------------------------------------- TEI


def test_tei_embed_body(server: FakeServer, is_async: bool) -> None:
    content = _embed_once("tei", server, ["a", "b"], is_async=is_async)
    assert content == b'{"inputs":["a","b"]}'
    assert server.only.url == TEI_URL + "/embed"


def test_tei_embed_body_single_input_is_still_an_array(server: FakeServer) -> None:
    assert _embed_once("tei", server, ["only"]) == b'{"inputs":["only"]}'


def test_tei_embed_prompt_name_and_dimensions(server: FakeServer) -> None:
    prompts = {"query": "query", "document": "passage"}
    query = _embed_once(
        "tei", server, ["a"], input_type="query", input_type_prompt_map=prompts, dimensions=128
    )
    doc = _embed_once("tei", server, ["a"], input_type="document", input_type_prompt_map=prompts)
    symmetric = _embed_once("tei", server, ["a"], input_type_prompt_map=prompts)
    assert query == b'{"inputs":["a"],"prompt_name":"query","dimensions":128}'
    assert doc == b'{"inputs":["a"],"prompt_name":"passage"}'
    assert symmetric == b'{"inputs":["a"]}'
    assert all(b"truncate" not in seen.content for seen in server.requests)


@pytest.mark.parametrize(
    ("kw", "return_text"), [({}, False), ({"return_documents": True}, True), ({"top_k": 1}, False)]
)
def test_tei_rerank_body(
    server: FakeServer, is_async: bool, kw: dict[str, Any], return_text: bool
) -> None:
    provider = make_reranker("tei", server)
    server.reply(rerank_payload("tei", [(1, 0.2), (0, 0.7)]))
    rerank(provider, "q", ["x", "y"], is_async=is_async, **kw)
    assert server.only.content == compact(
        {"query": "q", "texts": ["x", "y"], "truncate": False, "return_text": return_text}
    )
    assert server.only.url == TEI_URL + "/rerank"


# --------------------------------------------------------------------------- Voyage


@pytest.mark.parametrize(
    ("kw", "middle"),
    [
        ({}, {}),
        ({"input_type": "query"}, {"input_type": "query"}),
        (
            {"input_type": "document", "dimensions": 512},
            {"input_type": "document", "output_dimension": 512},
        ),
    ],
)
def test_voyage_embed_body(
    server: FakeServer, is_async: bool, kw: dict[str, Any], middle: dict[str, Any]
) -> None:
    content = _embed_once("voyage", server, ["a", "b"], is_async=is_async, **kw)
    assert content == compact({"model": VOYAGE, "input": ["a", "b"], **middle, "truncation": False})
    assert server.only.url == "https://api.voyageai.com/v1/embeddings"


@pytest.mark.parametrize(
    ("kw", "tail"),
    [
        ({}, {"return_documents": False, "truncation": False}),
        (
            {"top_k": 1, "return_documents": True},
            {"top_k": 1, "return_documents": True, "truncation": False},
        ),
    ],
)
def test_voyage_rerank_body(
    server: FakeServer, is_async: bool, kw: dict[str, Any], tail: dict[str, Any]
) -> None:
    provider = make_reranker("voyage", server)
    server.reply(rerank_payload("voyage", [(1, 0.9)]))
    rerank(provider, "q", ["x", "y"], is_async=is_async, **kw)
    assert server.only.content == compact(
        {"model": VOYAGE_RR, "query": "q", "documents": ["x", "y"], **tail}
    )
    assert server.only.url == "https://api.voyageai.com/v1/rerank"


# --------------------------------------------------------------------------- headers


@pytest.mark.parametrize("vendor", HOSTED_EMBEDDING_VENDORS)
def test_hosted_embed_sends_bearer_auth(server: FakeServer, vendor: str) -> None:
    _embed_once(vendor, server, ["a"])
    assert server.only.headers["authorization"] == f"Bearer {API_KEY}"
    assert server.only.headers["content-type"] == "application/json"


@pytest.mark.parametrize("vendor", HOSTED_RERANK_VENDORS)
def test_hosted_rerank_sends_bearer_auth(server: FakeServer, vendor: str) -> None:
    _rerank_once(vendor, server, "q", ["x"])
    assert server.only.headers["authorization"] == f"Bearer {API_KEY}"


def test_tei_sends_no_auth_by_default(server: FakeServer) -> None:
    _embed_once("tei", server, ["a"])
    _rerank_once("tei", server, "q", ["x"])
    assert len(server.requests) == 2
    assert all("authorization" not in seen.headers for seen in server.requests)


def test_tei_sends_bearer_when_given_a_key(server: FakeServer) -> None:
    provider = make_embedder("tei", server, api_key="tei-secret")
    server.reply(embed_payload("tei", vectors_for(1)))
    embed(provider, ["a"], is_async=False)
    assert server.only.headers["authorization"] == "Bearer tei-secret"


# --------------------------------------------------------------------------- extras


@pytest.mark.parametrize("vendor", ["openai", "cohere", "jina", "tei", "voyage"])
def test_embed_extras_ride_at_body_root(server: FakeServer, vendor: str) -> None:
    _embed_once(vendor, server, ["a"], extras={"custom_flag": {"nested": [1, 2]}, "user": "u"})
    body = server.only.json
    assert body["custom_flag"] == {"nested": [1, 2]}
    assert body["user"] == "u"


@pytest.mark.parametrize("vendor", ["cohere", "jina", "tei", "voyage"])
def test_rerank_extras_ride_at_body_root(server: FakeServer, vendor: str) -> None:
    _rerank_once(vendor, server, "q", ["x"], extras={"max_tokens_per_doc": 512})
    assert server.only.json["max_tokens_per_doc"] == 512


# --------------------------------------------------------------------------- collisions


def _assert_rejected_unsent(
    exc: pytest.ExceptionInfo[ProviderError], server: FakeServer, events: list[Event]
) -> None:
    assert exc.value.category is ErrorCategory.INVALID_REQUEST
    assert server.requests == []
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, EmbeddingFailedEvent | RerankFailedEvent)
    assert event.error_category is ErrorCategory.INVALID_REQUEST


@pytest.mark.parametrize(
    ("vendor", "extras"),
    [
        ("jina", {"truncate": True}),
        ("jina", {"truncate": "false"}),
        ("tei", {"truncate": True}),
        ("openai", {"dimensions": 16}),
        ("tei", {"dimensions": 16}),
        ("cohere", {"output_dimension": 16}),
        ("cohere", {"truncate": "END"}),
        ("cohere", {"truncate": "START"}),
        ("jina", {"task": "text-matching"}),
        ("voyage", {"truncation": True}),
    ],
)
def test_embed_conflicting_managed_extra_is_rejected_before_sending(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    vendor: str,
    extras: dict[str, Any],
) -> None:
    # dimensions / input_type are set so the keys they realise are managed
    kw: dict[str, Any] = {"dimensions": 8}
    if vendor == "jina":
        kw["input_type"] = "query"
    provider = make_embedder(vendor, server, recorder)
    with pytest.raises(ProviderError) as exc:
        embed(provider, ["a"], extras=extras, is_async=is_async, **kw)
    _assert_rejected_unsent(exc, server, events)


@pytest.mark.parametrize(
    ("vendor", "extras"),
    [
        ("jina", {"truncation": True}),
        ("tei", {"truncate": True}),
        ("voyage", {"truncation": True}),
        ("jina", {"return_documents": True}),
    ],
)
def test_rerank_conflicting_managed_extra_is_rejected_before_sending(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    vendor: str,
    extras: dict[str, Any],
) -> None:
    provider = make_reranker(vendor, server, recorder)
    with pytest.raises(ProviderError) as exc:
        rerank(provider, "q", ["x"], extras=extras, is_async=is_async)
    _assert_rejected_unsent(exc, server, events)


@pytest.mark.parametrize(
    ("vendor", "extras"),
    [
        ("jina", {"truncate": False}),
        ("openai", {"dimensions": 8}),
        ("tei", {"dimensions": 8}),
        ("cohere", {"output_dimension": 8}),
        ("cohere", {"truncate": "NONE"}),
        ("cohere", {"embedding_types": ["float"]}),
        ("jina", {"task": "retrieval.query"}),
        ("voyage", {"truncation": False}),
    ],
)
def test_embed_equal_managed_extra_is_a_noop(
    server: FakeServer, vendor: str, extras: dict[str, Any]
) -> None:
    kw: dict[str, Any] = {"dimensions": 8}
    if vendor == "jina":
        kw["input_type"] = "query"
    plain = _embed_once(vendor, server, ["a"], **kw)
    same = _embed_once(vendor, server, ["a"], extras=extras, **kw)
    assert same == plain


@pytest.mark.parametrize(
    ("vendor", "extras"),
    [
        ("jina", {"truncation": False}),
        ("tei", {"truncate": False}),
        ("voyage", {"truncation": False}),
    ],
)
def test_rerank_equal_managed_extra_is_a_noop(
    server: FakeServer, vendor: str, extras: dict[str, Any]
) -> None:
    plain = _rerank_once(vendor, server, "q", ["x"])
    same = _rerank_once(vendor, server, "q", ["x"], extras=extras)
    assert same == plain


def test_tei_embed_truncate_false_extra_is_omitted_entirely(server: FakeServer) -> None:
    content = _embed_once("tei", server, ["a"], dimensions=4, extras={"truncate": False})
    assert content == b'{"inputs":["a"],"dimensions":4}'


def test_openai_dimensions_extra_rides_through_when_dimensions_unset(server: FakeServer) -> None:
    content = _embed_once("openai", server, ["a"], extras={"dimensions": 16})
    assert server.only.json == {"model": OPENAI, "input": ["a"], "dimensions": 16}
    assert content.count(b'"dimensions"') == 1


def test_tei_dimensions_extra_rides_through_when_dimensions_unset(server: FakeServer) -> None:
    _embed_once("tei", server, ["a"], extras={"dimensions": 16})
    assert server.only.json == {"inputs": ["a"], "dimensions": 16}


def test_cohere_output_dimension_extra_rides_through_when_dimensions_unset(
    server: FakeServer,
) -> None:
    _embed_once("cohere", server, ["a"], extras={"output_dimension": 256})
    assert server.only.json["output_dimension"] == 256


def test_jina_task_extra_passes_through_when_input_type_absent(server: FakeServer) -> None:
    _embed_once("jina", server, ["a"], extras={"task": "text-matching"})
    assert server.only.json == {
        "model": JINA,
        "input": ["a"],
        "truncate": False,
        "task": "text-matching",
    }


@pytest.mark.parametrize(
    ("extra", "merged"),
    [
        (["int8"], ["float", "int8"]),
        (["int8", "float", "ubinary", "int8"], ["float", "int8", "ubinary"]),
        (["float"], ["float"]),
        ([], ["float"]),
        ("int8", ["float"]),
        (["int8", 5], ["float"]),
        (["int8", None], ["float"]),
        ({"int8": True}, ["float"]),
        (None, ["float"]),
    ],
)
def test_cohere_embedding_types_merge(
    server: FakeServer, is_async: bool, extra: object, merged: list[str]
) -> None:
    provider = make_embedder("cohere", server)
    server.reply(embed_payload("cohere", vectors_for(1)))
    response = embed(provider, ["a"], extras={"embedding_types": extra}, is_async=is_async)
    assert len(response.vectors) == 1
    assert server.only.content == compact(
        {
            "model": COHERE,
            "input_type": "search_document",
            "texts": ["a"],
            "embedding_types": merged,
            "truncate": "NONE",
        }
    )


def test_cohere_reads_only_float_when_other_types_requested(server: FakeServer) -> None:
    provider = make_embedder("cohere", server)
    payload = embed_payload("cohere", [[0.5, 0.25]])
    payload["embeddings"]["int8"] = [[1, 2]]
    server.reply(payload)
    response = embed(provider, ["a"], extras={"embedding_types": ["int8"]}, is_async=False)
    assert response.vectors == [[0.5, 0.25]]
    assert response.raw["embeddings"]["int8"] == [[1, 2]]
