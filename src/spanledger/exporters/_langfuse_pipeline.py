"""The Langfuse pipeline spanledger builds: one client per public key, secret and host per
process, on a tracer provider of its own, whose observations leave through spanledger's
counting queue."""

from __future__ import annotations

import atexit
import base64
import threading
from typing import TYPE_CHECKING, Any

from spanledger import _forksafe
from spanledger._logs import get_logger
from spanledger.exporters._export_logs import (
    EXPORT_THREAD_PREFIX,
    Backend,
    also_route_threads,
    route_export_logs,
)
from spanledger.exporters._lifecycle import (
    DEFAULT_SHUTDOWN_TIMEOUT,
    call_within,
    closed_at_exit,
    missing_extra,
    remaining,
    still_open,
)
from spanledger.recorder import checked_timeout

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider

    from spanledger.exporters._span_delivery import CountingSpanProcessor, SpanTally
    from spanledger.exporters.delivery import DeliveryStats
    from spanledger.exporters.langfuse import LangfuseExporter

__all__ = ["LangfusePipeline", "langfuse_pipeline"]

_log = get_logger("spanledger.exporters")


class LangfusePipeline:
    """A Langfuse client whose spans leave through spanledger's counting queue.

    The langfuse SDK batches observations in its own ``BatchSpanProcessor``, which drops on a
    full queue without counting; here its exporter hands each batch to spanledger's queue at
    once, and a counter on the client's tracer provider counts what was produced, so a span
    lost inside the SDK still shows (as pending, then as dropped when the pipeline closes).

    ``isolated``: the client shares its resources with no other Langfuse client of the process
    (see ``_langfuse_isolation``). When it may share them, its observations carry no payload,
    and the resources, which may be the application's, are never shut down from here.
    ``host``: the backend the client's own threads (scores, media) send to, as logs name it.
    """

    def __init__(
        self,
        *,
        client: Any,
        tracer_provider: TracerProvider,
        spans: CountingSpanProcessor,
        produced: SpanTally,
        shutdown_timeout: float,
        isolated: bool,
        host: Backend | None = None,
    ) -> None:
        self.client = client
        self.host = host
        self.isolated = isolated
        self.tracer_provider = tracer_provider
        self.spans = spans
        self.produced = produced
        self.shutdown_timeout = shutdown_timeout
        self._lost_inside_sdk = 0
        self._closed = False
        closed_at_exit(self)

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
            label=ours.label,
            address=ours.address,
            cause=ours.cause,
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
            remaining(deadline),
            name=f"{EXPORT_THREAD_PREFIX}-langfuse-flush",
        )

    def drain(self, deadline: float) -> None:
        """An exporter's shutdown: flush until ``deadline``, then count what is still pending
        as dropped. The pipeline itself stays up for the next recorder on the same key."""
        self.flush(deadline)
        self.spans.write_off()
        self.spans.tell_total()

    def shutdown(self, deadline: float) -> None:
        """Close for good (at exit): flush, write off, and shut the client down within what is
        left of ``deadline`` (an isolated one only: shared resources are left to the SDK)."""
        if self._closed:
            return
        self._closed = True
        still_open(self)
        self.tracer_provider.force_flush()
        self.spans.close(deadline)
        self._lost_inside_sdk = max(0, self.produced.count - self.spans.stats.produced)
        if not self.isolated:
            return
        call_within(
            self.client.shutdown,
            remaining(deadline),
            name=f"{EXPORT_THREAD_PREFIX}-langfuse-shutdown",
        )


_LANGFUSE_PIPELINES: dict[tuple[str, str, str], LangfusePipeline] = {}
_langfuse_lock = _forksafe.module_lock(globals(), "_langfuse_lock")


def _on_an_owned_langfuse_thread() -> Backend | None:
    """The host a Langfuse client spanledger built sends to, when this is one of the client's
    background threads (scores, media)."""
    for pipeline in list(_LANGFUSE_PIPELINES.values()):
        if pipeline.runs_this_thread():
            return pipeline.host
    return None


also_route_threads(_on_an_owned_langfuse_thread)


def langfuse_pipeline(
    *,
    public_key: str,
    secret_key: str,
    host: str,
    capture_payload: bool,
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
) -> LangfuseExporter:
    """A Langfuse client exporting through a counted OTLP pipeline, made once per process for
    a given key, secret and host and kept apart from any Langfuse client of the application's,
    even one for the same public key (built before or after)."""
    timeout = checked_timeout(shutdown_timeout)
    try:
        from spanledger.exporters.langfuse import LangfuseExporter

        with _langfuse_lock:
            pipeline = _LANGFUSE_PIPELINES.get((public_key, secret_key, host))
            if pipeline is None:
                pipeline = _build_langfuse(public_key, secret_key, host, timeout)
                _LANGFUSE_PIPELINES[(public_key, secret_key, host)] = pipeline
    except ImportError as error:
        raise missing_extra("langfuse", error) from None
    return LangfuseExporter(pipeline.client, capture_payload=capture_payload, pipeline=pipeline)


def _build_langfuse(
    public_key: str, secret_key: str, host: str, timeout: float
) -> LangfusePipeline:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider

    from spanledger.exporters._langfuse_isolation import own_client
    from spanledger.exporters._span_delivery import CountingSpanProcessor, QueueHandOff, SpanTally

    credentials = base64.b64encode(f"{public_key}:{secret_key}".encode()).decode("ascii")
    headers = {
        "Authorization": f"Basic {credentials}",
        "x-langfuse-public-key": public_key,
        "x-langfuse-ingestion-version": "4",
    }
    endpoint = f"{host}/api/public/otel/v1/traces"
    target = Backend("Langfuse", endpoint)
    spans = CountingSpanProcessor(
        lambda: OTLPSpanExporter(endpoint=endpoint, headers=headers, session=target.session()),
        backend="langfuse",
        shutdown_timeout=timeout,
        target=target,
    )
    produced = SpanTally()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(produced)
    built = own_client(
        public_key=public_key,
        secret_key=secret_key,
        base_url=host,
        tracer_provider=tracer_provider,
        span_exporter=QueueHandOff(spans),
        flush_at=64,
        flush_interval=0.2,
    )
    if built.not_isolated is None:
        _forget_langfuse_exit_handler(built.client)
    else:
        _log.warning(
            "langfuse_not_isolated",
            reason=built.not_isolated,
            consequence="spanledger's observations may leave through another Langfuse "
            "client's tracer provider, so they carry no payload",
        )
    route_export_logs()
    return LangfusePipeline(
        client=built.client,
        tracer_provider=tracer_provider,
        spans=spans,
        produced=produced,
        shutdown_timeout=timeout,
        isolated=built.not_isolated is None,
        host=Backend("Langfuse", host),
    )


def _forget_langfuse_exit_handler(client: Any) -> None:
    """The langfuse SDK shuts its client down at exit with no bound (it waits for its queues);
    spanledger's own exit handler does it within the pipeline's timeout instead."""
    resources = getattr(client, "_resources", None)
    shutdown = getattr(resources, "shutdown", None)
    if callable(shutdown):
        atexit.unregister(shutdown)
