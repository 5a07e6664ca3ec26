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
    EmbeddingFailedEvent,
    Event,
    RerankEvent,
    RerankFailedEvent,
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

DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                    40.96, 81.92)  # fmt: skip
TOKEN_BUCKETS = (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304,
                 16777216, 67108864)  # fmt: skip

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


def _ns(moment: datetime) -> int:
    """Nanoseconds since the epoch, exact to the microsecond (no float rounding)."""
    return (moment - _EPOCH) // timedelta(microseconds=1) * 1000


def _operation(event: Event | CallStarted) -> str:
    if isinstance(event, CallStarted):
        return event.operation
    return "embeddings" if isinstance(event, EmbeddingEvent | EmbeddingFailedEvent) else "rerank"


def _identity(source: Event | CallStarted) -> dict[str, Any]:
    """Attributes known when the call starts (the sampling-relevant ones among them)."""
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": _operation(source),
        "gen_ai.provider.name": source.provider,
        "gen_ai.request.model": source.model,
        "spanledger.call_id": source.call_id,
    }
    if source.server_address:
        attributes["server.address"] = source.server_address
        if source.server_port is not None:
            attributes["server.port"] = source.server_port
    if source.request_id:
        attributes["spanledger.request_id"] = source.request_id
    return attributes


def span_attributes(event: Event, *, with_identity: bool = True) -> dict[str, Any]:
    """Every attribute the span gets for ``event``, payload excluded (``with_identity=False``
    leaves out those already set when the span was opened)."""
    attributes = _identity(event) if with_identity else {}
    if isinstance(event, EmbeddingEvent | EmbeddingFailedEvent):
        attributes["spanledger.embedding.input_count"] = event.input_count
        if event.input_type is not None:
            attributes["spanledger.embedding.input_type"] = event.input_type
    else:
        attributes["spanledger.rerank.query_length"] = event.query_length
        attributes["spanledger.rerank.document_count"] = event.document_count
        if event.top_k is not None:
            attributes["gen_ai.request.top_k"] = event.top_k
    if isinstance(event, EmbeddingEvent | RerankEvent):
        if event.response_model is not None:
            attributes["gen_ai.response.model"] = event.response_model
        if event.response_id is not None:
            attributes["gen_ai.response.id"] = event.response_id
        if event.usage is not None and event.usage.input_tokens is not None:
            attributes["gen_ai.usage.input_tokens"] = event.usage.input_tokens
    if isinstance(event, EmbeddingEvent) and event.dimensions is not None:
        attributes["gen_ai.embeddings.dimension.count"] = event.dimensions
    if isinstance(event, RerankEvent):
        attributes["spanledger.rerank.result_count"] = event.result_count
        if event.usage is not None and event.usage.search_units is not None:
            attributes["spanledger.usage.search_units"] = event.usage.search_units
    if event.cost is not None:
        attributes.update(cost_attributes(event.cost))
    if isinstance(event, EmbeddingFailedEvent | RerankFailedEvent):
        attributes["error.type"] = event.error_category.value
        if event.error_type:
            attributes["spanledger.error.type"] = event.error_type
        if event.status_code is not None:
            attributes["http.response.status_code"] = event.status_code
        if event.retry_after is not None:
            attributes["spanledger.error.retry_after"] = event.retry_after
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


SHARE_BUCKETS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


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


