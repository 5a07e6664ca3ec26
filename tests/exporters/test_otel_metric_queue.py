"""OtelExporter metrics are queued on the call path and recorded when the provider collects.

What a reader sees must be exactly what direct recording would have given it: every call that
finished before the collection, once, with exemplars pointing at the call's own span.
"""

from __future__ import annotations

import gc
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    Histogram,
    HistogramDataPoint,
    InMemoryMetricReader,
    MetricsData,
)
from opentelemetry.sdk.trace import TracerProvider

from spanledger import CallStarted, Recorder
from spanledger.exporters import _otel_metrics
from spanledger.exporters._otel_metrics import PENDING_LIMIT
from spanledger.exporters.otel import OtelExporter

from .conftest import STARTED_AT, OtelRig, Providers, embedding_event, rerank_event

DURATION = "gen_ai.client.operation.duration"


def duration_count(data: MetricsData | None) -> int:
    """Calls counted by the duration histogram in one collection (all attribute sets)."""
    if data is None:
        return 0
    total = 0
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == DURATION:
                    assert isinstance(metric.data, Histogram)
                    total += sum(point.count for point in metric.data.data_points)
    return total


def only_duration_point(rig: OtelRig) -> HistogramDataPoint:
    metric = rig.metrics()[DURATION]
    assert isinstance(metric.data, Histogram)
    (point,) = metric.data.data_points
    return point


def test_a_call_waits_in_the_queue_until_the_reader_collects(otel: OtelRig) -> None:
    otel.exporter.emit(embedding_event())
    assert otel.exporter.pending_metrics == 1

    assert only_duration_point(otel).count == 1
    assert otel.exporter.pending_metrics == 0


def test_every_call_before_a_collection_is_in_it_exactly_once(otel: OtelRig) -> None:
    for number in range(5):
        otel.exporter.emit(embedding_event(call_id=f"call-{number}"))
    assert only_duration_point(otel).count == 5
    # cumulative temporality: a second collection sees the same five, not ten
    assert only_duration_point(otel).count == 5


def test_the_queue_hook_reports_no_metric_of_its_own(otel: OtelRig) -> None:
    otel.exporter.emit(embedding_event())
    names = set(otel.metrics())
    assert DURATION in names
    assert not any(name.startswith("spanledger.metrics") for name in names)


def test_flush_records_the_queue_without_a_collection(otel: OtelRig) -> None:
    otel.exporter.emit(embedding_event())
    otel.exporter.flush()
    assert otel.exporter.pending_metrics == 0
    assert only_duration_point(otel).count == 1


def test_shutdown_of_an_owned_pipeline_records_the_queue_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    exporter = OtelExporter(
        tracer_provider=TracerProvider(), meter_provider=meter_provider, owned=True
    )
    exporter.emit(embedding_event())
    seen_at_shutdown: list[int] = []
    real_shutdown = meter_provider.shutdown

    def shutdown(*args: Any, **kwargs: Any) -> None:
        seen_at_shutdown.append(duration_count(reader.get_metrics_data()))
        real_shutdown(*args, **kwargs)

    monkeypatch.setattr(meter_provider, "shutdown", shutdown)
    exporter.shutdown()
    assert seen_at_shutdown == [1]
    assert exporter.pending_metrics == 0


def test_the_queue_is_bounded_and_loses_nothing_when_no_one_collects(
    otel: OtelRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_otel_metrics, "PENDING_LIMIT", 8)
    for number in range(20):
        otel.exporter.emit(embedding_event(call_id=f"call-{number}"))
        assert otel.exporter.pending_metrics <= 8
    assert otel.exporter.pending_metrics == 8
    assert only_duration_point(otel).count == 20


def test_the_default_bound_is_generous_but_finite() -> None:
    assert 1_000 <= PENDING_LIMIT <= 100_000


