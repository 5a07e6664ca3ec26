"""The context spend metric: each request counted once, from its last record, when it ends;
a record of no open request at once; an unknown spend counted as unknown, never as zero."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.trace import NoOpTracerProvider

import spanledger
from spanledger.attribution import Passage, RequestScope
from spanledger.events import AttributionRecord
from spanledger.exporters.otel import OtelExporter
from spanledger.ledger import PriceTable

SPEND = "spanledger.attribution.context_spend"
UNKNOWN = "spanledger.attribution.context_spend.unknown"
MOON = "The moon pulls the sea; the tides follow its pull."
CLOCK = "Clocks tick once every second."
RATES = PriceTable.from_dict(
    {"prices": [{"provider": "openai", "model": "gpt-4o", "input_per_mtok": "2.5"}]}
)


@dataclass
class Rig:
    exporter: OtelExporter
    reader: InMemoryMetricReader

    def points(self, name: str) -> dict[tuple[Any, ...], float]:
        data = self.reader.get_metrics_data()
        found: dict[tuple[Any, ...], float] = {}
        for resource in data.resource_metrics if data is not None else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        for point in metric.data.data_points:
                            key = tuple(sorted(map(str, (point.attributes or {}).values())))
                            found[key] = getattr(point, "value", 0.0)
        return found


@pytest.fixture(params=[True, False], ids=["request spans", "no request spans"])
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    exporter = OtelExporter(
        tracer_provider=NoOpTracerProvider(), meter_provider=meters, request_spans=request.param
    )
    yield Rig(exporter, reader)
    meters.shutdown()


def one_call(turn: RequestScope, tokens: int | None = 100) -> None:
    turn.context.served([Passage(MOON), Passage(CLOCK)], provider_id="kb")
    call = turn.context.prompted([MOON, CLOCK])  # 81 characters
    turn.context.answered(
        call, "x", cited=[MOON], input_tokens=tokens, provider="openai", model="gpt-4o"
    )


def test_a_request_reported_twice_is_counted_once_from_its_last_record(rig: Rig) -> None:
    recorder = spanledger.Recorder([rig.exporter], prices=RATES)
    with spanledger.use(recorder), spanledger.request("turn-1") as turn:
        one_call(turn)
        turn.report()
        assert rig.points(SPEND) == {}  # not before the request ends
        again = turn.context.prompted([MOON])
        turn.context.answered(again, "y", input_tokens=50, provider="openai", model="gpt-4o")
        last = turn.report().record()
    assert last.cited_context_spend is not None
    assert last.unused_context_spend is not None
    assert rig.points(SPEND) == {
        ("USD", "cited"): float(last.cited_context_spend),
        ("USD", "unused"): float(last.unused_context_spend),
    }


def test_a_record_of_no_open_request_is_counted_at_once(rig: Rig) -> None:
    with spanledger.use(spanledger.Recorder([], prices=RATES)), spanledger.request("t") as turn:
        one_call(turn)
        record = turn.report().record()
    rig.exporter.attribution(record)  # no request of that id is open here
    assert record.cited_context_spend is not None
    assert rig.points(SPEND)[("USD", "cited")] == float(record.cited_context_spend)


def test_an_unknown_spend_is_counted_as_unknown_and_adds_no_amount(rig: Rig) -> None:
    recorder = spanledger.Recorder([rig.exporter], prices=RATES)
    with spanledger.use(recorder), spanledger.request("turn-1") as turn:
        one_call(turn, tokens=None)
    assert rig.points(SPEND) == {}
    assert rig.points(UNKNOWN) == {(): 1}


def test_a_record_from_before_the_figures_counts_as_neither(rig: Rig) -> None:
    old = AttributionRecord(
        request_id="old", at=datetime(2026, 1, 1, tzinfo=UTC), frames_served=0,
        frames_rendered=0, frames_cited=0, rendered_tokens=0, cited_tokens=0,
        uncited_rendered_tokens=0, reconcilable=True, calls=0, billed_input_tokens=0,
        billed_search_units=0, calls_without_usage=0, spend=Decimal(0), spend_complete=True,
    )  # fmt: skip
    rig.exporter.attribution(old)
    assert rig.points(SPEND) == {}
    assert rig.points(UNKNOWN) == {}
