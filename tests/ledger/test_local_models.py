"""Calls on a local model (``billing == "local"``, Ollama): no vendor bills them. Without a price
entry the line is ``not_billed`` with code ``local_model``; with the user's own entry it is
priced from the reported usage; it is never unpriced or unmetered, so never warned about,
counted as unpriced usage or alerted on."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from structlog.testing import capture_logs

from spanledger import Recorder
from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.errors import ErrorCategory
from spanledger.events import EmbeddingUsage, Event, RerankUsage
from spanledger.exporters.otel import OtelExporter
from spanledger.ledger import Ledger
from spanledger.ledger.report import build_spend_report
from tests.ledger.conftest import (
    embedding_event,
    embedding_failed_event,
    entry,
    rerank_event,
    rerank_failed_event,
    table,
)

NO_ENTRY = table(entry("openai", "text-embedding-3-small", input_per_mtok="0.02"))
OWN_RATE = table(entry("ollama", "*", input_per_mtok="0.5"))


def local_embedding(tokens: int | None = 1000, **overrides: Any) -> Event:
    fields: dict[str, Any] = {"billing": "local", **overrides}
    return embedding_event("nomic-embed-text", provider="ollama", tokens=tokens, **fields)


def assert_local_not_billed(line: CostLine) -> None:
    assert line.status is CostStatus.NOT_BILLED
    assert line.code is CostCode.LOCAL_MODEL
    assert line.amount == Decimal(0)
    assert "no vendor bills a local model" in (line.reason or "")


LOCAL_EVENTS = {
    "embedding": local_embedding(),
    "embedding without usage": local_embedding(tokens=None),
    "embedding with malformed usage": local_embedding(None, malformed_usage=("input_tokens",)),
    "rerank": rerank_event(
        "bge-reranker", provider="ollama", usage=RerankUsage(input_tokens=40), billing="local"
    ),
    "rerank without usage": rerank_event("bge-reranker", provider="ollama", billing="local"),
    "abandoned embedding": embedding_failed_event(
        "nomic-embed-text", provider="ollama", billing="local", error_type="ReadTimeout"
    ),
    "abandoned rerank": rerank_failed_event(
        "bge-reranker", provider="ollama", billing="local", error_type="ReadTimeout"
    ),
    "unreadable answer": embedding_failed_event(
        "nomic-embed-text",
        provider="ollama",
        billing="local",
        category=ErrorCategory.INVALID_RESPONSE,
        error_type="bad_vector",
        status_code=200,
    ),
}


@pytest.mark.parametrize("event", LOCAL_EVENTS.values(), ids=LOCAL_EVENTS.keys())
def test_without_a_price_entry_a_local_call_is_not_billed(event: Event) -> None:
    line = Ledger(NO_ENTRY).price(event)
    assert_local_not_billed(line)


def test_the_same_call_off_a_local_model_is_unpriced() -> None:
    # the control: what billing == "local" changes
    line = Ledger(NO_ENTRY, warn=False).price(local_embedding(billing=None))
    assert line.status is CostStatus.UNPRICED
    assert line.code is CostCode.NO_PRICE_ENTRY


def test_a_local_call_refused_before_sending_stays_a_failed_unbilled_one() -> None:
    event = embedding_failed_event("nomic-embed-text", provider="ollama", billing="local")
    line = Ledger(NO_ENTRY).price(event)
    assert line.status is CostStatus.NOT_BILLED
    assert line.code is CostCode.FAILED_UNBILLED


def test_with_the_users_own_entry_a_local_call_is_priced_from_its_reported_tokens() -> None:
    line = Ledger(OWN_RATE).price(local_embedding(tokens=2000))
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal("0.001")
    assert line.price_entry == "ollama/*"
    assert line.code is None


@pytest.mark.parametrize(
    "event",
    [
        local_embedding(tokens=None),
        local_embedding(None, malformed_usage=("input_tokens",)),
        rerank_event("bge-reranker", provider="ollama", billing="local"),
    ],
    ids=["not reported", "malformed", "rerank"],
)
def test_a_users_rate_without_reported_usage_is_not_billed_never_unmetered(event: Event) -> None:
    line = Ledger(OWN_RATE).price(event)
    assert_local_not_billed(line)
    assert "could not be applied because no usage was reported" in (line.reason or "")
    assert line.price_entry == "ollama/*"


def test_a_users_entry_that_cannot_price_the_call_is_not_billed_with_its_reason() -> None:
    prices = table(entry("ollama", "*", per_search_unit="1"))  # no token rate
    line = Ledger(prices).price(local_embedding(tokens=10))
    assert_local_not_billed(line)
    assert "input_per_mtok" in (line.reason or "")


def test_a_local_call_is_never_warned_about() -> None:
    with capture_logs() as logs:
        for ledger in (Ledger(NO_ENTRY), Ledger(OWN_RATE)):
            for event in LOCAL_EVENTS.values():
                ledger.price(event)
        Ledger(NO_ENTRY).price(local_embedding(billing=None))  # the control warns
    warned = [log for log in logs if log.get("event") == "usage_not_priced"]
    assert [(w["provider"], w["model"], w["status"]) for w in warned] == [
        ("ollama", "nomic-embed-text", "unpriced")
    ]


@pytest.fixture
def metrics() -> Iterator[tuple[Recorder, InMemoryMetricReader]]:
    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    exporter = OtelExporter(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    yield Recorder([exporter], prices=NO_ENTRY), reader
    tracer_provider.shutdown()


def unpriced_points(reader: InMemoryMetricReader) -> list[dict[str, object]]:
    data = reader.get_metrics_data()
    points: list[dict[str, object]] = []
    for resource in data.resource_metrics if data is not None else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "spanledger.cost.unpriced":
                    points.extend(
                        dict(point.attributes or {})
                        for point in metric.data.data_points
                        if getattr(point, "value", 0)
                    )
    return points


def test_a_local_call_never_counts_as_unpriced_usage(
    metrics: tuple[Recorder, InMemoryMetricReader],
) -> None:
    recorder, reader = metrics
    for event in LOCAL_EVENTS.values():
        recorder.emit(event)
    assert unpriced_points(reader) == []

    recorder.emit(local_embedding(billing=None))  # the control is counted
    assert [point["gen_ai.provider.name"] for point in unpriced_points(reader)] == ["ollama"]


def test_a_log_of_local_calls_without_cost_lines_reports_them_not_billed() -> None:
    report = build_spend_report(LOCAL_EVENTS.values()).to_json()
    assert report["unpriced_models"] == []
    assert report["status_counts"]["not_billed"] == len(LOCAL_EVENTS)


def test_a_local_calls_reported_usage_is_kept_as_reported() -> None:
    event = local_embedding(tokens=5)
    seen: list[Event] = []
    Recorder([seen.append], prices=NO_ENTRY).emit(event)
    [kept] = seen
    assert kept.usage == EmbeddingUsage(input_tokens=5)  # type: ignore[union-attr]
    assert kept.cost is not None
    assert_local_not_billed(kept.cost)
