"""A rerank chain as one span: opened current when the chain starts, so each provider step's
call span nests under it, and ended with the outcome and one span event per attempt.

Nothing of the request's text is on it: statuses, reason codes, counts, durations, usage and
breaker states only.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from spanledger.exporters._text import encodable
from spanledger.outcomes import FallbackAttempt, RerankOutcome

__all__ = [
    "CHAIN_ATTEMPT_EVENT",
    "CHAIN_SPAN",
    "ChainHandle",
    "attempt_event_attributes",
    "end_chain_span",
    "outcome_attributes",
    "start_chain_span",
]

CHAIN_SPAN = "rerank_chain"
CHAIN_ATTEMPT_EVENT = "spanledger.chain.attempt"
"""The span event of one attempt of a chain, at the moment the attempt ended."""

ChainHandle = tuple[Span, object]


def start_chain_span(
    tracer: trace.Tracer, document_count: int | None, top_k: int | None
) -> ChainHandle:
    """Open the chain's span and make it current for the steps that follow."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "rerank",
        "openinference.span.kind": "CHAIN",
    }
    if document_count is not None:
        attributes["spanledger.rerank.document_count"] = document_count
    if top_k is not None:
        attributes["gen_ai.request.top_k"] = top_k
    span = tracer.start_span(CHAIN_SPAN, kind=SpanKind.INTERNAL, attributes=attributes)
    return span, otel_context.attach(trace.set_span_in_context(span))


def end_chain_span(handle: ChainHandle, outcome: RerankOutcome) -> None:
    """Put the outcome and its attempts on the span, restore the context, end the span."""
    span, token = handle
    try:
        for number, attempt in enumerate(outcome.attempts, 1):
            span.add_event(
                CHAIN_ATTEMPT_EVENT,
                attempt_event_attributes(number, attempt),
                timestamp=_ended_ns(attempt),
            )
        span.set_attributes(outcome_attributes(outcome))
        if outcome.status == "invalid_request":
            span.set_status(Status(StatusCode.ERROR, encodable(outcome.reason or "")))
    finally:
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        finally:
            span.end()


def outcome_attributes(outcome: RerankOutcome) -> dict[str, Any]:
    """The chain span's closing attributes."""
    attributes: dict[str, Any] = {
        "spanledger.chain.status": outcome.status,
        "spanledger.chain.attempts": len(outcome.attempts),
        "spanledger.rerank.result_count": len(outcome.results),
    }
    if outcome.reason:
        attributes["spanledger.chain.reason"] = encodable(outcome.reason)
    if outcome.answered_by is not None:
        answered = outcome.attempts[outcome.answered_by]
        attributes["spanledger.chain.answered_by"] = outcome.answered_by + 1
        attributes["gen_ai.provider.name"] = encodable(answered.provider)
        attributes["gen_ai.request.model"] = encodable(answered.model)
    if outcome.callback_failures:
        attributes["spanledger.chain.callback_failures"] = outcome.callback_failures
    breakers = [a.breaker_state for a in outcome.attempts if a.breaker_state is not None]
    if breakers:
        attributes["spanledger.breaker.states"] = breakers
    return attributes


def attempt_event_attributes(number: int, attempt: FallbackAttempt) -> dict[str, Any]:
    """One attempt: who, what kind, how it ended and why, what it was billed."""
    attributes: dict[str, Any] = {
        "spanledger.attempt": number,
        "gen_ai.provider.name": encodable(attempt.provider),
        "gen_ai.request.model": encodable(attempt.model),
        "spanledger.attempt.kind": attempt.kind,
        "spanledger.attempt.status": attempt.status,
    }
    optional: dict[str, Any] = {
        "spanledger.attempt.reason": attempt.reason,
        "spanledger.attempt.detail": attempt.detail,
        "spanledger.attempt.duration_ms": attempt.duration_ms,
        "spanledger.billing": attempt.billing,
        "spanledger.breaker.state": attempt.breaker_state,
        "error.type": attempt.error_category.value if attempt.error_category else None,
    }
    usage = attempt.usage
    if usage is not None:
        optional["gen_ai.usage.input_tokens"] = usage.input_tokens
        optional["spanledger.usage.search_units"] = usage.search_units
        attributes["spanledger.usage.estimated"] = attempt.usage_estimated
    for key, value in optional.items():
        if value is not None:
            attributes[key] = encodable(value) if isinstance(value, str) else value
    return attributes


def _ended_ns(attempt: FallbackAttempt) -> int:
    ended = attempt.started_at + timedelta(milliseconds=attempt.duration_ms or 0.0)
    return int(ended.timestamp() * 1_000_000_000)
