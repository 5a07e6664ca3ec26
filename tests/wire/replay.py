"""Replaying the third-party recordings in ``tests/wire/recorded``, and what each one reports.

``expected`` is a small reader of its own, written from the vendors' wire as the recordings
show it (see ``recorded/README.md``). It never calls spanledger's readers or declarations, so a
recording and a declaration that disagree show up as a failing test instead of as two copies of
the same mistake.
"""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import json
import re
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx

import spanledger
from spanledger.events import Event

RECORDED = Path(__file__).parent / "recorded"
FILES = sorted(RECORDED.glob("*/*.json"))

HOP_BY_HOP = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})
"""Recorded headers that describe the recorded connection (the original, uncut body's length,
its chunking), not the body replayed: a real socket gets the replayed body's own."""

BEDROCK_TOKENS = "x-amzn-bedrock-input-token-count"


@dataclass(frozen=True)
class Exchange:
    """One recorded file."""

    path: Path
    data: dict[str, Any]

    @classmethod
    def load(cls, path: Path) -> Exchange:
        return cls(path, json.loads(path.read_text(encoding="utf-8")))

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def url(self) -> str | None:
        url: str | None = self.data["request"]["url"]
        return url

    @property
    def request_body(self) -> Any:
        return self.data["request"]["body"]

    @property
    def status(self) -> int | None:
        status: int | None = self.data["response"]["status"]
        return status

    @property
    def body(self) -> Any:
        return self.data["response"]["body"]

    @property
    def header_lines(self) -> list[tuple[str, str]]:
        """The recorded headers, one line per value (a multi-valued header as several)."""
        lines: list[tuple[str, str]] = []
        for name, value in self.data["response"]["headers"].items():
            for one in value if isinstance(value, list) else [value]:
                lines.append((name, one))
        return lines

    @property
    def headers(self) -> list[tuple[str, str]]:
        """The recorded headers, a multi-valued one joined with ", " (as one field)."""
        return [
            (name, ", ".join(value) if isinstance(value, list) else value)
            for name, value in self.data["response"]["headers"].items()
        ]

    @property
    def body_only(self) -> bool:
        return self.data["request"]["url"] is None

    def replace(
        self,
        *,
        request_body: Any = None,
        body: Any = None,
        headers: Mapping[str, str | None] | None = None,
        status: int | None = None,
    ) -> Exchange:
        """A copy with the request body, response body, status or some headers replaced (a
        header given ``None`` is dropped)."""
        data = copy.deepcopy(self.data)
        if request_body is not None:
            data["request"]["body"] = request_body
        if body is not None:
            data["response"]["body"] = body
        if status is not None:
            data["response"]["status"] = status
        for name, value in (headers or {}).items():
            kept = {k: v for k, v in data["response"]["headers"].items() if k.lower() != name}
            if value is not None:
                kept[name] = value
            data["response"]["headers"] = kept
        return Exchange(self.path, data)


def body_bytes(body: Any) -> bytes:
    return json.dumps(body, ensure_ascii=False).encode("utf-8")


def load(stem: str) -> Exchange:
    (path,) = (p for p in FILES if p.stem == stem)
    return Exchange.load(path)


EXCHANGES = [Exchange.load(path) for path in FILES]
REPLAYED = [ex for ex in EXCHANGES if not ex.body_only]
BODY_ONLY = [ex for ex in EXCHANGES if ex.body_only]


# --- the independent reader -------------------------------------------------------------------

_GEOGRAPHY = re.compile(r"^(?:us|eu|apac|jp|au|ca|us-gov|global)\.")


def base_bedrock_model(model_id: str) -> str:
    """A Bedrock model id as the base model: a geography profile's prefix dropped, a
    foundation-model ARN's id; any other ARN as given."""
    if model_id.startswith("arn:"):
        marker = ":foundation-model/"
        return model_id.split(marker, 1)[1] if marker in model_id else model_id
    return _GEOGRAPHY.sub("", model_id)


