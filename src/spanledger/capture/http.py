"""HTTP capture: a request to a vendor's embedding or rerank endpoint, seen in flight on any
HTTP client, recorded as one event.

``send_recorded`` wraps one send: the request is recognised (``capture.vendors``) and its facts
read from its JSON body (``recording.facts.request_facts``); the response is read whole and
handed on as a fresh response with the same status, headers and raw bytes, so the caller reads
it exactly as before (a response its maker already read, as test tools build them, is recorded
from that read body and handed on itself). ``watch_for`` is the same recording for clients
that are not httpx (``requests``, httpx2): it gives the ``Watch`` that hears the answer. A
request made inside a call already recorded (an instrumented SDK's, an outer recording
transport's) only passes through, so a call is recorded once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from contextvars import ContextVar
from typing import Any

import httpx

from spanledger.capture.failures import describe
from spanledger.capture.sdk_calls import current_call
from spanledger.capture.vendors import ROUTE_ENDINGS, recognise
from spanledger.errors import ProviderError
from spanledger.recorder import get_recorder
from spanledger.recording.call import Recording, logged
from spanledger.recording.facts import request_facts
from spanledger.recording.reported import answered_badly, reported, unreadable_response
from spanledger.wire.endpoints import Endpoint, Vendor
from spanledger.wire.http import (
    already_read,
    decoded_body,
    failure_for,
    parse_json,
    undecodable_body,
)

__all__ = [
    "Watch",
    "aread_whole",
    "asend_recorded",
    "might_be_vendor_call",
    "read_whole",
    "request_body",
    "requests_headers",
    "send_recorded",
    "watch_for",
]

_sending: ContextVar[bool] = ContextVar("spanledger_http_recorded", default=False)
"""Set while a recorded request is sent: a transport under it passes the request through."""


def send_recorded(
    send: Callable[[httpx.Request], httpx.Response],
    request: httpx.Request,
    vendors: Mapping[str, Vendor],
) -> httpx.Response:
    """``send(request)``, recorded when it is a vendor call. Inside a recorded call (an SDK's,
    or an outer recording transport's) it only passes through: a call is recorded once."""
    watch = _watch(request, vendors)
    if watch is None:
        return send(request)
    token = _sending.set(True)
    try:
        response = send(request)
        body, raw = read_whole(response)
    except BaseException as exc:
        watch.raised(exc)
        raise
    finally:
        _sending.reset(token)
    if body is not None:
        return watch.answered_read(response, body)
    return watch.answered(response, raw, request)


async def asend_recorded(
    send: Callable[[httpx.Request], Awaitable[httpx.Response]],
    request: httpx.Request,
    vendors: Mapping[str, Vendor],
) -> httpx.Response:
    """The coroutine twin of ``send_recorded``."""
    watch = _watch(request, vendors)
    if watch is None:
        return await send(request)
    token = _sending.set(True)
    try:
        response = await send(request)
        body, raw = await aread_whole(response)
    except BaseException as exc:
        watch.raised(exc)
        raise
    finally:
        _sending.reset(token)
    if body is not None:
        return watch.answered_read(response, body)
    return watch.answered(response, raw, request)


def read_whole(response: httpx.Response) -> tuple[bytes | None, bytes]:
    """A response's body its maker already read (and no raw bytes), else ``None`` and the
    raw bytes read whole from its stream, which is closed."""
    body = already_read(response)
    if body is not None:
        return body, b""
    stream = response.stream
    assert isinstance(stream, httpx.SyncByteStream)  # as httpx's own client requires
    try:
        return None, b"".join(stream)
    finally:
        stream.close()


async def aread_whole(response: httpx.Response) -> tuple[bytes | None, bytes]:
    """The coroutine twin of ``read_whole``."""
    body = already_read(response)
    if body is not None:
        return body, b""
    stream = response.stream
    assert isinstance(stream, httpx.AsyncByteStream)  # as httpx's own client requires
    try:
        return None, b"".join([chunk async for chunk in stream])
    finally:
        await stream.aclose()


class Watch:
    """One recognised request's recording."""

    __slots__ = ("endpoint", "recording")

    def __init__(self, recording: Recording, endpoint: Endpoint) -> None:
        self.recording = recording
        self.endpoint = endpoint

    def raised(self, exc: BaseException) -> None:
        try:
            self.recording.failed(describe(exc))
        except Exception as failure:
            logged(failure)

    def answered(
        self, response: httpx.Response, raw: bytes, request: httpx.Request
    ) -> httpx.Response:
        """Record the outcome; hand the caller the same status, headers and raw bytes."""
        self.settled(response.status_code, response.headers, raw)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx.ByteStream(raw),
            extensions=response.extensions,
            request=request,
        )

    def answered_read(self, response: httpx.Response, body: bytes) -> httpx.Response:
        """Record a response its maker already read (``body``: its content, decoded); the
        caller gets that very response, read as it was made."""
        self._settle(response.status_code, response.headers, body, body)
        return response

    def settled_requests(self, response: Any, content: object) -> None:
        """Record a ``requests`` response whose body the caller reads as ``content``."""
        raw = content if isinstance(content, bytes) else b""
        self.settled(response.status_code, requests_headers(response), raw)

    def settled(self, status: int, headers: httpx.Headers, raw: bytes) -> None:
        """Record the answer: ``raw`` is the body as sent, ``headers`` say how it is encoded."""
        self._settle(status, headers, raw, None)

    def _settle(self, status: int, headers: httpx.Headers, raw: bytes, read: bytes | None) -> None:
        """Record the answer from ``raw`` decoded by ``headers``, or from ``read``, the body
        already decoded by whoever read it first."""
        try:
            body = read if read is not None else decoded_body(status, headers, raw)
            self._record(status, headers, raw, body)
        except Exception as exc:
            logged(exc)
            self._unrecorded(status, raw)

    def _record(self, status: int, headers: httpx.Headers, raw: bytes, body: bytes | None) -> None:
        """``body``: ``raw`` decoded, or ``None`` when it does not decode."""
        if not 200 <= status < 300:
            self.recording.failed(
                failure_for(self.endpoint, status, headers, body if body is not None else raw)
            )
            return
        try:
            if body is None:  # its content encoding does not decode: the caller's read fails
                raise undecodable_body()
            found = reported(self.endpoint, parse_json(body), self.recording.facts, headers)
        except ProviderError as error:
            self.recording.failed(answered_badly(error, status, body if body is not None else raw))
            return
        self.recording.succeeded(found)

    def _unrecorded(self, status: int, raw: bytes) -> None:
        """The outcome could not be read at all: still the call's one event, as unreadable."""
        try:
            self.recording.failed(answered_badly(unreadable_response(), status, raw))
        except Exception as exc:
            logged(exc)


