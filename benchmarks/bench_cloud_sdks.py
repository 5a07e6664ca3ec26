"""What ``spanledger.instrument`` adds to a google-genai, mistralai and ollama embedding call,
as a ratio to what it adds to the openai SDK's, measured in the same run.

Each client talks to an in-process mock transport (httpx for google-genai and ollama, httpx2
for mistralai and openai; no network). With OTel export on (the pipeline of
``bench_instrument``), the added cost of a call is the median over interleaved rounds of
(instrumented call - bare call). Printed, never asserted:

1. per SDK, added cost / openai's added cost, for 1 input (target: at most 1.2);
2. per SDK, added cost with 2,048 inputs / added cost with 1 input (target: at most 1.1).

Usage: ``python benchmarks/bench_cloud_sdks.py [rounds] [calls]``.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

import httpx
import httpx2
import ollama
import openai
from google import genai
from google.genai import types as gtypes
from mistralai.client import Mistral

import bench_instrument as bench
import spanledger
from bench_instrument import Batch, interleaved, paired

DIMENSIONS = 8
SIZES = (1, 2048)
JSON = {"content-type": "application/json"}


def _vector() -> list[float]:
    return [0.125] * DIMENSIONS


def openai_client(size: int) -> Any:
    data = [{"object": "embedding", "index": i, "embedding": _vector()} for i in range(size)]
    usage = {"prompt_tokens": size, "total_tokens": size}
    body = json.dumps({"object": "list", "data": data, "model": "m", "usage": usage}).encode()
    transport = httpx2.MockTransport(lambda r: httpx2.Response(200, content=body, headers=JSON))
    return openai.OpenAI(api_key="b", max_retries=0, http_client=httpx2.Client(transport=transport))


def google_client(size: int) -> Any:
    embeddings = [{"values": _vector()} for _ in range(size)]
    body = json.dumps({"embeddings": embeddings, "usageMetadata": {"promptTokenCount": size}})
    transport = httpx.MockTransport(lambda r: httpx.Response(200, content=body, headers=JSON))
    options = gtypes.HttpOptions(
        base_url="http://bench.local", httpx_client=httpx.Client(transport=transport)
    )
    return genai.Client(api_key="b", http_options=options)


def mistral_client(size: int) -> Any:
    data = [{"object": "embedding", "index": i, "embedding": _vector()} for i in range(size)]
    usage = {"prompt_tokens": size, "total_tokens": size}
    payload = {"id": "e", "object": "list", "data": data, "model": "mistral-embed", "usage": usage}
    body = json.dumps(payload).encode()
    transport = httpx2.MockTransport(lambda r: httpx2.Response(200, content=body, headers=JSON))
    return Mistral(
        api_key="b", server_url="http://bench.local", client=httpx2.Client(transport=transport)
    )


def ollama_client(size: int) -> Any:
    payload = {"model": "m", "embeddings": [_vector()] * size, "prompt_eval_count": size}
    body = json.dumps(payload).encode()
    transport = httpx.MockTransport(lambda r: httpx.Response(200, content=body, headers=JSON))
    return ollama.Client(host="http://bench.local:11434", transport=transport)


Call = Callable[[Any, list[str]], Callable[[], object]]
SDKS: dict[str, tuple[Callable[[int], Any], Call]] = {
    "openai": (openai_client, lambda c, t: lambda: c.embeddings.create(model="m", input=t)),
    "google-genai": (
        google_client,
        lambda c, t: lambda: c.models.embed_content(model="text-embedding-004", contents=t),
    ),
    "mistralai": (
        mistral_client,
        lambda c, t: lambda: c.embeddings.create(model="mistral-embed", inputs=t),
    ),
    "ollama": (ollama_client, lambda c, t: lambda: c.embed(model="m", input=t)),
}


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    rig = bench.otel_rig()

    def recording() -> Any:
        return spanledger.use(rig.recorder)

    added: dict[tuple[str, int], float] = {}
    bare_cost: dict[tuple[str, int], float] = {}
    for size in SIZES:
        texts = [f"passage {n} about ticks" for n in range(size)]
        per_batch = calls if size == 1 else max(3, calls // 10)
        variants: dict[str, Batch] = {}
        for name, (make, call) in SDKS.items():
            plain = Batch(call(make(size), texts))
            recorded = call(spanledger.instrument(make(size)), texts)
            variants[f"{name} | bare"] = plain
            variants[f"{name} | otel"] = Batch(
                recorded, recording, finish=rig.flush_spans, settle=rig.collect_metrics
            )
            variants[f"{name} | bare again"] = plain
        samples = interleaved(variants, rounds, per_batch)
        rig.spans.clear()
        for name in SDKS:
            added[name, size] = paired(samples, f"{name} | otel", f"{name} | bare")
            bare_cost[name, size] = statistics.median(samples[f"{name} | bare"])

    print("added: median of (instrumented with OTel on - bare) per call, in µs")
    print(f"{'sdk':<14}{'bare 1':>10}{'added 1':>10}{'bare 2048':>12}{'added 2048':>12}", end="")
    print(f"{'vs openai':>11}{'2048 vs 1':>11}")
    for name in SDKS:
        one, many = added[name, 1], added[name, 2048]
        print(
            f"{name:<14}{bare_cost[name, 1] * 1e6:>10.1f}{one * 1e6:>10.1f}"
            f"{bare_cost[name, 2048] * 1e6:>12.1f}{many * 1e6:>12.1f}"
            f"{one / added['openai', 1]:>11.2f}{many / one:>11.2f}"
        )
    print("targets: 'vs openai' at most 1.2; '2048 vs 1' at most 1.1")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
