"""Counting what a backend exporter lost, so a down or slow backend is visible, not silent."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

__all__ = ["CountingSpanExporter", "DeliveryStats"]

_log = structlog.get_logger("spanledger.exporters")


@dataclass(frozen=True)
class DeliveryStats:
    """Spans handed to a backend: accepted, and lost to failed or refused exports."""

    backend: str
    exported: int
    failed: int


class CountingSpanExporter(SpanExporter):
    """Wraps a span exporter and counts spans exported and lost (failed or raised).

    The first loss of each kind is logged once, without the exception message.
    """

    def __init__(self, inner: SpanExporter, backend: str) -> None:
        self.inner = inner
        self.backend = backend
        self._exported = 0
        self._failed = 0
        self._logged = False
        self._lock = threading.Lock()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            result = self.inner.export(spans)
        except Exception as exc:
            self._lost(len(spans), type(exc).__name__)
            return SpanExportResult.FAILURE
        if result is SpanExportResult.SUCCESS:
            with self._lock:
                self._exported += len(spans)
        else:
            self._lost(len(spans), "export_failed")
        return result

    def _lost(self, count: int, reason: str) -> None:
        with self._lock:
            self._failed += count
            first = not self._logged
            self._logged = True
        if first:
            with contextlib.suppress(Exception):
                _log.warning("spans_lost", backend=self.backend, reason=reason, count=count)

    @property
    def stats(self) -> DeliveryStats:
        with self._lock:
            return DeliveryStats(self.backend, self._exported, self._failed)

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return self.inner.force_flush(timeout_millis)
