"""Totals: groups by request, provider, model, status and currency; roll-ups; spend per
currency; counts per status; memory bounded by the number of groups."""

from __future__ import annotations

from decimal import Decimal

from spanledger import EmbeddingUsage, RerankUsage
from spanledger.costs import CostLine, CostStatus
from spanledger.events import Event
from spanledger.ledger import GroupKey, GroupTotal, Ledger, Totals

from .conftest import (
    embedding_event,
    embedding_failed_event,
    entry,
    rerank_event,
    rerank_failed_event,
    table,
)

PRICES = table(
    entry("openai", "text-embedding-3-small", input_per_mtok="0.02"),
    entry("openai", "text-embedding-3-large", input_per_mtok="0.13"),
    entry("cohere", "rerank-v3.5", per_search_unit="0.002"),
    entry("mistral", "mistral-embed", input_per_mtok="0.1", currency="EUR"),
    entry("openai", "usage-*", input_per_mtok="0.02"),
)


def _priced(*events: Event) -> list[tuple[Event, CostLine]]:
    ledger = Ledger(PRICES, warn=False)
    return [(event, ledger.price(event)) for event in events]


def _mixed() -> list[Event]:
    return [
        embedding_event("text-embedding-3-small", tokens=1000, request_id="r1"),
        embedding_event("text-embedding-3-small", tokens=3000, request_id="r1"),
        embedding_event("text-embedding-3-small", tokens=500, request_id="r2"),
        embedding_event("text-embedding-3-large", tokens=2000, request_id="r1"),
        rerank_event(usage=RerankUsage(search_units=3), request_id="r1"),
        rerank_failed_event(estimated=RerankUsage(search_units=2), request_id="r1"),
        rerank_failed_event(request_id="r2"),
        embedding_event("mistral-embed", provider="mistral", tokens=10_000),
        embedding_event("unknown", tokens=7, request_id="r2"),
        embedding_event("unknown", tokens=9, request_id="r2"),
        embedding_event("usage-missing", tokens=None, request_id="r2"),
    ]


def _totals() -> Totals:
    totals = Totals()
    totals.extend(_priced(*_mixed()))
    return totals


def test_groups_are_keyed_by_request_provider_model_status_and_currency() -> None:
    groups = _totals().groups
    small_r1 = groups[GroupKey("r1", "openai", "text-embedding-3-small", "priced", "USD")]
    assert small_r1 == GroupTotal(
        calls=2, amount=Decimal("0.00008"), input_tokens=4000, input_tokens_calls=2
    )
    small_r2 = groups[GroupKey("r2", "openai", "text-embedding-3-small", "priced", "USD")]
    assert small_r2 == GroupTotal(
        calls=1, amount=Decimal("0.00001"), input_tokens=500, input_tokens_calls=1
    )
    assert groups[GroupKey("r1", "cohere", "rerank-v3.5", "priced", "USD")] == GroupTotal(
        calls=1, amount=Decimal("0.006"), search_units=3, search_units_calls=1, reranks=1
    )
    estimated = groups[GroupKey("r1", "cohere", "rerank-v3.5", "estimated", "USD")]
    assert estimated.calls == 1
    assert estimated.amount == Decimal("0.004")
    not_billed = groups[GroupKey("r2", "cohere", "rerank-v3.5", "not_billed", "")]
    assert not_billed == GroupTotal(calls=1, amount=Decimal(0), reranks=1)
    euro = groups[GroupKey("", "mistral", "mistral-embed", "priced", "EUR")]
    assert euro.amount == Decimal("0.001")
    unpriced = groups[GroupKey("r2", "openai", "unknown", "unpriced", "")]
    assert unpriced.calls == 2
    assert unpriced.amount == 0  # a count, not a number: unknown spend never becomes a figure
    assert unpriced.input_tokens == 16
    unmetered = groups[GroupKey("r2", "openai", "usage-missing", "unmetered", "")]
    assert unmetered.calls == 1
    assert len(groups) == 9
    assert sum(group.calls for group in groups.values()) == len(_mixed())


