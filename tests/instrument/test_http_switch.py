"""``spanledger.instrument(http=True)``: the vendors' embedding and rerank requests that other
code sends through ``requests`` or a plain ``httpx`` client are recorded, once; everything else
passes through untouched; ``uninstrument()`` puts the methods back."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
import requests
from requests.adapters import HTTPAdapter

import spanledger
from spanledger import EmbeddingEvent, Recorder, RerankEvent
from spanledger.instrumentation import instrumented_sdks, transport
from spanledger.testing import StandIn
from tests.instrument.conftest import OPS, QUERY, TEXTS, Tape, tokens

PATCHED = [
    (httpx.HTTPTransport, "handle_request"),
    (httpx.AsyncHTTPTransport, "handle_async_request"),
    (HTTPAdapter, "send"),
]


def methods() -> list[object]:
    return [vars(owner)[name] for owner, name in PATCHED]


@pytest.fixture
def http(standin: StandIn) -> Iterator[str]:
    """The switch on for HTTP only, the stand-in's Jina prefix named as Jina; yields it."""
    before = methods()
    jina = standin.base_url("jina")
    spanledger.instrument(sdks=[], http=True, vendors={jina: "jina"})
    try:
        yield jina
    finally:
        spanledger.uninstrument()
        assert methods() == before
        assert instrumented_sdks() == ()


def rerank_body() -> dict[str, object]:
    return {"model": "jina-reranker-v2", "query": QUERY, "documents": TEXTS, "top_n": 2}


def expected_tokens() -> int:
    return sum(tokens(text) for text in TEXTS) + tokens(QUERY) * len(TEXTS)


def check_rerank(tape: Tape) -> None:
    [event] = tape.events
    assert isinstance(event, RerankEvent)
    assert event.provider == "jina"
    assert event.result_count == 2
    assert event.usage is not None


def test_a_plain_httpx_client_is_recorded(http: str) -> None:
    tape = Tape()
    with spanledger.use(Recorder([tape])), httpx.Client() as client:
        answer = client.post(f"{http}/v1/rerank", json=rerank_body())
    assert answer.status_code == 200
    assert len(answer.json()["results"]) == 2
    check_rerank(tape)


def test_an_async_httpx_client_is_recorded(http: str) -> None:
    tape = Tape()

    async def call() -> httpx.Response:
        async with httpx.AsyncClient() as client:
            return await client.post(f"{http}/v1/embeddings", json={"model": "j", "input": TEXTS})

    with spanledger.use(Recorder([tape])):
        answer = asyncio.run(call())
    assert len(answer.json()["data"]) == len(TEXTS)
    [event] = tape.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is not None
    assert event.usage.input_tokens == sum(tokens(text) for text in TEXTS)


def test_a_requests_session_is_recorded(http: str) -> None:
    tape = Tape()
    with spanledger.use(Recorder([tape])), requests.Session() as session:
        answer = session.post(f"{http}/v1/rerank", json=rerank_body())
        again = answer.json()
    assert answer.status_code == 200
    assert len(again["results"]) == 2  # the caller reads the body as if nothing had
    check_rerank(tape)


def test_a_vendor_error_through_requests_is_one_failed_event(http: str) -> None:
    tape = Tape()
    body = {**rerank_body(), "model": "fail-429"}
    with spanledger.use(Recorder([tape])), requests.Session() as session:
        answer = session.post(f"{http}/v1/rerank", json=body)
    assert answer.status_code == 429
    [event] = tape.events
    assert event.error_category.value == "provider_rate_limit"  # type: ignore[union-attr]
    assert event.retry_after == 2  # type: ignore[union-attr]


def test_other_requests_pass_through_untouched(http: str, standin: StandIn) -> None:
    tape = Tape()
    with spanledger.use(Recorder([tape])):
        with httpx.Client() as client:
            other = client.post(f"{standin.url}/elsewhere/v1/search", json={"q": 1})
            listing = client.get(f"{http}/v1/rerank")
        with requests.Session() as session:
            plain = session.post(f"{standin.url}/elsewhere/v1/embeddings", data=b"not json")
    assert other.status_code == 404
    assert listing.status_code == 501  # the stand-in's own answer to a GET, handed on as is
    assert plain.status_code == 400
    assert tape.events == []


def test_an_instrumented_sdk_or_a_recording_transport_records_once(
    http: str, standin: StandIn
) -> None:
    tape = Tape()
    cohere_op = OPS[2]
    sdk = spanledger.instrument(cohere_op.client(standin))  # the Cohere SDK speaks httpx
    with spanledger.use(Recorder([tape])):
        cohere_op.call(sdk, "m", TEXTS)
        with httpx.Client(transport=transport(vendors={http: "jina"})) as client:
            client.post(f"{http}/v1/rerank", json=rerank_body())
    assert [event.provider for event in tape.events] == ["cohere", "jina"]
    spanledger.uninstrument(sdk)


def test_vendors_without_http_are_refused() -> None:
    with pytest.raises(TypeError, match="http=True"):
        spanledger.instrument(sdks=[], vendors={"gateway.internal": "cohere"})
    with pytest.raises(ValueError, match="unknown vendor names"):
        spanledger.instrument(sdks=[], http=True, vendors={"gateway.internal": "anthropic"})
    assert instrumented_sdks() == ()
