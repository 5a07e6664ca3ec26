"""The recording httpx transport: vendor calls in plain httpx traffic, read by the same rules."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

import spanledger
from spanledger import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
    Recorder,
    RerankEvent,
    RerankFailedEvent,
)
from spanledger.events import Event
from spanledger.providers import (
    CohereEmbeddings,
    CohereReranker,
    JinaEmbeddings,
    JinaReranker,
    OpenAIEmbeddings,
    TEIEmbeddings,
    TEIReranker,
    VoyageEmbeddings,
    VoyageReranker,
)
from spanledger.testing import StandIn
from tests.instrument.conftest import QUERY, TEXTS, Tape, closed_port

Build = Callable[[str, httpx.Client, Recorder], Any]

EMBEDDERS: dict[str, tuple[str, Build]] = {
    "openai": (
        "openai",
        lambda url, c, r: OpenAIEmbeddings("m", base_url=url, http_client=c, recorder=r),
    ),
    "cohere": (
        "cohere",
        lambda url, c, r: CohereEmbeddings("m", base_url=url, http_client=c, recorder=r),
    ),
    "jina": (
        "jina",
        lambda url, c, r: JinaEmbeddings("m", base_url=url, http_client=c, recorder=r),
    ),
    "voyageai": (
        "voyageai",
        lambda url, c, r: VoyageEmbeddings("m", base_url=url, http_client=c, recorder=r),
    ),
    "tei": ("tei", lambda url, c, r: TEIEmbeddings("m", base_url=url, http_client=c, recorder=r)),
}
RERANKERS: dict[str, tuple[str, Build]] = {
    "cohere": (
        "cohere",
        lambda url, c, r: CohereReranker("rerank-v3.5", base_url=url, http_client=c, recorder=r),
    ),
    "jina": (
        "jina",
        lambda url, c, r: JinaReranker("jina-reranker-v2", base_url=url, http_client=c, recorder=r),
    ),
    "voyageai": (
        "voyageai",
        lambda url, c, r: VoyageReranker("rerank-2", base_url=url, http_client=c, recorder=r),
    ),
    "tei": ("tei", lambda url, c, r: TEIReranker("m", base_url=url, http_client=c, recorder=r)),
}
SHARED = (
    "provider",
    "usage",
    "response_id",
    "response_model",
    "server_address",
    "server_port",
)
WIRE_QUERY_TYPE = {"cohere": "search_query", "jina": "retrieval.query", "voyageai": "query"}


def same_facts(seen: Event, truth: Event, *fields: str) -> None:
    for name in (*SHARED, *fields):
        assert getattr(seen, name) == getattr(truth, name), name


@pytest.mark.parametrize("vendor", EMBEDDERS)
@pytest.mark.parametrize("model", ["m", "usage-malformed", "usage-missing"])
def test_embedding_calls_are_read_as_the_provider_reads_them(
    vendor: str, model: str, standin: StandIn, tape: Tape
) -> None:
    provider_name, build = EMBEDDERS[vendor]
    truth = Tape()
    behaviour = model if vendor == "tei" and model != "m" else None
    url = standin.base_url(vendor, behaviour)
    client = httpx.Client(transport=spanledger.instrumentation.transport())
    embedder = build(url, client, Recorder([truth]))
    if model != "m" and vendor != "tei":
        embedder._mapping.model = model

    embedder.embed(TEXTS, input_type="query" if vendor in ("cohere", "jina", "voyageai") else None)

    [seen], [expected] = tape.events, truth.events
    assert isinstance(seen, EmbeddingEvent)
    assert isinstance(expected, EmbeddingEvent)
    assert seen.provider == provider_name
    same_facts(seen, expected, "input_count", "inputs", "dimensions")
    assert seen.model == (expected.model if vendor != "tei" else "unknown")
    assert seen.input_type == WIRE_QUERY_TYPE.get(vendor)  # as sent on the wire
    if model == "m" and vendor != "tei":
        assert seen.usage is not None


@pytest.mark.parametrize("vendor", RERANKERS)
@pytest.mark.parametrize("top_k", [None, 2])
def test_rerank_calls_are_read_as_the_provider_reads_them(
    vendor: str, top_k: int | None, standin: StandIn, tape: Tape
) -> None:
    _, build = RERANKERS[vendor]
    truth = Tape()
    client = httpx.Client(transport=spanledger.instrumentation.transport())
    reranker = build(standin.base_url(vendor), client, Recorder([truth]))

    reranker.rerank(QUERY, TEXTS, top_k=top_k, return_documents=vendor != "cohere")

    [seen], [expected] = tape.events, truth.events
    assert isinstance(seen, RerankEvent)
    assert isinstance(expected, RerankEvent)
    same_facts(seen, expected, "query_length", "document_count", "query", "documents")
    if vendor != "cohere":  # Cohere's wire has no return_documents
        assert seen.request_params == expected.request_params
    if vendor != "tei":  # TEI has no top_k on the wire: the provider cuts client-side
        assert (seen.top_k, seen.result_count) == (expected.top_k, expected.result_count)


def test_a_declared_vendor_wins_over_guessing(standin: StandIn, tape: Tape) -> None:
    transport = spanledger.instrumentation.transport(vendors={f"{standin.url}/jina": "jina"})
    with httpx.Client(transport=transport) as client:
        client.post(f"{standin.url}/jina/v1/embeddings", json={"model": "m", "input": ["x"]})

    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.provider == "jina"
    assert event.usage is not None


def test_other_traffic_passes_through_untouched(standin: StandIn, tape: Tape) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"ok": True})

    transport = spanledger.instrumentation.transport(httpx.MockTransport(handler))
    with httpx.Client(transport=transport) as client:
        responses = [
            client.get("https://api.openai.com/v1/embeddings"),
            client.post("https://example.com/v1/chat/completions", json={"model": "m"}),
            client.post("https://example.com/v1/embeddings", content=b"not json"),
            client.post("https://api.openai.com/v1/rerank", json={"query": "q"}),
        ]

    assert tape.events == []
    assert [r.json() for r in responses] == [{"ok": True}] * 4
    assert len(seen) == 4


def gzip_transport(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.MockTransport:
    raw = gzip.compress(json.dumps(body).encode())

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, content=raw, headers={"content-encoding": "gzip", **(headers or {})}
        )

    return httpx.MockTransport(handler)


OPENAI_BODY = {
    "object": "list",
    "model": "text-embedding-3-small",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25, 0.125]}],
    "usage": {"prompt_tokens": 9, "total_tokens": 9},
}


def test_the_caller_reads_the_response_exactly_as_before(tape: Tape) -> None:
    transport = spanledger.instrumentation.transport(gzip_transport(200, OPENAI_BODY))
    with httpx.Client(transport=transport) as client:
        plain = client.post(
            "https://api.openai.com/v1/embeddings", json={"model": "m", "input": "x"}
        )
        with client.stream(
            "POST", "https://api.openai.com/v1/embeddings", json={"model": "m", "input": "x"}
        ) as streamed:
            chunks = b"".join(streamed.iter_bytes())
            raw = streamed.extensions

    assert plain.json() == OPENAI_BODY
    assert json.loads(chunks) == OPENAI_BODY
    assert plain.headers["content-encoding"] == "gzip"
    assert raw is not None
    first = tape.events[0]
    assert isinstance(first, EmbeddingEvent)
    assert first.usage == EmbeddingUsage(input_tokens=9)
    assert (first.dimensions, first.server_address, first.server_port) == (3, "api.openai.com", 443)


def test_an_error_status_is_recorded_with_a_fingerprint(tape: Tape) -> None:
    inner = gzip_transport(429, {"error": "slow down"}, {"retry-after": "5"})
    with httpx.Client(transport=spanledger.instrumentation.transport(inner)) as client:
        response = client.post(
            "https://api.cohere.com/v2/rerank",
            json={"model": "r", "query": "q", "documents": ["a"]},
        )

    assert response.status_code == 429
    assert response.json() == {"error": "slow down"}
    [event] = tape.events
    assert isinstance(event, RerankFailedEvent)
    assert (event.error_category, event.retry_after) == (ErrorCategory.RATE_LIMIT, 5.0)
    assert event.fingerprint is not None
    assert event.fingerprint.byte_length == len(b'{"error": "slow down"}')


def test_a_body_that_is_not_the_endpoints_answer_is_an_invalid_response(tape: Tape) -> None:
    inner = httpx.MockTransport(lambda request: httpx.Response(200, content=b"<html>"))
    with httpx.Client(transport=spanledger.instrumentation.transport(inner)) as client:
        response = client.post(
            "https://api.voyageai.com/v1/rerank",
            json={"model": "rerank-2", "query": "q", "documents": ["a"]},
        )

    assert response.content == b"<html>"
    [event] = tape.events
    assert isinstance(event, RerankFailedEvent)
    assert (event.error_category, event.error_type) == (
        ErrorCategory.INVALID_RESPONSE,
        "invalid_json",
    )


DEEP = b"[" * 100_000


@pytest.mark.parametrize(
    ("body", "error_type"),
    [
        (DEEP, "invalid_json"),
        (b'{"error": {"message": "quota"}}', "missing_field"),
        (b'{"object": "list", "usage": {"prompt_tokens": 3}}', "missing_field"),
    ],
)
def test_an_embeddings_body_without_vectors_is_an_invalid_response(
    tape: Tape, body: bytes, error_type: str
) -> None:
    inner = httpx.MockTransport(lambda request: httpx.Response(200, content=body))
    with httpx.Client(transport=spanledger.instrumentation.transport(inner)) as client:
        response = client.post(
            "https://api.openai.com/v1/embeddings", json={"model": "m", "input": ["x"]}
        )

    assert response.content == body
    assert [kind for kind, _ in tape.log] == ["start", "event"]
    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.error_type) == (ErrorCategory.INVALID_RESPONSE, error_type)


async def test_a_body_too_deep_to_decode_still_ends_the_async_call(tape: Tape) -> None:
    inner = httpx.MockTransport(lambda request: httpx.Response(200, content=DEEP))
    async with httpx.AsyncClient(
        transport=spanledger.instrumentation.async_transport(inner)
    ) as client:
        response = await client.post(
            "https://api.cohere.com/v2/rerank", json={"model": "r", "query": "q", "documents": []}
        )

    assert response.content == DEEP
    [event] = tape.events
    assert isinstance(event, RerankFailedEvent)
    assert event.error_type == "invalid_json"


def test_a_followed_redirect_is_seen_hop_by_hop(tape: Tape) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if request.url.path == "/old/v1/embeddings":
            return httpx.Response(307, headers={"location": "/new/v1/embeddings"})
        return httpx.Response(200, json=OPENAI_BODY)

    transport = spanledger.instrumentation.transport(httpx.MockTransport(handler))
    with httpx.Client(transport=transport, follow_redirects=True) as client:
        response = client.post(
            "https://api.openai.com/old/v1/embeddings", json={"model": "m", "input": ["x"]}
        )

    assert response.json() == OPENAI_BODY
    assert seen == ["/old/v1/embeddings", "/new/v1/embeddings"]
    assert [kind for kind, _ in tape.log] == ["start", "event", "start", "event"]
    hop, answer = tape.events
    assert isinstance(hop, EmbeddingFailedEvent)
    assert (hop.status_code, hop.error_type, hop.estimated_usage) == (307, "http_307", None)
    assert isinstance(answer, EmbeddingEvent)
    assert (answer.usage, answer.input_count) == (EmbeddingUsage(input_tokens=9), 1)


@pytest.mark.parametrize(
    ("url", "request_body", "response_body", "width"),
    [
        (
            "https://api.voyageai.com/v1/embeddings",
            {"model": "voyage-3", "input": ["x"], "output_dtype": "binary"},
            {"object": "list", "data": [{"embedding": [-3] * 128, "index": 0}]},
            1024,
        ),
        (
            "https://api.cohere.com/v2/embed",
            {"model": "embed-v4.0", "texts": ["x"], "embedding_types": ["ubinary"]},
            {"id": "e", "embeddings": {"ubinary": [[200] * 64]}, "meta": {}},
            512,
        ),
        (
            "https://api.openai.com/v1/embeddings",
            {"model": "m", "input": ["x"], "encoding_format": "base64"},
            {"object": "list", "data": [{"embedding": "AAAAPwAAgD4=", "index": 0}]},
            2,
        ),
    ],
)
def test_the_vector_width_follows_the_type_the_request_asked_for(
    tape: Tape,
    url: str,
    request_body: dict[str, Any],
    response_body: dict[str, Any],
    width: int,
) -> None:
    inner = httpx.MockTransport(lambda request: httpx.Response(200, json=response_body))
    with httpx.Client(transport=spanledger.instrumentation.transport(inner)) as client:
        client.post(url, json=request_body)

    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.dimensions == width


def test_a_transport_failure_is_recorded_and_raised_unchanged(tape: Tape) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1/embeddings"
    with (
        httpx.Client(transport=spanledger.instrumentation.transport()) as client,
        pytest.raises(httpx.ConnectError),
    ):
        client.post(url, json={"model": "m", "input": ["x"]})

    [event] = tape.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.error_type) == (ErrorCategory.UNAVAILABLE, "ConnectError")


def test_without_a_recorder_nothing_is_read(standin: StandIn) -> None:
    with httpx.Client(transport=spanledger.instrumentation.transport()) as client:
        response = client.post(
            f"{standin.base_url('openai')}/v1/embeddings", json={"model": "m", "input": ["x"]}
        )

    assert response.json()["usage"]["prompt_tokens"] == 1
    assert not spanledger.get_recorder().active


async def test_the_async_transport_records_concurrent_calls(standin: StandIn, tape: Tape) -> None:
    async with httpx.AsyncClient(transport=spanledger.instrumentation.async_transport()) as client:
        responses = await asyncio.gather(
            *(
                client.post(
                    f"{standin.base_url('voyageai')}/v1/embeddings",
                    json={"model": "voyage-3", "input": [f"t{n}"] * (n + 1), "input_type": "query"},
                )
                for n in range(10)
            )
        )

    assert all(r.status_code == 200 for r in responses)
    counts = sorted(event.input_count for event in tape.events if isinstance(event, EmbeddingEvent))
    assert counts == list(range(1, 11))
    assert {event.provider for event in tape.events} == {"voyageai"}
    assert len({event.call_id for event in tape.events}) == 10


def test_an_unknown_vendor_name_is_refused() -> None:
    with pytest.raises(ValueError, match="azure"):
        spanledger.instrumentation.transport(vendors={"llm.internal": "azure"})
    with pytest.raises(ValueError, match="azure"):
        spanledger.instrumentation.async_transport(vendors={"llm.internal": "azure"})


@pytest.mark.parametrize(
    ("path", "body", "vendor"),
    [
        ("/v1/embed", {"model": "embed-english-v3.0", "texts": ["a"]}, "cohere"),
        ("/v1/embeddings", {"model": "jina-embeddings-v3", "input": ["a"]}, "jina"),
        ("/v1/embeddings", {"model": "text-embedding-3-small", "input": ["a"]}, "openai"),
        ("/embed", {"inputs": ["a"]}, "tei"),
        (
            "/v1/rerank",
            {"model": "rerank-english-v3.0", "query": "q", "documents": ["a"]},
            "cohere",
        ),
        (
            "/v1/rerank",
            {"model": "rerank-v3.5", "query": "q", "documents": [], "top_n": 1},
            "cohere",
        ),
        ("/v1/rerank", {"model": "m", "query": "q", "documents": [], "rank_fields": []}, "cohere"),
        (
            "/v1/rerank",
            {"model": "jina-reranker-v2", "query": "q", "documents": [], "top_n": 1},
            "jina",
        ),
        ("/v1/rerank", {"model": "rerank-2", "query": "q", "documents": []}, "voyageai"),
        (
            "/v1/rerank",
            {"model": "rerank-2.5", "query": "q", "documents": [], "top_k": 1},
            "voyageai",
        ),
    ],
)
def test_a_body_on_an_unknown_host_names_its_vendor(
    path: str, body: dict[str, Any], vendor: str
) -> None:
    from spanledger.capture.vendors import recognise

    endpoint = recognise(httpx.URL(f"http://gateway.internal{path}"), body, {})
    assert endpoint is not None
    assert endpoint.provider == vendor


def test_cohere_v1_calls_are_read_as_the_sdk_path_reads_them(standin: StandIn, tape: Tape) -> None:
    import cohere

    truth = Tape()
    sdk = spanledger.instrument(cohere.Client(api_key="k", base_url=standin.base_url("cohere")))
    with spanledger.use(Recorder([truth])):
        sdk.embed(model="embed-english-v3.0", texts=TEXTS, input_type="search_query")
        sdk.rerank(model="rerank-english-v3.0", query=QUERY, documents=TEXTS, top_n=2)
    base = standin.base_url("cohere")
    with httpx.Client(transport=spanledger.instrumentation.transport()) as client:
        client.post(
            f"{base}/v1/embed",
            json={"model": "embed-english-v3.0", "texts": TEXTS, "input_type": "search_query"},
        )
        client.post(
            f"{base}/v1/rerank",
            json={"model": "rerank-english-v3.0", "query": QUERY, "documents": TEXTS, "top_n": 2},
        )

    for seen, expected in zip(tape.events, truth.events, strict=True):
        assert type(seen) is type(expected)
        same_facts(seen, expected)
        for name in ("input_count", "dimensions", "document_count", "top_k", "result_count"):
            assert getattr(seen, name, None) == getattr(expected, name, None), name
    assert all(isinstance(e, EmbeddingEvent | RerankEvent) and e.usage for e in truth.events)
