"""Reranks billed per query by the vendor's documented rule (``billing == "queries"``: AWS
Bedrock Rerank, Google's Vertex ranking API), whose API reports no usage: a successful one is
priced as ``estimated`` from the rule, ``ceil(documents / 100)`` search units, never as a
reported figure; a failed one abandoned after sending keeps the failure-estimate path."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

import spanledger
from spanledger.costs import CostStatus
from spanledger.errors import ErrorCategory, ProviderError
from spanledger.estimates import estimate_rerank_usage
from spanledger.events import RerankEvent, RerankFailedEvent, RerankUsage
from spanledger.ledger import Ledger
from spanledger.recording import Recording, RerankFacts
from tests.ledger.conftest import ListSink, entry, rerank_event, rerank_failed_event, table

PRICES = table(
    entry("aws.bedrock", "amazon.rerank-v1:0", per_search_unit="0.001"),
    entry("gcp.vertex_ai", "semantic-ranker-*", per_search_unit="0.001", per_request="0.0001"),
    entry("aws.bedrock", "tokens-only", input_per_mtok="1"),
)


def bedrock(documents: int, model: str = "amazon.rerank-v1:0", **overrides: Any) -> RerankEvent:
    fields: dict[str, Any] = {
        "provider": "aws.bedrock",
        "usage": None,
        "billing": "queries",
        "document_count": documents,
    }
    fields.update(overrides)
    return rerank_event(model, **fields)


@pytest.mark.parametrize(
    ("documents", "units"), [(0, 0), (1, 1), (99, 1), (100, 1), (101, 2), (250, 3), (1000, 10)]
)
def test_a_rule_billed_rerank_is_estimated_at_one_unit_per_hundred_documents(
    documents: int, units: int
) -> None:
    event = bedrock(documents)
    line = Ledger(PRICES).price(event)

    assert line.status is CostStatus.ESTIMATED
    assert line.amount == Decimal("0.001") * units
    assert line.dimensions == ({"search_units": Decimal("0.001") * units} if units else {})
    assert line.price_entry == "aws.bedrock/amazon.rerank-v1:0"
    assert line.currency == "USD"
    assert line.reason is not None
    assert "ceil(documents / 100)" in line.reason
    assert "reports no usage" in line.reason
    assert event.usage is None  # the rule is an estimate, never a reported figure


def test_the_rule_billed_line_keeps_the_usage_unreported_through_the_recorder() -> None:
    sink = ListSink()
    spanledger.Recorder([sink], prices=PRICES).emit(bedrock(150))
    [event] = sink.events
    assert isinstance(event, RerankEvent)
    assert event.usage is None
    assert event.cost is not None
    assert (event.cost.status, event.cost.amount) == (CostStatus.ESTIMATED, Decimal("0.002"))


def test_a_per_request_rate_is_added_to_the_rule() -> None:
    event = bedrock(
        120, provider="gcp.vertex_ai", model="semantic-ranker-default-004", billing="queries"
    )
    line = Ledger(PRICES).price(event)
    assert line.status is CostStatus.ESTIMATED
    assert line.dimensions == {"requests": Decimal("0.0001"), "search_units": Decimal("0.002")}
    assert line.amount == Decimal("0.0021")


def test_a_reported_usage_wins_over_the_rule() -> None:
    line = Ledger(PRICES).price(bedrock(500, usage=RerankUsage(search_units=1)))
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal("0.001")
    assert line.reason is None


@pytest.mark.parametrize("billing", [None, "search_units", "tokens"])
def test_without_the_rule_an_unreported_usage_stays_unmetered(billing: str | None) -> None:
    line = Ledger(PRICES, warn=False).price(bedrock(150, billing=billing))
    assert line.status is CostStatus.UNMETERED
    assert line.amount is None


def test_a_rule_billed_model_without_a_price_stays_unpriced_and_names_the_missing_rate() -> None:
    ledger = Ledger(PRICES, warn=False)
    missing = ledger.price(bedrock(150, model="tokens-only"))
    assert missing.status is CostStatus.UNPRICED
    assert missing.amount is None
    assert "per_search_unit" in (missing.reason or "")
    unknown = ledger.price(bedrock(150, model="nobody"))
    assert unknown.status is CostStatus.UNPRICED
    assert unknown.amount is None


def test_the_ledgers_rule_is_the_failure_estimates_rule() -> None:
    ledger = Ledger(PRICES)
    for documents in range(451):
        estimate = estimate_rerank_usage("queries", "q", ["d"] * documents)
        assert estimate is not None
        line = ledger.price(bedrock(documents))
        assert line.amount == Decimal("0.001") * (estimate.search_units or 0)


def failed(error: ProviderError, documents: int) -> RerankFailedEvent:
    sink = ListSink()
    facts = RerankFacts(
        provider="aws.bedrock",
        model="amazon.rerank-v1:0",
        query_length=1,
        document_count=documents,
        query="q",
        documents=["d"] * documents,
        billing="queries",
    )
    Recording(spanledger.Recorder([sink]), facts).failed(error)
    [event] = sink.events
    assert isinstance(event, RerankFailedEvent)
    return event


def test_a_failed_abandoned_rule_billed_rerank_keeps_the_failure_estimate_path() -> None:
    event = failed(ProviderError(ErrorCategory.UNAVAILABLE, error_type="ReadTimeout"), 150)
    assert event.estimated_usage == RerankUsage(search_units=2)

    line = Ledger(PRICES).price(event)
    assert line.status is CostStatus.ESTIMATED
    assert line.amount == Decimal("0.002")
    assert line.reason == "usage estimated for an attempt abandoned after sending"


def test_a_failed_rule_billed_rerank_the_vendor_refused_is_not_billed() -> None:
    event = failed(ProviderError(ErrorCategory.RATE_LIMIT, status_code=429), 150)
    assert event.estimated_usage is None
    assert Ledger(PRICES).price(event).status is CostStatus.NOT_BILLED


def test_a_failed_rule_billed_rerank_is_never_priced_by_the_success_rule() -> None:
    # abandoned, but nothing to estimate from (no document texts): unknown, never the rule
    event = rerank_failed_event(
        "amazon.rerank-v1:0",
        provider="aws.bedrock",
        billing="queries",
        document_count=150,
        error_type="ReadTimeout",
    )
    line = Ledger(PRICES, warn=False).price(event)
    assert line.status is CostStatus.UNMETERED
    assert line.amount is None
