"""A loopback server that speaks the vendors' embedding and rerank wire formats, for tests.

``StandIn`` answers the OpenAI, Cohere, Jina, Hugging Face TEI and Voyage endpoints, and those
of AWS Bedrock, the Gemini API, Vertex AI, Azure OpenAI, Mistral and Ollama, on 127.0.0.1, so
code that calls them (through ``spanledger.providers``, a vendor SDK or plain HTTP) runs in a
test with no network and no keys, and the events spanledger recorded can be asserted on. It is
not a model: vectors come from a hash of each text (``standin_vector``) and rerank scores from
word overlap, so every answer is deterministic; each answer has the keys, figure placement and
headers the real service was recorded sending.

Each vendor lives under its own path prefix; ``server.base_url(vendor)`` is the origin to give
a provider (SDKs take the same origin plus their version path, e.g. ``/v1`` for OpenAI and
Voyage; boto3 takes it as ``endpoint_url``, ``openai.AzureOpenAI`` as ``azure_endpoint``).
Vendors are the names in ``VENDORS``; vectors have ``DEFAULT_DIMENSIONS`` values unless the
request asks for others. Every endpoint reports usage by default (a token per four UTF-8 bytes,
a Cohere search unit per 100 documents), where the vendor reports any: TEI, Bedrock's rerank
routes, Vertex's ranking API and Ollama's legacy ``/api/embeddings`` report none, as the real
ones. To script an answer, mount a route built by a vendor function (``openai_embeddings``,
``cohere_rerank``, ``bedrock_titan_embeddings``, ...) and shaped by its methods (``failing``,
``malformed``, ``slow``, ``dropped``)::

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

A route's path may be a template: ``{name}`` matches one path segment (or part of one, as in
``/v1beta/models/{model}:embedContent``), ``{name+}`` one or more segments; paths are matched
as sent (percent-encoded), and failing that, decoded. What the placeholders matched, decoded,
is the request's ``params``. Several routes may share a path when each ``selects`` the requests
it answers by a body key: Bedrock's ``/model/{model+}/invoke`` is Titan's for ``inputText``,
Cohere embed's for ``texts``, Nova's for ``singleEmbeddingParams`` and Cohere rerank's for
``query``; a body none of them reads is answered 400, as Bedrock does. Where several mounted
routes would answer, the one mounted last does.

The call's model is what the URL names where it names one (Bedrock, Gemini, Vertex, an Azure
deployment), else the body's. Azure answers with the model behind the deployment: a
deployment (or ``/openai/v1`` body ``model``) named after an OpenAI embedding model
(``text-embedding-3-large``) answers that model, except ``text-embedding-ada-002``, which Azure
names ``ada``; any other name answers ``text-embedding-3-small`` (``response_model=`` on the
route sets it). Bedrock model ids are read as the base model they name (``us.`` profiles and
foundation-model ARNs; ``cohere.embed-v4`` answers by type, a Titan ``-v1`` model without
``embeddingsByType``).

Failures can also be asked for by configuration alone, through the model name (or
``base_url(vendor, behaviour)``, which TEI needs since its wire carries no model):
``fail-<status>`` answers with that status and the vendor's error body and headers
(``fail-429`` adds ``Retry-After: 2``), ``slow-<ms>`` answers that many milliseconds late,
``reset`` drops the connection, ``usage-malformed`` reports a garbage usage figure (``"abc"``,
in a header where the vendor reports one there) and ``usage-missing`` none; on Bedrock,
``not-ready`` answers 429 ``ModelNotReadyException``. These names win over a mounted route.

The server keeps every request it received (``server.requests``) for assertions, in memory
only: it writes nothing to any log, and a ``RecordedRequest``'s ``repr`` leaves out its
headers, query string and body, which carry keys and caller text.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import json
import math
import re
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self
from urllib.parse import unquote

from spanledger.wire.endpoints import IN_PROCESS_VENDORS, Vendor, bedrock_model

__all__ = [
    "DEFAULT_DIMENSIONS",
    "VENDORS",
    "RecordedRequest",
    "Reply",
    "Route",
    "StandIn",
    "azure_embeddings",
    "azure_v1_embeddings",
    "bedrock_cohere_embeddings",
    "bedrock_cohere_rerank",
    "bedrock_nova_embeddings",
    "bedrock_rerank",
    "bedrock_titan_embeddings",
    "cohere_embeddings",
    "cohere_rerank",
    "cohere_v1_embeddings",
    "cohere_v1_rerank",
    "gemini_embed_content",
    "gemini_embeddings",
    "jina_embeddings",
    "jina_rerank",
    "mistral_embeddings",
    "ollama_embed",
    "ollama_embeddings",
    "ollama_openai_embeddings",
    "openai_embeddings",
    "standin_vector",
    "tei_embeddings",
    "tei_rerank",
    "vertex_embed_content",
    "vertex_embeddings",
    "vertex_rank",
    "voyage_embeddings",
    "voyage_rerank",
]

VENDORS = tuple(vendor.value for vendor in Vendor if vendor not in IN_PROCESS_VENDORS)
"""The vendor names ``StandIn.base_url`` and ``Route`` accept (``spanledger.Vendor`` values,
less the in-process libraries, which have no wire; a ``Vendor`` member is accepted too)."""

DEFAULT_DIMENSIONS = 16
"""How many values a stand-in vector has when the request names no dimensions."""

TEI_MAX_BATCH = 32
"""How many inputs a TEI route takes in one request before answering 413, as TEI does."""

_WORD = re.compile(r"\w+")
_Answer = tuple[int, Any, dict[str, str]]
"""A built-in endpoint's answer: status, JSON payload, extra headers."""

