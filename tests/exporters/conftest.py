"""Shared rigs for the exporter tests: in-memory OTel and Langfuse pipelines, loopback servers.

Nothing here installs a global provider or touches the real environment; every server binds
127.0.0.1 only. The provider calls go to the stand-in server over a real loopback socket.
"""

from __future__ import annotations

import socket
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

import pytest
from langfuse import Langfuse
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, Metric
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanledger import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
    Recorder,
    RerankEvent,
    RerankFailedEvent,
    RerankUsage,
    ScoredDocument,
    set_default_recorder,
)
from spanledger.events import Event
from spanledger.exporters.langfuse import LangfuseExporter
from spanledger.exporters.otel import OtelExporter
from spanledger.providers import (
    CohereEmbeddings,
    CohereReranker,
    EmbeddingProvider,
    JinaEmbeddings,
    JinaReranker,
    OpenAIEmbeddings,
    RerankProvider,
    TEIEmbeddings,
    TEIReranker,
    VoyageEmbeddings,
    VoyageReranker,
)
from spanledger.testing import StandIn

SENTINEL = "SENTINEL-c0ffee-do-not-leak"
"""Put in inputs, queries, documents and extras; must not appear unless payload is opted in."""

API_KEY = "test-api-key"
STARTED_AT = datetime(2025, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)

EMBEDDERS: dict[str, Callable[..., EmbeddingProvider]] = {
    "openai": OpenAIEmbeddings,
    "cohere": CohereEmbeddings,
    "jina": JinaEmbeddings,
    "tei": TEIEmbeddings,
    "voyageai": VoyageEmbeddings,
}
RERANKERS: dict[str, Callable[..., RerankProvider]] = {
    "cohere": CohereReranker,
    "jina": JinaReranker,
    "tei": TEIReranker,
    "voyageai": VoyageReranker,
}


# --------------------------------------------------------------------------- stand-in + providers


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


class Providers:
    """Builds providers pointed at the stand-in, and closes the ones it built."""

    def __init__(self, standin: StandIn) -> None:
        self.standin = standin
        self._built: list[EmbeddingProvider | RerankProvider] = []

    def embedder(self, vendor: str, model: str, recorder: Recorder, **kw: Any) -> EmbeddingProvider:
        kw.setdefault("api_key", None if vendor == "tei" else API_KEY)
        provider = EMBEDDERS[vendor](
            model, base_url=self.standin.base_url(vendor), recorder=recorder, **kw
        )
        self._built.append(provider)
        return provider

    def reranker(self, vendor: str, model: str, recorder: Recorder, **kw: Any) -> RerankProvider:
        kw.setdefault("api_key", None if vendor == "tei" else API_KEY)
        provider = RERANKERS[vendor](
            model, base_url=self.standin.base_url(vendor), recorder=recorder, **kw
        )
        self._built.append(provider)
        return provider

    def failing_call(self, operation: str, recorder: Recorder) -> Callable[[], object]:
        """A call the stand-in answers with 429, for ``embeddings`` or ``rerank``."""
        if operation == "embeddings":
            embedder = self.embedder("cohere", "fail-429", recorder)
            return lambda: embedder.embed(["a"])
        reranker = self.reranker("cohere", "fail-429", recorder)
        return lambda: reranker.rerank("q", ["a", "b"])

    def close(self) -> None:
        for provider in self._built:
            provider.close()


@pytest.fixture
def providers(standin: StandIn) -> Iterator[Providers]:
    built = Providers(standin)
    yield built
    built.close()


# --------------------------------------------------------------------------- OTel rig


