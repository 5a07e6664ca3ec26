"""Many concurrent emits (threads and asyncio tasks) into a priced recorder feeding Totals:
nothing lost, totals exact against independent Decimal arithmetic; odd input along the way."""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal, localcontext

from spanledger import EmbeddingUsage, Recorder, RerankUsage
from spanledger.costs import CostStatus
from spanledger.events import Event
from spanledger.ledger import Totals

from .conftest import (
    embedding_event,
    embedding_failed_event,
    entry,
    rerank_event,
    rerank_failed_event,
    table,
)

TOKEN_RATE = Decimal("0.0000001234567")
ODD_RATE = Decimal("0.987654321987654321")
UNIT_RATE = Decimal("0.00213")
PER_REQUEST = Decimal("0.000007")
PRICES = table(
    entry("openai", "text-embedding-3-small", input_per_mtok=str(TOKEN_RATE)),
    entry("openai", "org/model:v1@sha", input_per_mtok=str(ODD_RATE)),
    entry("jina", "模型-*", input_per_mtok="0.05", per_request=str(PER_REQUEST)),
    entry("cohere", "rerank-v3.5", per_search_unit=str(UNIT_RATE)),
)
TOTAL = 10_000


class TotalsSink:
    """Feeds every priced event into a Totals, and counts what it saw."""

    def __init__(self) -> None:
        self.totals = Totals()
        self._lock = threading.Lock()
        self.seen = 0
        self.without_cost = 0

    def emit(self, event: Event) -> None:
        with self._lock:
            self.seen += 1
        if event.cost is None:
            with self._lock:
                self.without_cost += 1
            return
        self.totals.add(event, event.cost)


def _events(count: int, seed: int) -> list[Event]:
    """A reproducible mix of every cost status, with odd model names and missing usage."""
    chooser = random.Random(seed)
    made: list[Event] = []
    for n in range(count):
        kind = n % 8
        tokens = chooser.randint(0, 50_000)
        if kind == 0:
            made.append(embedding_event("text-embedding-3-small", tokens=tokens, request_id="a"))
        elif kind == 1:
            made.append(embedding_event("org/model:v1@sha", tokens=tokens, request_id="b"))
        elif kind == 2:
            made.append(
                rerank_event("模型-rerank", provider="jina", usage=RerankUsage(input_tokens=tokens))
            )
        elif kind == 3:
            units = chooser.randint(1, 9)
            made.append(rerank_event(usage=RerankUsage(search_units=units)))
        elif kind == 4:
            made.append(rerank_failed_event(estimated=RerankUsage(search_units=2)))
        elif kind == 5:
            made.append(
                embedding_failed_event(
                    "text-embedding-3-small", estimated=EmbeddingUsage(input_tokens=tokens)
                )
            )
        elif kind == 6:
            made.append(embedding_event("a[b]-unlisted", tokens=tokens))  # unpriced
        else:
            made.append(rerank_event("模型-rerank", provider="jina", usage=None))  # unmetered
    return made


def _expected(events: list[Event]) -> tuple[dict[tuple[str, str, str], Decimal], Counter[str]]:
    """Independent Decimal arithmetic, at a precision far above what the amounts need:
    the amount per (provider, model, status), and the number of events per status."""
    amounts: dict[tuple[str, str, str], Decimal] = {}
    statuses: Counter[str] = Counter()
    with localcontext() as context:
        context.prec = 100
        million = Decimal(1_000_000)
        for event in events:
            usage = getattr(event, "usage", None) or getattr(event, "estimated_usage", None)
            amount = Decimal(0)
            if event.model == "a[b]-unlisted":
                status = "unpriced"
            elif usage is None:
                status, amount = "unmetered", PER_REQUEST
            else:
                status = "estimated" if event.kind.endswith("_failed") else "priced"
                if event.model == "text-embedding-3-small":
                    amount = TOKEN_RATE * usage.input_tokens / million
                elif event.model == "org/model:v1@sha":
                    amount = ODD_RATE * usage.input_tokens / million
                elif event.provider == "jina":
                    amount = Decimal("0.05") * usage.input_tokens / million + PER_REQUEST
                else:
                    assert isinstance(usage, RerankUsage)
                    assert usage.search_units is not None
                    amount = UNIT_RATE * usage.search_units
            statuses[status] += 1
            key = (event.provider, event.model, status)
            amounts[key] = amounts.get(key, Decimal(0)) + amount
    return amounts, statuses


def _check(sink: TotalsSink, recorder: Recorder, events: list[Event]) -> None:
    amounts, statuses = _expected(events)
    assert sink.seen == len(events)
    assert sink.without_cost == 0
    assert recorder.pricing_failures == 0
    (stats,) = recorder.stats.values()
    assert stats.delivered == len(events)
    assert stats.failed == 0
    totals = sink.totals
    for status in CostStatus:
        assert totals.count(status) == statuses[status.value], status
    assert sum(statuses.values()) == len(events)
    rolled = totals.by("provider", "model", "status")
    assert set(rolled) == set(amounts)
    for key, amount in amounts.items():
        assert rolled[key].amount == amount, key
    assert sum(group.calls for group in rolled.values()) == len(events)
    known = sum(
        (amount for (_, _, status), amount in amounts.items() if status in ("priced", "estimated")),
        Decimal(0),
    )
    assert totals.spend() == {"USD": known}
    assert len(totals.groups) == len(amounts)


def test_ten_thousand_emits_from_threads_are_exact() -> None:
    events = _events(TOTAL, seed=7)
    sink = TotalsSink()
    recorder = Recorder([sink], prices=PRICES)
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(recorder.emit, events))
    _check(sink, recorder, events)


async def test_ten_thousand_emits_from_tasks_and_threads_at_once_are_exact() -> None:
    events = _events(TOTAL, seed=11)
    from_tasks, from_threads = events[: TOTAL // 2], events[TOTAL // 2 :]
    sink = TotalsSink()
    recorder = Recorder([sink], prices=PRICES)

    async def emit_soon(event: Event) -> None:
        await asyncio.sleep(0)
        recorder.emit(event)

    def emit_all(chunk: list[Event]) -> None:
        for event in chunk:
            recorder.emit(event)

    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(max_workers=8) as pool:
        threaded = [loop.run_in_executor(pool, emit_all, from_threads[i::8]) for i in range(8)]
        tasks = [asyncio.create_task(emit_soon(event)) for event in from_tasks]
        await asyncio.gather(*tasks, *threaded)
    _check(sink, recorder, events)


async def test_emits_from_to_thread_and_tasks_lose_nothing() -> None:
    events = _events(2_000, seed=3)
    sink = TotalsSink()
    recorder = Recorder([sink], prices=PRICES)

    async def emit_soon(event: Event) -> None:
        await asyncio.sleep(0)
        recorder.emit(event)

    half = len(events) // 2
    await asyncio.gather(
        *(asyncio.to_thread(recorder.emit, event) for event in events[:half]),
        *(emit_soon(event) for event in events[half:]),
    )
    _check(sink, recorder, events)