_BEDROCK_INVOKE = "/model/{model+}/invoke"
_GEMINI_MODEL = "/{version}/models/{model}"
_VERTEX_LOCATION = "/{version}/projects/{project}/locations/{location}"
_VERTEX_MODEL = _VERTEX_LOCATION + "/publishers/google/models/{model}"


@dataclass(frozen=True)
class RecordedRequest:
    """One request as the stand-in received it: the vendor prefix, the path under it (as sent,
    without the query string), headers, raw body, the query string, and ``params``: what the
    placeholders of the answering route's path matched (``{"model": ...}``), decoded. ``repr``
    shows only vendor, path and params, so a failing assertion never prints a key or the
    caller's text."""

    vendor: str
    path: str
    headers: dict[str, str] = field(repr=False)
    body: bytes = field(repr=False)
    query: str = field(default="", repr=False)
    params: Mapping[str, str] = field(default_factory=dict)

    def json(self) -> Any:
        """The body parsed as JSON (raises ``ValueError`` if it is not JSON)."""
        return json.loads(self.body)


@dataclass(frozen=True)
class Reply:
    """One answer the stand-in sends: a status with a JSON ``body``, or with ``raw`` bytes sent
    as they are (to test a client against a broken body); ``delay`` seconds late; or, with
    ``drop``, no answer at all (the connection is reset). ``headers`` may set ``content-type``
    (``application/json`` otherwise)."""

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
    """What one endpoint answers: ``vendor`` and ``path`` (under the vendor's prefix; a
    template may hold ``{name}`` / ``{name+}`` placeholders) say where it is mounted,
    ``respond`` turns each request into a ``Reply``, and ``selects``, when given, names the
    top-level body keys of the requests it answers (one present is enough), so that routes
    can share a path.

    The vendor functions (``openai_embeddings`` ...) build the real endpoints; the methods below
    derive a failing variant of any route, and they compose (``route.failing(503).slow(1)``).
    A ``respond`` that raises gets a 500 whose body names the exception's type, never its
    message (which may quote the request).
    """

    vendor: str
    path: str
    respond: Callable[[RecordedRequest], Reply] = field(repr=False)
    selects: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.vendor not in VENDORS:
            raise ValueError(f"unknown vendor {self.vendor!r}; expected one of {VENDORS}")
        if not self.path.startswith("/"):
            raise ValueError(f"path must start with '/', not {self.path!r}")
        _template(self.path)  # a broken template is refused here, not on the first request
        if isinstance(self.selects, str) or not all(isinstance(k, str) for k in self.selects):
            raise ValueError(f"selects must be a tuple of body keys, not {self.selects!r}")

    def _with(self, respond: Callable[[RecordedRequest], Reply]) -> Route:
        return Route(self.vendor, self.path, respond, self.selects)

    def failing(self, status: int, *, retry_after: int | str | None = None) -> Route:
        """This endpoint answering ``status`` with the vendor's own error body and headers
        (Bedrock's ``x-amzn-ErrorType``), and a ``Retry-After`` header when ``retry_after`` is
        given (seconds, or an HTTP date)."""
        if not 400 <= status <= 599:
            raise ValueError(f"a failing status is within 400..599, not {status}")
        extra = {} if retry_after is None else {"retry-after": _retry_after(retry_after)}
        vendor, path = self.vendor, self.path

        def respond(request: RecordedRequest) -> Reply:
            return _error(vendor, path, status, _request_model(request), extra)

        return self._with(respond)

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


_PLACEHOLDER = re.compile(r"\{([A-Za-z_]\w*)(\+?)\}")


@functools.lru_cache(maxsize=256)
def _template(path: str) -> re.Pattern[str] | None:
    """``path`` as a pattern on a whole request path, or ``None`` for a plain path."""
    if "{" not in path and "}" not in path:
        return None
    parts: list[str] = []
    last = 0
    for found in _PLACEHOLDER.finditer(path):
        parts.append(re.escape(path[last : found.start()]))
        parts.append(f"(?P<{found[1]}>{'.+' if found[2] else '[^/]+'})")
        last = found.end()
    parts.append(re.escape(path[last:]))
    literal = _PLACEHOLDER.sub("", path)
    if "{" in literal or "}" in literal:
        raise ValueError(f"path {path!r} has a brace outside a {{name}} placeholder")
    try:
        return re.compile("".join(parts))
    except re.error:
        raise ValueError(f"path {path!r} names a placeholder twice") from None


def _match(template: str, path: str) -> dict[str, str] | None:
    """What ``path`` gives ``template``'s placeholders (decoded), or ``None`` if it is not
    ``template``'s: matched as sent first, then decoded."""
    pattern = _template(template)
    if pattern is None:
        return {} if template in (path, unquote(path)) else None
    found = pattern.fullmatch(path)
    if found:
        return {name: unquote(value) for name, value in found.groupdict().items()}
    decoded = unquote(path)
    found = pattern.fullmatch(decoded) if decoded != path else None
    return dict(found.groupdict()) if found else None


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


def _answer_id(seed: object) -> str:
    """A response id (UUID-shaped, as Bedrock's and Azure's are) that depends only on ``seed``."""
    digest = hashlib.sha256(json.dumps(seed, sort_keys=True, default=str).encode()).digest()
    return str(uuid.UUID(bytes=digest[:16]))


