"""spanledger beside each peer instrumentation (``tests/instrument/peers.py``), in every order of
switching the two on and off, with the application's own global tracer and meter providers set
first, against the loopback stand-in.

While both are on: each call's result is what it is bare; spanledger records exactly one event
and one span per call, in the application's trace, and one metric point per call; the peer's
spans are the ones it makes alone, each under the parent it has alone (spanledger's span may
stand between, where spanledger's wrapper runs outside the peer's); nothing raises or is logged
as a failure. Once either is off, the other still records as it does alone, and once both are
off nothing of spanledger's remains in the calls.

A peer keeps running after its own ``uninstrument()`` in two cases, both the peer's own unwrap
rule: OpenLLMetry's openai instrumentor never takes its wrappers off (it names them in a form
OpenTelemetry's ``unwrap`` cannot find), and a peer switched on before spanledger on the very
class attribute the switch replaces cannot take its wrapper out from under spanledger's
(``unwrap`` takes off only a wrapt wrapper on top). The peer's alone-run tells the first; the
second is asserted as the rule it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import opentelemetry.trace as trace_api
import pytest
from opentelemetry import metrics
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

import spanledger
from spanledger import Recorder
from spanledger.exporters.otel import OtelExporter
from spanledger.testing import StandIn
from tests.instrument.conftest import Tape
from tests.instrument.peers import PEERS, Peer, classes_put_back

ROOT = "request"
OURS = "spanledger"
DURATION = "gen_ai.client.operation.duration"
ORDERS = {
    "peer-on-first/peer-off-first": ("peer", "peer"),
    "peer-on-first/ours-off-first": ("peer", "ours"),
    "ours-on-first/peer-off-first": ("ours", "peer"),
    "ours-on-first/ours-off-first": ("ours", "ours"),
}
Shape = list[tuple[str, str]]
"""A peer's spans: each one's name and the name of its nearest ancestor not spanledger's."""


@dataclass
class App:
    """The application's global providers, and what they received."""

    tracer_provider: TracerProvider
    spans: InMemorySpanExporter
    meter_provider: MeterProvider
    reader: InMemoryMetricReader

    def run(self, work: Callable[[], list[Any]]) -> tuple[list[Any], list[ReadableSpan]]:
        """``work`` inside the application's request span; its results and the spans made."""
        self.spans.clear()
        with trace_api.get_tracer("app").start_as_current_span(ROOT):
            results = work()
        return results, list(self.spans.get_finished_spans())

    def points(self) -> list[HistogramDataPoint]:
        """spanledger's duration points, after checking its meter reported once."""
        data = self.reader.get_metrics_data()
        scopes = [
            scope
            for resource in (data.resource_metrics if data is not None else [])
            for scope in resource.scope_metrics
            if scope.scope.name == OURS
        ]
        if not scopes:
            return []
        [scope] = scopes
        names = [metric.name for metric in scope.metrics]
        assert len(names) == len(set(names)), names
        return [
            point
            for metric in scope.metrics
            if metric.name == DURATION
            for point in metric.data.data_points
            if isinstance(point, HistogramDataPoint)
        ]


@pytest.fixture
def app() -> Iterator[App]:
    """The application set its own global tracer and meter providers before anything else;
    the process's globals are put back afterwards."""
    saved = (
        trace_api._TRACER_PROVIDER,
        trace_api._TRACER_PROVIDER_SET_ONCE,
        metrics_internal._METER_PROVIDER,
        metrics_internal._METER_PROVIDER_SET_ONCE,
    )
    trace_api._TRACER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    trace_api.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(meter_provider)
    try:
        yield App(tracer_provider, spans, meter_provider, reader)
    finally:
        (
            trace_api._TRACER_PROVIDER,
            trace_api._TRACER_PROVIDER_SET_ONCE,
            metrics_internal._METER_PROVIDER,
            metrics_internal._METER_PROVIDER_SET_ONCE,
        ) = saved
        tracer_provider.shutdown()
        meter_provider.shutdown()


