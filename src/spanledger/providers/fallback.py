"""Fallback chains for rerank: try providers in order under one deadline, never raise.

Every attempt is recorded (answered, failed, timed out, or skipped when the deadline ran out)
with its usage, so the ledger can price each one (``spanledger.ledger.price_outcome``): an
abandoned attempt may have been billed, and a fallback must not hide an earlier attempt's spend.
Each step that calls a provider still emits its own event to the recorder.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from datetime import UTC, datetime

from spanledger.errors import ErrorCategory, ProviderError
from spanledger.estimates import ABANDONED_ERROR_TYPES, estimate_rerank_usage, may_have_billed
from spanledger.events import RerankResponse, ScoredDocument
from spanledger.outcomes import AttemptStatus, FallbackAttempt, RerankOutcome
from spanledger.providers._provider import RerankProvider

__all__ = [
    "AttemptStatus",
    "FallbackAttempt",
    "RerankOutcome",
    "awith_fallback",
    "with_fallback",
]

_NOTHING_TO_DO = "nothing to rerank"


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
        return RerankOutcome(status="skipped", reason=_NOTHING_TO_DO)
    start = time.monotonic()
    attempts: list[FallbackAttempt] = []
    for step in steps:
        budget = _budget(start, deadline, step_timeout)
        if budget is None:
            attempts.append(_skipped(step))
            continue
        started, t0 = datetime.now(UTC), time.perf_counter()
        try:
            answer = step.rerank(query, documents, top_k=top_k, timeout=budget)
        except Exception as error:  # a step never breaks the chain
            attempts.append(_failed(step, error, started, t0, query, documents))
            continue
        attempts.append(_answered(step, answer, started, t0, len(documents)))
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
        return RerankOutcome(status="skipped", reason=_NOTHING_TO_DO)
    start = time.monotonic()
    attempts: list[FallbackAttempt] = []
    for step in steps:
        budget = _budget(start, deadline, step_timeout)
        if budget is None:
            attempts.append(_skipped(step))
            continue
        started, t0 = datetime.now(UTC), time.perf_counter()
        try:
            answer = await asyncio.wait_for(
                step.arerank(query, documents, top_k=top_k, timeout=budget), budget
            )
        except Exception as error:  # a step never breaks the chain
            # wait_for's TimeoutError means the step was cancelled at its budget: abandoned
            cause = asyncio.CancelledError() if isinstance(error, TimeoutError) else error
            attempts.append(_failed(step, cause, started, t0, query, documents))
            continue
        attempts.append(_answered(step, answer, started, t0, len(documents)))
        return _finish(attempts, answer, len(documents), top_k)
    return _finish(attempts, None, len(documents), top_k)


def _budget(start: float, deadline: float, step_timeout: float | None) -> float | None:
    """Seconds the next step may take, or ``None`` when the chain's deadline has run out."""
    remaining = deadline - (time.monotonic() - start)
    if remaining <= 0:
        return None
    return remaining if step_timeout is None else min(step_timeout, remaining)


def _answered(
    step: RerankProvider, answer: RerankResponse, started: datetime, t0: float, documents: int
) -> FallbackAttempt:
    return FallbackAttempt(
        provider=step.provider,
        model=step.model,
        status="ok",
        started_at=started,
        duration_ms=(time.perf_counter() - t0) * 1000,
        usage=answer.usage,
        billing=step.billing,
        document_count=documents,
    )


def _failed(
    step: RerankProvider,
    error: BaseException,
    started: datetime,
    t0: float,
    query: str,
    documents: Sequence[str],
) -> FallbackAttempt:
    """A failed step; one the provider may have billed carries usage estimated from the
    request, in the unit the endpoint bills by."""
    elapsed_ms = (time.perf_counter() - t0) * 1000
    if isinstance(error, ProviderError):
        name, category, status = error.error_type, error.category, error.status_code
        reason = category.value
    else:
        name, category, status = type(error).__name__, ErrorCategory.UNAVAILABLE, None
        reason = name
    abandoned = name in ABANDONED_ERROR_TYPES
    billed = may_have_billed(category, name, status)
    usage = estimate_rerank_usage(step.billing, query, documents) if billed else None
    return FallbackAttempt(
        provider=step.provider,
        model=step.model,
        status="timeout" if abandoned else "failed",
        reason=reason,
        started_at=started,
        duration_ms=elapsed_ms,
        usage=usage,
        usage_estimated=usage is not None,
        error_category=category,
        billing=step.billing,
        document_count=len(documents),
    )


def _skipped(step: RerankProvider) -> FallbackAttempt:
    return FallbackAttempt(
        provider=step.provider,
        model=step.model,
        status="skipped",
        reason="deadline exhausted",
        started_at=datetime.now(UTC),
        billing=step.billing,
    )


def _finish(
    attempts: list[FallbackAttempt],
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
        results=_input_order(count, top_k),
        attempts=attempts,
    )


def _input_order(count: int, top_k: int | None) -> list[ScoredDocument]:
    """Input order, every score 0.0: a placeholder ranking, flagged by ``degraded``."""
    size = count if top_k is None else min(count, top_k)
    return [ScoredDocument(index=i, relevance_score=0.0) for i in range(size)]
