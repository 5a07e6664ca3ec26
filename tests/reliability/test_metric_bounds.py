"""One bad figure never breaks metrics, and attacker-chosen model names never grow memory.

A measurement the OTLP encoder cannot carry (an integer beyond signed 64-bit) poisons the SDK's
cumulative state, so every later export failed; here it is dropped and counted before it
reaches an instrument, and later exports to a real loopback OTLP receiver still carry later
calls. Distinct (operation, provider, model) label sets are bounded; beyond the bound calls
land on the overflow model label and are counted.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    MetricsData,
    NumberDataPoint,
)
from opentelemetry.sdk.trace import TracerProvider

from spanledger import CallStarted, EmbeddingEvent, EmbeddingUsage, RerankEvent, RerankUsage
from spanledger.costs import CostLine, CostStatus
from spanledger.events import Event
from spanledger.exporters._otel_metrics import DEFAULT_LABEL_SETS, OVERFLOW_LABEL
from spanledger.exporters.otel import OtelExporter
from spanledger.exporters.pipelines import OtlpSettings, otel_pipeline

from ._exporter_receiver import OtlpSink, Point

STARTED_AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
SEARCH_UNITS = "spanledger.rerank.search_units"
DURATION = "gen_ai.client.operation.duration"
TOKENS = "gen_ai.client.token.usage"
COST = "spanledger.cost"
OVERFLOW_COUNTER = "spanledger.metrics.label_overflow"


def rerank(call_id: str, model: str, search_units: int) -> RerankEvent:
    return RerankEvent(
        call_id=call_id,
        provider="cohere",
        model=model,
        started_at=STARTED_AT,
        latency_ms=12.0,
        query_length=5,
        document_count=2,
        result_count=1,
        usage=RerankUsage(search_units=search_units),
    )


def unvalidated(event: Event, **changes: Any) -> Event:
    """``event`` with ``changes`` that validation would refuse (what a bug upstream could let
    through): built with ``model_construct``, nothing checked."""
    fields = {name: getattr(event, name) for name in type(event).model_fields}
    fields.update(changes)
    return type(event).model_construct(**fields)


def embedding(call_id: str, model: str = "embed-v4.0") -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=call_id,
        provider="cohere",
        model=model,
        started_at=STARTED_AT,
        latency_ms=8.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=3),
    )


BAD_FIGURES = {
    "search_units_2_63": lambda: unvalidated(
        rerank("bad", "bad-model", 1), usage=RerankUsage.model_construct(search_units=2**63)
    ),
    "input_tokens_2_64": lambda: unvalidated(
        embedding("bad", "bad-model"), usage=EmbeddingUsage.model_construct(input_tokens=2**64)
    ),
    "latency_nan": lambda: unvalidated(embedding("bad", "bad-model"), latency_ms=float("nan")),
    "latency_inf": lambda: unvalidated(embedding("bad", "bad-model"), latency_ms=float("inf")),
    "cost_beyond_float": lambda: unvalidated(
        embedding("bad", "bad-model"),
        cost=CostLine(status=CostStatus.PRICED, amount=Decimal("1e999"), currency="USD"),
    ),
}


@pytest.fixture
def sink() -> Iterator[OtlpSink]:
    with OtlpSink() as receiver:
        yield receiver


def otlp_exporter(sink: OtlpSink) -> OtelExporter:
    return otel_pipeline(
        otlp=OtlpSettings(
            traces_endpoint=f"{sink.url}/v1/traces", metrics_endpoint=f"{sink.url}/v1/metrics"
        ),
        prometheus=None,
        service_name="metric-bounds",
        capture_payload=False,
    )


def points_of(export: list[Point], metric: str, model: str) -> list[Point]:
    return [
        p
        for p in export
        if p.metric == metric and p.attributes.get("gen_ai.request.model") == model
    ]


@pytest.mark.parametrize("bad", list(BAD_FIGURES), ids=list(BAD_FIGURES))
def test_a_figure_no_instrument_can_carry_never_breaks_later_exports(
    sink: OtlpSink, bad: str
) -> None:
    exporter = otlp_exporter(sink)
    try:
        exporter.emit(rerank("before", "steady-model", 3))
        exporter.flush(timeout=5)
        exporter.emit(BAD_FIGURES[bad]())
        exporter.flush(timeout=5)
        exporter.emit(rerank("after", "later-model", 5))
        exporter.emit(embedding("after-embedding", "later-model"))
        exporter.flush(timeout=5)
    finally:
        exporter.shutdown(timeout=5)

    delivery = exporter.metric_delivery
    assert delivery is not None
    assert delivery.failed == 0, delivery
    assert delivery.exported == delivery.produced > 0
    assert exporter.metric_failures == 1
    last = sink.metric_exports[-1]
    (units,) = points_of(last, SEARCH_UNITS, "later-model")
    assert units.value == 5
    (steady,) = points_of(last, SEARCH_UNITS, "steady-model")
    assert steady.value == 3
    assert sum(p.count or 0 for p in points_of(last, DURATION, "later-model")) == 2


def test_a_counter_total_that_would_pass_signed_64_bit_is_refused(sink: OtlpSink) -> None:
    exporter = otlp_exporter(sink)
    try:
        for number in range(3):
            exporter.emit(rerank(f"call-{number}", "huge-model", 2**62))
        exporter.emit(rerank("small", "huge-model", 1))
        exporter.flush(timeout=5)
    finally:
        exporter.shutdown(timeout=5)

    assert exporter.metric_failures == 2  # the second and third would overflow the total
    delivery = exporter.metric_delivery
    assert delivery is not None
    assert delivery.failed == 0
    (units,) = points_of(sink.metric_exports[-1], SEARCH_UNITS, "huge-model")
    assert units.value == 2**62 + 1


# --------------------------------------------------------------------------- label sets


def collect(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data: MetricsData | None = reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    if data is None:
        return found
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def in_memory_exporter(**options: Any) -> tuple[OtelExporter, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    exporter = OtelExporter(
        tracer_provider=TracerProvider(),  # no processor: spans are not what is measured
        meter_provider=MeterProvider(metric_readers=[reader]),
        **options,
    )
    return exporter, reader


TRACED_CALLS = 20_000
TRACED_GROWTH_LIMIT = 512 * 1024
"""Bytes that the last 20,000 of 50,000 distinct model names may add (unbounded, 50,000 names
grew memory by 25 MB; the SDK re-allocates some per-series lists at each collection)."""


def test_fifty_thousand_model_names_stay_within_the_label_set_bound() -> None:
    exporter, reader = in_memory_exporter()
    template = embedding("template")
    total = 50_000

    def call(number: int) -> None:
        exporter.emit(
            template.model_copy(update={"call_id": f"call-{number}", "model": f"m-{number:06d}"})
        )

    for number in range(total - TRACED_CALLS):
        call(number)
    collect(reader)
    gc.collect()
    tracemalloc.start()
    try:
        for number in range(total - TRACED_CALLS, total):
            call(number)
        collect(reader)  # what a collection returns is the caller's, not the exporter's
        gc.collect()
        grown, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    metrics = collect(reader)

    durations: list[HistogramDataPoint] = metrics[DURATION]
    models = {(point.attributes or {}).get("gen_ai.request.model") for point in durations}
    assert len(durations) == DEFAULT_LABEL_SETS + 1
    assert OVERFLOW_LABEL in models
    assert sum(point.count for point in durations) == total
    overflowed = total - DEFAULT_LABEL_SETS
    assert exporter.label_overflows == overflowed
    overflow_points: list[NumberDataPoint] = metrics[OVERFLOW_COUNTER]
    assert sum(point.value for point in overflow_points) == overflowed
    assert grown < TRACED_GROWTH_LIMIT, f"{grown} bytes"


def test_the_label_set_bound_is_configurable_and_checked() -> None:
    exporter, reader = in_memory_exporter(max_label_sets=3)
    for number in range(10):
        exporter.emit(rerank(f"call-{number}", f"model-{number}", 1))
    metrics = collect(reader)
    units: list[NumberDataPoint] = metrics[SEARCH_UNITS]
    by_model = {
        (point.attributes or {}).get("gen_ai.request.model"): point.value for point in units
    }
    assert by_model == {"model-0": 1, "model-1": 1, "model-2": 1, OVERFLOW_LABEL: 7}
    assert exporter.label_overflows == 7
    with pytest.raises(ValueError, match="max_label_sets"):
        OtelExporter(tracer_provider=TracerProvider(), enable_metrics=False, max_label_sets=0)


def test_distinct_span_openings_are_not_all_kept() -> None:
    exporter, _ = in_memory_exporter(enable_metrics=False)
    for number in range(3_000):
        started = CallStarted(
            call_id=f"call-{number}",
            operation="embeddings",
            provider="cohere",
            model=f"model-{number}",
            started_at=STARTED_AT,
        )
        exporter.call_started(started)
        exporter.emit(embedding(f"call-{number}", f"model-{number}"))
    assert len(exporter._openings) <= 1024
    assert exporter._live == {}
