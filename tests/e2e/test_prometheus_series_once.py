"""A batch job flushing between batches, scraped by a real Prometheus: each scrape serves each
series once (``promtool check metrics`` accepts it), and what Prometheus stores is what the event
log says (issue 36, item 6: queued flush snapshots made it keep the oldest value)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest
from opentelemetry.trace import NoOpTracerProvider

import spanledger
from spanledger.eventlog import read_events
from spanledger.exporters.jsonl import JsonlSink
from spanledger.exporters.otel import OtelExporter
from spanledger.exporters.prometheus import PrometheusEndpoint
from spanledger.ledger import example_prices_path
from spanledger.providers import CohereReranker
from spanledger.testing import StandIn

from .conftest import require_backend
from .prometheus_backend import PrometheusServer, find_binary

COST = 'spanledger_cost_total{gen_ai_request_model="rerank-v3.5"}'
DUPLICATES = "prometheus_target_scrapes_sample_duplicate_timestamp_total"
MARGIN = 0.2
"""Seconds between a flush's end and a scrape that must show it (clock reads, scheduling)."""


def _binary(name: str) -> str:
    found = find_binary(name)
    if found is None:
        require_backend(f"{name} not installed: apt-get install prometheus")
    return found


def _wait(condition: object, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.25)
    return False


def _logged_spend(path: Path) -> float:
    return sum(
        float(event.cost.amount)
        for event in read_events(path)
        if event.cost is not None and event.cost.amount is not None
    )


def _prometheus_counter(prometheus: PrometheusServer, name: str) -> float:
    """A counter from Prometheus's own ``/metrics`` (0 when it is not there yet)."""
    text = httpx.get(f"{prometheus.url}/metrics", timeout=5.0, trust_env=False).text
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith(name)]
    return sum(values)


def test_batch_job_flushing_between_batches_is_stored_as_logged(tmp_path: Path) -> None:
    prometheus_binary = _binary("prometheus")
    promtool = _binary("promtool")
    log = tmp_path / "events.jsonl"
    with PrometheusEndpoint(port=0) as endpoint, StandIn() as standin:
        exporter = OtelExporter(
            tracer_provider=NoOpTracerProvider(), meter_provider=endpoint.meter_provider
        )
        recorder = spanledger.Recorder([JsonlSink(log), exporter], prices=example_prices_path())
        reranker = CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere"), api_key="t")
        with PrometheusServer(prometheus_binary, [f"127.0.0.1:{endpoint.port}"], []) as prometheus:
            prometheus.wait_ready()
            assert _wait(lambda: bool(prometheus.query('up{job="spanledger"} == 1')), 30)
            flushed: list[tuple[float, float]] = []  # (when a flush ended, spend logged by then)
            with spanledger.use(recorder):
                for _ in range(16):  # about four flushes per one-second scrape
                    reranker.rerank("moon", ["tides", "ships"])
                    reranker.rerank("moon", ["tides"])
                    recorder.flush()
                    flushed.append((time.time(), _logged_spend(log)))
                    time.sleep(0.25)
            spend = _logged_spend(log)
            assert spend == pytest.approx(0.002 * 32)

            scraped = httpx.get(endpoint.url, timeout=5.0, trust_env=False).text
            check = subprocess.run(
                [promtool, "check", "metrics"],
                input=scraped,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert check.returncode == 0, check.stdout + check.stderr

            def stored_now() -> bool:
                latest = prometheus.query(f"sum({COST})")
                return bool(latest) and float(latest[0]["value"][1]) == pytest.approx(spend)

            assert _wait(stored_now, 15), prometheus.query(COST)
            stored = prometheus.query(f"{COST}[60s]")
            assert len(stored) == 1, stored
            samples = [(float(at), float(value)) for at, value in stored[0]["values"]]
            assert len(samples) >= 4, samples
            for at, value in samples:
                shown = [total for ended, total in flushed if ended < at - MARGIN]
                if shown:  # a scrape after a flush serves at least what that flush logged
                    assert value >= shown[-1] - 1e-9, (at, value, shown[-1], samples, flushed)
            assert _prometheus_counter(prometheus, DUPLICATES) == 0
        recorder.shutdown()
