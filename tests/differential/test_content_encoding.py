"""A body whose declared ``Content-Encoding`` does not decode is the same event on every path.

Over ``httpx.MockTransport`` (the differential rig) and over a real loopback socket (the
stand-in sending raw bytes with any header).

The provider answered, so a 2xx is ``provider_invalid_response`` with its status (the work may
have been billed: ``estimates.may_have_billed``), never ``provider_unavailable``; a non-2xx is
its status's failure, as any other error status. Over every endpoint, every recording path the
differential rig drives (provider class, recording transport, ``record_*`` the way a caller's
block sees its client's ``DecodingError``, each instrumented SDK) records the same.

Some SDKs cannot: botocore asks urllib3 for the body undecoded, so a Bedrock caller gets the
bytes as sent and a 2xx is read as those bytes say (``READS_RAW``); google-genai and voyageai
read the body before anyone sees the status (``STATUS_LOST``), so a body that does not decode
is an unreadable answer of unknown status there, whatever the status was. Their events are
asserted as they stand, so a change is seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
from collections.abc import Callable, Iterator

import httpx
import openai
import pytest

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
STATUS_LOST = frozenset({"genai-sdk", "voyage-sdk"})


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
    left_out = READS_RAW if case.reply.success else STATUS_LOST
    return [each for each in seen if each.path not in left_out]


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
        if not each.carried:  # an SDK that refused the 2xx body itself (strict models)
            continue
        if kind == "gzip applied":
            assert not isinstance(event, EmbeddingFailedEvent | RerankFailedEvent), each.path
            continue
        assert isinstance(event, EmbeddingFailedEvent | RerankFailedEvent), each.path
        if case.reply.success:
            assert event.error_category is ErrorCategory.INVALID_RESPONSE, each.path
            told = each.knows_status and each.path not in STATUS_LOST
            assert event.status_code == (status if told else None), each.path
        else:
            expected = ErrorCategory.RATE_LIMIT if status == 429 else ErrorCategory.UNAVAILABLE
            assert (event.error_category, event.status_code) == (expected, status), each.path
            assert event.retry_after == 3.0, each.path
            assert event.estimated_usage is None, each.path


@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_what_the_sdks_that_cannot_agree_record(rig: Rig, name: str) -> None:
    endpoint = ENDPOINTS[name]
    for kind in KINDS:
        case = case_for(endpoint, kind)
        for each in rig.paths(case):
            record = _record_of(each)
            if each.path in READS_RAW and case.reply.success:  # the caller got them as sent
                failed = str(record["kind"]).endswith("_failed")
                assert failed == (kind != "gzip declared, not applied"), (kind, record)
            elif each.path in STATUS_LOST and not case.reply.success:
                assert record["error_category"] == ErrorCategory.INVALID_RESPONSE.value
                assert record["status_code"] is None


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
