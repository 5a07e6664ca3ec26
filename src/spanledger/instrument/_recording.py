"""One provider call's telemetry: a start notice when it begins, exactly one event when it ends.

Nothing here may break the observed call: an event that cannot be built is logged by type and
dropped, and the recorder already isolates its sinks.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from time import perf_counter
from typing import Any

import structlog

from spanledger.errors import ProviderError
from spanledger.estimates import (
    estimate_embedding_usage,
    estimate_rerank_usage,
    may_have_billed,
)
from spanledger.events import (
    CallStarted,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankFailedEvent,
    RerankUsage,
    builder_of,
    new_call_id,
)
from spanledger.instrument._facts import CallFacts, EmbedFacts, Figures, RerankFacts
from spanledger.providers._driver import UNRECORDABLE
from spanledger.recorder import Recorder, current_request

__all__ = ["Recording", "logged"]

_log = structlog.get_logger("spanledger.instrument")

_call_started = builder_of(CallStarted)
_embedding_event = builder_of(EmbeddingEvent)
_rerank_event = builder_of(RerankEvent)


class Recording:
    """Announces a call to ``recorder`` now; ``succeeded`` or ``failed`` ends it once.

    ``restart`` begins a new call with the same facts (an SDK's next HTTP attempt), so one
    object serves every attempt of a call.
    """

    __slots__ = ("_done", "_t0", "call_id", "facts", "recorder", "request_id", "started_at")

    def __init__(self, recorder: Recorder, facts: CallFacts) -> None:
        self.recorder = recorder
        self.facts = facts
        self.restart()

    def restart(self) -> None:
        """Begin the next call: fresh id and clock, announced to start-aware sinks. The one
        before must have ended (``succeeded`` or ``failed``), or its event is never emitted."""
        self._done = False
        self.started_at = datetime.now(UTC)
        self._t0 = perf_counter()
        self.call_id = new_call_id()
        scope = current_request()
        self.request_id = scope.request_id if scope is not None else None
        if self.recorder.wants_call_started:
            self._announce()

    def succeeded(self, figures: Figures) -> None:
        """End the call with what the response reported."""
        self._finish(self._success, figures)

    def failed(self, error: ProviderError, ended: float | None = None) -> None:
        """End the call as failed; one the provider may have billed carries an estimate.
        ``ended``: the ``perf_counter`` reading when the call really ended, if that was earlier."""
        self._finish(self._failure, error, ended)

    def _finish(
        self, build: Callable[[Any, float], Event], outcome: object, ended: float | None = None
    ) -> None:
        """Emit the event ``build`` makes of ``outcome``, once per call."""
        if self._done:
            return
        self._done = True
        latency = ((perf_counter() if ended is None else ended) - self._t0) * 1000.0
        try:
            event = build(outcome, latency)
        except Exception as exc:
            _log_failure("event_build_failed", exc)
            try:  # the call was announced: it still ends, as an outcome nobody could read
                event = self._failure(UNRECORDABLE, latency)
            except Exception as again:
                _log_failure("event_build_failed", again)
                return
        try:
            self.recorder.emit(event)
        except Exception as exc:
            _log_failure("event_emit_failed", exc)

    def _announce(self) -> None:
        facts = self.facts
        try:
            started = _call_started(
                {
                    "call_id": self.call_id,
                    "operation": facts.operation,
                    "provider": facts.provider,
                    "model": facts.model,
                    "request_id": self.request_id,
                    "started_at": self.started_at,
                    "server_address": facts.server_address,
                    "server_port": facts.server_port,
                }
            )
        except Exception as exc:
            _log_failure("call_started_build_failed", exc)
            return
        self.recorder.call_started(started)

    def _common(self, latency_ms: float) -> dict[str, Any]:
        """The fields every event of this call has."""
        facts = self.facts
        return {
            "call_id": self.call_id,
            "request_id": self.request_id,
            "provider": facts.provider,
            "model": facts.model,
            "started_at": self.started_at,
            "latency_ms": latency_ms,
            "request_params": facts.request_params,
            "request_extras": facts.extras,
            "server_address": facts.server_address,
            "server_port": facts.server_port,
        }

    def _success(self, figures: Figures, latency_ms: float) -> Event:
        facts = self.facts
        usage = figures.usage
        fields = self._common(latency_ms)
        fields["response_id"] = figures.response_id
        fields["response_model"] = figures.response_model
        if isinstance(facts, EmbedFacts):
            fields["input_count"] = facts.input_count
            fields["input_type"] = facts.input_type
            fields["inputs"] = facts.inputs
            fields["dimensions"] = figures.dimensions
            fields["usage"] = usage if isinstance(usage, EmbeddingUsage) else None
            return _embedding_event(fields)
        fields.update(_rerank_facts(facts))
        fields["result_count"] = figures.result_count
        fields["results"] = figures.results
        fields["usage"] = usage if isinstance(usage, RerankUsage) else None
        return _rerank_event(fields)

    def _failure(self, error: ProviderError, latency_ms: float) -> Event:
        facts = self.facts
        abandoned = may_have_billed(error.category, error.error_type, error.status_code)
        fields = self._common(latency_ms)
        fields.update(
            error_category=error.category,
            error_type=error.error_type or type(error).__name__,
            status_code=error.status_code,
            retry_after=error.retry_after,
            fingerprint=error.fingerprint,
            error_message=str(error),
        )
        if isinstance(facts, EmbedFacts):
            estimate = (
                estimate_embedding_usage(facts.billing, facts.inputs)
                if abandoned and facts.inputs is not None
                else None
            )
            return EmbeddingFailedEvent(
                **fields,
                input_count=facts.input_count,
                input_type=facts.input_type,
                inputs=facts.inputs,
                estimated_usage=estimate,
            )
        rerank_estimate = (
            estimate_rerank_usage(facts.billing, facts.query, facts.documents)
            if abandoned and facts.query is not None and facts.documents is not None
            else None
        )
        return RerankFailedEvent(**fields, **_rerank_facts(facts), estimated_usage=rerank_estimate)


def _rerank_facts(facts: RerankFacts) -> dict[str, Any]:
    return {
        "query_length": facts.query_length,
        "document_count": facts.document_count,
        "top_k": facts.top_k,
        "query": facts.query,
        "documents": facts.documents,
    }


def _log_failure(what: str, exc: Exception) -> None:
    with contextlib.suppress(Exception):
        _log.error(what, error_type=type(exc).__name__)


def logged(exc: Exception) -> None:
    """Instrumentation never raises into the observed call: a failure of its own is logged by
    type (never by message) and dropped."""
    _log_failure("instrumentation_failed", exc)