@dataclass
class OtelRig:
    """An ``OtelExporter`` on private SDK providers with in-memory span and metric readers."""

    exporter: OtelExporter
    recorder: Recorder
    tracer_provider: TracerProvider
    span_store: InMemorySpanExporter
    reader: InMemoryMetricReader
    events: list[Event] = field(default_factory=list)

    def spans(self) -> list[ReadableSpan]:
        return list(self.span_store.get_finished_spans())

    def call_spans(self) -> list[ReadableSpan]:
        """The spans spanledger rendered (the test's own spans left out)."""
        return [
            span
            for span in self.spans()
            if span.instrumentation_scope is not None
            and span.instrumentation_scope.name == "spanledger"
        ]

    def only_span(self) -> ReadableSpan:
        spans = self.call_spans()
        assert len(spans) == 1, f"expected one call span, got {[s.name for s in spans]}"
        return spans[0]

    def metrics(self) -> dict[str, Metric]:
        """Every metric the reader collected, by name."""
        data = self.reader.get_metrics_data()
        found: dict[str, Metric] = {}
        if data is None:
            return found
        for resource_metrics in data.resource_metrics:
            for scope_metrics in resource_metrics.scope_metrics:
                for metric in scope_metrics.metrics:
                    found[metric.name] = metric
        return found


@pytest.fixture
def make_otel() -> Iterator[Callable[..., OtelRig]]:
    """``make_otel(**OtelExporter kwargs)``: a rig whose recorder also keeps every event."""
    rigs: list[OtelRig] = []

    def make(**kwargs: Any) -> OtelRig:
        store = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(store))
        reader = InMemoryMetricReader()
        meter_provider = MeterProvider(metric_readers=[reader])
        exporter = OtelExporter(
            tracer_provider=tracer_provider, meter_provider=meter_provider, **kwargs
        )
        events: list[Event] = []
        recorder = Recorder([exporter, events.append])
        rig = OtelRig(exporter, recorder, tracer_provider, store, reader, events)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.tracer_provider.shutdown()


@pytest.fixture
def otel(make_otel: Callable[..., OtelRig]) -> OtelRig:
    return make_otel()


def all_text(spans: Sequence[ReadableSpan]) -> str:
    """Every name, attribute key and value, status and event of ``spans``, as one string."""
    parts: list[str] = []
    for span in spans:
        parts.append(span.name)
        parts.append(str(span.status.description))
        parts.extend(f"{key}={value!r}" for key, value in (span.attributes or {}).items())
        for event in span.events:
            parts.append(event.name)
            parts.extend(f"{key}={value!r}" for key, value in (event.attributes or {}).items())
    return "\n".join(parts)


# --------------------------------------------------------------------------- Langfuse rig


@dataclass
class LangfuseRig:
    """A real ``Langfuse`` client whose spans go to an in-memory exporter."""

    client: Langfuse
    exporter: LangfuseExporter
    recorder: Recorder
    tracer_provider: TracerProvider
    span_store: InMemorySpanExporter
    events: list[Event] = field(default_factory=list)

    def spans(self) -> list[ReadableSpan]:
        self.client.flush()
        return list(self.span_store.get_finished_spans())

    def only_span(self) -> ReadableSpan:
        spans = self.spans()
        assert len(spans) == 1, f"expected one observation, got {[s.name for s in spans]}"
        return spans[0]


def unique_public_key() -> str:
    """Langfuse keeps one resource manager per public key: each client needs its own key."""
    return f"pk-lf-test-{uuid.uuid4().hex}"


@pytest.fixture
def make_langfuse() -> Iterator[Callable[..., LangfuseRig]]:
    """``make_langfuse(base_url=..., **LangfuseExporter kwargs)``."""
    rigs: list[LangfuseRig] = []

    def make(base_url: str = "http://127.0.0.1:9", **kwargs: Any) -> LangfuseRig:
        store = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        client = Langfuse(
            public_key=unique_public_key(),
            secret_key="sk-lf-test",
            base_url=base_url,
            tracer_provider=tracer_provider,
            span_exporter=store,
        )
        exporter = LangfuseExporter(client, **kwargs)
        events: list[Event] = []
        recorder = Recorder([exporter, events.append])
        rig = LangfuseRig(client, exporter, recorder, tracer_provider, store, events)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.client.shutdown()
        rig.tracer_provider.shutdown()


@pytest.fixture
def langfuse_rig(make_langfuse: Callable[..., LangfuseRig]) -> LangfuseRig:
    return make_langfuse()


# --------------------------------------------------------------------------- hand-built events


