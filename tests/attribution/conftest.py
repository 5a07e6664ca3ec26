"""Shared rigs for the attribution tests: frames and usage reports built by hand, providers
pointed at the loopback stand-in, and a 127.0.0.1 server that records what a client POSTs.

Nothing here installs a global recorder or provider; every server binds 127.0.0.1 only.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from spanledger.attribution import (
    AttributionReport,
    ContextUse,
    FrameId,
    ProviderUsage,
    ServedFrame,
    UsageReport,
)
from spanledger.events import Event
from spanledger.providers import (
    CohereEmbeddings,
    CohereReranker,
    EmbeddingProvider,
    RerankProvider,
    VoyageReranker,
)
from spanledger.testing import StandIn

SENTINEL = "SENTINEL-attr-7d3f19-do-not-leak"
"""Put in passages, queries and answers; must never appear in a record, span or score."""

API_KEY = "test-api-key"
AS_OF = datetime(2025, 6, 15, 12, 0, tzinfo=UTC)

QUESTION = "How do tides depend on the moon?"
PASSAGES = [
    "Tides are the regular rise and fall of the sea, driven mostly by the moon's gravity.",
    "The sun also pulls on the oceans, so spring tides come when sun and moon line up.",
    "Neap tides happen when the sun and the moon pull at right angles to each other.",
    "Lighthouses were built to warn ships away from rocks and shallow water.",
    "Sea salt is harvested by letting shallow pools of seawater evaporate.",
]


def accounting_tokens(text: str) -> int:
    """``ceil(utf8_bytes / 4)``, computed here independently of the library."""
    size = len(text.encode("utf-8"))
    return (size + 3) // 4


def digest_of(text: str) -> str:
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------- hand-built reports


def frame(frame_id: str, provider_id: str = "docs") -> FrameId:
    return FrameId.of(provider_id, frame_id, f"content of {frame_id}")


def served(frame_id: str, cost: int, provider_id: str = "docs") -> ServedFrame:
    return ServedFrame(frame(frame_id, provider_id), cost)


def usage_of(
    *rows: Iterable[ServedFrame], provider_ids: Iterable[str] | None = None
) -> UsageReport:
    """A consistent usage report with one provider line per ``rows`` item."""
    ids = list(provider_ids) if provider_ids is not None else [f"p{i}" for i in range(len(rows))]
    return UsageReport.of(
        [ProviderUsage.of(pid, items) for pid, items in zip(ids, rows, strict=True)], as_of=AS_OF
    )


def report_of(uses: Iterable[ContextUse], *served_frames: ServedFrame) -> AttributionReport:
    return AttributionReport.of(uses, usage_of(served_frames, provider_ids=["docs"]))


# --------------------------------------------------------------------------- stand-in providers


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


class Providers:
    """Builds providers pointed at the stand-in (recording through the current recorder)
    and closes the ones it built."""

    def __init__(self, standin: StandIn) -> None:
        self.standin = standin
        self._built: list[EmbeddingProvider | RerankProvider] = []

    def embedder(self, model: str = "embed-v4.0") -> EmbeddingProvider:
        provider = CohereEmbeddings(
            model, base_url=self.standin.base_url("cohere"), api_key=API_KEY
        )
        self._built.append(provider)
        return provider

    def reranker(self, model: str = "rerank-v3.5") -> RerankProvider:
        provider = CohereReranker(model, base_url=self.standin.base_url("cohere"), api_key=API_KEY)
        self._built.append(provider)
        return provider

    def slow_voyage_reranker(self, delay_ms: int) -> RerankProvider:
        provider = VoyageReranker(
            "rerank-2.5",
            base_url=self.standin.base_url("voyageai", f"slow-{delay_ms}"),
            api_key=API_KEY,
        )
        self._built.append(provider)
        return provider

    def close(self) -> None:
        for provider in self._built:
            provider.close()


@pytest.fixture
def providers(standin: StandIn) -> Iterator[Providers]:
    built = Providers(standin)
    yield built
    built.close()


def cost_amounts(events: Iterable[Event]) -> list[Any]:
    """Each event's cost amount (``None`` where unknown or unpriced)."""
    return [e.cost.amount if e.cost is not None else None for e in events]


# --------------------------------------------------------------------------- POST recorder


@dataclass(frozen=True)
class Post:
    path: str
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class _RecordingHandler(BaseHTTPRequestHandler):
    server: PostRecorder
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        self.server.record(Post(self.path, body))
        data = b'{"message":"Accepted"}'
        self.send_response(202)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class PostRecorder(ThreadingHTTPServer):
    """Answers every POST on 127.0.0.1 with 202 and keeps what it was sent."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RecordingHandler)
        self._posts: list[Post] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def record(self, post: Post) -> None:
        with self._lock:
            self._posts.append(post)

    @property
    def posts(self) -> list[Post]:
        with self._lock:
            return list(self._posts)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.shutdown()
        self._thread.join(timeout=5)
        self.server_close()


@pytest.fixture
def post_recorder() -> Iterator[PostRecorder]:
    server = PostRecorder()
    server.start()
    yield server
    server.stop()
