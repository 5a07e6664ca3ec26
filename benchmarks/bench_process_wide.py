"""A call through the process-wide switch against the same call on a client instrumented by hand.

Once the switch has instrumented a client (on its first call), that client's own wrappers take
its calls, and the SDK class's wrapper adds one hop: it sees the client is instrumented and
passes the call to the SDK. Target: at most 1.05 x the hand-instrumented call, for the OpenAI
embeddings call, Cohere v2 and v1 rerank (an ``httpx.MockTransport``) and Voyage embed (its
requestor answering in process), with a recorder whose only sink does nothing. Rounds are
interleaved and the medians of the round-by-round ratios printed; nothing is asserted.

    python benchmarks/bench_process_wide.py [rounds] [calls]
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from typing import Any

import cohere

import bench_instrument as bench
import spanledger
from bench_capture import answer_in_process
from bench_instrument import Batch, NullSink, interleaved


def main() -> int:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 21
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 200
    answer_in_process()
    null = spanledger.Recorder([NullSink()])

    def scope() -> Any:
        return spanledger.use(null)

    makers: dict[str, tuple[Callable[[], Any], Callable[[Any], Callable[[], object]]]] = {
        "openai embeddings": (
            lambda: bench.openai_client(1),
            lambda client: bench.openai_call(client, bench.SHORT),
        ),
        "cohere rerank": (
            lambda: bench.cohere_client(1),
            lambda client: bench.cohere_call(client, bench.SHORT),
        ),
        "cohere v1 rerank": (
            lambda: bench.cohere_client(1, cohere.Client),
            lambda client: bench.cohere_call(client, bench.SHORT),
        ),
        "voyage embed": (
            lambda: bench.voyage_client(1),
            lambda client: bench.voyage_embed_call(client, bench.SHORT),
        ),
    }
    by_hand = {name: call(spanledger.instrument(make())) for name, (make, call) in makers.items()}
    spanledger.instrument()
    switched = {name: call(make()) for name, (make, call) in makers.items()}
    variants: dict[str, Batch] = {}
    for name in makers:
        variants[f"{name} | by hand"] = Batch(by_hand[name], scope)
        variants[f"{name} | switch"] = Batch(switched[name], scope)
    samples = interleaved(variants, rounds, calls)
    spanledger.uninstrument()

    print("process-wide switch against instrument(client), same run")
    print(f"{'call':20s} {'by hand':>10s} {'switch':>10s} {'ratio':>7s}")
    for name in makers:
        hand, switch = samples[f"{name} | by hand"], samples[f"{name} | switch"]
        ratio = statistics.median(s / h for s, h in zip(switch, hand, strict=True))
        print(
            f"{name:20s} {statistics.median(hand) * 1e6:8.1f}us "
            f"{statistics.median(switch) * 1e6:8.1f}us {ratio:6.3f}x (target <= 1.05x)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
