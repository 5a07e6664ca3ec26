"""A Prometheus scrape serves each series once, with its value now, however often the metrics
are flushed (issue 36, item 6), on every way of wiring the endpoint."""

from __future__ import annotations

import collections
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider

import spanledger
from spanledger.errors import ConfigurationError
from spanledger.exporters.otel import OtelExporter
from spanledger.exporters.prometheus import PrometheusEndpoint
from spanledger.ledger import example_prices_path
from spanledger.providers import CohereReranker
from spanledger.testing import StandIn

PRICE = 0.002
"""rerank-v3.5's price per search unit in the example table; each call here uses one."""
COST = "spanledger_cost_total"
UNITS = "spanledger_rerank_search_units_total"


def scrape(url: str) -> str:
    response = httpx.get(url, timeout=5.0, trust_env=False)
    response.raise_for_status()
    return response.text


def samples(text: str) -> collections.Counter[str]:
    """How often each series (name and labels) appears in a scrape."""
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    return collections.Counter(line.rsplit(" ", 1)[0] for line in lines)


def total(text: str, name: str) -> float:
    """The sum of ``name``'s samples in a scrape."""
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith((name + "{", name + " "))
    )


def assert_once(text: str, calls: int) -> None:
    """Every series once, the counters at the calls' totals, and promtool content."""
    repeated = {series: n for series, n in samples(text).items() if n > 1}
    assert not repeated, f"{len(repeated)} series repeated: {sorted(repeated)[:3]}"
    assert sum(1 for line in text.splitlines() if line.startswith("# HELP ")) == len(
        {line.split()[2] for line in text.splitlines() if line.startswith("# HELP ")}
    )
    assert total(text, UNITS) == calls
    assert total(text, COST) == pytest.approx(PRICE * calls)
    promtool = shutil.which("promtool")
    if promtool is not None:  # the e2e test requires it; here it is a bonus
        check = subprocess.run(
            [promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=30
        )
        assert check.returncode == 0, check.stdout + check.stderr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with StandIn() as running:
        yield running


def batches(recorder: spanledger.Recorder, standin: StandIn, url: str, scrape_each: bool) -> int:
    """A batch job: three batches of calls with ``recorder.flush()`` after each (and a scrape
    after each, when ``scrape_each``); the number of calls."""
    reranker = CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere"), api_key="t")
    calls = 0
    with spanledger.use(recorder):
        for size in (2, 3, 4):
            for _ in range(size):
                reranker.rerank("moon", ["tides", "ships"])
            calls += size
            recorder.flush()
            recorder.flush()  # flushing twice queues nothing either
            if scrape_each:
                assert_once(scrape(url), calls)
    return calls


@pytest.mark.parametrize("scrape_each", [False, True], ids=["scrape-after", "scrape-between"])
def test_endpoint_in_callers_meter_provider_serves_each_series_once(
    standin: StandIn, scrape_each: bool
) -> None:
    with PrometheusEndpoint(port=0) as endpoint:
        exporter = OtelExporter(
            tracer_provider=NoOpTracerProvider(), meter_provider=endpoint.meter_provider
        )
        recorder = spanledger.Recorder([exporter], prices=example_prices_path())
        calls = batches(recorder, standin, endpoint.url, scrape_each)
        endpoint.meter_provider.force_flush()
        text = scrape(endpoint.url)
        assert_once(text, calls)
        assert scrape(endpoint.url) == text  # nothing left queued for the next scrape
        recorder.shutdown()


def test_concurrent_scrapes_each_serve_every_series_once(standin: StandIn) -> None:
    with PrometheusEndpoint(port=0) as endpoint:
        exporter = OtelExporter(
            tracer_provider=NoOpTracerProvider(), meter_provider=endpoint.meter_provider
        )
        recorder = spanledger.Recorder([exporter], prices=example_prices_path())
        calls = batches(recorder, standin, endpoint.url, scrape_each=False)
        texts: list[str] = []

        def scraper() -> None:
            for _ in range(5):
                texts.append(scrape(endpoint.url))

        threads = [threading.Thread(target=scraper) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        assert len(texts) == 30
        for text in texts:
            repeated = [series for series, n in samples(text).items() if n > 1]
            assert not repeated
            assert total(text, UNITS) == calls  # never an empty or split scrape
        recorder.shutdown()


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_configure_port_serves_each_series_once(standin: StandIn, how: str) -> None:
    port = free_port()
    if how == "argument":
        recorder = spanledger.configure(
            prometheus_port=port, prices=example_prices_path(), install=False, environ={}
        )
    else:
        recorder = spanledger.configure(
            prices=example_prices_path(),
            install=False,
            environ={"SPANLEDGER_PROMETHEUS_PORT": str(port)},
        )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        calls = batches(recorder, standin, url, scrape_each=True)
        assert_once(scrape(url), calls)
    finally:
        recorder.shutdown()


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_configure_tracer_provider_and_port_serves_the_port(standin: StandIn, how: str) -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    port = free_port()
    settings: dict[str, object] = {"prometheus_port": port} if how == "argument" else {}
    environ = {"SPANLEDGER_PROMETHEUS_PORT": str(port)} if how == "environment" else {}
    recorder = spanledger.configure(
        tracer_provider=tracer_provider,
        prices=example_prices_path(),
        install=False,
        environ=environ,
        **settings,  # type: ignore[arg-type]
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        calls = batches(recorder, standin, url, scrape_each=True)
        assert_once(scrape(url), calls)
        assert len(spans.get_finished_spans()) == calls  # the spans go to the caller's provider
    finally:
        recorder.shutdown()
    with pytest.raises(httpx.TransportError):  # shutdown stops serving
        scrape(url)
    tracer_provider.shutdown()


def test_configure_meter_provider_and_port_names_both() -> None:
    with PrometheusEndpoint(port=0) as endpoint, pytest.raises(ConfigurationError) as raised:
        spanledger.configure(
            meter_provider=endpoint.meter_provider,
            install=False,
            environ={"SPANLEDGER_PROMETHEUS_PORT": str(free_port())},
        )
    message = str(raised.value)
    assert "SPANLEDGER_PROMETHEUS_PORT" in message
    assert "meter_provider" in message
