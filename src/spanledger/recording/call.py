"""One call's telemetry: a start notice when it begins, exactly one event per attempt.

Every path records through a ``Recording``: our providers, SDK instrumentation, the httpx
transport and the manual blocks. Nothing here may break the observed call: an event that cannot
be built ends the call as ``unrecordable_outcome`` (logged by type), and the recorder isolates
its sinks.

A logical call an SDK retries is one ``Recording`` over several attempts: the start notice goes
out once, and a failed attempt's event is held until the SDK either tries again (the event goes
out with ``retried=True``) or gives up (it goes out as the call's last). The attempts of a
retried call share ``logical_call_id``, the first attempt's ``call_id``, so exporters can show
one span with every attempt on it. A call of one attempt carries none of this.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from time import perf_counter
from typing import Any

from spanledger._logs import get_logger
from spanledger.attribution.scope import RequestScope
from spanledger.errors import ErrorCategory, ProviderError, error_for_interrupt, interrupts
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
    new_call_id,
    trusted_builder_of,
)
from spanledger.recorder import Recorder, current_scope
from spanledger.recording.facts import EmbedFacts, Figures, RerankFacts, texts_only
from spanledger.recording.served import serve_reranked

__all__ = ["UNRECORDABLE", "Recording", "ended_by", "logged"]

_log = get_logger("spanledger.recording")

UNRECORDABLE = ProviderError(
    ErrorCategory.INVALID_RESPONSE,
    detail="the call's outcome could not be recorded",
    error_type="unrecordable_outcome",
)
"""How a call that was announced ends when its own event cannot be built."""

# Every field below is made by spanledger or read by the figure rule: no validation pass.
_call_started = trusted_builder_of(CallStarted)
_embedding_event = trusted_builder_of(EmbeddingEvent)
_embedding_failed = trusted_builder_of(EmbeddingFailedEvent)
_rerank_event = trusted_builder_of(RerankEvent)
_rerank_failed = trusted_builder_of(RerankFailedEvent)

Build = Callable[[Any, dict[str, Any]], Event]
_COMMON = (
    "call_id",
    "request_id",
    "provider",
    "model",
    "started_at",
    "latency_ms",
    "request_params",
    "request_extras",
    "server_address",
    "server_port",
)


def ended_by(exc: BaseException) -> ProviderError:
    """The failure of a call ended by something other than a ``ProviderError``: named by its
    class, never by its message. An interrupt (a keyboard interrupt, a task's cancellation,
    anything that is not an ``Exception``) is ``interrupted``, never the provider's fault."""
    if isinstance(exc, ProviderError):
        return exc
    if interrupts(exc):
        return error_for_interrupt(exc)
    name = type(exc).__name__
    return ProviderError(ErrorCategory.UNAVAILABLE, detail=f"call ended by {name}", error_type=name)


