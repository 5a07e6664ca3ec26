"""Export pipelines that spanledger builds and owns: OTLP spans and metrics, a Prometheus
endpoint, and a Langfuse client, each private to spanledger (nothing is installed globally).

``spanledger.configure()`` reads the settings from its arguments and the environment and hands
them here as plain values; this module only builds.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spanledger.exporters.langfuse import LangfuseExporter
    from spanledger.exporters.otel import OtelExporter

__all__ = [
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "OtlpSettings",
    "langfuse_pipeline",
    "missing_extra",
    "otel_pipeline",
]

DEFAULT_SHUTDOWN_TIMEOUT = 5.0
"""Seconds that shutting a pipeline down may take, whatever state its backend is in."""


@dataclass(frozen=True)
class OtlpSettings:
    """Where OTLP/HTTP spans and metrics go (``metrics_endpoint=None``: no OTLP metrics)."""

    traces_endpoint: str
    metrics_endpoint: str | None
    traces_headers: dict[str, str] | None = None
    metrics_headers: dict[str, str] | None = None


def missing_extra(extra: str, error: ImportError) -> ImportError:
    return ImportError(f"install spanledger[{extra}] to use this exporter ({error.name} missing)")


def otel_pipeline(
    *,
    otlp: OtlpSettings | None,
    prometheus: tuple[str, int] | None,
    service_name: str,
    capture_payload: bool,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
) -> OtelExporter:
    """An ``OtelExporter`` over providers private to spanledger: OTLP spans and metrics when
    ``otlp`` is given, and a Prometheus scrape endpoint on ``prometheus`` (address, port)."""
    try:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import MetricReader
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.trace import NoOpTracerProvider

        from spanledger.exporters.delivery import CountingSpanExporter
        from spanledger.exporters.otel import OtelExporter
    except ImportError as error:
        raise missing_extra("otel", error) from None

    resource = Resource.create({"service.name": service_name})
    readers: list[MetricReader] = []
    spans = None
    tracer_provider: Any = NoOpTracerProvider()
    endpoint = None
    if otlp is not None:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        except ImportError as error:
            raise missing_extra("otel", error) from None
        spans = CountingSpanExporter(
            OTLPSpanExporter(endpoint=otlp.traces_endpoint, headers=otlp.traces_headers),
            backend="otlp",
        )
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        if otlp.metrics_endpoint is not None:
            readers.append(
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(endpoint=otlp.metrics_endpoint, headers=otlp.metrics_headers)
                )
            )
    if prometheus is not None:
        try:
            from spanledger.exporters.prometheus import PrometheusEndpoint
        except ImportError as error:
            raise missing_extra("prometheus", error) from None
        address, port = prometheus
        endpoint = PrometheusEndpoint(port=port, addr=address)
        readers.append(endpoint.reader)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers) if readers else None
    return OtelExporter(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        enable_metrics=meter_provider is not None,
        capture_payload=capture_payload,
        owned=True,
        delivery=spans,
        on_shutdown=endpoint.close if endpoint is not None else None,
    )


_LANGFUSE_PIPELINES: dict[tuple[str, str, str], tuple[Any, Any]] = {}


def langfuse_pipeline(
    *,
    public_key: str,
    secret_key: str,
    host: str,
    capture_payload: bool,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
) -> LangfuseExporter:
    """A Langfuse client exporting through a counted OTLP pipeline, made once per process
    for a given key and host (the langfuse SDK keeps a single client per public key, so a
    second pipeline for the same key would be silently ignored by it)."""
    try:
        from langfuse import Langfuse
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.trace import TracerProvider

        from spanledger.exporters.delivery import CountingSpanExporter
        from spanledger.exporters.langfuse import LangfuseExporter
    except ImportError as error:
        raise missing_extra("langfuse", error) from None

    made = _LANGFUSE_PIPELINES.get((public_key, secret_key, host))
    if made is None:
        if any(key == public_key for key, _, _ in _LANGFUSE_PIPELINES):
            raise ValueError(
                "a Langfuse client for this public key already exists in this process with "
                "another host or secret; the langfuse SDK keeps one client per public key"
            )
        credentials = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode("ascii")
        spans = CountingSpanExporter(
            OTLPSpanExporter(
                endpoint=f"{host}/api/public/otel/v1/traces",
                headers={
                    "Authorization": f"Basic {credentials}",
                    "x-langfuse-public-key": public_key,
                    "x-langfuse-ingestion-version": "4",
                },
            ),
            backend="langfuse",
        )
        client = Langfuse(
            public_key=public_key,
            secret_key=secret_key,
            base_url=host,
            tracer_provider=TracerProvider(),
            span_exporter=spans,
        )
        made = _LANGFUSE_PIPELINES[(public_key, secret_key, host)] = (client, spans)
    client, spans = made
    return LangfuseExporter(client, capture_payload=capture_payload, delivery=spans)
