"""One workload, every surface: Vertex AI's billable characters reach the event, its cost line
(``input_per_kchar``), the OTel span and metric, the Langfuse observation, the console line, the
JSONL log, ``spanledger report`` (table, JSON, CSV), ``spanledger export`` (Parquet) and the
request's report, with the same value; a call that reported none shows none anywhere (and is
unmetered, not $0)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pytest
from opentelemetry.sdk.metrics.export import Sum

import spanledger
from spanledger import EmbeddingEvent, EmbeddingUsage, JsonlSink, Recorder, read_events
from spanledger.attribution import RequestReport
from spanledger.cli import main
from spanledger.costs import CostStatus
from spanledger.exporters.console import ConsoleSink
from spanledger.ledger import example_prices_path
from spanledger.providers import VertexEmbeddings
from spanledger.testing import StandIn, vertex_embeddings

from .conftest import LangfuseRig, OtelRig

MODEL = "text-embedding-005"
TOKENS, CHARACTERS = 7, 2000
PRICE = Decimal("0.00005")  # 2,000 characters at the example table's $0.000025 per 1,000
FIGURE = "spanledger.usage.billable_characters"


@dataclass
class Workload:
    events: list[EmbeddingEvent]
    report: RequestReport
    console: str
    log: Path


@pytest.fixture
def workload(
    standin: StandIn, otel: OtelRig, langfuse_rig: LangfuseRig, tmp_path: Path
) -> Workload:
    """Two Vertex calls in one request: one reporting 2,000 billable characters, one no usage."""
    standin.reset()
    standin.route(vertex_embeddings(report_usage=False), times=1)  # the second call's
    standin.route(vertex_embeddings(tokens=TOKENS, characters=CHARACTERS), times=1)  # the first
    log = tmp_path / "logs" / "events.jsonl"
    log.parent.mkdir()
    out = io.StringIO()
    events: list[Any] = []
    sinks: list[Any] = [
        otel.exporter,
        langfuse_rig.exporter,
        ConsoleSink(out),
        JsonlSink(log),
        events.append,
    ]
    embedder = VertexEmbeddings(MODEL, project="p", base_url=standin.base_url("gcp.vertex_ai"))
    with (
        Recorder(sinks, prices=example_prices_path()) as recorder,
        spanledger.use(recorder),
        spanledger.request("turn-1") as scope,
        embedder,
    ):
        embedder.embed(["a passage about tides"])
        embedder.embed(["another passage"])
        report = scope.report()
    return Workload(events, report, out.getvalue(), log)


def test_the_event_and_its_cost(workload: Workload) -> None:
    reported, unreported = workload.events
    assert reported.usage == EmbeddingUsage(input_tokens=TOKENS, billable_characters=CHARACTERS)
    assert reported.cost is not None
    assert (reported.cost.status, reported.cost.amount) == (CostStatus.PRICED, PRICE)
    assert unreported.usage is None
    assert unreported.cost is not None
    assert unreported.cost.status is CostStatus.UNMETERED  # unknown, never $0
    assert unreported.cost.amount is None


def test_the_span_and_the_metric(workload: Workload, otel: OtelRig) -> None:
    calls = [span for span in otel.call_spans() if span.name == f"embeddings {MODEL}"]
    reported, unreported = (dict(span.attributes or {}) for span in calls)
    assert reported[FIGURE] == CHARACTERS
    assert json.loads(str(reported["langfuse.observation.usage_details"])) == {
        "input": TOKENS,
        "billable_characters": CHARACTERS,
    }
    assert FIGURE not in unreported
    assert "langfuse.observation.usage_details" not in unreported
    counter = otel.metrics()["spanledger.embedding.billable_characters"]
    assert isinstance(counter.data, Sum)
    [point] = counter.data.data_points
    assert point.value == CHARACTERS
    [request] = [span for span in otel.call_spans() if span.name == "request"]
    assert dict(request.attributes or {})["spanledger.attribution.billed_characters"] == CHARACTERS


def test_the_langfuse_observation(workload: Workload, langfuse_rig: LangfuseRig) -> None:
    details = [
        json.loads(str(attributes["langfuse.observation.usage_details"]))
        for span in langfuse_rig.spans()
        if "langfuse.observation.usage_details" in (attributes := dict(span.attributes or {}))
    ]
    assert details == [{"input": TOKENS, "billable_characters": CHARACTERS}]


def test_the_console_line(workload: Workload) -> None:
    reported, unreported, request = workload.console.splitlines()
    assert reported.endswith(f"-> {TOKENS} input tokens, {CHARACTERS} billable characters")
    assert unreported.endswith("-> usage not reported")
    assert request.startswith("request turn-1: ")


def test_the_log_and_an_old_line_without_the_figure(workload: Workload) -> None:
    lines = [json.loads(line) for line in workload.log.read_text().splitlines()]
    calls = [line for line in lines if line["kind"] == "embedding"]
    assert calls[0]["usage"] == {"input_tokens": TOKENS, "billable_characters": CHARACTERS}
    assert calls[1]["usage"] is None
    [record] = [line for line in lines if line["kind"] == "attribution"]
    assert record["billed_characters"] == CHARACTERS
    read = read_events(workload.log)
    assert read.problems == []
    assert [getattr(event, "usage", None) for event in read.events] == [
        event.usage for event in workload.events
    ]

    old = workload.log.with_name("old.jsonl")
    del calls[0]["usage"]["billable_characters"]
    del record["billed_characters"]
    old.write_text("\n".join(json.dumps(line) for line in (calls[0], record)) + "\n")
    older = read_events(old)
    assert older.problems == []
    [old_call] = older.events
    assert isinstance(old_call, EmbeddingEvent)
    assert old_call.usage == EmbeddingUsage(input_tokens=TOKENS)  # unknown, not 0
    assert older.attributions[0].billed_characters is None


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_the_report(workload: Workload, capsys: pytest.CaptureFixture[str]) -> None:
    logs, prices = str(workload.log.parent), str(example_prices_path())
    report = json.loads(_run(capsys, "report", logs, "--json", "--prices", prices))
    rows = {row["status"]: row for row in report["rows"]}
    assert rows["priced"]["billable_characters"] == CHARACTERS
    assert Decimal(rows["priced"]["amount"]) == PRICE
    assert rows["unmetered"]["billable_characters"] is None  # none reported: unknown, not 0
    assert rows["unmetered"]["billable_characters_calls"] == 0
    assert rows["unmetered"]["amount"] is None
    table = list(csv.DictReader(io.StringIO(_run(capsys, "report", logs, "--csv"))))
    assert sorted(row["billable_characters"] for row in table) == ["", str(CHARACTERS)]
    text = _run(capsys, "report", logs, "--prices", prices)
    [priced] = [line for line in text.splitlines() if line.startswith("gcp.vertex_ai")][:1]
    assert priced.split()[-1] == str(CHARACTERS)


def test_the_export(workload: Workload, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "parquet"
    _run(capsys, "export", str(workload.log.parent), "--parquet", str(target))
    events = duckdb.execute(
        "SELECT billable_characters FROM "
        f"read_parquet('{target}/events/**/*.parquet', hive_partitioning = true) "
        "ORDER BY billable_characters NULLS LAST"
    ).fetchall()
    assert events == [(CHARACTERS,), (None,)]
    records = duckdb.execute(
        "SELECT billed_characters FROM "
        f"read_parquet('{target}/attribution/**/*.parquet', hive_partitioning = true)"
    ).fetchall()
    assert records == [(CHARACTERS,)]


def test_the_request_report(workload: Workload) -> None:
    assert workload.report.record().billed_characters == CHARACTERS
    assert f"{CHARACTERS} billable characters" in workload.report.render()
