"""What an exporter asks of the spanledger-owned pipeline that built it: flushing and shutting
down within a deadline, and the counts of what was delivered.

``pipelines`` builds the exporters and hands each its pipeline; declaring what an exporter
needs of that pipeline here, below both, keeps an exporter from importing the module that
builds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from spanledger.exporters._lifecycle import Closable

if TYPE_CHECKING:
    from opentelemetry.metrics import MeterProvider

    from spanledger.exporters.delivery import DeliveryStats

__all__ = ["OwnedLangfusePipeline", "OwnedOtelPipeline"]


class OwnedOtelPipeline(Closable, Protocol):
    """The providers and counted queues behind an ``OtelExporter``."""

    @property
    def span_delivery(self) -> DeliveryStats | None:
        """What became of the spans, when they go through a counted queue."""

    @property
    def metric_delivery(self) -> DeliveryStats | None:
        """What became of the OTLP metric data points, when there are any."""

    def flush(self, deadline: float) -> None:
        """Push queued spans and metrics out, waiting no later than ``deadline``."""

    def meter_provider_in_child(self) -> MeterProvider | None:
        """In a forked child: a meter provider of the child's own, if metrics go out by OTLP."""


class OwnedLangfusePipeline(Protocol):
    """The Langfuse client and counted queue behind a ``LangfuseExporter``."""

    shutdown_timeout: float
    isolated: bool
    """Whether the client shares its resources with no other Langfuse client of the process."""

    @property
    def stats(self) -> DeliveryStats:
        """What became of the observations."""

    def flush(self, deadline: float) -> None:
        """Send what the client holds, waiting no later than ``deadline``."""

    def drain(self, deadline: float) -> None:
        """An exporter's shutdown: flush until ``deadline``, count what is left as dropped."""
