"""Alert rules and dashboard expressions against a real Prometheus scraping spanledger."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry.trace import NoOpTracerProvider

import spanledger
from spanledger.attribution import Passage
from spanledger.exporters.otel import OtelExporter
from spanledger.exporters.prometheus import PrometheusEndpoint
from spanledger.ledger import example_prices_path
from spanledger.providers import CohereEmbeddings, CohereReranker, JinaReranker, TEIEmbeddings
from spanledger.providers.fallback import BM25Step, Breakers, with_fallback
from spanledger.testing import StandIn

from .conftest import require_backend
from .prometheus_backend import PrometheusServer, find_binary

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "dashboards" / "prometheus" / "spanledger-alerts.yml"
RULE_TESTS = ROOT / "dashboards" / "prometheus" / "spanledger-alerts.test.yml"
DASHBOARD = ROOT / "dashboards" / "grafana" / "spanledger.json"
PRICES = example_prices_path()


def _binary(name: str) -> str:
    found = find_binary(name)
    if found is None:
        require_backend(f"{name} not installed: apt-get install prometheus")
    return found


DASHBOARDS_README = DASHBOARD.parents[1] / "README.md"
_SCRAPE_LABELS = {"__name__", "job", "instance", "le", "otel_scope_name", "otel_scope_version"}


def documented_labels() -> dict[str, set[str]]:
    """The metric table of dashboards/README.md: each metric's documented labels (the
    backticked names in its labels cell, parenthesised values left out)."""
    table: dict[str, set[str]] = {}
    for line in DASHBOARDS_README.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            names = re.sub(r"\([^)]*\)", "", cells[1])
            table[cells[0].strip("`")] = set(re.findall(r"`([a-z_]+)`", names))
    return table


def dashboard_expressions() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_alert_rules_pass_promtool() -> None:
    promtool = _binary("promtool")
    check = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    unit = subprocess.run(
        [promtool, "test", "rules", RULE_TESTS.name],
        cwd=RULE_TESTS.parent,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert unit.returncode == 0, unit.stdout + unit.stderr
    assert "SUCCESS" in unit.stdout


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return condition()


def _has_data(prometheus: PrometheusServer, expr: str) -> Callable[[], bool]:
    return lambda: bool(prometheus.query(expr))


PASSAGES = ("The moon's gravity drives the tides, twice a day.", "Clocks tick every second.")


def context_turns() -> None:
    """A request whose context is priced (gpt-4o-mini in the example table), one passage cited
    and one unused, and one whose context spend is unknown (no input tokens reported)."""
    for request_id, tokens in (("priced-context", 400), ("unknown-context", None)):
        with spanledger.request(request_id) as turn:
            turn.context.served([Passage(text) for text in PASSAGES], provider_id="kb")
            shown = [f"[{n}] {text}" for n, text in enumerate(PASSAGES, start=1)]
            call = turn.context.prompted([*shown, "Why do the tides rise?"])
            turn.context.answered(
                call, "The moon [1].", input_tokens=tokens, provider="openai", model="gpt-4o-mini"
            )


def test_dashboard_and_alert_against_real_prometheus() -> None:
    binary = _binary("prometheus")
    with (
        PrometheusEndpoint(port=0) as endpoint,
        StandIn() as standin,
    ):
        exporter = OtelExporter(
            tracer_provider=NoOpTracerProvider(), meter_provider=endpoint.meter_provider
        )
        recorder = spanledger.Recorder([exporter], prices=PRICES)
        priced_embed = CohereEmbeddings("embed-v4.0", base_url=standin.base_url("cohere"))
        priced_rerank = CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere"))
        unpriced = JinaReranker("jina-reranker-unlisted", base_url=standin.base_url("jina"))
        unmetered = TEIEmbeddings("bge-small", base_url=standin.base_url("tei"))
        failing = CohereReranker("fail-503", base_url=standin.base_url("cohere"))
        garbage = CohereReranker("usage-malformed", base_url=standin.base_url("cohere"))
        down = JinaReranker("fail-502", base_url=standin.base_url("jina"))
        breakers = Breakers(failures=2, window=60, cooldown=3600)

        def traffic() -> None:
            with spanledger.use(recorder):
                priced_embed.embed(["tides and the moon"])
                priced_rerank.rerank("moon", ["tides", "ships"])
                unpriced.rerank("moon", ["tides", "ships"])
                unmetered.embed(["tides"])
                with pytest.raises(spanledger.ProviderError):
                    failing.rerank("moon", ["tides"])
                garbage.rerank("moon", ["tides"])  # search_units: "abc"
            chain = [down, BM25Step()]  # after two 502s its breaker opens: degraded, no call
            with_fallback(chain, "moon", ["tides", "ships"], breakers=breakers, recorder=recorder)
            with spanledger.use(recorder):
                context_turns()

        traffic()
        with PrometheusServer(binary, [f"127.0.0.1:{endpoint.port}"], [RULES]) as prometheus:
            prometheus.wait_ready()
            assert wait_until(lambda: bool(prometheus.query('up{job="spanledger"} == 1')), 30)
            for _ in range(6):  # several scrapes with growing counters, so rate() has data
                traffic()
                time.sleep(1.0)

            for expr in dashboard_expressions():
                assert wait_until(_has_data(prometheus, expr), 20), (
                    f"no data for dashboard expression: {expr}"
                )

            rerank_spend = 'spanledger_cost_total{gen_ai_request_model="rerank-v3.5"}'
            spend = prometheus.query(f"sum({rerank_spend})")
            assert float(spend[0]["value"][1]) == pytest.approx(0.002 * 7)

            def alert_firing() -> bool:
                return any(
                    alert["labels"].get("alertname") == "SpanledgerUnpricedUsage"
                    and alert["labels"].get("gen_ai_request_model") == "jina-reranker-unlisted"
                    and alert["state"] == "firing"
                    for alert in prometheus.alerts()
                )

            assert wait_until(alert_firing, 30), prometheus.alerts()
            firing = {
                alert["labels"]["gen_ai_request_model"]
                for alert in prometheus.alerts()
                if alert["labels"].get("alertname") == "SpanledgerUnpricedUsage"
            }
            assert "rerank-v3.5" not in firing  # priced usage never alerts
            assert "embed-v4.0" not in firing
            assert "bge-small" not in firing  # TEI: no usage, but priced per request (free)
            parts = prometheus.query(
                "sum by (spanledger_attribution_context_part) "
                "(spanledger_attribution_context_spend_total)"
            )
            assert {p["metric"]["spanledger_attribution_context_part"] for p in parts} == {
                "cited",
                "unused",
            }

            def malformed_firing() -> list[dict[str, str]]:
                return [
                    alert["labels"]
                    for alert in prometheus.alerts()
                    if alert["labels"].get("alertname") == "SpanledgerMalformedUsage"
                    and alert["state"] == "firing"
                ]

            documented = documented_labels()
            assert len(documented) == 10, documented
            for metric, labels in documented.items():
                series = prometheus.query(f'{{__name__=~"{metric}(_count)?"}}')
                assert series, f"documented metric {metric} has no series"
                seen = {name for each in series for name in each["metric"]} - _SCRAPE_LABELS
                assert seen <= labels, f"{metric}: labels {sorted(seen - labels)} undocumented"
                assert labels <= seen, f"{metric}: documented {sorted(labels - seen)} not seen"

            def circuit_open() -> list[dict[str, str]]:
                return [
                    alert["labels"]
                    for alert in prometheus.alerts()
                    if alert["labels"].get("alertname") == "SpanledgerCircuitOpen"
                    and alert["state"] == "firing"
                ]

            assert wait_until(lambda: bool(circuit_open()), 30), prometheus.alerts()
            assert [
                (labels["gen_ai_provider_name"], labels["gen_ai_request_model"])
                for labels in circuit_open()
            ] == [("jina", "fail-502")]
            state = prometheus.query('spanledger_breaker_state{gen_ai_request_model="fail-502"}')
            assert float(state[0]["value"][1]) == 1.0
            outcomes = prometheus.query(
                "sum by (spanledger_chain_status) (spanledger_rerank_chain_outcomes_total)"
            )
            assert {o["metric"]["spanledger_chain_status"] for o in outcomes} == {"degraded"}

            assert wait_until(lambda: bool(malformed_firing()), 30), prometheus.alerts()
            assert [
                (labels["gen_ai_request_model"], labels["spanledger_usage_figure"])
                for labels in malformed_firing()
            ] == [("usage-malformed", "search_units")]  # a sound figure never alerts
        recorder.shutdown()
