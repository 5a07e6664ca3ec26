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
from spanledger.ledger.pricing import (
    compute_seconds,
    local_model,
    not_billed,
    price_by_rule,
    price_usage,
)
from spanledger.outcomes import FallbackAttempt, Reason, RerankOutcome

__all__ = ["outcome_spend", "price_outcome"]


def price_outcome(prices: PriceTable, outcome: RerankOutcome) -> list[CostLine]:
    """One cost line per attempt, in order; their sum is the chain's rerank spend."""
    return [_price_attempt(prices, attempt) for attempt in outcome.attempts]


def _price_attempt(prices: PriceTable, attempt: FallbackAttempt) -> CostLine:
    local = attempt.billing == "local"
    if attempt.status == "skipped":
        why = _SKIPPED.get(attempt.reason or "", attempt.reason)
        return not_billed(f"not attempted: {why}", CostCode.NOT_ATTEMPTED)
    if attempt.usage is None and attempt.status in ("failed", "aborted"):
        if local:
            return not_billed("a local step failed: no vendor bills it", CostCode.LOCAL_MODEL)
        return not_billed(f"{attempt.status} ({attempt.reason}) before the provider billed it")
    if attempt.usage is None and attempt.billing == "queries" and attempt.document_count:
        return price_by_rule(
            prices, attempt.provider, attempt.model, attempt.started_at, attempt.document_count
        )
    seconds = (
        compute_seconds(attempt.duration_ms) if local and attempt.duration_ms is not None else None
    )
    line = price_usage(
        prices,
        attempt.provider,
        attempt.model,
        attempt.started_at,
        attempt.usage,
        estimated=attempt.usage_estimated,
        seconds=seconds,
    )
    return local_model(line) if local else line


_SKIPPED = {
    Reason.DEADLINE_EXHAUSTED: "the deadline ran out",
    Reason.CIRCUIT_OPEN: "its circuit breaker was open",
    Reason.NO_API_KEY: "no API key",
    Reason.GATE_DECLINED: "its gate declined it",
    Reason.GATE_FAILED: "its gate failed",
    Reason.GATE_TIMEOUT: "its gate did not answer before the deadline",
    Reason.IDENTITY: "the identity step keeps the input order",
}


def outcome_spend(lines: Sequence[CostLine]) -> Decimal | None:
    """The sum of the lines, or ``None`` if any line's amount is unknown."""
    if any(line.amount is None for line in lines):
        return None
    return sum((line.amount for line in lines if line.amount is not None), Decimal(0))
