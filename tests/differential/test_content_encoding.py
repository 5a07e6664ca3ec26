"""A body whose declared ``Content-Encoding`` does not decode is the same event on every path.

Over ``httpx.MockTransport`` (the differential rig) and over a real loopback socket (the
stand-in sending raw bytes with any header).

The provider answered, so a 2xx is ``provider_invalid_response`` with its status (the work may
have been billed: ``estimates.may_have_billed``), never ``provider_unavailable``; a non-2xx is
its status's failure, as any other error status. Over every endpoint, every recording path the
differential rig drives (provider class, recording transport, ``record_*`` the way a caller's
block sees its client's ``DecodingError``, each instrumented SDK) records the same.

One SDK cannot: botocore asks urllib3 for the body undecoded, so a Bedrock caller gets the
bytes as sent and a 2xx is read as those bytes say (``READS_RAW``); its events are asserted as
they stand, so a change is seen. google-genai and voyageai read the body before they hand the
response on; the status is heard as it arrives, so theirs agree with every other path.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import socket
import threading
from collections.abc import Callable, Iterator

import httpx
import openai
import pytest
from google import genai
from google.genai import types as genai_types
from voyageai.client import Client as VoyageClient
from voyageai.client_async import AsyncClient as VoyageAsyncClient

import spanledger
from spanledger import EmbeddingFailedEvent, Event, ProviderError, RerankFailedEvent
from spanledger.errors import ErrorCategory
from spanledger.providers import OpenAIEmbeddings
from spanledger.testing import Reply as StandInReply
from spanledger.testing import Route, StandIn
from spanledger.wire.endpoints import ALL_ENDPOINTS, Endpoint
from tests.differential.bodies import (
    JSON_TYPE,
    Call,
    Case,
    Reply,
    embedding_payload,
    encode,
    results_payload,
)
from tests.differential.paths import Rig, Seen, rig_for_module
from tests.differential.test_paths_agree import differences
from tests.differential.test_paths_agree import record_of as _record_of

READS_RAW = frozenset({"bedrock-sdk"})


@pytest.fixture(scope="module")
def rig() -> Iterator[Rig]:
    with rig_for_module() as made:
        yield made


def valid_body(call: Call) -> bytes:
    endpoint = call.endpoint
    if endpoint.operation == "embeddings":
        return encode(embedding_payload(endpoint, [[0.5, 0.25]] * len(call.items), None))
    ids = call.document_ids
    first = {endpoint.result_index_key: 0 if ids is None else ids[0], endpoint.score_key: 0.9}
    return encode(results_payload(endpoint, [first]))


def reply(status: int, body: bytes, label: str) -> Reply:
    headers = (("content-type", JSON_TYPE), ("content-encoding", "gzip"), ("retry-after", "3"))
    return Reply(status, body, headers, label)


def replies(call: Call) -> dict[str, Reply]:
    body = valid_body(call)
    zipped = gzip.compress(body, mtime=0)
    return {
        "gzip declared, not applied": reply(200, body, "declared"),
        "gzip cut in half": reply(200, zipped[: len(zipped) // 2], "cut"),
        "gzip applied": reply(200, zipped, "applied"),
        "429, body not gzip": reply(429, b'{"error": "slow down"}', "429"),
        "503, body not gzip": reply(503, b"<html>down</html>", "503"),
    }


ENDPOINTS = {endpoint.name: endpoint for endpoint in ALL_ENDPOINTS}
KINDS = ["gzip declared, not applied", "gzip cut in half", "gzip applied", "429, body not gzip",
         "503, body not gzip"]  # fmt: skip


def case_for(endpoint: Endpoint, kind: str) -> Case:
    call = Call(endpoint, ("item 0",), "what is a tick", None, None)
    return Case(call, replies(call)[kind])


def _agreeing(seen: list[Seen], case: Case) -> list[Seen]:
    return [each for each in seen if not (case.reply.success and each.path in READS_RAW)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_every_path_records_an_undecodable_body_alike(rig: Rig, name: str, kind: str) -> None:
    case = case_for(ENDPOINTS[name], kind)
    seen = rig.paths(case)
    agreeing = _agreeing(seen, case)
    assert agreeing, [each.path for each in seen]
    problems = differences(case, agreeing)
    assert not problems, "\n".join(map(str, problems))
    status = case.reply.status
    for each in agreeing:
        event = each.event
        if kind == "gzip applied":
            if each.carried:  # an SDK may refuse the 2xx body itself (strict models)
                assert not isinstance(event, EmbeddingFailedEvent | RerankFailedEvent), each.path
            continue
        assert isinstance(event, EmbeddingFailedEvent | RerankFailedEvent), each.path
        if case.reply.success:
            assert event.error_category is ErrorCategory.INVALID_RESPONSE, each.path
            assert event.status_code == (status if each.knows_status else None), each.path
        else:
            expected = ErrorCategory.RATE_LIMIT if status == 429 else ErrorCategory.UNAVAILABLE
            assert (event.error_category, event.status_code) == (expected, status), each.path
            assert event.retry_after == 3.0, each.path
            assert event.estimated_usage is None, each.path


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_what_the_sdk_that_cannot_agree_records(rig: Rig, name: str) -> None:
    endpoint = ENDPOINTS[name]
    for kind in KINDS:
        case = case_for(endpoint, kind)
        for each in rig.paths(case):
            record = _record_of(each)
            if each.path in READS_RAW and case.reply.success:  # the caller got them as sent
                failed = str(record["kind"]).endswith("_failed")
                assert failed == (kind != "gzip declared, not applied"), (kind, record)


# --------------------------------------------------------------------------- read first


def read_first_cases(endpoint: Endpoint) -> list[Case]:
    """Replies a test tool can build already read: bodies that decode, compressed or not."""
    call = case_for(endpoint, "gzip applied").call
    body = valid_body(call)
    zipped = gzip.compress(body, mtime=0)
    plain = (("content-type", JSON_TYPE), ("retry-after", "3"))
    return [
        Case(call, Reply(200, zipped, (*plain, ("content-encoding", "gzip")), "gzip")),
        Case(call, Reply(200, body, plain, "plain")),
        Case(
            call,
            Reply(
                429,
                gzip.compress(b'{"error": "slow down"}'),
                (*plain, ("content-encoding", "gzip")),
                "429 gzip",
            ),
        ),
        Case(call, Reply(503, b"<html>down</html>", plain, "503 plain")),
    ]


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_a_response_read_by_its_maker_is_recorded_as_off_the_wire(rig: Rig, name: str) -> None:
    """Every path records a reply handed over already read (``Response(content=...)``, as
    ``httpx.MockTransport`` handlers and respx build them) exactly as the same bytes read off
    the wire: the rig answers each case both ways."""
    for case in read_first_cases(ENDPOINTS[name]):
        wire = {each.path: _record_of(each) for each in rig.paths(case)}
        rig.server.read_first = True
        try:
            read = {each.path: _record_of(each) for each in rig.paths(case)}
        finally:
            rig.server.read_first = False
        assert read == wire, case.reply.label


# --------------------------------------------------------------------------- a real socket

OPENAI_BODY = json.dumps(
    {"object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.25]}],
     "model": "m", "usage": {"prompt_tokens": 2, "total_tokens": 2}}
).encode()  # fmt: skip
SOCKET_REPLIES = {
    "gzip declared, not applied": StandInReply(
        200, headers={"content-encoding": "gzip"}, raw=OPENAI_BODY
    ),
    "503, body not gzip": StandInReply(
        503, headers={"content-encoding": "gzip", "retry-after": "3"}, raw=b"<html>down</html>"
    ),
}


def _over_socket(server: StandIn) -> dict[str, Event]:
    """The one event each path records for one call to the stand-in's OpenAI endpoint."""
    origin = server.base_url("openai")
    found: dict[str, Event] = {}

    def one(path: str, call: Callable[[], object]) -> None:
        events: list[Event] = []
        with (
            spanledger.use(spanledger.Recorder([events.append])),
            contextlib.suppress(ProviderError, httpx.DecodingError, openai.APIError),
        ):
            call()
        assert len(events) == 1, (path, events)
        found[path] = events[0]

    with OpenAIEmbeddings("m", base_url=origin, api_key="k") as provider:
        one("provider", lambda: provider.embed(["a"]))

        async def embed_async() -> None:
            await provider.aembed(["a"])

        one("provider-async", lambda: asyncio.run(embed_async()))
    recording = spanledger.instrumentation.transport(vendors={origin: "openai"})
    with httpx.Client(transport=recording) as client:
        one(
            "transport",
            lambda: client.post(f"{origin}/v1/embeddings", json={"model": "m", "input": ["a"]}),
        )
    sdk = spanledger.instrument(openai.OpenAI(api_key="k", base_url=f"{origin}/v1", max_retries=0))
    try:
        one("openai-sdk", lambda: sdk.embeddings.create(model="m", input=["a"]))
    finally:
        spanledger.uninstrument(sdk)
    return found