# Errors: each vendor's own body (and headers), with a message that never quotes the request.

_BEDROCK_CODES = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}
_BEDROCK_NAMESPACE = "http://internal.amazon.com/coral/com.amazon.bedrock/"
_GOOGLE_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
_GOOGLE_JSON = {"content-type": "application/json; charset=UTF-8"}


def _bedrock_error_code(status: int) -> str:
    fallback = "ValidationException" if status < 500 else "InternalServerException"
    return _BEDROCK_CODES.get(status, fallback)


def _error(
    vendor: str,
    path: str,
    status: int,
    model: str = "",
    extra: Mapping[str, str] | None = None,
    code: str | None = None,
) -> Reply:
    """``vendor``'s error answer to a call of ``model`` on ``path``; ``extra`` headers added."""
    message = f"stand-in error {status}"
    headers: dict[str, str] = {}
    body: Any
    if vendor == Vendor.OPENAI:
        body = {"error": {"message": message, "type": "invalid_request_error", "code": None}}
    elif vendor == Vendor.TEI:
        body = {"error": message, "error_type": "Validation"}
    elif vendor == Vendor.COHERE:
        body = {"id": "standin-error", "message": message}
    elif vendor == Vendor.BEDROCK:
        named = code or _bedrock_error_code(status)
        body = {"message": message}
        headers = {
            "x-amzn-ErrorType": f"{named}:{_BEDROCK_NAMESPACE}",
            "x-amzn-RequestId": _answer_id([path, status]),
        }
    elif vendor in (Vendor.GEMINI, Vendor.VERTEX):
        name = _GOOGLE_STATUSES.get(status, "UNKNOWN")
        body = {"error": {"code": status, "message": message, "status": name}}
        headers = dict(_GOOGLE_JSON)
    elif vendor == Vendor.AZURE:
        azure_code = "DeploymentNotFound" if status == 404 else str(status)
        body = {"error": {"code": azure_code, "message": message}}
    elif vendor == Vendor.MISTRAL and status == 422:
        missing = {"type": "missing", "loc": ["body", "input"], "msg": "Field required"}
        body = {"detail": [{**missing, "input": None}]}
    elif vendor == Vendor.OLLAMA:
        if status == 404 and model:
            message = f'model "{model}" not found, try pulling it first'
        if path.startswith("/api/"):  # the native routes: the message alone
            body = {"error": message}
        else:  # the OpenAI-compatible route: OpenAI's error object
            body = {"error": {"message": message, "type": "api_error", "param": None, "code": None}}
    else:  # Jina, Voyage, Mistral
        body = {"detail": message}
    return Reply(status, body, {**headers, **(extra or {})})


def _failure_by_name(vendor: str, path: str, name: str, model: str) -> Reply | None:
    """The failure a model name (or a ``base_url`` behaviour) asks for instead of an answer."""
    if name == "reset":
        return Reply(drop=True)
    if name == "not-ready" and vendor == Vendor.BEDROCK:
        return _error(vendor, path, 429, model, code="ModelNotReadyException")
    fail = re.fullmatch(r"fail-(\d{3})", name)
    if fail and 400 <= (status := int(fail.group(1))) <= 599:
        return _error(vendor, path, status, model, {"retry-after": "2"} if status == 429 else {})
    return None


def _delay_by_name(name: str) -> float:
    """Seconds a ``slow-<ms>`` name asks the answer to wait."""
    slow = re.fullmatch(r"slow-(\d+)", name)
    return int(slow.group(1)) / 1000 if slow else 0.0


def _dig(node: object, *steps: str | int) -> object:
    """``node`` followed along object keys and list indexes; ``None`` where the path breaks."""
    for step in steps:
        if isinstance(step, int) and isinstance(node, list):
            node = node[step] if -len(node) <= step < len(node) else None
        elif isinstance(step, str) and isinstance(node, dict):
            node = node.get(step)
        else:
            return None
    return node


def _model_of(vendor: str, body: object, params: Mapping[str, str]) -> str:
    """The call's model: the one the URL names, else the body's (Bedrock ids as the base model
    they name)."""
    named: object = params.get("model", params.get("deployment"))
    if named is None and vendor == Vendor.BEDROCK:
        configuration = ("rerankingConfiguration", "bedrockRerankingConfiguration")
        named = _dig(body, *configuration, "modelConfiguration", "modelArn")
    if named is None:
        named = _dig(body, "model")
    if named is None:
        return "tei-model" if vendor == Vendor.TEI else ""
    return bedrock_model(str(named)) if vendor == Vendor.BEDROCK else str(named)


def _request_model(request: RecordedRequest) -> str:
    try:
        body = request.json()
    except ValueError:
        body = None
    return _model_of(request.vendor, body, request.params)


# The built-in endpoints. Each answers (parsed body, model) with (status, payload, headers);
# ``figure`` replaces the usage figure the text would give and ``report`` False leaves usage out.


def _usage_value(model: str, figure: int) -> object:
    return "abc" if model == "usage-malformed" else figure


def _reports(model: str, report: bool) -> bool:
    return report and model != "usage-missing"


def _data_embeddings(
    body: dict[str, Any], texts: list[str], dimensions: int, base64_ok: bool = True
) -> list[dict[str, Any]]:
    base64_format = base64_ok and body.get("encoding_format") == "base64"
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
        return 413, _error(Vendor.TEI, "/embed", 413).body, {}
    dims = int(body.get("dimensions") or DEFAULT_DIMENSIONS)
    return 200, [standin_vector(t, dims) for t in texts], {}


