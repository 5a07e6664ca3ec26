"""What ``spanledger.instrument`` adds to a real SDK call, against baselines from the same run.

Each SDK client talks to an in-process mock transport (no network): an ``httpx.MockTransport``
for OpenAI and Cohere, and a ``requests`` adapter mounted on the session the Voyage SDK is told
to use (it speaks ``requests``; its requestor class stays wrapped, passing through, for the bare
client too). For the OpenAI embeddings call, the Cohere rerank call and Voyage's embed and
rerank, with one short input and with 32 inputs of 400 characters:

1. OTel export on: the time an instrumented call adds over the same bare SDK call, in µs and
   in floors: one bare OTel SDK span with 12 attributes through the same pipeline
   (``BatchSpanProcessor`` into memory) made in a tight loop, made around the same bare call,
   and made as the current span around it. Target: at most 2 floors, and no more with 32 long
   inputs than with one short one. The same with a sink that does nothing separates what the
   instrumentation itself adds from what the OTel exporter adds, and "span only" is the OTel
   exporter rendering the call's own start notice and event around the bare call with no
   capture at all: the least that OTel on can cost, whatever the capture does.
2. No recorder: the instrumented call against the bare call. Target: at most 1.05x.

Every batch that makes spans ends, inside its timing, by flushing the span pipeline; the metrics
spanledger queued are collected after the timing (they are recorded into the SDK when the meter
provider collects, off the call path), and their cost is printed separately per call. Batches
are interleaved and the median of the round-by-round differences is taken, since shared
machines drift and are noisy. The figures are printed, never asserted: this is a measurement.
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
from dataclasses import dataclass
from functools import partial
from typing import Any

import cohere
import httpx
import httpx2
import openai
import requests
import voyageai
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from voyageai.client import Client as VoyageClient

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


def voyage_body(endpoint: str, count: int) -> bytes:
    if endpoint == "embeddings":
        data: list[dict[str, Any]] = [
            {"object": "embedding", "embedding": [0.125] * DIMENSIONS, "index": i}
            for i in range(count)
        ]
        model = "voyage-3.5"
    else:
        data = [{"relevance_score": 1.0 - i / 100, "index": i} for i in range(count)]
        model = "rerank-2.5"
    usage = {"total_tokens": 3 * count}
    return json.dumps({"object": "list", "data": data, "model": model, "usage": usage}).encode()


class VoyageReplies(requests.adapters.BaseAdapter):
    """Answers the Voyage SDK in process: the endpoint's body for as many inputs as were sent."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies = {
            (endpoint, count): voyage_body(endpoint, count)
            for endpoint in ("embeddings", "rerank")
            for count in (len(SHORT), len(LONG))
        }

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        sent = json.loads(request.body or b"{}")
        endpoint = (request.path_url or "").rsplit("/", 1)[-1]
        count = len(sent.get("input") or sent.get("documents") or ())
        response = requests.Response()
        response.status_code = 200
        response._content = self.bodies[endpoint, count]
        response.headers["content-type"] = "application/json"
        response.encoding = "utf-8"
        response.url = request.url or ""
        response.request = request
        return response

    def close(self) -> None:
        return None


def voyage_client(size: int) -> VoyageClient:
    return VoyageClient(api_key="bench", max_retries=0)


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


def cohere_client(size: int, kind: type[cohere.Client] = cohere.ClientV2) -> Any:
    """A Cohere client answered in process (``kind``: ``ClientV2``, or v1's ``Client``)."""
    body = cohere_body(size)
    transport = httpx.MockTransport(
        lambda request: httpx.Response(
            200, content=body, headers={"content-type": "application/json"}
        )
    )
    return kind(api_key="bench", max_retries=0, httpx_client=httpx.Client(transport=transport))


def openai_call(client: openai.OpenAI, texts: list[str]) -> Callable[[], object]:
    return lambda: client.embeddings.create(model="text-embedding-3-small", input=texts)


def cohere_call(client: cohere.Client, texts: list[str]) -> Callable[[], object]:
    return lambda: client.rerank(model="rerank-v3.5", query="what is a tick", documents=texts)


def voyage_embed_call(client: VoyageClient, texts: list[str]) -> Callable[[], object]:
    return lambda: client.embed(texts, model="voyage-3.5", input_type="document")


def voyage_rerank_call(client: VoyageClient, texts: list[str]) -> Callable[[], object]:
    return lambda: client.rerank("what is a tick", texts, model="rerank-2.5")


