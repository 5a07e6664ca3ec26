"""Serve spanledger's metrics for Prometheus to scrape (extra ``prometheus``).

A private registry and meter provider: nothing is registered globally, so the endpoint shows
spanledger's instruments only. Pass ``endpoint.meter_provider`` to ``OtelExporter`` (or let
``spanledger.configure(prometheus_port=...)`` do it).

The endpoint serves the process that opened it. A forked child inherits the listening socket
but not the serving thread: it serves nothing, and closing the endpoint there only releases the
child's copy of the socket (the parent keeps serving). Configure again in the child, on a port
of its own, to serve its metrics.

Each scrape serves every series once, with its value at the scrape, however often the meter
provider is flushed: the reader collects only when scraped (``force_flush`` on a pull reader has
nothing to push) and serves one collection per scrape.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Self

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricsData
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric

from spanledger import _forksafe

__all__ = ["PrometheusEndpoint"]


class PrometheusEndpoint:
    """An HTTP ``/metrics`` endpoint on ``addr:port`` (``port=0`` picks a free port)."""

    def __init__(
        self,
        *,
        port: int = 9464,
        addr: str = "127.0.0.1",
        resource: Resource | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.reader: PrometheusMetricReader = _ScrapedReader(self.registry)
        self._resource = resource
        self._meter_provider: MeterProvider | None = None
        self._server, self._thread = start_http_server(port, addr, registry=self.registry)
        self._serving_pid: int | None = os.getpid()
        self.addr = addr
        _forksafe.after_fork_in_child(self._forget_server)

    def _forget_server(self) -> None:
        """In a forked child: the serving thread is the parent's (stopping it from here would
        wait for it forever)."""
        self._serving_pid = None

    @property
    def meter_provider(self) -> MeterProvider:
        """A meter provider reading into this endpoint (made on first use). To combine it with
        other readers, build your own ``MeterProvider`` with ``endpoint.reader`` instead."""
        if self._meter_provider is None:
            resource = self._resource if self._resource is not None else Resource.create()
            self._meter_provider = MeterProvider(metric_readers=[self.reader], resource=resource)
        return self._meter_provider

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    @property
    def url(self) -> str:
        return f"http://{self.addr}:{self.port}/metrics"

    def close(self, timeout: float = 5.0) -> None:
        """Stop serving (waiting at most ``timeout`` seconds) and release the meter provider."""
        if self._serving_pid == os.getpid():
            self._serving_pid = None
            self._server.shutdown()
            self._thread.join(timeout=timeout)
        self._server.server_close()
        if self._meter_provider is not None:
            self._meter_provider.shutdown(timeout_millis=timeout * 1000)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _ScrapedReader(PrometheusMetricReader):
    """A ``PrometheusMetricReader`` that collects only when scraped and serves each series once.

    The SDK's reader queues every collection, a flush's too, for the next scrape, which emits
    them all, oldest first: the same series several times (``promtool`` rejects it; Prometheus
    keeps the oldest value). Here a flush collects nothing, a collection replaces the one
    before it (the counters are cumulative: the latest holds everything), and scrapes take
    turns (two at once would split or repeat one queue)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(registry=registry)
        self._serialized = _OneScrapeAtATime(self._collector)
        registry.unregister(self._collector)
        registry.register(self._serialized)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        """Nothing to push: Prometheus pulls (a collection here would be served twice)."""
        return True

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        if metrics_data is None:
            return
        queued = getattr(self._collector, "_metrics_datas", None)
        if queued is None:  # an exporter without the queue: its own behaviour
            super()._receive_metrics(metrics_data, timeout_millis, **kwargs)
            return
        queued.clear()
        queued.append(metrics_data)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        with contextlib.suppress(KeyError):  # shut down before
            self._registry.unregister(self._serialized)


class _OneScrapeAtATime:
    """The SDK's collector, one scrape at a time, starting from an empty queue."""

    def __init__(self, collector: Any) -> None:
        self._collector = collector
        self._lock = _forksafe.lock(self, "_lock")

    def describe(self) -> list[Metric]:
        return []  # no names to register up front (describing would collect)

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            queued = getattr(self._collector, "_metrics_datas", None)
            if queued is not None:
                queued.clear()
            return list(self._collector.collect())