def vendor_of(url: str) -> str:
    """The vendor a recorded URL's host (or Ollama's port) names."""
    parsed = httpx.URL(url)
    host = parsed.host
    if parsed.port == 11434:
        return "ollama"
    if host.endswith(".amazonaws.com"):
        return "aws.bedrock"
    if host == "generativelanguage.googleapis.com":
        return "gcp.gemini"
    if host.endswith("aiplatform.googleapis.com"):
        return "gcp.vertex_ai"
    if host == "discoveryengine.googleapis.com":
        return "gcp.vertex_ai"
    if host.endswith((".openai.azure.com", ".services.ai.azure.com")):
        return "azure.ai.openai"
    if host == "api.mistral.ai":
        return "mistral_ai"
    raise AssertionError(f"no vendor known for {url}")


def route_of(url: str) -> str:
    """A name for the recorded route (``None`` of spanledger's names)."""
    path = unquote(httpx.URL(url).path)
    vendor = vendor_of(url)
    if vendor == "aws.bedrock":
        return "bedrock-invoke" if path.endswith("/invoke") else "bedrock-other"
    if vendor in ("gcp.gemini", "gcp.vertex_ai"):
        return path.rsplit(":", 1)[-1]
    if vendor == "ollama" and path.startswith("/api/"):
        return path
    return "openai-embeddings" if path.endswith("/embeddings") else "other"


RECORDED_ROUTES = frozenset(
    {
        "bedrock-invoke",
        "batchEmbedContents",
        "embedContent",
        "predict",
        "openai-embeddings",
        "/api/embed",
        "/api/embeddings",
    }
)
"""The recorded routes that are embedding calls; every other one (Converse, generateContent,
countTokens, chat) passes through unrecorded."""


def strict_count(value: object) -> int | None:
    """A JSON integer that is a count; nothing else is one."""
    return value if type(value) is int and value >= 0 else None


def header_count(value: str | None) -> int | None:
    """A header's figure: plain ASCII decimal digits, else no figure."""
    return int(value) if value is not None and re.fullmatch(r"[0-9]+", value) else None


def header(ex: Exchange, name: str) -> str | None:
    for key, value in ex.headers:
        if key.lower() == name:
            return value
    return None


def dig(node: Any, *path: str) -> Any:
    for step in path:
        if not isinstance(node, dict):
            return None
        node = node.get(step)
    return node


def requested_model(ex: Exchange) -> str:
    """The model as the request names it (the URL where the route holds it)."""
    assert ex.url is not None
    path = unquote(httpx.URL(ex.url).path)
    vendor = vendor_of(ex.url)
    if vendor == "aws.bedrock":
        return base_bedrock_model(path.split("/model/", 1)[1].rsplit("/", 1)[0])
    if vendor in ("gcp.gemini", "gcp.vertex_ai"):
        return path.split("/models/", 1)[1].split(":", 1)[0]
    deployment = re.search(r"/openai/deployments/([^/]+)/", path)
    if deployment:
        return deployment.group(1)
    model: str = ex.request_body["model"]
    return model


def input_count(ex: Exchange) -> int:
    body = ex.request_body
    route = route_of(ex.url or "")
    if route == "bedrock-invoke":
        if "texts" in body:
            return len(body["texts"])
        return 1  # Titan's inputText, Nova's singleEmbeddingParams: one input a request
    if route == "batchEmbedContents":
        return len(body["requests"])
    if route == "predict":
        return len(body["instances"])
    if route in ("embedContent", "/api/embeddings"):
        return 1
    inputs = body["input"]
    return 1 if isinstance(inputs, str) else len(inputs)


def vectors_of(ex: Exchange) -> list[Any]:
    """Every vector in a success body, decoded (base64 float32 text as floats)."""
    body = ex.body
    route = route_of(ex.url or "")
    found: list[Any]
    if route == "bedrock-invoke":
        embeddings = body.get("embeddings")
        if "embedding" in body:
            found = [body["embedding"]]
        elif isinstance(embeddings, dict):
            found = embeddings["float"]
        elif embeddings and isinstance(embeddings[0], dict):
            found = [item["embedding"] for item in embeddings]
        else:
            found = embeddings
    elif route == "batchEmbedContents":
        found = [item["values"] for item in body["embeddings"]]
    elif route == "predict":
        found = [p["embeddings"]["values"] for p in body["predictions"]]
    elif route == "embedContent":
        found = [body["embedding"]["values"]]
    elif route == "/api/embed":
        found = body["embeddings"]
    elif route == "/api/embeddings":
        found = [body["embedding"]]
    else:
        found = [item["embedding"] for item in sorted(body["data"], key=lambda d: d["index"])]
    return [_floats(vector) for vector in found]


