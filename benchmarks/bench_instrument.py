"""What ``spanledger.instrument`` adds to a real SDK call, against baselines from the same run.

Each SDK client talks to an in-process mock transport (no network). For the OpenAI embeddings
call and the Cohere rerank call, with one short input and with 32 inputs of 400 characters:

1. OTel export on: the time an instrumented call adds over the same bare SDK call, in µs and
   in "floors", the cost of creating one bare OTel SDK span with 12 attributes through the same
   pipeline (``BatchSpanProcessor`` into memory). Target: at most 2 floors, and no more with
   32 long inputs than with one short one. The same with a sink that does nothing separates
   what the instrumentation itself adds from what the OTel exporter adds.
2. No recorder: the instrumented call against the bare call. Target: at most 1.05x.

Batches are interleaved, each instrumented batch right after a bare one, and the median of the
round-by-round differences is taken, since shared machines drift and are noisy. The figures are
printed, never asserted: this is a measurement, not a test.
"""

from __future__ import annotations

import base64
import gc
import json
import statistics
import struct
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

import cohere
import httpx
import httpx2
import openai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import spanledger
from spanledger.exporters.otel import OtelExporter

DIMENSIONS = 64
SHORT = ["hello"]
LONG = [(f"passage {n:02d} " + "lorem ipsum dolor sit amet " * 15)[:400] for n in range(32)]


def openai_body(count: int) -> bytes:
    vector = base64.b64encode(struct.pack(f"<{DIMENSIONS}f", *([0.125] * DIMENSIONS))).decode()
    data = [{"object": "embedding", "index": i, "embedding": vector} for i in range(count)]
    usage = {"prompt_tokens": 3 * count, "total_tokens": 3 * count}
    body = {"object": "list", "data": data, "model": "text-embedding-3-small", "usage": usage}
    return json.dumps(body).encode()


def cohere_body(count: int) -> bytes:
    results = [{"index": i, "relevance_score": 1.0 - i / 100} for i in range(count)]
    meta = {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}}
    return json.dumps({"id": "rr-1", "results": results, "meta": meta}).encode()


def openai_client(size: int) -> openai.OpenAI:
    body = openai_body(size)
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(
            200, content=body, headers={"content-type": "application/json"}
        )
    )
    return openai.OpenAI(
        api_key="bench", max_retries=0, http_client=httpx2.Client(transport=transport)
    )


def cohere_client(size: int) -> cohere.ClientV2:
    body = cohere_body(size)
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, content=body, headers={"content-type": "application/json"}
        )
    )
    return cohere.ClientV2(
        api_key="bench", max_retries=0, httpx_client=httpx.Client(transport=transport)
    )


def openai_call(client: openai.OpenAI, texts: list[str]) -> Callable[[], object]:
    return lambda: client.embeddings.create(model="text-embedding-3-small", input=texts)


def cohere_call(client: cohere.ClientV2, texts: list[str]) -> Callable[[], object]:
    return lambda: client.rerank(model="rerank-v3.5", query="what is a tick", documents=texts)


Batch = Callable[[int], None]


def batch(call: Callable[[], object], scope: Callable[[], AbstractContextManager[Any]]) -> Batch:
    def run(calls: int) -> None:
        with scope():
            for _ in range(calls):
                call()

    return run