def embedding_event(**overrides: Any) -> EmbeddingEvent:
    fields: dict[str, Any] = {
        "call_id": "call-emb-1",
        "provider": "openai",
        "model": "text-embedding-3-small",
        "started_at": STARTED_AT,
        "latency_ms": 12.5,
        "input_count": 2,
        "usage": EmbeddingUsage(input_tokens=42),
        "dimensions": 1536,
        "response_model": "text-embedding-3-small-2024",
        "response_id": "resp-emb-1",
        "server_address": "api.openai.com",
        "server_port": 443,
    }
    fields.update(overrides)
    return EmbeddingEvent(**fields)


def embedding_failed_event(**overrides: Any) -> EmbeddingFailedEvent:
    fields: dict[str, Any] = {
        "call_id": "call-emb-2",
        "provider": "tei",
        "model": "bge-small",
        "started_at": STARTED_AT,
        "latency_ms": 250.0,
        "input_count": 1,
        "error_category": ErrorCategory.UNAVAILABLE,
        "error_type": "http_503",
        "error_message": "provider_unavailable: HTTP 503",
        "status_code": 503,
    }
    fields.update(overrides)
    return EmbeddingFailedEvent(**fields)


def rerank_event(**overrides: Any) -> RerankEvent:
    fields: dict[str, Any] = {
        "call_id": "call-rr-1",
        "provider": "cohere",
        "model": "rerank-v3.5",
        "started_at": STARTED_AT,
        "latency_ms": 88.25,
        "query_length": 10,
        "document_count": 3,
        "top_k": 2,
        "result_count": 2,
        "usage": RerankUsage(search_units=1),
        "results": [
            ScoredDocument(index=2, relevance_score=0.9),
            ScoredDocument(index=0, relevance_score=0.1),
        ],
    }
    fields.update(overrides)
    return RerankEvent(**fields)


def rerank_failed_event(**overrides: Any) -> RerankFailedEvent:
    fields: dict[str, Any] = {
        "call_id": "call-rr-2",
        "provider": "jina",
        "model": "jina-reranker-v2",
        "started_at": STARTED_AT,
        "latency_ms": 5.0,
        "query_length": 4,
        "document_count": 2,
        "error_category": ErrorCategory.RATE_LIMIT,
        "error_type": "http_429",
        "status_code": 429,
    }
    fields.update(overrides)
    return RerankFailedEvent(**fields)


# --------------------------------------------------------------------------- recorder default


@pytest.fixture
def restore_default_recorder() -> Iterator[None]:
    set_default_recorder(None)
    yield
    set_default_recorder(None)


# --------------------------------------------------------------------------- loopback servers


def closed_port() -> int:
    """A 127.0.0.1 port nothing listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class SilentServer:
    """Accepts TCP connections on 127.0.0.1 and never answers (a hung backend)."""

    def __init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self._listener.settimeout(0.05)
        self._stop = threading.Event()
        self._held: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, name="silent-server", daemon=True)
        self.accepted = 0

    @property
    def url(self) -> str:
        host, port = self._listener.getsockname()[:2]
        return f"http://{host}:{port}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._held.append(connection)
            self.accepted += 1

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for connection in self._held:
            connection.close()
        self._listener.close()


@dataclass(frozen=True)
class SeenPost:
    path: str
    headers: dict[str, str]
    body: bytes


class _StatusHandler(BaseHTTPRequestHandler):
    server: StatusServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        self.server.record(SeenPost(self.path, dict(self.headers.items()), body))
        data = b"{}"
        self.send_response(self.server.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = _answer
    do_GET = _answer


class StatusServer(ThreadingHTTPServer):
    """Answers every request on 127.0.0.1 with ``status`` and records what it was sent."""

    daemon_threads = True

    def __init__(self, status: int) -> None:
        super().__init__(("127.0.0.1", 0), _StatusHandler)
        self.status = status
        self._seen: list[SeenPost] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def record(self, seen: SeenPost) -> None:
        with self._lock:
            self._seen.append(seen)

    @property
    def seen(self) -> list[SeenPost]:
        with self._lock:
            return list(self._seen)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
        self._thread.join(timeout=5)
        self.server_close()
