"""Metric delivery for spanledger-owned pipelines: a periodic reader that counts every data
point it collects as exported, failed or dropped."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricReader,
    MetricsData,
)

from spanledger.exporters._export_logs import Backend
from spanledger.exporters.delivery import DeliveryStats, ExportQueue, deadline_in

__all__ = ["CountingMetricReader"]


def _data_points(data: MetricsData) -> int:
    return sum(
        len(metric.data.data_points)
        for resource_metrics in data.resource_metrics
        for scope_metrics in resource_metrics.scope_metrics
        for metric in scope_metrics.metrics
    )


class _MetricQueue(ExportQueue[MetricsData]):
    """Collections waiting for export; a forked child's copy is closed (its meter provider
    holds the parent's aggregations, which the child must not export)."""

    def __init__(
        self,
        exporter: MetricExporter,
        *,
        backend: str,
        interval: float,
        collect: Callable[[], None],
        target: Backend | None,
    ) -> None:
        self._exporter = exporter
        self._collect = collect
        super().__init__(
            backend=backend,
            unit="data points",
            name=f"metrics-{backend}",
            max_queue=4,
            max_batch=1,
            interval=interval,
            survives_fork=False,
            target=target,
        )

    def _weight(self, items: Sequence[MetricsData]) -> int:
        return sum(_data_points(data) for data in items)

    def _send(self, batch: list[MetricsData]) -> str | None:
        (data,) = batch
        result = self._exporter.export(data)
        return None if result is MetricExportResult.SUCCESS else "export_failed"

    def _on_tick(self) -> None:
        self._collect()

    def _after_close(self) -> None:
        self._exporter.shutdown()


class CountingMetricReader(MetricReader):
    """A periodic metric reader that counts every data point it collects: exported, failed,
    or dropped (a collection still queued or in flight at shutdown).

    Collections run every ``interval`` seconds on spanledger's export thread, and on a flush
    or shutdown in the caller's thread; exports always run on the export thread. ``target``
    names the backend in what is logged.
    """

    def __init__(
        self,
        exporter: MetricExporter,
        *,
        backend: str = "otlp",
        interval: float = 60.0,
        shutdown_timeout: float = 5.0,
        target: Backend | None = None,
    ) -> None:
        super().__init__(
            preferred_temporality=getattr(exporter, "_preferred_temporality", None),
            preferred_aggregation=getattr(exporter, "_preferred_aggregation", None),
        )
        self._shutdown_timeout = shutdown_timeout
        self._exports = _MetricQueue(
            exporter, backend=backend, interval=interval, collect=self.collect, target=target
        )
        self._exports._start_worker()  # periodic: runs even before anything is queued

    def _receive_metrics(
        self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any
    ) -> None:
        if not self._exports.closed:
            self._exports.put(metrics_data)

    @property
    def stats(self) -> DeliveryStats:
        return self._exports.stats

    def flush(self, deadline: float) -> bool:
        """Collect now and wait (until ``deadline``) for the collection to be exported."""
        if self._exports.closed:
            return False
        self.collect()
        return self.wait(deadline)

    def wait(self, deadline: float) -> bool:
        """Wait (until ``deadline``) for the collections queued now to be exported."""
        return self._exports.flush(deadline)

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self.flush(deadline_in(timeout_millis, self._shutdown_timeout))

    def close(self, deadline: float, *, collected: bool = False) -> None:
        """A last collection (unless the caller just ``collected``), exported until
        ``deadline``; the rest is written off."""
        if self._exports.closed:
            return
        if not collected:
            self.collect()
        self._exports.close(deadline)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self.close(deadline_in(timeout_millis, self._shutdown_timeout))
