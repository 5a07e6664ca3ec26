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
  logging: each kind is logged once through structlog (``spanledger.exporters``), without its
  arguments (they may hold payload);
- a forked child exports only its own spans and metrics, through connections of its own.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog

from spanledger import _forksafe
from spanledger.errors import ConfigurationError

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    from spanledger.exporters.delivery import (
        CountingMetricReader,
        CountingSpanProcessor,
        DeliveryStats,
        SpanTally,
    )
    from spanledger.exporters.langfuse import LangfuseExporter
    from spanledger.exporters.otel import OtelExporter
    from spanledger.exporters.prometheus import PrometheusEndpoint

__all__ = [
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "EXPORT_THREAD_PREFIX",
    "LangfusePipeline",
    "OtelPipeline",
    "OtlpSettings",
    "call_within",
    "langfuse_pipeline",
    "missing_extra",
    "otel_pipeline",
    "route_export_logs",
]

DEFAULT_SHUTDOWN_TIMEOUT = 5.0
"""Seconds that shutting a pipeline down may take, whatever state its backend is in."""

_log = structlog.get_logger("spanledger.exporters")

EXPORT_THREAD_PREFIX = "spanledger-export"
"""Names of the threads that export for spanledger-owned pipelines (their SDK log records are
routed through structlog instead of the application's logging)."""


@dataclass(frozen=True)
class OtlpSettings:
    """Where OTLP/HTTP spans and metrics go (``metrics_endpoint=None``: no OTLP metrics)."""

    traces_endpoint: str
    metrics_endpoint: str | None
    traces_headers: dict[str, str] | None = None
    metrics_headers: dict[str, str] | None = None


def missing_extra(extra: str, error: ImportError) -> ImportError:
    return ImportError(f"install spanledger[{extra}] to use this exporter ({error.name} missing)")


def _check_timeout(shutdown_timeout: float) -> float:
    if (
        isinstance(shutdown_timeout, bool)
        or not isinstance(shutdown_timeout, int | float)
        or not 0 < shutdown_timeout < float("inf")
    ):
        raise ConfigurationError(
            f"shutdown_timeout must be a positive number of seconds, not {shutdown_timeout!r}"
        )
    return float(shutdown_timeout)


# --------------------------------------------------------------------------- SDK log records

_ROUTED_LOGGERS = ("opentelemetry", "langfuse", "urllib3", "requests", "httpx", "httpcore")


