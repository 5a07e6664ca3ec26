"""What instrumenting a boto3 Bedrock client adds, against baselines measured in the same run.

No network: each boto3 client answers from a ``before-send`` handler returning a canned
``AWSResponse`` (botocore's own seam for that), so every botocore step but the socket runs, and
the OpenAI SDK answers from an ``httpx2.MockTransport``. Every call reads its result as a caller
would (``json.loads(response["body"].read())`` for InvokeModel).

a. OTel export on: the time an instrumented Titan ``invoke_model`` adds over the bare one,
   against the time instrumenting the OpenAI SDK adds to ``embeddings.create``; printed as
   "bedrock overhead / openai overhead". Target: at most 1.2.
b. Flat in input size: the overhead of a Cohere embed of 96 inputs against one of 1 input
   (64-dimension vectors). Target: at most 1.1.
c. A 1 MB InvokeModel body: what instrumenting adds (our read, parse and replay of the body)
   against reading the body alone (``StreamingBody.read`` + ``json.loads``, once).

Batches are interleaved and the median of the round-by-round differences is taken. The figures
are printed, never asserted: this is a measurement.

    python benchmarks/bench_bedrock.py [rounds] [calls]
"""

from __future__ import annotations

import base64
import gc
import io
import json
import statistics
import struct
import sys
import time
import timeit
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

import boto3  # type: ignore[import-untyped]
import httpx2
import openai
from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from botocore.response import StreamingBody  # type: ignore[import-untyped]
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger.exporters.otel import OtelExporter

DIMENSIONS = 64
ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 15
CALLS = int(sys.argv[2]) if len(sys.argv) > 2 else 100


class _Raw(io.BytesIO):
    """A canned body as urllib3's response offers it to botocore."""

    def stream(self, amt: int = 1024, decode_content: bool = False) -> Any:
        while chunk := self.read(amt):
            yield chunk


def canned(body: bytes, headers: dict[str, str]) -> Callable[..., AWSResponse]:
    def before_send(request: Any = None, **_: Any) -> AWSResponse:
        return AWSResponse(
            request.url, 200, {"content-length": str(len(body)), **headers}, _Raw(body)
        )

    return before_send


def bedrock(body: bytes, headers: dict[str, str]) -> Any:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url="https://bedrock-runtime.us-east-1.amazonaws.com",
        aws_access_key_id="bench",
        aws_secret_access_key="bench",
        config=Config(retries={"total_max_attempts": 1}),
    )
    client.meta.events.register("before-send.bedrock-runtime.InvokeModel", canned(body, headers))
    return client


def vector() -> list[float]:
    return [0.125] * DIMENSIONS


def titan_body() -> tuple[bytes, dict[str, str]]:
    payload = {
        "embedding": vector(),
        "embeddingsByType": {"float": vector()},
        "inputTextTokenCount": 3,
    }
    return json.dumps(payload).encode(), {"x-amzn-bedrock-input-token-count": "3"}


def cohere_body(count: int, dimensions: int = DIMENSIONS) -> tuple[bytes, dict[str, str]]:
    payload = {
        "embeddings": [[0.125] * dimensions for _ in range(count)],
        "id": "e-1",
        "response_type": "embeddings_floats",
        "texts": ["x"] * count,
    }
    return json.dumps(payload).encode(), {"x-amzn-bedrock-input-token-count": str(3 * count)}


def invoke(client: Any, model: str, request: dict[str, Any]) -> Callable[[], object]:
    body = json.dumps(request)

    def call() -> object:
        response = client.invoke_model(modelId=model, body=body)
        return json.loads(response["body"].read())

    return call


def openai_call() -> Callable[[], object]:
    encoded = base64.b64encode(struct.pack(f"<{DIMENSIONS}f", *vector())).decode()
    payload = {
        "object": "list",
        "data": [{"object": "embedding", "index": 0, "embedding": encoded}],
        "model": "text-embedding-3-small",
        "usage": {"prompt_tokens": 3, "total_tokens": 3},
    }
    content = json.dumps(payload).encode()
    transport = httpx2.MockTransport(
        lambda request: httpx2.Response(
            200, content=content, headers={"content-type": "application/json"}
        )
    )
    client = openai.OpenAI(
        api_key="bench", max_retries=0, http_client=httpx2.Client(transport=transport)
    )
    return lambda: client.embeddings.create(model="text-embedding-3-small", input=["hello"])


def instrumented_openai() -> Callable[[], object]:
    call = openai_call()
    client = call.__closure__[0].cell_contents  # type: ignore[index]
    spanledger.instrument(client)
    return call


def timed(
    call: Callable[[], object],
    scope: Callable[[], AbstractContextManager[Any]],
    flush: Callable[[], object],
) -> float:
    gc.collect()
    start = time.perf_counter()
    with scope():
        for _ in range(CALLS):
            call()
    flush()
    return (time.perf_counter() - start) / CALLS


