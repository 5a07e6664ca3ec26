"""OtelExporter metrics: GenAI duration and token histograms, search units, semconv switch."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from opentelemetry.sdk.metrics.export import Histogram, HistogramDataPoint, Metric, Sum

import spanledger
from spanledger import ProviderError
from spanledger.events import EmbeddingEvent, RerankEvent
from spanledger.exporters.otel import DURATION_BUCKETS

from .conftest import OtelRig, Providers, embedding_event

DURATION = "gen_ai.client.operation.duration"
TOKENS = "gen_ai.client.token.usage"
SEARCH_UNITS = "spanledger.rerank.search_units"
EMBEDDINGS_DURATION = "gen_ai.client.embeddings.duration"
EMBEDDINGS_TOKENS = "gen_ai.client.embeddings.operation.input_tokens"


def histogram_points(metric: Metric) -> list[HistogramDataPoint]:
    assert isinstance(metric.data, Histogram), metric.name
    return list(metric.data.data_points)


def points_by_operation(metric: Metric, operation: str) -> list[HistogramDataPoint]:
    return [
        point
        for point in histogram_points(metric)
        if (point.attributes or {}).get("gen_ai.operation.name") == operation
    ]


def test_duration_is_recorded_for_every_call_with_error_type_on_failures(
    otel: OtelRig, providers: Providers
) -> None:
    providers.embedder("cohere", "slow-200", otel.recorder).embed(["a"])
    providers.reranker("cohere", "rerank-v3.5", otel.recorder).rerank("q", ["a", "b"])
    with pytest.raises(ProviderError):
        providers.embedder("cohere", "fail-503", otel.recorder).embed(["a"])

    duration = otel.metrics()[DURATION]
    assert duration.unit == "s"
    points = {
        (point.attributes or {})["gen_ai.request.model"]: point
        for point in histogram_points(duration)
    }
    assert set(points) == {"slow-200", "rerank-v3.5", "fail-503"}
    assert all(point.count == 1 for point in points.values())
    slow = points["slow-200"]
    assert 0.2 <= slow.sum < 5.0  # seconds, not milliseconds
    assert "error.type" not in (slow.attributes or {})
    assert "error.type" not in (points["rerank-v3.5"].attributes or {})
    failed = dict(points["fail-503"].attributes or {})
    assert failed["error.type"] == "provider_unavailable"
    assert failed["gen_ai.operation.name"] == "embeddings"
    assert failed["gen_ai.provider.name"] == "cohere"


def test_duration_buckets_are_the_published_boundaries(otel: OtelRig) -> None:
    otel.exporter.emit(embedding_event(latency_ms=30.0))

    (point,) = histogram_points(otel.metrics()[DURATION])
    assert tuple(point.explicit_bounds) == DURATION_BUCKETS
    # 30 ms lands in the (0.02, 0.04] bucket
    assert point.bucket_counts[DURATION_BUCKETS.index(0.04)] == 1
    assert point.sum == pytest.approx(0.03)


def test_duration_of_a_hand_built_event_is_its_latency(otel: OtelRig) -> None:
    otel.exporter.emit(embedding_event(latency_ms=1234.0))

    (point,) = histogram_points(otel.metrics()[DURATION])
    assert point.sum == pytest.approx(1.234)
    assert point.count == 1


def test_token_usage_is_recorded_only_when_reported(otel: OtelRig, providers: Providers) -> None:
    providers.embedder("cohere", "embed-v4.0", otel.recorder).embed(["hello world"])
    providers.embedder("tei", "bge", otel.recorder).embed(["hello world"])
    providers.embedder("cohere", "usage-missing", otel.recorder).embed(["hello world"])

    reported = otel.events[0]
    assert isinstance(reported, EmbeddingEvent)
    assert reported.usage is not None
    tokens = otel.metrics()[TOKENS]
    assert tokens.unit == "{token}"
    (point,) = histogram_points(tokens)
    attributes = dict(point.attributes or {})
    assert attributes["gen_ai.token.type"] == "input"
    assert attributes["gen_ai.request.model"] == "embed-v4.0"
    assert attributes["gen_ai.operation.name"] == "embeddings"
    assert point.sum == reported.usage.input_tokens
    assert point.count == 1
    # every call still has its duration
    assert sum(point.count for point in histogram_points(otel.metrics()[DURATION])) == 3


def test_no_token_metric_at_all_when_nothing_was_reported(
    otel: OtelRig, providers: Providers
) -> None:
    providers.embedder("tei", "bge", otel.recorder).embed(["hello world"])
    with pytest.raises(ProviderError):
        providers.embedder("cohere", "fail-429", otel.recorder).embed(["a"])

    metrics = otel.metrics()
    assert DURATION in metrics
    assert TOKENS not in metrics or not histogram_points(metrics[TOKENS])


def test_cohere_rerank_counts_search_units(otel: OtelRig, providers: Providers) -> None:
    reranker = providers.reranker("cohere", "rerank-v3.5", otel.recorder)
    reranker.rerank("q", ["a", "b"])
    reranker.rerank("q", ["c", "d"])

    search_units = otel.metrics()[SEARCH_UNITS]
    assert isinstance(search_units.data, Sum)
    assert search_units.data.is_monotonic
    (point,) = search_units.data.data_points
    assert point.value == 2
    assert (point.attributes or {})["gen_ai.provider.name"] == "cohere"
    # Cohere bills no tokens for rerank
    assert TOKENS not in otel.metrics() or not histogram_points(otel.metrics()[TOKENS])


def test_token_billed_rerank_records_input_tokens_not_search_units(
    otel: OtelRig, providers: Providers
) -> None:
    providers.reranker("jina", "jina-reranker-v2", otel.recorder).rerank("q", ["a", "b"])

    (event,) = otel.events
    assert isinstance(event, RerankEvent)
    assert event.usage is not None
    assert event.usage.input_tokens is not None
    metrics = otel.metrics()
    (point,) = points_by_operation(metrics[TOKENS], "rerank")
    assert point.sum == event.usage.input_tokens
    assert (point.attributes or {})["gen_ai.token.type"] == "input"
    assert SEARCH_UNITS not in metrics or not list(metrics[SEARCH_UNITS].data.data_points)


def test_metric_attributes_have_low_cardinality(otel: OtelRig, providers: Providers) -> None:
    with spanledger.request("r1"):
        embedder = providers.embedder("cohere", "embed-v4.0", otel.recorder)
        embedder.embed(["a"])
        embedder.embed(["b"])
        providers.reranker("cohere", "rerank-v3.5", otel.recorder).rerank("q", ["a"])
        with pytest.raises(ProviderError):
            providers.reranker("cohere", "fail-429", otel.recorder).rerank("q", ["a"])

    metrics = otel.metrics()
    assert {DURATION, TOKENS, SEARCH_UNITS} <= set(metrics)
    call_ids = {event.call_id for event in otel.events}
    for metric in metrics.values():
        for point in metric.data.data_points:
            attributes = dict(point.attributes or {})
            assert "server.port" not in attributes, metric.name
            assert "spanledger.call_id" not in attributes, metric.name
            assert "spanledger.request_id" not in attributes, metric.name
            assert not call_ids & {str(value) for value in attributes.values()}, metric.name
    # two calls on one model share a series: call identity does not split it
    (embeddings,) = points_by_operation(metrics[DURATION], "embeddings")
    assert embeddings.count == 2
    assert len(histogram_points(metrics[DURATION])) == 3


@pytest.mark.parametrize("opt_in", ["argument", "environment", "environment-list"])
def test_latest_semconv_moves_embeddings_to_their_own_instruments(
    make_otel: Callable[..., OtelRig],
    providers: Providers,
    monkeypatch: pytest.MonkeyPatch,
    opt_in: str,
) -> None:
    if opt_in == "argument":
        monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
        rig = make_otel(semconv_latest=True)
    else:
        value = "gen_ai_latest_experimental"
        if opt_in == "environment-list":
            value = "http, gen_ai_latest_experimental"
        monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", value)
        rig = make_otel(semconv_latest=None)
    providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(["hello world"])
    providers.reranker("jina", "jina-reranker-v2", rig.recorder).rerank("q", ["a", "b"])

    embedding, _rerank = rig.events
    assert isinstance(embedding, EmbeddingEvent)
    assert embedding.usage is not None
    metrics = rig.metrics()
    (embedding_duration,) = histogram_points(metrics[EMBEDDINGS_DURATION])
    assert metrics[EMBEDDINGS_DURATION].unit == "s"
    assert tuple(embedding_duration.explicit_bounds) == DURATION_BUCKETS
    (embedding_tokens,) = histogram_points(metrics[EMBEDDINGS_TOKENS])
    assert embedding_tokens.sum == embedding.usage.input_tokens
    # embeddings left the old instruments; reranks stayed on them
    assert points_by_operation(metrics[DURATION], "embeddings") == []
    assert len(points_by_operation(metrics[DURATION], "rerank")) == 1
    assert points_by_operation(metrics[TOKENS], "embeddings") == []
    assert len(points_by_operation(metrics[TOKENS], "rerank")) == 1


def test_explicit_semconv_argument_beats_the_environment(
    make_otel: Callable[..., OtelRig], providers: Providers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    rig = make_otel(semconv_latest=False)
    providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(["hello world"])

    metrics = rig.metrics()
    assert EMBEDDINGS_DURATION not in metrics
    assert len(points_by_operation(metrics[DURATION], "embeddings")) == 1


def test_default_semconv_without_opt_in(
    make_otel: Callable[..., OtelRig], providers: Providers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "http")
    rig = make_otel()
    providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(["hello world"])

    metrics = rig.metrics()
    assert EMBEDDINGS_DURATION not in metrics
    assert EMBEDDINGS_TOKENS not in metrics
    assert len(points_by_operation(metrics[DURATION], "embeddings")) == 1
    assert len(points_by_operation(metrics[TOKENS], "embeddings")) == 1


def test_metrics_disabled_records_nothing_but_spans_still_flow(
    make_otel: Callable[..., OtelRig], providers: Providers
) -> None:
    rig = make_otel(enable_metrics=False)
    providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(["a"])
    providers.reranker("cohere", "rerank-v3.5", rig.recorder).rerank("q", ["a"])

    assert rig.metrics() == {}
    assert len(rig.call_spans()) == 2
