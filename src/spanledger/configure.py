"""``spanledger.configure()``: wire the exporters a deployment asks for, from the environment.

Explicit arguments win over the environment. Nothing is installed globally in OpenTelemetry:
the tracer and meter providers built here are private to spanledger's recorder, which becomes
the process default (``set_default_recorder``) unless ``install=False``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from os import PathLike
from typing import TYPE_CHECKING
from urllib.parse import unquote

from spanledger.costs import Pricer
from spanledger.exporters.console import ConsoleSink
from spanledger.exporters.jsonl import JsonlSink
from spanledger.exporters.pipelines import OtlpSettings, langfuse_pipeline, otel_pipeline
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
        otlp = _otlp_settings(otlp_endpoint, env)
        port = prometheus_port
        if port is None and env.get("SPANLEDGER_PROMETHEUS_PORT"):
            port = int(env["SPANLEDGER_PROMETHEUS_PORT"])
        if otlp is not None or port is not None:
            chosen.append(
                otel_pipeline(
                    otlp=otlp,
                    prometheus=(
                        (env.get("SPANLEDGER_PROMETHEUS_ADDR") or "127.0.0.1", port)
                        if port is not None
                        else None
                    ),
                    service_name=env.get("OTEL_SERVICE_NAME") or "spanledger",
                    capture_payload=capture_payload,
                )
            )

    if langfuse is not None and langfuse is not True and langfuse is not False:
        from spanledger.exporters.langfuse import LangfuseExporter

        chosen.append(LangfuseExporter(langfuse, capture_payload=capture_payload))
    elif (
        langfuse is not False and env.get("LANGFUSE_PUBLIC_KEY") and env.get("LANGFUSE_SECRET_KEY")
    ):
        chosen.append(
            langfuse_pipeline(
                public_key=env["LANGFUSE_PUBLIC_KEY"],
                secret_key=env["LANGFUSE_SECRET_KEY"],
                host=(
                    env.get("LANGFUSE_BASE_URL")
                    or env.get("LANGFUSE_HOST")
                    or "https://cloud.langfuse.com"
                ).rstrip("/"),
                capture_payload=capture_payload,
            )
        )

    wants_console = console if console is not None else env.get("SPANLEDGER_CONSOLE", "") in _TRUE
    if wants_console:
        chosen.append(ConsoleSink())

    table = prices if prices is not None else env.get("SPANLEDGER_PRICES") or None
    recorder = Recorder(chosen, prices=table)
    if install:
        set_default_recorder(recorder)
    return recorder


def _otlp_settings(argument: str | None, env: Mapping[str, str]) -> OtlpSettings | None:
    """Where OTLP spans and metrics go: the ``otlp_endpoint`` argument (a base URL), else the
    standard ``OTEL_EXPORTER_OTLP_*`` variables; ``None`` when neither names an endpoint."""
    if not (
        argument
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    ):
        return None
    base = (argument or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or "").rstrip("/")
    traces = (
        (argument and f"{base}/v1/traces")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        or f"{base}/v1/traces"
    )
    metrics: str | None = (
        (argument and f"{base}/v1/metrics")
        or env.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")
        or f"{base}/v1/metrics"
    )
    if env.get("OTEL_METRICS_EXPORTER", "otlp").strip().lower() == "none":
        metrics = None
    return OtlpSettings(
        traces_endpoint=traces,
        metrics_endpoint=metrics,
        traces_headers=_otlp_headers(env, "OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
        metrics_headers=_otlp_headers(env, "OTEL_EXPORTER_OTLP_METRICS_HEADERS"),
    )


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
