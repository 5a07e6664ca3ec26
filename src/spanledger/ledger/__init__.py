"""The cost ledger: price tables, pricing, totals, and rerank fallback chains."""

from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.ledger.fallback import (
    RerankAttempt,
    RerankOutcome,
    awith_fallback,
    outcome_spend,
    price_outcome,
    with_fallback,
)
from spanledger.ledger.prices import PriceEntry, PriceTable, PriceTableError, example_prices_path
from spanledger.ledger.pricing import Ledger, price_usage
from spanledger.ledger.totals import GroupKey, GroupTotal, Totals

__all__ = [
    "CostCode",
    "CostLine",
    "CostStatus",
    "GroupKey",
    "GroupTotal",
    "Ledger",
    "PriceEntry",
    "PriceTable",
    "PriceTableError",
    "RerankAttempt",
    "RerankOutcome",
    "Totals",
    "awith_fallback",
    "example_prices_path",
    "outcome_spend",
    "price_outcome",
    "price_usage",
    "with_fallback",
]
