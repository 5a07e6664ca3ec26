"""A broken sink, or a dead, hung or failing backend, never slows or fails a call; losses count."""

from __future__ import annotations

import statistics
import time

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import CallStarted, Recorder
from spanledger.events import Event
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.providers import EmbeddingProvider

from .conftest import (
    Providers,
    SilentServer,
    StatusServer,
    closed_port,
    embedding_event,
    unique_public_key,
)

CALLS = 20
PER_CALL_LIMIT = 0.1
SHUTDOWN_LIMIT = 6.0
"""The default shutdown timeout (5 s) and a second of slack."""


class BrokenSink:
    """Raises from every hook a sink can have."""

    def call_started(self, started: CallStarted) -> None:
        raise RuntimeError("call_started broke")

    def emit(self, event: Event) -> None:
        raise ValueError("emit broke")

    def flush(self) -> None:
        raise OSError("flush broke")

    def shutdown(self) -> None:
        raise OSError("shutdown broke")


@pytest.fixture(autouse=True)
def _short_export_timeouts(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
        "OTEL_METRICS_EXPORTER",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    return


def timed_calls(embedder: EmbeddingProvider) -> list[float]:
    durations = []
    for i in range(CALLS):
        started = time.perf_counter()
        embedder.embed([f"text {i}"])
        durations.append(time.perf_counter() - started)
    return durations


def baseline(providers: Providers) -> list[float]:
    """The same calls with no exporter at all (a plain list sink keeps recording on)."""
    events: list[Event] = []
    embedder = providers.embedder("cohere", "embed-v4.0", Recorder([events.append]))
    timed_calls(embedder)  # warm the connection
    durations = timed_calls(embedder)
    assert len(events) == 2 * CALLS
    return durations


def assert_fast(with_exporter: list[float], without: list[float]) -> None:
    assert max(with_exporter) < PER_CALL_LIMIT, max(with_exporter)
    assert statistics.median(with_exporter) < statistics.median(without) + 0.02


def shutdown_time(recorder: Recorder) -> float:
    started = time.perf_counter()
    recorder.shutdown()
    return time.perf_counter() - started


# --------------------------------------------------------------------------- broken sinks


def test_a_raising_sink_never_fails_the_call_and_is_counted(providers: Providers) -> None:
    events: list[Event] = []
    recorder = Recorder([BrokenSink(), events.append])
    embedder = providers.embedder("cohere", "embed-v4.0", recorder)

    response = embedder.embed(["a"])
    providers.reranker("cohere", "rerank-v3.5", recorder).rerank("q", ["a"])
    recorder.flush()
    recorder.shutdown()

    assert response.dimensions == 16
    assert len(events) == 2  # the next sink still got every event
    broken, healthy = recorder.stats.values()
    # two call_started + two emit + flush + shutdown
    assert broken.failed == 6
    assert broken.delivered == 0
    assert broken.failures_by_type == {"RuntimeError": 2, "ValueError": 2, "OSError": 2}
    assert healthy.delivered == 2
    assert healthy.failed == 0


def test_a_raising_sink_before_the_otel_exporter_leaves_its_span_intact(
    providers: Providers,
) -> None:
    store = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(store))
    recorder = Recorder(
        [BrokenSink(), OtelExporter(tracer_provider=tracer_provider, enable_metrics=False)]
    )
    tracer = tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("parent") as parent:
        providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])
        assert trace.get_current_span() is parent

    call_spans = [span for span in store.get_finished_spans() if span.name.startswith("embed")]
    assert len(call_spans) == 1
    assert call_spans[0].parent is not None
    assert call_spans[0].parent.span_id == parent.get_span_context().span_id
    tracer_provider.shutdown()


def test_a_failing_tracer_provider_never_fails_the_call(providers: Providers) -> None:
    class _Exploding(trace.TracerProvider):
        def get_tracer(self, *args: object, **kwargs: object) -> trace.Tracer:
            return _ExplodingTracer()

    class _ExplodingTracer(trace.NoOpTracer):
        def start_span(self, *args: object, **kwargs: object) -> trace.Span:
            raise RuntimeError("tracer broke")

    events: list[Event] = []
    exporter = OtelExporter(tracer_provider=_Exploding(), enable_metrics=False)
    recorder = Recorder([exporter, events.append])
    response = providers.embedder("cohere", "embed-v4.0", recorder).embed(["a"])

    assert response.dimensions == 16
    assert len(events) == 1
    (stats, _) = recorder.stats.values()
    assert stats.failed == 2  # call_started and emit, both isolated


