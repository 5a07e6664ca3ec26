"""Drive a sans-I/O flow over httpx, and record exactly one event per call.

The sync and async drivers differ only in how they send a request. Recording starts before any
validation, so a call refused before sending still produces its failure event, and the event is
handed to the recorder before the call returns or raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Generator
from datetime import UTC, datetime
from time import perf_counter
from typing import Any, TypeVar

import httpx
import structlog

from spanledger.errors import ErrorCategory, Fingerprint, ProviderError
from spanledger.estimates import (
    estimate_embedding_usage,
    estimate_rerank_usage,
    may_have_billed,
    utf8_bytes,
)
from spanledger.events import (
    CallStarted,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingResponse,
    Event,
    RerankEvent,
    RerankFailedEvent,
    RerankResponse,
    builder_of,
    new_call_id,
)
from spanledger.providers._calls import EmbedCall, RerankCall
from spanledger.errors import error_for_transport
from spanledger.providers._mapping import EmbeddingMapping, RerankMapping
from spanledger.recorder import Recorder, current_request

__all__ = [
    "UNRECORDABLE",
    "EmbedAttempt",
    "RerankAttempt",
    "drive_async",
    "drive_sync",
    "run_async",
    "run_sync",
]

_log = structlog.get_logger("spanledger.providers")
UNRECORDABLE = ProviderError(
    ErrorCategory.INVALID_RESPONSE,
    detail="the call's outcome could not be recorded",
    error_type="unrecordable_outcome",
)
"""How a call that was announced ends when its own event cannot be built."""
_call_started = builder_of(CallStarted)
_embedding_event = builder_of(EmbeddingEvent)
_rerank_event = builder_of(RerankEvent)
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
        failure = ProviderError(
            ErrorCategory.INVALID_RESPONSE,
            detail="the response could not be read",
            error_type="unreadable_response",
        )
    raise _answered(failure, response)


def _answered(error: ProviderError, response: httpx.Response) -> ProviderError:
    status = response.status_code
    if error.status_code is not None or not 200 <= status < 300:
        return error
    return ProviderError(
        error.category,
        status,
        error.retry_after,
        error.fingerprint or Fingerprint.of(response.content),
        detail=error.detail,
        error_type=error.error_type,
    )


def drive_sync(
    flow: Generator[httpx.Request, httpx.Response, T], client: httpx.Client, timeout: Timeout
) -> T:
    """Run ``flow`` to completion, sending each request it yields with ``client``. Only a
    ``ProviderError`` (or the caller's own cancellation) leaves."""
    try:
        request = _first_request(flow)
        while True:
            failure = None
            try:
                response = client.send(_prepared(request, client, timeout))
            except Exception as exc:
                failure = _send_error(exc)
            if failure is not None:
                raise failure
            request = _next_request(flow, response)
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
            failure = None
            try:
                response = await client.send(_prepared(request, client, timeout))
            except Exception as exc:
                failure = _send_error(exc)
            if failure is not None:
                raise failure
            request = _next_request(flow, response)
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


def run_sync(attempt: _Attempt, call: Callable[[], tuple[R, str | None]]) -> R:
    """Run one provider call and end its recording once: the success event, or the failure
    event of the ``ProviderError`` the caller gets (a cancellation is recorded, then let go)."""
    try:
        outcome = call()
    except ProviderError as exc:
        failure = exc
    except Exception as exc:
        failure = _unexpected(exc)
    except BaseException as exc:
        attempt.failed(exc)
        raise
    else:
        response: R = attempt.succeeded(outcome)
        return response
    attempt.failed(failure)
    raise failure


async def run_async(attempt: _Attempt, call: Callable[[], Awaitable[tuple[R, str | None]]]) -> R:
    """The asyncio twin of ``run_sync``."""
    try:
        outcome = await call()
    except ProviderError as exc:
        failure = exc
    except Exception as exc:
        failure = _unexpected(exc)
    except BaseException as exc:
        attempt.failed(exc)
        raise
    else:
        response: R = attempt.succeeded(outcome)
        return response
    attempt.failed(failure)
    raise failure


def _failure_fields(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ProviderError):
        return {
            "error_category": exc.category,
            "error_type": exc.error_type or type(exc).__name__,
            "status_code": exc.status_code,
            "retry_after": exc.retry_after,
            "fingerprint": exc.fingerprint,
            "error_message": str(exc),
        }
    name = type(exc).__name__
    return {
        "error_category": ErrorCategory.UNAVAILABLE,
        "error_type": name,
        "error_message": f"call ended by {name}",
    }


class _Attempt:
    """One call's recording: identity, timing, and the single event it ends with."""

    __slots__ = (
        "_done",
        "_recovering",
        "_t0",
        "call_id",
        "mapping",
        "recorder",
        "request_id",
        "started_at",
    )

    operation: str = ""

    def __init__(self, recorder: Recorder, mapping: EmbeddingMapping | RerankMapping) -> None:
        self.recorder: Recorder | None = recorder if recorder.active else None
        self.mapping = mapping
        self._done = False
        self._recovering = False
        self.started_at = datetime.now(UTC)
        self._t0 = perf_counter()
        self.call_id = ""
        self.request_id: str | None = None
        if self.recorder is not None:
            self.call_id = new_call_id()
            scope = current_request()
            self.request_id = scope.request_id if scope is not None else None
        if self.recorder is not None and self.recorder.wants_call_started:
            self.recorder.call_started(
                _call_started(
                    {
                        "call_id": self.call_id,
                        "operation": self.operation,
                        "provider": mapping.provider,
                        "model": mapping.model,
                        "request_id": self.request_id,
                        "started_at": self.started_at,
                        "server_address": mapping.server_address,
                        "server_port": mapping.server_port,
                    }
                )
            )

    def _common(self, request_params: dict[str, Any], extras: dict[str, Any]) -> dict[str, Any]:
        return {
            "call_id": self.call_id,
            "request_id": self.request_id,
            "provider": self.mapping.provider,
            "model": self.mapping.model,
            "started_at": self.started_at,
            "latency_ms": (perf_counter() - self._t0) * 1000.0,
            "request_params": request_params,
            "request_extras": extras,
            "server_address": self.mapping.server_address,
            "server_port": self.mapping.server_port,
        }

    def _emit(self, build: Callable[[], Event]) -> None:
        if self.recorder is None or self._done:
            return
        self._done = True
        try:
            event = build()
        except Exception as exc:
            with contextlib.suppress(Exception):
                _log.error("event_build_failed", error_type=type(exc).__name__)
            if not self._recovering:  # the call was announced: it still ends, as unrecordable
                self._recovering = True
                self._done = False
                self.failed(UNRECORDABLE)
            return
        self.recorder.emit(event)

    def failed(self, exc: BaseException) -> None:
        raise NotImplementedError

    def succeeded(self, outcome: Any) -> Any:
        raise NotImplementedError


class EmbedAttempt(_Attempt):
    """Recording for one ``embed`` call."""

    __slots__ = ("call", "raw_args")
    operation = "embeddings"

    def __init__(
        self,
        recorder: Recorder,
        mapping: EmbeddingMapping,
        raw_args: tuple[object, object, object, Any],
    ) -> None:
        super().__init__(recorder, mapping)
        self.raw_args = raw_args
        self.call: EmbedCall | None = None

    def checked_call(self) -> EmbedCall:
        self.call = EmbedCall.checked(*self.raw_args)
        return self.call

    def succeeded(self, outcome: tuple[EmbeddingResponse, str | None]) -> EmbeddingResponse:
        response, response_model = outcome
        call = self.call
        assert call is not None
        self._emit(
            lambda: _embedding_event(
                {
                    **self._common(call.request_params(), call.extras),
                    "input_count": len(call.inputs),
                    "input_type": call.input_type,
                    "inputs": call.inputs,
                    "dimensions": response.dimensions,
                    "usage": response.usage,
                    "response_id": response.response_id,
                    "response_model": response_model,
                }
            )
        )
        return response

    def failed(self, exc: BaseException) -> None:
        call = self.call
        inputs, input_type, _, _ = self.raw_args
        self._emit(
            lambda: EmbeddingFailedEvent(
                **self._common(call.request_params() if call else {}, call.extras if call else {}),
                input_count=len(call.inputs) if call else _safe_len(inputs),
                input_type=call.input_type if call else _safe_str(input_type),
                inputs=call.inputs if call else None,
                estimated_usage=estimate_embedding_usage(self.mapping.billing, call.inputs)
                if call and _may_have_billed(exc)
                else None,
                **_failure_fields(exc),
            )
        )


class RerankAttempt(_Attempt):
    """Recording for one ``rerank`` call."""

    __slots__ = ("call", "raw_args")
    operation = "rerank"

    def __init__(
        self,
        recorder: Recorder,
        mapping: RerankMapping,
        raw_args: tuple[object, object, object, object, Any],
    ) -> None:
        super().__init__(recorder, mapping)
        self.raw_args = raw_args
        self.call: RerankCall | None = None

    def checked_call(self) -> RerankCall:
        self.call = RerankCall.checked(*self.raw_args)
        return self.call

    def succeeded(self, outcome: tuple[RerankResponse, str | None]) -> RerankResponse:
        response, response_model = outcome
        call = self.call
        assert call is not None
        self._emit(
            lambda: _rerank_event(
                {
                    **self._common(call.request_params(), call.extras),
                    "query_length": utf8_bytes(call.query),
                    "document_count": len(call.documents),
                    "top_k": call.top_k,
                    "query": call.query,
                    "documents": call.documents,
                    "result_count": len(response.results),
                    "results": response.results,
                    "usage": response.usage,
                    "response_id": response.response_id,
                    "response_model": response_model,
                }
            )
        )
        return response

    def failed(self, exc: BaseException) -> None:
        call = self.call
        query, documents, top_k, _, _ = self.raw_args
        self._emit(
            lambda: RerankFailedEvent(
                **self._common(call.request_params() if call else {}, call.extras if call else {}),
                query_length=utf8_bytes(call.query)
                if call
                else (utf8_bytes(query) if type(query) is str else 0),
                document_count=len(call.documents) if call else _safe_len(documents),
                top_k=call.top_k if call else (top_k if type(top_k) is int and top_k > 0 else None),
                query=call.query if call else None,
                documents=call.documents if call else None,
                estimated_usage=estimate_rerank_usage(
                    self.mapping.billing, call.query, call.documents
                )
                if call and _may_have_billed(exc)
                else None,
                **_failure_fields(exc),
            )
        )


def _may_have_billed(exc: BaseException) -> bool:
    if isinstance(exc, ProviderError):
        return may_have_billed(exc.category, exc.error_type, exc.status_code)
    return may_have_billed(ErrorCategory.UNAVAILABLE, type(exc).__name__, None)


def _safe_len(value: object) -> int:
    if isinstance(value, str | bytes):
        return 1
    try:
        return len(value)  # type: ignore[arg-type]
    except TypeError:
        return 0


def _safe_str(value: object) -> str | None:
    return value if type(value) is str and value else None