def _tei_rerank(body: dict[str, Any], model: str, max_batch: int = TEI_MAX_BATCH) -> _Answer:
    query, texts = str(body.get("query", "")), list(body.get("texts") or [])
    if len(texts) > max_batch:
        return 413, _error(Vendor.TEI, "/embed", 413).body, {}
    results = []
    for index, text in enumerate(texts):
        result: dict[str, Any] = {"index": index, "score": _score(query, text)}
        if body.get("return_text"):
            result["text"] = text
        results.append(result)
    results.sort(key=lambda r: -r["score"])
    return 200, results, {}


# Bedrock. The runtime's ``InvokeModel`` answers by the body: Titan, Cohere embed, Nova, Cohere
# rerank. None of them names the model; token figures travel in a header (and Titan's body).


def _bedrock_headers(tokens: object = None) -> dict[str, str]:
    """Bedrock's success headers: latency in milliseconds, and the token figure when given."""
    headers = {"X-Amzn-Bedrock-Invocation-Latency": "12"}
    if tokens is not None:
        headers["X-Amzn-Bedrock-Input-Token-Count"] = str(tokens)
    return headers


def _with_request_id(headers: dict[str, str], seed: object) -> dict[str, str]:
    return {**headers, "x-amzn-RequestId": _answer_id(seed)}


_TITAN_V1 = re.compile(r"titan-embed-(?:text|image)-v1|titan-embed-g1")


