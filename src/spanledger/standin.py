"""A local stand-in server that speaks the vendors' embedding and rerank wire formats.

It is not a model: vectors are derived from a hash of each text and rerank scores from word
overlap. It exists so the demo and the tests can drive every provider mapping over a real
socket on 127.0.0.1, offline. Each vendor lives under its own path prefix
(``/openai``, ``/cohere``, ``/jina``, ``/tei``, ``/voyage``), so ``base_url(vendor)`` is the
origin a provider is given.

Behaviour is chosen by the model name (or by ``base_url(vendor, behaviour)``, for TEI, whose
wire carries no model), so a test can ask for a failure by configuration alone:
``fail-<status>`` answers with that status and the vendor's error body (``fail-429`` adds
``Retry-After: 2``); ``slow-<ms>`` waits before answering; ``reset`` drops the connection;
``usage-malformed`` reports garbage usage figures and ``usage-missing`` none.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

__all__ = ["RecordedRequest", "StandIn", "standin_vector"]

VENDORS = ("openai", "cohere", "jina", "tei", "voyage")
DEFAULT_DIMENSIONS = 16
TEI_MAX_BATCH = 32
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stand-in received it."""

    vendor: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def standin_vector(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """A deterministic unit vector for ``text`` (float32-exact values)."""
    values: list[float] = []
    counter = 0
    while len(values) < dimensions:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((byte - 127.5) / 127.5 for byte in digest)
        counter += 1
    values = values[:dimensions]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    packed = struct.pack(f"<{dimensions}f", *(v / norm for v in values))
    return list(struct.unpack(f"<{dimensions}f", packed))


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))


def _score(query: str, document: str) -> float:
    query_words = {w.lower() for w in _WORD.findall(query)}
    doc_words = {w.lower() for w in _WORD.findall(document)}
    overlap = len(query_words & doc_words) / (len(query_words) or 1)
    tiebreak = int.from_bytes(hashlib.sha256(document.encode()).digest()[:2], "big") / 65536e3
    return round(min(0.999, overlap * 0.9 + tiebreak), 6)


def _error_body(vendor: str, status: int) -> dict[str, Any]:
    message = f"stand-in error {status}"
    if vendor == "openai":
        return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    if vendor == "tei":
        return {"error": message, "error_type": "Validation"}
    if vendor == "cohere":
        return {"id": "standin-error", "message": message}
    return {"detail": message}


