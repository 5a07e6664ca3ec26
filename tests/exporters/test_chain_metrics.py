"""Chain outcomes are counted at collection: a forked child counts its own chains, not the
ones its parent ran before the fork."""

from __future__ import annotations

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from spanledger.exporters._otel_metrics import GenAIMetrics
from tests.forking import fork, outcome, timed


def _counted(reader: InMemoryMetricReader) -> dict[str, int]:
    data = reader.get_metrics_data()
    assert data is not None
    return {
        str(point.attributes["spanledger.chain.status"]): int(point.value)  # type: ignore[union-attr]
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == "spanledger.rerank_chain.outcomes"
        for point in metric.data.data_points
        if point.attributes is not None
    }


def test_a_forked_child_starts_counting_chains_from_zero() -> None:
    reader = InMemoryMetricReader()
    metrics = GenAIMetrics(MeterProvider(metric_readers=[reader]).get_meter("t"), latest=False)
    metrics.chain_ended("ok")
    metrics.chain_ended("ok")
    metrics.chain_ended("degraded")
    assert _counted(reader) == {"ok": 2, "degraded": 1}

    def child() -> int:
        metrics.chain_ended("aborted")
        return 0 if metrics._chain_totals == {"aborted": 1} else 1

    assert outcome(fork(timed(3.0, child))) == 0
    assert _counted(reader) == {"ok": 2, "degraded": 1}
