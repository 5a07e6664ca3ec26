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

from spanledger.exporters import _attribute_names as names
from spanledger.exporters._text import encodable
from spanledger.outcomes import FallbackAttempt, RerankOutcome

__all__ = [
    "ChainHandle",
    "attempt_event_attributes",
    "end_chain_span",
    "outcome_attributes",
    "start_chain_span",
]

ChainHandle = tuple[Span, object]


def start_chain_span(
    tracer: trace.Tracer, document_count: int | None, top_k: int | None
) -> ChainHandle:
    """Open the chain's span and make it current for the steps that follow."""
    attributes: dict[str, Any] = {
        names.GEN_AI_OPERATION_NAME: "rerank",
        names.OPENINFERENCE_SPAN_KIND: "CHAIN",
    }
    if document_count is not None:
        attributes[names.RERANK_DOCUMENT_COUNT] = document_count
    if top_k is not None:
        attributes[names.GEN_AI_REQUEST_TOP_K] = top_k
    span = tracer.start_span(names.CHAIN_SPAN, kind=SpanKind.INTERNAL, attributes=attributes)
    return span, otel_context.attach(trace.set_span_in_context(span))


def end_chain_span(handle: ChainHandle, outcome: RerankOutcome) -> None:
    """Put the outcome and its attempts on the span, restore the context, end the span."""
    span, token = handle
    try:
        for number, attempt in enumerate(outcome.attempts, 1):
            span.add_event(
                names.CHAIN_ATTEMPT_EVENT,
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
        names.CHAIN_STATUS: outcome.status,
        names.CHAIN_ATTEMPTS: len(outcome.attempts),
        names.RERANK_RESULT_COUNT: len(outcome.results),
    }
    if outcome.reason:
        attributes[names.CHAIN_REASON] = encodable(outcome.reason)
    if outcome.answered_by is not None:
        answered = outcome.attempts[outcome.answered_by]
        attributes[names.CHAIN_ANSWERED_BY] = outcome.answered_by + 1
        attributes[names.GEN_AI_PROVIDER_NAME] = encodable(answered.provider)
        attributes[names.GEN_AI_REQUEST_MODEL] = encodable(answered.model)
    if outcome.callback_failures:
        attributes[names.CHAIN_CALLBACK_FAILURES] = outcome.callback_failures
    breakers = [a.breaker_state for a in outcome.attempts if a.breaker_state is not None]
    if breakers:
        attributes[names.BREAKER_STATES] = breakers
    return attributes


def attempt_event_attributes(number: int, attempt: FallbackAttempt) -> dict[str, Any]:
    """One attempt: who, what kind, how it ended and why, what it was billed."""
    attributes: dict[str, Any] = {
        names.ATTEMPT_NUMBER: number,
        names.GEN_AI_PROVIDER_NAME: encodable(attempt.provider),
        names.GEN_AI_REQUEST_MODEL: encodable(attempt.model),
        names.ATTEMPT_KIND: attempt.kind,
        names.ATTEMPT_STATUS: attempt.status,
    }
    optional: dict[str, Any] = {
        names.ATTEMPT_REASON: attempt.reason,
        names.ATTEMPT_DETAIL: attempt.detail,
        names.ATTEMPT_DURATION_MS: attempt.duration_ms,
        names.BILLING: attempt.billing,
        names.BREAKER_STATE: attempt.breaker_state,
        names.ERROR_TYPE: attempt.error_category.value if attempt.error_category else None,
    }
    usage = attempt.usage
    if usage is not None:
        optional[names.GEN_AI_USAGE_INPUT_TOKENS] = usage.input_tokens
        optional[names.USAGE_SEARCH_UNITS] = usage.search_units
        attributes[names.USAGE_ESTIMATED] = attempt.usage_estimated
    for key, value in optional.items():
        if value is not None:
            attributes[key] = encodable(value) if isinstance(value, str) else value
    return attributes


def _ended_ns(attempt: FallbackAttempt) -> int:
    ended = attempt.started_at + timedelta(milliseconds=attempt.duration_ms or 0.0)
    return int(ended.timestamp() * 1_000_000_000)
