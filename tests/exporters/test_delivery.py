"""Every span and metric data point a counted pipeline produces is exported, failed, dropped or
pending, never silently gone; flushing and closing wait no longer than their deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

import pytest
import structlog
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, MetricsData
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF

from spanledger.exporters._lifecycle import call_within
from spanledger.exporters._metric_delivery import CountingMetricReader
from spanledger.exporters._span_delivery import CountingSpanProcessor
from spanledger.exporters.delivery import DeliveryStats

SECRET = "SENTINEL-payload-in-an-exception"


class Recording(SpanExporter):
    """Answers with ``result``; can be held (blocks until released) or made to raise."""

    def __init__(self, result: SpanExportResult = SpanExportResult.SUCCESS) -> None:
        self.result = result
        self.batches: list[int] = []
        self.hold = threading.Event()
        self.hold.set()
        self.entered = threading.Event()
        self.raises = False
        self.shut = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.hold.wait(10)
        if self.raises:
            raise RuntimeError(SECRET)
        self.batches.append(len(spans))
        return self.result

    def shutdown(self) -> None:
        self.shut = True


@pytest.fixture
def released() -> Iterator[list[Recording]]:
    """Exporters a test holds are released at its end, so no worker is left waiting."""
    held: list[Recording] = []
    yield held
    for exporter in held:
        exporter.hold.set()


def pipeline(
    exporter: Recording, **options: float | int
) -> tuple[CountingSpanProcessor, TracerProvider]:
    processor = CountingSpanProcessor(lambda: exporter, backend="test", **options)  # type: ignore[arg-type]
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(processor)
    return processor, provider


def make_spans(provider: TracerProvider, count: int) -> None:
    tracer = provider.get_tracer("test")
    for number in range(count):
        tracer.start_span(f"span-{number}").end()


def soon() -> float:
    return time.monotonic() + 5.0


def test_a_healthy_backend_gets_every_span_and_the_count_balances() -> None:
    exporter = Recording()
    processor, provider = pipeline(exporter, max_batch_size=7)
    make_spans(provider, 50)
    assert processor.flush(soon())
    assert sum(exporter.batches) == 50
    assert max(exporter.batches) <= 7
    assert processor.stats == DeliveryStats("test", 50, 0, produced=50)
    processor.close(soon())
    assert exporter.shut


def test_a_full_queue_counts_what_it_drops(released: list[Recording]) -> None:
    exporter = Recording()
    exporter.hold.clear()
    released.append(exporter)
    processor, provider = pipeline(exporter, max_queue_size=10, max_batch_size=4)
    make_spans(provider, 4)  # a full batch wakes the worker, which then waits on the backend
    assert exporter.entered.wait(5)
    make_spans(provider, 30)
    stats = processor.stats
    assert stats.produced == 34
    assert (stats.exported, stats.failed, stats.dropped, stats.pending) == (0, 0, 20, 14)
    assert stats.balanced

    exporter.hold.set()
    assert processor.flush(soon())
    stats = processor.stats
    assert (stats.exported, stats.dropped, stats.pending) == (14, 20, 0)
    assert stats.balanced


def test_refused_and_raising_exports_count_as_failed_and_log_no_message() -> None:
    exporter = Recording(SpanExportResult.FAILURE)
    processor, provider = pipeline(exporter)
    with structlog.testing.capture_logs() as logs:
        make_spans(provider, 3)
        processor.flush(soon())
        exporter.raises = True
        make_spans(provider, 2)
        processor.flush(soon())
        make_spans(provider, 2)
        processor.flush(soon())
    assert processor.stats == DeliveryStats("test", 0, 7, produced=7)
    reasons = [entry["reason"] for entry in logs if entry["event"] == "export_lost"]
    assert reasons == ["export_failed", "RuntimeError"]  # once per kind
    assert SECRET not in repr(logs)


def test_closing_against_a_backend_that_never_answers_is_bounded_and_counted(
    released: list[Recording],
) -> None:
    exporter = Recording()
    exporter.hold.clear()
    released.append(exporter)
    processor, provider = pipeline(exporter, max_batch_size=5)
    make_spans(provider, 5)
    assert exporter.entered.wait(5)
    make_spans(provider, 8)

    started = time.monotonic()
    assert not processor.flush(time.monotonic() + 0.2)
    processor.close(time.monotonic() + 0.3)
    assert time.monotonic() - started < 2.0
    assert processor.stats == DeliveryStats("test", 0, 0, produced=13, dropped=13)

    exporter.hold.set()  # the abandoned export ends after all: it was counted already
    time.sleep(0.1)
    make_spans(provider, 2)  # spans after the close are dropped, and counted
    assert processor.stats == DeliveryStats("test", 0, 0, produced=15, dropped=15)


def test_unsampled_spans_are_not_produced() -> None:
    exporter = Recording()
    processor = CountingSpanProcessor(lambda: exporter, backend="test")
    provider = TracerProvider(sampler=ALWAYS_OFF, shutdown_on_exit=False)
    provider.add_span_processor(processor)
    make_spans(provider, 3)
    assert processor.stats.produced == 0
    assert processor._worker is None  # nothing queued, so no thread either


def test_the_sdk_shutdown_and_flush_hooks_are_bounded(released: list[Recording]) -> None:
    exporter = Recording()
    exporter.hold.clear()
    released.append(exporter)
    processor, provider = pipeline(exporter, shutdown_timeout=0.3)
    make_spans(provider, 1)
    started = time.monotonic()
    assert not processor.force_flush(timeout_millis=200)
    provider.shutdown()
    assert time.monotonic() - started < 2.0
    assert processor.stats == DeliveryStats("test", 0, 0, produced=1, dropped=1)


# --------------------------------------------------------------------------- metrics


class Metrics(MetricExporter):
    def __init__(self, result: MetricExportResult) -> None:
        super().__init__()
        self.result = result
        self.hold = threading.Event()
        self.hold.set()
        self.points: list[int] = []

    def export(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: object
    ) -> MetricExportResult:
        self.hold.wait(10)
        self.points.append(
            sum(
                len(metric.data.data_points)
                for resource in metrics_data.resource_metrics
                for scope in resource.scope_metrics
                for metric in scope.metrics
            )
        )
        return self.result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return True

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: object) -> None:
        """Nothing to release."""


def metric_pipeline(exporter: Metrics) -> tuple[CountingMetricReader, MeterProvider]:
    reader = CountingMetricReader(exporter, backend="test", interval=60)
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    counter = provider.get_meter("test").create_counter("calls")
    for model in ("a", "b", "c"):
        counter.add(1, {"model": model})
    return reader, provider


def test_metric_data_points_are_counted_exported_and_failed() -> None:
    healthy, _ = metric_pipeline(Metrics(MetricExportResult.SUCCESS))
    assert healthy.flush(soon())
    assert healthy.stats == DeliveryStats(
        "test", 3, 0, produced=3, dropped=0, pending=0, unit="data points"
    )
    failing, _ = metric_pipeline(Metrics(MetricExportResult.FAILURE))
    failing.flush(soon())
    failing.flush(soon())
    assert failing.stats == DeliveryStats("test", 0, 6, produced=6, unit="data points")


def test_the_last_collection_is_dropped_and_counted_when_the_backend_hangs() -> None:
    exporter = Metrics(MetricExportResult.SUCCESS)
    exporter.hold.clear()
    reader, provider = metric_pipeline(exporter)
    try:
        started = time.monotonic()
        provider.shutdown(timeout_millis=300)
        assert time.monotonic() - started < 2.0
        assert reader.stats == DeliveryStats(
            "test", 0, 0, produced=3, dropped=3, unit="data points"
        )
    finally:
        exporter.hold.set()


def test_call_within_returns_at_the_deadline_and_reports_by_type() -> None:
    gate = threading.Event()
    started = time.monotonic()
    assert not call_within(lambda: gate.wait(10), 0.2, name="test-wait")
    assert time.monotonic() - started < 2.0
    gate.set()
    assert call_within(lambda: None, 1.0, name="test-quick")

    def broken() -> None:
        raise ValueError(SECRET)

    with structlog.testing.capture_logs() as logs:
        assert not call_within(broken, 1.0, name="test-broken")
    assert [entry["error_type"] for entry in logs] == ["ValueError"]
    assert SECRET not in repr(logs)
