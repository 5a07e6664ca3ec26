"""Turn whatever a call raised into a ``ProviderError`` for its failure event.

The caller's exception is never changed or re-raised from here: this only describes it. A
status-bearing error (an SDK's API error, ``httpx.HTTPStatusError``) is categorised by its HTTP
status, with ``Retry-After`` and a fingerprint of the body when the raw body is at hand; a
transport failure anywhere in the exception chain is ``provider_unavailable`` named after the
transport's exception class; an interrupt (a ``BaseException`` that is not an ``Exception``:
``KeyboardInterrupt``, ``asyncio.CancelledError``...) is ``interrupted``. No message text is ever
taken from the exception.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spanledger.errors import (
    ErrorCategory,
    Fingerprint,
    ProviderError,
    category_for_status,
    error_for_interrupt,
    interrupts,
    parse_retry_after,
)
from spanledger.estimates import ABANDONED_ERROR_TYPES, UNREADABLE_ANSWER_TYPES

__all__ = ["after_sending", "describe", "status_error", "transport_cause"]

_TRANSPORT_MODULES = ("httpx", "httpx2", "httpcore", "httpcore2", "requests", "urllib3", "aiohttp")
_TRANSPORT_BUILTINS = frozenset({"TimeoutError", "ConnectionError", "CancelledError"})


def describe(
    exc: BaseException, fallback: ErrorCategory = ErrorCategory.UNAVAILABLE
) -> ProviderError:
    """A ``ProviderError`` describing ``exc``; ``fallback`` when it is neither an interrupt, an
    HTTP status error nor a transport failure."""
    if isinstance(exc, ProviderError):
        return exc
    if interrupts(exc):  # the caller's interrupt, whatever it interrupted: never the provider's
        return error_for_interrupt(exc)
    status = _status(exc)
    if status is not None and 200 <= status < 300:
        name = type(exc).__name__
        return ProviderError(
            ErrorCategory.INVALID_RESPONSE,
            status_code=status,
            detail="a 2xx response could not be read",
            fingerprint=_body_fingerprint(exc, getattr(exc, "response", None)),
            error_type=name,
        )
    by_status = status_error(exc)
    if by_status is not None:
        return by_status
    undecodable = _undecodable(exc)
    if undecodable is not None:  # an answer arrived and its body could not be decoded
        return ProviderError(
            ErrorCategory.INVALID_RESPONSE,
            detail="a response body could not be decoded",
            error_type=type(undecodable).__name__,
        )
    cause = transport_cause(exc)
    if cause is not None:
        name = after_sending(cause) or type(cause).__name__
        return ProviderError(ErrorCategory.UNAVAILABLE, detail="transport failure", error_type=name)
    name = type(exc).__name__
    return ProviderError(fallback, detail=f"call ended by {name}", error_type=name)


def status_error(exc: BaseException) -> ProviderError | None:
    """The status-based error for an exception that carries an HTTP error status, else None."""
    response = getattr(exc, "response", None)
    status = _status(exc)
    if status is None or not 300 <= status <= 599:
        return None
    headers = getattr(exc, "headers", None)
    if not isinstance(headers, Mapping) and response is not None:
        headers = getattr(response, "headers", None)
    return ProviderError(
        category_for_status(status),
        status_code=status,
        retry_after=parse_retry_after(_header(headers, "retry-after")),
        fingerprint=_body_fingerprint(exc, response),
        error_type=f"http_{status}",
    )


def _undecodable(exc: BaseException) -> BaseException | None:
    """A body-decoding failure in ``exc``'s chain (itself included): text that is not UTF-8,
    or not JSON. Only a response that arrived has a body to fail on."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        if type(node).__name__ in UNREADABLE_ANSWER_TYPES:
            return node
        node = node.__cause__ or node.__context__
    return None


def transport_cause(exc: BaseException) -> BaseException | None:
    """The first transport-level exception in ``exc``'s chain (itself included), if any."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        kind = type(node)
        if kind.__module__.split(".", 1)[0] in _TRANSPORT_MODULES:
            return node
        if kind.__module__ in ("builtins", "asyncio.exceptions") and (
            kind.__name__ in _TRANSPORT_BUILTINS or isinstance(node, ConnectionError)
        ):
            return node
        node = node.__cause__ or node.__context__
    return None


def after_sending(exc: BaseException) -> str | None:
    """The name of a failure in ``exc``'s chain that only happens once the request has left
    (a read timeout, a connection dropped mid-answer), when there is one: ``requests`` and
    ``aiohttp`` wrap those in broad classes that a refused connection raises too."""
    pending: list[BaseException] = [exc]
    seen: set[int] = set()
    while pending and len(seen) < 32:
        node = pending.pop(0)
        if id(node) in seen:
            continue
        seen.add(id(node))
        name = type(node).__name__
        # a cancellation deep in the chain is a timeout's, which may have hit a connect
        if name in ABANDONED_ERROR_TYPES and name != "CancelledError":
            return name
        linked = (node.__cause__, node.__context__, getattr(node, "reason", None), *node.args)
        pending.extend(item for item in linked if isinstance(item, BaseException))
    return None


def _status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries: an SDK's own attribute or its httpx response's."""
    for value in (
        getattr(exc, "status_code", None),
        getattr(exc, "http_status", None),
        getattr(getattr(exc, "response", None), "status_code", None),
    ):
        if type(value) is int:
            return value
    return None


def _header(headers: object, name: str) -> str | None:
    if headers is None:
        return None
    try:
        value: Any = headers.get(name)  # type: ignore[attr-defined]
        if value is None and isinstance(headers, Mapping):
            value = next((v for k, v in headers.items() if str(k).lower() == name), None)
    except Exception:
        return None
    return value if type(value) is str else None


def _body_fingerprint(exc: BaseException, response: object) -> Fingerprint | None:
    """Fingerprint the raw body when the exception still holds it (never the parsed form)."""
    if response is not None:
        try:
            content = getattr(response, "content", None)
        except Exception:
            content = None
        if isinstance(content, bytes):
            return Fingerprint.of(content)
    body = getattr(exc, "http_body", None)
    if type(body) is str:
        return Fingerprint.of(body.encode("utf-8", "surrogatepass"))
    return None