def test_roll_up_by_provider_and_model() -> None:
    rolled = _totals().by("provider", "model")
    assert set(rolled) == {
        ("openai", "text-embedding-3-small"),
        ("openai", "text-embedding-3-large"),
        ("cohere", "rerank-v3.5"),
        ("mistral", "mistral-embed"),
        ("openai", "unknown"),
        ("openai", "usage-missing"),
    }
    small = rolled[("openai", "text-embedding-3-small")]
    assert small.calls == 3
    assert small.amount == Decimal("0.00009")
    assert small.input_tokens == 4500
    cohere = rolled[("cohere", "rerank-v3.5")]
    assert cohere.calls == 3
    assert cohere.amount == Decimal("0.010")
    assert cohere.search_units == 3  # estimated units are not billed figures


def test_roll_up_by_request_and_by_status() -> None:
    totals = _totals()
    by_request = totals.by("request_id")
    assert by_request[("r1",)].calls == 5
    assert by_request[("r1",)].amount == Decimal("0.00008") + Decimal("0.00026") + Decimal(
        "0.006"
    ) + Decimal("0.004")
    assert by_request[("r2",)].calls == 5
    assert by_request[("",)].calls == 1
    by_status = totals.by("status")
    assert {name: group.calls for (name,), group in by_status.items()} == {
        "priced": 6,
        "estimated": 1,
        "not_billed": 1,
        "unpriced": 2,
        "unmetered": 1,
    }


def test_spend_is_per_currency_and_ignores_unknown_amounts() -> None:
    totals = _totals()
    usd = Decimal("0.00008") + Decimal("0.00001") + Decimal("0.00026")
    usd += Decimal("0.006") + Decimal("0.004")
    assert totals.spend() == {"USD": usd, "EUR": Decimal("0.001")}
    assert totals.spend("EUR") == {"EUR": Decimal("0.001")}
    assert totals.spend("USD") == {"USD": usd}
    assert totals.spend("JPY") == {}


def test_count_per_status() -> None:
    totals = _totals()
    assert totals.count(CostStatus.PRICED) == 6
    assert totals.count(CostStatus.ESTIMATED) == 1
    assert totals.count(CostStatus.NOT_BILLED) == 1
    assert totals.count(CostStatus.UNPRICED) == 2
    assert totals.count(CostStatus.UNMETERED) == 1
    assert sum(totals.count(status) for status in CostStatus) == len(_mixed())


def test_empty_totals() -> None:
    totals = Totals()
    assert totals.groups == {}
    assert totals.by("provider") == {}
    assert totals.spend() == {}
    assert totals.count(CostStatus.PRICED) == 0


def test_groups_is_a_snapshot() -> None:
    totals = _totals()
    snapshot = totals.groups
    key = GroupKey("r1", "openai", "text-embedding-3-small", "priced", "USD")
    snapshot[key].calls = 999
    assert totals.groups[key].calls == 2


def test_memory_grows_with_groups_not_events() -> None:
    ledger = Ledger(PRICES, warn=False)
    samples: list[Event] = [
        embedding_event("text-embedding-3-small", tokens=3),
        embedding_event("text-embedding-3-large", tokens=7),
        embedding_failed_event("text-embedding-3-small", estimated=EmbeddingUsage(input_tokens=1)),
    ]
    pairs = [(event, ledger.price(event)) for event in samples]
    totals = Totals()
    rounds = 100_000
    for n in range(rounds):
        event, line = pairs[n % 3]
        totals.add(event, line)
    groups = totals.groups
    assert len(groups) == 3
    assert sum(group.calls for group in groups.values()) == rounds
    per_sample = [rounds // 3 + (1 if index < rounds % 3 else 0) for index in range(3)]
    small = groups[GroupKey("", "openai", "text-embedding-3-small", "priced", "USD")]
    assert small.calls == per_sample[0]
    assert small.amount == Decimal("0.02") * 3 * per_sample[0] / 1_000_000
    large = groups[GroupKey("", "openai", "text-embedding-3-large", "priced", "USD")]
    assert large.amount == Decimal("0.13") * 7 * per_sample[1] / 1_000_000
    estimated = groups[GroupKey("", "openai", "text-embedding-3-small", "estimated", "USD")]
    assert estimated.amount == Decimal("0.02") * per_sample[2] / 1_000_000
    assert totals.spend() == {"USD": small.amount + large.amount + estimated.amount}
