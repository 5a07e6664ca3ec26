"""What an in-process call's event says downstream: the counted usage on every surface, the
local billing priced (or not billed) by the ledger and the report alike, no payload by default."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from structlog.testing import capture_logs

import spanledger
from spanledger import EmbeddingEvent, Event, Recorder, RerankEvent
from spanledger.costs import CostCode, CostStatus
from spanledger.eventlog import read_events
from spanledger.exporters.jsonl import JsonlSink
from spanledger.exporters.langfuse import observation_fields
from spanledger.exporters.otel import OtelExporter
from spanledger.fleet.report import price_scan
from spanledger.fleet.scan import scan_logs
from spanledger.ledger import Ledger
from spanledger.ledger.prices import PriceTable, PriceTableError
from spanledger.ledger.pricing import compute_seconds

from .conftest import SENTINEL

TEXTS = [f"{SENTINEL} one", "ticks feed on blood", "the clock ticks"]


def _table(**rates: str) -> PriceTable:
    entries = [{"provider": "sentence_transformers", "model": "*", **rates}] if rates else []
    entries.append({"provider": "openai", "model": "text-embedding-3-small", "input_per_mtok": "1"})
    return PriceTable.from_dict({"currency": "USD", "prices": entries})


@pytest.fixture(scope="module")
def calls(embedder: Any, cross_encoder: Any) -> list[Any]:
    """Three real calls: two embeddings and a rerank, each with a sentinel in its text."""
    events: list[Event] = []
    with spanledger.use(Recorder([events.append])):
        spanledger.instrument(embedder)
        spanledger.instrument(cross_encoder)
        try:
            embedder.encode(TEXTS)
            embedder.encode(TEXTS[:1])
            cross_encoder.rank(SENTINEL, TEXTS)
        finally:
            spanledger.uninstrument(embedder)
            spanledger.uninstrument(cross_encoder)
    assert [type(e) for e in events] == [EmbeddingEvent, EmbeddingEvent, RerankEvent]
    return events


def test_without_an_entry_a_local_call_is_not_billed_and_never_unpriced(
    calls: list[Any],
) -> None:
    reader = InMemoryMetricReader()
    tracer_provider = TracerProvider()
    exporter = OtelExporter(
        tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])
    )
    seen: list[Event] = []
    with capture_logs() as logs:
        recorder = Recorder([exporter, seen.append], prices=_table())
        for event in calls:
            recorder.emit(event)
    tracer_provider.shutdown()
    for event in seen:
        assert event.cost is not None
        assert event.cost.status is CostStatus.NOT_BILLED
        assert event.cost.code is CostCode.LOCAL_MODEL
    data = reader.get_metrics_data()
    names = {
        metric.name
        for resource in (data.resource_metrics if data is not None else ())
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if any(getattr(point, "value", 0) for point in metric.data.data_points)
    }
    assert "spanledger.cost.unpriced" not in names
    assert not [log for log in logs if log.get("event") == "usage_not_priced"]


def test_a_per_token_rate_prices_the_counted_tokens(calls: list[Any]) -> None:
    ledger = Ledger(_table(input_per_mtok="2"))
    for event in calls:
        line = ledger.price(event)
        assert line.status is CostStatus.PRICED
        assert event.usage is not None
        assert event.usage.input_tokens
        assert line.amount == Decimal(2) * event.usage.input_tokens / Decimal(1_000_000)


def test_a_per_compute_second_rate_prices_the_latency(calls: list[Any]) -> None:
    ledger = Ledger(_table(per_compute_second="0.25"))
    for event in calls:
        line = ledger.price(event)
        assert line.status is CostStatus.PRICED
        seconds = compute_seconds(event.latency_ms)
        assert seconds > 0
        assert line.amount == Decimal("0.25") * seconds
        assert line.dimensions == {"compute_seconds": Decimal("0.25") * seconds}


def test_compute_and_tokens_together(calls: list[Any]) -> None:
    line = Ledger(_table(per_compute_second="1", input_per_mtok="1", per_request="0.5")).price(
        calls[0]
    )
    assert calls[0].usage is not None
    assert set(line.dimensions) == {"requests", "compute_seconds", "input_tokens"}
    assert line.amount == sum(line.dimensions.values())


def test_compute_prices_a_call_with_no_usage(calls: list[Any]) -> None:
    without = calls[0].model_copy(update={"usage": None, "usage_source": None})
    line = Ledger(_table(per_compute_second="1")).price(without)
    assert line.status is CostStatus.PRICED
    assert line.amount == compute_seconds(without.latency_ms)


def test_compute_seconds_are_whole_microseconds() -> None:
    assert compute_seconds(1.5) == Decimal("0.0015")
    assert compute_seconds(0.0009) == Decimal(0)
    assert compute_seconds(2.0000019) == Decimal("0.002000")


def test_the_rate_is_checked_like_every_rate() -> None:
    with pytest.raises(PriceTableError, match="per_compute_second"):
        _table(per_compute_second="-1")
    assert _table(per_compute_second="0.1").entries[0].per_compute_second == Decimal("0.1")


def test_the_report_agrees_with_the_ledger(calls: list[Any], tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    sink = JsonlSink(log)
    for event in calls:
        sink.emit(event)
    sink.shutdown()
    for rates in ({"per_compute_second": "0.3"}, {"input_per_mtok": "5"}, {}):
        ledger = Ledger(_table(**rates), warn=False)
        expected = sum((line.amount or Decimal(0) for line in map(ledger.price, calls)), Decimal(0))
        report = price_scan(scan_logs([log]), ("provider", "model"), ledger)
        total = sum((row.amount for row in report.rows.values()), Decimal(0))
        assert total == expected, rates
        statuses = {status for (_, status, _) in report.rows}
        assert statuses == ({"not_billed"} if not rates else {"priced"})


def test_the_counted_usage_is_said_on_every_surface(calls: list[Any], tmp_path: Path) -> None:
    event = calls[0]
    assert event.usage_source == "tokenizer"
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    Recorder([OtelExporter(tracer_provider=provider, enable_metrics=False)]).emit(event)
    (span,) = spans.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["spanledger.usage.source"] == "tokenizer"
    assert span.attributes["gen_ai.usage.input_tokens"] == event.usage.input_tokens
    assert observation_fields(event)["metadata"]["usage_source"] == "tokenizer"
    log = tmp_path / "round.jsonl"
    sink = JsonlSink(log)
    sink.emit(event)
    sink.shutdown()
    assert json.loads(log.read_text())["usage_source"] == "tokenizer"
    (back,) = read_events(log).events
    assert isinstance(back, EmbeddingEvent)
    assert back.usage_source == "tokenizer"
    fields = ("provider", "model", "billing", "usage", "input_count", "dimensions", "latency_ms")
    assert [getattr(back, name) for name in fields] == [getattr(event, name) for name in fields]


def test_an_event_that_does_not_say_writes_no_source(calls: list[Any]) -> None:
    unsaid = calls[0].model_copy(update={"usage_source": None})
    assert "usage_source" not in json.loads(unsaid.model_dump_json())


def test_the_parquet_export_has_the_source(calls: list[Any], tmp_path: Path) -> None:
    duckdb = pytest.importorskip("duckdb")
    from spanledger.fleet.export import export_parquet

    log = tmp_path / "events.jsonl"
    sink = JsonlSink(log)
    for event in calls:
        sink.emit(event)
    sink.shutdown()
    target = tmp_path / "parquet"
    export_parquet([log], target)
    rows = duckdb.sql(
        f"SELECT usage_source, input_tokens FROM read_parquet('{target}/events/**/*.parquet')"
    ).fetchall()
    assert sorted(rows) == sorted(("tokenizer", e.usage.input_tokens) for e in calls)


def test_no_text_leaves_by_default_and_only_when_opted_in(calls: list[Any]) -> None:
    for event in calls:
        assert SENTINEL not in event.model_dump_json()
        assert SENTINEL not in repr(event)
        assert SENTINEL not in json.dumps(observation_fields(event), default=str)
    for capture, present in ((False, False), (True, True)):
        spans = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(spans))
        exporter = OtelExporter(
            tracer_provider=provider, enable_metrics=False, capture_payload=capture
        )
        recorder = Recorder([exporter])
        for event in calls:
            recorder.emit(event)
        text = json.dumps([dict(span.attributes or {}) for span in spans.get_finished_spans()])
        assert (SENTINEL in text) is present


@pytest.fixture
def logged_lines() -> Iterator[list[Any]]:
    with capture_logs() as logs:
        yield logs


def test_a_failing_call_logs_and_raises_no_text(embedder: Any, logged_lines: list[Any]) -> None:
    events: list[Event] = []
    with spanledger.use(Recorder([events.append])):
        spanledger.instrument(embedder)
        with pytest.raises(ValueError, match="batch_size") as raised:
            embedder.encode([SENTINEL], batch_size=0)
    assert SENTINEL not in str(raised.value)
    (failed,) = events
    assert SENTINEL not in failed.model_dump_json()
    assert SENTINEL not in json.dumps(logged_lines, default=str)