@dataclass(frozen=True)
class Batch:
    """Calls made in ``scope``; ``finish`` ends the timed batch, ``settle`` tidies up after."""

    call: Callable[[], object]
    scope: Callable[[], AbstractContextManager[Any]] = nullcontext
    finish: Callable[[], object] = lambda: None
    settle: Callable[[], object] = lambda: None

    def timed(self, calls: int) -> float:
        """Seconds per call. Each batch starts from a collected heap (outside the timing), so
        the collections inside it are its own allocations' and not a full pass another
        variant's garbage set off."""
        call = self.call
        gc.collect()
        start = time.perf_counter()
        with self.scope():
            for _ in range(calls):
                call()
        self.finish()
        elapsed = time.perf_counter() - start
        self.settle()
        return elapsed / calls


def interleaved(variants: dict[str, Batch], rounds: int, calls: int) -> dict[str, list[float]]:
    """Seconds per call of each variant in every round; within a round the variants run one
    after another, so two of them compared round by round saw the same machine."""
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for variant in variants.values():
        variant.timed(calls)  # warm-up
    for _ in range(rounds):
        gc.collect()
        for name, variant in variants.items():
            samples[name].append(variant.timed(calls))
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


@dataclass
class OtelRig:
    """A recorder exporting to OTel, and bare spans through the same pipeline: alone, around a
    call, and as the current span around a call (the simplest hand instrumentation)."""

    recorder: spanledger.Recorder
    spans: InMemorySpanExporter
    flush_spans: Callable[[], object]
    collect_metrics: Callable[[], object]
    bare_span: Callable[[], None]
    around: Spanned
    current_around: Spanned


def otel_rig() -> OtelRig:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(spans, max_queue_size=1_000_000))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    recorder = spanledger.Recorder(
        [OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider)]
    )
    tracer = tracer_provider.get_tracer("bench")
    name = "embeddings text-embedding-3-small"
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
        span = tracer.start_span(name, kind=SpanKind.CLIENT)
        span.set_attributes(attributes)
        span.end()

    def around(call: Callable[[], object]) -> Callable[[], object]:
        def call_in_bare_span() -> object:
            span = tracer.start_span(name, kind=SpanKind.CLIENT)
            result = call()
            span.set_attributes(attributes)
            span.end()
            return result

        return call_in_bare_span

    def current_around(call: Callable[[], object]) -> Callable[[], object]:
        def call_in_current_span() -> object:
            with tracer.start_as_current_span(name, kind=SpanKind.CLIENT) as span:
                result = call()
                span.set_attributes(attributes)
                return result

        return call_in_current_span

    return OtelRig(
        recorder,
        spans,
        tracer_provider.force_flush,
        reader.get_metrics_data,
        bare_span,
        around,
        current_around,
    )


class NullSink:
    """Receives start notices and events and does nothing with them."""

    def call_started(self, started: spanledger.CallStarted) -> None:
        return None

    def emit(self, event: spanledger.Event) -> None:
        return None


class Keeper:
    """Keeps the last start notice and event it received."""

    started: spanledger.CallStarted | None = None
    event: spanledger.Event | None = None

    def call_started(self, started: spanledger.CallStarted) -> None:
        self.started = started

    def emit(self, event: spanledger.Event) -> None:
        self.event = event


def span_only(
    exporter: OtelExporter, instrumented: Callable[[], object], bare: Callable[[], object]
) -> Callable[[], object]:
    """``bare`` with the exporter rendering, around it, the notice and event that one
    ``instrumented`` call produced: the span spanledger makes, with no capture work."""
    keeper = Keeper()
    with spanledger.use(spanledger.Recorder([keeper])):
        instrumented()
    started, event = keeper.started, keeper.event
    assert started is not None
    assert event is not None
    call_started, emit = exporter.call_started, exporter.emit

    def call_in_our_span() -> object:
        call_started(started)
        result = bare()
        emit(event)
        return result

    return call_in_our_span


Case = tuple[str, Callable[[], Any], Callable[[Any, list[str]], Callable[[], object]], list[str]]