def interleaved(
    variants: dict[str, tuple[Callable[[], object], Callable[[], AbstractContextManager[Any]]]],
    flush: Callable[[], object],
) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for call, scope in variants.values():
        timed(call, scope, flush)  # warm-up
    for _ in range(ROUNDS):
        for name, (call, scope) in variants.items():
            samples[name].append(timed(call, scope, flush))
    return samples


def paired(samples: dict[str, list[float]], variant: str, baseline: str) -> float:
    return statistics.median(
        a - b for a, b in zip(samples[variant], samples[baseline], strict=True)
    )


def main() -> int:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(BatchSpanProcessor(spans, max_queue_size=1_000_000))
    meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    recorder = spanledger.Recorder(
        [OtelExporter(tracer_provider=tracer_provider, meter_provider=meter_provider)]
    )

    def otel() -> AbstractContextManager[Any]:
        return spanledger.use(recorder)

    def flush() -> None:
        tracer_provider.force_flush()
        spans.clear()

    titan = titan_body()
    titan_request = {"inputText": "hello"}
    model = "amazon.titan-embed-text-v2:0"
    a = interleaved(
        {
            "bedrock bare": (invoke(bedrock(*titan), model, titan_request), otel),
            "bedrock instrumented": (
                invoke(spanledger.instrument(bedrock(*titan)), model, titan_request),
                otel,
            ),
            "openai bare": (openai_call(), otel),
            "openai instrumented": (instrumented_openai(), otel),
        },
        flush,
    )
    bedrock_over = paired(a, "bedrock instrumented", "bedrock bare")
    openai_over = paired(a, "openai instrumented", "openai bare")
    print("a. OTel export on, one Titan invoke_model vs one openai embeddings.create")
    print(
        f"   bedrock bare {statistics.median(a['bedrock bare']) * 1e6:8.1f} µs/call,"
        f" overhead {bedrock_over * 1e6:6.1f} µs"
    )
    print(
        f"   openai  bare {statistics.median(a['openai bare']) * 1e6:8.1f} µs/call,"
        f" overhead {openai_over * 1e6:6.1f} µs"
    )
    print(
        f"   bedrock overhead / openai overhead = {bedrock_over / openai_over:.2f}  (target <= 1.2)"
    )

    cohere = "cohere.embed-english-v3"
    sizes: dict[str, tuple[Callable[[], object], Callable[[], AbstractContextManager[Any]]]] = {}
    for count in (1, 96):
        request = {"texts": [f"passage {n}" for n in range(count)], "input_type": "search_document"}
        body = cohere_body(count)
        sizes[f"{count} bare"] = (invoke(bedrock(*body), cohere, request), otel)
        sizes[f"{count} instrumented"] = (
            invoke(spanledger.instrument(bedrock(*body)), cohere, request),
            otel,
        )
    b = interleaved(sizes, flush)
    one, many = paired(b, "1 instrumented", "1 bare"), paired(b, "96 instrumented", "96 bare")
    parses: dict[int, float] = {}
    for count in (1, 96):
        data = cohere_body(count)[0]
        parses[count] = (
            min(timeit.repeat(partial(json.loads, data), number=CALLS, repeat=5)) / CALLS
        )
    print("b. Cohere embed through invoke_model, OTel on: overhead with 96 inputs vs 1")
    print(
        f"   1 input {one * 1e6:6.1f} µs, 96 inputs {many * 1e6:6.1f} µs: ratio {many / one:.2f}"
        "  (target <= 1.1)"
    )
    fixed_one, fixed_many = one - parses[1], many - parses[96]
    print(
        f"   less one json.loads of the answer ({parses[1] * 1e6:.1f} / {parses[96] * 1e6:.1f} µs):"
        f" {fixed_one * 1e6:6.1f} vs {fixed_many * 1e6:6.1f} µs, ratio {fixed_many / fixed_one:.2f}"
    )

    large, headers = cohere_body(96, 1024)
    request = {"texts": [f"passage {n}" for n in range(96)], "input_type": "search_document"}

    def read_alone() -> object:
        return json.loads(StreamingBody(io.BytesIO(large), len(large)).read())

    c = interleaved(
        {
            "bare": (invoke(bedrock(large, headers), cohere, request), otel),
            "instrumented": (
                invoke(spanledger.instrument(bedrock(large, headers)), cohere, request),
                otel,
            ),
            "read alone": (read_alone, nullcontext),
        },
        flush,
    )
    added = paired(c, "instrumented", "bare")
    alone = statistics.median(c["read alone"])
    print(f"c. a {len(large) / 1e6:.2f} MB InvokeModel body (96 x 1024 floats), OTel on")
    print(
        f"   instrumenting adds {added * 1e3:6.2f} ms; reading the body alone"
        f" {alone * 1e3:6.2f} ms: ratio {added / alone:.2f}"
    )
    tracer_provider.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