def _floats(vector: Any) -> list[float]:
    if isinstance(vector, str):
        raw = base64.b64decode(vector, validate=True)
        assert len(raw) % 4 == 0
        return list(memoryview(raw).cast("f"))
    assert isinstance(vector, list)
    return vector


def width_of(ex: Exchange) -> int | None:
    """The width every vector shares; ``None`` when they do not share one."""
    widths = {len(vector) for vector in vectors_of(ex)}
    return widths.pop() if len(widths) == 1 else None


def usage_of(ex: Exchange) -> int | None:
    """The token figure the recording carries, where this vendor carries it."""
    body = ex.body
    route = route_of(ex.url or "")
    if route == "bedrock-invoke":
        # Titan: the body's count (the header's without one); Cohere, Nova: only the header
        if "inputText" in ex.request_body and "inputTextTokenCount" in body:
            return strict_count(body["inputTextTokenCount"])
        return header_count(header(ex, BEDROCK_TOKENS))
    if route in ("batchEmbedContents", "embedContent"):
        return strict_count(dig(body, "usageMetadata", "promptTokenCount"))
    if route == "predict":
        each = [
            strict_count(dig(p, "embeddings", "statistics", "token_count"))
            for p in body["predictions"]
        ]
        return None if not each or None in each else sum(c for c in each if c is not None)
    if route == "/api/embed":
        return strict_count(body.get("prompt_eval_count"))
    if route == "/api/embeddings":
        return None
    return strict_count(dig(body, "usage", "prompt_tokens"))


def response_model_of(ex: Exchange) -> str | None:
    route = route_of(ex.url or "")
    if route in ("openai-embeddings", "/api/embed"):
        model = ex.body.get("model")
        return model if isinstance(model, str) and model else None
    return None  # Bedrock, Google and Ollama's legacy route never name the model


_BEDROCK_CODES = {
    "ValidationException": "provider_invalid_request",
    "AccessDeniedException": "provider_authentication",
    "UnrecognizedClientException": "provider_authentication",
    "ThrottlingException": "provider_rate_limit",
}
_BY_STATUS = {
    400: "provider_invalid_request",
    401: "provider_authentication",
    403: "provider_authentication",
    404: "provider_invalid_model",
    429: "provider_rate_limit",
}


def bedrock_code(ex: Exchange) -> str | None:
    sent = header(ex, "x-amzn-errortype")
    return sent.split(":", 1)[0] if sent else None


def category_of(ex: Exchange) -> str:
    """A failure's category: Bedrock's error code where it names one we know, else the status."""
    code = bedrock_code(ex)
    if code in _BEDROCK_CODES:
        return _BEDROCK_CODES[code]
    assert ex.status is not None
    return _BY_STATUS[ex.status]


def expected(ex: Exchange) -> dict[str, Any] | None:
    """What the transport must record for ``ex``: ``None`` for no event at all."""
    assert ex.url is not None
    if route_of(ex.url) not in RECORDED_ROUTES or not isinstance(ex.request_body, dict):
        return None
    assert ex.status is not None
    common = {
        "provider": vendor_of(ex.url),
        "model": requested_model(ex),
        "input_count": input_count(ex),
    }
    if 200 <= ex.status < 300 and not corrupt(ex):
        return {
            "kind": "embedding",
            **common,
            "dimensions": width_of(ex),
            "usage": usage_of(ex),
            "response_model": response_model_of(ex),
        }
    return {
        "kind": "embedding_failed",
        **common,
        "error_category": "provider_invalid_response" if ex.status < 300 else category_of(ex),
        "status_code": ex.status,
    }


def corrupt(ex: Exchange) -> bool:
    """A success body whose vectors do not answer the request: not one per input, or not all
    of one width."""
    try:
        vectors = vectors_of(ex)
    except (KeyError, TypeError, IndexError, ValueError, AssertionError):
        return True
    return len(vectors) != input_count(ex) or width_of(ex) in (None, 0)


