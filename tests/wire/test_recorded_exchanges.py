"""Every recorded third-party exchange, replayed through the recording transport.

Each file in ``recorded/`` is replayed twice: over ``httpx.MockTransport`` at its recorded URL,
and over a real socket on 127.0.0.1. The events must say what ``replay.expected`` reads from
the file itself. Body-only recordings go through the readers directly; routes that are not
embedding or rerank calls must pass through unrecorded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from spanledger.errors import ErrorCategory, ProviderError
from spanledger.wire.endpoints import (
    BEDROCK_COHERE_EMBEDDINGS,
    BEDROCK_RERANK,
    GEMINI_EMBEDDINGS,
    Endpoint,
)
from spanledger.wire.read import read_embeddings, read_rerank

from .replay import (
    BODY_ONLY,
    EXCHANGES,
    HOP_BY_HOP,
    REPLAYED,
    Exchange,
    LoopbackServer,
    body_bytes,
    check_events,
    expected,
    load,
    loopback,
    post,
    replay_mocked,
    vectors_of,
    vendor_of,
)

SENTINEL = "zq-sentinel-7f3a"
TEXT_KEYS = frozenset({"inputText", "texts", "text", "value", "content", "input", "prompt"})


def ids(exchanges: list[Exchange]) -> list[Any]:
    return [pytest.param(ex, id=ex.stem) for ex in exchanges]


@pytest.fixture(scope="module")
def server() -> Iterator[LoopbackServer]:
    yield from loopback()


# --- the recordings themselves ------------------------------------------------------------------

DOCUMENTED_USAGE = {
    # recorded/README.md's figures, so an edited recording is caught, not silently followed
    "titan-embed-text-v1": 4,
    "titan-embed-text-v2": 5,
    "titan-embed-text-v2-dimensions-256": 4,
    "titan-embed-text-v2-normalize-false": 4,
    "titan-embed-text-v2-application-inference-profile": 5,
    "titan-embed-text-v2-with-requestid": 8,
    "cohere-embed-english-v3": 4,
    "cohere-embed-english-v3-classification": 4,
    "cohere-embed-v4": 4,
    "cohere-embed-v4-batch-2": 2,
    "cohere-embed-v4-us-profile": 5,
    "cohere-embed-v4-us-profile-batch-3-dim-512": 3,
    "nova-2-multimodal-embeddings": 19,
    "gemini-api-batch-embed-gemini-embedding-001-3-texts": None,
    "gemini-api-batch-embed-gemini-embedding-001-llm-gemini": None,
    "gemini-api-batch-embed-gemini-embedding-001-two-parts-one-content": None,
    "gemini-api-batch-embed-gemini-embedding-2": 4,
    "gemini-api-batch-embed-gemini-embedding-2-batch-2-dim-768": 4,
    "gemini-api-batch-embed-gemini-embedding-2-dim-768-ruby": 8,
    "gemini-api-batch-embed-gemini-embedding-2-preview-no-usage": None,
    "gemini-api-batch-embed-gemini-embedding-2-preview-with-usage": 1,
    "gemini-api-batch-embed-embedding-001-legacy": None,
    "vertex-predict-text-embedding-004-3-texts": 4,
    "vertex-predict-gemini-embedding-001": 4,
    "vertex-embedcontent-gemini-embedding-2": 11,
    "embeddings-text-embedding-3-large-base64": 8,
    "embeddings-ada-base64": 4,
    "foundry-openai-v1-embeddings-cohere-embed-v3-english": 8,
    "embeddings-single-2025-09": 10,
    "embeddings-batch-3-2026-08": 9,
    "api-embed-cold-load": 4,
    "api-embed-warm": 9,
    "api-embed-client": 2,
    "api-embeddings-legacy": None,
    "v1-embeddings-openai-compat": 4,
}
SUCCESSES = [ex for ex in REPLAYED if (wanted := expected(ex)) and wanted["kind"] == "embedding"]


def test_every_recording_is_replayed() -> None:
    """Each file is either replayed over HTTP or read body-only; none is left out."""
    assert len(EXCHANGES) == 49
    assert {ex.stem for ex in REPLAYED} | {ex.stem for ex in BODY_ONLY} == {
        ex.stem for ex in EXCHANGES
    }
    assert {ex.stem for ex in SUCCESSES} == set(DOCUMENTED_USAGE)


@pytest.mark.parametrize("stem", sorted(DOCUMENTED_USAGE))
def test_recording_says_what_its_readme_says(stem: str) -> None:
    """The independent reader finds the README's figure, and vectors cut to 8 values."""
    ex = load(stem)
    wanted = expected(ex)
    assert wanted is not None
    assert wanted["kind"] == "embedding"
    assert wanted["usage"] == DOCUMENTED_USAGE[ex.stem]
    assert wanted["dimensions"] == 8
    assert ex.data["original_dimensions"] > 8
    assert all(len(vector) == 8 for vector in vectors_of(ex))


# --- 1. over httpx.MockTransport ------------------------------------------------------------------


