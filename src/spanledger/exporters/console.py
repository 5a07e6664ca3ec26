"""A development sink: one readable line per call, and one per request's attribution."""

from __future__ import annotations

import sys
from typing import TextIO

from spanledger import _forksafe
from spanledger.attribution.summary import context_spend_text, printable
from spanledger.events import (
    AttributionRecord,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankUsage,
)
from spanledger.wire.endpoints import Vendor

__all__ = ["ConsoleSink", "describe_attribution", "describe_event"]


def _usage_text(usage: EmbeddingUsage | RerankUsage | None) -> str:
    if usage is None:
        return "usage not reported"
    figures = []
    if isinstance(usage, RerankUsage) and usage.search_units is not None:
        figures.append(f"{usage.search_units} search units")
    if usage.input_tokens is not None:
        figures.append(f"{usage.input_tokens} input tokens")
    if isinstance(usage, EmbeddingUsage) and usage.billable_characters is not None:
        figures.append(f"{usage.billable_characters} billable characters")
    return ", ".join(figures)


_PROVIDER_WIDTH = max(len(vendor.value) for vendor in Vendor)
"""The provider column fits every built-in vendor's name (``sentence_transformers``)."""


def describe_event(event: Event) -> str:
    """One line: operation, provider, model, latency, then usage or the failure category."""
    operation = "embed " if isinstance(event, EmbeddingEvent | EmbeddingFailedEvent) else "rerank"
    head = (
        f"{operation} {event.provider:<{_PROVIDER_WIDTH}} {event.model:<28} "
        f"{event.latency_ms:8.1f} ms  "
    )
    if isinstance(event, EmbeddingEvent):
        return f"{head}{event.input_count} inputs -> {_usage_text(event.usage)}"
    if isinstance(event, RerankEvent):
        return (
            f"{head}{event.document_count} docs, {event.result_count} results -> "
            f"{_usage_text(event.usage)}"
        )
    if event.status_code is not None:
        why = f" (HTTP {event.status_code})"
    elif event.error_type and not event.error_type.startswith("http_"):
        why = f" ({event.error_type})"
    else:
        why = ""
    return f"{head}FAILED {event.error_category.value}{why}"


def describe_attribution(record: AttributionRecord) -> str:
    """One line: the request, its frames, the cited share and what the context cost."""
    share = f"{record.cited_token_share:.1%}" if record.cited_token_share is not None else "n/a"
    return (
        f"request {printable(record.request_id)}: {record.frames_rendered} of "
        f"{record.frames_served} frames rendered, {record.frames_cited} cited "
        f"(cited token share {share}); context spend {context_spend_text(record)}"
    )


class ConsoleSink:
    """Writes ``describe_event`` lines to a stream (standard error by default)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream
        self._lock = _forksafe.lock(self, "_lock")

    def emit(self, event: Event) -> None:
        """Write the event's one line (``describe_event``): figures only, never a payload."""
        line = describe_event(event)
        stream = self._stream if self._stream is not None else sys.stderr
        with self._lock:
            stream.write(line + "\n")

    def attribution(self, record: AttributionRecord) -> None:
        """Write the request's attribution line (``describe_attribution``)."""
        line = describe_attribution(record)
        stream = self._stream if self._stream is not None else sys.stderr
        with self._lock:
            stream.write(line + "\n")

    def flush(self) -> None:
        """Flush the stream the lines go to."""
        stream = self._stream if self._stream is not None else sys.stderr
        stream.flush()