def summary(event: Event) -> dict[str, Any]:
    """The fields ``expected`` speaks of, read off a recorded event."""
    found: dict[str, Any] = {
        "kind": event.kind,
        "provider": event.provider,
        "model": event.model,
        "input_count": getattr(event, "input_count", None),
    }
    if event.kind == "embedding":
        found.update(
            dimensions=event.dimensions,
            usage=event.usage.input_tokens if event.usage is not None else None,
            response_model=event.response_model,
        )
    elif event.kind == "embedding_failed":
        found.update(error_category=event.error_category.value, status_code=event.status_code)
    return found


def check_events(ex: Exchange, events: list[Event]) -> None:
    """``events`` are what a path must record for ``ex``: none for a call that is not an
    embedding call, else one that says what ``expected`` reads, a failure fingerprinting the
    body as the client reads it."""
    wanted = expected(ex)
    if wanted is None:
        assert events == [], f"{ex.stem} is not an embedding call: nothing may be recorded"
        return
    assert len(events) == 1
    (event,) = events
    assert summary(event) == wanted
    if event.kind == "embedding":
        assert event.malformed_usage == ()
    elif event.kind == "embedding_failed":
        raw = body_bytes(ex.body)
        assert event.fingerprint is not None
        assert event.fingerprint.byte_length == len(raw)
        assert event.fingerprint.sha256 == hashlib.sha256(raw).hexdigest()
        code = header(ex, "x-amzn-errortype")
        if code is not None:
            assert event.error_type == code.split(":", 1)[0]


# --- replaying ----------------------------------------------------------------------------------


def mock_for(ex: Exchange, *, gzipped: bool = False) -> httpx.MockTransport:
    """A transport answering every request with ``ex``'s recorded status, headers and body,
    built as handlers build them (``Response(content=...)``: read at once); ``gzipped``: the
    body gzip-compressed under ``Content-Encoding: gzip``."""

    def answer(request: httpx.Request) -> httpx.Response:
        assert ex.status is not None
        headers = [(name.encode("ascii"), value.encode("utf-8")) for name, value in ex.headers]
        body = body_bytes(ex.body)
        if gzipped:
            headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
            headers.append((b"content-encoding", b"gzip"))
            body = gzip.compress(body, mtime=0)
        return httpx.Response(ex.status, headers=headers, content=body)

    return httpx.MockTransport(answer)


@dataclass
class Replayed:
    events: list[Event]
    response: httpx.Response


def post(
    ex: Exchange,
    inner: httpx.BaseTransport,
    *,
    url: str | None = None,
    vendors: Mapping[str, str] | None = None,
    content: bytes | None = None,
) -> Replayed:
    """POST ``ex``'s request body (``content`` when given) through the recording transport
    over ``inner``, collecting the events."""
    events: list[Event] = []
    recorder = spanledger.Recorder([events.append])
    sent = content if content is not None else body_bytes(ex.request_body)
    target = url or ex.url
    assert target is not None
    client = httpx.Client(
        transport=spanledger.instrumentation.transport(inner, vendors=vendors),
        timeout=httpx.Timeout(5.0),
    )
    with spanledger.use(recorder), client:
        response = client.post(target, content=sent, headers={"content-type": "application/json"})
    return Replayed(events, response)


def replay_mocked(ex: Exchange, **kw: Any) -> Replayed:
    return post(ex, mock_for(ex), **kw)


class _Replayer(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 5.0  # a socket that goes quiet is dropped, never waited on
    server: LoopbackServer

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        self.rfile.read(length)
        ex = self.server.answers.get(self.path)
        if ex is None or ex.status is None:
            self.send_response_only(599)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        payload = body_bytes(ex.body)
        self.send_response_only(ex.status)
        for name, value in ex.header_lines:
            if name.lower() not in HOP_BY_HOP:
                self.send_header(name, value)
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the tests read events, not access logs."""


class LoopbackServer(ThreadingHTTPServer):
    """A server on 127.0.0.1 answering each request path with the exchange set for it."""

    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Replayer)
        self.answers: dict[str, Exchange] = {}

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def serve(self, ex: Exchange) -> str:
        """Answer ``ex``'s request path with its recording; its URL on this server."""
        assert ex.url is not None
        path = httpx.URL(ex.url).raw_path.decode("ascii")
        self.answers[path] = ex
        return self.origin + path


def loopback() -> Iterator[LoopbackServer]:
    server = LoopbackServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