def _bedrock_titan(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    text = str(body.get("inputText") or "")
    vector = standin_vector(text, int(body.get("dimensions") or DEFAULT_DIMENSIONS))
    payload: dict[str, Any] = {"embedding": vector}
    if not _TITAN_V1.search(model):  # v2 also sends the vector by type, asked for or not
        payload["embeddingsByType"] = {"float": vector}
    tokens: object = None
    if _reports(model, report):
        tokens = _usage_value(model, _tokens(text) if figure is None else figure)
        payload["inputTextTokenCount"] = tokens
    return 200, payload, _with_request_id(_bedrock_headers(tokens), text)


def _bedrock_cohere_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    texts = [str(t) for t in body.get("texts") or []]
    dims = int(body.get("output_dimension") or DEFAULT_DIMENSIONS)
    vectors = [standin_vector(t, dims) for t in texts]
    by_type = bool(body.get("embedding_types")) or "embed-v4" in model
    payload = {
        "embeddings": {"float": vectors} if by_type else vectors,
        "id": _answer_id(texts),
        "response_type": "embeddings_by_type" if by_type else "embeddings_floats",
        "texts": [t.lower() for t in texts] if "-v3" in model else texts,  # v3 echoes lowercased
    }
    tokens: object = None
    if _reports(model, report):
        tokens = _usage_value(model, sum(map(_tokens, texts)) if figure is None else figure)
    return 200, payload, _with_request_id(_bedrock_headers(tokens), texts)


def _bedrock_nova(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    params = body.get("singleEmbeddingParams")
    text = str(_dig(params, "text", "value") or "")
    dims = _dimensions(_dig(params, "embeddingDimension"))
    payload = {"embeddings": [{"embedding": standin_vector(text, dims), "embeddingType": "TEXT"}]}
    tokens: object = None
    if _reports(model, report):
        tokens = _usage_value(model, _tokens(text) if figure is None else figure)
    return 200, payload, _with_request_id(_bedrock_headers(tokens), text)


def _ranked(
    query: str, documents: list[str], index_key: str, score_key: str, limit: object
) -> list[dict[str, Any]]:
    """Results by score, best first, each naming its document's position; ``limit`` cuts."""
    ranked = sorted(
        ({index_key: i, score_key: _score(query, d)} for i, d in enumerate(documents)),
        key=lambda r: -r[score_key],
    )
    return ranked[:limit] if isinstance(limit, int) and not isinstance(limit, bool) else ranked


def _bedrock_cohere_rerank(body: dict[str, Any], model: str, units: int | None = None) -> _Answer:
    query = str(body.get("query") or "")
    documents = [_document_text(d) for d in body.get("documents") or []]
    payload: dict[str, Any] = {
        "id": _answer_id([query, documents]),
        "results": _ranked(query, documents, "index", "relevance_score", body.get("top_n")),
    }
    if units is not None and model != "usage-missing":  # never seen from Bedrock: opt-in
        payload["meta"] = {"billed_units": {"search_units": _usage_value(model, units)}}
    return 200, payload, _with_request_id(_bedrock_headers(), query)


def _bedrock_agent_rerank(body: dict[str, Any], model: str) -> _Answer:
    query = str(_dig(body, "queries", 0, "textQuery", "text") or "")
    sources = body.get("sources") or []
    documents = [
        str(_dig(s, "inlineDocumentSource", "textDocument", "text") or "") for s in sources
    ]
    configuration = ("rerankingConfiguration", "bedrockRerankingConfiguration")
    limit = _dig(body, *configuration, "numberOfResults")
    payload = {"results": _ranked(query, documents, "index", "relevanceScore", limit)}
    return 200, payload, {"x-amzn-RequestId": _answer_id([query, documents])}


# Google. The Gemini API and Vertex AI share ``embedContent``; ``usageMetadata`` spells its
# details ``promptTokenDetails`` on the Gemini API, ``promptTokensDetails`` (with a total) on
# Vertex. Vertex ``:predict`` counts tokens per prediction.


def _parts_text(content: object) -> str:
    """The text of a Google ``content``: its text parts, joined (one vector for them all)."""
    parts = _dig(content, "parts")
    if not isinstance(parts, list):
        return ""
    return " ".join(str(p["text"]) for p in parts if isinstance(p, dict) and "text" in p)


def _dimensions(value: object) -> int:
    return value if isinstance(value, int) and value > 0 else DEFAULT_DIMENSIONS


def _google_usage(model: str, tokens: int, vertex: bool) -> dict[str, Any]:
    details = [{"modality": "TEXT", "tokenCount": tokens}]
    usage: dict[str, Any] = {"promptTokenCount": _usage_value(model, tokens)}
    if vertex:
        usage |= {"promptTokensDetails": details, "totalTokenCount": tokens}
    else:
        usage["promptTokenDetails"] = details
    return {"usageMetadata": usage}


def _gemini_batch(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    requests = [r for r in body.get("requests") or [] if isinstance(r, dict)]
    texts = [_parts_text(r.get("content")) for r in requests]
    embeddings = [
        {"values": standin_vector(t, _dimensions(r.get("outputDimensionality")))}
        for t, r in zip(texts, requests, strict=True)
    ]
    payload: dict[str, Any] = {"embeddings": embeddings}
    if _reports(model, report):  # one figure for the whole batch
        tokens = sum(map(_tokens, texts)) if figure is None else figure
        payload |= _google_usage(model, tokens, vertex=False)
    return 200, payload, dict(_GOOGLE_JSON)


def _embed_content(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    vertex: bool = False,
) -> _Answer:
    text = _parts_text(body.get("content"))
    vector = standin_vector(text, _dimensions(body.get("outputDimensionality")))
    payload: dict[str, Any] = {"embedding": {"values": vector}}
    if _reports(model, report):
        payload |= _google_usage(model, _tokens(text) if figure is None else figure, vertex)
    return 200, payload, dict(_GOOGLE_JSON)


def _spread(total: int, count: int) -> list[int]:
    """``total`` split over ``count`` items as evenly as whole numbers allow (sums to it)."""
    each, extra = divmod(total, count) if count else (0, 0)
    return [each + (1 if i < extra else 0) for i in range(count)]


def _vertex_predict(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    instances = body.get("instances") or []
    texts = [str(_dig(i, "content") or "") for i in instances]
    dims = _dimensions(_dig(body, "parameters", "outputDimensionality"))
    counts = [_tokens(t) for t in texts] if figure is None else _spread(figure, len(texts))
    reported = _reports(model, report)
    predictions = []
    for n, (text, count) in enumerate(zip(texts, counts, strict=True)):
        embeddings: dict[str, Any] = {}
        if reported:  # usage-malformed: the first prediction's count is garbage
            token_count = _usage_value(model, count) if n == 0 else count
            embeddings["statistics"] = {"token_count": token_count, "truncated": False}
        embeddings["values"] = standin_vector(text, dims)
        predictions.append({"embeddings": embeddings})
    payload: dict[str, Any] = {"predictions": predictions}
    if reported:
        characters = sum(len("".join(t.split())) for t in texts)
        payload["metadata"] = {"billableCharacterCount": characters}
    return 200, payload, dict(_GOOGLE_JSON)


def _vertex_rank(body: dict[str, Any], model: str) -> _Answer:
    query = str(body.get("query") or "")
    records = [r for r in body.get("records") or [] if isinstance(r, dict)]
    bare = bool(body.get("ignoreRecordDetailsInResponse"))
    answered = []
    for record in records:
        text = f"{record.get('title') or ''} {record.get('content') or ''}".strip()
        result: dict[str, Any] = {"id": str(record.get("id", "")), "score": _score(query, text)}
        if not bare:
            result |= {key: record[key] for key in ("title", "content") if key in record}
        answered.append(result)
    answered.sort(key=lambda r: -r["score"])
    limit = body.get("topN")
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        answered = answered[:limit]
    return 200, {"records": answered}, dict(_GOOGLE_JSON)


# Azure OpenAI, Mistral and Ollama's compatible route: OpenAI's shape, each with its own usage.

_AZURE_DEFAULT_MODEL = "text-embedding-3-small"


def _azure_model(name: str) -> str:
    """The model an Azure deployment named ``name`` answers with: itself when it is named after
    an OpenAI embedding model (ada-002 as Azure names it, ``ada``), else text-embedding-3-small.
    """
    if name == "text-embedding-ada-002":
        return "ada"
    return name if name.startswith("text-embedding-") else _AZURE_DEFAULT_MODEL


def _openai_shaped(
    body: dict[str, Any],
    model: str,
    answered_model: str,
    figure: int | None,
    report: bool,
    *,
    dimensions_key: str = "dimensions",
    base64_ok: bool = True,
) -> tuple[dict[str, Any], int | None]:
    """OpenAI's body naming ``answered_model``, with ``usage`` when reported; and the figure."""
    texts = _as_list(body.get("input"))
    dims = _dimensions(body.get(dimensions_key))
    payload: dict[str, Any] = {
        "object": "list",
        "data": _data_embeddings(body, [str(t) for t in texts], dims, base64_ok),
        "model": answered_model,
    }
    if not _reports(model, report):
        return payload, None
    tokens = sum(_tokens(str(t)) for t in texts) if figure is None else figure
    payload["usage"] = {"prompt_tokens": _usage_value(model, tokens), "total_tokens": tokens}
    return payload, tokens


def _azure_embed(
    body: dict[str, Any],
    model: str,
    figure: int | None = None,
    report: bool = True,
    response_model: str | None = None,
    v1: bool = False,
) -> _Answer:
    answered = response_model or _azure_model(model)
    payload, _ = _openai_shaped(body, model, answered, figure, report)
    if v1:  # the /openai/v1 route adds an id and a zero completion count
        payload = {"id": _answer_id(body.get("input")), **payload}
        if "usage" in payload:
            payload["usage"]["completion_tokens"] = 0
    return 200, payload, {"apim-request-id": _answer_id([model, body.get("input")])}


_MISTRAL_NULL_USAGE = (
    "prompt_audio_seconds",
    "request_count",
    "prompt_token_details",
    "prompt_tokens_details",
    "completion_tokens_details",
    "service_tier",
)


def _mistral_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    payload, tokens = _openai_shaped(
        body, model, model, figure, report, dimensions_key="output_dimension"
    )
    payload = {"id": _answer_id(body.get("input")).replace("-", ""), **payload}
    if tokens is None:
        return 200, payload, {}
    payload["usage"] |= {"completion_tokens": 0, **dict.fromkeys(_MISTRAL_NULL_USAGE)}
    return 200, payload, {"x-ratelimit-tokens-query-cost": str(tokens)}


def _ollama_openai_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    payload, _ = _openai_shaped(body, model, model, figure, report, base64_ok=False)
    return 200, payload, {"content-type": "application/json"}


# Ollama's native routes: durations in nanoseconds, tokens as ``prompt_eval_count``.

_OLLAMA_JSON = {"content-type": "application/json; charset=utf-8"}


def _ollama_embed(
    body: dict[str, Any], model: str, figure: int | None = None, report: bool = True
) -> _Answer:
    texts = [str(t) for t in _as_list(body.get("input"))]
    dims = _dimensions(body.get("dimensions"))
    load = 2_000_000
    payload: dict[str, Any] = {
        "model": model,
        "embeddings": [standin_vector(t, dims) for t in texts],
        "total_duration": load + 500_000 * (len(texts) + 1),
        "load_duration": load,  # never 0, even warm
    }
    if _reports(model, report):
        tokens = sum(map(_tokens, texts)) if figure is None else figure
        payload["prompt_eval_count"] = _usage_value(model, tokens)
    return 200, payload, dict(_OLLAMA_JSON)


def _ollama_legacy_embed(body: dict[str, Any], model: str) -> _Answer:
    vector = standin_vector(str(body.get("prompt") or ""), DEFAULT_DIMENSIONS)
    return 200, {"embedding": vector}, dict(_OLLAMA_JSON)


def _built_in(
    vendor: str,
    path: str,
    answer: Callable[[dict[str, Any], str], _Answer],
    selects: tuple[str, ...] = (),
) -> Route:
    def respond(request: RecordedRequest) -> Reply:
        body = request.json()
        status, payload, headers = answer(body, _model_of(vendor, body, request.params))
        return Reply(status, payload, headers)

    return Route(vendor, path, respond, selects)


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


def bedrock_titan_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Bedrock ``POST /model/{modelId}/invoke`` for a Titan body (``inputText``): ``embedding``
    (and ``embeddingsByType.float`` but for a Titan v1 model), reporting ``tokens`` (by
    default counted from the text) both as ``inputTextTokenCount`` and in the
    ``X-Amzn-Bedrock-Input-Token-Count`` header; neither when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.BEDROCK,
        _BEDROCK_INVOKE,
        lambda b, m: _bedrock_titan(b, m, figure, report_usage),
        ("inputText", "inputImage"),
    )


def bedrock_cohere_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Bedrock ``POST /model/{modelId}/invoke`` for a Cohere Embed body (``texts``): Cohere's v1
    body with no usage in it (float vectors themselves, or by type when ``embedding_types`` is
    sent or the model is Embed v4), ``tokens`` only in the ``X-Amzn-Bedrock-Input-Token-Count``
    header (by default counted from the texts), which ``report_usage=False`` leaves out."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.BEDROCK,
        _BEDROCK_INVOKE,
        lambda b, m: _bedrock_cohere_embed(b, m, figure, report_usage),
        ("texts", "images"),
    )


def bedrock_nova_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Bedrock ``POST /model/{modelId}/invoke`` for an Amazon Nova body
    (``singleEmbeddingParams``): ``embeddings[{embeddingType: "TEXT", embedding}]``, ``tokens``
    only in the ``X-Amzn-Bedrock-Input-Token-Count`` header (left out when ``report_usage`` is
    False)."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.BEDROCK,
        _BEDROCK_INVOKE,
        lambda b, m: _bedrock_nova(b, m, figure, report_usage),
        ("singleEmbeddingParams",),
    )


def bedrock_cohere_rerank(*, search_units: int | None = None) -> Route:
    """Bedrock ``POST /model/{modelId}/invoke`` for a Cohere Rerank body (``query``):
    ``{id, results[{index, relevance_score}]}`` cut at ``top_n``, with no usage, as Bedrock was
    seen answering; ``search_units`` adds ``meta.billed_units.search_units`` (Cohere's own
    shape, never recorded from Bedrock) for a test of a reader that looks there."""
    units = _figure("search_units", search_units)
    return _built_in(
        Vendor.BEDROCK,
        _BEDROCK_INVOKE,
        lambda b, m: _bedrock_cohere_rerank(b, m, units),
        ("query",),
    )


def bedrock_rerank() -> Route:
    """Bedrock Agent Runtime ``POST /rerank`` (``queries``, ``sources``,
    ``rerankingConfiguration``): ``results[{index, relevanceScore}]``, best first, cut at
    ``numberOfResults``; no usage, ever (Bedrock bills it per query)."""
    return _built_in(Vendor.BEDROCK, "/rerank", _bedrock_agent_rerank)


def gemini_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Gemini API ``POST /v1beta/models/{model}:batchEmbedContents`` (any API version):
    ``embeddings[{values}]``, one per request (its text parts joined), sized by each request's
    ``outputDimensionality``; reports ``tokens`` for the whole batch as
    ``usageMetadata.promptTokenCount`` (by default counted from the texts; the real API sends
    it for gemini-embedding-2 only), or no ``usageMetadata`` when ``report_usage`` is False."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.GEMINI,
        _GEMINI_MODEL + ":batchEmbedContents",
        lambda b, m: _gemini_batch(b, m, figure, report_usage),
    )


