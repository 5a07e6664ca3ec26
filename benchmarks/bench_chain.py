"""What a rerank chain costs over the step it runs, measured in the same run.

A Cohere reranker answers from an in-process mock transport (no network). Printed, never
asserted:

1. a chain whose first step answers / that step called alone, with no recorder and with OTel
   export on (the chain adds its own span there) — target: at most 1.1; once on the in-process
   mock (the harshest case: a call of about 0.2 ms) and once against the stand-in over a
   loopback socket (a real HTTP exchange, still far quicker than a remote reranker). A sync
   chain runs a remote step on a worker thread it can stop waiting for, so this includes a
   hand-off to that thread and back;
2. the same with a BM25 step alone against ``BM25Step.rank``: over a small input (run on the
   chain's own thread) and over one past ``INLINE_CHARACTERS`` (run on a worker thread);
3. a chain whose only step's circuit breaker is open (skipped ``circuit_open``): its time per
   chain, against an empty function call — target: under 50 µs.

Usage: ``python benchmarks/bench_chain.py [rounds] [calls]``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import httpx

import bench_instrument as bench
import spanledger
from bench_instrument import Batch, interleaved, ratio
from spanledger.chains import BM25Step, Breakers, with_fallback
from spanledger.chains.steps import INLINE_CHARACTERS
from spanledger.providers import CohereReranker
from spanledger.testing import StandIn

QUERY = "what pulls the tides"
DOCUMENTS = [f"passage {n} about the moon, the sea and the tides" for n in range(20)]
LONGER = [f"{document}, told again and again " * 3 for document in DOCUMENTS] * 2
"""40 documents past ``INLINE_CHARACTERS``: BM25 over them runs on a worker thread."""


def cohere_reranker() -> CohereReranker:
    bodies: dict[object, bytes] = {}

    def answer(request: httpx.Request) -> httpx.Response:
        top_n = json.loads(request.content).get("top_n")
        body = bodies.get(top_n)
        if body is None:
            count = len(DOCUMENTS) if top_n is None else top_n
            results = [{"index": i, "relevance_score": 1 - i / 100} for i in range(count)]
            meta = {"billed_units": {"search_units": 1}}
            body = bodies[top_n] = json.dumps(
                {"id": "r", "results": results, "meta": meta}
            ).encode()
        return httpx.Response(200, content=body, headers={"content-type": "application/json"})

    transport = httpx.MockTransport(answer)
    return CohereReranker(
        "rerank-v3.5", api_key="bench", http_client=httpx.Client(transport=transport)
    )


def open_breaker(breakers: Breakers, reranker: CohereReranker) -> None:
    breaker = breakers.get(reranker.provider, reranker.model)
    for _ in range(breaker.failures):
        breaker.failed()
    assert breaker.state == "open"


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    rig = bench.otel_rig()
    reranker = cohere_reranker()
    bm25 = BM25Step()

    def alone() -> object:
        return reranker.rerank(QUERY, DOCUMENTS, top_k=5, timeout=10.0)

    def chained() -> object:
        return with_fallback([reranker], QUERY, DOCUMENTS, top_k=5)

    def bm25_alone() -> object:
        return bm25.rank(QUERY, DOCUMENTS, 5, None)

    def bm25_chained() -> object:
        return with_fallback([bm25], QUERY, DOCUMENTS, top_k=5)

    assert sum(map(len, LONGER)) > INLINE_CHARACTERS >= sum(map(len, DOCUMENTS))

    def bm25_longer_alone() -> object:
        return bm25.rank(QUERY, LONGER, 5, None)

    def bm25_longer_chained() -> object:
        return with_fallback([bm25], QUERY, LONGER, top_k=5)

    standin = StandIn().start()
    loopback = CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere"), api_key="b")

    def loopback_alone() -> object:
        return loopback.rerank(QUERY, DOCUMENTS, top_k=5, timeout=10.0)

    def loopback_chained() -> object:
        return with_fallback([loopback], QUERY, DOCUMENTS, top_k=5)

    def otel() -> Any:
        return spanledger.use(rig.recorder)

    def exported(call: Any) -> Batch:
        return Batch(call, otel, finish=rig.flush_spans, settle=rig.collect_metrics)

    samples = interleaved(
        {
            "step alone": Batch(alone),
            "chain": Batch(chained),
            "step alone, otel": exported(alone),
            "chain, otel": exported(chained),
            "bm25 alone": Batch(bm25_alone),
            "bm25 chain": Batch(bm25_chained),
            "bm25 longer alone": Batch(bm25_longer_alone),
            "bm25 longer chain": Batch(bm25_longer_chained),
            "loopback alone": Batch(loopback_alone),
            "loopback chain": Batch(loopback_chained),
            "loopback alone, otel": exported(loopback_alone),
            "loopback chain, otel": exported(loopback_chained),
        },
        rounds,
        calls,
    )
    rig.spans.clear()
    loopback.close()
    standin.stop()

    breakers = Breakers(failures=3, window=60, cooldown=3600)
    open_breaker(breakers, reranker)

    def skipped() -> object:
        return with_fallback([reranker], QUERY, DOCUMENTS, top_k=5, breakers=breakers)

    outcome = with_fallback([reranker], QUERY, DOCUMENTS, top_k=5, breakers=breakers)
    assert outcome.attempts[0].reason == "circuit_open", outcome
    skip_times = []
    empty_times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            skipped()
        skip_times.append((time.perf_counter() - start) / calls)
        start = time.perf_counter()
        for _ in range(calls):
            bench_nothing()
        empty_times.append((time.perf_counter() - start) / calls)

    def median_us(name: str) -> float:
        return statistics.median(samples[name]) * 1e6

    print(f"per call, median of {rounds} rounds of {calls} calls (µs)")
    for name in samples:
        print(f"  {name:<21}{median_us(name):>10.1f}")
    print(f"chain / step alone, no recorder: {ratio(samples, 'chain', 'step alone'):.3f}")
    print(
        f"chain / step alone, OTel export: {ratio(samples, 'chain, otel', 'step alone, otel'):.3f}"
    )
    print(f"bm25 chain / bm25 step alone:    {ratio(samples, 'bm25 chain', 'bm25 alone'):.3f}")
    longer = ratio(samples, "bm25 longer chain", "bm25 longer alone")
    print(f"  over a longer input (worker):  {longer:.3f}")
    loop = ratio(samples, "loopback chain", "loopback alone")
    loop_otel = ratio(samples, "loopback chain, otel", "loopback alone, otel")
    print(f"over loopback, no recorder:      {loop:.3f}")
    print(f"over loopback, OTel export:      {loop_otel:.3f}")
    skip_us = statistics.median(skip_times) * 1e6
    empty_us = statistics.median(empty_times) * 1e6
    print(f"breaker-open skip: {skip_us:.1f} µs per chain ({empty_us:.2f} µs an empty call)")
    print("targets: chain / step alone at most 1.1; a breaker-open skip under 50 µs")
    return 0


def bench_nothing() -> None:
    return None


if __name__ == "__main__":
    raise SystemExit(main())
