"""The ledger's memory is bounded under caller-chosen model names: a price table's lookup cache
and the warn-once bookkeeping stop growing at their documented limits, and pricing answers the
same once they are full."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from structlog.testing import capture_logs

from spanledger.costs import CostLine, CostStatus
from spanledger.events import EmbeddingEvent, EmbeddingUsage, RerankEvent, RerankUsage
from spanledger.ledger import Ledger, PriceTable, prices, pricing

WHEN = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)
MODELS = 50_000
GROWTH_BOUND = 4 * 1024 * 1024
"""Bytes pricing 50,000 distinct model names may keep: the full lookup cache and warn-once set
take about 1.5 MB; unbounded, they took 25 MB."""


@pytest.fixture(autouse=True)
def _fresh_warnings() -> Iterator[None]:
    pricing._forget_warnings()
    yield
    pricing._forget_warnings()


def price_table() -> PriceTable:
    return PriceTable.from_dict(
        {
            "prices": [
                {"provider": "openai", "model": "text-embedding-3-small", "input_per_mtok": "0.02"},
                {"provider": "openai", "model": "text-embedding-*", "input_per_mtok": "0.1"},
                {
                    "provider": "cohere",
                    "model": "rerank-v3.5",
                    "per_search_unit": "0.002",
                    "valid_until": "2025-07-01",
                },
                {
                    "provider": "cohere",
                    "model": "rerank-v3.5",
                    "per_search_unit": "0.003",
                    "valid_from": "2025-07-01",
                },
            ]
        }
    )


def embedding(model: str, number: int = 0) -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=f"call-{number}",
        provider="openai",
        model=model,
        started_at=WHEN,
        latency_ms=1.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=1000),
    )


def rerank(at: datetime) -> RerankEvent:
    return RerankEvent(
        call_id="rerank",
        provider="cohere",
        model="rerank-v3.5",
        started_at=at,
        latency_ms=1.0,
        query_length=5,
        document_count=3,
        result_count=3,
        usage=RerankUsage(search_units=2),
    )


def known_lines(ledger: Ledger) -> list[CostLine]:
    """Lines for an exact entry, a glob, both sides of a price change, and an unknown model."""
    return [
        ledger.price(embedding("text-embedding-3-small")),
        ledger.price(embedding("text-embedding-ada-002")),
        ledger.price(rerank(WHEN)),
        ledger.price(rerank(datetime(2025, 8, 1, tzinfo=UTC))),
        ledger.price(embedding("never-priced")),
    ]


def flood(ledger: Ledger, count: int, prefix: str = "attacker") -> None:
    for number in range(count):
        ledger.price(embedding(f"{prefix}-model-{number:08d}", number))


def test_fifty_thousand_model_names_grow_memory_by_a_bounded_amount() -> None:
    table = price_table()
    ledger = Ledger(table)
    with capture_logs() as logs:
        before_flood = known_lines(ledger)
        gc.collect()
        tracemalloc.start()
        try:
            start, _ = tracemalloc.get_traced_memory()
            flood(ledger, MODELS)
            gc.collect()
            end, _ = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        after_flood = known_lines(ledger)

    assert end - start < GROWTH_BOUND, f"grew {(end - start) / 1e6:.1f} MB"
    assert 0 < table.cached_lookups <= prices.LOOKUP_CACHE_SIZE
    assert len(pricing._warned) == pricing.WARNED_KEYS_LIMIT
    warned = [log for log in logs if log["event"] == "usage_not_priced"]
    notices = [log for log in logs if log["event"] == "usage_not_priced_suppressed"]
    assert len(warned) == pricing.WARNED_KEYS_LIMIT
    assert len(notices) == 1
    assert pricing.suppressed_warnings() == MODELS - (pricing.WARNED_KEYS_LIMIT - 1)
    assert after_flood == before_flood
    assert [line.status for line in after_flood] == [
        CostStatus.PRICED,
        CostStatus.PRICED,
        CostStatus.PRICED,
        CostStatus.PRICED,
        CostStatus.UNPRICED,
    ]


def test_a_full_lookup_cache_starts_again_and_answers_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(prices, "LOOKUP_CACHE_SIZE", 8)
    table = price_table()
    ledger = Ledger(table, warn=False)
    before = known_lines(ledger)

    sizes = []
    for round_number in range(5):
        flood(ledger, 7, prefix=f"round-{round_number}")
        sizes.append(table.cached_lookups)
        assert known_lines(ledger) == before

    assert max(sizes) <= 8
    assert table.cached_lookups <= 8


def test_warnings_past_the_limit_are_counted_not_logged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pricing, "WARNED_KEYS_LIMIT", 3)
    ledger = Ledger(price_table())

    with capture_logs() as logs:
        flood(ledger, 5)
        flood(ledger, 2)  # already warned: neither logged nor counted again
        flood(ledger, 5)  # never warned: counted each time

    events = [log["event"] for log in logs]
    assert events == ["usage_not_priced"] * 3 + ["usage_not_priced_suppressed"]
    assert [log["model"] for log in logs[:3]] == [f"attacker-model-{n:08d}" for n in range(3)]
    notice = logs[3]
    assert notice["limit"] == 3
    assert notice["log_level"] == "warning"
    assert pricing.suppressed_warnings() == 4
    assert len(pricing._warned) == 3
