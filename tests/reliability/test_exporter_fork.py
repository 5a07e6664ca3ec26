"""Exporters in a forked child (gunicorn, uWSGI, Celery prefork): the child records at once,
exports only its own spans and metrics through connections of its own, and never exports what
its parent produced; the parent's pipeline goes on as before.

The spanledger-owned OTLP pipeline and Langfuse pipeline export to loopback receivers that
decode what arrives, so "no span arrives twice" is checked on the wire.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import partial

import pytest

from spanledger import CallStarted, EmbeddingEvent, EmbeddingUsage, Recorder
from spanledger.exporters.console import ConsoleSink
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.exporters.pipelines import OtlpSettings, langfuse_pipeline, otel_pipeline
from spanledger.exporters.prometheus import PrometheusEndpoint
from tests.exporters.conftest import unique_public_key
from tests.forking import fork, outcome

from ._exporter_receiver import OtlpSink, Received

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

TRIALS = 20
THREADS = 4
CHILD_CALLS = 5
RECORD_LIMIT = 3.0
"""Seconds within which a forked child must have recorded all its calls."""
DURATION = "gen_ai.client.operation.duration"
LANGFUSE_CALL_ID = "langfuse.observation.metadata.spanledger_call_id"

# exit codes a child reports its findings with
OK, SLOW, OTEL_UNDELIVERED, LANGFUSE_UNDELIVERED, METRICS_UNDELIVERED = range(5)


def record(recorder: Recorder, call_id: str) -> None:
    """One call as a provider records it: the start notice, then the event."""
    now = datetime.now(UTC)
    recorder.call_started(
        CallStarted(
            call_id=call_id,
            operation="embeddings",
            provider="cohere",
            model="embed-v4.0",
            started_at=now,
        )
    )
    recorder.emit(
        EmbeddingEvent(
            call_id=call_id,
            provider="cohere",
            model="embed-v4.0",
            started_at=now,
            latency_ms=1.0,
            input_count=1,
            usage=EmbeddingUsage(input_tokens=2),
        )
    )


class Pipelines:
    """An owned OTLP pipeline and an owned Langfuse pipeline, each to a loopback receiver."""

    def __init__(self, otlp: OtlpSink, langfuse: OtlpSink) -> None:
        self.otel = otel_pipeline(
            otlp=OtlpSettings(f"{otlp.url}/v1/traces", f"{otlp.url}/v1/metrics"),
            prometheus=None,
            service_name="fork-test",
            capture_payload=False,
        )
        self.langfuse = langfuse_pipeline(
            public_key=unique_public_key(),
            secret_key="sk-lf-test",
            host=langfuse.url,
            capture_payload=False,
        )
        self.recorder = Recorder([self.otel, self.langfuse, ConsoleSink(io.StringIO())])


@pytest.fixture
def receivers() -> Iterator[tuple[OtlpSink, OtlpSink]]:
    with OtlpSink() as otlp, OtlpSink() as langfuse:
        yield otlp, langfuse


def child_delivered(exporter: OtelExporter | LangfuseExporter, calls: int) -> bool:
    stats = exporter.delivery
    return stats is not None and stats.produced == stats.exported == calls


def child_work(pipelines: Pipelines, trial: int, forked_at: float) -> int:
    """In the child: record, flush, and report what was delivered (as an exit code)."""
    for number in range(CHILD_CALLS):
        record(pipelines.recorder, f"child-{trial}-{number}")
    if time.monotonic() - forked_at > RECORD_LIMIT:
        return SLOW
    pipelines.recorder.flush(timeout=RECORD_LIMIT)
    metrics = pipelines.otel.metric_delivery
    if not child_delivered(pipelines.otel, CHILD_CALLS):
        return OTEL_UNDELIVERED
    if not child_delivered(pipelines.langfuse, CHILD_CALLS):
        return LANGFUSE_UNDELIVERED
    if metrics is None or metrics.exported == 0 or not metrics.balanced or metrics.failed:
        return METRICS_UNDELIVERED
    return OK


def recording(recorded: list[int], more: int, limit: float = 5.0) -> bool:
    """Wait until the threads recorded ``more`` calls (so a fork lands mid-flight)."""
    target = sum(recorded) + more
    deadline = time.monotonic() + limit
    while sum(recorded) < target:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def otel_call_ids(spans: list[Received]) -> Counter[str]:
    return Counter(str(span.attributes["spanledger.call_id"]) for span in spans)


def langfuse_call_ids(spans: list[Received]) -> Counter[str]:
    return Counter(json.loads(str(span.attributes[LANGFUSE_CALL_ID])) for span in spans)


def test_fork_while_four_threads_record(receivers: tuple[OtlpSink, OtlpSink]) -> None:
    otlp, langfuse = receivers
    pipelines = Pipelines(otlp, langfuse)
    stop = threading.Event()
    recorded = [0] * THREADS

    def keep_recording(thread: int) -> None:
        while not stop.wait(0.002):
            record(pipelines.recorder, f"parent-{thread}-{recorded[thread]}")
            recorded[thread] += 1

    threads = [threading.Thread(target=keep_recording, args=(n,)) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    results: list[int | None] = []
    try:
        for trial in range(TRIALS):
            assert recording(recorded, more=8), "the recording threads stopped"
            pid = fork(partial(child_work, pipelines, trial, time.monotonic()))
            results.append(outcome(pid))
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
    pipelines.recorder.shutdown()

    assert results == [OK] * TRIALS, results  # no hang, every child delivered in time
    parent_calls = sum(recorded)
    for exporter in (pipelines.otel, pipelines.langfuse):
        stats = exporter.delivery
        assert stats is not None
        assert (stats.produced, stats.exported, stats.dropped) == (parent_calls, parent_calls, 0)

    child_ids = {f"child-{t}-{n}" for t in range(TRIALS) for n in range(CHILD_CALLS)}
    for seen in (otel_call_ids(otlp.spans), langfuse_call_ids(langfuse.spans)):
        assert max(seen.values()) == 1, seen.most_common(3)  # nothing arrived twice
        assert child_ids <= set(seen)
        assert len(seen) == parent_calls + len(child_ids)
    assert len({span.span_id for span in otlp.spans}) == len(otlp.spans)

    exports = otlp.metric_exports
    child_exports, parent_export = exports[:-1], exports[-1]
    assert len(child_exports) >= TRIALS
    for points in child_exports:  # a child's metrics are its own calls only
        assert sum(p.count or 0 for p in points if p.metric == DURATION) == CHILD_CALLS
    assert sum(p.count or 0 for p in parent_export if p.metric == DURATION) == parent_calls


def test_a_child_never_exports_what_its_parent_had_queued(
    receivers: tuple[OtlpSink, OtlpSink],
) -> None:
    otlp, langfuse = receivers
    pipelines = Pipelines(otlp, langfuse)
    for number in range(50):  # queued: less than a batch, before the export interval
        record(pipelines.recorder, f"parent-{number}")

    def child() -> int:
        pipelines.recorder.flush(timeout=RECORD_LIMIT)
        for exporter in (pipelines.otel, pipelines.langfuse):
            stats = exporter.delivery
            if stats is None or stats.produced != 0:
                return OTEL_UNDELIVERED
        return OK

    assert outcome(fork(child)) == OK
    pipelines.recorder.shutdown()
    # Each of the parent's spans arrives exactly once: had the child sent what the parent had
    # queued, it would arrive twice. (The parent's own export may run while the child does, so
    # an empty receiver right after the child is no proof either way.)
    assert otel_call_ids(otlp.spans) == Counter(f"parent-{n}" for n in range(50))
    assert langfuse_call_ids(langfuse.spans) == Counter(f"parent-{n}" for n in range(50))


def test_a_child_closing_the_prometheus_endpoint_neither_hangs_nor_stops_the_parent() -> None:
    endpoint = PrometheusEndpoint(port=0)
    try:

        def child() -> int:
            endpoint.close(timeout=1.0)
            return OK

        assert outcome(fork(child), limit=10.0) == OK
        with urllib.request.urlopen(endpoint.url, timeout=5) as response:
            assert response.status == 200
    finally:
        endpoint.close()
