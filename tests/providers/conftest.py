"""A fake HTTP server over ``httpx.MockTransport`` and helpers shared by the provider tests.

Every test talks to a ``FakeServer``: it records each request (url, headers, raw bytes, parsed
JSON) and answers from a queue of canned replies. Nothing here touches the network.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from spanledger import Recorder
from spanledger.events import EmbeddingResponse, Event, RerankResponse
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

API_KEY = "sk-SENTINEL-api-key-7f3a9c"
"""Never allowed to appear in an error, a repr or an event."""

BODY_SENTINEL = "BODY-SENTINEL-do-not-leak-41d2"
"""Put in error bodies; never allowed to appear in an error or an event."""

TEI_URL = "http://tei.test"

EMBEDDING_VENDORS = ("openai", "cohere", "jina", "tei", "voyage")
RERANK_VENDORS = ("cohere", "jina", "tei", "voyage")
HOSTED_EMBEDDING_VENDORS = ("openai", "cohere", "jina", "voyage")
HOSTED_RERANK_VENDORS = ("cohere", "jina", "voyage")

EMBEDDING_MODELS = {
    "openai": "text-embedding-3-small",
    "cohere": "embed-v4.0",
    "jina": "jina-embeddings-v3",
    "tei": "BAAI/bge-small-en-v1.5",
    "voyage": "voyage-3",
}
RERANK_MODELS = {
    "cohere": "rerank-v3.5",
    "jina": "jina-reranker-v2-base-multilingual",
    "tei": "BAAI/bge-reranker-base",
    "voyage": "rerank-2",
}
PROVIDER_NAMES = {
    "openai": "openai",
    "cohere": "cohere",
    "jina": "jina",
    "tei": "tei",
    "voyage": "voyageai",
}

_EMBEDDERS: dict[str, Callable[..., EmbeddingProvider]] = {
    "openai": OpenAIEmbeddings,
    "cohere": CohereEmbeddings,
    "jina": JinaEmbeddings,
    "tei": TEIEmbeddings,
    "voyage": VoyageEmbeddings,
}
_RERANKERS: dict[str, Callable[..., RerankProvider]] = {
    "cohere": CohereReranker,
    "jina": JinaReranker,
    "tei": TEIReranker,
    "voyage": VoyageReranker,
}


# --------------------------------------------------------------------------- fake server


@dataclass(frozen=True)
class SeenRequest:
    """One request as it reached the wire."""

    method: str
    url: str
    headers: httpx.Headers
    content: bytes
    timeout: dict[str, float | None] = field(default_factory=dict)

    @property
    def json(self) -> Any:
        return json.loads(self.content)


@dataclass(frozen=True)
class Reply:
    """A canned answer: a JSON body, or raw bytes, or an exception to raise in the transport."""

    status: int = 200
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    error: Exception | None = None


class FakeServer:
    """A ``MockTransport`` handler that records requests and replies from a queue."""

    def __init__(self) -> None:
        self.requests: list[SeenRequest] = []
        self._replies: deque[Reply] = deque()
        self.delay = 0.0

    # -- queueing replies ------------------------------------------------------------------

    def reply(
        self,
        body: Any = None,
        *,
        status: int = 200,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> FakeServer:
        self._replies.append(Reply(status, body, raw, dict(headers or {})))
        return self

    def fail_with(self, error: Exception) -> FakeServer:
        self._replies.append(Reply(error=error))
        return self

    @property
    def pending(self) -> int:
        return len(self._replies)

    # -- transport ---------------------------------------------------------------------------

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(
            SeenRequest(
                request.method,
                str(request.url),
                request.headers,
                request.read(),
                dict(request.extensions.get("timeout", {})),
            )
        )
        if self.delay:
            time.sleep(self.delay)
        if not self._replies:
            raise AssertionError("FakeServer: a request arrived with no canned reply queued")
        reply = self._replies.popleft()
        if reply.error is not None:
            raise reply.error
        content = reply.raw if reply.raw is not None else json.dumps(reply.body).encode()
        headers = {"content-type": "application/json", **reply.headers}
        return httpx.Response(reply.status, headers=headers, content=content, request=request)

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handler)

    def client(self) -> httpx.Client:
        return httpx.Client(transport=self.transport)

    def async_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self.transport)

    # -- conveniences --------------------------------------------------------------------------

    @property
    def bodies(self) -> list[Any]:
        return [seen.json for seen in self.requests]

    @property
    def only(self) -> SeenRequest:
        """The one request sent; fails unless exactly one was."""
        assert len(self.requests) == 1, f"expected one request, saw {len(self.requests)}"
        return self.requests[0]


@pytest.fixture
def server() -> FakeServer:
    return FakeServer()


@pytest.fixture
def events() -> list[Event]:
    return []


@pytest.fixture
def recorder(events: list[Event]) -> Recorder:
    return Recorder([events.append])


@pytest.fixture(params=[False, True], ids=["sync", "async"])
def is_async(request: pytest.FixtureRequest) -> bool:
    value: bool = request.param
    return value


# --------------------------------------------------------------------------- calling


def call(provider: object, method_name: str, *args: Any, is_async: bool, **kw: Any) -> Any:
    """Call ``provider.<method_name>``, or run ``a<method_name>`` to completion when async."""
    if is_async:
        coroutine = getattr(provider, "a" + method_name)(*args, **kw)
        return asyncio.run(coroutine)
    return getattr(provider, method_name)(*args, **kw)


def embed(
    provider: EmbeddingProvider, inputs: Any, *, is_async: bool, **kw: Any
) -> EmbeddingResponse:
    result: EmbeddingResponse = call(provider, "embed", inputs, is_async=is_async, **kw)
    return result


def rerank(
    provider: RerankProvider, query: Any, documents: Any, *, is_async: bool, **kw: Any
) -> RerankResponse:
    result: RerankResponse = call(provider, "rerank", query, documents, is_async=is_async, **kw)
    return result


# --------------------------------------------------------------------------- providers


def _client_kwargs(server: FakeServer, recorder: Recorder | None) -> dict[str, Any]:
    return {
        "http_client": server.client(),
        "async_http_client": server.async_client(),
        "recorder": recorder,
    }


def make_embedder(
    vendor: str, server: FakeServer, recorder: Recorder | None = None, **kw: Any
) -> EmbeddingProvider:
    """A provider for ``vendor`` wired to ``server`` (TEI gets ``TEI_URL``, hosted ones a key)."""
    kw.setdefault("api_key", None if vendor == "tei" else API_KEY)
    if vendor == "tei":
        kw.setdefault("base_url", TEI_URL)
    model = kw.pop("model", EMBEDDING_MODELS[vendor])
    return _EMBEDDERS[vendor](model, **_client_kwargs(server, recorder), **kw)


def make_reranker(
    vendor: str, server: FakeServer, recorder: Recorder | None = None, **kw: Any
) -> RerankProvider:
    kw.setdefault("api_key", None if vendor == "tei" else API_KEY)
    if vendor == "tei":
        kw.setdefault("base_url", TEI_URL)
    model = kw.pop("model", RERANK_MODELS[vendor])
    return _RERANKERS[vendor](model, **_client_kwargs(server, recorder), **kw)


# --------------------------------------------------------------------------- canned payloads


def vectors_for(count: int, width: int = 3, start: int = 0) -> list[list[float]]:
    """Distinct, exactly representable vectors: row ``i`` is ``[i + 0.5, i + 0.25, ...]``."""
    return [[(start + i) + 0.5 ** (j + 1) for j in range(width)] for i in range(count)]


def embed_payload(
    vendor: str,
    vectors: list[list[float]],
    *,
    tokens: Any = 7,
    model: str | None = None,
    response_id: Any = "resp-1",
    reverse: bool = False,
) -> Any:
    """A sound success body for ``vendor`` carrying ``vectors`` (TEI: a bare array)."""
    if vendor == "tei":
        return [list(v) for v in vectors]
    if vendor == "cohere":
        return {
            "id": response_id,
            "embeddings": {"float": [list(v) for v in vectors]},
            "texts": ["..."] * len(vectors),
            "meta": {"billed_units": {"input_tokens": tokens}},
        }
    data = [
        {"object": "embedding", "index": i, "embedding": list(v)} for i, v in enumerate(vectors)
    ]
    if reverse:
        data.reverse()
    usage: dict[str, Any] = (
        {"prompt_tokens": tokens, "total_tokens": tokens}
        if vendor == "openai"
        else {"total_tokens": tokens}
    )
    return {
        "object": "list",
        "data": data,
        "model": model or EMBEDDING_MODELS[vendor],
        "usage": usage,
    }


def rerank_payload(
    vendor: str,
    results: list[tuple[int, float]],
    *,
    tokens: Any = 11,
    model: str | None = None,
    response_id: Any = "rr-1",
    documents: list[Any] | None = None,
) -> Any:
    """A success body for ``vendor`` holding ``(index, score)`` results in the order given.

    ``documents`` (when given) is the echo to attach to each entry, one per result.
    """
    echo_key = "text" if vendor == "tei" else "document"
    entries: list[dict[str, Any]] = []
    for position, (index, score) in enumerate(results):
        score_key = "score" if vendor == "tei" else "relevance_score"
        entry: dict[str, Any] = {"index": index, score_key: score}
        if documents is not None:
            entry[echo_key] = documents[position]
        entries.append(entry)
    if vendor == "tei":
        return entries
    if vendor == "cohere":
        return {
            "id": response_id,
            "results": entries,
            "meta": {"billed_units": {"search_units": tokens}},
        }
    if vendor == "jina":
        return {
            "model": model or RERANK_MODELS[vendor],
            "usage": {"total_tokens": tokens},
            "results": entries,
        }
    return {
        "object": "list",
        "data": entries,
        "model": model or RERANK_MODELS[vendor],
        "usage": {"total_tokens": tokens},
    }


def compact(value: Any) -> bytes:
    """JSON bytes as the mappings must send them: compact, key order kept, UTF-8."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