def gemini_embed_content(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Gemini API ``POST /v1beta/models/{model}:embedContent`` (any API version): one
    ``embedding.values``; figures as ``gemini_embeddings``."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.GEMINI,
        _GEMINI_MODEL + ":embedContent",
        lambda b, m: _embed_content(b, m, figure, report_usage),
    )


def vertex_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Vertex AI ``POST /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:predict``
    (any API version, e.g. ``v1beta1``): ``predictions[{embeddings: {values, statistics:
    {token_count, truncated}}}]`` and ``metadata.billableCharacterCount``; ``tokens`` is spread
    over the predictions' ``token_count`` (by default each counted from its text); with
    ``report_usage`` False there are no ``statistics`` and no ``metadata``."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.VERTEX,
        _VERTEX_MODEL + ":predict",
        lambda b, m: _vertex_predict(b, m, figure, report_usage),
    )


def vertex_embed_content(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Vertex AI ``POST .../publishers/google/models/{m}:embedContent``: Gemini's answer, with
    Vertex's ``usageMetadata`` (``promptTokenCount``, ``promptTokensDetails``,
    ``totalTokenCount``); figures as ``gemini_embeddings``."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.VERTEX,
        _VERTEX_MODEL + ":embedContent",
        lambda b, m: _embed_content(b, m, figure, report_usage, vertex=True),
    )