def test_calls_and_collections_on_many_threads_count_each_call_once(otel: OtelRig) -> None:
    threads, per_thread = 4, 300
    stop = threading.Event()

    def collect_repeatedly() -> None:
        while not stop.is_set():
            otel.reader.get_metrics_data()

    def emit_many(thread: int) -> None:
        for number in range(per_thread):
            otel.exporter.emit(embedding_event(call_id=f"call-{thread}-{number}"))

    collector = threading.Thread(target=collect_repeatedly)
    collector.start()
    workers = [threading.Thread(target=emit_many, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    stop.set()
    collector.join(timeout=60)
    assert not collector.is_alive()
    assert only_duration_point(otel).count == threads * per_thread


def test_a_failing_record_is_counted_and_the_rest_still_recorded(
    otel: OtelRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = otel.exporter._metrics
    assert metrics is not None
    real_record: Callable[..., None] = metrics._record
    seen: list[str] = []

    def record(*figures: Any) -> None:
        seen.append(figures[2])
        if figures[2] == "broken-model":
            raise RuntimeError("the SDK refused")
        real_record(*figures)

    monkeypatch.setattr(metrics, "_record", record)
    otel.exporter.emit(embedding_event(model="broken-model"))
    otel.exporter.emit(embedding_event(call_id="call-ok"))
    assert only_duration_point(otel).count == 1
    assert seen == ["broken-model", "text-embedding-3-small"]
    assert metrics.failures == 1


def test_exemplars_point_at_the_calls_own_span(otel: OtelRig, providers: Providers) -> None:
    providers.embedder("openai", "text-embedding-3-small", otel.recorder).embed(["a"])

    span = otel.only_span()
    point = only_duration_point(otel)
    assert point.exemplars, "a sampled call span should leave an exemplar on its duration"
    (exemplar,) = point.exemplars
    assert exemplar.span_id == span.context.span_id
    assert exemplar.trace_id == span.context.trace_id


def test_a_recorder_without_start_aware_sinks_skips_the_start_notice() -> None:
    events: list[object] = []
    assert Recorder([events.append]).wants_call_started is False
    exporter = OtelExporter(tracer_provider=TracerProvider(), enable_metrics=False)
    assert Recorder([events.append, exporter]).wants_call_started is True


def test_a_call_over_the_bound_never_waits_for_a_collection_in_progress(
    otel: OtelRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_otel_metrics, "PENDING_LIMIT", 2)
    metrics = otel.exporter._metrics
    assert metrics is not None
    emitted = threading.Event()

    def emit_over_the_bound() -> None:
        for number in range(5):
            otel.exporter.emit(embedding_event(call_id=f"call-{number}"))
        emitted.set()

    with metrics._drain_lock:  # a collection is busy recording the queue
        caller = threading.Thread(target=emit_over_the_bound)
        caller.start()
        assert emitted.wait(timeout=10), "a call blocked behind the collection"
        assert otel.exporter.pending_metrics == 5
    caller.join(timeout=10)
    assert only_duration_point(otel).count == 5


def test_a_queued_call_does_not_keep_its_span_alive(make_otel: Callable[..., OtelRig]) -> None:
    rig = make_otel()
    started = CallStarted(
        call_id="call-live",
        operation="embeddings",
        provider="openai",
        model="text-embedding-3-small",
        started_at=STARTED_AT,
        server_address="api.openai.com",
        server_port=443,
    )
    rig.exporter.call_started(started)
    span = rig.exporter._live["call-live"][0]
    alive = weakref.ref(span)
    del span
    rig.exporter.emit(embedding_event(call_id="call-live"))
    gc.collect()
    assert rig.exporter.pending_metrics == 1
    assert alive() is None, "the metric queue holds the span (and any payload on it)"


def test_exporters_sharing_a_meter_provider_are_all_collected() -> None:
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    tracer_provider = TracerProvider()
    first, second, latest = (
        OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider),
        OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider),
        OtelExporter(
            tracer_provider=tracer_provider, meter_provider=meter_provider, semconv_latest=True
        ),
    )
    first.emit(embedding_event(call_id="call-1"))
    second.emit(embedding_event(call_id="call-2"))
    second.emit(embedding_event(call_id="call-3"))
    latest.emit(rerank_event(call_id="call-4"))

    assert duration_count(reader.get_metrics_data()) == 4
    assert (first.pending_metrics, second.pending_metrics, latest.pending_metrics) == (0, 0, 0)


def test_a_drain_ends_even_while_calls_keep_coming(
    otel: OtelRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = otel.exporter._metrics
    assert metrics is not None
    for number in range(10):
        otel.exporter.emit(embedding_event(call_id=f"call-{number}"))
    real_record: Callable[..., None] = metrics._record

    arrived: list[object] = []

    def record_while_another_call_finishes(*figures: Any) -> None:
        real_record(*figures)
        if len(arrived) < 1_000:  # bounded, so a drain that never ends fails instead of hanging
            arrived.append(figures)
            metrics._pending.append(figures)

    monkeypatch.setattr(metrics, "_record", record_while_another_call_finishes)
    metrics.drain()
    assert otel.exporter.pending_metrics == 10  # the ten that arrived during the drain wait


def test_one_call_records_at_most_a_small_batch_of_the_backlog(
    otel: OtelRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_otel_metrics, "PENDING_LIMIT", 2)
    metrics = otel.exporter._metrics
    assert metrics is not None
    with metrics._drain_lock:  # a collection is busy while a backlog builds up
        for number in range(100):
            otel.exporter.emit(embedding_event(call_id=f"call-{number}"))
    assert otel.exporter.pending_metrics == 100
    otel.exporter.emit(embedding_event(call_id="call-next"))
    assert otel.exporter.pending_metrics == 101 - 64


def test_a_forked_child_does_not_inherit_the_parents_queue(otel: OtelRig) -> None:
    for number in range(3):
        otel.exporter.emit(embedding_event(call_id=f"call-{number}"))
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its queue and leave at once
        os.write(write_end, str(otel.exporter.pending_metrics).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        seen_in_child = int(pipe.read().decode())
    os.waitpid(pid, 0)
    assert seen_in_child == 0
    assert otel.exporter.pending_metrics == 3
    assert only_duration_point(otel).count == 3