@pytest.mark.parametrize("kind", list(SOCKET_REPLIES))
def test_every_path_agrees_over_a_real_socket(kind: str) -> None:
    with StandIn() as server:
        server.route(Route("openai", "/v1/embeddings", lambda _: SOCKET_REPLIES[kind]))
        found = _over_socket(server)
    assert set(found) == {"provider", "provider-async", "transport", "openai-sdk"}
    outcomes = {
        path: (
            type(event).__name__,
            getattr(event, "error_category", None),
            getattr(event, "status_code", None),
            getattr(event, "retry_after", None),
            getattr(event, "estimated_usage", None) is not None,
        )
        for path, event in found.items()
    }
    expected = (
        ("EmbeddingFailedEvent", ErrorCategory.INVALID_RESPONSE, 200, None, True)
        if kind.startswith("gzip")
        else ("EmbeddingFailedEvent", ErrorCategory.UNAVAILABLE, 503, 3.0, False)
    )
    assert outcomes == dict.fromkeys(found, expected)


def _sdks_over_socket(server: StandIn) -> dict[str, Event]:
    """The one event google-genai and voyageai record for one embedding call to the
    stand-in, each sync and async (google-genai's async on aiohttp, its default, and on an
    httpx client given to it); Voyage's sync call on a thread of its own, whose session the
    SDK makes in the call."""
    found: dict[str, Event] = {}

    def one(path: str, call: Callable[[], object]) -> None:
        events: list[Event] = []
        with (
            spanledger.use(spanledger.Recorder([events.append])),
            contextlib.suppress(Exception),  # each SDK raises its own types
        ):
            call()
        assert len(events) == 1, (path, events)
        found[path] = events[0]

    options = genai_types.HttpOptions(
        base_url=server.base_url("gcp.gemini"),
        retry_options=genai_types.HttpRetryOptions(attempts=1),
    )
    gemini = spanledger.instrument(genai.Client(api_key="k", http_options=options))
    on_httpx = options.model_copy(update={"httpx_async_client": httpx.AsyncClient()})
    gemini_httpx = spanledger.instrument(genai.Client(api_key="k", http_options=on_httpx))
    voyage = spanledger.instrument(
        VoyageClient(api_key="k", base_url=f"{server.base_url('voyageai')}/v1", max_retries=0)
    )
    voyage_async = spanledger.instrument(
        VoyageAsyncClient(api_key="k", base_url=f"{server.base_url('voyageai')}/v1", max_retries=0)
    )
    try:
        one("genai-sdk", lambda: gemini.models.embed_content(model="m", contents="a"))
        one(
            "genai-sdk-async",
            lambda: asyncio.run(gemini.aio.models.embed_content(model="m", contents="a")),
        )
        one(
            "genai-sdk-async-httpx",
            lambda: asyncio.run(gemini_httpx.aio.models.embed_content(model="m", contents="a")),
        )

        def on_a_new_thread() -> None:
            worker = threading.Thread(
                target=lambda: one("voyage-sdk", lambda: voyage.embed(["a"], model="m"))
            )
            worker.start()
            worker.join(timeout=30)

        on_a_new_thread()
        one("voyage-sdk-async", lambda: asyncio.run(voyage_async.embed(["a"], model="m")))
    finally:
        for client in (gemini, gemini_httpx, voyage, voyage_async):
            spanledger.uninstrument(client)
    return found