def vertex_rank() -> Route:
    """Vertex AI ranking ``POST /v1/projects/{p}/locations/{l}/rankingConfigs/{c}:rank``
    (``query``, ``records[{id, title?, content}]``, ``topN``): ``records[{id, score, title?,
    content?}]`` best first, without title and content when ``ignoreRecordDetailsInResponse``;
    no usage, ever."""
    return _built_in(
        Vendor.VERTEX, _VERTEX_LOCATION + "/rankingConfigs/{config}:rank", _vertex_rank
    )


def azure_embeddings(
    *, tokens: int | None = None, report_usage: bool = True, response_model: str | None = None
) -> Route:
    """Azure OpenAI ``POST /openai/deployments/{deployment}/embeddings?api-version=...``:
    OpenAI's body (``usage.prompt_tokens`` / ``total_tokens``; figures as
    ``openai_embeddings``) naming the model behind the deployment: ``response_model``, or by
    default the deployment's own name when it is an OpenAI embedding model's
    (``text-embedding-ada-002`` answered as ``ada``, as Azure does), else
    ``text-embedding-3-small``. The body's ``model`` is ignored, as Azure ignores it."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.AZURE,
        "/openai/deployments/{deployment}/embeddings",
        lambda b, m: _azure_embed(b, m, figure, report_usage, response_model),
    )


def azure_v1_embeddings(
    *, tokens: int | None = None, report_usage: bool = True, response_model: str | None = None
) -> Route:
    """Azure OpenAI ``POST /openai/v1/embeddings``: the deployment is the body's ``model``;
    answered as ``azure_embeddings``, plus an ``id`` and ``usage.completion_tokens`` 0."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.AZURE,
        "/openai/v1/embeddings",
        lambda b, m: _azure_embed(b, m, figure, report_usage, response_model, v1=True),
    )


def mistral_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Mistral ``POST /v1/embeddings``: OpenAI's body with an ``id``, ``output_dimension`` for
    the width, and ``usage`` {``prompt_tokens``: ``tokens`` (by default counted from the
    input), ``total_tokens``, ``completion_tokens``: 0, and the keys Mistral sends as null},
    with the same figure in ``x-ratelimit-tokens-query-cost``; no usage when ``report_usage``
    is False."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.MISTRAL, "/v1/embeddings", lambda b, m: _mistral_embed(b, m, figure, report_usage)
    )


def ollama_embed(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Ollama ``POST /api/embed`` (``input``: one string or a list; ``dimensions``):
    ``{model, embeddings, total_duration, load_duration, prompt_eval_count}``, durations in
    whole nanoseconds, ``tokens`` as ``prompt_eval_count`` (by default counted from the input;
    left out when ``report_usage`` is False)."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.OLLAMA, "/api/embed", lambda b, m: _ollama_embed(b, m, figure, report_usage)
    )


