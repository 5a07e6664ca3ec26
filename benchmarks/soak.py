"""Soak: a million recorded calls with OTel export, a price table and the JSONL log; memory
must stay flat after warm-up and the per-call time must not drift.

Each call is a real provider call (embeddings or rerank, alternating, over an in-process
``httpx.MockTransport``) recorded by a recorder that prices it from the example price table,
renders it as an OTel span (a ``BatchSpanProcessor`` feeding an exporter that counts and
discards) with metrics (collected every window), and appends it to a JSONL log. Every tenth
call runs inside a request scope that serves, renders and cites frames and emits its report.

Calls run in windows. Each window also times the same bare httpx requests, as the same-run
baseline a noisy machine needs: drift is reported both raw and as the ratio to that baseline.

Targets, judged at the end (exit 1 and "TARGETS MISSED" naming them; timings on a shared
machine can miss them by noise alone):
- RSS after warm-up grows by less than 5 % (and the slope, in bytes per call, is printed);
- the per-call time of the last windows is within 1.1x that of the first windows after warm-up.

A recorded call that reached no log line or no span is a loss, not a target: "FAIL", exit 2.

    python benchmarks/soak.py [calls=1000000] [window=25000]
"""

from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import httpx
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

import spanledger
from spanledger.exporters.otel import OtelExporter
from spanledger.ledger import PriceTable
from spanledger.ledger.prices import example_prices_path
from spanledger.providers import CohereReranker, OpenAIEmbeddings

WARM_UP_WINDOWS = 4
EDGE_WINDOWS = 4
RSS_GROWTH_LIMIT = 0.05
DRIFT_LIMIT = 1.10

EMBED_BODY = json.dumps(
    {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.25] * 16}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
).encode()
RERANK_BODY = json.dumps(
    {
        "id": "r-1",
        "results": [{"index": 1, "relevance_score": 0.9}, {"index": 0, "relevance_score": 0.2}],
        "meta": {"billed_units": {"search_units": 1}},
    }
).encode()
DOCUMENTS = ["the first passage", "the second passage"]


def answer(request: httpx.Request) -> httpx.Response:
    body = RERANK_BODY if request.url.path.endswith("/rerank") else EMBED_BODY
    return httpx.Response(200, content=body, headers={"content-type": "application/json"})


class DiscardingExporter(SpanExporter):
    """Counts the spans it is handed and keeps none of them."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(calls: int, call: Callable[[int], object], offset: int) -> float:
    start = time.perf_counter()
    for i in range(offset, offset + calls):
        call(i)
    return (time.perf_counter() - start) / calls


def main(total: int, window: int) -> int:
    transport = httpx.MockTransport(answer)
    bare_client = httpx.Client(transport=transport)

    def bare(i: int) -> object:
        if i % 2:
            return bare_client.post(
                "https://api.cohere.com/v2/rerank", json={"query": "q", "documents": DOCUMENTS}
            ).json()
        return bare_client.post(
            "https://api.openai.com/v1/embeddings", json={"input": ["a"]}
        ).json()

    spans = DiscardingExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(spans))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    workdir = Path(tempfile.mkdtemp(prefix="spanledger-soak-"))
    log_path = workdir / "events.jsonl"
    otel = OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider)
    recorder = spanledger.Recorder(
        [otel, spanledger.JsonlSink(log_path)],
        prices=PriceTable.load(example_prices_path()),
    )
    client = httpx.Client(transport=transport)
    embedder = OpenAIEmbeddings(
        "text-embedding-3-small", api_key="k", http_client=client, recorder=recorder
    )
    reranker = CohereReranker("rerank-v3.5", api_key="k", http_client=client, recorder=recorder)

    def recorded(i: int) -> object:
        if i % 10 == 0:
            with spanledger.use(recorder), spanledger.request(f"turn-{i}") as turn:
                ranked = reranker.rerank("which passage", DOCUMENTS, top_k=2)
                served = turn.serve(ranked, DOCUMENTS, provider_id="soak")
                turn.render(served)
                turn.cite(served[:1])
                return turn.report()
        if i % 2:
            return reranker.rerank("which passage", DOCUMENTS, top_k=2)
        return embedder.embed(["a passage to embed"])

    windows = total // window
    print(f"soak: {windows} windows of {window} calls; log at {log_path}", flush=True)
    print("window   calls   us/call  bare us  ratio   RSS MB", flush=True)
    rows: list[tuple[float, float, int]] = []
    done = 0
    for number in range(windows):
        per_call = timed(window, recorded, done)
        baseline = timed(max(1000, window // 10), bare, done)
        reader.get_metrics_data()  # a collection, as a periodic reader would make
        done += window
        gc.collect()
        rows.append((per_call * 1e6, baseline * 1e6, rss_bytes()))
        print(
            f"{number:6d} {done:7d} {per_call * 1e6:9.1f} {baseline * 1e6:8.1f} "
            f"{per_call / baseline:6.2f} {rows[-1][2] / 2**20:8.1f}",
            flush=True,
        )
    recorder.shutdown()
    tracer_provider.shutdown()
    meter_provider.shutdown()
    lines = sum(1 for _ in log_path.open("rb"))
    log_path.unlink()
    workdir.rmdir()

    steady = rows[WARM_UP_WINDOWS:]
    first, last = steady[:EDGE_WINDOWS], steady[-EDGE_WINDOWS:]
    rss_start, rss_end = first[0][2], last[-1][2]
    growth = (rss_end - rss_start) / rss_start
    slope = (rss_end - rss_start) / (window * (len(steady) - 1))
    raw_drift = statistics.median(r[0] for r in last) / statistics.median(r[0] for r in first)
    relative_drift = statistics.median(r[0] / r[1] for r in last) / statistics.median(
        r[0] / r[1] for r in first
    )
    print()
    print(f"calls recorded: {done:,}; spans exported: {spans.spans:,}; log lines: {lines:,}")
    print(
        f"RSS after warm-up: {rss_start / 2**20:.1f} MB -> {rss_end / 2**20:.1f} MB "
        f"({growth:+.1%}, {slope:+.2f} bytes per call); limit +{RSS_GROWTH_LIMIT:.0%}"
    )
    print(
        f"per-call drift, last {EDGE_WINDOWS} windows against the first {EDGE_WINDOWS} after "
        f"warm-up: {raw_drift:.3f}x raw, {relative_drift:.3f}x against the bare baseline; "
        f"limit {DRIFT_LIMIT:.2f}x"
    )
    lost = done - min(lines, spans.spans)
    if lost > 0:
        print(f"FAIL: {lost:,} recorded calls reached no log line or no span")
        return 2
    missed = [
        name
        for name, within in (
            ("RSS growth", growth < RSS_GROWTH_LIMIT),
            ("per-call drift", min(raw_drift, relative_drift) <= DRIFT_LIMIT),
        )
        if not within
    ]
    print(f"TARGETS MISSED: {', '.join(missed)}" if missed else "targets met")
    return 1 if missed else 0


if __name__ == "__main__":
    arguments = [int(value) for value in sys.argv[1:3]]
    total = arguments[0] if arguments else 1_000_000
    window = arguments[1] if len(arguments) > 1 else 25_000
    if total // window < WARM_UP_WINDOWS + 2 * EDGE_WINDOWS:
        raise SystemExit("soak: give at least 12 windows (calls / window)")
    raise SystemExit(main(total, window))
