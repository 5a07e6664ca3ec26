"""OpenTelemetry rendering: one CLIENT span per call, and GenAI metrics.

Spans follow the OTel GenAI conventions: ``embeddings {model}`` with
``gen_ai.operation.name=embeddings``; rerank has no upstream convention yet, so it is
``rerank {model}`` with ``gen_ai.operation.name=rerank`` and spanledger's own attributes for what
the convention lacks. A figure the provider did not report is absent, never ``0``.

The span is live while the call runs (it starts on the recorder's start notice and is current
until the call ends), so it parents under the caller's span and HTTP client spans nest under it.
Only the ``opentelemetry-api`` is needed here; the SDK and exporters are the application's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import metrics, trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from spanledger.costs import CHARGED_STATUSES, NOT_PRICED_STATUSES, CostLine
from spanledger.events import (
    AttributionRecord,
    CallStarted,
    EmbeddingEvent,
    Event,
    RerankUsage,
)
from spanledger.exporters._otel_metrics import (
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

if TYPE_CHECKING:
    from spanledger.exporters.delivery import CountingSpanExporter, DeliveryStats

__all__ = [
    "DURATION_BUCKETS",
    "SHARE_BUCKETS",
    "TOKEN_BUCKETS",
    "OtelExporter",
    "attribution_attributes",
    "latest_semconv_requested",
]

_SCOPE = "spanledger"
_PAYLOAD_ATTRIBUTES = {
    "inputs": "spanledger.embedding.inputs",
    "query": "spanledger.rerank.query",
    "documents": "spanledger.rerank.documents",
    "results": "spanledger.rerank.results",
    "request_extras": "spanledger.request.extras",
}


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


_Opening = tuple[str, dict[str, Any]]
"""A span's name and the attributes every call to the same endpoint and model opens with."""


def _opening(
    operation: str, provider: str, model: str, address: str | None, port: int | None
) -> _Opening:
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model,
    }
    if address:
        attributes["server.address"] = address
        if port is not None:
            attributes["server.port"] = port
    return f"{operation} {model}", attributes


def _identity(source: Event | CallStarted, opening: _Opening) -> dict[str, Any]:
    """Attributes known when the call starts (the sampling-relevant ones among them)."""
    attributes = {**opening[1], "spanledger.call_id": source.call_id}
    if source.request_id:
        attributes["spanledger.request_id"] = source.request_id
    return attributes


def _event_opening(event: Event) -> _Opening:
    operation = "embeddings" if isinstance(event, EMBEDDING_EVENTS) else "rerank"
    return _opening(operation, event.provider, event.model, event.server_address, event.server_port)


def span_attributes(event: Event, *, with_identity: bool = True) -> dict[str, Any]:
    """Every attribute the span gets for ``event``, payload excluded (``with_identity=False``
    leaves out those already set when the span was opened)."""
    attributes = _identity(event, _event_opening(event)) if with_identity else {}
    if isinstance(event, EMBEDDING_EVENTS):
        attributes["spanledger.embedding.input_count"] = event.input_count
        if event.input_type is not None:
            attributes["spanledger.embedding.input_type"] = event.input_type
    else:
        attributes["spanledger.rerank.query_length"] = event.query_length
        attributes["spanledger.rerank.document_count"] = event.document_count
        if event.top_k is not None:
            attributes["gen_ai.request.top_k"] = event.top_k
    if isinstance(event, SUCCEEDED_EVENTS):
        if event.response_model is not None:
            attributes["gen_ai.response.model"] = event.response_model
        if event.response_id is not None:
            attributes["gen_ai.response.id"] = event.response_id
        usage = event.usage
        if usage is not None:
            if usage.input_tokens is not None:
                attributes["gen_ai.usage.input_tokens"] = usage.input_tokens
            if isinstance(usage, RerankUsage) and usage.search_units is not None:
                attributes["spanledger.usage.search_units"] = usage.search_units
        if isinstance(event, EmbeddingEvent):
            if event.dimensions is not None:
                attributes["gen_ai.embeddings.dimension.count"] = event.dimensions
        else:
            attributes["spanledger.rerank.result_count"] = event.result_count
    else:
        attributes["error.type"] = event.error_category.value
        if event.error_type:
            attributes["spanledger.error.type"] = event.error_type
        if event.status_code is not None:
            attributes["http.response.status_code"] = event.status_code
        if event.retry_after is not None:
            attributes["spanledger.error.retry_after"] = event.retry_after
    if event.cost is not None:
        attributes.update(cost_attributes(event.cost))
    return attributes


def cost_attributes(line: CostLine) -> dict[str, Any]:
    """``gen_ai.usage.cost`` only when the amount is known and was charged; the status always."""
    attributes: dict[str, Any] = {"spanledger.cost.status": line.status.value}
    if line.amount is not None and line.status in CHARGED_STATUSES:
        attributes["gen_ai.usage.cost"] = float(line.amount)
        if line.currency:
            attributes["spanledger.cost.currency"] = line.currency
    if line.code is not None and line.status in NOT_PRICED_STATUSES:
        attributes["spanledger.cost.reason"] = line.code.value
    return attributes


