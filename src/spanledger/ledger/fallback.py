"""Fallback chains for rerank: try providers in order under one deadline, never raise.

Every attempt is recorded (answered, failed, timed out, or skipped when the deadline ran out)
with its usage, so the ledger can price each one: an abandoned attempt may have been billed,
and a fallback must not hide an earlier attempt's spend.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spanledger.costs import CostCode, CostLine
from spanledger.errors import ErrorCategory, ProviderError
from spanledger.estimates import ABANDONED_ERROR_TYPES, estimate_rerank_usage, may_have_billed
from spanledger.events import RerankResponse, RerankUsage, ScoredDocument
from spanledger.ledger.prices import PriceTable
from spanledger.ledger.pricing import not_billed, price_usage
from spanledger.providers import RerankProvider

__all__ = ["RerankAttempt", "RerankOutcome", "awith_fallback", "price_outcome", "with_fallback"]

AttemptStatus = Literal["ok", "failed", "timeout", "skipped"]


class RerankAttempt(BaseModel):
    """One step of a chain: what it did, how long it took, and its (maybe estimated) usage."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    model: str
    status: AttemptStatus
    reason: str | None = None
    started_at: datetime
    duration_ms: float | None = None
    usage: RerankUsage | None = None
    usage_estimated: bool = False
    error_category: ErrorCategory | None = None


