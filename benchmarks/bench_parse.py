"""Parsing a large OpenAI-style embeddings response: spanledger against ``json.loads`` alone.

One run, one machine: 2048 inputs x 1536 floats. Prints each timing (median of several runs),
the ratios against the baseline measured in the same run, and peak traced memory.

Targets: float path <= 1.5x ``json.loads``; base64 path >= 3x faster than the float path;
peak memory of spanledger's parse <= 1.5x the peak of ``json.loads`` alone.
"""

from __future__ import annotations

import base64
import gc
import json
import random
import statistics
import struct
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import httpx

from spanledger.providers._calls import EmbedCall
from spanledger.providers._mapping import embedding_flow
from spanledger.providers.openai import OpenAIEmbeddingMapping

INPUTS = 2048
DIMENSIONS = 1536


def make_bodies() -> tuple[bytes, bytes]:
    rng = random.Random(7)
    vectors = [
        list(
            struct.unpack(
                f"<{DIMENSIONS}f",
                struct.pack(
                    f"<{DIMENSIONS}f", *(rng.uniform(-0.08, 0.08) for _ in range(DIMENSIONS))
                ),
            )
        )
        for _ in range(INPUTS)
    ]
    usage = {"prompt_tokens": INPUTS * 8, "total_tokens": INPUTS * 8}

    def body(embed: Callable[[list[float]], Any]) -> bytes:
        data = [
            {"object": "embedding", "index": i, "embedding": embed(v)}
            for i, v in enumerate(vectors)
        ]
        return json.dumps(
            {"object": "list", "data": data, "model": "text-embedding-3-small", "usage": usage}
        ).encode()

    def as_base64(vector: list[float]) -> str:
        return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()

    return body(lambda v: v), body(as_base64)


MAPPING = OpenAIEmbeddingMapping(
    model="text-embedding-3-small",
    base_url="http://bench.invalid",
    api_key=None,
    chunk_size=None,
    query_prefix=None,
    document_prefix=None,
)
CALL = EmbedCall([f"input {i}" for i in range(INPUTS)])


def spanledger_parse(body: bytes) -> Any:
    """The whole sans-I/O path after the bytes arrive: status, JSON, invariants, stitch."""
    flow = embedding_flow(MAPPING, CALL)
    next(flow)
    try:
        flow.send(httpx.Response(200, content=body))
    except StopIteration as done:
        return done.value
    raise AssertionError("flow wanted a second request")


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - start)
        del result
    return statistics.median(samples)


def peak_bytes(fn: Callable[[], object]) -> int:
    gc.collect()
    tracemalloc.start()
    result = fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del result
    return peak


def main() -> int:
    repeat = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    float_body, b64_body = make_bodies()
    print(
        f"body: {INPUTS} x {DIMENSIONS}: float JSON {len(float_body) / 1e6:.1f} MB, "
        f"base64 JSON {len(b64_body) / 1e6:.1f} MB; median of {repeat} runs"
    )

    response, _ = spanledger_parse(float_body)
    assert len(response.vectors) == INPUTS
    assert response.dimensions == DIMENSIONS
    decoded, _ = spanledger_parse(b64_body)
    assert decoded.vectors[5] == response.vectors[5]

    loads = median_seconds(lambda: json.loads(float_body), repeat)
    float_path = median_seconds(lambda: spanledger_parse(float_body), repeat)
    b64_path = median_seconds(lambda: spanledger_parse(b64_body), repeat)
    print(f"json.loads alone (baseline)      {loads * 1e3:8.1f} ms")
    print(
        f"spanledger float path            {float_path * 1e3:8.1f} ms   "
        f"ratio {float_path / loads:.2f}x baseline (target <= 1.5x)"
    )
    print(
        f"spanledger base64 path           {b64_path * 1e3:8.1f} ms   "
        f"float/base64 {float_path / b64_path:.2f}x faster (target >= 3x)"
    )

    loads_peak = peak_bytes(lambda: json.loads(float_body))
    parse_peak = peak_bytes(lambda: spanledger_parse(float_body))
    print(f"peak memory json.loads           {loads_peak / 1e6:8.1f} MB")
    print(
        f"peak memory spanledger parse     {parse_peak / 1e6:8.1f} MB   "
        f"ratio {parse_peak / loads_peak:.2f}x (target <= 1.5x)"
    )
    ok = float_path / loads <= 1.5 and float_path / b64_path >= 3 and parse_peak / loads_peak <= 1.5
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
