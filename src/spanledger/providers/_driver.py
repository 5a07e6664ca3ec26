"""Drive a sans-I/O flow over httpx, and record exactly one event per call.

The sync and async drivers differ only in how they send a request. Recording starts before any
validation, so a call refused before sending still produces its failure event, and the event is
handed to the recorder before the call returns or raises.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TypeVar

import httpx

from spanledger.errors import ErrorCategory, ProviderError, error_for_transport
from spanledger.events import EmbeddingResponse, RerankResponse
from spanledger.recording.call import Recording, ended_by
from spanledger.recording.facts import Figures
from spanledger.recording.reported import answered_badly, unreadable_response
from spanledger.wire.http import already_read, decoded_body, undecodable_body

__all__ = ["Timeout", "drive_async", "drive_sync", "run_async", "run_sync"]

T = TypeVar("T")
Timeout = float | httpx.Timeout | None


def _prepared(
    request: httpx.Request, client: httpx.Client | httpx.AsyncClient, timeout: Timeout
) -> httpx.Request:
    """Set the timeout in force; the request already carries the client's default headers.

    Sending the mapping's request as is is cheaper than ``client.build_request``, which would
    parse the URL and copy the body again; the client's auth, transport, proxies and event
    hooks still apply in ``send``.
    """
    chosen = client.timeout if timeout is None else httpx.Timeout(timeout)
    request.extensions["timeout"] = chosen.as_dict()
    return request


def _send_error(exc: Exception) -> ProviderError:
    if isinstance(exc, httpx.HTTPError):
        return error_for_transport(exc)
    return ProviderError(
        ErrorCategory.UNAVAILABLE, detail="the HTTP client failed", error_type=type(exc).__name__
    )


# Errors are raised outside the ``except`` block that caught their cause, so the caller's
# exception carries no ``__context__``: an HTTP library's message can quote response bytes.


def _first_request(flow: Generator[httpx.Request, httpx.Response, T]) -> httpx.Request:
    """Start the flow: it checks the call and builds every request before the first leaves."""
    try:
        return next(flow)
    except (ProviderError, StopIteration):
        raise
    except Exception as exc:
        failure = ProviderError(
            ErrorCategory.INVALID_REQUEST,
            detail="the request could not be built",
            error_type=type(exc).__name__,
        )
    raise failure


def _next_request(
    flow: Generator[httpx.Request, httpx.Response, T], response: httpx.Response
) -> httpx.Request:
    """Hand the flow a response; whatever reading it raises ends as a ``ProviderError``.

    A failure to read a 2xx answer carries its status and the body's fingerprint: the provider
    did the work (and may have billed it), the answer was unusable.
    """
    try:
        return flow.send(response)
    except StopIteration:
        raise
    except ProviderError as exc:
        failure = exc
    except Exception:  # RecursionError on deep JSON, or a shape no reader expected
        failure = unreadable_response()
    raise answered_badly(failure, response.status_code, response.content)


def _received(response: httpx.Response, raw: bytes) -> httpx.Response | ProviderError:
    """A response read off the wire raw, with its body decoded by the content encoding it
    declares, as the transport path reads it. A body that does not decode: a 2xx is an
    unusable answer (the provider did the work); another status is its status's failure,
    read from the raw bytes with the encoding header dropped."""
    status = response.status_code
    body = decoded_body(status, response.headers, raw)
    if body is None and 200 <= status < 300:
        return answered_badly(undecodable_body(), status, raw)
    return _as_read(response, raw if body is None else body)


def _as_read(response: httpx.Response, body: bytes) -> httpx.Response:
    """``response`` holding ``body`` as read: no content encoding is left to apply to it."""
    headers = response.headers.copy()
    headers.pop("content-encoding", None)
    return httpx.Response(
        response.status_code,
        headers=headers,
        content=body,
        request=response.request,
        extensions=response.extensions,
    )


def _send_sync(
    client: httpx.Client, request: httpx.Request, timeout: Timeout
) -> httpx.Response | ProviderError:
    """Send and read the whole answer; a declared content encoding is applied here, so that
    a body which does not decode ends as the same event as on every other path. A response
    its maker already read is taken as read: the same body those bytes give off the wire."""
    response = client.send(_prepared(request, client, timeout), stream=True)
    try:
        body = already_read(response)
        if body is not None:  # its maker read it (a test tool's): its raw stream is spent
            return _as_read(response, body)
        if "content-encoding" not in response.headers:
            response.read()
            return response
        raw = b"".join(response.iter_raw())
    finally:
        response.close()
    return _received(response, raw)


async def _send_async(
    client: httpx.AsyncClient, request: httpx.Request, timeout: Timeout
) -> httpx.Response | ProviderError:
    """The asyncio twin of ``_send_sync``."""
    response = await client.send(_prepared(request, client, timeout), stream=True)
    try:
        body = already_read(response)
        if body is not None:
            return _as_read(response, body)
        if "content-encoding" not in response.headers:
            await response.aread()
            return response
        raw = b"".join([chunk async for chunk in response.aiter_raw()])
    finally:
        await response.aclose()
    return _received(response, raw)


def drive_sync(
    flow: Generator[httpx.Request, httpx.Response, T], client: httpx.Client, timeout: Timeout
) -> T:
    """Run ``flow`` to completion, sending each request it yields with ``client``. Only a
    ``ProviderError`` (or the caller's own cancellation) leaves."""
    try:
        request = _first_request(flow)
        while True:
            try:
                answer = _send_sync(client, request, timeout)
            except Exception as exc:
                answer = _send_error(exc)
            if isinstance(answer, ProviderError):
                raise answer
            request = _next_request(flow, answer)
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        flow.close()


async def drive_async(
    flow: Generator[httpx.Request, httpx.Response, T],
    client: httpx.AsyncClient,
    timeout: Timeout,
) -> T:
    """Run ``flow`` to completion, awaiting each request it yields on ``client``."""
    try:
        request = _first_request(flow)
        while True:
            try:
                answer = await _send_async(client, request, timeout)
            except Exception as exc:
                answer = _send_error(exc)
            if isinstance(answer, ProviderError):
                raise answer
            request = _next_request(flow, answer)
    except StopIteration as done:
        result: T = done.value
        return result
    finally:
        flow.close()


R = TypeVar("R", EmbeddingResponse, RerankResponse)


def _unexpected(exc: Exception) -> ProviderError:
    """A failure of spanledger's own before anything was sent, as the documented error."""
    return ProviderError(
        ErrorCategory.INVALID_REQUEST,
        detail="the call could not be prepared",
        error_type=type(exc).__name__,
    )


def _figures(response: EmbeddingResponse | RerankResponse, model: str | None) -> Figures:
    """What the provider reported, as the recording core takes it."""
    if isinstance(response, EmbeddingResponse):
        return Figures(
            usage=response.usage,
            response_id=response.response_id,
            response_model=model,
            dimensions=response.dimensions,
            malformed_usage=response.malformed_usage,
        )
    return Figures(
        usage=response.usage,
        response_id=response.response_id,
        response_model=model,
        result_count=len(response.results),
        results=response.results,
        malformed_usage=response.malformed_usage,
    )


def _ended(recording: Recording | None, outcome: tuple[R, str | None]) -> R:
    response, model = outcome
    if recording is not None:
        recording.succeeded(_figures(response, model))
    return response


def run_sync(recording: Recording | None, call: Callable[[], tuple[R, str | None]]) -> R:
    """Run one provider call and end its recording once: the success event, or the failure
    event of the ``ProviderError`` the caller gets (a cancellation is recorded, then let go)."""
    try:
        outcome = call()
    except ProviderError as exc:
        failure = exc
    except Exception as exc:
        failure = _unexpected(exc)
    except BaseException as exc:
        if recording is not None:
            recording.failed(ended_by(exc))
        raise
    else:
        return _ended(recording, outcome)
    if recording is not None:
        recording.failed(failure)
    raise failure


async def run_async(
    recording: Recording | None, call: Callable[[], Awaitable[tuple[R, str | None]]]
) -> R:
    """The asyncio twin of ``run_sync``."""
    try:
        outcome = await call()
    except ProviderError as exc:
        failure = exc
    except Exception as exc:
        failure = _unexpected(exc)
    except BaseException as exc:
        if recording is not None:
            recording.failed(ended_by(exc))
        raise
    else:
        return _ended(recording, outcome)
    if recording is not None:
        recording.failed(failure)
    raise failure
