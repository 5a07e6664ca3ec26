"""spanledger against the cheapest peer measured, on the same SDK call in the same run.

The peer is OpenLLMetry's Voyage instrumentor (``opentelemetry-instrumentation-voyageai``), the
cheapest library in ``peer-measurements.md``. It is in no extra of ours; install it next to the
dev extra to run this (the script says so and exits when it is missing)::

    pip install -e '.[dev]' opentelemetry-instrumentation-voyageai
    python benchmarks/bench_peers.py [rounds] [calls]

Both export through the same tracer and meter providers as ``bench_instrument.py`` (spans flushed
inside each batch's timing, metrics collected after it) and call the same Voyage client, whose
requestor answers in process (no HTTP stack, see ``answer_in_process``). The peer is switched on
and off around each of its batches (``instrument()`` / ``uninstrument()``, outside the timing),
so every round times the bare call, spanledger and the peer one after another, and the medians
of the round-by-round differences are printed. Other peers were left out because they cannot be
compared this way: OpenLLMetry's cohere instrumentor does nothing on cohere 7.x, and its openai
instrumentor does not restore the bare call when switched off (the bare call slows down with
every switch).
"""

from __future__ import annotations

import gc
import importlib
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from functools import partial
from typing import Any

from voyageai.api_resources.api_requestor import APIRequestor, VoyageHttpResponse

import bench_instrument as bench
import spanledger
from spanledger.exporters.otel import OtelExporter

PEER_MODULE = "opentelemetry.instrumentation.voyageai"


def peer_instrumentor() -> Any | None:
    """OpenLLMetry's Voyage instrumentor, or ``None`` when it is not installed."""
    try:
        module = importlib.import_module(PEER_MODULE)
    except ImportError:
        return None
    return module.VoyageAIInstrumentor()


def voyage_cases() -> Iterator[tuple[str, int, Callable[[Any, list[str]], Callable[[], object]]]]:
    for texts, label in ((bench.SHORT, "1 short input"), (bench.LONG, "32 x 400 chars")):
        yield f"voyage embed, {label}", len(texts), bench.voyage_embed_call
        yield f"voyage rerank, {label}", len(texts), bench.voyage_rerank_call


def answer_in_process() -> None:
    """The SDK's requestor answers with the decoded body at once, with no HTTP stack under it:
    the bare call is the SDK's own work (its retry wrapper, building the result), so the
    microseconds each instrumentation adds are not lost in the noise of a ``requests``
    round trip ten times their size. Installed before anything is instrumented: spanledger's
    hook on the requestor then wraps this answer, as it would wrap the HTTP call."""
    bodies = {
        (endpoint, count): json.loads(bench.voyage_body(endpoint, count))
        for endpoint in ("embeddings", "rerank")
        for count in (len(bench.SHORT), len(bench.LONG))
    }

    def request(
        self: APIRequestor, method: str, url: str, params: Any = None, *args: Any, **kwargs: Any
    ) -> VoyageHttpResponse:
        count = len(params.get("input") or params.get("documents") or ())
        return VoyageHttpResponse(bodies[url.rsplit("/", 1)[-1], count], {})  # type: ignore[no-untyped-call]

    APIRequestor.request = request  # type: ignore[method-assign]


def timed(
    call: Callable[[], object],
    calls: int,
    finish: Callable[[], object],
    switch_on: Callable[[], object] = lambda: None,
    switch_off: Callable[[], object] = lambda: None,
    scope: Callable[[], AbstractContextManager[Any]] = nullcontext,
) -> float:
    """Seconds per call, the switches outside the timing and the span flush inside it. Each
    batch starts from a collected heap, so the collections inside it are its own."""
    switch_on()
    gc.collect()
    with scope():
        start = time.perf_counter()
        for _ in range(calls):
            call()
        finish()
        elapsed = time.perf_counter() - start
    switch_off()
    return elapsed / calls


def spans_made(rig: bench.OtelRig, batch: Callable[[], object]) -> int:
    """How many spans ``batch`` exported (a peer that silently records nothing is no peer)."""
    rig.spans.clear()
    batch()
    made = len(rig.spans.get_finished_spans())
    rig.spans.clear()
    return made


