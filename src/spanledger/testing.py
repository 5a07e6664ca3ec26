"""A loopback server that speaks the vendors' embedding and rerank wire formats, for tests.

``StandIn`` answers the OpenAI, Cohere, Jina, Hugging Face TEI and Voyage endpoints on
127.0.0.1, so code that calls them (through ``spanledger.providers`` or a vendor SDK) runs in a
test with no network and no keys, and the events spanledger recorded can be asserted on. It is
not a model: vectors come from a hash of each text (``standin_vector``) and rerank scores from
word overlap, so every answer is deterministic.

Each vendor lives under its own path prefix; ``server.base_url(vendor)`` is the origin to give
a provider (SDKs take the same origin plus their version path, e.g. ``/v1`` for OpenAI and
Voyage). Vendors are the names in ``VENDORS``; vectors have ``DEFAULT_DIMENSIONS`` values
unless the request asks for others. Every endpoint reports usage by default (a token per four
UTF-8 bytes, a Cohere search unit per 100 documents; TEI reports none). To script an answer,
mount a route built by a vendor function (``openai_embeddings``, ``cohere_rerank``, ...) and
shaped by its methods (``failing``, ``malformed``, ``slow``, ``dropped``)::

    import pytest

    import spanledger
    from spanledger.providers import CohereReranker, OpenAIEmbeddings
    from spanledger.testing import StandIn, cohere_rerank, openai_embeddings


    def test_search_records_usage_and_rate_limits() -> None:
        events: list[spanledger.Event] = []
        with StandIn() as server, spanledger.use(spanledger.Recorder([events.append])):
            server.route(openai_embeddings(tokens=7))
            server.route(cohere_rerank().failing(429, retry_after=3), times=1)
            with OpenAIEmbeddings("text-embedding-3-small", base_url=server.base_url("openai"),
                                  api_key="test") as embedder:
                embedder.embed(["a passage"])
            with CohereReranker("rerank-v3.5", base_url=server.base_url("cohere"),
                                api_key="test") as reranker:
                with pytest.raises(spanledger.ProviderError):
                    reranker.rerank("a question", ["a passage", "another"])
                reranker.rerank("a question", ["a passage", "another"])  # the 429 was used up
        embedded, limited, reranked = events
        assert isinstance(embedded, spanledger.EmbeddingEvent)
        assert embedded.usage == spanledger.EmbeddingUsage(input_tokens=7)
        assert isinstance(limited, spanledger.RerankFailedEvent)
        assert (limited.status_code, limited.retry_after) == (429, 3.0)
        assert isinstance(reranked, spanledger.RerankEvent)
        assert len(server.requests) == 3

Failures can also be asked for by configuration alone, through the model name (or
``base_url(vendor, behaviour)``, which TEI needs since its wire carries no model):
``fail-<status>`` answers with that status and the vendor's error body (``fail-429`` adds
``Retry-After: 2``), ``slow-<ms>`` answers that many milliseconds late, ``reset`` drops the
connection, ``usage-malformed`` reports a garbage usage figure and ``usage-missing`` none.
These names win over a mounted route.

The server keeps every request it received (``server.requests``) for assertions, in memory
only: it writes nothing to any log, and a ``RecordedRequest``'s ``repr`` leaves out its
headers and body, which carry keys and caller text.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

from spanledger.wire.endpoints import Vendor

__all__ = [
    "DEFAULT_DIMENSIONS",
    "VENDORS",
    "RecordedRequest",
    "Reply",
    "Route",
    "StandIn",
    "cohere_embeddings",
    "cohere_rerank",
    "cohere_v1_embeddings",
    "cohere_v1_rerank",
    "jina_embeddings",
    "jina_rerank",
    "openai_embeddings",
    "standin_vector",
    "tei_embeddings",
    "tei_rerank",
    "voyage_embeddings",
    "voyage_rerank",
]

VENDORS = tuple(vendor.value for vendor in Vendor)
"""The vendor names ``StandIn.base_url`` and ``Route`` accept (``spanledger.Vendor`` values;
a ``Vendor`` member is accepted too)."""

DEFAULT_DIMENSIONS = 16
"""How many values a stand-in vector has when the request names no dimensions."""

TEI_MAX_BATCH = 32
"""How many inputs a TEI route takes in one request before answering 413, as TEI does."""

_WORD = re.compile(r"\w+")
_Answer = tuple[int, Any, dict[str, str]]
"""A built-in endpoint's answer: status, JSON payload, extra headers."""


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stand-in received it: the vendor prefix, the path under it, headers
    and raw body. ``repr`` shows only vendor and path, so a failing assertion never prints a key
    or the caller's text."""

    vendor: str
    path: str
    headers: dict[str, str] = field(repr=False)
    body: bytes = field(repr=False)

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` if it is not JSON)."""
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """One answer the stand-in sends: a status with a JSON ``body``, or with ``raw`` bytes sent
    as they are (to test a client against a broken body); ``delay`` seconds late; or, with
    ``drop``, no answer at all (the connection is reset)."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    delay: float = 0.0
    drop: bool = False

    def __post_init__(self) -> None:
        if not 200 <= self.status <= 599:
            raise ValueError(f"status must be within 200..599, not {self.status}")
        if not (math.isfinite(self.delay) and self.delay >= 0):
            raise ValueError(f"delay must be a finite number of seconds >= 0, not {self.delay}")


@dataclass(frozen=True)
class Route:
    """What one endpoint answers: ``vendor`` and ``path`` (under the vendor's prefix) say where
    it is mounted, ``respond`` turns each request into a ``Reply``.

    The vendor functions (``openai_embeddings`` ...) build the real endpoints; the methods below
    derive a failing variant of any route, and they compose (``route.failing(503).slow(1)``).
    A ``respond`` that raises gets a 500 whose body names the exception's type, never its
    message (which may quote the request).
    """

    vendor: str
    path: str
    respond: Callable[[RecordedRequest], Reply] = field(repr=False)

    def __post_init__(self) -> None:
        if self.vendor not in VENDORS:
            raise ValueError(f"unknown vendor {self.vendor!r}; expected one of {VENDORS}")
        if not self.path.startswith("/"):
            raise ValueError(f"path must start with '/', not {self.path!r}")

    def _with(self, respond: Callable[[RecordedRequest], Reply]) -> Route:
        return Route(self.vendor, self.path, respond)

    def failing(self, status: int, *, retry_after: int | str | None = None) -> Route:
        """This endpoint answering ``status`` with the vendor's own error body, and a
        ``Retry-After`` header when ``retry_after`` is given (seconds, or an HTTP date)."""
        if not 400 <= status <= 599:
            raise ValueError(f"a failing status is within 400..599, not {status}")
        headers = {} if retry_after is None else {"retry-after": _retry_after(retry_after)}
        reply = Reply(status, _error_body(self.vendor, status), headers)
        return self._with(lambda _request: reply)

    def malformed(self, body: bytes = b'{"data": [') -> Route:
        """This endpoint answering 200 with ``body`` as it is: by default JSON cut short."""
        reply = Reply(200, raw=bytes(body))
        return self._with(lambda _request: reply)

    def slow(self, seconds: float) -> Route:
        """This endpoint answering as it would, ``seconds`` later (to trip a client's timeout)."""
        extra = Reply(delay=seconds).delay  # validated once, here
        inner = self.respond
        return self._with(lambda request: _later(inner(request), extra))

    def dropped(self) -> Route:
        """This endpoint resetting the connection without answering."""
        reply = Reply(drop=True)
        return self._with(lambda _request: reply)


def _later(reply: Reply, seconds: float) -> Reply:
    return replace(reply, delay=reply.delay + seconds) if seconds else reply


def _retry_after(value: int | str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        if value < 0:
            raise ValueError(f"retry_after must be >= 0 seconds, not {value}")
        return str(value)
    if isinstance(value, str) and value.strip() and value.isprintable():
        return value.strip()
    raise ValueError("retry_after must be whole seconds (int) or an HTTP date (str)")


def standin_vector(text: str, dimensions: int = DEFAULT_DIMENSIONS) -> list[float]:
    """The unit vector the stand-in answers for ``text``: deterministic, float32-exact, so a
    test can compare what a client decoded with ``==``."""
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
    """The vendor's error shape, with a message that never quotes the request."""
    message = f"stand-in error {status}"
    if vendor == "openai":
        return {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    if vendor == "tei":
        return {"error": message, "error_type": "Validation"}
    if vendor == "cohere":
        return {"id": "standin-error", "message": message}
    return {"detail": message}


def _model_of(vendor: str, body: dict[str, Any]) -> str:
    return str(body.get("model", "tei-model" if vendor == "tei" else ""))


def _failure_by_name(vendor: str, name: str) -> Reply | None:
    """The failure a model name (or a ``base_url`` behaviour) asks for instead of an answer."""
    if name == "reset":
        return Reply(drop=True)
    fail = re.fullmatch(r"fail-(\d{3})", name)
    if fail and 400 <= (status := int(fail.group(1))) <= 599:
        headers = {"retry-after": "2"} if status == 429 else {}
        return Reply(status, _error_body(vendor, status), headers)
    return None


def _delay_by_name(name: str) -> float:
    """Seconds a ``slow-<ms>`` name asks the answer to wait."""
    slow = re.fullmatch(r"slow-(\d+)", name)
    return int(slow.group(1)) / 1000 if slow else 0.0


# The built-in endpoints. Each answers (parsed body, model) with (status, payload, headers);
# ``figure`` replaces the usage figure the text would give and ``report`` False leaves usage out.


def _usage_value(model: str, figure: int) -> object:
    return "abc" if model == "usage-malformed" else figure


def _reports(model: str, report: bool) -> bool:
    return report and model != "usage-missing"


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


def _openai_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    texts = _as_list(body.get("input"))
    tokens = sum(_tokens(t) for t in texts) if figure is None else figure
    payload: dict[str, Any] = {
        "object": "list",
        "data": _data_embeddings(body, texts, int(body.get("dimensions") or DEFAULT_DIMENSIONS)),
        "model": model,
    }
    if _reports(model, report):
        payload["usage"] = {"prompt_tokens": _usage_value(model, tokens), "total_tokens": tokens}
    return 200, payload, {}


def _cohere_embed(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    version: str = "2",
) -> _Answer:
    texts = list(body.get("texts") or [])
    dims = int(body.get("output_dimension") or DEFAULT_DIMENSIONS)
    vectors = [standin_vector(t, dims) for t in texts]
    payload: dict[str, Any] = {
        "id": f"standin-{hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:12]}",
        "embeddings": {"float": vectors},
        "texts": texts,
        "meta": {"api_version": {"version": version}},
    }
    if version == "1":  # v1 answers a plain request with the vectors themselves
        by_type = bool(body.get("embedding_types"))
        payload["embeddings"] = {"float": vectors} if by_type else vectors
        payload["response_type"] = "embeddings_by_type" if by_type else "embeddings_floats"
    if _reports(model, report):
        tokens = sum(_tokens(t) for t in texts) if figure is None else figure
        payload["meta"]["billed_units"] = {"input_tokens": _usage_value(model, tokens)}
    return 200, payload, {}


def _cohere_rerank(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    version: str = "2",
) -> _Answer:
    query = str(body.get("query", ""))
    documents = [_document_text(d) for d in body.get("documents") or []]
    echo = version == "1" and bool(body.get("return_documents"))
    ranked: list[dict[str, Any]] = sorted(
        (
            {"index": i, "relevance_score": _score(query, d)}
            | ({"document": {"text": d}} if echo else {})
            for i, d in enumerate(documents)
        ),
        key=lambda r: -r["relevance_score"],
    )
    top_n = body.get("top_n")
    results = ranked[:top_n] if isinstance(top_n, int) else ranked
    payload: dict[str, Any] = {
        "id": "standin-rerank",
        "results": results,
        "meta": {"api_version": {"version": version}},
    }
    if _reports(model, report):
        units = math.ceil(len(documents) / 100) if figure is None else figure
        payload["meta"]["billed_units"] = {"search_units": _usage_value(model, units)}
    return 200, payload, {}


def _document_text(document: object) -> str:
    """A rerank document as text: itself, or a Cohere v1 ``{"text": ...}`` object's text."""
    if isinstance(document, dict):
        return str(document.get("text", ""))
    return str(document)


def _token_usage(model: str, tokens: int, report: bool) -> dict[str, Any]:
    if not _reports(model, report):
        return {}
    return {"usage": {"total_tokens": _usage_value(model, tokens)}}


def _jina_like_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    texts = _as_list(body.get("input"))
    dims = int(body.get("dimensions") or body.get("output_dimension") or DEFAULT_DIMENSIONS)
    tokens = sum(_tokens(t) for t in texts) if figure is None else figure
    payload: dict[str, Any] = {
        "object": "list",
        "model": model,
        "data": _data_embeddings(body, texts, dims),
        **_token_usage(model, tokens, report),
    }
    return 200, payload, {}


def _jina_like_rerank(
    body: dict[str, Any],
    model: str,
    results_key: str,
    limit_key: str,
    figure: int | None = None,
    report: bool = True,
) -> _Answer:
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
        **_token_usage(model, tokens if figure is None else figure, report),
    }
    return 200, payload, {}


def _jina_rerank(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    return _jina_like_rerank(body, model, "results", "top_n", figure, report)


def _voyage_rerank(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    return _jina_like_rerank(body, model, "data", "top_k", figure, report)


def _tei_embed(body: dict[str, Any], model: str, max_batch: int = TEI_MAX_BATCH) -> _Answer:
    texts = body.get("inputs")
    texts = [texts] if isinstance(texts, str) else list(texts or [])
    if len(texts) > max_batch:
        return 413, _error_body("tei", 413), {}
    dims = int(body.get("dimensions") or DEFAULT_DIMENSIONS)
    return 200, [standin_vector(t, dims) for t in texts], {}


def _tei_rerank(body: dict[str, Any], model: str, max_batch: int = TEI_MAX_BATCH) -> _Answer:
    query, texts = str(body.get("query", "")), list(body.get("texts") or [])
    if len(texts) > max_batch:
        return 413, _error_body("tei", 413), {}
    results = []
    for index, text in enumerate(texts):
        result: dict[str, Any] = {"index": index, "score": _score(query, text)}
        if body.get("return_text"):
            result["text"] = text
        results.append(result)
    results.sort(key=lambda r: -r["score"])
    return 200, results, {}


def _built_in(vendor: str, path: str, answer: Callable[[dict[str, Any], str], _Answer]) -> Route:
    def respond(request: RecordedRequest) -> Reply:
        body = request.json()
        status, payload, headers = answer(body, _model_of(vendor, body))
        return Reply(status, payload, headers)

    return Route(vendor, path, respond)


def _figure(name: str, value: int | None) -> int | None:
    if value is not None and (isinstance(value, bool) or value < 0):
        raise ValueError(f"{name} must be a whole number >= 0, not {value!r}")
    return value


def openai_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """OpenAI ``POST /v1/embeddings``: reports ``tokens`` as ``usage.prompt_tokens`` (by
    default a token per four UTF-8 bytes of input), or no usage when ``report_usage`` is False.
    """
    figure = _figure("tokens", tokens)
    return _built_in(
        "openai", "/v1/embeddings", lambda b, m: _openai_embed(b, m, figure, report_usage)
    )


def cohere_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Cohere ``POST /v2/embed``: reports ``tokens`` as ``meta.billed_units.input_tokens`` (by
    default counted from the texts), or no billed units when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _built_in("cohere", "/v2/embed", lambda b, m: _cohere_embed(b, m, figure, report_usage))


def cohere_rerank(*, search_units: int | None = None, report_usage: bool = True) -> Route:
    """Cohere ``POST /v2/rerank``: reports ``search_units`` as billed (by default one per 100
    documents), or no billed units when ``report_usage`` is False."""
    figure = _figure("search_units", search_units)
    return _built_in(
        "cohere", "/v2/rerank", lambda b, m: _cohere_rerank(b, m, figure, report_usage)
    )


def cohere_v1_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Cohere's older ``POST /v1/embed`` (``cohere.Client``): the float vectors as
    ``embeddings`` itself unless ``embedding_types`` was sent; figures as ``cohere_embeddings``.
    """
    figure = _figure("tokens", tokens)
    return _built_in(
        "cohere", "/v1/embed", lambda b, m: _cohere_embed(b, m, figure, report_usage, "1")
    )


def cohere_v1_rerank(*, search_units: int | None = None, report_usage: bool = True) -> Route:
    """Cohere's older ``POST /v1/rerank`` (``cohere.Client``): echoes each document as
    ``{"text": ...}`` when ``return_documents`` is set; figures as ``cohere_rerank``."""
    figure = _figure("search_units", search_units)
    return _built_in(
        "cohere", "/v1/rerank", lambda b, m: _cohere_rerank(b, m, figure, report_usage, "1")
    )


def jina_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Jina ``POST /v1/embeddings``: reports ``tokens`` as ``usage.total_tokens`` (by default
    counted from the texts), or no usage when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _built_in(
        "jina", "/v1/embeddings", lambda b, m: _jina_like_embed(b, m, figure, report_usage)
    )


def jina_rerank(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Jina ``POST /v1/rerank``: reports ``tokens`` as ``usage.total_tokens`` (by default the
    query counted once per document plus the documents), or none when ``report_usage`` is False.
    """
    figure = _figure("tokens", tokens)
    return _built_in("jina", "/v1/rerank", lambda b, m: _jina_rerank(b, m, figure, report_usage))


def voyage_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Voyage ``POST /v1/embeddings``: reports ``tokens`` as ``usage.total_tokens`` (by default
    counted from the texts), or no usage when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.VOYAGE, "/v1/embeddings", lambda b, m: _jina_like_embed(b, m, figure, report_usage)
    )


def voyage_rerank(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Voyage ``POST /v1/rerank``: reports ``tokens`` as ``usage.total_tokens`` (counted as for
    Jina by default), or no usage when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.VOYAGE, "/v1/rerank", lambda b, m: _voyage_rerank(b, m, figure, report_usage)
    )


def tei_embeddings(*, max_batch: int = TEI_MAX_BATCH) -> Route:
    """TEI ``POST /embed``: a bare array of vectors and no usage (TEI reports none); more than
    ``max_batch`` inputs get TEI's 413."""
    limit = _batch(max_batch)
    return _built_in("tei", "/embed", lambda b, m: _tei_embed(b, m, limit))


def tei_rerank(*, max_batch: int = TEI_MAX_BATCH) -> Route:
    """TEI ``POST /rerank``: a bare array of scored indices and no usage; more than
    ``max_batch`` texts get TEI's 413."""
    limit = _batch(max_batch)
    return _built_in("tei", "/rerank", lambda b, m: _tei_rerank(b, m, limit))


def _batch(max_batch: int) -> int:
    if isinstance(max_batch, bool) or max_batch < 1:
        raise ValueError(f"max_batch must be a whole number >= 1, not {max_batch!r}")
    return max_batch


_DEFAULT_ROUTES: tuple[Callable[[], Route], ...] = (
    openai_embeddings,
    cohere_embeddings,
    cohere_rerank,
    cohere_v1_embeddings,
    cohere_v1_rerank,
    jina_embeddings,
    jina_rerank,
    tei_embeddings,
    tei_rerank,
    voyage_embeddings,
    voyage_rerank,
)


@dataclass
class _Mounted:
    route: Route
    remaining: int | None


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
        prefix, path = (parts[0], "/" + parts[1]) if len(parts) == 2 else ("", self.path)
        vendor, _, behaviour = prefix.partition("~")
        request = RecordedRequest(vendor, path, dict(self.headers.items()), body)
        self.server.record(request)
        reply = self.server.answer(request, behaviour)
        closing = self.server.closing
        if reply.drop or closing.is_set() or (reply.delay and closing.wait(reply.delay)):
            self._drop()
            return
        data = json.dumps(reply.body).encode("utf-8") if reply.raw is None else reply.raw
        self.send_response(reply.status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _drop(self) -> None:
        """Reset the connection (RST, not FIN), as a crashed upstream would."""
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        self.connection.close()

    def finish(self) -> None:
        with contextlib.suppress(OSError):
            super().finish()


class _Server(ThreadingHTTPServer):
    """One thread per connection, each tracked so that ``StandIn.stop`` can end them all."""

    daemon_threads = True
    block_on_close = False  # ``end_connections`` joins, with a deadline
    allow_reuse_address = True
    request_queue_size = 128  # concurrent async tests open many connections at once

    def __init__(self, address: tuple[str, int]) -> None:
        super().__init__(address, _Handler)
        self.closing = threading.Event()
        self._lock = threading.Lock()
        self._requests: list[RecordedRequest] = []
        self._routes: dict[tuple[str, str], list[_Mounted]] = {}
        self._connections: dict[socket.socket, threading.Thread] = {}
        self.reset()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A dropped connection is part of the act; nothing to print (nor to leak)."""

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name="spanledger-standin-connection",
            daemon=True,
        )
        with self._lock:
            self._connections[request] = thread
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._lock:
                self._connections.pop(request, None)

    def end_connections(self, deadline: float) -> None:
        """Close every open connection (a kept-alive one gets no more answers) and wait, until
        ``deadline`` at most, for the threads serving them to finish."""
        with self._lock:
            open_now = list(self._connections.items())
        for connection, _ in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for _, thread in open_now:
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def reset(self) -> None:
        with self._lock:
            self._requests.clear()
            self._routes = {
                (route.vendor, route.path): [_Mounted(route, None)]
                for route in (build() for build in _DEFAULT_ROUTES)
            }

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    def mount(self, route: Route, times: int | None) -> None:
        with self._lock:
            key = (route.vendor, route.path)
            if times is None:
                self._routes[key] = [_Mounted(route, None)]
            else:
                self._routes.setdefault(key, []).append(_Mounted(route, times))

    def _take(self, vendor: str, path: str) -> Route | None:
        """The route answering this call, using up one of a limited route's answers."""
        with self._lock:
            stack = self._routes.get((vendor, path))
            if not stack:
                return None
            top = stack[-1]
            if top.remaining is not None:
                top.remaining -= 1
                if top.remaining == 0:
                    stack.pop()
            return top.route

    def answer(self, request: RecordedRequest, behaviour: str) -> Reply:
        vendor = request.vendor
        try:
            body = request.json()
        except ValueError:
            return Reply(400, _error_body(vendor, 400))
        if not isinstance(body, dict):
            return Reply(422, _error_body(vendor, 422))
        name = behaviour or _model_of(vendor, body)
        failure = _failure_by_name(vendor, name)
        if failure is not None:
            return failure
        delay = _delay_by_name(name)
        route = self._take(vendor, request.path)
        if route is None:
            return _later(Reply(404, _error_body(vendor, 404)), delay)
        try:
            reply = route.respond(request)
        except Exception as error:  # a test's own route broke: say so, without its message
            broken = {**_error_body(vendor, 500), "standin_route_error": type(error).__name__}
            return Reply(500, broken)
        return _later(reply, delay)


class StandIn:
    """The stand-in server: binds 127.0.0.1 on a free port and serves from a background
    thread. Use it as a context manager; on exit it stops within a bounded time, dropping any
    answer still in flight. A stopped server cannot start again: make a new one."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = _Server((host, port))
        self._thread: threading.Thread | None = None
        self._stopped = False

    @property
    def url(self) -> str:
        """The server's origin, ``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def base_url(self, vendor: str, behaviour: str | None = None) -> str:
        """The origin to give a provider for ``vendor`` (one of ``VENDORS``).

        ``behaviour`` scripts every call to this origin as a model name would (``fail-429``,
        ``slow-500``, ...); TEI needs it, since its wire carries no model.
        """
        if vendor not in VENDORS:
            raise ValueError(f"unknown vendor {vendor!r}; expected one of {VENDORS}")
        return f"{self.url}/{vendor}~{behaviour}" if behaviour else f"{self.url}/{vendor}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of every request received so far, in arrival order (safe across threads)."""
        return self._server.requests()

    def route(self, route: Route, *, times: int | None = None) -> Self:
        """Mount ``route`` at its endpoint. With ``times``, it answers that many calls and then
        whatever answered before comes back (a 429 once, then success); without, it replaces
        the endpoint's answer for good."""
        if times is not None and (isinstance(times, bool) or times < 1):
            raise ValueError(f"times must be a whole number >= 1, not {times!r}")
        self._server.mount(route, times)
        return self

    def reset(self) -> None:
        """Forget mounted routes and recorded requests, as a fresh server would (for a server
        shared by several tests)."""
        self._server.reset()

    def start(self) -> Self:
        """Start serving in a daemon thread (``with StandIn() as server`` does this)."""
        if self._stopped:
            raise RuntimeError("this StandIn was stopped; make a new one")
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="spanledger-standin",
                daemon=True,
            )
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and free the port, waiting at most about ``timeout`` seconds: answers
        still waiting out a delay are dropped and open connections are closed."""
        deadline = time.monotonic() + timeout
        self._stopped = True
        self._server.closing.set()
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=max(0.0, deadline - time.monotonic()))
            self._thread = None
        self._server.end_connections(deadline)
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


def _as_list(value: object) -> list[Any]:
    """The inputs a body carries: one string is one input, as the vendors read it."""
    if isinstance(value, str):
        return [value]
    return list(value) if isinstance(value, list) else []