# --------------------------------------------------------------------------- OTLP backends


def run_against_otlp(endpoint: str, providers: Providers) -> None:
    without = baseline(providers)
    recorder = spanledger.configure(otlp_endpoint=endpoint, environ={}, install=False)
    (exporter,) = recorder.sinks
    assert isinstance(exporter, OtelExporter)
    embedder = providers.embedder("cohere", "embed-v4.0", recorder)

    with_exporter = timed_calls(embedder)
    elapsed = shutdown_time(recorder)

    assert_fast(with_exporter, without)
    assert elapsed < SHUTDOWN_LIMIT, elapsed
    delivery = exporter.delivery
    assert delivery is not None
    assert delivery.exported == 0
    assert delivery.failed == CALLS  # each export timed out (OTEL_EXPORTER_OTLP_TIMEOUT=1)
    assert (delivery.produced, delivery.pending) == (CALLS, 0)
    assert delivery.balanced


def test_otlp_backend_on_a_closed_port(providers: Providers) -> None:
    run_against_otlp(f"http://127.0.0.1:{closed_port()}", providers)


def test_otlp_backend_that_accepts_but_never_answers(providers: Providers) -> None:
    with SilentServer() as backend:
        run_against_otlp(backend.url, providers)
        accepted = backend.accepted
    assert accepted >= 1  # the exporter really did reach it and wait


# --------------------------------------------------------------------------- Langfuse backends


def test_langfuse_host_answering_500(providers: Providers) -> None:
    without = baseline(providers)
    with StatusServer(500) as backend:
        recorder = spanledger.configure(
            environ={
                "LANGFUSE_PUBLIC_KEY": unique_public_key(),
                "LANGFUSE_SECRET_KEY": "sk",
                "LANGFUSE_HOST": backend.url,
            },
            install=False,
        )
        (exporter,) = recorder.sinks
        assert isinstance(exporter, LangfuseExporter)
        embedder = providers.embedder("cohere", "embed-v4.0", recorder)
        with_exporter = timed_calls(embedder)
        elapsed = shutdown_time(recorder)
        reached = [post.path for post in backend.seen]

    assert_fast(with_exporter, without)
    assert elapsed < SHUTDOWN_LIMIT, elapsed
    assert "/api/public/otel/v1/traces" in reached
    delivery = exporter.delivery
    assert delivery is not None
    assert (delivery.produced, delivery.exported, delivery.failed) == (CALLS, 0, CALLS)
    assert delivery.balanced


def test_langfuse_host_on_a_closed_port(providers: Providers) -> None:
    recorder = spanledger.configure(
        environ={
            "LANGFUSE_PUBLIC_KEY": unique_public_key(),
            "LANGFUSE_SECRET_KEY": "sk",
            "LANGFUSE_HOST": f"http://127.0.0.1:{closed_port()}",
        },
        install=False,
    )
    (exporter,) = recorder.sinks
    assert isinstance(exporter, LangfuseExporter)
    durations = timed_calls(providers.embedder("cohere", "embed-v4.0", recorder))
    elapsed = shutdown_time(recorder)

    assert max(durations) < PER_CALL_LIMIT
    assert elapsed < SHUTDOWN_LIMIT
    delivery = exporter.delivery
    assert delivery is not None
    assert (delivery.produced, delivery.exported, delivery.failed) == (CALLS, 0, CALLS)
    assert delivery.balanced


def test_reconfiguring_with_the_same_langfuse_keys_still_delivers_and_counts() -> None:
    environ = {"LANGFUSE_PUBLIC_KEY": unique_public_key(), "LANGFUSE_SECRET_KEY": "sk"}
    with StatusServer(200) as backend:
        environ["LANGFUSE_HOST"] = backend.url
        first = spanledger.configure(environ=environ, install=False)
        first.emit(embedding_event(call_id="first"))
        first.shutdown()
        second = spanledger.configure(environ=environ, install=False)
        second.emit(embedding_event(call_id="second"))
        second.shutdown()
        posts = [post for post in backend.seen if post.path.endswith("/v1/traces")]

    (exporter,) = second.sinks
    assert isinstance(exporter, LangfuseExporter)
    assert exporter.delivery is not None
    # One pipeline per key and host in a process (the langfuse SDK keeps one client per key):
    # both recorders share it, so its count covers both spans.
    assert exporter.delivery.exported == 2
    assert sum(post.body.count(b"second") for post in posts) >= 1  # and it reached the host