class Recording:
    """Announces a call to ``recorder`` now; ``succeeded`` or ``failed`` ends each attempt once.

    ``restart`` begins the call's next attempt (an SDK's retry) with the same facts.
    """

    __slots__ = (
        "_done",
        "_held",
        "_scope",
        "_t0",
        "attempt",
        "call_id",
        "facts",
        "first_call_id",
        "recorder",
        "request_id",
        "started_at",
    )

    def __init__(self, recorder: Recorder, facts: EmbedFacts | RerankFacts) -> None:
        self.recorder = recorder
        self.facts = facts
        self.attempt = 0
        self._held: tuple[Build, object, dict[str, Any]] | None = None
        scope = current_scope()
        self.request_id = scope.request_id if scope is not None else None
        self._scope = scope if isinstance(scope, RequestScope) else None
        self.restart()

    def restart(self) -> None:
        """Begin the next attempt: fresh id and clock. The first is announced to start-aware
        sinks; a later one releases the held event of the attempt before it, as retried. The
        attempt before must have ended (``succeeded`` or ``failed``)."""
        self._done = False
        self.started_at = datetime.now(UTC)
        self._t0 = perf_counter()
        self.call_id = new_call_id()
        self.attempt += 1
        if self.attempt == 1:
            self.first_call_id = self.call_id
            if self.recorder.wants_call_started:
                self._announce()
        else:
            self.release(retried=True)

    def succeeded(self, figures: Figures) -> None:
        """End the attempt with what the response reported; a rerank inside an open request
        serves its documents to the request's context and selects its results."""
        if self._done:
            return
        self._finish(self._success, figures)
        if self._scope is not None and type(self.facts) is RerankFacts:
            try:
                serve_reranked(self._scope, self.facts, figures)
            except Exception as exc:
                _log_failure("context_capture_failed", exc)

    def failed(
        self,
        error: ProviderError,
        ended: float | None = None,
        *,
        hold: bool = False,
        answered: bool = False,
    ) -> None:
        """End the attempt as failed; one the provider may have billed carries an estimate.
        ``ended``: the ``perf_counter`` reading when it really ended, if that was earlier.
        ``hold``: keep its event until it is known whether another attempt follows.
        ``answered``: a 2xx answer arrived whose status this path does not know."""
        outcome = _Answered(error) if answered else error
        self._finish(self._failure, outcome, ended, hold=hold)

    def interrupted(self, exc: BaseException) -> None:
        """The call was interrupted by ``exc``: an attempt still open ends ``interrupted``; one
        that had already ended keeps its outcome, and its held event goes out as the last."""
        self.failed(ended_by(exc))
        self.release()

    def release(self, *, retried: bool = False) -> None:
        """Emit the held attempt's event, if any (``retried``: another attempt followed)."""
        held, self._held = self._held, None
        if held is None:
            return
        build, outcome, fields = held
        if retried:  # a call whose one attempt failed carries none of the retry fields
            fields["logical_call_id"] = self.first_call_id
            fields["retried"] = True
        self._emit(build, outcome, fields)

    def _finish(
        self, build: Build, outcome: object, ended: float | None = None, *, hold: bool = False
    ) -> None:
        """Emit (or hold) the event ``build`` makes of ``outcome``, once per attempt."""
        if self._done:
            return
        self._done = True
        latency = ((perf_counter() if ended is None else ended) - self._t0) * 1000.0
        facts = self.facts
        fields = {  # the fields every event of this attempt has
            "call_id": self.call_id,
            "request_id": self.request_id,
            "provider": facts.provider,
            "model": facts.model,
            "started_at": self.started_at,
            "latency_ms": latency,
            "request_params": facts.request_params,
            "request_extras": facts.extras,
            "server_address": facts.server_address,
            "server_port": facts.server_port,
        }
        if facts.billing is not None:
            fields["billing"] = facts.billing
        if self.attempt > 1:
            fields["logical_call_id"] = self.first_call_id
            fields["attempt"] = self.attempt
        if hold:
            self._held = (build, outcome, fields)
            return
        self._emit(build, outcome, fields)

    def _emit(self, build: Build, outcome: object, fields: dict[str, Any]) -> None:
        try:
            event = build(outcome, fields)
        except Exception as exc:
            _log_failure("event_build_failed", exc)
            try:  # the call was announced: it still ends, as an outcome nobody could read
                event = self._failure(UNRECORDABLE, self._common_of(fields))
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

    def _common_of(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Only the common fields of a half-built event (to end it as unrecordable)."""
        keep = (*_COMMON, "billing", "logical_call_id", "attempt", "retried")
        return {name: fields[name] for name in keep if name in fields}

    def _success(self, figures: Figures, fields: dict[str, Any]) -> Event:
        facts = self.facts
        usage = figures.usage
        fields["response_id"] = figures.response_id
        fields["response_model"] = figures.response_model
        if figures.malformed_usage:
            fields["malformed_usage"] = figures.malformed_usage
        if figures.usage_source is not None:
            fields["usage_source"] = figures.usage_source
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

    def _failure(self, outcome: ProviderError | _Answered, fields: dict[str, Any]) -> Event:
        facts = self.facts
        answered = isinstance(outcome, _Answered)
        error = outcome.error if isinstance(outcome, _Answered) else outcome
        abandoned = may_have_billed(
            error.category, error.error_type, error.status_code, answered=answered
        )
        fields.update(
            error_category=error.category,
            error_type=error.error_type or type(error).__name__,
            status_code=error.status_code,
            retry_after=error.retry_after,
            fingerprint=error.fingerprint,
            error_message=str(error),
        )
        if isinstance(facts, EmbedFacts):
            texts = texts_only(facts.inputs) if abandoned else None
            fields["input_count"] = facts.input_count
            fields["input_type"] = facts.input_type
            fields["inputs"] = facts.inputs
            fields["estimated_usage"] = (
                estimate_embedding_usage(facts.billing, texts) if texts is not None else None
            )
            return _embedding_failed(fields)
        fields.update(_rerank_facts(facts))
        documents = texts_only(facts.documents) if abandoned else None
        fields["estimated_usage"] = (
            estimate_rerank_usage(facts.billing, facts.query, documents)
            if documents is not None and facts.query is not None
            else None
        )
        return _rerank_failed(fields)


class _Answered:
    """A failure on a 2xx answer whose status the path does not know (it may have billed)."""

    __slots__ = ("error",)

    def __init__(self, error: ProviderError) -> None:
        self.error = error


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
    """Recording never raises into the observed call: a failure of its own is logged by type
    (never by message) and dropped."""
    _log_failure("instrumentation_failed", exc)
