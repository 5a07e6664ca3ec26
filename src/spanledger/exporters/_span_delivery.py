"""Span delivery for spanledger-owned pipelines: a counting batch processor, and the two
pieces that let a batch processor of someone else's (the langfuse SDK's) be counted too."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from opentelemetry.context import Context
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from spanledger import _forksafe
from spanledger.exporters._export_logs import Backend
from spanledger.exporters.delivery import ExportQueue, deadline_in

__all__ = ["CountingSpanProcessor", "QueueHandOff", "SpanTally"]


class CountingSpanProcessor(ExportQueue[ReadableSpan], SpanProcessor):
    """A batch span processor that counts every span: spanledger's replacement for the SDK's
    ``BatchSpanProcessor``, which drops on a full queue and at shutdown without counting.

    ``make_exporter`` builds the span exporter (again in a forked child, whose copy of the
    parent's would share its connections); ``target`` names the backend in what is logged.
    """

    def __init__(
        self,
        make_exporter: Callable[[], SpanExporter],
        *,
        backend: str,
        max_queue_size: int = 2048,
        max_batch_size: int = 512,
        schedule_delay: float = 1.0,
        shutdown_timeout: float = 5.0,
        target: Backend | None = None,
    ) -> None:
        self._make_exporter = make_exporter
        self._exporter: SpanExporter | None = make_exporter()
        self._shutdown_timeout = shutdown_timeout
        super().__init__(
            backend=backend,
            unit="spans",
            name=f"spans-{backend}",
            max_queue=max_queue_size,
            max_batch=max_batch_size,
            interval=schedule_delay,
            target=target,
        )

    def _renew_in_child(self) -> None:
        self._exporter = None

    def _send(self, batch: list[ReadableSpan]) -> str | None:
        exporter = self._exporter
        if exporter is None:
            exporter = self._exporter = self._make_exporter()
        result = exporter.export(batch)
        return None if result is SpanExportResult.SUCCESS else "export_failed"

    def _after_close(self) -> None:
        if self._exporter is not None:
            self._exporter.shutdown()

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        """Nothing to do when a span starts."""

    def on_end(self, span: ReadableSpan) -> None:
        """Queue a sampled span for export (the call path: no lock, no I/O)."""
        context = span.context
        if context is not None and context.trace_flags.sampled:
            self.put(span)

    def shutdown(self) -> None:
        """Close within the processor's shutdown timeout (the SDK passes none)."""
        self.close(time.monotonic() + self._shutdown_timeout)

    def force_flush(self, timeout_millis: int | None = None) -> bool:
        return self.flush(deadline_in(timeout_millis, self._shutdown_timeout))


class SpanTally(SpanProcessor):
    """Counts the sampled spans ended on a tracer provider: what a batch processor of someone
    else's (the langfuse SDK's) was given, so that what it loses still shows."""

    def __init__(self) -> None:
        self.count = 0
        self._lock = _forksafe.lock(self, "_lock")
        _forksafe.after_fork_in_child(self._forget_parent)

    def _forget_parent(self) -> None:
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        context = span.context
        if context is not None and context.trace_flags.sampled:
            with self._lock:
                self.count += 1


class QueueHandOff(SpanExporter):
    """A span exporter that moves each batch into a ``CountingSpanProcessor``'s queue at once:
    given to an SDK's own batch processor, it never keeps that processor waiting on the
    backend (the counting queue exports, counts, and is closed by its owner)."""

    def __init__(self, spans: CountingSpanProcessor) -> None:
        self._spans = spans

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self._spans.put_all(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """The counting queue is closed by its owner, within its deadline."""

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True
