"""What capture alone costs per SDK call, and whether it grows with the size of the call.

The Voyage SDK answers in process through a ``requests`` adapter (as in ``bench_instrument``),
and the recorder's only sink does nothing, so the difference between an instrumented and a bare
call is spanledger's capture: facts, the attempt's recording, reading the body by its endpoint's
rules, and building the start notice and the event.

Two sizes of the same call, 1 input and 2,048 inputs:

- rerank with ``top_k=10``: the answer holds 10 results whatever the number of documents, so any
  growth is spanledger reading the call's inputs. Target: 2,048 documents at most 1.1 x 1.
- embed: the answer holds one vector per input and every path checks every vector (count,
  indices, widths, finite numbers), so capture grows with the answer; printed per vector, next
  to what the SDK itself spends decoding the same answer.

Target for capture alone: at most 20 us per call. Rounds are interleaved and medians of the
round-by-round differences are printed; nothing is asserted.

    python benchmarks/bench_capture.py [rounds] [calls]
"""

from __future__ import annotations

import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

import requests
import voyageai
from voyageai.client import Client as VoyageClient

import spanledger
from bench_instrument import Batch, NullSink, interleaved, paired

SIZES = (1, 2048)
TOP_K = 10
DIMENSIONS = 64


def texts(count: int) -> list[str]:
    return [f"passage {n} about ticks and lyme disease" for n in range(count)]


def body(endpoint: str, count: int, top_k: int | None) -> bytes:
    if endpoint == "embeddings":
        data: list[dict[str, Any]] = [
            {"object": "embedding", "embedding": [0.125] * DIMENSIONS, "index": i}
            for i in range(count)
        ]
    else:
        kept = count if top_k is None else min(count, top_k)
        data = [{"relevance_score": 1.0 - i / (kept + 1), "index": i} for i in range(kept)]
    usage = {"total_tokens": 3 * count}
    return json.dumps({"object": "list", "data": data, "model": "m", "usage": usage}).encode()


class Replies(requests.adapters.BaseAdapter):
    """The Voyage endpoint's answer for as many inputs as were sent (rerank: ``top_k`` kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: dict[tuple[str, int], bytes] = {}

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        sent = json.loads(request.body or b"{}")
        endpoint = (request.path_url or "").rsplit("/", 1)[-1]
        count = len(sent.get("input") or sent.get("documents") or ())
        key = (endpoint, count)
        if key not in self.bodies:
            self.bodies[key] = body(endpoint, count, sent.get("top_k"))
        response = requests.Response()
        response.status_code = 200
        response._content = self.bodies[key]
        response.headers["content-type"] = "application/json"
        response.encoding = "utf-8"
        response.url = request.url or ""
        response.request = request
        return response

    def close(self) -> None:
        return None


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    session = requests.Session()
    session.mount("https://", Replies())
    voyageai.requestssession = session
    null = spanledger.Recorder([NullSink()])
    bare = VoyageClient(api_key="bench", max_retries=0)
    ours = spanledger.instrument(VoyageClient(api_key="bench", max_retries=0))

    def scope() -> Any:
        return spanledger.use(null)

    def rerank(client: VoyageClient, words: list[str]) -> Callable[[], object]:
        return lambda: client.rerank("ticks", words, model="rerank-2.5", top_k=TOP_K)

    def embed(client: VoyageClient, words: list[str]) -> Callable[[], object]:
        return lambda: client.embed(words, model="voyage-3.5")

    variants: dict[str, Batch] = {}
    for size in SIZES:
        words = texts(size)
        for name, make in (("rerank", rerank), ("embed", embed)):
            variants[f"{name} {size} | bare"] = Batch(make(bare, words))
            variants[f"{name} {size} | ours"] = Batch(make(ours, words), scope)
            variants[f"{name} {size} | bare again"] = Batch(make(bare, words))
    samples = interleaved(variants, rounds, calls)

    print("capture alone (a sink that does nothing), Voyage SDK in process, same run")
    print(f"{'call':22s} {'bare':>10s} {'capture':>10s}")
    capture: dict[tuple[str, int], float] = {}
    for size in SIZES:
        for name in ("rerank", "embed"):
            key = f"{name} {size}"
            added = statistics.median(
                [
                    paired(samples, f"{key} | ours", f"{key} | bare"),
                    paired(samples, f"{key} | ours", f"{key} | bare again"),
                ]
            )
            capture[name, size] = added
            bare_us = statistics.median(samples[f"{key} | bare"]) * 1e6
            print(f"{key:22s} {bare_us:8.1f}us {added * 1e6:+8.1f}us")
    small, large = SIZES
    flat = capture["rerank", large] / capture["rerank", small]
    per_vector = (capture["embed", large] - capture["embed", small]) / (large - small)
    print()
    print(
        f"capture alone, 1 input: rerank {capture['rerank', small] * 1e6:.1f}us, "
        f"embed {capture['embed', small] * 1e6:.1f}us (target <= 20us)"
    )
    print(f"rerank, {large} documents (top_k={TOP_K}) / 1 document: {flat:.2f}x (target <= 1.1x)")
    print(f"embed: +{per_vector * 1e6:.2f}us per {DIMENSIONS}-float vector checked")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
