"""Export pipelines that spanledger builds and owns: OTLP spans and metrics, a Prometheus
endpoint, and a Langfuse client, each private to spanledger (nothing is installed globally).

``spanledger.configure()`` reads the settings from its arguments and the environment and hands
them here as plain values; this module only builds.

What an owned pipeline guarantees, whatever state its backend is in (refusing connections,
accepting them and never answering):

- every span and metric data point is counted: ``exported + failed + dropped + pending ==
  produced`` (``OtelExporter.delivery`` / ``.metric_delivery``, ``LangfuseExporter.delivery``);
- flushing and shutting down end within ``shutdown_timeout`` seconds (5 by default), and so
  does a process that exits without shutting down: what is still pending then is dropped and
  counted;
- the SDKs' retry and error messages from these pipelines never reach the application's
  logging: each is told once per backend and cause through spanledger's logging
  (``spanledger.exporters``) as a sentence naming the backend, its address and the cause,
  never with the messages' arguments (they may hold payload);
- a forked child exports only its own spans and metrics, through connections of its own.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spanledger import _forksafe
from spanledger.exporters._export_logs import Backend, route_export_logs, safe_address
from spanledger.exporters._langfuse_pipeline import LangfusePipeline, langfuse_pipeline
from spanledger.exporters._lifecycle import (
    DEFAULT_SHUTDOWN_TIMEOUT,
    closed_at_exit,
    missing_extra,
    remaining,
    still_open,
)
from spanledger.recorder import checked_timeout

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource

    from spanledger.exporters._metric_delivery import CountingMetricReader
    from spanledger.exporters._span_delivery import CountingSpanProcessor
    from spanledger.exporters.delivery import DeliveryStats
    from spanledger.exporters.otel import OtelExporter
    from spanledger.exporters.prometheus import PrometheusEndpoint

__all__ = [
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "LangfusePipeline",
    "OtelPipeline",
    "OtlpSettings",
    "langfuse_pipeline",
    "missing_extra",
    "otel_pipeline",
    "service_resource",
]


@dataclass(frozen=True)
class OtlpSettings:
    """Where OTLP/HTTP spans and metrics go (``metrics_endpoint=None``: no OTLP metrics)."""

    traces_endpoint: str
    metrics_endpoint: str | None
    traces_headers: dict[str, str] | None = None
    metrics_headers: dict[str, str] | None = None
    metric_interval: float = 60.0
    """Seconds between periodic metric exports."""

    def __repr__(self) -> str:
        """The settings with no secret: endpoints without credentials or query, header names
        without their values (an OTLP header is often an API key)."""

        def names(headers: dict[str, str] | None) -> str:
            return (
                "None"
                if headers is None
                else "{" + ", ".join(f"{name!r}: '<redacted>'" for name in headers) + "}"
            )

        metrics = (
            repr(safe_address(self.metrics_endpoint))
            if self.metrics_endpoint is not None
            else "None"
        )
        return (
            f"OtlpSettings(traces_endpoint={safe_address(self.traces_endpoint)!r}, "
            f"metrics_endpoint={metrics}, traces_headers={names(self.traces_headers)}, "
            f"metrics_headers={names(self.metrics_headers)}, "
            f"metric_interval={self.metric_interval!r})"
        )


class OtelPipeline:
    """The providers, counted queues and endpoint that ``otel_pipeline`` built for one
    ``OtelExporter``, flushed and shut down within a deadline."""

    def __init__(
        self,
        *,
        tracer_provider: Any,
        spans: CountingSpanProcessor | None,
        meter_provider: MeterProvider | None,
        metrics: CountingMetricReader | None,
        endpoint: PrometheusEndpoint | None,
        shutdown_timeout: float,
        metrics_for_child: Callable[[], tuple[MeterProvider, CountingMetricReader]] | None,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.spans = spans
        self.meter_provider = meter_provider
        self.metrics = metrics
        self.endpoint = endpoint
        self.shutdown_timeout = shutdown_timeout
        self._metrics_for_child = metrics_for_child
        self._closed = False
        closed_at_exit(self)
        _forksafe.after_fork_in_child(self._forget_parent)

    def _forget_parent(self) -> None:
        """In a forked child: the meter provider holds the parent's aggregations (its reader
        closed itself); the child gets its own on first use (``meter_provider_in_child``)."""
        self.meter_provider = None
        self.metrics = None

    @property
    def span_delivery(self) -> DeliveryStats | None:
        return self.spans.stats if self.spans is not None else None

    @property
    def metric_delivery(self) -> DeliveryStats | None:
        return self.metrics.stats if self.metrics is not None else None

    def flush(self, deadline: float) -> None:
        """Collect the metrics, then wait for spans and metrics to be exported together."""
        if self.metrics is not None and not self._closed:
            self.metrics.collect()
        if self.spans is not None:
            self.spans.flush(deadline)
        if self.metrics is not None:
            self.metrics.wait(deadline)

    def shutdown(self, deadline: float) -> None:
        """Export what is pending until ``deadline`` (spans and the last metric collection
        side by side), write off the rest, release it all."""
        if self._closed:
            return
        self._closed = True
        still_open(self)
        if self.metrics is not None:
            self.metrics.collect()
        if self.spans is not None:
            self.spans.close(deadline)
        if self.metrics is not None:
            self.metrics.close(deadline, collected=True)
        self._release_providers(deadline)

    def _release_providers(self, deadline: float) -> None:
        """Shut the providers down (their counted parts are closed already, so this is quick;
        the SDK refuses a spent deadline, hence the floor) and stop the endpoint."""
        shutdown_tracer = getattr(self.tracer_provider, "shutdown", None)
        with contextlib.suppress(Exception):
            if callable(shutdown_tracer):
                shutdown_tracer()
        with contextlib.suppress(Exception):
            if self.meter_provider is not None:
                self.meter_provider.shutdown(timeout_millis=max(remaining(deadline), 0.1) * 1000)
        if self.endpoint is not None:
            self.endpoint.close(timeout=max(remaining(deadline), 0.1))

    def meter_provider_in_child(self) -> MeterProvider | None:
        """In a forked child: a meter provider of the child's own (the inherited one holds the
        parent's aggregations), exporting over OTLP; ``None`` when no OTLP metrics were set up
        (a Prometheus endpoint serves only the process that configured it)."""
        if self._metrics_for_child is None:
            self.meter_provider = self.metrics = None
            return None
        self.meter_provider, self.metrics = self._metrics_for_child()
        return self.meter_provider


def otel_pipeline(
    *,
    otlp: OtlpSettings | None,
    prometheus: tuple[str, int] | None,
    service_name: str,
    capture_payload: bool,
    resource_attributes: Mapping[str, str] | None = None,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
) -> OtelExporter:
    """An ``OtelExporter`` over providers private to spanledger: OTLP spans and metrics when
    ``otlp`` is given, and a Prometheus scrape endpoint on ``prometheus`` (address, port)."""
    timeout = checked_timeout(shutdown_timeout)
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.trace import NoOpTracerProvider

        from spanledger.exporters.otel import OtelExporter
    except ImportError as error:
        raise missing_extra(_extras_for(otlp, prometheus), error) from None

    resource = Resource.create(service_resource(service_name, resource_attributes or {}))
    spans = None
    tracer_provider: Any = NoOpTracerProvider()
    make_reader = None
    if otlp is not None:
        spans = _otlp_spans(otlp, timeout)
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(spans)
        if otlp.metrics_endpoint is not None:
            make_reader = _otlp_metric_reader(otlp, timeout)
    endpoint = _prometheus_endpoint(prometheus)
    metric_reader = make_reader() if make_reader is not None else None
    readers: list[Any] = [metric_reader] if metric_reader is not None else []
    if endpoint is not None:
        readers.append(endpoint.reader)
    meter_provider = _meter_provider(resource, readers) if readers else None
    metrics_for_child = None
    if make_reader is not None:
        renew = make_reader

        def metrics_for_child() -> tuple[MeterProvider, CountingMetricReader]:
            reader = renew()
            return _meter_provider(resource, [reader]), reader

    route_export_logs()
    pipeline = OtelPipeline(
        tracer_provider=tracer_provider,
        spans=spans,
        meter_provider=meter_provider,
        metrics=metric_reader,
        endpoint=endpoint,
        shutdown_timeout=timeout,
        metrics_for_child=metrics_for_child,
    )
    return OtelExporter(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        enable_metrics=meter_provider is not None,
        capture_payload=capture_payload,
        pipeline=pipeline,
    )


def service_resource(service_name: str, attributes: Mapping[str, str]) -> dict[str, str]:
    """The resource the spans and metrics describe: ``attributes`` (``OTEL_RESOURCE_ATTRIBUTES``)
    with ``service_name`` (``OTEL_SERVICE_NAME``, which wins), and Phoenix's project named
    after the service unless the attributes name one (Phoenix ignores ``service.name``)."""
    resource = {**attributes, "service.name": service_name}
    resource.setdefault("openinference.project.name", service_name)
    return resource


def _extras_for(otlp: OtlpSettings | None, prometheus: tuple[str, int] | None) -> str:
    """The extras a configuration needs: ``otel`` for OTLP, ``prometheus`` for the scrape
    endpoint (which brings the OTel SDK too)."""
    needed = [name for name, used in (("otel", otlp), ("prometheus", prometheus)) if used]
    return ",".join(needed) or "otel"


def _otlp_spans(otlp: OtlpSettings, timeout: float) -> CountingSpanProcessor:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        from spanledger.exporters._span_delivery import CountingSpanProcessor
    except ImportError as error:
        raise missing_extra("otel", error) from None
    endpoint, headers = otlp.traces_endpoint, otlp.traces_headers
    target = Backend("OTLP traces", endpoint)
    return CountingSpanProcessor(
        lambda: OTLPSpanExporter(endpoint=endpoint, headers=headers, session=target.session()),
        backend="otlp",
        shutdown_timeout=timeout,
        target=target,
    )


def _otlp_metric_reader(otlp: OtlpSettings, timeout: float) -> Callable[[], CountingMetricReader]:
    """A builder of the counting OTLP metric reader (called once here, and again in a forked
    child, whose copy of the parent's would share its connections)."""
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        from spanledger.exporters._metric_delivery import CountingMetricReader
    except ImportError as error:
        raise missing_extra("otel", error) from None

    endpoint, headers, interval = otlp.metrics_endpoint, otlp.metrics_headers, otlp.metric_interval

    def build() -> CountingMetricReader:
        target = Backend("OTLP metrics", endpoint or "")
        return CountingMetricReader(
            OTLPMetricExporter(endpoint=endpoint, headers=headers, session=target.session()),
            interval=interval,
            shutdown_timeout=timeout,
            target=target,
        )

    return build


def _meter_provider(resource: Resource, readers: list[Any]) -> MeterProvider:
    from opentelemetry.sdk.metrics import MeterProvider

    return MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)


def _prometheus_endpoint(prometheus: tuple[str, int] | None) -> PrometheusEndpoint | None:
    if prometheus is None:
        return None
    try:
        from spanledger.exporters.prometheus import PrometheusEndpoint
    except ImportError as error:
        raise missing_extra("prometheus", error) from None
    address, port = prometheus
    return PrometheusEndpoint(port=port, addr=address)