def main() -> int:
    peer = peer_instrumentor()
    if peer is None:
        print(f"{PEER_MODULE} is not installed: pip install opentelemetry-instrumentation-voyageai")
        return 0
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    rig = bench.otel_rig()
    exporter = rig.recorder.sinks[0]
    assert isinstance(exporter, OtelExporter)
    tracer_provider, meter_provider = exporter._providers
    answer_in_process()

    def ours_on() -> AbstractContextManager[Any]:
        return spanledger.use(rig.recorder)

    def peer_on() -> None:
        peer.instrument(tracer_provider=tracer_provider, meter_provider=meter_provider)

    def settled() -> None:
        rig.collect_metrics()

    names: list[str] = []
    runs: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {}
    floors: dict[str, tuple[Callable[[], object], Callable[[], object]]] = {}
    for name, size, make_call in voyage_cases():
        texts = bench.LONG if size > 1 else bench.SHORT
        bare = make_call(bench.voyage_client(size), texts)
        ours = make_call(spanledger.instrument(bench.voyage_client(size)), texts)
        runs[name] = (bare, ours)
        floors[name] = (rig.current_around(bare), bench.span_only(exporter, ours, bare))
        names.append(name)

    for name, (bare, ours) in runs.items():
        made = spans_made(rig, partial(timed, bare, 1, rig.flush_spans, peer_on, peer.uninstrument))
        ours_made = spans_made(rig, partial(timed, ours, 1, rig.flush_spans, scope=ours_on))
        if made != 1 or ours_made != 1:
            print(f"{name}: a call made {made} peer span(s), {ours_made} of ours; not comparable")
            return 1

    samples: dict[str, dict[str, list[float]]] = {
        name: {"bare": [], "ours": [], "bare again": [], "peer": [], "hand": [], "span": []}
        for name in names
    }
    for round_number in range(rounds + 1):  # round 0 warms up
        gc.collect()
        for name, (bare, ours) in runs.items():
            hand, span = floors[name]
            figures = {
                "bare": timed(bare, calls, rig.flush_spans),
                "ours": timed(ours, calls, rig.flush_spans, scope=ours_on),
                "hand": timed(hand, calls, rig.flush_spans),
                "span": timed(span, calls, rig.flush_spans),
                "bare again": timed(bare, calls, rig.flush_spans),
                "peer": timed(bare, calls, rig.flush_spans, peer_on, peer.uninstrument),
            }
            settled()
            if round_number:
                for variant, seconds in figures.items():
                    samples[name][variant].append(seconds)
    rig.spans.clear()

    print("added per call with OTel export on, same pipeline, same run")
    print(
        f"{'call':28s} {'bare':>9s} {'spanledger':>11s} {'OpenLLMetry':>12s} {'ratio':>6s}"
        f" {'hand span':>10s} {'/peer':>6s} {'our span':>9s}"
    )
    for name in names:
        got = samples[name]
        added = _added(got, "ours", "bare")
        theirs = _added(got, "peer", "bare again")
        by_hand = _added(got, "hand", "bare")
        our_span = _added(got, "span", "bare")
        print(
            f"{name:28s} {statistics.median(got['bare']) * 1e6:7.1f}us {added * 1e6:+9.1f}us "
            f"{theirs * 1e6:+10.1f}us {added / theirs:6.2f} {by_hand * 1e6:+8.1f}us "
            f"{by_hand / theirs:6.2f} {our_span * 1e6:+7.1f}us"
        )
    print()
    print(
        "hand span: the call made the current span by hand, with the attributes of ours and no"
        " capture (the floor of what the target keeps); our span: our exporter rendering one"
        " prebuilt start notice and event around the call, no capture"
    )
    return 0


def _added(samples: dict[str, list[float]], variant: str, baseline: str) -> float:
    """Median of the round-by-round differences, in seconds."""
    return statistics.median(
        a - b for a, b in zip(samples[variant], samples[baseline], strict=True)
    )


if __name__ == "__main__":
    raise SystemExit(main())
