"""Counter figures are summed per label set when the queue drains, not recorded per call.

The reader must still see the same totals, and each counter's exemplar must still point at a
real call's span with that call's own figure (never at whatever span the collecting thread has
current).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from opentelemetry.sdk.metrics.export import Histogram, Sum
from opentelemetry.sdk.trace import ReadableSpan

from spanledger.costs import CostLine, CostStatus
from spanledger.exporters._otel_metrics import GenAIMetrics

from .conftest import OtelRig, rerank_event

COST = "spanledger.cost"
SEARCH_UNITS = "spanledger.rerank.search_units"


def priced(amount: str) -> CostLine:
    return CostLine(status=CostStatus.PRICED, amount=Decimal(amount), currency="USD")


def sum_points(rig: OtelRig, *names: str) -> list[Any]:
    """The one data point of each named counter, from one collection."""
    collected = rig.metrics()
    points = []
    for name in names:
        data = collected[name].data
        assert isinstance(data, Sum)
        (point,) = data.data_points
        points.append(point)
    return points


def spans_by_call(rig: OtelRig) -> dict[str, ReadableSpan]:
    return {str((span.attributes or {})["spanledger.call_id"]): span for span in rig.call_spans()}


def test_counter_totals_are_the_sum_of_the_calls_with_one_exemplar_of_a_real_call(
    otel: OtelRig,
) -> None:
    amounts = {"call-1": "0.25", "call-2": "0.5", "call-3": "2"}
    for call_id, amount in amounts.items():
        otel.exporter.emit(rerank_event(call_id=call_id, cost=priced(amount)))

    point, units = sum_points(otel, COST, SEARCH_UNITS)
    assert point.value == pytest.approx(2.75)
    (exemplar,) = point.exemplars
    span = spans_by_call(otel)["call-3"]
    assert (exemplar.trace_id, exemplar.span_id) == (span.context.trace_id, span.context.span_id)
    assert exemplar.value == pytest.approx(2.0)  # that call's own figure, not the sum

    assert units.value == 3
    (exemplar,) = units.exemplars
    assert exemplar.value == 1
    assert exemplar.span_id == span.context.span_id


def test_a_counter_records_once_or_twice_per_label_set_per_drain(
    otel: OtelRig, monkeypatch: pytest.MonkeyPatch
) -> None:
    metrics = otel.exporter._metrics
    assert isinstance(metrics, GenAIMetrics)
    adds: list[float] = []
    real_add = metrics.cost.add

    def counted_add(amount: float, *args: Any, **kwargs: Any) -> None:
        adds.append(amount)
        real_add(amount, *args, **kwargs)

    monkeypatch.setattr(metrics.cost, "add", counted_add)
    for number in range(20):
        otel.exporter.emit(rerank_event(call_id=f"call-{number}", cost=priced("0.5")))
    assert sum_points(otel, COST)[0].value == pytest.approx(10.0)
    assert sorted(adds) == [0.5, 9.5]


def test_the_rest_of_a_sum_never_takes_the_collecting_threads_span_as_exemplar(
    otel: OtelRig,
) -> None:
    for number in range(3):
        otel.exporter.emit(rerank_event(call_id=f"call-{number}", cost=priced("1")))
    tracer = otel.tracer_provider.get_tracer("application")
    with tracer.start_as_current_span("collecting") as collecting:
        (point,) = sum_points(otel, COST)
    (exemplar,) = point.exemplars
    assert exemplar.span_id != collecting.get_span_context().span_id
    assert exemplar.span_id == spans_by_call(otel)["call-2"].context.span_id


def test_figures_with_no_span_leave_no_exemplar_even_inside_an_application_span(
    otel: OtelRig,
) -> None:
    metrics = otel.exporter._metrics
    assert isinstance(metrics, GenAIMetrics)
    for number in range(2):
        metrics.take(rerank_event(call_id=f"call-{number}", cost=priced("1")), None)
    tracer = otel.tracer_provider.get_tracer("application")
    with tracer.start_as_current_span("collecting"):
        (point,) = sum_points(otel, COST)
    assert point.value == pytest.approx(2.0)
    assert not point.exemplars


def test_a_duration_with_no_span_leaves_no_exemplar_inside_an_application_span(
    otel: OtelRig,
) -> None:
    metrics = otel.exporter._metrics
    assert isinstance(metrics, GenAIMetrics)
    metrics.take(rerank_event(), None)
    tracer = otel.tracer_provider.get_tracer("application")
    with tracer.start_as_current_span("collecting"):
        data = otel.metrics()["gen_ai.client.operation.duration"].data
    assert isinstance(data, Histogram)
    (point,) = data.data_points
    assert point.count == 1
    assert not point.exemplars
