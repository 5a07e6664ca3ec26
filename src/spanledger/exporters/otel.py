"""OpenTelemetry rendering: one CLIENT span per call, and GenAI metrics.

Spans follow the OTel GenAI conventions: ``embeddings {model}`` with
``gen_ai.operation.name=embeddings``; rerank has no upstream convention yet, so it is
``rerank {model}`` with ``gen_ai.operation.name=rerank`` and spanledger's own attributes for what
the convention lacks. A figure the provider did not report is absent, never ``0``.

The span is live while the call runs (it starts on the recorder's start notice and is current
until the call ends), so it parents under the caller's span and HTTP client spans nest under it.
A call an SDK retried (a 429, say) is one span too: each attempt that was followed by another is a
``spanledger.attempt`` span event on it, and the last attempt ends it
(``spanledger.costs.summed_cost`` says what its cost is). Metrics stay per attempt: a retried
429 is a real request that failed.
Only the ``opentelemetry-api`` is needed here; the SDK and exporters are the application's.
"""

from __future__ import annotations

import inspect
import math
import os
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from spanledger import _forksafe
from spanledger.costs import CHARGED_STATUSES, NOT_PRICED_STATUSES, CostLine, summed_cost
from spanledger.events import (
    AttributionRecord,
    CallStarted,
    EmbeddingEvent,
    Event,
    FailedEvent,
    RerankUsage,
)
from spanledger.exporters import _attribute_names as names
from spanledger.exporters._chain_span import ChainHandle, end_chain_span, start_chain_span
from spanledger.exporters._otel_metrics import (
    DEFAULT_LABEL_SETS,
    DURATION_BUCKETS,
    EMBEDDING_EVENTS,
    FAILED_EVENTS,
    SHARE_BUCKETS,
    SUCCEEDED_EVENTS,
    TOKEN_BUCKETS,
    GenAIMetrics,
    metrics_for,
)
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

if TYPE_CHECKING:
    from spanledger.exporters._owned_pipelines import OwnedOtelPipeline
    from spanledger.exporters.delivery import DeliveryStats

__all__ = [
    "ATTEMPT_EVENT",
    "DEFAULT_LABEL_SETS",
    "DURATION_BUCKETS",
    "MAX_ATTEMPT_EVENTS",
    "MAX_PROBLEMS_SHOWN",
    "SHARE_BUCKETS",
    "TOKEN_BUCKETS",
    "OtelExporter",
    "attempt_attributes",
    "attribution_attributes",
    "latest_semconv_requested",
]

_SCOPE = "spanledger"
_OPENINGS_KEPT = 1024
"""Distinct (operation, provider, model, server) span openings cached; others are built."""
_DEFAULT_TIMEOUT = 5.0
"""Seconds ``flush`` and ``shutdown`` wait when not told (the recorder tells them)."""
_SDK_TIMEOUT_FLOOR = 0.1
"""Seconds given to an SDK flush whose deadline is spent (it raises on zero); not waited for."""
_PAYLOAD_ATTRIBUTES = {
    "inputs": names.EMBEDDING_INPUTS,
    "query": names.RERANK_QUERY,
    "documents": names.RERANK_DOCUMENTS,
    "results": names.RERANK_RESULTS,
    "request_extras": names.REQUEST_EXTRAS,
}
ATTEMPT_EVENT = names.ATTEMPT_EVENT
"""The span event that records one retried attempt on its logical call's span."""
MAX_PROBLEMS_SHOWN = 16
"""Attribution problems listed on a request's span; ``…problem_count`` says how many there were."""


