"""Rigs for the instrumentation tests: the real SDKs against the loopback stand-in.

Each ``Op`` is one SDK method (OpenAI embeddings, Cohere v2 and v1 embed / rerank, Voyage embed /
rerank)
with how to build its client (sync or async, SDK retries off unless asked) and how to call it.
A ``Tape`` is a sink that keeps start notices and events in order.
"""

from __future__ import annotations

import math
import socket
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import cohere
import httpx
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from voyageai.client import Client as VoyageClient
from voyageai.client_async import AsyncClient as AsyncVoyageClient

import spanledger
from spanledger import CallStarted, Event, Recorder
from spanledger.testing import StandIn

API_KEY = "sk-SENTINEL-key-51e0c7"
QUERY = "what is a tick"
TEXTS = ["a tick is a small arachnid", "ticks feed on blood", "the clock ticks"]


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def spans() -> Iterator[tuple[InMemorySpanExporter, TracerProvider]]:
    """A tracer provider whose spans are kept in memory as they end."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield exporter, provider
    provider.shutdown()


class Tape:
    """A start-aware sink: ``log`` keeps ("start", notice) and ("event", event) in order."""

    def __init__(self) -> None:
        self.log: list[tuple[str, CallStarted | Event]] = []
        self.events: list[Event] = []

    def call_started(self, started: CallStarted) -> None:
        self.log.append(("start", started))

    def emit(self, event: Event) -> None:
        self.log.append(("event", event))
        self.events.append(event)


@pytest.fixture
def tape() -> Iterator[Tape]:
    recording = Tape()
    with spanledger.use(Recorder([recording])):
        yield recording


def tokens(text: str) -> int:
    """The stand-in's token count for one text."""
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))


@dataclass(frozen=True)
class Op:
    """One SDK method under test."""

    name: str
    provider: str
    operation: str
    make: Callable[..., Any]
    call: Callable[[Any, str, list[str]], Any]
    acall: Callable[[Any, str, list[str]], Awaitable[Any]]
    dump: Callable[[Any], Any]
    route: str

    def client(self, standin: StandIn, *, is_async: bool = False, **options: Any) -> Any:
        return self.make(standin.url, is_async, **options)

    def expected_usage(self, texts: list[str]) -> dict[str, int | None]:
        """The usage the stand-in reports for ``texts`` (as documents, for a rerank)."""
        if self.operation == "embeddings":
            return {"input_tokens": sum(tokens(t) for t in texts)}
        if self.provider == "cohere":
            return {"search_units": 1, "input_tokens": None}
        total = tokens(QUERY) * len(texts) + sum(tokens(t) for t in texts)
        return {"search_units": None, "input_tokens": total}


def _openai(origin: str, is_async: bool, **options: Any) -> Any:
    options.setdefault("max_retries", 0)
    kind = openai.AsyncOpenAI if is_async else openai.OpenAI
    return kind(api_key=API_KEY, base_url=f"{origin}/openai/v1", **options)


def _cohere(origin: str, is_async: bool, **options: Any) -> Any:
    options.setdefault("max_retries", 0)
    kind = cohere.AsyncClientV2 if is_async else cohere.ClientV2
    return kind(api_key=API_KEY, base_url=f"{origin}/cohere", **options)


def _cohere_v1(origin: str, is_async: bool, **options: Any) -> Any:
    options.setdefault("max_retries", 0)
    kind = cohere.AsyncClient if is_async else cohere.Client
    return kind(api_key=API_KEY, base_url=f"{origin}/cohere", **options)


def _voyage(origin: str, is_async: bool, **options: Any) -> Any:
    options.setdefault("max_retries", 0)
    kind = AsyncVoyageClient if is_async else VoyageClient
    return kind(api_key=API_KEY, base_url=f"{origin}/voyageai/v1", **options)


def _model_dump(result: Any) -> Any:
    return (type(result), result.model_dump(warnings=False))


OPS = [
    Op(
        "openai-embed",
        "openai",
        "embeddings",
        _openai,
        lambda c, m, t: c.embeddings.create(model=m, input=t),
        lambda c, m, t: c.embeddings.create(model=m, input=t),
        _model_dump,
        "/openai/v1/embeddings",
    ),
    Op(
        "cohere-embed",
        "cohere",
        "embeddings",
        _cohere,
        lambda c, m, t: c.embed(model=m, texts=t, input_type="search_document"),
        lambda c, m, t: c.embed(model=m, texts=t, input_type="search_document"),
        _model_dump,
        "/cohere/v2/embed",
    ),
    Op(
        "cohere-rerank",
        "cohere",
        "rerank",
        _cohere,
        lambda c, m, t: c.rerank(model=m, query=QUERY, documents=t),
        lambda c, m, t: c.rerank(model=m, query=QUERY, documents=t),
        _model_dump,
        "/cohere/v2/rerank",
    ),
    Op(
        "voyage-embed",
        "voyageai",
        "embeddings",
        _voyage,
        lambda c, m, t: c.embed(t, model=m),
        lambda c, m, t: c.embed(t, model=m),
        lambda r: (type(r), r.embeddings, r.total_tokens),
        "/voyageai/v1/embeddings",
    ),
    Op(
        "voyage-rerank",
        "voyageai",
        "rerank",
        _voyage,
        lambda c, m, t: c.rerank(QUERY, t, model=m),
        lambda c, m, t: c.rerank(QUERY, t, model=m),
        lambda r: (type(r), r.results, r.total_tokens),
        "/voyageai/v1/rerank",
    ),
    Op(
        "cohere-v1-embed",
        "cohere",
        "embeddings",
        _cohere_v1,
        lambda c, m, t: c.embed(model=m, texts=t, input_type="search_document"),
        lambda c, m, t: c.embed(model=m, texts=t, input_type="search_document"),
        _model_dump,
        "/cohere/v1/embed",
    ),
    Op(
        "cohere-v1-rerank",
        "cohere",
        "rerank",
        _cohere_v1,
        lambda c, m, t: c.rerank(model=m, query=QUERY, documents=t),
        lambda c, m, t: c.rerank(model=m, query=QUERY, documents=t),
        _model_dump,
        "/cohere/v1/rerank",
    ),
]
OP_IDS = [op.name for op in OPS]


def outcome(fn: Callable[[], Any], dump: Callable[[Any], Any]) -> tuple[str, Any]:
    """What a caller sees: ("ok", comparable result) or ("raised", exception type)."""
    try:
        result = fn()
    except Exception as exc:
        return ("raised", type(exc))
    return ("ok", dump(result))


async def aoutcome(fn: Callable[[], Awaitable[Any]], dump: Callable[[Any], Any]) -> tuple[str, Any]:
    try:
        result = await fn()
    except Exception as exc:
        return ("raised", type(exc))
    return ("ok", dump(result))


def openai_over(transport: httpx.BaseTransport, **options: Any) -> openai.OpenAI:
    """An OpenAI client over a plain ``httpx.Client``: the SDK accepts one at runtime, though
    its hints name only its own ``httpx2`` client."""
    http_client = httpx.Client(transport=transport)
    return openai.OpenAI(api_key=API_KEY, http_client=http_client, **options)  # type: ignore[arg-type]


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port
