"""Pricing and aggregating 1,000,000 events, against a floor measured in the same run.

The floor is the least any ledger must do: read the same usage figures from the same event
objects and do the same Decimal arithmetic into a dict of totals. spanledger's ledger also
resolves the price entry (exact name or glob, validity window), builds a ``CostLine`` per event
and groups by request, provider, model, status and currency. Target: at most 3x the floor, and
memory that grows with the number of groups, not the number of events.
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from decimal import Decimal

from spanledger.events import EmbeddingEvent, EmbeddingUsage, Event, RerankEvent, RerankUsage
from spanledger.ledger import Ledger, PriceTable, Totals

TABLE = PriceTable.from_dict(
    {
        "currency": "USD",
        "prices": [
            {"provider": "openai", "model": "text-embedding-3-*", "input_per_mtok": "0.02"},
            {"provider": "openai", "model": "text-embedding-3-large", "input_per_mtok": "0.13"},
            {"provider": "cohere", "model": "rerank-v3.5", "per_search_unit": "0.002"},
            {"provider": "cohere", "model": "embed-v4.0", "input_per_mtok": "0.12"},
        ],
    }
)
RATES = {
    ("openai", "text-embedding-3-small"): Decimal("0.02") / 1_000_000,
    ("openai", "text-embedding-3-large"): Decimal("0.13") / 1_000_000,
    ("cohere", "embed-v4.0"): Decimal("0.12") / 1_000_000,
    ("cohere", "rerank-v3.5"): Decimal("0.002"),
}


def make_pool(size: int) -> list[Event]:
    started = datetime(2026, 11, 1, tzinfo=UTC)
    models = [m for _, m in RATES]
    pool: list[Event] = []
    for i in range(size):
        request_id = f"req-{i % 50}"
        model = models[i % len(models)]
        if model == "rerank-v3.5":
            pool.append(
                RerankEvent(
                    call_id=f"c{i}", request_id=request_id, provider="cohere", model=model,
                    started_at=started, latency_ms=3.0, query_length=20, document_count=40,
                    result_count=5, usage=RerankUsage(search_units=1 + i % 3),
                )
            )  # fmt: skip
        else:
            provider = "cohere" if model == "embed-v4.0" else "openai"
            pool.append(
                EmbeddingEvent(
                    call_id=f"c{i}", request_id=request_id, provider=provider, model=model,
                    started_at=started, latency_ms=2.0, input_count=8, dimensions=16,
                    usage=EmbeddingUsage(input_tokens=100 + i),
                )
            )  # fmt: skip
    return pool


def stream(pool: Sequence[Event], count: int) -> Iterator[Event]:
    for i in range(count):
        yield pool[i % len(pool)]


def floor(events: Iterator[Event]) -> dict[tuple[str, str, str], Decimal]:
    totals: dict[tuple[str, str, str], Decimal] = {}
    for event in events:
        usage = event.usage  # type: ignore[union-attr]
        figure = usage.search_units if isinstance(usage, RerankUsage) else usage.input_tokens  # type: ignore[union-attr]
        key = (event.request_id or "", event.provider, event.model)
        rate = RATES[(event.provider, event.model)]
        totals[key] = totals.get(key, Decimal(0)) + rate * (figure or 0)
    return totals


def ledger_run(events: Iterator[Event]) -> Totals:
    ledger = Ledger(TABLE, warn=False)
    totals = Totals()
    for event in events:
        totals.add(event, ledger.price(event))
    return totals


def timed(fn: object, *args: object) -> tuple[float, object]:
    gc.collect()
    start = time.perf_counter()
    result = fn(*args)  # type: ignore[operator]
    return time.perf_counter() - start, result


def peak(fn: object, *args: object) -> int:
    gc.collect()
    tracemalloc.start()
    fn(*args)  # type: ignore[operator]
    _, top = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return top


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    pool = make_pool(1000)
    floor_s, floor_totals = timed(floor, stream(pool, count))
    ledger_s, totals = timed(ledger_run, stream(pool, count))
    assert isinstance(totals, Totals)
    assert isinstance(floor_totals, dict)
    ours = sum(totals.spend().values(), Decimal(0))
    assert ours == sum(floor_totals.values(), Decimal(0)), "totals disagree"
    ratio = ledger_s / floor_s
    print(f"events priced and aggregated: {count:,}  ({len(totals.groups)} groups)")
    for name, seconds in (("floor (figures + Decimal into a dict)", floor_s),
                          ("spanledger Ledger + Totals", ledger_s)):  # fmt: skip
        print(f"{name:38s} {seconds:7.2f} s  {seconds / count * 1e6:6.2f} us/event")
    print(f"ratio {ratio:.2f}x floor (target <= 3x); totals identical: {ours}")
    small, large = (
        peak(ledger_run, stream(pool, count // 10)),
        peak(ledger_run, stream(pool, count)),
    )
    print(
        f"peak traced memory: {small / 1e3:.0f} kB for {count // 10:,} events, "
        f"{large / 1e3:.0f} kB for {count:,} (grows with groups, not events)"
    )
    ok = ratio <= 3 and large < small * 1.5
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