def latest_semconv_requested(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` asks for the latest experimental GenAI names."""
    value = (environ if environ is not None else os.environ).get(
        "OTEL_SEMCONV_STABILITY_OPT_IN", ""
    )
    return "gen_ai_latest_experimental" in {part.strip() for part in value.split(",")}


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def _ns(moment: datetime) -> int:
    """Nanoseconds since the epoch, exact to the microsecond (no float rounding)."""
    return (moment - _EPOCH) // _MICROSECOND * 1000


def _duration_ns(latency_ms: float) -> int:
    """The span's length; a latency that is no finite duration gives an instant span."""
    nanoseconds = latency_ms * 1_000_000
    return int(nanoseconds) if math.isfinite(nanoseconds) and nanoseconds > 0 else 0


_Opening = tuple[str, dict[str, Any]]
"""A span's name and the attributes every call to the same endpoint and model opens with."""


_BACKEND_KINDS = {
    "embeddings": {
        names.OPENINFERENCE_SPAN_KIND: "EMBEDDING",
        names.LANGFUSE_OBSERVATION_TYPE: "embedding",
    },
    "rerank": {
        names.OPENINFERENCE_SPAN_KIND: "RERANKER",
        names.LANGFUSE_OBSERVATION_TYPE: "generation",  # Langfuse has no reranker type
    },
}
"""What the backends key a span's kind on: OpenInference's (Phoenix, Arize) and Langfuse's
observation type (one that carries usage and cost)."""
_MODEL_NAME_KEYS = {
    "embeddings": names.OPENINFERENCE_EMBEDDING_MODEL_NAME,
    "rerank": names.OPENINFERENCE_RERANKER_MODEL_NAME,
}


def _opening(
    operation: str, provider: str, model: str, address: str | None, port: int | None
) -> _Opening:
    model = encodable(model)
    attributes: dict[str, Any] = {
        names.GEN_AI_OPERATION_NAME: operation,
        names.GEN_AI_PROVIDER_NAME: encodable(provider),
        names.GEN_AI_REQUEST_MODEL: model,
        **_BACKEND_KINDS.get(operation, {}),
    }
    if operation in _MODEL_NAME_KEYS:
        attributes[_MODEL_NAME_KEYS[operation]] = model
    if address:
        attributes[names.SERVER_ADDRESS] = encodable(address)
        if port is not None:
            attributes[names.SERVER_PORT] = port
    return f"{operation} {model}", attributes


def _identity(source: Event | CallStarted, opening: _Opening) -> dict[str, Any]:
    """Attributes known when the call starts (the sampling-relevant ones among them)."""
    attributes = {**opening[1], names.CALL_ID: source.call_id}
    if source.request_id:
        attributes[names.REQUEST_ID] = encodable(source.request_id)
    return attributes


def _event_opening(event: Event) -> _Opening:
    operation = "embeddings" if isinstance(event, EMBEDDING_EVENTS) else "rerank"
    return _opening(operation, event.provider, event.model, event.server_address, event.server_port)


def span_attributes(
    event: Event, *, with_identity: bool = True, latest: bool = False
) -> dict[str, Any]:
    """Every attribute the span gets for ``event``, payload excluded (``with_identity=False``
    leaves out those already set when the span was opened; ``latest`` adds the experimental
    GenAI names asked for by ``OTEL_SEMCONV_STABILITY_OPT_IN``)."""
    return _attributes(event, with_identity, event.cost, latest)


def _attributes(
    event: Event, with_identity: bool, cost: CostLine | None, latest: bool = False
) -> dict[str, Any]:
    """``span_attributes`` with the cost line given: a retried call's span shows what the
    whole logical call was charged, not its last attempt alone."""
    attributes = _identity(event, _event_opening(event)) if with_identity else {}
    if isinstance(event, EMBEDDING_EVENTS):
        attributes[names.EMBEDDING_INPUT_COUNT] = event.input_count
        if event.input_type is not None:
            attributes[names.EMBEDDING_INPUT_TYPE] = encodable(event.input_type)
    else:
        attributes[names.RERANK_QUERY_LENGTH] = event.query_length
        attributes[names.RERANK_DOCUMENT_COUNT] = event.document_count
        if event.top_k is not None:
            attributes[names.GEN_AI_REQUEST_TOP_K] = event.top_k
            attributes[names.OPENINFERENCE_RERANKER_TOP_K] = event.top_k
        if latest:  # the open GenAI rerank proposal's names
            attributes[names.GEN_AI_RERANK_CANDIDATE_COUNT] = event.document_count
            if event.top_k is not None:
                attributes[names.GEN_AI_RERANK_TOP_N] = event.top_k
    if isinstance(event, SUCCEEDED_EVENTS):
        if event.response_model is not None:
            attributes[names.GEN_AI_RESPONSE_MODEL] = event.response_model
        if event.response_id is not None:
            attributes[names.GEN_AI_RESPONSE_ID] = event.response_id
        usage = event.usage
        if usage is not None:
            details: list[str] = []  # JSON by hand: counts only, and this runs on every call
            if usage.input_tokens is not None:
                attributes[names.GEN_AI_USAGE_INPUT_TOKENS] = usage.input_tokens
                details.append(f'"input":{usage.input_tokens}')
            if isinstance(usage, RerankUsage):
                if usage.search_units is not None:
                    attributes[names.USAGE_SEARCH_UNITS] = usage.search_units
                    details.append(f'"search_units":{usage.search_units}')
            elif usage.billable_characters is not None:
                attributes[names.USAGE_BILLABLE_CHARACTERS] = usage.billable_characters
                details.append(f'"billable_characters":{usage.billable_characters}')
            attributes[names.LANGFUSE_USAGE_DETAILS] = "{" + ",".join(details) + "}"
        if event.malformed_usage:
            attributes[names.USAGE_MALFORMED] = list(event.malformed_usage)
        if event.usage_source is not None:
            attributes[names.USAGE_SOURCE] = event.usage_source
        if isinstance(event, EmbeddingEvent):
            if event.dimensions is not None:
                attributes[names.GEN_AI_EMBEDDINGS_DIMENSION_COUNT] = event.dimensions
        else:
            attributes[names.RERANK_RESULT_COUNT] = event.result_count
    else:
        _add_failure(attributes, event)
    if cost is not None:
        attributes.update(cost_attributes(cost))
        charged = attributes.get(names.GEN_AI_USAGE_COST)
        if charged is not None:  # a finite float: its repr is JSON
            attributes[names.LANGFUSE_COST_DETAILS] = f'{{"total":{charged!r}}}'

    return attributes


def _add_failure(attributes: dict[str, Any], event: FailedEvent) -> None:
    """How a failed call or attempt ended: category, vendor code, HTTP status, Retry-After."""
    attributes[names.ERROR_TYPE] = event.error_category.value
    if event.error_type:
        attributes[names.PROVIDER_ERROR_TYPE] = event.error_type
    if event.status_code is not None:
        attributes[names.HTTP_RESPONSE_STATUS_CODE] = event.status_code
    if event.retry_after is not None:
        attributes[names.ERROR_RETRY_AFTER] = event.retry_after


def attempt_attributes(event: Event) -> dict[str, Any]:
    """A retried attempt's span event: its number and own ``call_id`` (which joins its line in
    the event log and the ledger), its latency, how it failed, and what it cost."""
    attributes: dict[str, Any] = {
        names.ATTEMPT_NUMBER: event.attempt,
        names.CALL_ID: event.call_id,
        names.ATTEMPT_LATENCY_MS: event.latency_ms,
    }
    if isinstance(event, FAILED_EVENTS):
        _add_failure(attributes, event)
    if event.cost is not None:
        attributes.update(cost_attributes(event.cost))
    return attributes


def cost_attributes(line: CostLine) -> dict[str, Any]:
    """``gen_ai.usage.cost`` only when the amount is known and was charged; the status always."""
    attributes: dict[str, Any] = {names.COST_STATUS: line.status.value}
    if line.amount is not None and line.status in CHARGED_STATUSES:
        attributes[names.GEN_AI_USAGE_COST] = float(line.amount)
        if line.currency:
            attributes[names.COST_CURRENCY] = line.currency
    if line.code is not None and line.status in NOT_PRICED_STATUSES:
        attributes[names.COST_REASON] = line.code.value
    return attributes


def attribution_attributes(record: AttributionRecord) -> dict[str, Any]:
    """``spanledger.attribution.*`` for the request's span; unknown figures are left out."""
    attributes: dict[str, Any] = {
        names.REQUEST_ID: record.request_id,
        names.ATTRIBUTION_FRAMES_SERVED: record.frames_served,
        names.ATTRIBUTION_FRAMES_RENDERED: record.frames_rendered,
        names.ATTRIBUTION_FRAMES_CITED: record.frames_cited,
        names.ATTRIBUTION_RENDERED_TOKENS: record.rendered_tokens,
        names.ATTRIBUTION_CITED_TOKENS: record.cited_tokens,
        names.ATTRIBUTION_UNCITED_RENDERED_TOKENS: record.uncited_rendered_tokens,
        names.ATTRIBUTION_RECONCILABLE: record.reconcilable,
        names.ATTRIBUTION_SPEND_COMPLETE: record.spend_complete,
    }
    if record.cited_token_share is not None:
        attributes[names.ATTRIBUTION_CITED_TOKEN_SHARE] = record.cited_token_share
    if record.spend is not None:
        attributes[names.ATTRIBUTION_SPEND] = float(record.spend)
    if record.spend_per_cited_token is not None:
        attributes[names.ATTRIBUTION_SPEND_PER_CITED_TOKEN] = float(record.spend_per_cited_token)
    if record.currency:
        attributes[names.ATTRIBUTION_CURRENCY] = record.currency
    attributes[names.ATTRIBUTION_CALLS] = record.calls
    attributes[names.ATTRIBUTION_BILLED_INPUT_TOKENS] = record.billed_input_tokens
    attributes[names.ATTRIBUTION_BILLED_SEARCH_UNITS] = record.billed_search_units
    if record.billed_characters is not None:
        attributes[names.ATTRIBUTION_BILLED_CHARACTERS] = record.billed_characters
    attributes[names.ATTRIBUTION_CALLS_WITHOUT_USAGE] = record.calls_without_usage
    for status, calls in record.calls_by_status.items():
        attributes[names.ATTRIBUTION_CALLS_BY_STATUS_PREFIX + encodable(status)] = calls
    for status, amount in record.spend_by_status.items():
        attributes[names.ATTRIBUTION_SPEND_BY_STATUS_PREFIX + encodable(status)] = float(amount)
    for status, chains in record.chains_by_status.items():
        attributes[names.ATTRIBUTION_CHAINS_BY_STATUS_PREFIX + encodable(status)] = chains
    if record.problems:  # why it is not reconcilable: frame ids and counts, never text
        shown = record.problems[:MAX_PROBLEMS_SHOWN]
        attributes[names.ATTRIBUTION_PROBLEMS] = [encodable(p) for p in shown]
        attributes[names.ATTRIBUTION_PROBLEM_COUNT] = len(record.problems)
    attributes.update(_context_attributes(record))
    return attributes


def _context_attributes(record: AttributionRecord) -> dict[str, Any]:
    """What the model calls read of the context and what it cost them: amounts only when
    known, else the reason (figures left out of records written before them stay out)."""
    attributes: dict[str, Any] = {}
    if record.model_calls is not None:
        attributes[names.ATTRIBUTION_MODEL_CALLS] = record.model_calls
    if record.quoted_tokens is not None:
        attributes[names.ATTRIBUTION_QUOTED_TOKENS] = record.quoted_tokens
    for evidence, frames in record.cited_by.items():
        attributes[names.ATTRIBUTION_CITED_BY_PREFIX + encodable(evidence)] = frames
    for what, count in record.capture_cut.items():
        attributes[names.ATTRIBUTION_CAPTURE_CUT_PREFIX + encodable(what)] = count
    amounts = (
        (names.ATTRIBUTION_CONTEXT_SPEND, record.context_spend),
        (names.ATTRIBUTION_CITED_CONTEXT_SPEND, record.cited_context_spend),
        (names.ATTRIBUTION_UNUSED_CONTEXT_SPEND, record.unused_context_spend),
    )
    for name, amount in amounts:
        if amount is not None:
            attributes[name] = float(amount)
    if record.context_currency:
        attributes[names.ATTRIBUTION_CONTEXT_CURRENCY] = record.context_currency
    if record.unknown_context_spend is not None:
        attributes[names.ATTRIBUTION_UNKNOWN_CONTEXT_SPEND] = encodable(
            record.unknown_context_spend
        )
    return attributes


class _Retried:
    """What a live span keeps of its logical call's retried attempts: how many it rendered as
    span events, how many beyond ``MAX_ATTEMPT_EVENTS`` it only counted, and their cost."""

    __slots__ = ("cost", "dropped", "rendered")

    def __init__(self, cost: CostLine | None) -> None:
        self.cost = cost
        self.rendered = 0
        self.dropped = 0


class OtelExporter:
    """A recorder sink that renders each call as an OTel span and records GenAI metrics.

    ``tracer_provider`` / ``meter_provider`` default to the application's global ones; the
    exporter never installs a provider. ``capture_payload=True`` adds inputs, query, documents,
    results and extras as JSON attributes of at most ``payload_cap`` bytes each (never vectors).
    ``semconv_latest`` defaults to ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``.
    ``max_label_sets`` bounds the distinct (operation, provider, model) label sets the metrics
    create; calls beyond it are recorded under the model ``_overflow`` and counted
    (``label_overflows``, and the ``spanledger.metrics.label_overflow`` counter).
    ``owned=True`` shuts the providers down with the exporter; ``pipeline`` is the one
    ``spanledger.exporters.pipelines`` built for it (counted, bounded, fork-safe).
    ``request_spans`` (default on): ``spanledger.request(...)`` opens a ``request`` span when
    no span is current, so the request's calls are one trace under it, and its attribution
    summary lands on it (on the span that was current, when there was one).
    """

    def __init__(
        self,
        *,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        capture_payload: bool = False,
        payload_cap: int = DEFAULT_PAYLOAD_CAP,
        enable_metrics: bool = True,
        semconv_latest: bool | None = None,
        max_label_sets: int = DEFAULT_LABEL_SETS,
        owned: bool = False,
        pipeline: OwnedOtelPipeline | None = None,
        request_spans: bool = True,
    ) -> None:
        if payload_cap < MIN_PAYLOAD_CAP:
            raise ValueError(f"payload_cap must be at least {MIN_PAYLOAD_CAP} bytes")
        if isinstance(max_label_sets, bool) or not isinstance(max_label_sets, int):
            raise ValueError("max_label_sets must be a whole number")
        if max_label_sets < 1:
            raise ValueError("max_label_sets must be at least 1")
        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self._tracer = provider.get_tracer(_SCOPE, _version())
        self._providers: list[object] = [provider]
        self._latest = latest_semconv_requested() if semconv_latest is None else semconv_latest
        self.max_label_sets = max_label_sets
        self._metrics: GenAIMetrics | None = None
        if enable_metrics:
            meters = meter_provider if meter_provider is not None else metrics.get_meter_provider()
            self._use_meter_provider(meters)
        self._owned = owned or pipeline is not None
        self._pipeline = pipeline
        self.capture_payload = capture_payload
        self.payload_cap = payload_cap
        self.request_spans = request_spans
        self._requests: dict[str, Span] = {}
        self._held_context: dict[str, AttributionRecord | None] = {}
        """Open requests, with their latest record: its context spend is counted once, when
        the request ends."""
        self._live: dict[str, tuple[Span, object]] = {}
        self._retried: dict[str, _Retried] = {}
        self._openings: dict[tuple[str, str, str, str | None, int | None], _Opening] = {}
        self._metrics_in_child = False
        self._renew_lock = _forksafe.lock(self, "_renew_lock")
        _forksafe.after_fork_in_child(self._forget_parent)

    def _use_meter_provider(self, meters: metrics.MeterProvider) -> None:
        self._metrics = metrics_for(
            meters.get_meter(_SCOPE, _version()),
            latest=self._latest,
            label_sets=self.max_label_sets,
        )
        self._providers[1:] = [meters]

    def _forget_parent(self) -> None:
        """In a forked child: the parent's live calls are not the child's; an owned pipeline's
        metrics start again, on the child's first call, on a meter provider of its own (built
        then, not here: the SDK renews its locks in fork handlers that run after this one)."""
        self._live.clear()
        self._retried.clear()
        self._requests.clear()
        self._held_context.clear()
        if self._pipeline is not None and self._metrics is not None:
            self._metrics = None
            del self._providers[1:]
            self._metrics_in_child = True

    def _child_metrics(self) -> GenAIMetrics | None:
        """An owned pipeline's metrics in a forked child, made on first use."""
        with self._renew_lock:
            if self._metrics_in_child and self._pipeline is not None:
                self._metrics_in_child = False
                fresh = self._pipeline.meter_provider_in_child()
                if fresh is not None:
                    self._use_meter_provider(fresh)
            return self._metrics

    def request_started(self, request_id: str) -> tuple[str, Span | None, object | None]:
        """Open the request's span and make it current, unless one is current already (the
        application's: used as is, and left open) or request spans are off."""
        self._held_context.setdefault(request_id, None)
        current = trace.get_current_span()
        if current.get_span_context().is_valid:
            self._requests.setdefault(request_id, current)
            return request_id, current, None
        if not self.request_spans:
            return request_id, None, None
        span = self._tracer.start_span(
            names.REQUEST_SPAN,
            kind=SpanKind.INTERNAL,
            attributes={
                names.REQUEST_ID: encodable(request_id),
                names.OPENINFERENCE_SPAN_KIND: "CHAIN",
            },
        )
        self._requests[request_id] = span
        return request_id, span, otel_context.attach(trace.set_span_in_context(span))

    def request_ended(self, handle: tuple[str, Span | None, object | None] | None) -> None:
        """Count the request's context spend (from its latest record); forget the request's
        span, and end it if ``request_started`` opened it."""
        if handle is None:
            return
        request_id, span, token = handle
        held = self._held_context.pop(request_id, None)
        if held is not None:
            self._count_context(held)
        if span is None:
            return
        if self._requests.get(request_id) is span:
            del self._requests[request_id]
        if token is None:
            return
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        finally:
            span.end()

    def call_started(self, started: CallStarted) -> None:
        """Open the call's span and make it current for the rest of the call."""
        key = (
            started.operation,
            started.provider,
            started.model,
            started.server_address,
            started.server_port,
        )
        opening = self._openings.get(key)
        if opening is None:
            opening = _opening(*key)
            if len(self._openings) < _OPENINGS_KEPT:
                self._openings[key] = opening
        parent = otel_context.get_current()  # read once: the span's parent and the new context's
        span = self._tracer.start_span(
            opening[0],
            parent,
            SpanKind.CLIENT,
            _identity(started, opening),
            start_time=_ns(started.started_at),
        )
        token = otel_context.attach(trace.set_span_in_context(span, parent))
        self._live[started.call_id] = (span, token)  # one dict operation: atomic

    def emit(self, event: Event) -> None:
        """Finish the call's span (or render it whole, for an event with no start notice); an
        attempt of a retried call goes to ``_emit_attempt``."""
        if event.logical_call_id is not None:
            self._emit_attempt(event, event.logical_call_id)
            return
        live = self._live.pop(event.call_id, None)
        if live is not None:
            span, token = live
            otel_context.detach(token)  # type: ignore[arg-type]
            end_time = None
        else:
            span, end_time = self._whole_span(event)
        try:
            self._render(span, _attributes(event, live is None, event.cost, self._latest), event)
        finally:
            span.end(end_time=end_time)
        metrics = self._metrics
        if metrics is None and self._metrics_in_child:
            metrics = self._child_metrics()
        if metrics is not None:
            metrics.take(event, span.get_span_context())

    def _whole_span(self, event: Event) -> tuple[Span, int]:
        """A span for an event that had no live one, and the end time that covers its call."""
        started = _ns(event.started_at)
        span = self._tracer.start_span(
            _event_opening(event)[0], kind=SpanKind.CLIENT, start_time=started
        )
        return span, started + _duration_ns(event.latency_ms)

    def _emit_attempt(self, event: Event, logical: str) -> None:
        """One attempt of a retried call. While the call's span is live (it opened on the
        logical call's start notice), a retried attempt becomes a span event on it, leaving it
        open and current, and the last attempt ends it with its own attributes (its
        ``spanledger.call_id`` too; the first attempt's is ``spanledger.logical_call_id``), the
        number of attempts and the summed cost. Without a live span each attempt is a span of
        its own, as any event with no start notice is, carrying only its own cost."""
        retried: _Retried | None = None
        if event.retried:
            live = self._live.get(logical)
            if live is not None:
                self._note_attempt(live[0], event, logical)
                self._take_metrics(event, live[0])
                return
        else:
            live = self._live.pop(logical, None)
            retried = self._retried.pop(logical, None)
        if live is not None:
            span = live[0]
            otel_context.detach(live[1])  # type: ignore[arg-type]
            end_time = None
            cost = event.cost if retried is None else summed_cost(retried.cost, event.cost)
        else:
            span, end_time = self._whole_span(event)
            cost = event.cost
        try:
            attributes = _attributes(event, live is None, cost, self._latest)
            attributes[names.LOGICAL_CALL_ID] = logical
            if event.retried:
                attributes[names.ATTEMPT_NUMBER] = event.attempt
            else:
                attributes[names.ATTEMPTS] = event.attempt
                attributes[names.CALL_ID] = event.call_id
                if retried is not None and retried.dropped:
                    attributes[names.ATTEMPT_EVENTS_DROPPED] = retried.dropped
            self._render(span, attributes, event)
        finally:
            span.end(end_time=end_time)
        self._take_metrics(event, span)

    def _note_attempt(self, span: Span, event: Event, logical: str) -> None:
        """Add a retried attempt to its live span as a span event (at the attempt's end), up to
        ``MAX_ATTEMPT_EVENTS`` per call, and add its cost to the call's."""
        retried = self._retried.get(logical)
        if retried is None:
            retried = self._retried[logical] = _Retried(event.cost)
        else:
            retried.cost = summed_cost(retried.cost, event.cost)
        if retried.rendered >= MAX_ATTEMPT_EVENTS:
            retried.dropped += 1
            return
        retried.rendered += 1
        span.add_event(
            ATTEMPT_EVENT,
            attempt_attributes(event),
            timestamp=_ns(event.started_at) + _duration_ns(event.latency_ms),
        )

    def _take_metrics(self, event: Event, span: Span) -> None:
        metrics = self._current_metrics()
        if metrics is not None:
            metrics.take(event, span.get_span_context())

    def _current_metrics(self) -> GenAIMetrics | None:
        """The metrics to record into now (a forked child's are made on first use)."""
        if self._metrics is None and self._metrics_in_child:
            return self._child_metrics()
        return self._metrics

    def _render(self, span: Span, attributes: dict[str, Any], event: Event) -> None:
        """Attributes, opt-in payload, and on failure the error status and exception event
        (success leaves the status unset, as OTel asks of instrumentation)."""
        span.set_attributes(attributes)
        if self.capture_payload:
            for name, value in payload_fields(event).items():
                span.set_attribute(
                    _PAYLOAD_ATTRIBUTES[name], capped(json_text(value), self.payload_cap)
                )
        if isinstance(event, FAILED_EVENTS):
            span.set_status(Status(StatusCode.ERROR, event.error_category.value))
            span.add_event(
                names.EXCEPTION_EVENT,
                {
                    names.EXCEPTION_TYPE: "spanledger.ProviderError",
                    names.EXCEPTION_MESSAGE: event.error_message or event.error_category.value,
                },
            )

    def chain_started(self, document_count: int | None, top_k: int | None) -> ChainHandle:
        """Open a rerank chain's span, current while the chain runs."""
        return start_chain_span(self._tracer, document_count, top_k)

    def chain_ended(self, handle: ChainHandle, outcome: RerankOutcome) -> None:
        """End the chain's span with its outcome and attempts; count the outcome."""
        try:
            end_chain_span(handle, outcome)
        finally:
            metrics = self._current_metrics()
            if metrics is not None:
                metrics.chain_ended(outcome.status)

    def attribution(self, record: AttributionRecord) -> None:
        """Put the request's attribution on the request's span (while its scope is open; else
        on the current span) and record the cited token share, when there is one, in its
        histogram. The context spend is counted once per request, from the request's last
        record, when the request ends (at once for a record of no open request)."""
        span = self._requests.get(record.request_id)
        if span is None or not span.is_recording():
            span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(attribution_attributes(record))
        metrics = self._current_metrics()
        if metrics is not None and record.cited_token_share is not None:
            metrics.cited_share.record(record.cited_token_share)
        if record.request_id in self._held_context:
            self._held_context[record.request_id] = record  # the latest wins, at the end
        else:
            self._count_context(record)

    def _count_context(self, record: AttributionRecord) -> None:
        metrics = self._current_metrics()
        if metrics is not None:
            metrics.context_spent(record)

    @property
    def delivery(self) -> DeliveryStats | None:
        """What became of the spans of a spanledger-owned pipeline (``None`` otherwise):
        ``exported + failed + dropped + pending == produced``, in spans."""
        return self._pipeline.span_delivery if self._pipeline is not None else None

    @property
    def metric_delivery(self) -> DeliveryStats | None:
        """The same for OTLP metrics of a spanledger-owned pipeline, in data points (one per
        instrument and label set in each export)."""
        return self._pipeline.metric_delivery if self._pipeline is not None else None

    @property
    def pending_metrics(self) -> int:
        """Calls whose metrics wait for the next collection or flush."""
        return self._metrics.pending if self._metrics is not None else 0

    @property
    def metric_failures(self) -> int:
        """Figures that never reached an instrument: out of range (beyond signed 64-bit, not
        finite, a counter total that would overflow) or refused by the SDK."""
        return self._metrics.failures if self._metrics is not None else 0

    @property
    def label_overflows(self) -> int:
        """Calls recorded under the overflow model label, beyond ``max_label_sets``."""
        return self._metrics.overflows if self._metrics is not None else 0

    def flush(self, timeout: float | None = None) -> None:
        """Record queued metrics, then push queued spans and metrics out, waiting at most
        ``timeout`` seconds (default 5) however the backends behave."""
        deadline = time.monotonic() + (_DEFAULT_TIMEOUT if timeout is None else timeout)
        if self._metrics is not None:
            self._metrics.drain()
        if self._pipeline is not None:
            self._pipeline.flush(deadline)
            return
        for provider in self._providers:
            _call_provider(provider, "force_flush", deadline)

    def shutdown(self, timeout: float | None = None) -> None:
        """Flush; shut the providers down too if this exporter owns them. At most ``timeout``
        seconds (default: the pipeline's shutdown timeout, else 5); what an owned pipeline
        could not deliver by then is counted dropped."""
        if self._pipeline is not None:
            default = self._pipeline.shutdown_timeout
        else:
            default = _DEFAULT_TIMEOUT
        deadline = time.monotonic() + (default if timeout is None else timeout)
        if self._metrics is not None:
            self._metrics.drain()
        if self._pipeline is not None:
            self._pipeline.shutdown(deadline)
            return
        stage = "shutdown" if self._owned else "force_flush"
        for provider in self._providers:
            _call_provider(provider, stage, deadline)


def _version() -> str:
    from spanledger._version import __version__

    return __version__


def _call_provider(provider: object, stage: str, deadline: float) -> None:
    """Call ``provider.<stage>()`` (with the time left, when it takes a timeout) on a helper
    thread, waiting no later than ``deadline``: an SDK flush does not bound itself."""
    from spanledger.exporters._lifecycle import call_within

    method = getattr(provider, stage, None)
    if not callable(method):
        return
    remaining = max(0.0, deadline - time.monotonic())
    if _takes_timeout_millis(method):
        granted = max(remaining, _SDK_TIMEOUT_FLOOR) * 1000  # the SDK refuses a spent one

        def action() -> object:
            return method(timeout_millis=granted)
    else:
        action = method
    call_within(action, remaining, name=f"spanledger-{stage.replace('_', '-')}")


def _takes_timeout_millis(method: Callable[..., object]) -> bool:
    try:
        return "timeout_millis" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