def interleaved(variants: dict[str, Batch], rounds: int, calls: int) -> dict[str, list[float]]:
    """Seconds per call of each variant in every round; within a round the variants run one
    after another, so two of them compared round by round saw the same machine."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for run in variants.values():
        run(calls)  # warm-up
    for _ in range(rounds):
        gc.collect()
        for name, run in variants.items():
            start = time.perf_counter()
            run(calls)
            samples[name].append((time.perf_counter() - start) / calls)
    return samples


def paired(samples: dict[str, list[float]], variant: str, baseline: str) -> float:
    """Median over rounds of (variant - baseline): drift between rounds cancels out."""
    return statistics.median(
        a - b for a, b in zip(samples[variant], samples[baseline], strict=True)
    )


def ratio(samples: dict[str, list[float]], variant: str, baseline: str) -> float:
    """Median over rounds of variant / baseline."""
    return statistics.median(
        a / b for a, b in zip(samples[variant], samples[baseline], strict=True)
    )


Spanned = Callable[[Callable[[], object]], Callable[[], object]]


def otel_rig() -> tuple[spanledger.Recorder, Callable[[], None], Spanned, InMemorySpanExporter]:
    """A recorder exporting to OTel; the floor, one bare span through the same pipeline; and
    the same bare span made around a call (the simplest hand instrumentation of it)."""
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
        "gen_ai.embeddings.dimension.count": DIMENSIONS,
        "spanledger.embedding.input_type": "query",
        "spanledger.request_id": "turn-1",
    }

    def bare_span() -> None:
        span = tracer.start_span("embeddings text-embedding-3-small", kind=SpanKind.CLIENT)
        span.set_attributes(attributes)
        span.end()

    def spanned(call: Callable[[], object]) -> Callable[[], object]:
        def call_in_bare_span() -> object:
            span = tracer.start_span("embeddings text-embedding-3-small", kind=SpanKind.CLIENT)
            result = call()
            span.set_attributes(attributes)
            span.end()
            return result

        return call_in_bare_span

    return recorder, bare_span, spanned, spans


class NullSink:
    """Receives start notices and events and does nothing with them."""

    def call_started(self, started: spanledger.CallStarted) -> None:
        return None

    def emit(self, event: spanledger.Event) -> None:
        return None


Case = tuple[str, Callable[[], Any], Callable[[Any, list[str]], Callable[[], object]], list[str]]


def cases() -> Iterator[Case]:
    for texts, label in ((SHORT, "1 short input"), (LONG, "32 x 400 chars")):
        size = len(texts)
        yield f"openai embeddings, {label}", partial(openai_client, size), openai_call, texts
        yield f"cohere rerank, {label}", partial(cohere_client, size), cohere_call, texts


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 31
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    recorder, bare_span, spanned, spans = otel_rig()

    null = spanledger.Recorder([NullSink()])

    def recording() -> AbstractContextManager[Any]:
        return spanledger.use(recorder)

    def null_recording() -> AbstractContextManager[Any]:
        return spanledger.use(null)

    variants: dict[str, Batch] = {"floor": batch(bare_span, nullcontext)}
    names: list[str] = []
    for name, make, call, texts in cases():
        names.append(name)
        instrumented = spanledger.instrument(make())
        bare_client = make()
        plain = batch(call(bare_client, texts), nullcontext)
        variants[f"{name} | bare"] = plain
        variants[f"{name} | in a bare span"] = batch(spanned(call(bare_client, texts)), nullcontext)
        variants[f"{name} | no recorder"] = batch(call(instrumented, texts), nullcontext)
        variants[f"{name} | bare again"] = plain
        variants[f"{name} | otel"] = batch(call(instrumented, texts), recording)
        variants[f"{name} | bare once more"] = plain
        variants[f"{name} | null sink"] = batch(call(instrumented, texts), null_recording)

    samples = interleaved(variants, rounds, calls)
    spans.clear()
    floor = statistics.median(samples["floor"])
    print(f"floor: one bare OTel span with 12 attributes, in a tight loop: {floor * 1e6:.1f} us")
    print("floors below are that; 'around' is the same span made around the same bare call")
    print()
    header = ("call", "bare", "added, OTel on", "floors", "around", "added, null sink", "floors")
    print("{:34s} {:>9s} {:>15s} {:>7s} {:>7s} {:>17s} {:>7s}".format(*header))
    worst_floors, worst_around, worst_ratio = 0.0, 0.0, 0.0
    ratios = []
    for name in names:
        bare = statistics.median(samples[f"{name} | bare"])
        added = paired(samples, f"{name} | otel", f"{name} | bare again")
        around = paired(samples, f"{name} | in a bare span", f"{name} | bare")
        own = paired(samples, f"{name} | null sink", f"{name} | bare once more")
        slower = ratio(samples, f"{name} | no recorder", f"{name} | bare")
        ratios.append(f"{name}: {slower:.3f}x")
        worst_floors = max(worst_floors, added / floor)
        worst_around = max(worst_around, added / around)
        worst_ratio = max(worst_ratio, slower)
        print(
            f"{name:34s} {bare * 1e6:7.1f}us {added * 1e6:+13.1f}us {added / floor:7.2f} "
            f"{added / around:7.2f} {own * 1e6:+15.1f}us {own / floor:7.2f}"
        )
    print()
    print("no recorder, instrumented / bare: " + "; ".join(ratios))
    print()
    print(
        f"worst added with OTel on: {worst_floors:.2f} floors, {worst_around:.2f} spans made "
        "around the call (target <= 2)"
    )
    print(f"worst no-recorder ratio:  {worst_ratio:.3f}x (target <= 1.05x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