class _Instruments:
    """The metric instruments, created once per exporter."""

    def __init__(self, meter: metrics.Meter, *, latest: bool) -> None:
        self.duration = meter.create_histogram(
            "gen_ai.client.operation.duration",
            unit="s",
            description="Duration of GenAI client operations.",
            explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            "gen_ai.client.token.usage",
            unit="{token}",
            description="Tokens the provider reported for GenAI client operations.",
            explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
        )
        self.embedding_duration = self.duration
        self.embedding_tokens = self.tokens
        if latest:
            self.embedding_duration = meter.create_histogram(
                "gen_ai.client.embeddings.duration",
                unit="s",
                description="Duration of GenAI embeddings operations.",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            )
            self.embedding_tokens = meter.create_histogram(
                "gen_ai.client.embeddings.operation.input_tokens",
                unit="{token}",
                description="Input tokens the provider billed for embeddings operations.",
                explicit_bucket_boundaries_advisory=TOKEN_BUCKETS,
            )
        self.latest = latest
        self._attribute_cache: dict[tuple[str, str, str, str | None, bool], dict[str, Any]] = {}
        self.search_units = meter.create_counter(
            "spanledger.rerank.search_units",
            unit="{search_unit}",
            description="Search units the provider reported for rerank calls.",
        )
        self.cost = meter.create_counter(
            "spanledger.cost",
            unit="1",
            description="Spend on priced and estimated calls, in the price table's currency.",
        )
        self.cited_share = meter.create_histogram(
            "spanledger.attribution.cited_token_share",
            unit="1",
            description="Share of rendered context tokens that the answer cited, per request.",
            explicit_bucket_boundaries_advisory=SHARE_BUCKETS,
        )
        self.unpriced = meter.create_counter(
            "spanledger.cost.unpriced",
            unit="{call}",
            description="Calls whose usage could not be priced (unpriced or unmetered).",
        )

    def _record_cost(self, event: Event, line: CostLine) -> None:
        base = {"gen_ai.provider.name": event.provider, "gen_ai.request.model": event.model}
        if line.status in CHARGED_STATUSES and line.amount is not None:
            self.cost.add(
                float(line.amount),
                {
                    **base,
                    "spanledger.cost.currency": line.currency or "",
                    "spanledger.cost.status": line.status.value,
                },
            )
        elif line.status in NOT_PRICED_STATUSES:
            reason = line.code.value if line.code is not None else line.status.value
            self.unpriced.add(1, {**base, "spanledger.cost.reason": reason})

    def _attributes(self, event: Event, tokens: bool) -> dict[str, Any]:
        """Low-cardinality metric attributes, built once per distinct combination."""
        error = (
            event.error_category.value
            if isinstance(event, EmbeddingFailedEvent | RerankFailedEvent)
            else None
        )
        operation = _operation(event)
        key = (operation, event.provider, event.model, error, tokens)
        cached = self._attribute_cache.get(key)
        if cached is None:
            cached = {
                "gen_ai.operation.name": operation,
                "gen_ai.provider.name": event.provider,
                "gen_ai.request.model": event.model,
            }
            if error is not None:
                cached["error.type"] = error
            if tokens and not (self.latest and operation == "embeddings"):
                cached["gen_ai.token.type"] = "input"
            if len(self._attribute_cache) < 10_000:
                self._attribute_cache[key] = cached
        return cached

    def record(self, event: Event) -> None:
        is_embedding = isinstance(event, EmbeddingEvent | EmbeddingFailedEvent)
        duration = self.embedding_duration if is_embedding else self.duration
        duration.record(event.latency_ms / 1000.0, self._attributes(event, tokens=False))
        if event.cost is not None:
            self._record_cost(event, event.cost)
        if not isinstance(event, EmbeddingEvent | RerankEvent) or event.usage is None:
            return
        if event.usage.input_tokens is not None:
            tokens = self.embedding_tokens if is_embedding else self.tokens
            tokens.record(event.usage.input_tokens, self._attributes(event, tokens=True))
        if isinstance(event, RerankEvent) and event.usage.search_units is not None:
            self.search_units.add(event.usage.search_units, self._attributes(event, tokens=False))


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
        self._instruments: _Instruments | None = None
        if enable_metrics:
            meters = meter_provider if meter_provider is not None else metrics.get_meter_provider()
            latest = latest_semconv_requested() if semconv_latest is None else semconv_latest
            self._instruments = _Instruments(meters.get_meter(_SCOPE, __version__), latest=latest)
            self._providers.append(meters)
        self._owned = owned
        self._delivery = delivery
        self._on_shutdown = on_shutdown
        self.capture_payload = capture_payload
        self.payload_cap = payload_cap
        self._live: dict[str, tuple[Span, object]] = {}

    def call_started(self, started: CallStarted) -> None:
        """Open the call's span and make it current for the rest of the call."""
        span = self._tracer.start_span(
            f"{started.operation} {started.model}",
            kind=SpanKind.CLIENT,
            attributes=_identity(started),
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
                f"{_operation(event)} {event.model}",
                kind=SpanKind.CLIENT,
                start_time=_ns(event.started_at),
            )
            end_time = _ns(event.started_at) + int(event.latency_ms * 1_000_000)
        try:
            self._render(span, event, with_identity=live is None)
        finally:
            span.end(end_time=end_time)
        if self._instruments is not None:
            self._instruments.record(event)

    def _render(self, span: Span, event: Event, *, with_identity: bool) -> None:
        """Attributes, opt-in payload, and on failure the error status and exception event
        (success leaves the status unset, as OTel asks of instrumentation)."""
        span.set_attributes(span_attributes(event, with_identity=with_identity))
        if self.capture_payload:
            for name, value in payload_fields(event).items():
                span.set_attribute(
                    _PAYLOAD_ATTRIBUTES[name], capped(json_text(value), self.payload_cap)
                )
        if isinstance(event, EmbeddingFailedEvent | RerankFailedEvent):
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
        if self._instruments is not None and record.cited_token_share is not None:
            self._instruments.cited_share.record(record.cited_token_share)

    @property
    def delivery(self) -> DeliveryStats | None:
        """Spans the backend accepted and lost, when this exporter's pipeline is counted."""
        return self._delivery.stats if self._delivery is not None else None

    def flush(self) -> None:
        """Push queued spans and metrics out through the providers that support it."""
        for provider in self._providers:
            force_flush = getattr(provider, "force_flush", None)
            if callable(force_flush):
                force_flush()

    def shutdown(self) -> None:
        """Flush; shut the providers down too if this exporter created them."""
        if not self._owned:
            self.flush()
            return
        for provider in self._providers:
            stop = getattr(provider, "shutdown", None)
            if callable(stop):
                stop()
        if self._on_shutdown is not None:
            self._on_shutdown()
