"""Per-call overhead of spanledger's recording, against baselines measured in the same run.

1. No recorder configured: a spanledger provider call against the same request made with bare
   httpx (``client.post`` + ``response.json()``), both on one in-process ``httpx.MockTransport``.
   Target: at most 1.05x.
2. OTel export on: what spanledger adds per call (span + metrics into an in-memory exporter
   through a ``BatchSpanProcessor``) against creating one bare OTel SDK span with the same
   attributes through the same pipeline. Target: at most 2x.

   The floor is measured three ways: in a tight loop (caches hot, the cheapest a span ever is),
   around the same bare httpx call (the simplest hand instrumentation of that call), and as the
   current span around it (the hand instrumentation that, like spanledger's span, parents what
   the call does). The target is judged on the second, the strictest floor made around a call.

   Every batch that makes spans ends, inside its timing, by flushing the span pipeline, so each
   variant pays for its own span exports. spanledger records its metrics into the SDK when the
   meter provider collects (as a ``BatchSpanProcessor`` exports spans off the call path), so the
   added cost is reported twice: on the call path, with the metric collection after each
   batch's timing, and in total, with a second exporter whose collection is inside the timing.

Batches are interleaved and medians taken, since this machine is noisy.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Variant:
    """A call; what ends each timed batch of it; what tidies up after the timing."""

    call: Callable[[], object]
    finish: Callable[[], object] = lambda: None
    settle: Callable[[], object] = lambda: None


def per_call(variant: Variant, calls: int) -> float:
    call = variant.call
    start = time.perf_counter()
    for _ in range(calls):
        call()
    variant.finish()
    elapsed = time.perf_counter() - start
    variant.settle()
    return elapsed / calls


def interleaved(
    variants: dict[str, Variant],
    rounds: int,
    calls: int,
    between_rounds: Callable[[], object],
) -> list[dict[str, float]]:
    """Per round, the seconds per call of every variant, all measured back to back."""
    for variant in variants.values():
        per_call(variant, calls)  # warm-up
    samples: list[dict[str, float]] = []
    for _ in range(rounds):
        between_rounds()
        gc.collect()
        samples.append({name: per_call(variant, calls) for name, variant in variants.items()})
    return samples


def median_of(
    samples: list[dict[str, float]], figure: Callable[[dict[str, float]], float]
) -> float:
    """The median over rounds of a figure computed within each round, so that the machine's
    drift between rounds cancels out of differences and ratios."""
    return statistics.median(figure(round_) for round_ in samples)


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 41
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
    call_path_metrics = InMemoryMetricReader()
    total_metrics = InMemoryMetricReader()

    def recording_provider(reader: InMemoryMetricReader) -> OpenAIEmbeddings:
        exporter = OtelExporter(
            tracer_provider=tracer_provider,
            meter_provider=MeterProvider(metric_readers=[reader]),
        )
        return OpenAIEmbeddings(
            "text-embedding-3-small",
            api_key="bench",
            http_client=client,
            recorder=spanledger.Recorder([exporter]),
        )

    call_path_provider = recording_provider(call_path_metrics)
    total_provider = recording_provider(total_metrics)
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
    name = "embeddings text-embedding-3-small"

    def bare_span() -> None:
        span = tracer.start_span(name, kind=SpanKind.CLIENT)
        span.set_attributes(attributes)
        span.end()

    def bare_call_in_bare_span() -> Any:
        span = tracer.start_span(name, kind=SpanKind.CLIENT)
        result = bare_call()
        span.set_attributes(attributes)
        span.end()
        return result

    def bare_call_in_current_span() -> Any:
        with tracer.start_as_current_span(name, kind=SpanKind.CLIENT) as span:
            result = bare_call()
            span.set_attributes(attributes)
            return result

    def spans_flushed() -> None:
        tracer_provider.force_flush()

    def all_flushed() -> None:
        tracer_provider.force_flush()
        total_metrics.get_metrics_data()

    samples = interleaved(
        {
            "bare httpx call": Variant(bare_call),
            "spanledger call, no recorder": Variant(spanledger_call),
            "spanledger call, OTel on": Variant(
                lambda: call_path_provider.embed(["hello"]),
                finish=spans_flushed,
                settle=call_path_metrics.get_metrics_data,
            ),
            "  same, metric collection timed": Variant(
                lambda: total_provider.embed(["hello"]), finish=all_flushed
            ),
            "bare OTel span (12 attributes)": Variant(bare_span, finish=spans_flushed),
            "bare httpx call in a bare span": Variant(bare_call_in_bare_span, spans_flushed),
            "  same, as the current span": Variant(bare_call_in_current_span, spans_flushed),
        },
        rounds,
        calls,
        between_rounds=spans.clear,
    )
    spans.clear()
    for label in samples[0]:
        seconds = statistics.median(round_[label] for round_ in samples)
        print(f"{label:34s} {seconds * 1e6:8.1f} us/call")

    def added(r: dict[str, float]) -> float:
        return r["spanledger call, OTel on"] - r["spanledger call, no recorder"]

    def added_total(r: dict[str, float]) -> float:
        return r["  same, metric collection timed"] - r["spanledger call, no recorder"]

    floors: dict[str, Callable[[dict[str, float]], float]] = {
        "a bare span in a tight loop": lambda r: r["bare OTel span (12 attributes)"],
        "a bare span around the call": lambda r: (
            r["bare httpx call in a bare span"] - r["bare httpx call"]
        ),
        "the current span around the call": lambda r: (
            r["  same, as the current span"] - r["bare httpx call"]
        ),
    }
    no_recorder = median_of(
        samples, lambda r: r["spanledger call, no recorder"] / r["bare httpx call"]
    )
    print(f"no recorder vs bare httpx call     {no_recorder:.3f}x (target <= 1.05x)")
    print(
        f"added with OTel on: call path {median_of(samples, added) * 1e6:.1f} us,"
        f" total {median_of(samples, added_total) * 1e6:.1f} us"
    )
    judged = 0.0
    for label, floor in floors.items():
        call_path = statistics.median(added(r) / floor(r) for r in samples)
        total = statistics.median(added_total(r) / floor(r) for r in samples)
        target = ""
        if label == "a bare span around the call":
            judged = call_path
            target = " (target <= 2x)"
        print(
            f"  vs {label} ({median_of(samples, floor) * 1e6:.1f} us):"
            f" call path {call_path:.2f}x, total {total:.2f}x{target}"
        )
    ok = no_recorder <= 1.05 and judged <= 2.0
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
