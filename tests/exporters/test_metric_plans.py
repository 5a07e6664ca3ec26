"""A call's metric labels and attributes are worked out once per (operation, provider, model,
error) and reused; what each call records stays its own.

The reuse must not hide a call beyond the label-set bound (each one is counted, however often
its model repeats), nor mix a failure's labels with a success's of the same model.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from spanledger.exporters._otel_metrics import OVERFLOW_LABEL
from spanledger.exporters.otel import OtelExporter

from .conftest import embedding_event, embedding_failed_event

DURATION = "gen_ai.client.operation.duration"
TOKENS = "gen_ai.client.token.usage"
OVERFLOW_COUNTER = "spanledger.metrics.label_overflow"


def exporter_and_reader(**settings: Any) -> tuple[OtelExporter, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    exporter = OtelExporter(
        tracer_provider=TracerProvider(),
        meter_provider=MeterProvider(metric_readers=[reader]),
        **settings,
    )
    return exporter, reader


def points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        metric.name: list(metric.data.data_points)
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
    }


def test_every_call_beyond_the_bound_is_counted_when_its_model_repeats() -> None:
    exporter, reader = exporter_and_reader(max_label_sets=1)
    exporter.emit(embedding_event(call_id="call-kept", model="model-a"))
    for number in range(3):
        exporter.emit(embedding_event(call_id=f"call-{number}", model="model-b"))
    got = points(reader)

    assert exporter.label_overflows == 3
    assert sum(point.value for point in got[OVERFLOW_COUNTER]) == 3
    by_model = {point.attributes["gen_ai.request.model"]: point.count for point in got[DURATION]}
    assert by_model == {"model-a": 1, OVERFLOW_LABEL: 3}

    for number in range(2):  # and in the next collection too
        exporter.emit(embedding_event(call_id=f"call-later-{number}", model="model-b"))
    assert sum(point.value for point in points(reader)[OVERFLOW_COUNTER]) == 5
    assert exporter.label_overflows == 5


def test_a_failure_and_a_success_of_one_model_keep_their_own_labels() -> None:
    exporter, reader = exporter_and_reader()
    model = {"provider": "openai", "model": "text-embedding-3-small"}
    exporter.emit(embedding_event(call_id="call-ok-1", **model))
    exporter.emit(embedding_failed_event(call_id="call-failed", **model))
    exporter.emit(embedding_event(call_id="call-ok-2", **model))
    got = points(reader)

    by_error = {point.attributes.get("error.type"): point.count for point in got[DURATION]}
    assert by_error == {None: 2, "provider_unavailable": 1}
    (tokens,) = got[TOKENS]
    assert tokens.count == 2
    assert dict(tokens.attributes) == {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "text-embedding-3-small",
        "gen_ai.token.type": "input",
    }