@pytest.mark.parametrize("ex", ids(REPLAYED))
def test_replayed_over_mock_transport(ex: Exchange) -> None:
    replayed = replay_mocked(ex)
    check_events(ex, replayed.events)
    # the caller reads the response exactly as sent
    assert replayed.response.status_code == ex.status
    assert replayed.response.content == body_bytes(ex.body)
    for name, value in ex.headers:
        assert replayed.response.headers[name] == value
    for event in replayed.events:
        assert event.server_address == httpx.URL(ex.url or "").host


# --- 2. over a real socket ----------------------------------------------------------------------


@pytest.mark.parametrize("ex", ids(REPLAYED))
def test_replayed_over_loopback_socket(ex: Exchange, server: LoopbackServer) -> None:
    assert ex.url is not None
    url = server.serve(ex)
    vendors = {server.origin + "/": vendor_of(ex.url)}
    replayed = post(ex, httpx.HTTPTransport(), url=url, vendors=vendors)
    assert replayed.response.status_code == ex.status
    assert replayed.response.json() == ex.body
    for name, value in ex.headers:  # a multi-valued header came as several lines
        if name not in HOP_BY_HOP:
            assert replayed.response.headers[name] == value
    check_events(ex, replayed.events)
    for event in replayed.events:
        assert (event.server_address, event.server_port) == ("127.0.0.1", server.server_port)


# --- body-only recordings -----------------------------------------------------------------------

BODY_ONLY_DECLARATIONS: dict[str, Endpoint] = {
    "rerank-agent-runtime-body-only": BEDROCK_RERANK,
    "error-cohere-embed-v4-malformed-body-only": BEDROCK_COHERE_EMBEDDINGS,
    "error-gemini-api-batch-embed-400-batch-limit-body-only": GEMINI_EMBEDDINGS,
}


def test_body_only_recordings_are_known() -> None:
    assert {ex.stem for ex in BODY_ONLY} == set(BODY_ONLY_DECLARATIONS)


def test_bedrock_rerank_body_reads_as_recorded() -> None:
    (ex,) = (ex for ex in BODY_ONLY if ex.stem == "rerank-agent-runtime-body-only")
    recorded = ex.body["results"]
    # index 5 is the highest recorded: the request held at least 6 sources
    for documents in (None, 6, 10):
        part = read_rerank(BEDROCK_RERANK, ex.body, documents, None)
        assert part.count == len(recorded) == 2
        assert [(r.index, r.relevance_score) for r in part.results] == [
            (r["index"], r["relevanceScore"]) for r in recorded
        ]
        assert part.usage is None  # Bedrock's Rerank reports no usage of any kind
        assert part.malformed_usage == ()
        assert part.response_id is None
        assert part.model is None


@pytest.mark.parametrize(
    "ex", ids([ex for ex in BODY_ONLY if ex.stem != "rerank-agent-runtime-body-only"])
)
def test_error_body_is_never_an_empty_success(ex: Exchange) -> None:
    """An error body read where a success body belongs is a corrupt payload."""
    endpoint = BODY_ONLY_DECLARATIONS[ex.stem]
    for count in (None, 1):
        with pytest.raises(ProviderError) as raised:
            read_embeddings(endpoint, ex.body, count, headers={})
        assert raised.value.category is ErrorCategory.INVALID_RESPONSE


# --- 4. privacy ---------------------------------------------------------------------------------


def sentinelled(node: Any, key: str | None = None) -> Any:
    """``node`` with every input text (and every text echoed back) holding the sentinel."""
    if isinstance(node, dict):
        return {k: sentinelled(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return [sentinelled(item, key) for item in node]
    if isinstance(node, str) and key in TEXT_KEYS:
        return f"{SENTINEL} {node}"
    return node


WITH_TEXTS = [ex for ex in REPLAYED if isinstance(ex.request_body, dict)]


@pytest.mark.parametrize("ex", ids(WITH_TEXTS))
def test_input_texts_never_reach_events(ex: Exchange) -> None:
    request = sentinelled(ex.request_body)
    assert SENTINEL in body_bytes(request).decode()
    echoed = ex.replace(request_body=request, body=sentinelled(ex.body))
    replayed = replay_mocked(echoed)
    check_events(echoed, replayed.events)  # the sentinel changes no count or figure
    if expected(echoed) is not None:
        assert replayed.events
    for event in replayed.events:
        assert SENTINEL not in event.model_dump_json()
        assert SENTINEL not in repr(event)


def test_routes_left_unrecorded_are_the_non_embedding_ones() -> None:
    """The pass-through cases are exactly the Converse, generateContent, countTokens and chat
    recordings (and the Bedrock InvokeModel recorded without a body)."""
    passed = {ex.stem for ex in REPLAYED if expected(ex) is None}
    assert passed == {
        "error-converse-auth-403",
        "error-converse-validation-400",
        "error-invoke-invalid-model-400",
        "error-vertex-generatecontent-400",
        "gemini-api-count-tokens-gemini-embedding-2-preview",
        "error-chat-401",
        "error-api-chat-404-model-not-found",
    }
