"""``spanledger.configure()``: wire the exporters a deployment asks for, from the environment.

Explicit arguments win over the environment. Nothing is installed globally in OpenTelemetry:
the tracer and meter providers built here are private to spanledger's recorder, which becomes
the process default (``set_default_recorder``) unless ``install=False``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Mapping
from os import PathLike
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from spanledger.costs import Pricer
from spanledger.exporters.console import ConsoleSink
from spanledger.exporters.jsonl import JsonlSink
from spanledger.recorder import Recorder, SinkLike, set_default_recorder

if TYPE_CHECKING:
    from langfuse import Langfuse
    from opentelemetry.metrics import MeterProvider
    from opentelemetry.trace import TracerProvider

    from spanledger.ledger.prices import PriceTable

__all__ = ["configure"]

_TRUE = {"1", "true", "yes", "on"}


def configure(
    *,
    events_path: str | PathLike[str] | None = None,
    otlp_endpoint: str | None = None,
    tracer_provider: TracerProvider | None = None,
    meter_provider: MeterProvider | None = None,
    langfuse: Langfuse | bool | None = None,
    prices: Pricer | PriceTable | str | PathLike[str] | None = None,
    prometheus_port: int | None = None,
    console: bool | None = None,
    capture_payload: bool = False,
    sinks: Iterable[SinkLike] = (),
    install: bool = True,
    environ: Mapping[str, str] | None = None,
) -> Recorder:
    """Build a recorder from arguments and the environment, and make it the process default.

    - ``events_path`` / ``SPANLEDGER_EVENTS``: the JSONL event log.
    - ``tracer_provider`` / ``meter_provider``: render spans and metrics through these; else an
      OTLP endpoint (``otlp_endpoint``, or the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
      ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` and the other ``OTEL_EXPORTER_OTLP_*`` variables)
      gets spans and metrics over OTLP/HTTP (``OTEL_METRICS_EXPORTER=none`` turns metrics off).
    - ``prometheus_port`` / ``SPANLEDGER_PROMETHEUS_PORT`` (+ ``SPANLEDGER_PROMETHEUS_ADDR``,
      default 127.0.0.1): serve the metrics for Prometheus to scrape (extra ``prometheus``).
    - ``langfuse``: a client, or ``LANGFUSE_PUBLIC_KEY`` + ``LANGFUSE_SECRET_KEY`` (+
      ``LANGFUSE_HOST``) to build one; ``False`` turns Langfuse off.
    - ``prices`` / ``SPANLEDGER_PRICES``: a price table (or its path) to price every event.
    - ``console`` / ``SPANLEDGER_CONSOLE=1``: one line per call on standard error.
    """
    env = os.environ if environ is None else environ
    chosen: list[SinkLike] = list(sinks)

    path = events_path if events_path is not None else env.get("SPANLEDGER_EVENTS") or None
    if path is not None:
        chosen.append(JsonlSink(path))

    if tracer_provider is not None or meter_provider is not None:
        from spanledger.exporters.otel import OtelExporter

        chosen.append(
            OtelExporter(
                tracer_provider=tracer_provider,
                meter_provider=meter_provider,
                capture_payload=capture_payload,
            )
        )
    else:
        otlp = bool(
            otlp_endpoint
            or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
            or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        )
        port = prometheus_port
        if port is None and env.get("SPANLEDGER_PROMETHEUS_PORT"):
            port = int(env["SPANLEDGER_PROMETHEUS_PORT"])
        if otlp or port is not None:
            chosen.append(
                _built_otel_exporter(
                    otlp_endpoint if otlp else None,
                    otlp,
                    port,
                    env.get("SPANLEDGER_PROMETHEUS_ADDR") or "127.0.0.1",
                    env,
                    capture_payload,
                )
            )

    if langfuse is not None and langfuse is not True and langfuse is not False:
        from spanledger.exporters.langfuse import LangfuseExporter

        chosen.append(LangfuseExporter(langfuse, capture_payload=capture_payload))
    elif (
        langfuse is not False and env.get("LANGFUSE_PUBLIC_KEY") and env.get("LANGFUSE_SECRET_KEY")
    ):
        chosen.append(_langfuse_exporter(env, capture_payload))

    wants_console = console if console is not None else env.get("SPANLEDGER_CONSOLE", "") in _TRUE
    if wants_console:
        chosen.append(ConsoleSink())

    table = prices if prices is not None else env.get("SPANLEDGER_PRICES") or None
    recorder = Recorder(chosen, prices=table)
    if install:
        set_default_recorder(recorder)
    return recorder


def _missing_extra(extra: str, error: ImportError) -> ImportError:
    return ImportError(f"install spanledger[{extra}] to use this exporter ({error.name} missing)")


def _otlp_headers(env: Mapping[str, str], specific: str) -> dict[str, str] | None:
    """Headers from ``OTEL_EXPORTER_OTLP_*_HEADERS`` / ``OTEL_EXPORTER_OTLP_HEADERS``
    (``key=value`` pairs, comma-separated, URL-encoded) of the given environment."""
    raw = env.get(specific) or env.get("OTEL_EXPORTER_OTLP_HEADERS")
    if not raw:
        return None
    headers: dict[str, str] = {}
    for pair in raw.split(","):
        key, separator, value = pair.partition("=")
        if separator and key.strip():
            headers[unquote(key.strip()).lower()] = unquote(value.strip())
    return headers


def _built_otel_exporter(
    endpoint: str | None,
    otlp: bool,
    prometheus_port: int | None,
    prometheus_addr: str,
    env: Mapping[str, str],
    capture_payload: bool,
) -> Any:
    """An OtelExporter over providers private to spanledger: OTLP spans and metrics when an
    endpoint is configured, and a Prometheus scrape endpoint when a port is."""
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
        raise _missing_extra("otel", error) from None

    resource = Resource.create({"service.name": env.get("OTEL_SERVICE_NAME") or "spanledger"})
    base = (endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").rstrip("/")
    traces_endpoint = (
        (endpoint and f"{base}/v1/traces")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or f"{base}/v1/traces"
    )
    metrics_endpoint = (
        (endpoint and f"{base}/v1/metrics")
        or env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        or f"{base}/v1/metrics"
    )
    readers: list[MetricReader] = []
    spans = None
    tracer_provider: Any = NoOpTracerProvider()
    prometheus = None
    if otlp:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        except ImportError as error:
            raise _missing_extra("otel", error) from None
        spans = CountingSpanExporter(
            OTLPSpanExporter(
                endpoint=traces_endpoint,
                headers=_otlp_headers(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
            ),
            backend="otlp",
        )
        tracer_provider = TracerProvider(resource=resource)
        tracer_provider.add_span_processor(BatchSpanProcessor(spans))
        if env.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() != "none":
            readers.append(
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(
                        endpoint=metrics_endpoint,
                        headers=_otlp_headers(env, "OTEL_EXPORTER_OTLP_METRICS_HEADERS"),
                    )
                )
            )
    if prometheus_port is not None:
        try:
            from spanledger.exporters.prometheus import PrometheusEndpoint
        except ImportError as error:
            raise _missing_extra("prometheus", error) from None
        prometheus = PrometheusEndpoint(port=prometheus_port, addr=prometheus_addr)
        readers.append(prometheus.reader)
    meter_provider = MeterProvider(resource=resource, metric_readers=readers) if readers else None
    return OtelExporter(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        enable_metrics=meter_provider is not None,
        capture_payload=capture_payload,
        owned=True,
        delivery=spans,
        on_shutdown=prometheus.close if prometheus is not None else None,
    )


_LANGFUSE_PIPELINES: dict[tuple[str, str, str], tuple[Any, Any]] = {}


def _langfuse_exporter(env: Mapping[str, str], capture_payload: bool) -> Any:
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
        raise _missing_extra("langfuse", error) from None

    public_key, secret_key = env["LANGFUSE_PUBLIC_KEY"], env["LANGFUSE_SECRET_KEY"]
    host = (
        env.get("LANGFUSE_BASE_URL") or env.get("LANGFUSE_HOST") or "https://cloud.langfuse.com"
    ).rstrip("/")
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
