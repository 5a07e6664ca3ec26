"""The cost ledger: price tables, pricing (also as a recorder processor), totals, and the
pricing of a rerank fallback chain's outcome.

The ledger prices records and knows nothing of HTTP, providers, recorders or request scopes.
"""

from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.ledger.attempts import outcome_spend, price_outcome
from spanledger.ledger.pricer import Pricer, Pricing, as_pricer
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
    "Pricer",
    "Pricing",
    "Totals",
    "as_pricer",
    "example_prices_path",
    "outcome_spend",
    "price_outcome",
    "price_usage",
]
