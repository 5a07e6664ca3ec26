"""Every surface carries the same context spend for one workload: the request span and the
metrics, the Langfuse trace (through the real SDK to the loopback OTLP receiver), the event log
read back, ``spanledger report`` as text, JSON and CSV (in total and by request), the Parquet
export, the HTML page and the console. Unknown stays unknown on each (no amount, the reason);
no passage, prompt or answer text reaches any of them.

Two requests: ``turn-1`` embeds and reranks through the loopback stand-in and has two model
calls whose context costs 0.00056 USD (counted by hand in test_context_spend.py), reported twice
(the second, complete record wins); ``turn-2`` has a model call that reported no input tokens.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from langfuse import Langfuse
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Sum
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import ConsoleSink, JsonlSink, Recorder, read_events
from spanledger.attribution import Passage, RequestScope
from spanledger.cli import main
from spanledger.events import AttributionRecord
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.ledger import example_prices_path
from spanledger.providers import CohereEmbeddings, CohereReranker
from spanledger.testing import StandIn
from tests.e2e_langfuse.otlp_receiver import OtlpReceiver, ReceivedSpan

SENTINEL = "SENTINEL-ctx-spend-3c9e1f"
MOON = "The moon pulls the sea; the tides follow its pull."
CLOCK = "Clocks tick once every second."
QUESTION = f"What moves the tides? {SENTINEL} ".ljust(118, "q")
FOLLOW_UP = f"And again? {SENTINEL} ".ljust(49, "r")
ANSWER = f"The moon, {SENTINEL}."
PREFIX = "spanledger.attribution."
METADATA = "langfuse.observation.metadata."

CONTEXT, CITED, UNUSED = Decimal("0.00056"), Decimal("0.0005375"), Decimal("0.0000225")
UNKNOWN = "1 of 1 model call that rendered context reported no input tokens"


@dataclass
class Workload:
    log: Path
    records: dict[str, AttributionRecord]
    spans: list[ReadableSpan]
    metrics: dict[str, Any]
    langfuse: list[ReceivedSpan]
    received: str
    console: str


def _turn_one(turn: RequestScope, standin: StandIn) -> None:
    cohere = standin.base_url("cohere")
    with CohereEmbeddings("embed-v4.0", base_url=cohere, api_key="k") as embedder:
        embedder.embed([QUESTION], input_type="query")
    with CohereReranker("rerank-v3.5", base_url=cohere, api_key="k") as reranker:
        reranker.rerank(QUESTION, [MOON, CLOCK], top_k=2)
    turn.context.served([Passage(MOON, "moon"), Passage(CLOCK, "clock")], provider_id="kb")
    first = turn.context.prompted([MOON, CLOCK, QUESTION])
    turn.context.answered(
        first, ANSWER, cited=[MOON], input_tokens=1000, provider="openai", model="gpt-4o-mini"
    )
    turn.report()  # an early record: one call seen so far
    second = turn.context.prompted([MOON, FOLLOW_UP])
    turn.context.answered(second, ANSWER, input_tokens=400, provider="openai", model="gpt-4o")
    turn.report()


def _turn_two(turn: RequestScope) -> None:
    turn.context.served([Passage(MOON, "moon")], provider_id="kb")
    call = turn.context.prompted([MOON, FOLLOW_UP])
    turn.context.answered(call, ANSWER, provider="openai", model="gpt-4o")


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Workload]:
    folder = tmp_path_factory.mktemp("context-spend")
    log = folder / "events.jsonl"
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    console = io.StringIO()
    lf_provider = TracerProvider()
    with OtlpReceiver() as receiver, StandIn() as standin:
        client = Langfuse(
            public_key="pk-lf-context-spend",
            secret_key="sk-lf-test",
            base_url=receiver.url,
            tracer_provider=lf_provider,
            timeout=2,
        )
        sinks: list[Any] = [
            OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider),
            LangfuseExporter(client),
            JsonlSink(log),
            ConsoleSink(console),
        ]
        with Recorder(sinks, prices=example_prices_path()) as recorder, spanledger.use(recorder):
            with spanledger.request("turn-1") as turn:
                _turn_one(turn, standin)
            with spanledger.request("turn-2") as turn:
                _turn_two(turn)  # reports itself at close: its context was captured
            recorder.flush()
        client.flush()
        receiver.wait_for(
            lambda r: sum(1 for s in r.spans if s["name"] == "request") >= 2, timeout=10
        )
        client.shutdown()
        data = reader.get_metrics_data()
        found: dict[str, Any] = {}
        if data is not None:
            for resource in data.resource_metrics:
                for scope in resource.scope_metrics:
                    for metric in scope.metrics:
                        found[metric.name] = metric
        received = json.dumps(receiver.spans, default=str) + "".join(
            r.body.decode("utf-8", "replace") for r in receiver.requests
        )
        records = {r.request_id: r for r in read_events(log).attributions}
        yield Workload(
            log,
            records,
            list(spans.get_finished_spans()),
            found,
            list(receiver.spans),
            received + (data.to_json() if data is not None else ""),
            console.getvalue(),
        )
    tracer_provider.shutdown()
    meter_provider.shutdown()
    lf_provider.shutdown()


def request_span(workload: Workload, request_id: str) -> dict[str, Any]:
    [span] = [
        s
        for s in workload.spans
        if s.name == "request" and (s.attributes or {}).get("spanledger.request_id") == request_id
    ]
    return dict(span.attributes or {})


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(["report", *argv]) == 0
    return capsys.readouterr().out


# --------------------------------------------------------------------------- the record


def test_the_log_holds_the_figures_and_reads_back(workload: Workload) -> None:
    assert (len(QUESTION), len(FOLLOW_UP)) == (118, 49)  # the prompts of the hand count
    known, unknown = workload.records["turn-1"], workload.records["turn-2"]
    assert (known.context_spend, known.cited_context_spend, known.unused_context_spend) == (
        CONTEXT,
        CITED,
        UNUSED,
    )
    assert known.context_currency == "USD"
    assert (known.model_calls, known.quoted_tokens) == (2, 0)
    assert known.cited_by == {"provider_citation": 1}
    assert known.spend_complete  # the retrieval bill beside it
    assert unknown.context_spend is None
    assert unknown.unused_context_spend is None
    assert unknown.unknown_context_spend == UNKNOWN
    lines = [json.loads(line) for line in workload.log.read_text().splitlines()]
    [written] = [line for line in lines if line.get("request_id") == "turn-2" and "at" in line]
    assert "context_spend" not in written  # unknown: not written, never 0
    assert written["unknown_context_spend"] == UNKNOWN


# --------------------------------------------------------------------------- OpenTelemetry


def test_the_request_span_carries_the_figures(workload: Workload) -> None:
    known = request_span(workload, "turn-1")
    assert known[PREFIX + "context_spend"] == float(CONTEXT)
    assert known[PREFIX + "cited_context_spend"] == float(CITED)
    assert known[PREFIX + "unused_context_spend"] == float(UNUSED)
    assert known[PREFIX + "context_currency"] == "USD"
    assert known[PREFIX + "model_calls"] == 2
    assert known[PREFIX + "quoted_tokens"] == 0
    assert known[PREFIX + "cited_by.provider_citation"] == 1
    assert PREFIX + "unknown_context_spend" not in known
    unknown = request_span(workload, "turn-2")
    assert unknown[PREFIX + "unknown_context_spend"] == UNKNOWN
    for name in ("context_spend", "cited_context_spend", "unused_context_spend"):
        assert PREFIX + name not in unknown


def test_the_metric_counts_each_request_once_by_its_last_record(workload: Workload) -> None:
    spend = workload.metrics["spanledger.attribution.context_spend"]
    assert isinstance(spend.data, Sum)
    part, currency = "spanledger.attribution.context_part", "spanledger.cost.currency"
    points = {
        (labels[part], labels[currency]): point.value
        for point in spend.data.data_points
        if (labels := dict(point.attributes or {}))
    }
    assert points == {("cited", "USD"): float(CITED), ("unused", "USD"): float(UNUSED)}
    unknown = workload.metrics["spanledger.attribution.context_spend.unknown"]
    [point] = unknown.data.data_points
    assert point.value == 1


# --------------------------------------------------------------------------- Langfuse


def langfuse_metadata(workload: Workload, request_id: str) -> dict[str, Any]:
    for span in workload.langfuse:
        if span["name"] != "request":
            continue
        metadata = {
            key[len(METADATA) :]: json.loads(value)
            for key, value in span["attributes"].items()
            if key.startswith(METADATA)
        }
        if metadata.get("request_id") == request_id:
            return metadata
    raise AssertionError(f"no Langfuse request observation for {request_id}")


def test_the_langfuse_trace_carries_the_figures(workload: Workload) -> None:
    known = langfuse_metadata(workload, "turn-1")
    assert Decimal(known["context_spend"]) == CONTEXT
    assert Decimal(known["cited_context_spend"]) == CITED
    assert Decimal(known["unused_context_spend"]) == UNUSED
    assert known["context_currency"] == "USD"
    assert known["model_calls"] == 2
    assert known["cited_by"] == {"provider_citation": 1}
    unknown = langfuse_metadata(workload, "turn-2")
    for name in ("context_spend", "cited_context_spend", "unused_context_spend"):
        assert name not in unknown  # no amount, never 0
    assert unknown["unknown_context_spend"] == UNKNOWN


# --------------------------------------------------------------------------- spanledger report


def test_the_report_json_in_total_and_by_request(
    capsys: pytest.CaptureFixture[str], workload: Workload
) -> None:
    total = json.loads(run(capsys, str(workload.log), "--json"))["attribution"]
    assert total["known_context_spend"] == {
        "USD": {"context": str(CONTEXT), "cited": str(CITED), "unused": str(UNUSED)}
    }
    assert total["requests_with_context_spend"] == 1
    assert total["requests_with_unknown_context_spend"] == 1
    assert "by_request" not in total
    by_request = json.loads(run(capsys, str(workload.log), "--json", "--by", "request"))
    listed = by_request["attribution"]["by_request"]
    for each, request in zip(listed, ("turn-1", "turn-2"), strict=True):
        record = workload.records[request]
        assert each.pop("cited_token_share") == record.cited_token_share
        assert each.pop("rendered_tokens") == record.rendered_tokens
        assert each.pop("cited_tokens") == record.cited_tokens
    assert listed == [
        {
            "request_id": "turn-1",
            "context_spend": str(CONTEXT),
            "cited_context_spend": str(CITED),
            "unused_context_spend": str(UNUSED),
            "currency": "USD",
            "unknown_context_spend": None,
        },
        {
            "request_id": "turn-2",
            "context_spend": None,
            "cited_context_spend": None,
            "unused_context_spend": None,
            "currency": None,
            "unknown_context_spend": UNKNOWN,
        },
    ]


def test_the_report_csv_by_request(capsys: pytest.CaptureFixture[str], workload: Workload) -> None:
    rows = list(
        csv.DictReader(io.StringIO(run(capsys, str(workload.log), "--csv", "--by", "request")))
    )
    assert rows  # turn-1's calls
    for row in rows:
        assert row["request"] == "turn-1"
        assert Decimal(row["request_context_spend"]) == CONTEXT
        assert Decimal(row["request_cited_context_spend"]) == CITED
        assert Decimal(row["request_unused_context_spend"]) == UNUSED
        assert row["request_context_currency"] == "USD"
        assert row["request_unknown_context_spend"] == ""
    plain = run(capsys, str(workload.log), "--csv")
    assert "request_context_spend" not in plain  # only grouped by request


def test_the_report_text_in_total_and_by_request(
    capsys: pytest.CaptureFixture[str], workload: Workload
) -> None:
    out = run(capsys, str(workload.log))
    assert (
        f"  known context spend: {CONTEXT} USD (cited {CITED} USD, unused {UNUSED} USD) "
        "(1 request with unknown context spend left out)"
    ) in out
    out = run(capsys, str(workload.log), "--by", "request")
    assert "  by request:\n" in out
    first, second = workload.records["turn-1"], workload.records["turn-2"]
    assert first.cited_token_share is not None
    assert (
        f"    turn-1: cited token share {first.cited_token_share:.1%} ({first.cited_tokens} of "
        f"{first.rendered_tokens} rendered tokens); context spend {CONTEXT} USD (cited {CITED} "
        f"USD, unused {UNUSED} USD)\n"
    ) in out
    assert "    turn-2: cited token share " in out
    assert f"; context spend unknown ({UNKNOWN})\n" in out
    assert second.request_id == "turn-2"


def test_the_parquet_export(workload: Workload, tmp_path: Path) -> None:
    target = tmp_path / "parquet"
    assert main(["export", str(workload.log), "--parquet", str(target)]) == 0
    relation = duckdb.sql(
        "SELECT request_id, context_spend, cited_context_spend, unused_context_spend, "
        "context_currency, unknown_context_spend, model_calls, cited_by['provider_citation'] "
        f"FROM read_parquet('{target}/attribution/**/*.parquet') ORDER BY request_id, model_calls"
    )
    assert relation is not None
    rows = relation.fetchall()
    assert rows == [
        ("turn-1", "0.00006", "0.0000375", "0.0000225", "USD", None, 1, 1),  # the early one
        ("turn-1", str(CONTEXT), str(CITED), str(UNUSED), "USD", None, 2, 1),
        ("turn-2", None, None, None, None, UNKNOWN, 1, None),
    ]


def test_the_html_page(
    capsys: pytest.CaptureFixture[str], workload: Workload, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    run(capsys, str(workload.log), "--by", "request", "--html", str(page))
    html = page.read_text(encoding="utf-8")
    assert f"<b>{CONTEXT} USD</b><span>known context spend (USD)</span>" in html
    assert f"<b>{UNUSED} USD</b><span>unused context spend (USD)</span>" in html
    assert "<b>1</b><span>requests with unknown context spend</span>" in html
    share = workload.records["turn-1"].cited_token_share
    assert share is not None
    assert (
        f'<tr><td>turn-1</td><td class="n">{share:.1%}</td><td class="n">{CONTEXT} USD</td>'
        f'<td class="n">{CITED} USD</td><td class="n">{UNUSED} USD</td><td></td></tr>'
    ) in html
    assert (
        '<td class="n">unknown</td><td class="n">unknown</td>'
        f'<td class="n">unknown</td><td>{UNKNOWN}</td></tr>'
    ) in html
    assert '<table data-attribution><tbody><tr><th scope="row">requests</th><td>2</td>' in html
    assert "<pre" not in html


def test_the_console(workload: Workload) -> None:
    lines = [line for line in workload.console.splitlines() if line.startswith("request ")]
    share = workload.records["turn-1"].cited_token_share
    assert share is not None
    assert lines[-2] == (
        f"request turn-1: 2 of 2 frames rendered, 1 cited (cited token share {share:.1%}); "
        f"context spend {CONTEXT} USD (cited {CITED} USD, unused {UNUSED} USD)"
    )
    assert lines[-1].endswith(f"context spend unknown ({UNKNOWN})")


def test_no_text_reaches_any_surface(
    capsys: pytest.CaptureFixture[str], workload: Workload, tmp_path: Path
) -> None:
    seen = [workload.log.read_text(), workload.console, workload.received]
    for span in workload.spans:
        seen.extend(f"{key}={value!r}" for key, value in (span.attributes or {}).items())
    seen.append(run(capsys, str(workload.log), "--json", "--by", "request"))
    seen.append(run(capsys, str(workload.log), "--csv", "--by", "request"))
    seen.append(run(capsys, str(workload.log), "--by", "request"))
    page = tmp_path / "page.html"
    run(capsys, str(workload.log), "--by", "request", "--html", str(page))
    seen.append(page.read_text())
    everything = "\n".join(seen)
    assert SENTINEL not in everything
    for text in (MOON, CLOCK):
        assert text not in everything
