"""HTTP-level rules shared by every mapping: routes, bodies, status classes, transport errors."""

from __future__ import annotations

import json
from typing import Any

import httpx

from spanledger.errors import ErrorCategory, Fingerprint, ProviderError, parse_retry_after

__all__ = [
    "category_for_status",
    "encode_body",
    "error_for_status",
    "error_for_transport",
    "join_route",
    "parse_json",
]


def join_route(base_url: str, route: str) -> str:
    """Append a versioned route to an origin, without doubling a version already given."""
    base = base_url.rstrip("/")
    version = route.split("/", 2)[1] if route.startswith("/v") else ""
    if version and base.endswith("/" + version):
        base = base[: -len(version) - 1]
    return base + route


def encode_body(body: dict[str, Any]) -> bytes:
    """Compact JSON, keys in the order the mapping built them, text kept as UTF-8.

    A body that is not valid JSON text (a set or bytes in extras, NaN, a lone surrogate,
    nesting deeper than the interpreter can encode) is refused before sending as
    ``provider_invalid_request``.
    """
    try:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode(
            "utf-8"
        )
    except (TypeError, ValueError, RecursionError):  # UnicodeEncodeError is a ValueError
        pass
    raise ProviderError(
        ErrorCategory.INVALID_REQUEST,
        detail="the request cannot be encoded as JSON text",
        error_type="unencodable_request",
    )


def category_for_status(
    status: int, overrides: dict[int, ErrorCategory] | None = None
) -> ErrorCategory:
    """Classify a non-success HTTP status; the body is never consulted."""
    if overrides and status in overrides:
        return overrides[status]
    if status in (401, 403):
        return ErrorCategory.AUTHENTICATION
    if status == 404:
        return ErrorCategory.INVALID_MODEL
    if status == 429:
        return ErrorCategory.RATE_LIMIT
    if status == 408 or status >= 500:
        return ErrorCategory.UNAVAILABLE
    if 400 <= status < 500:
        return ErrorCategory.INVALID_REQUEST
    return ErrorCategory.INVALID_RESPONSE


def error_for_status(
    status: int,
    headers: httpx.Headers,
    body: bytes | None,
    overrides: dict[int, ErrorCategory] | None = None,
) -> ProviderError:
    """A categorised error for a failed response: status, ``Retry-After``, body fingerprint
    (none when the body was never read)."""
    return ProviderError(
        category_for_status(status, overrides),
        status_code=status,
        retry_after=parse_retry_after(headers.get("retry-after")),
        fingerprint=Fingerprint.of(body) if body is not None else None,
        error_type=f"http_{status}",
    )


def error_for_transport(exc: BaseException) -> ProviderError:
    """A transport failure (refused, reset, timed out) as ``provider_unavailable``."""
    detail = "timed out" if isinstance(exc, httpx.TimeoutException) else "transport failure"
    return ProviderError(ErrorCategory.UNAVAILABLE, detail=detail, error_type=type(exc).__name__)


def parse_json(body: bytes) -> Any:
    """Decode a success body, or fail as ``provider_invalid_response`` (never quoting it).
    JSON nested deeper than the interpreter's recursion limit is invalid too."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        pass
    raise ProviderError(
        ErrorCategory.INVALID_RESPONSE,
        detail="response body is not JSON",
        fingerprint=Fingerprint.of(body),
        error_type="invalid_json",
    )
