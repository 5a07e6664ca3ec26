"""Per-call overhead of spanledger's recording, against baselines measured in the same run.

1. No recorder configured: a spanledger provider call against the same request made with bare
   httpx (``client.post`` + ``response.json()``), both on one in-process ``httpx.MockTransport``.
   Target: at most 1.05x.
2. OTel export on: what spanledger adds per call (span + metrics into an in-memory exporter
   through a ``BatchSpanProcessor``) against creating one bare OTel SDK span with the same
   attributes through the same pipeline. Target: at most 2x. The floor is measured two ways:
   in a tight loop (caches hot, the cheapest a span ever is) and around the same bare httpx
   call (what the simplest hand instrumentation of that call costs); the target is judged on
   the second, since spanledger's own span is necessarily made around a call.

Batches are interleaved and medians taken, since this machine is noisy.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import httpx
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import spanledger
from spanledger.exporters.otel import OtelExporter
from spanledger.providers import OpenAIEmbeddings

BODY = json.dumps(
    {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": [0.25] * 16}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
).encode()
URL = "https://api.openai.com/v1/embeddings"


def handler(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, content=BODY, headers={"content-type": "application/json"})


def per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def interleaved(
    variants: dict[str, Callable[[], object]], rounds: int, calls: int
) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():
        per_call(fn, calls)  # warm-up
    for _ in range(rounds):
        gc.collect()
        for name, fn in variants.items():
            samples[name].append(per_call(fn, calls))
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    calls = 400
    client = httpx.Client(transport=httpx.MockTransport(handler))
    provider = OpenAIEmbeddings("text-embedding-3-small", api_key="bench", http_client=client)

    def bare_call() -> Any:
        response = client.post(
            URL,
            json={"model": "text-embedding-3-small", "input": ["hello"]},
            headers={"authorization": "Bearer bench"},
        )
        return response.json()

    def spanledger_call() -> Any:
        return provider.embed(["hello"])

    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(spans, max_queue_size=1_000_000))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    recorder = spanledger.Recorder(
        [OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider)]
    )
    tracer = tracer_provider.get_tracer("bench")
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "embeddings",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "text-embedding-3-small",
        "spanledger.call_id": "0123456789abcdef0123456789abcdef",
        "server.address": "api.openai.com",
        "server.port": 443,
        "spanledger.embedding.input_count": 1,
        "gen_ai.response.model": "text-embedding-3-small",
        "gen_ai.usage.input_tokens": 3,
        "gen_ai.embeddings.dimension.count": 16,
        "spanledger.embedding.input_type": "query",
        "spanledger.request_id": "turn-1",
    }

    def bare_span() -> None:
        span = tracer.start_span("embeddings text-embedding-3-small", kind=SpanKind.CLIENT)
        span.set_attributes(attributes)
        span.end()

    def bare_call_in_bare_span() -> Any:
        span = tracer.start_span("embeddings text-embedding-3-small", kind=SpanKind.CLIENT)
        result = bare_call()
        span.set_attributes(attributes)
        span.end()
        return result

    def recorded_call() -> Any:
        with spanledger.use(recorder):
            return provider.embed(["hello"])

    def spans_cleared() -> None:
        spans.clear()

    results = interleaved(
        {
            "bare httpx call": bare_call,
            "spanledger call, no recorder": spanledger_call,
            "spanledger call, OTel on": recorded_call,
            "bare OTel span (12 attributes)": bare_span,
            "bare httpx call in a bare span": bare_call_in_bare_span,
        },
        rounds,
        calls,
    )
    spans_cleared()
    for name, seconds in results.items():
        print(f"{name:34s} {seconds * 1e6:8.1f} us/call")
    no_recorder = results["spanledger call, no recorder"] / results["bare httpx call"]
    added = results["spanledger call, OTel on"] - results["spanledger call, no recorder"]
    hot_floor = results["bare OTel span (12 attributes)"]
    call_floor = results["bare httpx call in a bare span"] - results["bare httpx call"]
    print(f"no recorder vs bare httpx call     {no_recorder:.3f}x (target <= 1.05x)")
    print(f"added with OTel on                 {added * 1e6:8.1f} us/call")
    print(
        f"  = {added / hot_floor:.2f}x a bare span made in a tight loop ({hot_floor * 1e6:.1f} us)"
    )
    print(
        f"  = {added / call_floor:.2f}x a bare span made around the same call "
        f"({call_floor * 1e6:.1f} us) (target <= 2x)"
    )
    ok = no_recorder <= 1.05 and added / call_floor <= 2.0
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