SDK_REPLIES = {
    **SOCKET_REPLIES,
    "429, JSON body": StandInReply(
        429,
        body={"detail": "slow down", "error": {"code": 429, "status": "RESOURCE_EXHAUSTED"}},
        headers={"retry-after": "3"},
    ),
}


@pytest.mark.parametrize("kind", list(SDK_REPLIES))
def test_google_genai_and_voyageai_keep_the_status_over_a_real_socket(kind: str) -> None:
    """The SDKs that read the body before handing the response on: the status is heard as
    the answer arrives, so a body that does not decode keeps it, as on every other path; a
    body that does is still fingerprinted."""
    with StandIn() as server:
        answer = lambda _: SDK_REPLIES[kind]  # noqa: E731
        server.route(Route("gcp.gemini", "/{version}/models/{model}:batchEmbedContents", answer))
        server.route(Route("voyageai", "/v1/embeddings", answer))
        found = _sdks_over_socket(server)
    assert set(found) == {
        "genai-sdk",
        "genai-sdk-async",
        "genai-sdk-async-httpx",
        "voyage-sdk",
        "voyage-sdk-async",
    }
    outcomes = {
        path: (
            type(event).__name__,
            getattr(event, "error_category", None),
            getattr(event, "status_code", None),
            getattr(event, "retry_after", None),
            getattr(event, "fingerprint", None) is not None,
        )
        for path, event in found.items()
    }
    expected: dict[str, tuple[object, ...]]
    if kind.startswith("gzip"):
        expected = dict.fromkeys(found, ("EmbeddingFailedEvent", INVALID, 200, None, False))
        expected.update(dict.fromkeys(ON_AIOHTTP, AIOHTTP_UNDECODABLE_2XX))
    elif kind.startswith("503"):
        expected = dict.fromkeys(found, ("EmbeddingFailedEvent", UNAVAILABLE, 503, 3.0, False))
    else:
        limited = ("EmbeddingFailedEvent", ErrorCategory.RATE_LIMIT, 429, 3.0, True)
        expected = dict.fromkeys(found, limited)
    assert outcomes == expected


