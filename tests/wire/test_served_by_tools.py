"""The recorded exchanges served by the tools tests answer with: vcrpy, respx, MockTransport.

A response such a tool makes is recorded exactly as the same bytes off the wire would be, on
every path, whether its body is compressed or not. vcrpy itself plays each recording
(``served``) to every path that can make its call; ``httpx.MockTransport`` and respx hand the
provider classes and the recording transport responses they have already read
(``Response(content=...)``), whose raw stream is spent. The undecodable-body rule still holds
for a body that does not decode by its declared ``Content-Encoding``: where a tool hands the
bytes over as stored (vcrpy to ``requests``), they are read as the wire's would be.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
import pytest
import requests
import respx
from requests.adapters import HTTPAdapter

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, Event
from spanledger.errors import ErrorCategory
from spanledger.providers import OpenAIEmbeddings
from spanledger.testing import Reply, Route, StandIn

from .replay import REPLAYED, Exchange, check_events, load, mock_for
from .served import PATHS, ServedPath, aembed, embed, provider_for, served

READS_RAW = frozenset({"bedrock-sdk"})
"""botocore asks urllib3 for the body undecoded (it never asks for a compressed one), so a
Bedrock recording is served as recorded only (``tests/differential/test_content_encoding``)."""


def _cases() -> list[Any]:
    cases = []
    for path in PATHS:
        for ex in REPLAYED:
            if path.call(ex) is None:
                continue
            for gzipped in (False, True) if path.name not in READS_RAW else (False,):
                name = f"{path.name}-{ex.stem}-{'gzip' if gzipped else 'plain'}"
                cases.append(pytest.param(path, ex, gzipped, id=name))
    return cases


def _recorded(run: Callable[[], object]) -> list[Event]:
    events: list[Event] = []
    with spanledger.use(spanledger.Recorder([events.append])):
        run()
    return events


@pytest.fixture
def cassettes(tmp_path: Path) -> Path:
    return tmp_path


# --------------------------------------------------------------------------- vcrpy


@pytest.mark.parametrize(("path", "ex", "gzipped"), _cases())
def test_a_recording_served_by_vcrpy_is_recorded_as_the_wire_test_expects(
    path: ServedPath, ex: Exchange, gzipped: bool, cassettes: Path
) -> None:
    run = path.call(ex)
    assert run is not None

    def call() -> None:
        with served(ex, cassettes, gzipped=gzipped):
            if path.switch_http:  # on inside the cassette: vcrpy patches httpx as it enters
                spanledger.instrument(sdks=[], http=True)
            try:
                run()
            finally:
                if path.switch_http:
                    spanledger.uninstrument()

    check_events(ex, _recorded(call))


PLAYED = {
    "provider": 20,
    "provider-async": 20,
    "transport": 46,
    "http-switch-httpx": 46,
    "http-switch-requests": 40,
    "openai-sdk": 9,
    "mistral-sdk": 2,
    "ollama-sdk": 4,
    "genai-sdk": 13,
    "bedrock-sdk": 13,
}
"""How many recordings each path plays: every one a path can make the call of (``requests``
refuses the placeholder hosts, ``<AWS_REGION>``, before sending)."""


def test_every_path_plays_every_recording_it_can_call() -> None:
    played = {path.name: sum(path.call(ex) is not None for ex in REPLAYED) for path in PATHS}
    assert played == PLAYED
    assert len(REPLAYED) == 46


# --------------------------------------------------------------------------- MockTransport

PROVIDED = [ex for ex in REPLAYED if provider_for(ex) is not None]


@pytest.mark.parametrize("gzipped", [False, True], ids=["plain", "gzip"])
@pytest.mark.parametrize("ex", [pytest.param(ex, id=ex.stem) for ex in PROVIDED])
def test_a_recording_from_a_mock_transport_reaches_the_provider_class_as_off_the_wire(
    ex: Exchange, gzipped: bool
) -> None:
    """Each recording a provider class can call, answered by a ``MockTransport`` handler that
    builds ``Response(content=...)`` (read at once), sync and async."""
    mock = mock_for(ex, gzipped=gzipped)

    def sync() -> None:
        provider = provider_for(ex, mock, mock)
        assert provider is not None
        with provider:
            embed(provider, ex)

    async def in_loop() -> None:
        provider = provider_for(ex, mock, mock)
        assert provider is not None
        async with provider:
            await aembed(provider, ex)

    check_events(ex, _recorded(sync))
    check_events(ex, _recorded(lambda: asyncio.run(in_loop())))


# --------------------------------------------------------------------------- reproductions

ORIGIN = "https://vendor.test"
BODY = json.dumps(
    {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}],
     "model": "m", "usage": {"prompt_tokens": 2, "total_tokens": 2}}
).encode()  # fmt: skip
ZIPPED = gzip.compress(BODY, mtime=0)
GZIP = {"content-type": "application/json", "content-encoding": "gzip"}


def _answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, headers=GZIP, content=ZIPPED)


def _answered_once(events: list[Event]) -> None:
    """One success event, with the figures the gzip body holds."""
    assert len(events) == 1
    (event,) = events
    assert isinstance(event, EmbeddingEvent), event
    assert event.usage is not None
    assert (event.usage.input_tokens, event.dimensions, event.response_model) == (2, 2, "m")


def _provider_calls(
    sync: httpx.BaseTransport | None, a: httpx.AsyncBaseTransport | None
) -> Iterator[Callable[[], object]]:
    """One embed call of ``OpenAIEmbeddings`` sync, then one async, over the transports given
    (httpx's own when ``None``)."""

    def made() -> OpenAIEmbeddings:
        return OpenAIEmbeddings(
            "m",
            base_url=ORIGIN,
            api_key="k",
            http_client=httpx.Client(transport=sync) if sync else httpx.Client(),
            async_http_client=httpx.AsyncClient(transport=a) if a else httpx.AsyncClient(),
        )

    def embed_sync() -> object:
        with made() as provider:
            return provider.embed(["a"])

    async def embed_async() -> object:
        async with made() as provider:
            return await provider.aembed(["a"])

    yield embed_sync
    yield lambda: asyncio.run(embed_async())


def test_provider_reads_a_gzip_response_a_mock_transport_handler_built() -> None:
    mock = httpx.MockTransport(_answer)
    for call in _provider_calls(mock, mock):
        _answered_once(_recorded(call))


def test_provider_reads_a_gzip_response_a_respx_router_answered() -> None:
    router = respx.Router(assert_all_called=False)
    router.post(f"{ORIGIN}/v1/embeddings").respond(200, headers=GZIP, content=ZIPPED)
    sync = httpx.MockTransport(router.handler)
    a = httpx.MockTransport(router.async_handler)
    for call in _provider_calls(sync, a):
        _answered_once(_recorded(call))


@pytest.mark.parametrize("using", ["httpx", "httpcore"])
def test_provider_reads_a_gzip_response_respx_mocked(using: str) -> None:
    """respx's mocks, on httpx's client (``using="httpx"``: a ``MockTransport`` of its
    router's) and under httpx's own transport (``"httpcore"``, respx's default)."""
    with respx.mock(using=using, assert_all_called=False) as mocked:
        mocked.post(f"{ORIGIN}/v1/embeddings").respond(200, headers=GZIP, content=ZIPPED)
        for call in _provider_calls(None, None):
            _answered_once(_recorded(call))


def _read_by_its_maker(request: httpx.Request) -> httpx.Response:
    """A handler that reads the response itself before handing it on, from a stream that can
    be read once (as a logging or caching transport does with the wire's)."""

    def chunks() -> Iterator[bytes]:
        yield ZIPPED[:10]
        yield ZIPPED[10:]

    response = httpx.Response(200, headers=GZIP, content=chunks())
    response.read()
    return response


def test_transport_records_a_response_read_before_it_and_hands_it_on_as_read() -> None:
    recording = spanledger.instrumentation.transport(
        httpx.MockTransport(_read_by_its_maker), vendors={ORIGIN: "openai"}
    )
    responses: list[httpx.Response] = []

    def call() -> None:
        with httpx.Client(transport=recording) as client:
            responses.append(client.post(f"{ORIGIN}/v1/embeddings", json={"model": "m"}))

    _answered_once(_recorded(call))
    (response,) = responses
    assert response.json() == json.loads(BODY)
    assert response.headers["content-encoding"] == "gzip"


class _Logging(httpx.BaseTransport):
    """A transport that reads every answer of the one under it (to log its size), as such
    transports do, before handing it on."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.sizes: list[int] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        self.sizes.append(len(response.read()))
        return response


def test_transport_over_a_transport_that_read_a_gzip_answer_off_a_socket() -> None:
    """Over a real socket: the answer comes off the wire gzip-encoded, a logging transport
    reads it, the recording transport above it records what it read."""
    with StandIn() as server:
        server.route(
            Route("openai", "/v1/embeddings", lambda _: Reply(200, headers=GZIP, raw=ZIPPED))
        )
        origin = server.base_url("openai")
        logging = _Logging(httpx.HTTPTransport())
        recording = spanledger.instrumentation.transport(logging, vendors={origin: "openai"})
        answers: list[object] = []

        def call() -> None:
            with httpx.Client(transport=recording) as client:
                body = {"model": "m", "input": ["a"]}
                answers.append(client.post(f"{origin}/v1/embeddings", json=body).json())

        _answered_once(_recorded(call))
    assert answers == [json.loads(BODY)]
    assert logging.sizes == [len(BODY)]


def test_requests_under_vcrpy_keeps_the_undecodable_body_rule(cassettes: Path) -> None:
    """vcrpy hands ``requests`` the stored bytes as they are, its content encoding unapplied:
    a body declared gzip that is not is recorded as off the wire, where it does not decode."""
    ex = load("embeddings-single-2025-09")
    declared = ex.replace(headers={"content-encoding": "gzip"})
    events: list[Event] = []
    with (
        spanledger.use(spanledger.Recorder([events.append])),
        served(declared, cassettes, gzipped=False),
    ):
        spanledger.instrument(sdks=[], http=True)
        try:
            requests.post(declared.url or "", json=declared.request_body, timeout=5)
        finally:
            spanledger.uninstrument()
    assert len(events) == 1
    (event,) = events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.error_type, event.status_code) == (
        ErrorCategory.INVALID_RESPONSE,
        "undecodable_body",
        200,
    )


def test_a_requests_response_handed_over_read_is_taken_as_read() -> None:
    """A stand-in under ``HTTPAdapter.send`` (as the ``responses`` library patches it) that
    sets the body whole, decoded, with no raw stream and its encoding header left on: the
    body is the caller's as read."""

    def answer(self: HTTPAdapter, request: requests.PreparedRequest, *args: Any, **kw: Any) -> Any:
        response = requests.Response()
        response.status_code = 200
        response._content = BODY
        response.headers.update(GZIP)
        response.url = request.url or ""
        response.request = request
        return response

    with mock.patch.object(HTTPAdapter, "send", answer):
        spanledger.instrument(sdks=[], http=True, vendors={ORIGIN: "openai"})
        try:
            events = _recorded(
                lambda: requests.post(f"{ORIGIN}/v1/embeddings", json={"model": "m"}, timeout=5)
            )
        finally:
            spanledger.uninstrument()
    _answered_once(events)