def cases() -> Iterator[Case]:
    for texts, label in ((SHORT, "1 short input"), (LONG, "32 x 400 chars")):
        size = len(texts)
        yield f"openai embeddings, {label}", partial(openai_client, size), openai_call, texts
        yield f"cohere rerank, {label}", partial(cohere_client, size), cohere_call, texts
        yield f"voyage embed, {label}", partial(voyage_client, size), voyage_embed_call, texts
        yield f"voyage rerank, {label}", partial(voyage_client, size), voyage_rerank_call, texts


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 31
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    rig = otel_rig()
    exporter = rig.recorder.sinks[0]
    assert isinstance(exporter, OtelExporter)
    null = spanledger.Recorder([NullSink()])
    session = requests.Session()
    session.mount("https://", VoyageReplies())
    voyageai.requestssession = session

    def recording() -> AbstractContextManager[Any]:
        return spanledger.use(rig.recorder)

    def null_recording() -> AbstractContextManager[Any]:
        return spanledger.use(null)

    def metrics_collected() -> None:
        rig.flush_spans()
        rig.collect_metrics()

    flushed = rig.flush_spans
    variants: dict[str, Batch] = {"floor": Batch(rig.bare_span, finish=flushed)}
    names: list[str] = []
    for name, make, call, texts in cases():
        names.append(name)
        instrumented = spanledger.instrument(make())
        bare_client = make()
        plain = Batch(call(bare_client, texts))
        recorded = call(instrumented, texts)
        variants[f"{name} | bare"] = plain
        variants[f"{name} | in a bare span"] = Batch(
            rig.around(call(bare_client, texts)), finish=flushed
        )
        variants[f"{name} | in a current span"] = Batch(
            rig.current_around(call(bare_client, texts)), finish=flushed
        )
        variants[f"{name} | no recorder"] = Batch(recorded)
        variants[f"{name} | bare again"] = plain
        variants[f"{name} | otel"] = Batch(
            recorded, recording, finish=flushed, settle=rig.collect_metrics
        )
        variants[f"{name} | bare, third"] = plain
        variants[f"{name} | otel, metrics timed"] = Batch(
            recorded, recording, finish=metrics_collected
        )
        variants[f"{name} | bare once more"] = plain
        variants[f"{name} | null sink"] = Batch(recorded, null_recording)
        variants[f"{name} | bare, fifth"] = plain
        variants[f"{name} | span only"] = Batch(
            span_only(exporter, recorded, call(bare_client, texts)),
            finish=flushed,
            settle=rig.collect_metrics,
        )

    samples = interleaved(variants, rounds, calls)
    rig.spans.clear()
    floor = statistics.median(samples["floor"])
    print(f"floor: one bare OTel span with 12 attributes, in a tight loop: {floor * 1e6:.1f} us")
    print("added with OTel on is on the call path; 'metrics' is what recording the queued metrics")
    print("adds per call when the provider collects; 'around' / 'current' are the same span")
    print("made around the same bare call, as a plain and as the current span")
    print()
    header = (
        "call",
        "bare",
        "OTel on",
        "floors",
        "around",
        "current",
        "metrics",
        "null sink",
        "span only",
    )
    print("{:34s} {:>9s} {:>10s} {:>7s} {:>7s} {:>8s} {:>9s} {:>10s} {:>10s}".format(*header))
    worst = {"floors": 0.0, "around": 0.0, "current": 0.0, "ratio": 0.0, "span": 0.0}
    ratios = []
    for name in names:
        bare = statistics.median(samples[f"{name} | bare"])
        added = paired(samples, f"{name} | otel", f"{name} | bare again")
        total = paired(samples, f"{name} | otel, metrics timed", f"{name} | bare, third")
        around = paired(samples, f"{name} | in a bare span", f"{name} | bare")
        current = paired(samples, f"{name} | in a current span", f"{name} | bare")
        own = paired(samples, f"{name} | null sink", f"{name} | bare once more")
        span = paired(samples, f"{name} | span only", f"{name} | bare, fifth")
        worst["span"] = max(worst["span"], span / around)
        slower = ratio(samples, f"{name} | no recorder", f"{name} | bare")
        ratios.append(f"{name}: {slower:.3f}x")
        worst["floors"] = max(worst["floors"], added / floor)
        worst["around"] = max(worst["around"], added / around)
        worst["current"] = max(worst["current"], added / current)
        worst["ratio"] = max(worst["ratio"], slower)
        print(
            f"{name:34s} {bare * 1e6:7.1f}us {added * 1e6:+8.1f}us {added / floor:7.2f} "
            f"{added / around:7.2f} {added / current:8.2f} {(total - added) * 1e6:+7.1f}us "
            f"{own * 1e6:+8.1f}us {span * 1e6:+8.1f}us"
        )
    print()
    print("no recorder, instrumented / bare: " + "; ".join(ratios))
    print()
    print(
        f"worst added with OTel on: {worst['floors']:.2f} floors, {worst['around']:.2f} spans "
        f"made around the call, {worst['current']:.2f} current spans (target <= 2)"
    )
    print(f"worst span only, without any capture: {worst['span']:.2f} spans made around the call")
    print(f"worst no-recorder ratio:  {worst['ratio']:.3f}x (target <= 1.05x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