def test_voyageai_records_a_redirect_hop_to_nowhere_as_a_transport_failure() -> None:
    """A 307 the SDK's session follows to a port nobody listens on: the hop's status is not
    the answer, the connection that failed is."""
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}/v1/embeddings"
    with StandIn() as server:
        hop = StandInReply(307, headers={"location": nowhere})
        server.route(Route("voyageai", "/v1/embeddings", lambda _: hop))
        client = spanledger.instrument(
            VoyageClient(api_key="k", base_url=f"{server.base_url('voyageai')}/v1", max_retries=0)
        )
        events: list[Event] = []
        try:
            with (
                spanledger.use(spanledger.Recorder([events.append])),
                contextlib.suppress(Exception),
            ):
                client.embed(["a"], model="m")
        finally:
            spanledger.uninstrument(client)
    assert len(events) == 1
    (event,) = events
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.error_category, event.status_code) == (UNAVAILABLE, None)


INVALID, UNAVAILABLE = ErrorCategory.INVALID_RESPONSE, ErrorCategory.UNAVAILABLE
ON_AIOHTTP = ("genai-sdk-async", "voyage-sdk-async")
AIOHTTP_UNDECODABLE_2XX = ("EmbeddingFailedEvent", UNAVAILABLE, None, None, False)
"""Known, asserted as it stands so a change is seen: aiohttp's failure to decode a body
(``ClientPayloadError`` from ``ContentEncodingError``) is not among the decoding failures
``spanledger.estimates.UNREADABLE_ANSWER_TYPES`` names, so an undecodable 2xx on the SDKs'
aiohttp paths reads as a transport failure."""
