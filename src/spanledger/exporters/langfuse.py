"""Langfuse rendering through the public API of the ``langfuse`` SDK (v3 or later).

Embeddings become ``embedding`` observations. Rerank calls become ``generation`` observations:
Langfuse tracks usage and cost only on generation and embedding observations, so a
``retriever`` observation would hide search units and spend from its cost views; the trade-off
is that reranks are listed among generations (their name, ``rerank {model}``, and the
``operation`` metadata tell them apart). Usage is sent only when the provider reported it:
an absent ``usage_details`` is "not reported", never "0 tokens".

A call an SDK retried (a 429, say) is one observation too: the last attempt ends it, its
metadata lists the attempts that were retried (``retried_attempts``) and counts them all
(``attempts``), and its cost details are what the whole logical call was charged
(``spanledger.costs.summed_cost`` says why).

A rerank fallback chain is a ``chain`` observation: the calls its steps make nest under it, and
it ends with the outcome's status and every attempt in its metadata (``WARNING`` level when the
chain was degraded or aborted, ``ERROR`` for an invalid request).

Inside ``spanledger.request(...)`` the request is an observation of its own (a ``request``
span) and its calls nest under it, so a turn is one Langfuse trace. It opens under the span
current at that moment: an observation of the application's, or the OTel exporter's request
span (the SDK marks it the root of what Langfuse receives), so the turn has one trace id in
every backend.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from spanledger import _forksafe
from spanledger.costs import CHARGED_STATUSES, CostLine, plain, summed_cost
from spanledger.events import (
    AttributionRecord,
    CallStarted,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    Event,
    RerankEvent,
    RerankFailedEvent,
)
from spanledger.exporters import _attribute_names as names
from spanledger.exporters._payload import (
    DEFAULT_PAYLOAD_CAP,
    MIN_PAYLOAD_CAP,
    capped,
    json_text,
    payload_fields,
)
from spanledger.exporters._retried_attempts import MAX_ATTEMPT_EVENTS
from spanledger.exporters._text import encodable
from spanledger.outcomes import RerankOutcome
from spanledger.recorder import current_scope

if TYPE_CHECKING:
    from langfuse import Langfuse

    from spanledger.exporters._owned_pipelines import OwnedLangfusePipeline
    from spanledger.exporters.delivery import DeliveryStats

__all__ = ["LangfuseExporter", "attempt_summary", "observation_fields"]
_TRACES_KEPT = 10_000
"""Request ids whose trace is remembered (for the attribution score); the oldest go first."""
_DEFAULT_TIMEOUT = 5.0
"""Seconds ``flush`` and ``shutdown`` wait when not told (the recorder tells them)."""
_CHAIN_LEVELS = {"degraded": "WARNING", "aborted": "WARNING", "invalid_request": "ERROR"}

_open_chain: ContextVar[Any | None] = ContextVar("spanledger_langfuse_chain", default=None)
"""The chain observation the calls made now belong to (a step's worker thread inherits it)."""


def chain_metadata(outcome: RerankOutcome) -> dict[str, Any]:
    """A chain's outcome for its observation: statuses, reasons, durations and usage per
    attempt; never the query, documents or scores."""
    attempts = [
        {
            key: value
            for key, value in attempt.model_dump(
                mode="json", exclude={"started_at"}, exclude_none=True
            ).items()
            if value is not False
        }
        for attempt in outcome.attempts
    ]
    metadata: dict[str, Any] = {
        "operation": "rerank_chain",
        "status": outcome.status,
        "attempts": attempts,
        "result_count": len(outcome.results),
    }
    if outcome.reason:
        metadata["reason"] = encodable(outcome.reason)
    if outcome.answered_by is not None:
        metadata["answered_by"] = outcome.answered_by + 1
    return metadata


def _observation_type(source: Event | CallStarted) -> str:
    if isinstance(source, CallStarted):
        return "embedding" if source.operation == "embeddings" else "generation"
    return (
        "embedding" if isinstance(source, EmbeddingEvent | EmbeddingFailedEvent) else "generation"
    )


def _name(source: Event | CallStarted) -> str:
    return (
        f"{'embeddings' if _observation_type(source) == 'embedding' else 'rerank'} "
        f"{encodable(source.model)}"
    )


def observation_fields(event: Event) -> dict[str, Any]:
    """The ``update`` arguments for ``event``'s observation, payload excluded."""
    return _fields(event, event.cost)


def _fields(event: Event, cost: CostLine | None) -> dict[str, Any]:
    """``observation_fields`` with the cost line given (a retried call's summed one)."""
    metadata: dict[str, Any] = {
        "spanledger_call_id": event.call_id,
        "provider": encodable(event.provider),
        "operation": "embeddings" if _observation_type(event) == "embedding" else "rerank",
    }
    if event.request_id:
        metadata["request_id"] = encodable(event.request_id)
    usage: dict[str, int] = {}
    if isinstance(event, EmbeddingEvent | EmbeddingFailedEvent):
        metadata["input_count"] = event.input_count
        if event.input_type is not None:
            metadata["input_type"] = encodable(event.input_type)
    else:
        metadata["query_length"] = event.query_length
        metadata["document_count"] = event.document_count
        if event.top_k is not None:
            metadata["top_k"] = event.top_k
    fields: dict[str, Any] = {"model": encodable(event.model)}
    if isinstance(event, EmbeddingEvent | RerankEvent):
        fields["model"] = encodable(event.response_model or event.model)
        if event.response_id is not None:
            metadata["response_id"] = event.response_id
        if event.usage is not None and event.usage.input_tokens is not None:
            usage["input"] = event.usage.input_tokens
        if event.malformed_usage:
            metadata["malformed_usage"] = list(event.malformed_usage)
        if event.usage_source is not None:
            metadata["usage_source"] = event.usage_source
    if isinstance(event, EmbeddingEvent) and event.dimensions is not None:
        metadata["dimensions"] = event.dimensions
    if isinstance(event, EmbeddingEvent) and event.usage is not None:
        characters = event.usage.billable_characters  # only Vertex AI's ``:predict`` reports it
        if characters is not None:
            usage["billable_characters"] = characters
    if isinstance(event, RerankEvent):
        metadata["result_count"] = event.result_count
        if event.usage is not None and event.usage.search_units is not None:
            usage["search_units"] = event.usage.search_units
    if isinstance(event, EmbeddingFailedEvent | RerankFailedEvent):
        fields["level"] = "ERROR"
        fields["status_message"] = event.error_category.value
        metadata["error_type"] = event.error_type
        metadata["error_message"] = event.error_message
        if event.status_code is not None:
            metadata["status_code"] = event.status_code
    if usage:
        fields["usage_details"] = usage
    if cost is not None:
        metadata["cost_status"] = cost.status.value
        if cost.code is not None:
            metadata["cost_reason"] = cost.code.value
        if cost.amount is not None and cost.status in CHARGED_STATUSES:
            fields["cost_details"] = {"total": float(cost.amount)}
            metadata["cost_currency"] = cost.currency
    fields["metadata"] = metadata
    return fields


def _attribution_metadata(record: AttributionRecord) -> dict[str, Any]:
    """The request's attribution summary as observation metadata (figures only, never text)."""
    metadata: dict[str, Any] = {
        "frames_served": record.frames_served,
        "frames_rendered": record.frames_rendered,
        "frames_cited": record.frames_cited,
        "rendered_tokens": record.rendered_tokens,
        "cited_tokens": record.cited_tokens,
        "cited_token_share": record.cited_token_share,
        "calls": record.calls,
        "calls_by_status": dict(record.calls_by_status),
        "reconcilable": record.reconcilable,
        "spend_complete": record.spend_complete,
    }
    if record.spend is not None:
        metadata["spend"] = plain(record.spend)
        metadata["currency"] = record.currency
    metadata.update(_context_metadata(record))
    return metadata


def _context_metadata(record: AttributionRecord) -> dict[str, Any]:
    """What the model calls read of the context and what it cost them, as exact decimal
    strings; an unknown spend has no amount, and its reason (figures a record from before
    them lacks are left out)."""
    metadata: dict[str, Any] = {}
    if record.model_calls is not None:
        metadata["model_calls"] = record.model_calls
    if record.quoted_tokens is not None:
        metadata["quoted_tokens"] = record.quoted_tokens
    if record.cited_by:
        metadata["cited_by"] = dict(record.cited_by)
    if record.capture_cut:
        metadata["capture_cut"] = dict(record.capture_cut)
    for name, amount in (
        ("context_spend", record.context_spend),
        ("cited_context_spend", record.cited_context_spend),
        ("unused_context_spend", record.unused_context_spend),
    ):
        if amount is not None:
            metadata[name] = plain(amount)
    if record.context_currency is not None:
        metadata["context_currency"] = record.context_currency
    if record.unknown_context_spend is not None:
        metadata["unknown_context_spend"] = record.unknown_context_spend
    return metadata


def attempt_summary(event: Event) -> dict[str, Any]:
    """One retried attempt as an entry of ``retried_attempts``: its number and own call id, how
    it failed, and its own cost (``cost`` only when charged); unknown figures are left out."""
    summary: dict[str, Any] = {
        "attempt": event.attempt,
        "call_id": event.call_id,
        "latency_ms": event.latency_ms,
    }
    if isinstance(event, EmbeddingFailedEvent | RerankFailedEvent):
        summary["error_category"] = event.error_category.value
        if event.status_code is not None:
            summary["status_code"] = event.status_code
        if event.retry_after is not None:
            summary["retry_after"] = event.retry_after
    cost = event.cost
    if cost is not None:
        summary["cost_status"] = cost.status.value
        if cost.amount is not None and cost.status in CHARGED_STATUSES:
            summary["cost"] = float(cost.amount)
            summary["cost_currency"] = cost.currency
    return summary


class _Retried:
    """A live observation's retried attempts so far (at most ``MAX_ATTEMPT_EVENTS`` listed,
    the rest counted) and what they were charged."""

    __slots__ = ("cost", "dropped", "summaries")

    def __init__(self, cost: CostLine | None) -> None:
        self.cost = cost
        self.summaries: list[dict[str, Any]] = []
        self.dropped = 0


class LangfuseExporter:
    """A recorder sink that renders each call as a Langfuse observation.

    ``client`` is yours and used as it is (default: ``langfuse.get_client()``, the process's
    client): never rebound, and only flushed by ``flush`` and ``shutdown``, never shut down
    unless ``owns_client=True`` asks for it. The observations go where your client sends its
    own, through its tracer provider. ``pipeline`` is the counted one
    ``spanledger.exporters.pipelines`` built from keys for ``client``, if it did: isolated from
    every other client of the process, or, where the SDK allowed no isolation, sending no
    payload whatever ``capture_payload`` says.

    ``capture_payload=True`` sends inputs, the query and documents as the observation input
    and rerank results as its output (never vectors), each as JSON text capped at
    ``payload_cap`` bytes.
    """

    def __init__(
        self,
        client: Langfuse | None = None,
        *,
        capture_payload: bool = False,
        payload_cap: int = DEFAULT_PAYLOAD_CAP,
        owns_client: bool = False,
        pipeline: OwnedLangfusePipeline | None = None,
    ) -> None:
        if payload_cap < MIN_PAYLOAD_CAP:
            raise ValueError(f"payload_cap must be at least {MIN_PAYLOAD_CAP} bytes")
        if client is None:
            from langfuse import get_client

            client = get_client()
        self.client = client
        self.capture_payload = capture_payload and (pipeline is None or pipeline.isolated)
        self.payload_cap = payload_cap
        self._owns_client = owns_client
        self._pipeline = pipeline
        self._live: dict[str, Any] = {}
        self._retried: dict[str, _Retried] = {}
        self._traces: dict[str, str] = {}
        self._requests: dict[str, Any] = {}
        self._lock = _forksafe.lock(self, "_lock")
        _forksafe.after_fork_in_child(self._forget_parent)

    def _forget_parent(self) -> None:
        """In a forked child: the parent's live calls and requests are not the child's."""
        self._live.clear()
        self._retried.clear()
        self._traces.clear()
        self._requests.clear()

    def _start(self, source: Event | CallStarted) -> Any:
        """The call's observation: a child of its request's, when the request is open."""
        parent: Any = _open_chain.get()
        if parent is None:
            with self._lock:
                request = self._requests.get(source.request_id) if source.request_id else None
            parent = request if request is not None else self.client
        return parent.start_observation(
            name=_name(source),
            as_type=_observation_type(source),
            model=encodable(source.model),
        )

    def request_started(self, request_id: str) -> tuple[str, Any]:
        """Open the request's observation, under the span current now if there is one (an
        observation of yours, or the OTel exporter's request span: the trace is then one)."""
        observation = self.client.start_observation(
            name=names.REQUEST_SPAN,
            as_type="span",
            metadata={"request_id": encodable(request_id)},
        )
        with self._lock:
            self._requests[request_id] = observation
        self._remember_trace(request_id, observation)
        return request_id, observation

    def request_ended(self, handle: tuple[str, Any]) -> None:
        """End the request's observation."""
        request_id, observation = handle
        with self._lock:
            if self._requests.get(request_id) is observation:
                del self._requests[request_id]
        observation.end()

    def chain_started(self, document_count: int | None, top_k: int | None) -> tuple[Any, Any]:
        """Open a rerank chain's observation; the calls of its steps nest under it."""
        parent: Any = _open_chain.get()
        if parent is None:
            scope = current_scope()
            with self._lock:
                request = self._requests.get(scope.request_id) if scope is not None else None
            parent = request if request is not None else self.client
        metadata: dict[str, Any] = {"operation": "rerank_chain"}
        if document_count is not None:
            metadata["document_count"] = document_count
        if top_k is not None:
            metadata["top_k"] = top_k
        observation = parent.start_observation(
            name=names.CHAIN_SPAN, as_type="chain", metadata=metadata
        )
        return observation, _open_chain.set(observation)

    def chain_ended(self, handle: tuple[Any, Any], outcome: RerankOutcome) -> None:
        """End the chain's observation with its outcome and attempts."""
        observation, token = handle
        with contextlib.suppress(ValueError):  # ended in another context: nothing to restore
            _open_chain.reset(token)
        level = _CHAIN_LEVELS.get(outcome.status)
        update: dict[str, Any] = {"metadata": chain_metadata(outcome)}
        if level is not None:
            update["level"] = level
            update["status_message"] = encodable(outcome.reason or outcome.status)
        observation.update(**update)
        observation.end()

    def call_started(self, started: CallStarted) -> None:
        """Open the call's observation so its timing covers the real call."""
        observation = self._start(started)
        with self._lock:
            self._live[started.call_id] = observation

    def _remember_trace(self, request_id: str | None, observation: Any) -> None:
        trace_id = getattr(observation, "trace_id", None)
        if request_id and isinstance(trace_id, str):
            with self._lock:
                self._traces[request_id] = trace_id
                while len(self._traces) > _TRACES_KEPT:
                    self._traces.pop(next(iter(self._traces)))

    def attribution(self, record: AttributionRecord) -> None:
        """Put the summary on the request's observation while it is open, and score the
        request's trace with its cited token share (when there is one)."""
        with self._lock:
            request = self._requests.get(record.request_id)
        if request is not None:
            request.update(metadata=_attribution_metadata(record))
        if record.cited_token_share is None:
            return
        with self._lock:
            trace_id = self._traces.get(record.request_id)
        if trace_id is None:
            return
        self.client.create_score(
            name="spanledger.cited_token_share",
            value=record.cited_token_share,
            trace_id=trace_id,
            data_type="NUMERIC",
            comment=(
                f"{record.cited_tokens} of {record.rendered_tokens} rendered context tokens "
                "were cited"
            ),
        )

    def emit(self, event: Event) -> None:
        """End the call's observation (or make one whole, for an event with no start notice);
        an attempt of a retried call goes to ``_emit_attempt``."""
        if event.logical_call_id is not None:
            self._emit_attempt(event, event.logical_call_id)
            return
        with self._lock:
            observation = self._live.pop(event.call_id, None)
        self._end(observation, event, observation_fields(event))

    def _end(self, observation: Any, event: Event, fields: dict[str, Any]) -> None:
        if observation is None:
            observation = self._start(event)
        self._remember_trace(event.request_id, observation)
        try:
            observation.update(**fields, **self._payload(event))
        finally:
            observation.end()

    def _emit_attempt(self, event: Event, logical: str) -> None:
        """One attempt of a retried call. While the call's observation is live (it opened on
        the logical call's start notice), a retried attempt is only noted, and the last one
        ends the observation with its own fields, the attempts and the summed cost. Without a
        live observation each attempt is an observation of its own, with its own cost."""
        retried: _Retried | None = None
        with self._lock:
            if event.retried:
                observation = self._live.get(logical)
                if observation is not None:
                    self._note_attempt(event, logical)
                    return
            else:
                observation = self._live.pop(logical, None)
                retried = self._retried.pop(logical, None)
        cost = event.cost if retried is None else summed_cost(retried.cost, event.cost)
        fields = _fields(event, cost)
        metadata = fields["metadata"]
        metadata["logical_call_id"] = logical
        if event.retried:
            metadata["attempt"] = event.attempt
        else:
            metadata["attempts"] = event.attempt
            if retried is not None:
                metadata["retried_attempts"] = retried.summaries
                if retried.dropped:
                    metadata["retried_attempts_dropped"] = retried.dropped
        self._end(observation, event, fields)

    def _note_attempt(self, event: Event, logical: str) -> None:
        """Keep a retried attempt's summary (up to ``MAX_ATTEMPT_EVENTS``) and add its cost to
        the call's; the caller holds the lock."""
        retried = self._retried.get(logical)
        if retried is None:
            retried = self._retried[logical] = _Retried(event.cost)
        else:
            retried.cost = summed_cost(retried.cost, event.cost)
        if len(retried.summaries) < MAX_ATTEMPT_EVENTS:
            retried.summaries.append(attempt_summary(event))
        else:
            retried.dropped += 1

    def _payload(self, event: Event) -> dict[str, Any]:
        if not self.capture_payload:
            return {}
        fields = payload_fields(event)
        rendered: dict[str, Any] = {}
        if isinstance(event, EmbeddingEvent | EmbeddingFailedEvent):
            if "inputs" in fields:
                rendered["input"] = self._fit(fields["inputs"])
        else:
            request = {key: fields[key] for key in ("query", "documents") if key in fields}
            if request:
                rendered["input"] = self._fit(request)
            if "results" in fields:
                rendered["output"] = self._fit(fields["results"])
        return rendered

    def _fit(self, value: object) -> str:
        """The payload as spanledger's JSON text, capped: what is sent is what was measured."""
        return capped(json_text(value), self.payload_cap)

    @property
    def delivery(self) -> DeliveryStats | None:
        """What became of the observations of a spanledger-built pipeline (``None``
        otherwise): ``exported + failed + dropped + pending == produced``, in spans."""
        return self._pipeline.stats if self._pipeline is not None else None

    def flush(self, timeout: float | None = None) -> None:
        """Send what the client holds, waiting at most ``timeout`` seconds (default: the
        pipeline's shutdown timeout, else 5)."""
        deadline = self._deadline(timeout)
        if self._pipeline is not None:
            self._pipeline.flush(deadline)
        else:
            self._within(self.client.flush, deadline)

    def shutdown(self, timeout: float | None = None) -> None:
        """Flush within ``timeout`` seconds; what a spanledger-built pipeline could not
        deliver by then is counted dropped. A given client is shut down too only when
        ``owns_client=True`` said so; a pipeline stays up for the next recorder on the same
        keys and host, and is closed at exit."""
        deadline = self._deadline(timeout)
        if self._pipeline is not None:
            self._pipeline.drain(deadline)
            return
        self._within(self.client.flush, deadline)
        if self._owns_client:
            self._within(self.client.shutdown, deadline)

    def _deadline(self, timeout: float | None) -> float:
        if timeout is None:
            timeout = (
                self._pipeline.shutdown_timeout if self._pipeline is not None else _DEFAULT_TIMEOUT
            )
        return time.monotonic() + timeout

    @staticmethod
    def _within(action: Callable[[], object], deadline: float) -> None:
        from spanledger.exporters._lifecycle import call_within

        call_within(action, deadline - time.monotonic(), name="spanledger-langfuse-flush")
