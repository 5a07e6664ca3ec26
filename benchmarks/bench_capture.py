"""What capture alone costs per SDK call, and whether it grows with the size of the call.

The Voyage SDK's requestor answers in process with the decoded body (no HTTP stack under it, so
the few microseconds measured are not lost in a ``requests`` round trip's noise; spanledger's
hook on the requestor wraps this answer as it would the HTTP call), and the recorder's only sink
does nothing, so the difference between an instrumented and a bare call is spanledger's capture:
facts, the attempt's recording, reading the body by its endpoint's rules, and building the start
notice and the event.

- rerank with ``top_k=10``, at 10 documents and at 2,048: both answers hold 10 results, so any
  growth is spanledger reading the call's inputs. Target: 2,048 documents at most 1.1 x 10.
  (One document is printed too; its answer holds one result, so it is not the comparison.)
- embed at 1 input and 2,048: the answer holds one vector per input and every path checks every
  vector (count, indices, widths, finite numbers), so capture grows with the answer; printed per
  vector.

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

from voyageai.api_resources.api_requestor import APIRequestor, VoyageHttpResponse
from voyageai.client import Client as VoyageClient

import spanledger
from bench_instrument import Batch, NullSink, interleaved, paired

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


def answer_in_process() -> None:
    """The requestor answers with the endpoint's decoded body for as many inputs as were sent
    (rerank: ``top_k`` kept), each body made once. Installed before anything is instrumented."""
    bodies: dict[tuple[str, int, int | None], Any] = {}

    def request(
        self: APIRequestor, method: str, url: str, params: Any = None, *args: Any, **kwargs: Any
    ) -> VoyageHttpResponse:
        endpoint = url.rsplit("/", 1)[-1]
        count = len(params.get("input") or params.get("documents") or ())
        key = (endpoint, count, params.get("top_k"))
        if key not in bodies:
            bodies[key] = json.loads(body(*key))
        return VoyageHttpResponse(bodies[key], {})  # type: ignore[no-untyped-call]

    APIRequestor.request = request  # type: ignore[method-assign]


CASES = (("rerank", 1), ("rerank", TOP_K), ("rerank", 2048), ("embed", 1), ("embed", 2048))


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    answer_in_process()
    null = spanledger.Recorder([NullSink()])
    bare = VoyageClient(api_key="bench", max_retries=0)
    ours = spanledger.instrument(VoyageClient(api_key="bench", max_retries=0))

    def scope() -> Any:
        return spanledger.use(null)

    def rerank(client: VoyageClient, words: list[str]) -> Callable[[], object]:
        return lambda: client.rerank("ticks", words, model="rerank-2.5", top_k=TOP_K)

    def embed(client: VoyageClient, words: list[str]) -> Callable[[], object]:
        return lambda: client.embed(words, model="voyage-3.5")

    makers = {"rerank": rerank, "embed": embed}
    variants: dict[str, Batch] = {}
    for name, size in CASES:
        words, make = texts(size), makers[name]
        variants[f"{name} {size} | bare"] = Batch(make(bare, words))
        variants[f"{name} {size} | ours"] = Batch(make(ours, words), scope)
        variants[f"{name} {size} | bare again"] = Batch(make(bare, words))
    samples = interleaved(variants, rounds, calls)

    print("capture alone (a sink that does nothing), Voyage SDK answering in process, same run")
    print(f"{'call':22s} {'bare':>10s} {'capture':>10s}")
    capture: dict[tuple[str, int], float] = {}
    for name, size in CASES:
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
    flat = capture["rerank", 2048] / capture["rerank", TOP_K]
    per_vector = (capture["embed", 2048] - capture["embed", 1]) / 2047
    print()
    print(
        f"capture alone, 1 input: rerank {capture['rerank', 1] * 1e6:.1f}us, "
        f"embed {capture['embed', 1] * 1e6:.1f}us (target <= 20us)"
    )
    print(
        f"rerank, 2048 documents / {TOP_K} documents (both answers {TOP_K} results): "
        f"{flat:.2f}x (target <= 1.1x)"
    )
    print(f"embed: +{per_vector * 1e6:.2f}us per {DIMENSIONS}-float vector checked")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