class _Reset(Exception):
    """Raised inside the handler to drop the connection without a response."""


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the stand-in never writes request lines to stderr."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        parts = self.path.strip("/").split("/", 1)
        prefix, route = (parts[0], "/" + parts[1]) if len(parts) == 2 else ("", self.path)
        vendor, _, behaviour = prefix.partition("~")
        self.server.record(RecordedRequest(vendor, route, dict(self.headers.items()), body))
        try:
            status, payload, headers = self.server.answer(vendor, route, body, behaviour)
        except _Reset:
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        data = json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128  # concurrent async tests open many connections at once

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A dropped connection is part of the act; nothing to print."""

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def answer(
        self, vendor: str, route: str, raw: bytes, behaviour: str
    ) -> tuple[int, Any, dict[str, str]]:
        try:
            body = json.loads(raw)
        except ValueError:
            return 400, _error_body(vendor, 400), {}
        if not isinstance(body, dict):
            return 422, _error_body(vendor, 422), {}
        model = str(body.get("model", "tei-model" if vendor == "tei" else ""))
        failure = self._scripted(vendor, behaviour or model)
        if failure is not None:
            return failure
        handler = _ROUTES.get((vendor, route))
        if handler is None:
            return 404, _error_body(vendor, 404), {}
        return handler(body, model)

    @staticmethod
    def _scripted(vendor: str, model: str) -> tuple[int, Any, dict[str, str]] | None:
        if model == "reset":
            raise _Reset
        slow = re.fullmatch(r"slow-(\d+)", model)
        if slow:
            time.sleep(int(slow.group(1)) / 1000)
            return None
        fail = re.fullmatch(r"fail-(\d{3})", model)
        if fail:
            status = int(fail.group(1))
            headers = {"retry-after": "2"} if status == 429 else {}
            return status, _error_body(vendor, status), headers
        return None


def _usage_value(model: str, figure: int) -> object:
    if model == "usage-malformed":
        return "abc"
    return figure


def _data_embeddings(
    body: dict[str, Any], texts: list[str], dimensions: int
) -> list[dict[str, Any]]:
    base64_format = body.get("encoding_format") == "base64"
    data = []
    for index, text in enumerate(texts):
        vector = standin_vector(text, dimensions)
        embedding: Any = vector
        if base64_format:
            embedding = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    data.reverse()  # out of order on purpose: clients must assemble by index
    return data


def _openai_embed(body: dict[str, Any], model: str) -> tuple[int, Any, dict[str, str]]:
    texts = list(body.get("input") or [])
    tokens = sum(_tokens(t) for t in texts)
    payload: dict[str, Any] = {
        "object": "list",
        "data": _data_embeddings(body, texts, int(body.get("dimensions") or DEFAULT_DIMENSIONS)),
        "model": model,
    }
    if model != "usage-missing":
        payload["usage"] = {"prompt_tokens": _usage_value(model, tokens), "total_tokens": tokens}
    return 200, payload, {}


def _cohere_embed(body: dict[str, Any], model: str) -> tuple[int, Any, dict[str, str]]:
    texts = list(body.get("texts") or [])
    dims = int(body.get("output_dimension") or DEFAULT_DIMENSIONS)
    payload: dict[str, Any] = {
        "id": f"standin-{hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:12]}",
        "embeddings": {"float": [standin_vector(t, dims) for t in texts]},
        "texts": texts,
        "meta": {"api_version": {"version": "2"}},
    }
    if model != "usage-missing":
        tokens = sum(_tokens(t) for t in texts)
        payload["meta"]["billed_units"] = {"input_tokens": _usage_value(model, tokens)}
    return 200, payload, {}


def _cohere_rerank(body: dict[str, Any], model: str) -> tuple[int, Any, dict[str, str]]:
    query, documents = str(body.get("query", "")), list(body.get("documents") or [])
    ranked = sorted(
        ({"index": i, "relevance_score": _score(query, d)} for i, d in enumerate(documents)),
        key=lambda r: -r["relevance_score"],
    )
    top_n = body.get("top_n")
    payload: dict[str, Any] = {
        "id": "standin-rerank",
        "results": ranked[:top_n] if isinstance(top_n, int) else ranked,
        "meta": {"api_version": {"version": "2"}},
    }
    if model != "usage-missing":
        units = math.ceil(len(documents) / 100)
        payload["meta"]["billed_units"] = {"search_units": _usage_value(model, units)}
    return 200, payload, {}


def _token_usage(model: str, tokens: int) -> dict[str, Any]:
    if model == "usage-missing":
        return {}
    return {"usage": {"total_tokens": _usage_value(model, tokens)}}


def _jina_like_embed(body: dict[str, Any], model: str) -> tuple[int, Any, dict[str, str]]:
    texts = list(body.get("input") or [])
    dims = int(body.get("dimensions") or body.get("output_dimension") or DEFAULT_DIMENSIONS)
    payload: dict[str, Any] = {
        "object": "list",
        "model": model,
        "data": _data_embeddings(body, texts, dims),
        **_token_usage(model, sum(_tokens(t) for t in texts)),
    }
    return 200, payload, {}


def _jina_like_rerank(
    body: dict[str, Any], model: str, results_key: str, limit_key: str
) -> tuple[int, Any, dict[str, str]]:
    query, documents = str(body.get("query", "")), list(body.get("documents") or [])
    echo = body.get("return_documents", results_key == "results")
    ranked = []
    for index, document in enumerate(documents):
        result: dict[str, Any] = {"index": index, "relevance_score": _score(query, document)}
        if echo:
            result["document"] = {"text": document} if results_key == "results" else document
        ranked.append(result)
    ranked.sort(key=lambda r: -r["relevance_score"])
    limit = body.get(limit_key)
    tokens = _tokens(query) * len(documents) + sum(_tokens(d) for d in documents)
    payload: dict[str, Any] = {
        "object": "list",
        "model": model,
        results_key: ranked[:limit] if isinstance(limit, int) else ranked,
        **_token_usage(model, tokens),
    }
    return 200, payload, {}


def _tei_embed(body: dict[str, Any], model: str) -> tuple[int, Any, dict[str, str]]:
    texts = body.get("inputs")
    texts = [texts] if isinstance(texts, str) else list(texts or [])
    if len(texts) > TEI_MAX_BATCH:
        return 413, _error_body("tei", 413), {}
    dims = int(body.get("dimensions") or DEFAULT_DIMENSIONS)
    return 200, [standin_vector(t, dims) for t in texts], {}


def _tei_rerank(body: dict[str, Any], model: str) -> tuple[int, Any, dict[str, str]]:
    query, texts = str(body.get("query", "")), list(body.get("texts") or [])
    if len(texts) > TEI_MAX_BATCH:
        return 413, _error_body("tei", 413), {}
    results = []
    for index, text in enumerate(texts):
        result: dict[str, Any] = {"index": index, "score": _score(query, text)}
        if body.get("return_text"):
            result["text"] = text
        results.append(result)
    results.sort(key=lambda r: -r["score"])
    return 200, results, {}


_ROUTES = {
    ("openai", "/v1/embeddings"): _openai_embed,
    ("cohere", "/v2/embed"): _cohere_embed,
    ("cohere", "/v2/rerank"): _cohere_rerank,
    ("jina", "/v1/embeddings"): _jina_like_embed,
    ("jina", "/v1/rerank"): lambda b, m: _jina_like_rerank(b, m, "results", "top_n"),
    ("voyage", "/v1/embeddings"): _jina_like_embed,
    ("voyage", "/v1/rerank"): lambda b, m: _jina_like_rerank(b, m, "data", "top_k"),
    ("tei", "/embed"): _tei_embed,
    ("tei", "/rerank"): _tei_rerank,
}


class StandIn:
    """Runs the stand-in on 127.0.0.1 in a background thread; use as a context manager."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = _Server((host, port))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def base_url(self, vendor: str, behaviour: str | None = None) -> str:
        """The origin to give a provider for ``vendor`` (one of ``VENDORS``).

        ``behaviour`` scripts every call to this origin like a model name would (``fail-429``,
        ``slow-500``, ...); TEI needs it, since its wire carries no model.
        """
        if vendor not in VENDORS:
            raise ValueError(f"unknown vendor {vendor!r}")
        return f"{self.url}/{vendor}~{behaviour}" if behaviour else f"{self.url}/{vendor}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._server._lock:
            return list(self._server.requests)

    def start(self) -> Self:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="spanledger-standin",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