@pytest.fixture
def clean() -> Iterator[None]:
    """Every class method as it was before the test, whatever a peer left behind."""
    with classes_put_back():
        yield


def ours(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [span for span in spans if _scope(span) == OURS]


def theirs(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    return [span for span in spans if _scope(span) not in (OURS, "app")]


def shape(spans: list[ReadableSpan]) -> Shape:
    """The peer's spans, each with its nearest ancestor that is not spanledger's; every span,
    the peer's and spanledger's, in the application's trace."""
    by_id = {span.context.span_id: span for span in spans}
    [root] = [span for span in spans if span.name == ROOT and _scope(span) == "app"]
    for span in spans:
        assert span.context.trace_id == root.context.trace_id, span.name
    found = []
    for span in theirs(spans):
        parent = by_id[span.parent.span_id] if span.parent is not None else None
        while parent is not None and _scope(parent) == OURS:
            parent = by_id[parent.parent.span_id] if parent.parent is not None else None
        assert parent is not None, f"{span.name} left the application's trace"
        found.append((span.name, parent.name))
    return sorted(found)


def _scope(span: ReadableSpan) -> str | None:
    return span.instrumentation_scope.name if span.instrumentation_scope else None


@dataclass
class Alone:
    """The peer by itself: its spans' shape, and whether it still runs once switched off."""

    shape: Shape
    stays: bool


def alone(app: App, peer: Peer, standin: StandIn, bare: list[Any]) -> Alone:
    with classes_put_back():
        peer.on()
        try:
            results, spans = app.run(lambda: peer.work(standin))
        finally:
            peer.off()
        assert results == bare
        found = shape(spans)
        assert found, f"{peer.name} made no span of its own"
        stays = bool(theirs(app.run(lambda: peer.work(standin))[1]))
    return Alone(found, stays)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("peer", PEERS, ids=[peer.name for peer in PEERS])
def test_spanledger_and_a_peer_switched_on_and_off_in_any_order(
    peer: Peer,
    order: str,
    app: App,
    standin: StandIn,
    clean: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="spanledger")
    bare = peer.work(standin)
    before = alone(app, peer, standin, bare)
    on_first, off_first = ORDERS[order]
    stuck = peer.shares and on_first == "peer" and off_first == "peer"
    tape = Tape()
    recorder = Recorder([tape, OtelExporter()])  # on the application's global providers
    # exporters of earlier tests may still hold figures for the global meter: count from here
    counted = sum(point.count for point in app.points())

    def switch_ours_on() -> None:
        spanledger.instrument(sdks=list(peer.sdks), http=True)

    def check(*, ours_on: bool, peer_runs: bool) -> None:
        nonlocal counted
        tape.events.clear()
        with spanledger.use(recorder):
            results, spans = app.run(lambda: peer.work(standin))
        assert results == bare
        expected = list(peer.records) if ours_on else []
        assert [type(event) for event in tape.events] == expected
        call_ids = [str((span.attributes or {}).get("spanledger.call_id")) for span in ours(spans)]
        assert sorted(call_ids) == sorted(event.call_id for event in tape.events)
        assert shape(spans) == (before.shape if peer_runs else [])
        counted += len(expected)
        assert sum(point.count for point in app.points()) == counted
        assert [record.getMessage() for record in caplog.records] == []

    switches: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {
        "ours": (switch_ours_on, spanledger.uninstrument),
        "peer": (peer.on, peer.off),
    }
    second = "peer" if on_first == "ours" else "ours"
    try:
        switches[on_first][0]()
        switches[second][0]()
        check(ours_on=True, peer_runs=True)
        switches[off_first][1]()
        if off_first == "ours":
            check(ours_on=False, peer_runs=True)
        else:
            check(ours_on=True, peer_runs=before.stays or stuck)
        switches["ours" if off_first == "peer" else "peer"][1]()
        check(ours_on=False, peer_runs=before.stays or stuck)
    finally:
        spanledger.uninstrument()
        peer.off()
    assert trace_api.get_tracer_provider() is app.tracer_provider
    assert metrics.get_meter_provider() is app.meter_provider