def ollama_embeddings() -> Route:
    """Ollama's legacy ``POST /api/embeddings`` (``prompt``): ``{"embedding": [...]}`` only, no
    model, no counts, no durations."""
    return _built_in(Vendor.OLLAMA, "/api/embeddings", _ollama_legacy_embed)


def ollama_openai_embeddings(*, tokens: int | None = None, report_usage: bool = True) -> Route:
    """Ollama's OpenAI-compatible ``POST /v1/embeddings``: OpenAI's body with no ``id``, float
    vectors even when base64 is asked for (as Ollama answers), figures as
    ``openai_embeddings``; its errors are OpenAI's error object (``type: "api_error"``)."""
    figure = _figure("tokens", tokens)
    return _built_in(
        Vendor.OLLAMA,
        "/v1/embeddings",
        lambda b, m: _ollama_openai_embed(b, m, figure, report_usage),
    )


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
    bedrock_titan_embeddings,
    bedrock_cohere_embeddings,
    bedrock_nova_embeddings,
    bedrock_cohere_rerank,
    bedrock_rerank,
    gemini_embeddings,
    gemini_embed_content,
    vertex_embeddings,
    vertex_embed_content,
    vertex_rank,
    azure_embeddings,
    azure_v1_embeddings,
    mistral_embeddings,
    ollama_embed,
    ollama_embeddings,
    ollama_openai_embeddings,
)


@dataclass
class _Mounted:
    route: Route
    remaining: int | None


_RouteKey = tuple[str, str, tuple[str, ...]]
"""Where a route is mounted: vendor, path template, the body keys it selects by."""
_NOT_JSON = object()


def _key(route: Route) -> _RouteKey:
    return (route.vendor, route.path, route.selects)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the stand-in never writes request lines to stderr."""

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length)
        target, _, query = self.path.partition("?")
        parts = target.strip("/").split("/", 1)
        prefix, path = (parts[0], "/" + parts[1]) if len(parts) == 2 else ("", target)
        vendor, _, behaviour = prefix.partition("~")
        request = RecordedRequest(vendor, path, dict(self.headers.items()), body, query)
        reply = self.server.answer(request, behaviour)  # records the request too
        closing = self.server.closing
        if reply.drop or closing.is_set() or (reply.delay and closing.wait(reply.delay)):
            self._drop()
            return
        data = json.dumps(reply.body).encode("utf-8") if reply.raw is None else reply.raw
        self.send_response(reply.status)
        if not any(name.lower() == "content-type" for name in reply.headers):
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
        self._routes: dict[_RouteKey, list[_Mounted]] = {}  # the last mounted answers first
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
                _key(route): [_Mounted(route, None)]
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
            key = _key(route)
            stack = self._routes.pop(key, [])  # re-inserted last: it answers first now
            if times is None:
                stack = [_Mounted(route, None)]
            else:
                stack.append(_Mounted(route, times))
            self._routes[key] = stack

    def _find(
        self, vendor: str, path: str, body: object
    ) -> tuple[_RouteKey | None, dict[str, str]]:
        """The mounted endpoint answering ``path`` for this body, the last mounted first, and
        what its placeholders matched; a path some endpoint has but none of them selects this
        body gives no key, with that path's params. Called with the lock held."""
        near: dict[str, str] | None = None
        for key in reversed(self._routes):
            route_vendor, template, selects = key
            if route_vendor != vendor or not self._routes[key]:
                continue
            params = _match(template, path)
            if params is None:
                continue
            if not selects or (isinstance(body, dict) and any(k in body for k in selects)):
                return key, params
            near = params if near is None else near
        return None, near if near is not None else {}

    def _path_known(self, vendor: str, path: str) -> bool:
        with self._lock:
            return any(
                v == vendor and stack and _match(template, path) is not None
                for (v, template, _), stack in self._routes.items()
            )

    def _take(self, vendor: str, path: str, body: object) -> Route | None:
        """The route answering this call, using up one of a limited route's answers."""
        with self._lock:
            key, _ = self._find(vendor, path, body)
            if key is None:
                return None
            stack = self._routes[key]
            top = stack[-1]
            if top.remaining is not None:
                top.remaining -= 1
                if top.remaining == 0:
                    stack.pop()
            return top.route

    def answer(self, request: RecordedRequest, behaviour: str) -> Reply:
        """Record ``request`` (with the params its path gives) and answer it."""
        vendor, path = request.vendor, request.path
        try:
            body: Any = request.json()
        except ValueError:
            body = _NOT_JSON
        with self._lock:
            _, params = self._find(vendor, path, body)
        request = replace(request, params=params)
        self.record(request)
        if body is _NOT_JSON:
            return _error(vendor, path, 400)
        if not isinstance(body, dict):
            return _error(vendor, path, 422)
        model = _model_of(vendor, body, params)
        name = behaviour or model
        failure = _failure_by_name(vendor, path, name, model)
        if failure is not None:
            return failure
        delay = _delay_by_name(name)
        route = self._take(vendor, path, body)
        if route is None:  # a body no endpoint on a known path reads is the vendor's 400
            return _later(
                _error(vendor, path, 400 if self._path_known(vendor, path) else 404), delay
            )
        try:
            reply = route.respond(request)
        except Exception as error:  # a test's own route broke: say so, without its message
            failed = _error(vendor, path, 500)
            body = failed.body if isinstance(failed.body, dict) else {"error": failed.body}
            broken = {**body, "standin_route_error": type(error).__name__}
            return replace(failed, body=broken)
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
