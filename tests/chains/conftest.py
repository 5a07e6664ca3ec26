"""Shared rigs for the rerank-chain tests: the stand-in server, providers bound to it, a
server that trickles its answer, and small ranking functions that keep (or break) the outcome
contract on purpose."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from spanledger import Recorder
from spanledger.events import Event
from spanledger.exporters.otel import OtelExporter
from spanledger.ledger import PriceTable
from spanledger.providers import CohereReranker, JinaReranker, RerankProvider
from spanledger.testing import StandIn

SENTINEL = "zq-sentinel-7f3a-do-not-leak"
"""Text that must never reach an outcome's JSON, a span, an event or a log."""
QUERY = f"how do tides depend on the moon {SENTINEL}"
DOCUMENTS = [
    f"lighthouses warn ships {SENTINEL}",
    "tides follow the moon",
    "sea salt from rock pools",
    "the moon pulls the oceans and the tides rise",
]

PRICES = PriceTable.from_dict(
    {
        "currency": "USD",
        "prices": [
            {"provider": "cohere", "model": "*", "per_search_unit": "0.002"},
            {"provider": "jina", "model": "*", "input_per_mtok": "0.02"},
        ],
    }
)

RankFunction = Callable[[str, Sequence[str], int | None], Any]


def answering(*pairs: tuple[int, float]) -> RankFunction:
    """A ranking function that always returns ``pairs``."""

    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        return list(pairs)

    return rank


def returning(value: object) -> RankFunction:
    """A ranking function that returns ``value`` as it is."""

    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        return value

    return rank


def good(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    """A ranking that keeps the contract: reverse input order, descending scores."""
    order = list(reversed(range(len(documents))))
    if top_k is not None:
        order = order[:top_k]
    return [(index, float(len(documents) - rank)) for rank, index in enumerate(order)]


class Providers:
    """Providers bound to one stand-in and one recorder that keeps every event."""

    def __init__(self, standin: StandIn) -> None:
        self.standin = standin
        self.events: list[Event] = []
        self.recorder = Recorder([self.events.append])
        self._made: list[RerankProvider] = []

    def cohere(
        self, model: str = "rerank-v3.5", recorder: Recorder | None = None
    ) -> CohereReranker:
        made = CohereReranker(
            model,
            base_url=self.standin.base_url("cohere"),
            recorder=recorder or self.recorder,
        )
        self._made.append(made)
        return made

    def jina(self, model: str = "jina-reranker-v2") -> JinaReranker:
        made = JinaReranker(model, base_url=self.standin.base_url("jina"), recorder=self.recorder)
        self._made.append(made)
        return made

    def sent(self) -> int:
        return len(self.standin.requests)

    def close(self) -> None:
        for made in self._made:
            made.close()

    async def aclose(self) -> None:
        for made in self._made:
            await made.aclose()


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def providers(standin: StandIn) -> Iterator[Providers]:
    made = Providers(standin)
    yield made
    made.close()


@pytest.fixture
async def aproviders(standin: StandIn) -> AsyncIterator[Providers]:
    made = Providers(standin)
    yield made
    await made.aclose()


class Otel:
    """An ``OtelExporter`` on private SDK providers, read back from memory."""

    def __init__(self) -> None:
        self.store = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.store))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        self.exporter = OtelExporter(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider
        )
        self.events: list[Event] = []
        self.recorder = Recorder([self.exporter, self.events.append])

    def spans(self) -> list[ReadableSpan]:
        return list(self.store.get_finished_spans())

    def points(self, name: str) -> list[tuple[dict[str, Any], Any]]:
        """Every data point of the metric ``name``: (attributes, value)."""
        found: list[tuple[dict[str, Any], Any]] = []
        data = self.reader.get_metrics_data()
        if data is None:
            return found
        for resource in data.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(
                            (dict(point.attributes or {}), getattr(point, "value", None))
                            for point in metric.data.data_points
                        )
        return found

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


@pytest.fixture
def otel() -> Iterator[Otel]:
    made = Otel()
    yield made
    made.shutdown()


class Trickle:
    """A loopback server answering every request with a sound Cohere rerank answer, sent one
    byte every ``interval`` seconds, status line and headers included: each read a client
    makes gets a byte well within any read timeout, so only a deadline on the whole exchange
    ends it. ``close`` stops every answer still trickling."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.closing = threading.Event()
        self.served = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    def _answer(self, connection: socket.socket) -> None:
        with connection:
            received = b""
            while b"\r\n\r\n" not in received:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                received += chunk
            self.served += 1
            body = json.dumps(
                {"id": "t", "results": [{"index": 1, "relevance_score": 0.9}], "meta": {}}
            ).encode()
            head = f"HTTP/1.1 200 OK\r\ncontent-length: {len(body)}\r\n\r\n".encode()
            answer = head + body
            for position in range(len(answer)):
                if self.closing.wait(self.interval):
                    return
                try:
                    connection.sendall(answer[position : position + 1])
                except OSError:
                    return

    def close(self) -> None:
        self.closing.set()
        self._listener.close()


@pytest.fixture
def trickle() -> Iterator[Trickle]:
    server = Trickle()
    yield server
    server.close()
