"""HTTP status and transport failures: one request, the right category, nothing leaked."""

from __future__ import annotations

import hashlib
import json
import traceback
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pytest

from spanledger import ErrorCategory, Fingerprint, ProviderError, Recorder
from spanledger.events import EmbeddingFailedEvent, Event, RerankFailedEvent
from spanledger.providers import EmbeddingProvider, RerankProvider

from .conftest import (
    API_KEY,
    BODY_SENTINEL,
    EMBEDDING_VENDORS,
    RERANK_VENDORS,
    FakeServer,
    call,
    make_embedder,
    make_reranker,
)

ENDPOINTS = [("embed", v) for v in EMBEDDING_VENDORS] + [("rerank", v) for v in RERANK_VENDORS]
ENDPOINT_IDS = [f"{kind}-{vendor}" for kind, vendor in ENDPOINTS]

STATUSES = [
    (401, ErrorCategory.AUTHENTICATION),
    (404, ErrorCategory.INVALID_MODEL),
    (400, ErrorCategory.INVALID_REQUEST),
    (413, ErrorCategory.INVALID_REQUEST),
    (422, ErrorCategory.INVALID_REQUEST),
    (429, ErrorCategory.RATE_LIMIT),
    (500, ErrorCategory.UNAVAILABLE),
    (502, ErrorCategory.UNAVAILABLE),
    (503, ErrorCategory.UNAVAILABLE),
]

ERROR_BODY = {
    "error": {
        "message": f"{BODY_SENTINEL}: the key {API_KEY} is not valid for this model",
        "type": "invalid_request_error",
        "code": "model_not_found",
    }
}


def _fail(
    kind: str, vendor: str, server: FakeServer, recorder: Recorder, *, is_async: bool
) -> ProviderError:
    """Run one call that must fail; return the error."""
    provider: EmbeddingProvider | RerankProvider
    args: tuple[object, ...]
    if kind == "embed":
        provider, args = make_embedder(vendor, server, recorder), (["a", "b"],)
    else:
        provider, args = make_reranker(vendor, server, recorder), ("q", ["x", "y"])
    with pytest.raises(ProviderError) as exc:
        call(provider, kind, *args, is_async=is_async)
    return exc.value


def _failure_event(events: list[Event]) -> EmbeddingFailedEvent | RerankFailedEvent:
    assert len(events) == 1
    event = events[0]
    assert isinstance(event, EmbeddingFailedEvent | RerankFailedEvent)
    return event


def _assert_no_leak(error: ProviderError, event: Event) -> None:
    for text in (
        str(error),
        repr(error),
        event.model_dump_json(),
        repr(event),
        json.dumps(event.model_dump(mode="json")),
    ):
        assert BODY_SENTINEL not in text
        assert API_KEY not in text


@pytest.mark.parametrize(("status", "category"), STATUSES, ids=[str(s) for s, _ in STATUSES])
@pytest.mark.parametrize(("kind", "vendor"), ENDPOINTS, ids=ENDPOINT_IDS)
def test_status_classification(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    kind: str,
    vendor: str,
    status: int,
    category: ErrorCategory,
) -> None:
    body = json.dumps(ERROR_BODY).encode()
    server.reply(raw=body, status=status)
    error = _fail(kind, vendor, server, recorder, is_async=is_async)

    assert error.category is category
    assert error.status_code == status
    assert len(server.requests) == 1, "a provider never retries"
    assert error.fingerprint == Fingerprint(
        byte_length=len(body), sha256=hashlib.sha256(body).hexdigest()
    )
    event = _failure_event(events)
    assert event.error_category is category
    assert event.status_code == status
    assert event.fingerprint == error.fingerprint
    assert event.kind == ("embedding_failed" if kind == "embed" else "rerank_failed")
    _assert_no_leak(error, event)


@pytest.mark.parametrize(("kind", "vendor"), ENDPOINTS, ids=ENDPOINT_IDS)
def test_404_is_invalid_model_whatever_the_body(
    server: FakeServer, recorder: Recorder, events: list[Event], kind: str, vendor: str
) -> None:
    server.reply({"error": {"code": "model_not_found", "message": "no such model"}}, status=404)
    error = _fail(kind, vendor, server, recorder, is_async=False)
    assert error.category is ErrorCategory.INVALID_MODEL
    assert _failure_event(events).error_category is ErrorCategory.INVALID_MODEL


@pytest.mark.parametrize(("kind", "vendor"), ENDPOINTS, ids=ENDPOINT_IDS)
def test_429_retry_after_seconds(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    kind: str,
    vendor: str,
) -> None:
    server.reply({"error": BODY_SENTINEL}, status=429, headers={"Retry-After": "30"})
    error = _fail(kind, vendor, server, recorder, is_async=is_async)
    assert error.category is ErrorCategory.RATE_LIMIT
    assert error.retry_after == 30.0
    assert _failure_event(events).retry_after == 30.0
    assert len(server.requests) == 1


@pytest.mark.parametrize(("kind", "vendor"), ENDPOINTS, ids=ENDPOINT_IDS)
def test_429_retry_after_http_date(
    server: FakeServer, recorder: Recorder, events: list[Event], kind: str, vendor: str
) -> None:
    when = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=120)
    server.reply({}, status=429, headers={"Retry-After": format_datetime(when, usegmt=True)})
    error = _fail(kind, vendor, server, recorder, is_async=False)
    assert error.category is ErrorCategory.RATE_LIMIT
    assert error.retry_after is not None
    assert 100.0 <= error.retry_after <= 120.0
    assert _failure_event(events).retry_after == error.retry_after


def test_429_without_retry_after(server: FakeServer, recorder: Recorder) -> None:
    server.reply({}, status=429)
    error = _fail("embed", "openai", server, recorder, is_async=False)
    assert error.category is ErrorCategory.RATE_LIMIT
    assert error.retry_after is None


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ConnectError(f"connection refused {BODY_SENTINEL} {API_KEY}"),
        httpx.ReadTimeout(f"read timed out {BODY_SENTINEL} {API_KEY}"),
        httpx.ConnectTimeout("connect timed out"),
        httpx.RemoteProtocolError("server hung up"),
    ],
    ids=["connect", "read-timeout", "connect-timeout", "protocol"],
)
@pytest.mark.parametrize(("kind", "vendor"), ENDPOINTS, ids=ENDPOINT_IDS)
def test_transport_errors_are_unavailable(
    server: FakeServer,
    recorder: Recorder,
    events: list[Event],
    is_async: bool,
    kind: str,
    vendor: str,
    failure: Exception,
) -> None:
    server.fail_with(failure)
    error = _fail(kind, vendor, server, recorder, is_async=is_async)
    assert error.category is ErrorCategory.UNAVAILABLE
    assert error.status_code is None
    assert len(server.requests) == 1, "a provider never retries"
    # the transport's exception is named, never chained: its message can quote response bytes
    assert error.error_type == type(failure).__name__
    assert error.__cause__ is None
    assert error.__context__ is None
    assert BODY_SENTINEL not in "".join(traceback.format_exception(error))
    event = _failure_event(events)
    assert event.error_category is ErrorCategory.UNAVAILABLE
    assert event.status_code is None
    _assert_no_leak(error, event)


def test_error_category_is_not_transient_for_auth(server: FakeServer, recorder: Recorder) -> None:
    server.reply({}, status=401)
    error = _fail("rerank", "jina", server, recorder, is_async=False)
    assert error.category is ErrorCategory.AUTHENTICATION
    assert not error.category.transient
