"""What the request span costs: a turn of four calls inside ``spanledger.request(...)`` with
OTel on, with request spans on against off, in units of one bare OTel SDK span, same run.

Each turn makes four provider calls (two embeddings, two reranks) on an in-process
``httpx.MockTransport``, so the network is out of the figure, through an ``OtelExporter`` whose
spans go through a ``BatchSpanProcessor`` to an in-memory exporter (flushed inside each timed
batch). The bare span is one SDK span started and ended on the same pipeline.

Target: (turn with request span - turn without) <= 1 bare span.

    python benchmarks/bench_request_span.py [turns_per_batch] [batches]
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable

import httpx
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger.exporters.otel import OtelExporter
from spanledger.providers import CohereReranker, OpenAIEmbeddings

EMBED = json.dumps(
    {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.25] * 16}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
).encode()
RERANK = json.dumps(
    {
        "id": "r",
        "results": [{"index": 0, "relevance_score": 0.9}],
        "meta": {"billed_units": {"search_units": 1}},
    }
).encode()


def handler(request: httpx.Request) -> httpx.Response:
    body = RERANK if request.url.path.endswith("/rerank") else EMBED
    return httpx.Response(200, content=body, headers={"content-type": "application/json"})


def pipeline() -> tuple[TracerProvider, InMemorySpanExporter]:
    store = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(store, max_queue_size=1 << 16))
    return provider, store


def turn_runner(request_spans: bool) -> Callable[[int], float]:
    provider, store = pipeline()
    exporter = OtelExporter(
        tracer_provider=provider, enable_metrics=False, request_spans=request_spans
    )
    recorder = spanledger.Recorder([exporter])
    transport = httpx.MockTransport(handler)
    embed = OpenAIEmbeddings(
        "text-embedding-3-small",
        api_key="k",
        http_client=httpx.Client(transport=transport),
        recorder=recorder,
    )
    rerank = CohereReranker(
        "rerank-v3.5", api_key="k", http_client=httpx.Client(transport=transport), recorder=recorder
    )

    def run(turns: int) -> float:
        started = time.perf_counter()
        for number in range(turns):
            with spanledger.request(f"turn-{number}"):
                embed.embed(["a question"])
                embed.embed(["a passage"])
                rerank.rerank("a question", ["a passage", "another"])
                rerank.rerank("a question", ["a passage", "another"])
        provider.force_flush()
        elapsed = time.perf_counter() - started
        store.clear()
        return elapsed / turns

    return run


def bare_span_runner() -> Callable[[int], float]:
    provider, store = pipeline()
    tracer = provider.get_tracer("bench")

    def run(spans: int) -> float:
        started = time.perf_counter()
        for _ in range(spans):
            tracer.start_span("request", attributes={"spanledger.request_id": "turn"}).end()
        provider.force_flush()
        elapsed = time.perf_counter() - started
        store.clear()
        return elapsed / spans

    return run


def main() -> int:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    batches = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    runners = {
        "off": turn_runner(request_spans=False),
        "on": turn_runner(request_spans=True),
        "bare": bare_span_runner(),
    }
    for run in runners.values():
        run(turns // 3)  # warm up
    samples: dict[str, list[float]] = {name: [] for name in runners}
    gc.disable()
    try:
        for _ in range(batches):  # interleaved: the machine's noise hits every variant alike
            for name, run in runners.items():
                samples[name].append(run(turns))
            gc.collect()
    finally:
        gc.enable()
    off, on, bare = (statistics.median(samples[name]) for name in ("off", "on", "bare"))
    extra = (on - off) / bare
    print("a turn of four calls with OTel on: request span on vs off, in bare spans (same run)")
    print(f"  turn, request spans off: {off * 1e6:8.1f} us")
    print(f"  turn, request spans on:  {on * 1e6:8.1f} us")
    print(f"  one bare SDK span:       {bare * 1e6:8.1f} us")
    print(f"  added per turn: {extra:.2f} bare spans (target <= 1.00); on/off {on / off:.3f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