def requests_headers(response: Any) -> httpx.Headers:
    """A ``requests`` response's headers as they describe the body the caller reads: without
    its ``Content-Encoding`` where requests already applied it."""
    headers = httpx.Headers(dict(response.headers))
    if _decoded_by_requests(response):
        headers.pop("content-encoding", None)
    return headers


def _decoded_by_requests(response: Any) -> bool:
    """Whether a ``requests`` response's body is decoded by its content encoding: requests
    applies it reading through urllib3, and a body its maker set whole (no raw stream) was
    handed over read. A raw response of another kind is a stand-in (vcrpy's) that hands
    requests the stored bytes as they are: they are then decoded as off the wire."""
    raw = getattr(response, "raw", None)
    return raw is None or type(raw).__module__.split(".", 1)[0] == "urllib3"


def _watch(request: httpx.Request, vendors: Mapping[str, Vendor]) -> Watch | None:
    """A recording for ``request`` if it is a vendor call and someone is listening."""
    if not might_be_vendor_call(request.method, request.url.path):
        return None
    try:
        return watch_for(request.url, lambda: request_body(request), vendors)
    except Exception:
        return None


def might_be_vendor_call(method: str | None, path: str) -> bool:
    """The cheap first test: only a POST to an embedding or rerank route is looked at."""
    return method == "POST" and path.rstrip("/").endswith(ROUTE_ENDINGS)


def watch_for(
    url: httpx.URL, body_of: Callable[[], bytes | str], vendors: Mapping[str, Vendor]
) -> Watch | None:
    """A recording for a POST to ``url`` whose body ``body_of`` gives, if it is a vendor call,
    someone is listening, and no recorded call is under way in this context already."""
    if _sending.get() or current_call() is not None:
        return None
    recorder = get_recorder()
    if not recorder.active:
        return None
    try:
        body = json.loads(body_of())
    except Exception:
        return None
    if type(body) is not dict:
        return None
    try:
        endpoint = recognise(url, body, vendors)
        if endpoint is None:
            return None
        return Watch(Recording(recorder, request_facts(endpoint, body, url)), endpoint)
    except Exception as exc:
        logged(exc)
        return None


def request_body(request: httpx.Request) -> bytes:
    """The request's body. A client following a 307/308 resends the first request's body
    stream unread; an in-memory one can be read again, any other is not ours to consume."""
    try:
        return request.content
    except httpx.RequestNotRead:
        stream = request.stream
        if not isinstance(stream, httpx.ByteStream):
            raise
        return b"".join(stream)
