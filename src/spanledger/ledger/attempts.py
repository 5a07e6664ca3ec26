"""Pricing a rerank fallback chain's outcome: one cost line per attempt.

An abandoned attempt may have been billed and a fallback must not hide an earlier attempt's
spend, so every attempt gets a line: skipped attempts, and failed ones that carry no usage, at
zero with the reason; the others (answered, timed out, or failed after the provider did the work,
such as an unreadable 2xx body) from their usage, estimated where the attempt says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from spanledger.costs import CostCode, CostLine
from spanledger.ledger.prices import PriceTable
from spanledger.ledger.pricing import local_model, not_billed, price_by_rule, price_usage
from spanledger.outcomes import RerankOutcome

__all__ = ["outcome_spend", "price_outcome"]


def price_outcome(prices: PriceTable, outcome: RerankOutcome) -> list[CostLine]:
    """One cost line per attempt, in order; their sum is the chain's rerank spend."""
    lines: list[CostLine] = []
    for attempt in outcome.attempts:
        if attempt.status == "skipped":
            lines.append(not_billed("not attempted: the deadline ran out", CostCode.NOT_ATTEMPTED))
        elif attempt.status == "failed" and attempt.usage is None:
            lines.append(not_billed(f"failed ({attempt.reason}) before the provider billed it"))
        elif attempt.usage is None and attempt.billing == "queries" and attempt.document_count:
            lines.append(
                price_by_rule(
                    prices,
                    attempt.provider,
                    attempt.model,
                    attempt.started_at,
                    attempt.document_count,
                )
            )
        else:
            line = price_usage(
                prices,
                attempt.provider,
                attempt.model,
                attempt.started_at,
                attempt.usage,
                estimated=attempt.usage_estimated,
            )
            lines.append(local_model(line) if attempt.billing == "local" else line)
    return lines


def outcome_spend(lines: Sequence[CostLine]) -> Decimal | None:
    """The sum of the lines, or ``None`` if any line's amount is unknown."""
    if any(line.amount is None for line in lines):
        return None
    return sum((line.amount for line in lines if line.amount is not None), Decimal(0))