def attribution_attributes(record: AttributionRecord) -> dict[str, Any]:
    """``spanledger.attribution.*`` for the request's span; unknown figures are left out."""
    attributes: dict[str, Any] = {
        "spanledger.request_id": record.request_id,
        "spanledger.attribution.frames_served": record.frames_served,
        "spanledger.attribution.frames_rendered": record.frames_rendered,
        "spanledger.attribution.frames_cited": record.frames_cited,
        "spanledger.attribution.rendered_tokens": record.rendered_tokens,
        "spanledger.attribution.cited_tokens": record.cited_tokens,
        "spanledger.attribution.uncited_rendered_tokens": record.uncited_rendered_tokens,
        "spanledger.attribution.reconcilable": record.reconcilable,
        "spanledger.attribution.spend_complete": record.spend_complete,
    }
    if record.cited_token_share is not None:
        attributes["spanledger.attribution.cited_token_share"] = record.cited_token_share
    if record.spend is not None:
        attributes["spanledger.attribution.spend"] = float(record.spend)
    if record.spend_per_cited_token is not None:
        attributes["spanledger.attribution.spend_per_cited_token"] = float(
            record.spend_per_cited_token
        )
    return attributes


class OtelExporter:
    """A recorder sink that renders each call as an OTel span and records GenAI metrics.

    ``tracer_provider`` / ``meter_provider`` default to the application's global ones; the
    exporter never installs a provider. ``capture_payload=True`` adds inputs, query, documents,
    results and extras as JSON attributes of at most ``payload_cap`` bytes each (never vectors).
    ``semconv_latest`` defaults to ``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``.
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
        owned: bool = False,
        delivery: CountingSpanExporter | None = None,
        on_shutdown: Callable[[], object] | None = None,
    ) -> None:
        if payload_cap < MIN_PAYLOAD_CAP:
            raise ValueError(f"payload_cap must be at least {MIN_PAYLOAD_CAP} bytes")
        from spanledger import __version__

        provider = tracer_provider if tracer_provider is not None else trace.get_tracer_provider()
        self._tracer = provider.get_tracer(_SCOPE, __version__)
        self._providers: list[object] = [provider]
        self._metrics: GenAIMetrics | None = None
        if enable_metrics:
            meters = meter_provider if meter_provider is not None else metrics.get_meter_provider()
            latest = latest_semconv_requested() if semconv_latest is None else semconv_latest
            self._metrics = metrics_for(meters.get_meter(_SCOPE, __version__), latest=latest)
            self._providers.append(meters)
        self._owned = owned
        self._delivery = delivery
        self._on_shutdown = on_shutdown
        self.capture_payload = capture_payload
        self.payload_cap = payload_cap
        self._live: dict[str, tuple[Span, object]] = {}
        self._openings: dict[tuple[str, str, str, str | None, int | None], _Opening] = {}

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
            if len(self._openings) < 10_000:
                self._openings[key] = opening
        span = self._tracer.start_span(
            opening[0],
            kind=SpanKind.CLIENT,
            attributes=_identity(started, opening),
            start_time=_ns(started.started_at),
        )
        token = otel_context.attach(trace.set_span_in_context(span))
        self._live[started.call_id] = (span, token)  # one dict operation: atomic

    def emit(self, event: Event) -> None:
        """Finish the call's span (or render it whole, for an event with no start notice)."""
        live = self._live.pop(event.call_id, None)
        if live is not None:
            span, token = live
            otel_context.detach(token)  # type: ignore[arg-type]
            end_time = None
        else:
            span = self._tracer.start_span(
                _event_opening(event)[0],
                kind=SpanKind.CLIENT,
                start_time=_ns(event.started_at),
            )
            end_time = _ns(event.started_at) + int(event.latency_ms * 1_000_000)
        try:
            self._render(span, event, with_identity=live is None)
        finally:
            span.end(end_time=end_time)
        if self._metrics is not None:
            self._metrics.take(event, span.get_span_context())

    def _render(self, span: Span, event: Event, *, with_identity: bool) -> None:
        """Attributes, opt-in payload, and on failure the error status and exception event
        (success leaves the status unset, as OTel asks of instrumentation)."""
        span.set_attributes(span_attributes(event, with_identity=with_identity))
        if self.capture_payload:
            for name, value in payload_fields(event).items():
                span.set_attribute(
                    _PAYLOAD_ATTRIBUTES[name], capped(json_text(value), self.payload_cap)
                )
        if isinstance(event, FAILED_EVENTS):
            span.set_status(Status(StatusCode.ERROR, event.error_category.value))
            span.add_event(
                "exception",
                {
                    "exception.type": "spanledger.ProviderError",
                    "exception.message": event.error_message or event.error_category.value,
                },
            )

    def attribution(self, record: AttributionRecord) -> None:
        """Put the request's attribution on the current span (the request's) and record the
        cited token share, when there is one, in its histogram."""
        span = trace.get_current_span()
        if span.is_recording():
            span.set_attributes(attribution_attributes(record))
        if self._metrics is not None and record.cited_token_share is not None:
            self._metrics.cited_share.record(record.cited_token_share)

    @property
    def delivery(self) -> DeliveryStats | None:
        """Spans the backend accepted and lost, when this exporter's pipeline is counted."""
        return self._delivery.stats if self._delivery is not None else None

    @property
    def pending_metrics(self) -> int:
        """Calls whose metrics wait for the next collection or flush."""
        return self._metrics.pending if self._metrics is not None else 0

    def flush(self) -> None:
        """Record queued metrics, then push queued spans and metrics out through the providers
        that support it."""
        if self._metrics is not None:
            self._metrics.drain()
        for provider in self._providers:
            force_flush = getattr(provider, "force_flush", None)
            if callable(force_flush):
                force_flush()

    def shutdown(self) -> None:
        """Flush; shut the providers down too if this exporter created them."""
        if not self._owned:
            self.flush()
            return
        if self._metrics is not None:
            self._metrics.drain()
        for provider in self._providers:
            stop = getattr(provider, "shutdown", None)
            if callable(stop):
                stop()
        if self._on_shutdown is not None:
            self._on_shutdown()
