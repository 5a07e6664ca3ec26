"""Error categories and the one exception type every provider failure raises.

A ``ProviderError`` says what class of failure happened, the HTTP status and how long the
provider asked us to wait. It never holds the response body or a credential: the offending body
is summarised by a ``Fingerprint`` (byte length and SHA-256), which is enough to correlate two
failures without copying their content into logs or traces.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from spanledger._fingerprint import Fingerprint

__all__ = [
    "ConfigurationError",
    "ErrorCategory",
    "Fingerprint",
    "MissingExtra",
    "ProviderError",
    "category_for_status",
    "error_for_interrupt",
    "error_for_status",
    "error_for_transport",
    "interrupts",
    "parse_retry_after",
]


class ConfigurationError(ValueError):
    """A setting spanledger cannot use: the message is one sentence naming the environment
    variable or file, the entry and the field, and what was expected. Never a traceback of
    spanledger's internals, never a secret's value."""


class MissingExtra(ImportError, ConfigurationError):
    """An optional part of spanledger is not installed: the message is one sentence naming the
    extra that brings it (``pip install 'spanledger[otel]'``). It is an ``ImportError`` (a module
    is missing) and a ``ConfigurationError`` (what asked for it cannot be used as set up)."""

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message)
        self.extra = extra


class ErrorCategory(StrEnum):
    """What went wrong, in terms a retry or fallback policy can act on. ``interrupted`` is the
    caller's side ending the call (a keyboard interrupt, a cancellation), never the provider's."""

    AUTHENTICATION = "provider_authentication"
    UNAVAILABLE = "provider_unavailable"
    INVALID_MODEL = "provider_invalid_model"
    MODEL_NOT_LOADED = "provider_model_not_loaded"
    RATE_LIMIT = "provider_rate_limit"
    INVALID_RESPONSE = "provider_invalid_response"
    INVALID_REQUEST = "provider_invalid_request"
    INTERRUPTED = "interrupted"

    @property
    def transient(self) -> bool:
        """Whether retrying the same request later may succeed."""
        return self in _TRANSIENT


_TRANSIENT = frozenset(
    {ErrorCategory.UNAVAILABLE, ErrorCategory.MODEL_NOT_LOADED, ErrorCategory.RATE_LIMIT}
)


def __getattr__(name: str) -> object:
    """``Fingerprint``, imported on first use: it is a pydantic model, and building one costs
    more than the rest of this module, which the command line imports whatever it does."""
    if name == "Fingerprint":
        from spanledger._fingerprint import Fingerprint

        globals()["Fingerprint"] = Fingerprint
        return Fingerprint
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class ProviderError(Exception):
    """A failed embedding or rerank call, categorised, with no payload inside.

    ``detail`` is spanledger's own wording (for example which invariant a response broke); it
    must never be text taken from the provider or the caller's inputs.
    """

    def __init__(
        self,
        category: ErrorCategory | str,
        status_code: int | None = None,
        retry_after: float | None = None,
        fingerprint: Fingerprint | None = None,
        *,
        detail: str = "",
        error_type: str | None = None,
    ) -> None:
        self.category = ErrorCategory(category)
        self.status_code = status_code
        self.retry_after = retry_after
        self.fingerprint = fingerprint
        self.detail = detail
        self.error_type = error_type
        super().__init__(self._describe())

    def _describe(self) -> str:
        parts = [self.category.value]
        if self.status_code is not None:
            parts.append(f"HTTP {self.status_code}")
        if self.detail:
            parts.append(self.detail)
        if self.retry_after is not None:
            parts.append(f"retry after {self.retry_after:g}s")
        if self.fingerprint is not None:
            parts.append(
                f"body {self.fingerprint.byte_length} bytes sha256:{self.fingerprint.sha256[:16]}"
            )
        return ": ".join(parts[:2]) + "".join(f"; {part}" for part in parts[2:])

    def __repr__(self) -> str:
        return (
            f"ProviderError(category={self.category.value!r}, status_code={self.status_code!r}, "
            f"retry_after={self.retry_after!r})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_provider_error,
            (
                self.category.value,
                self.status_code,
                self.retry_after,
                self.fingerprint,
                self.detail,
                self.error_type,
            ),
        )


def _rebuild_provider_error(
    category: str,
    status_code: int | None,
    retry_after: float | None,
    fingerprint: Fingerprint | None,
    detail: str,
    error_type: str | None,
) -> ProviderError:
    return ProviderError(
        category, status_code, retry_after, fingerprint, detail=detail, error_type=error_type
    )


def parse_retry_after(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date.

    Returns ``None`` for an absent or unreadable header; a date in the past gives ``0.0``.
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if text.isascii() and text.isdigit():
        return float(int(text)) if len(text) <= 12 else None
    from email.utils import parsedate_to_datetime  # only an HTTP date needs the email package

    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    reference = now if now is not None else datetime.now(UTC)
    seconds = (when - reference).total_seconds()
    if not math.isfinite(seconds):
        return None
    return max(0.0, seconds)


class _Headers(Protocol):
    def get(self, key: str, default: None = None) -> str | None: ...


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
    headers: _Headers,
    body: bytes | None,
    overrides: dict[int, ErrorCategory] | None = None,
) -> ProviderError:
    """A categorised error for a failed response: status, ``Retry-After``, body fingerprint
    (none when the body was never read)."""
    from spanledger._fingerprint import Fingerprint

    return ProviderError(
        category_for_status(status, overrides),
        status_code=status,
        retry_after=parse_retry_after(headers.get("retry-after")),
        fingerprint=Fingerprint.of(body) if body is not None else None,
        error_type=f"http_{status}",
    )


def error_for_transport(exc: BaseException) -> ProviderError:
    """A transport failure (refused, reset, timed out) as ``provider_unavailable``, named by
    the transport's exception class."""
    detail = "timed out" if "Timeout" in type(exc).__name__ else "transport failure"
    return ProviderError(ErrorCategory.UNAVAILABLE, detail=detail, error_type=type(exc).__name__)


def interrupts(exc: BaseException) -> bool:
    """Whether ``exc`` interrupts the call rather than failing it: a ``BaseException`` that is
    not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``, ``GeneratorExit``,
    ``asyncio.CancelledError``)."""
    return not isinstance(exc, Exception)


def error_for_interrupt(exc: BaseException) -> ProviderError:
    """An interrupted call as ``interrupted``, named by the interrupt's class (never by its
    message). The provider is not blamed: it is neither unavailable nor retried."""
    name = type(exc).__name__
    return ProviderError(
        ErrorCategory.INTERRUPTED, detail=f"call interrupted by {name}", error_type=name
    )