class _ExportThreadLogs(logging.Filter):
    """Takes the records that SDK code logs on spanledger's export threads (and on the
    background threads of the Langfuse clients spanledger built) away from the application's
    logging, and logs each kind (logger and message template) once through structlog, without
    the record's arguments or exception. Records from any other thread pass untouched: the
    application's own pipelines keep their logging."""

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[str, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        thread = record.threadName
        ours = isinstance(thread, str) and thread.startswith(EXPORT_THREAD_PREFIX)
        if not ours and not _on_an_owned_langfuse_thread():
            return True
        template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
        kind = (record.name, template)
        if kind not in self._seen and len(self._seen) < 256:
            self._seen.add(kind)
            with contextlib.suppress(Exception):
                _log.warning(
                    "export_sdk_message",
                    source=record.name,
                    level=record.levelname.lower(),
                    template=template,
                )
        return False


_EXPORT_THREAD_LOGS = _ExportThreadLogs()


def _on_an_owned_langfuse_thread() -> bool:
    """Whether this is a background thread (scores, media) of a Langfuse client spanledger
    built; looked up when a record comes, since the SDK makes new ones in a forked child."""
    return any(pipeline.runs_this_thread() for pipeline in list(_LANGFUSE_PIPELINES.values()))


def route_export_logs() -> None:
    """Put the filter on every logger of the SDKs an owned pipeline runs (idempotent; the
    loggers exist once their modules are imported, which building a pipeline does)."""
    names = [
        name
        for name in list(logging.Logger.manager.loggerDict)
        if name.split(".", 1)[0] in _ROUTED_LOGGERS
    ]
    for name in names:
        logger = logging.getLogger(name)
        if _EXPORT_THREAD_LOGS not in logger.filters:
            logger.addFilter(_EXPORT_THREAD_LOGS)


def call_within(action: Callable[[], object], timeout: float, *, name: str) -> bool:
    """Run ``action`` on a daemon thread and wait at most ``timeout`` seconds for it: for
    calls into code that does not bound itself (an SDK's flush). Whether it finished; an
    exception it raised is logged once by type, never raised here."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # reported below, by type only
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(max(0.0, timeout))
    if not outcome:
        return False
    error = outcome[0]
    if error is not None:
        with contextlib.suppress(Exception):
            _log.warning("flush_failed", target=name, error_type=type(error).__name__)
        return False
    return True


# --------------------------------------------------------------------------- closing at exit

_open_pipelines: weakref.WeakSet[OtelPipeline | LangfusePipeline] = weakref.WeakSet()


def _close_open_pipelines() -> None:
    """At exit: close every pipeline nobody shut down, each within its own timeout, all
    measured from now (the SDKs' own exit handlers, which wait far longer, are never
    registered for these pipelines)."""
    started = time.monotonic()
    for pipeline in list(_open_pipelines):
        with contextlib.suppress(Exception):
            pipeline.shutdown(started + pipeline.shutdown_timeout)


atexit.register(_close_open_pipelines)


def _remaining(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


# --------------------------------------------------------------------------- OTel


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
        _open_pipelines.add(self)
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
        _open_pipelines.discard(self)
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
                self.meter_provider.shutdown(timeout_millis=max(_remaining(deadline), 0.1) * 1000)
        if self.endpoint is not None:
            self.endpoint.close(timeout=max(_remaining(deadline), 0.1))

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
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
) -> OtelExporter:
    """An ``OtelExporter`` over providers private to spanledger: OTLP spans and metrics when
    ``otlp`` is given, and a Prometheus scrape endpoint on ``prometheus`` (address, port)."""
    timeout = _check_timeout(shutdown_timeout)
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.trace import NoOpTracerProvider

        from spanledger.exporters.otel import OtelExporter
    except ImportError as error:
        raise missing_extra("otel", error) from None

    resource = Resource.create({"service.name": service_name})
    spans = None
    tracer_provider: Any = NoOpTracerProvider()
    make_reader = None
    if otlp is not None:
        spans = _otlp_spans(otlp, timeout)
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        tracer_provider.add_span_processor(spans)
        if otlp.metrics_endpoint is not None:
            make_reader = _otlp_metric_reader(otlp.metrics_endpoint, otlp.metrics_headers, timeout)
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


def _otlp_spans(otlp: OtlpSettings, timeout: float) -> CountingSpanProcessor:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        from spanledger.exporters.delivery import CountingSpanProcessor
    except ImportError as error:
        raise missing_extra("otel", error) from None
    endpoint, headers = otlp.traces_endpoint, otlp.traces_headers
    return CountingSpanProcessor(
        lambda: OTLPSpanExporter(endpoint=endpoint, headers=headers),
        backend="otlp",
        shutdown_timeout=timeout,
    )


def _otlp_metric_reader(
    endpoint: str, headers: dict[str, str] | None, timeout: float
) -> Callable[[], CountingMetricReader]:
    """A builder of the counting OTLP metric reader (called once here, and again in a forked
    child, whose copy of the parent's would share its connections)."""
    try:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

        from spanledger.exporters.delivery import CountingMetricReader
    except ImportError as error:
        raise missing_extra("otel", error) from None

    def build() -> CountingMetricReader:
        return CountingMetricReader(
            OTLPMetricExporter(endpoint=endpoint, headers=headers),
            interval=_metric_interval(),
            shutdown_timeout=timeout,
        )

    return build


def _meter_provider(resource: Resource, readers: list[Any]) -> MeterProvider:
    from opentelemetry.sdk.metrics import MeterProvider

    return MeterProvider(resource=resource, metric_readers=readers, shutdown_on_exit=False)


def _metric_interval() -> float:
    """Seconds between periodic metric exports: ``OTEL_METRIC_EXPORT_INTERVAL`` (in
    milliseconds, as the SDK reads it), else 60."""
    raw = os.environ.get("OTEL_METRIC_EXPORT_INTERVAL", "")
    try:
        milliseconds = float(raw) if raw.strip() else 60_000.0
    except ValueError:
        milliseconds = 60_000.0
    return milliseconds / 1000 if 0 < milliseconds < float("inf") else 60.0


def _prometheus_endpoint(prometheus: tuple[str, int] | None) -> PrometheusEndpoint | None:
    if prometheus is None:
        return None
    try:
        from spanledger.exporters.prometheus import PrometheusEndpoint
    except ImportError as error:
        raise missing_extra("prometheus", error) from None
    address, port = prometheus
    return PrometheusEndpoint(port=port, addr=address)


# --------------------------------------------------------------------------- Langfuse


class LangfusePipeline:
    """A Langfuse client whose spans leave through spanledger's counting queue.

    The langfuse SDK batches observations in its own ``BatchSpanProcessor``, which drops on a
    full queue without counting; here its exporter hands each batch to spanledger's queue at
    once, and a counter on the client's tracer provider counts what was produced, so a span
    lost inside the SDK still shows (as pending, then as dropped when the pipeline closes).
    """

    def __init__(
        self,
        *,
        client: Any,
        tracer_provider: TracerProvider,
        spans: CountingSpanProcessor,
        produced: SpanTally,
        shutdown_timeout: float,
    ) -> None:
        self.client = client
        self.tracer_provider = tracer_provider
        self.spans = spans
        self.produced = produced
        self.shutdown_timeout = shutdown_timeout
        self._lost_inside_sdk = 0
        self._closed = False
        _open_pipelines.add(self)

    def runs_this_thread(self) -> bool:
        """Whether the current thread is one of the client's background threads."""
        current = threading.current_thread()
        resources = getattr(self.client, "_resources", None)
        return any(
            current in getattr(resources, threads, ())
            for threads in ("_score_consumers", "_media_upload_consumers")
        )

    @property
    def stats(self) -> DeliveryStats:
        from spanledger.exporters.delivery import DeliveryStats

        ours = self.spans.stats
        produced = max(self.produced.count, ours.produced)
        dropped = ours.dropped + self._lost_inside_sdk
        return DeliveryStats(
            backend="langfuse",
            exported=ours.exported,
            failed=ours.failed,
            produced=produced,
            dropped=dropped,
            pending=produced - ours.exported - ours.failed - dropped,
        )

    def flush(self, deadline: float) -> None:
        """Move the client's batch to the counting queue, wait for it to be exported, then
        let the client send its scores in what time is left."""
        self.tracer_provider.force_flush()
        self.spans.flush(deadline)
        call_within(
            self.client.flush,
            _remaining(deadline),
            name=f"{EXPORT_THREAD_PREFIX}-langfuse-flush",
        )

    def drain(self, deadline: float) -> None:
        """An exporter's shutdown: flush until ``deadline``, then count what is still pending
        as dropped. The pipeline itself stays up for the next recorder on the same key."""
        self.flush(deadline)
        self.spans.write_off()

    def shutdown(self, deadline: float) -> None:
        """Close for good (at exit): flush, write off, and shut the client down within what is
        left of ``deadline``."""
        if self._closed:
            return
        self._closed = True
        _open_pipelines.discard(self)
        self.tracer_provider.force_flush()
        self.spans.close(deadline)
        self._lost_inside_sdk = max(0, self.produced.count - self.spans.stats.produced)
        call_within(
            self.client.shutdown,
            _remaining(deadline),
            name=f"{EXPORT_THREAD_PREFIX}-langfuse-shutdown",
        )


_LANGFUSE_PIPELINES: dict[tuple[str, str, str], LangfusePipeline] = {}
_langfuse_lock = _forksafe.module_lock(globals(), "_langfuse_lock")


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
    timeout = _check_timeout(shutdown_timeout)
    try:
        from spanledger.exporters.langfuse import LangfuseExporter

        with _langfuse_lock:
            pipeline = _LANGFUSE_PIPELINES.get((public_key, secret_key, host))
            if pipeline is None:
                if any(key == public_key for key, _, _ in _LANGFUSE_PIPELINES):
                    raise ConfigurationError(
                        "a Langfuse client for this LANGFUSE_PUBLIC_KEY already exists in this "
                        "process with another host or secret; the langfuse SDK keeps one "
                        "client per public key"
                    )
                pipeline = _build_langfuse(public_key, secret_key, host, timeout)
                _LANGFUSE_PIPELINES[(public_key, secret_key, host)] = pipeline
    except ImportError as error:
        raise missing_extra("langfuse", error) from None
    return LangfuseExporter(pipeline.client, capture_payload=capture_payload, pipeline=pipeline)


def _build_langfuse(
    public_key: str, secret_key: str, host: str, timeout: float
) -> LangfusePipeline:
    from langfuse import Langfuse
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider

    from spanledger.exporters.delivery import CountingSpanProcessor, QueueHandOff, SpanTally

    credentials = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode("ascii")
    headers = {
        "Authorization": f"Basic {credentials}",
        "x-langfuse-public-key": public_key,
        "x-langfuse-ingestion-version": "4",
    }
    endpoint = f"{host}/api/public/otel/v1/traces"
    spans = CountingSpanProcessor(
        lambda: OTLPSpanExporter(endpoint=endpoint, headers=headers),
        backend="langfuse",
        shutdown_timeout=timeout,
    )
    produced = SpanTally()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(produced)
    client = Langfuse(
        public_key=public_key,
        secret_key=secret_key,
        base_url=host,
        tracer_provider=tracer_provider,
        span_exporter=QueueHandOff(spans),
        flush_at=64,
        flush_interval=0.2,
    )
    _forget_langfuse_exit_handler(client)
    route_export_logs()
    return LangfusePipeline(
        client=client,
        tracer_provider=tracer_provider,
        spans=spans,
        produced=produced,
        shutdown_timeout=timeout,
    )


def _forget_langfuse_exit_handler(client: Any) -> None:
    """The langfuse SDK shuts its client down at exit with no bound (it waits for its queues);
    spanledger's own exit handler does it within the pipeline's timeout instead."""
    resources = getattr(client, "_resources", None)
    shutdown = getattr(resources, "shutdown", None)
    if callable(shutdown):
        atexit.unregister(shutdown)