class RerankOutcome(BaseModel):
    """What a chain produced. ``ok``: the first step answered; ``degraded``: a later step
    answered, or none did and the results are the input order; ``skipped``: nothing to do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["ok", "degraded", "skipped"]
    reason: str | None = None
    results: list[ScoredDocument] = Field(default_factory=list, repr=False)
    attempts: list[RerankAttempt] = Field(default_factory=list)
    answered_by: int | None = None


def _identity(count: int, top_k: int | None) -> list[ScoredDocument]:
    """Input order, every score 0.0: a placeholder ranking, flagged by ``degraded``."""
    size = count if top_k is None else min(count, top_k)
    return [ScoredDocument(index=i, relevance_score=0.0) for i in range(size)]


def _failed_attempt(
    step: RerankProvider,
    error: BaseException,
    started: datetime,
    elapsed_ms: float,
    query: str,
    documents: Sequence[str],
) -> RerankAttempt:
    name = error.error_type if isinstance(error, ProviderError) else type(error).__name__
    abandoned = name in ABANDONED_ERROR_TYPES
    category = error.category if isinstance(error, ProviderError) else ErrorCategory.UNAVAILABLE
    status = error.status_code if isinstance(error, ProviderError) else None
    billed = may_have_billed(category, name, status)
    usage = estimate_rerank_usage(step._mapping.billing, query, documents) if billed else None
    return RerankAttempt(
        provider=step.provider,
        model=step.model,
        status="timeout" if abandoned else "failed",
        reason=category.value if isinstance(error, ProviderError) else name,
        started_at=started,
        duration_ms=elapsed_ms,
        usage=usage,
        usage_estimated=usage is not None,
        error_category=category,
    )


def _skipped(step: RerankProvider, reason: str) -> RerankAttempt:
    return RerankAttempt(
        provider=step.provider,
        model=step.model,
        status="skipped",
        reason=reason,
        started_at=datetime.now(UTC),
    )


def _finish(
    attempts: list[RerankAttempt],
    answer: RerankResponse | None,
    count: int,
    top_k: int | None,
) -> RerankOutcome:
    if answer is not None:
        index = len(attempts) - 1
        return RerankOutcome(
            status="ok" if index == 0 else "degraded",
            reason=None if index == 0 else "answered by a fallback step",
            results=list(answer.results),
            attempts=attempts,
            answered_by=index,
        )
    return RerankOutcome(
        status="degraded",
        reason="every step failed; results are the input order",
        results=_identity(count, top_k),
        attempts=attempts,
    )


def with_fallback(
    steps: Sequence[RerankProvider],
    query: str,
    documents: Sequence[str],
    *,
    top_k: int | None = None,
    deadline: float = 10.0,
    step_timeout: float | None = None,
) -> RerankOutcome:
    """Rerank with each step in turn until one answers, within ``deadline`` seconds overall
    (and ``step_timeout`` seconds per step, when given).

    Never raises because of a step (a provider failure, a closed provider, a bug): every step
    that fails is recorded, and when every step fails the results are the input order.
    """
    if not documents or top_k == 0:
        return RerankOutcome(status="skipped", reason="nothing to rerank")
    start = time.monotonic()
    attempts: list[RerankAttempt] = []
    for step in steps:
        remaining = deadline - (time.monotonic() - start)
        if remaining <= 0:
            attempts.append(_skipped(step, "deadline exhausted"))
            continue
        budget = remaining if step_timeout is None else min(step_timeout, remaining)
        started, t0 = datetime.now(UTC), time.perf_counter()
        try:
            answer = step.rerank(query, documents, top_k=top_k, timeout=budget)
        except Exception as error:  # a step never breaks the chain
            elapsed = (time.perf_counter() - t0) * 1000
            attempts.append(_failed_attempt(step, error, started, elapsed, query, documents))
            continue
        attempts.append(_answered(step, answer, started, t0))
        return _finish(attempts, answer, len(documents), top_k)
    return _finish(attempts, None, len(documents), top_k)


async def awith_fallback(
    steps: Sequence[RerankProvider],
    query: str,
    documents: Sequence[str],
    *,
    top_k: int | None = None,
    deadline: float = 10.0,
    step_timeout: float | None = None,
) -> RerankOutcome:
    """The async twin of ``with_fallback``; a step still running at the deadline is cancelled."""
    if not documents or top_k == 0:
        return RerankOutcome(status="skipped", reason="nothing to rerank")
    start = time.monotonic()
    attempts: list[RerankAttempt] = []
    for step in steps:
        remaining = deadline - (time.monotonic() - start)
        if remaining <= 0:
            attempts.append(_skipped(step, "deadline exhausted"))
            continue
        budget = remaining if step_timeout is None else min(step_timeout, remaining)
        started, t0 = datetime.now(UTC), time.perf_counter()
        try:
            answer = await asyncio.wait_for(
                step.arerank(query, documents, top_k=top_k, timeout=budget), budget
            )
        except Exception as error:  # a step never breaks the chain; TimeoutError: the deadline
            elapsed = (time.perf_counter() - t0) * 1000
            cause: BaseException = error
            if isinstance(error, TimeoutError):
                cause = asyncio.CancelledError()
            attempts.append(_failed_attempt(step, cause, started, elapsed, query, documents))
            continue
        attempts.append(_answered(step, answer, started, t0))
        return _finish(attempts, answer, len(documents), top_k)
    return _finish(attempts, None, len(documents), top_k)


def _answered(
    step: RerankProvider, answer: RerankResponse, started: datetime, t0: float
) -> RerankAttempt:
    return RerankAttempt(
        provider=step.provider,
        model=step.model,
        status="ok",
        started_at=started,
        duration_ms=(time.perf_counter() - t0) * 1000,
        usage=answer.usage,
    )


def price_outcome(prices: PriceTable, outcome: RerankOutcome) -> list[CostLine]:
    """One cost line per attempt; their sum is the chain's rerank spend."""
    lines: list[CostLine] = []
    for attempt in outcome.attempts:
        if attempt.status == "skipped":
            lines.append(not_billed("not attempted: the deadline ran out", CostCode.NOT_ATTEMPTED))
        elif attempt.status == "failed":
            lines.append(not_billed(f"failed ({attempt.reason}) before the provider billed it"))
        else:
            lines.append(
                price_usage(
                    prices,
                    attempt.provider,
                    attempt.model,
                    attempt.started_at,
                    attempt.usage,
                    estimated=attempt.usage_estimated,
                )
            )
    return lines


def outcome_spend(lines: Sequence[CostLine]) -> Decimal | None:
    """The sum of the lines, or ``None`` if any line's amount is unknown."""
    if any(line.amount is None for line in lines):
        return None
    return sum((line.amount for line in lines if line.amount is not None), Decimal(0))
