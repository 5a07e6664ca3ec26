"""Wire fuzz of every provider class (sync and async) and of the recording httpx transport.

Asserted, and nothing else (see ``fuzz_contract``):

1. a provider call returns a valid ``EmbeddingResponse`` / ``RerankResponse`` or raises
   ``ProviderError``;
2. exactly one event per call, a success iff the call returned, a failure's category equal to
   the raised error's;
3. that event is in the JSONL log (same ``call_id``, no problems reported by ``read_events``);
4. no body, input or API-key sentinel in ``str`` / ``repr`` / the whole-chain traceback of the
   error, in the event's JSON or in the log;
5. non-finite or out-of-range vector values and scores end as ``provider_invalid_response``;
   a usage figure above 2**63 - 1 is not reported (``None``), kept verbatim on ``raw``.

For the transport: the caller gets what it would get without spanledger (status, headers and
body bytes, or the inner transport's exception type), one event per recognised vendor call and
none otherwise, and (3), (4) for that event.

Every endpoint in ``spanledger.wire.endpoints.ALL_ENDPOINTS`` is fuzzed through the transport,
and through its provider class where it has one. The first five vendors' bodies come from
``fuzz_bodies`` (valid vendor shapes, then mutated); every other endpoint's valid body is built
from its declaration (``tests.differential.bodies``: its vector layout, per-item figures,
results by id) and mutated the same way, and its figure header and error-code header (Bedrock)
get sound, garbage and sentinel values. ``httpx.MockTransport``
carries the bulk, a raw loopback server (``fuzz_servers.RawServer``) the byte-level framing.
Every test runs its whole budget and then fails with each class of violation, its count and its
smallest repro. Budget: fixed and derandomized; ``SPANLEDGER_FUZZ_EXAMPLES=<n>`` runs n
examples per hypothesis test instead.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import gzip
import itertools
import json
import math
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spanledger
from spanledger import (
    EmbeddingFailedEvent,
    EmbeddingResponse,
    ErrorCategory,
    ProviderError,
    RerankFailedEvent,
    RerankResponse,
)
from spanledger.providers import (
    AzureOpenAIEmbeddings,
    CohereEmbeddings,
    CohereReranker,
    EmbeddingProvider,
    GeminiEmbeddings,
    JinaEmbeddings,
    JinaReranker,
    MistralEmbeddings,
    OllamaEmbeddings,
    OpenAIEmbeddings,
    RerankProvider,
    TEIEmbeddings,
    TEIReranker,
    VertexEmbeddings,
    VertexReranker,
    VoyageEmbeddings,
    VoyageReranker,
)
from spanledger.wire import endpoints as declared
from spanledger.wire.endpoints import VectorLayout
from tests.differential.bodies import Call as DeclaredCall
from tests.differential.bodies import embedding_payload, put, results_payload
from tests.differential.paths import declared_request
from tests.reliability.fuzz_bodies import (
    API_KEY,
    BODY_SENTINEL,
    DEEP_ARRAYS,
    DEEP_OBJECTS,
    FIGURES,
    HUGE_FIGURES,
    INPUT_SENTINEL,
    INT64_MAX,
    NON_FINITE,
    SCORES,
    VECTOR_VALUES,
    JsonPath,
    Operation,
    Raw,
    TransportFailure,
    WireReply,
    corrupted,
    embed_body,
    encode,
    error_body,
    float32_base64,
    hostile_reply,
    plain_reply,
    replaced,
    rerank_body,
    score_paths,
    sound_tree,
    vector_paths,
    weighted,
)
from tests.reliability.fuzz_contract import (
    CallRun,
    Capture,
    Tally,
    contract_findings,
    event_json,
    event_usage_findings,
    examples,
    leaks,
    log_findings,
)
from tests.reliability.fuzz_servers import MockWire, RawServer, raw_scripts

MODES = ("sync", "async")
TEI_ORIGIN = "http://tei.test"
INTERNAL_ORIGIN = "http://models.internal:8080"
QUERY = f"{INPUT_SENTINEL} query"
EXTRAS = {"x_fuzz_tag": INPUT_SENTINEL}
CLIENT_TIMEOUT = 5.0


@dataclass(frozen=True)
class Endpoint:
    """One wire, and the provider class that speaks it (``None``: only SDKs reach it, so only
    the transport is fuzzed on it). ``declaration``: where its bodies are built from its
    declaration rather than by ``fuzz_bodies``' vendor shapes."""

    label: str
    cls: Callable[..., EmbeddingProvider | RerankProvider] | None
    vendor: str
    operation: Operation
    model: str
    chunkable: bool
    usage_paths: tuple[JsonPath, ...]
    figure: str
    origin: str
    route: str
    declaration: declared.Endpoint | None = None


ENDPOINTS = (
    Endpoint(
        "openai-embed",
        OpenAIEmbeddings,
        "openai",
        "embeddings",
        "text-embedding-3-small",
        True,
        (("usage", "prompt_tokens"), ("usage", "total_tokens")),
        "input_tokens",
        "https://api.openai.com",
        "/v1/embeddings",
    ),
    Endpoint(
        "cohere-embed",
        CohereEmbeddings,
        "cohere",
        "embeddings",
        "embed-v4.0",
        True,
        (("meta", "billed_units", "input_tokens"),),
        "input_tokens",
        "https://api.cohere.com",
        "/v2/embed",
    ),
    Endpoint(
        "cohere-rerank",
        CohereReranker,
        "cohere",
        "rerank",
        "rerank-v3.5",
        False,
        (("meta", "billed_units", "search_units"),),
        "search_units",
        "https://api.cohere.com",
        "/v2/rerank",
    ),
    Endpoint(
        "jina-embed",
        JinaEmbeddings,
        "jina",
        "embeddings",
        "jina-embeddings-v3",
        False,
        (("usage", "total_tokens"),),
        "input_tokens",
        "https://api.jina.ai",
        "/v1/embeddings",
    ),
    Endpoint(
        "jina-rerank",
        JinaReranker,
        "jina",
        "rerank",
        "jina-reranker-v2-base-multilingual",
        False,
        (("usage", "total_tokens"),),
        "input_tokens",
        "https://api.jina.ai",
        "/v1/rerank",
    ),
    Endpoint(
        "tei-embed",
        TEIEmbeddings,
        "tei",
        "embeddings",
        "BAAI/bge-small-en-v1.5",
        True,
        (),
        "",
        TEI_ORIGIN,
        "/embed",
    ),
    Endpoint(
        "tei-rerank",
        TEIReranker,
        "tei",
        "rerank",
        "BAAI/bge-reranker-base",
        True,
        (),
        "",
        TEI_ORIGIN,
        "/rerank",
    ),
    Endpoint(
        "voyage-embed",
        VoyageEmbeddings,
        "voyage",
        "embeddings",
        "voyage-3",
        True,
        (("usage", "total_tokens"),),
        "input_tokens",
        "https://api.voyageai.com",
        "/v1/embeddings",
    ),
    Endpoint(
        "voyage-rerank",
        VoyageReranker,
        "voyage",
        "rerank",
        "rerank-2",
        False,
        (("usage", "total_tokens"),),
        "input_tokens",
        "https://api.voyageai.com",
        "/v1/rerank",
    ),
)


def _from_declaration(
    declaration: declared.Endpoint,
    cls: Callable[..., EmbeddingProvider | RerankProvider] | None,
    model: str,
    origin: str,
) -> Endpoint:
    """A wire-fuzz endpoint for a declaration: its figures where the declaration puts them, and
    (for the transport) the route its declared request goes to."""
    usage = tuple(path for path in (declaration.tokens_at, declaration.units_at) if path)
    counted = declaration.tokens_at or declaration.tokens_each_at or declaration.tokens_header
    figure = "search_units" if declaration.units_at else "input_tokens" if counted else ""
    call = DeclaredCall(declaration, ("a",), "q", None)
    route = httpx.URL(declared_request(declaration, call)[0]).raw_path.decode("ascii")
    return Endpoint(
        declaration.name,
        cls,
        declaration.name,
        declaration.operation,
        model,
        cls is not None,
        usage,
        figure,
        origin,
        route,
        declaration,
    )


_BEDROCK_RUNTIME = "https://bedrock-runtime.us-east-1.amazonaws.com"
_VERTEX = "https://us-central1-aiplatform.googleapis.com"
_OLLAMA = "http://localhost:11434"
DECLARED = (
    _from_declaration(
        declared.GEMINI_EMBEDDINGS,
        GeminiEmbeddings,
        "gemini-embedding-001",
        "https://generativelanguage.googleapis.com",
    ),
    _from_declaration(
        declared.VERTEX_EMBEDDINGS,
        functools.partial(VertexEmbeddings, project="fuzz-project"),
        "text-embedding-005",
        _VERTEX,
    ),
    _from_declaration(
        declared.VERTEX_RANK,
        functools.partial(VertexReranker, project="fuzz-project"),
        "semantic-ranker-default-004",
        "https://discoveryengine.googleapis.com",
    ),
    _from_declaration(
        declared.AZURE_EMBEDDINGS,
        AzureOpenAIEmbeddings,
        "embeddings-deployment",
        "https://fuzz.openai.azure.com",
    ),
    _from_declaration(
        declared.MISTRAL_EMBEDDINGS, MistralEmbeddings, "mistral-embed", "https://api.mistral.ai"
    ),
    _from_declaration(declared.OLLAMA_EMBED, OllamaEmbeddings, "all-minilm", _OLLAMA),
    _from_declaration(declared.BEDROCK_TITAN_EMBEDDINGS, None, "", _BEDROCK_RUNTIME),
    _from_declaration(
        declared.BEDROCK_RERANK, None, "", "https://bedrock-agent-runtime.us-east-1.amazonaws.com"
    ),
    _from_declaration(declared.COHERE_V1_EMBEDDINGS, None, "", "https://api.cohere.com"),
    _from_declaration(declared.BEDROCK_COHERE_EMBEDDINGS, None, "", _BEDROCK_RUNTIME),
    _from_declaration(declared.BEDROCK_NOVA_EMBEDDINGS, None, "", _BEDROCK_RUNTIME),
    _from_declaration(declared.BEDROCK_COHERE_RERANK, None, "", _BEDROCK_RUNTIME),
    _from_declaration(
        declared.GEMINI_EMBED_CONTENT, None, "", "https://generativelanguage.googleapis.com"
    ),
    _from_declaration(declared.VERTEX_EMBED_CONTENT, None, "", _VERTEX),
    _from_declaration(declared.VERTEX_BATCH_EMBED_CONTENTS, None, "", _VERTEX),
    _from_declaration(declared.AZURE_V1_EMBEDDINGS, None, "", "https://fuzz.openai.azure.com"),
    _from_declaration(declared.OLLAMA_LEGACY_EMBEDDINGS, None, "", _OLLAMA),
    _from_declaration(declared.OLLAMA_OPENAI_EMBEDDINGS, None, "", _OLLAMA),
)
"""Every endpoint declared after the first five vendors: bodies from its declaration."""

WIRES = (*ENDPOINTS, *DECLARED)
"""Every endpoint the transport is fuzzed on."""
PROVIDED = tuple(endpoint for endpoint in WIRES if endpoint.cls is not None)
"""Every endpoint a provider class calls."""
REPORTING = tuple(
    endpoint
    for endpoint in PROVIDED
    if endpoint.usage_paths
    or (endpoint.declaration is not None and endpoint.declaration.tokens_each_at)
)
IDS = [endpoint.label for endpoint in PROVIDED]


def fuzz_settings(default_examples: int) -> settings:
    return settings(
        max_examples=examples(default_examples),
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=False,
        suppress_health_check=list(HealthCheck),
    )


# --------------------------------------------------------------------------- calls


@dataclass(frozen=True)
class CallSpec:
    """What the caller asks: texts (inputs or documents, each holding the input sentinel)."""

    texts: tuple[str, ...]
    chunk_size: int | None = None
    width: int = 3
    top_k: int | None = None
    return_documents: bool = True
    input_type: str | None = None

    @property
    def batches(self) -> tuple[int, ...]:
        """The size of each request the provider sends."""
        count = len(self.texts)
        size = self.chunk_size or count
        return tuple(min(size, count - start) for start in range(0, count, size))

    def describe(self, operation: Operation) -> str:
        what = "inputs" if operation == "embeddings" else "documents"
        parts = [f"{len(self.texts)} {what}"]
        if self.chunk_size is not None:
            parts.append(f"chunk_size={self.chunk_size}")
        if operation == "embeddings":
            parts.append(f"width={self.width}")
            if self.input_type is not None:
                parts.append(f"input_type={self.input_type!r}")
        else:
            parts.append(f"top_k={self.top_k} return_documents={self.return_documents}")
        return ", ".join(parts)


TAILS = st.text(st.characters(exclude_categories=["Cs"]), max_size=6)


@st.composite
def call_specs(draw: st.DrawFn, endpoint: Endpoint, chunking: bool = True) -> CallSpec:
    single = endpoint.declaration is not None and endpoint.declaration.single_input
    count = 1 if single else draw(st.integers(1, 3))
    texts = tuple(f"{INPUT_SENTINEL} {n} {draw(TAILS)}" for n in range(count))
    chunk = draw(st.sampled_from((None, 1, 2))) if chunking and endpoint.chunkable else None
    if endpoint.operation == "rerank":
        return CallSpec(
            texts,
            chunk_size=chunk,
            top_k=draw(st.none() | st.integers(1, 4)),
            return_documents=draw(st.booleans()),
        )
    typed = endpoint.vendor in ("cohere", "jina", "voyage") or endpoint.vendor.startswith(
        ("gemini", "vertex")
    )
    return CallSpec(
        texts,
        chunk_size=chunk,
        width=draw(st.integers(1, 4)),
        input_type=draw(st.sampled_from((None, "query", "document"))) if typed else None,
    )


def valid_body(
    endpoint: Endpoint, spec: CallSpec, size: int, at_least_one: bool = False
) -> st.SearchStrategy[object]:
    if endpoint.declaration is not None:
        return declared_body(endpoint.declaration, spec, size, at_least_one)
    if endpoint.operation == "embeddings":
        return embed_body(endpoint.vendor, size, spec.width)
    return rerank_body(endpoint.vendor, size, spec.top_k, spec.return_documents, at_least_one)


# --------------------------------------------------------------------------- declared bodies


def _with_figures(
    declaration: declared.Endpoint,
    tree: object,
    tokens: int,
    units: int,
    ident: str,
    model: str,
) -> object:
    """``tree`` with its figures where the declaration keeps them, and the body sentinel in an
    unknown key (at the root and on each item)."""
    if type(tree) is not dict:
        return tree
    for path, value in (
        (declaration.tokens_at, tokens),
        (declaration.units_at, units),
        (declaration.id_at, ident),
        (declaration.model_at, model),
    ):
        if path:
            put(tree, path, value)
    for item in declared_items(declaration, tree):
        if declaration.tokens_each_at is not None:
            put(item, declaration.tokens_each_at, tokens)
        item["x_fuzz_note"] = BODY_SENTINEL
    tree["x_fuzz_note"] = BODY_SENTINEL
    return tree


def declared_items(declaration: declared.Endpoint, tree: object) -> list[dict[str, Any]]:
    """The objects of an items layout (``embeddings[]``, ``predictions[]``)."""
    if declaration.vectors is not VectorLayout.ITEMS:
        return []
    node = _dig(tree, declaration.vectors_at)
    return [item for item in node if type(item) is dict] if type(node) is list else []


def _result(
    declaration: declared.Endpoint, index: int, score: float | int, documents: bool
) -> dict[str, Any]:
    named: object = str(index) if declaration.result_ids_at is not None else index
    entry: dict[str, Any] = {declaration.result_index_key: named, declaration.score_key: score}
    if documents and declaration.document_key is not None:
        entry[declaration.document_key] = f"{BODY_SENTINEL} doc {index}"
    return entry


def declared_sound(
    declaration: declared.Endpoint, count: int, width: int = 3, documents: bool = True
) -> object:
    """A fixed valid answer of the declaration's shape (every result, scores descending)."""
    tree: object
    if declaration.operation == "embeddings":
        rows = [[index + 0.5] + [0.25] * (width - 1) for index in range(count)]
        tree = embedding_payload(declaration, rows, None)
    else:
        entries = [_result(declaration, i, 0.9 - i / 10, documents) for i in range(count)]
        tree = results_payload(declaration, entries)
    return _with_figures(declaration, tree, 7, 1, "emb-1", "model-echo")


@st.composite
def declared_body(
    draw: st.DrawFn,
    declaration: declared.Endpoint,
    spec: CallSpec,
    size: int,
    at_least_one: bool = False,
) -> object:
    """A sound answer of the declaration's shape for a request of ``size`` items."""
    tree: object
    if declaration.operation == "embeddings":
        rows = [[draw(VECTOR_VALUES) for _ in range(spec.width)] for _ in range(size)]
        order = draw(st.permutations(range(size)))
        tree = embedding_payload(declaration, rows, order, bare=draw(st.booleans()))
    else:
        capped = spec.top_k is not None and not declaration.client_side_top_k
        limit = min(spec.top_k or size, size) if capped else size
        chosen = draw(st.permutations(range(size)))[: draw(st.integers(int(at_least_one), limit))]
        entries = [
            _result(declaration, index, draw(SCORES), spec.return_documents) for index in chosen
        ]
        if draw(st.booleans()):
            entries.sort(key=lambda entry: -entry[declaration.score_key])
        tree = results_payload(declaration, entries)
    return _with_figures(
        declaration, tree, draw(FIGURES), draw(FIGURES), draw(FUZZ_IDS), draw(FUZZ_IDS)
    )


FUZZ_IDS = st.text("abcdef0123456789-_", min_size=1, max_size=12)


def declared_vector_paths(declaration: declared.Endpoint, tree: object) -> list[JsonPath]:
    """Paths of every number inside the vectors of a declared embeddings answer (and of each
    base64 vector)."""
    layout = declaration.vectors
    vectors: list[JsonPath] = []
    if layout is VectorLayout.BY_INDEX:
        data = _dig(tree, ("data",))
        vectors = [("data", i, "embedding") for i in range(len(data))] if type(data) is list else []
    elif layout is VectorLayout.SINGLE:
        vectors = [declaration.vectors_at]
    else:
        base: JsonPath = declaration.vectors_at
        if layout in (VectorLayout.BY_TYPE, VectorLayout.FLOATS_OR_BY_TYPE):
            bare = type(_dig(tree, ("embeddings",))) is list
            base = ("embeddings",) if bare else ("embeddings", "float")
        rows = _dig(tree, base)
        inner = declaration.vector_in if layout is VectorLayout.ITEMS else ()
        vectors = [(*base, i, *inner) for i in range(len(rows))] if type(rows) is list else []
    found: list[JsonPath] = []
    for path in vectors:
        vector = _dig(tree, path)
        if type(vector) is list:
            found.extend((*path, j) for j in range(len(vector)))
        elif type(vector) is str:
            found.append(path)
    return found


def declared_score_paths(declaration: declared.Endpoint, tree: object) -> list[JsonPath]:
    results = _dig(tree, declaration.results_at)
    if type(results) is not list:
        return []
    return [(*declaration.results_at, i, declaration.score_key) for i in range(len(results))]


def vectors_or_scores(endpoint: Endpoint, tree: object) -> list[JsonPath]:
    """Where a corruption goes: the vector values (embeddings) or the scores (rerank)."""
    operation = endpoint.operation
    if endpoint.declaration is not None:
        if operation == "embeddings":
            return declared_vector_paths(endpoint.declaration, tree)
        return declared_score_paths(endpoint.declaration, tree)
    if operation == "embeddings":
        return vector_paths(endpoint.vendor, tree)
    return score_paths(endpoint.vendor, tree)


def sound_body(endpoint: Endpoint, count: int, width: int = 3, documents: bool = True) -> object:
    if endpoint.declaration is not None:
        return declared_sound(endpoint.declaration, count, width, documents)
    return sound_tree(endpoint.vendor, endpoint.operation, count, width, documents)


@st.composite
def corrupted_body(draw: st.DrawFn, endpoint: Endpoint, tree: object) -> tuple[object, str]:
    """``tree`` with one vector value or score made non-finite or out of float range."""
    if endpoint.declaration is None:
        return draw(corrupted(endpoint.vendor, endpoint.operation, tree))
    path = draw(st.sampled_from(vectors_or_scores(endpoint, tree)))
    old = _dig(tree, path)
    if isinstance(old, str):  # a base64 float32 vector: a NaN or an infinity inside
        width = max(1, len(base64.b64decode(old)) // 4)
        values = [0.5] * width
        values[draw(st.integers(0, width - 1))] = draw(
            st.sampled_from((math.nan, math.inf, -math.inf))
        )
        return replaced(tree, path, lambda _: float32_base64(values)), f"base64 at {path}"
    token = draw(st.sampled_from(NON_FINITE))
    return replaced(tree, path, lambda _: token), f"{token!r} at {path}"


HEADER_GARBAGE: tuple[bytes, ...] = (
    b"12abc",
    b"",
    b"-1",
    b"1.5",
    b"1e999",
    b"0x10",
    b"9223372036854775808",
    b"99999999999999999999",
    b"1" + b"0" * 5_000,
    b"\xef\xbc\x93",
    BODY_SENTINEL.encode(),
)
"""Token-count header text no bill can hold (a full-width digit among it)."""
ERROR_CODES: tuple[bytes, ...] = (
    b"ThrottlingException",
    b"ThrottlingException:http://internal.amazon.com/coral/com.amazonaws.bedrock/",
    b"ModelNotReadyException",
    b"ValidationException",
    b"AccessDeniedException",
    b"NoSuchException",
    b"",
    b":",
    b"X" + BODY_SENTINEL.encode(),
)


@st.composite
def declared_headers(draw: st.DrawFn, endpoint: Endpoint, reply: WireReply) -> WireReply:
    """``reply`` with the endpoint's own headers: a token count (sound, garbage or the
    sentinel) where the declaration reads one, a vendor error code where it reads one."""
    declaration = endpoint.declaration
    if declaration is None:
        return reply
    extra: list[tuple[bytes, bytes]] = []
    if declaration.tokens_header is not None and draw(st.integers(0, 2)):
        value = draw(
            st.sampled_from(HEADER_GARBAGE) | FIGURES.map(lambda n: str(n).encode("ascii"))
        )
        extra.append((declaration.tokens_header.title().encode("ascii"), value))
    if declaration.error_code_header is not None and draw(st.booleans()):
        extra.append((b"X-Amzn-ErrorType", draw(st.sampled_from(ERROR_CODES))))
    if not extra:
        return reply
    note = "; ".join(f"{name.decode()}: {value[:24]!r}" for name, value in extra)
    return dataclasses.replace(
        reply,
        headers=(*reply.headers, *extra),
        note=f"{reply.note}; {note}" if reply.note else note,
    )


@st.composite
def endpoint_reply(draw: st.DrawFn, endpoint: Endpoint, spec: CallSpec, size: int) -> WireReply:
    """A hostile reply grown from the endpoint's valid body, with its own headers."""
    reply = draw(hostile_reply(valid_body(endpoint, spec, size), endpoint.vendor))
    return draw(declared_headers(endpoint, reply))


class Harness:
    """Clients and an event loop shared by one test's calls; a fresh recorder and log each."""

    def __init__(self, tmp_path: Path, mode: str, transport: httpx.MockTransport | None) -> None:
        self.mode = mode
        self.loop = asyncio.new_event_loop() if mode == "async" else None
        self.client: httpx.Client | None = None
        self.aclient: httpx.AsyncClient | None = None
        if self.loop is None:
            self.client = httpx.Client(transport=transport, trust_env=False, timeout=CLIENT_TIMEOUT)
        else:
            self.aclient = httpx.AsyncClient(
                transport=transport, trust_env=False, timeout=CLIENT_TIMEOUT
            )
        self._numbers = itertools.count()
        self._dir = tmp_path

    def next_log(self) -> Path:
        return self._dir / f"events-{next(self._numbers)}.jsonl"

    def close(self) -> None:
        if self.client is not None:
            self.client.close()
        if self.loop is not None:
            if self.aclient is not None:
                self.loop.run_until_complete(self.aclient.aclose())
            self.loop.close()

    def build(
        self, endpoint: Endpoint, spec: CallSpec, recorder: spanledger.Recorder, origin: str | None
    ) -> EmbeddingProvider | RerankProvider:
        options: dict[str, Any] = {
            "api_key": API_KEY,
            "http_client": self.client,
            "async_http_client": self.aclient,
            "recorder": recorder,
        }
        if origin is not None or endpoint.vendor == "tei" or endpoint.declaration is not None:
            options["base_url"] = origin or (
                TEI_ORIGIN if endpoint.declaration is None else endpoint.origin
            )
        if spec.chunk_size is not None:
            options["chunk_size"] = spec.chunk_size
        assert endpoint.cls is not None
        return endpoint.cls(endpoint.model, **options)

    def invoke(self, provider: EmbeddingProvider | RerankProvider, spec: CallSpec) -> object:
        if isinstance(provider, EmbeddingProvider):
            if self.loop is not None:
                return self.loop.run_until_complete(
                    provider.aembed(list(spec.texts), input_type=spec.input_type, extras=EXTRAS)
                )
            return provider.embed(list(spec.texts), input_type=spec.input_type, extras=EXTRAS)
        kw: dict[str, Any] = {
            "top_k": spec.top_k,
            "return_documents": spec.return_documents,
            "extras": EXTRAS,
        }
        if self.loop is not None:
            return self.loop.run_until_complete(provider.arerank(QUERY, list(spec.texts), **kw))
        return provider.rerank(QUERY, list(spec.texts), **kw)

    def call(self, endpoint: Endpoint, spec: CallSpec, origin: str | None = None) -> CallRun:
        capture = Capture(self.next_log())
        provider = self.build(endpoint, spec, capture.recorder, origin)
        result: object = None
        raised: BaseException | None = None
        try:
            result = self.invoke(provider, spec)
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            raised = exc
        log, data, kinds = capture.finish()
        return CallRun(result, raised, capture.events, log, data, kinds)


def method_name(endpoint: Endpoint, mode: str) -> str:
    name = "embed" if endpoint.operation == "embeddings" else "rerank"
    cls = endpoint.cls
    named = getattr(cls, "__name__", None) or getattr(getattr(cls, "func", None), "__name__", "?")
    return f"{named}.{'a' if mode == 'async' else ''}{name} ({mode})"


def provider_repro(
    endpoint: Endpoint, mode: str, spec: CallSpec, replies: tuple[WireReply, ...]
) -> str:
    answers = " || ".join(
        f"reply {n}/{len(replies)}: {reply.describe()}" for n, reply in enumerate(replies, 1)
    )
    return f"{method_name(endpoint, mode)} {spec.describe(endpoint.operation)} | {answers}"


# --------------------------------------------------------------------------- labelled oracles


def corruption_findings(run: CallRun) -> list[str]:
    """(5) A non-finite or out-of-range vector value or score fails as invalid_response."""
    if run.raised is None:
        return ["corruption accepted: non-finite or out-of-range number returned as a success"]
    if (
        isinstance(run.raised, ProviderError)
        and run.raised.category is not ErrorCategory.INVALID_RESPONSE
    ):
        return [f"corruption: ended as {run.raised.category.value}, not provider_invalid_response"]
    return []


def oversized_findings(
    endpoint: Endpoint, run: CallRun, planted: tuple[int, ...], tally: Tally
) -> list[str]:
    """(5) A figure above 2**63 - 1 is not reported: ``None`` on the response and the event,
    verbatim on ``raw``."""
    if run.raised is not None:
        name = run.raised.category.value if isinstance(run.raised, ProviderError) else "?"
        tally.notes[f"a valid body with an oversized usage figure failed the call ({name})"] += 1
        return []
    result = run.result
    if not isinstance(result, EmbeddingResponse | RerankResponse):
        return []
    kinds: list[str] = []
    figure = getattr(result.usage, endpoint.figure) if result.usage is not None else None
    raws = [result.raw] if len(planted) == 1 else result.raw
    if not isinstance(raws, list) or len(raws) != len(planted):
        return [*kinds, "oversized usage: raw does not hold one body per request"]
    # a figure on each item is summed: a request reports its items' total
    totals = [
        value * max(1, len(usage_paths_in(endpoint, raw)))
        for raw, value in zip(raws, planted, strict=True)
    ]
    if any(total > INT64_MAX for total in totals) and figure is not None:
        kinds.append(f"oversized usage: a figure above 2**63-1 reported as {endpoint.figure}")
    if sum(totals) > INT64_MAX and figure is not None:
        kinds.append(f"oversized usage: a sum above 2**63-1 reported as {endpoint.figure}")
    if len(run.events) == 1:
        event_usage = getattr(run.events[0], "usage", None)
        if event_usage != result.usage:
            kinds.append("oversized usage: the event's usage differs from the response's")
    for raw, value in zip(raws, planted, strict=True):
        for path in usage_paths_in(endpoint, raw):
            kept = _dig(raw, path)
            if type(kept) is not int or kept != value:
                kinds.append("oversized usage: raw does not keep the figure verbatim")
    return kinds


def usage_paths_in(endpoint: Endpoint, tree: object) -> list[JsonPath]:
    """Where ``tree`` carries its usage figures: the endpoint's paths, and each item's where
    the declaration puts a figure on every item."""
    paths = list(endpoint.usage_paths)
    declaration = endpoint.declaration
    if declaration is not None and declaration.tokens_each_at is not None:
        items = _dig(tree, declaration.vectors_at)
        if type(items) is list:
            each = declaration.tokens_each_at
            paths += [(*declaration.vectors_at, i, *each) for i in range(len(items))]
    return paths


def _dig(node: object, path: JsonPath) -> object:
    for step in path:
        found = isinstance(node, dict) and step in node
        if found or (isinstance(node, list) and type(step) is int and 0 <= step < len(node)):
            node = node[step]  # type: ignore[index]
        else:
            return None
    return node


# --------------------------------------------------------------------------- provider cases


@dataclass(frozen=True)
class ProviderCase:
    spec: CallSpec
    replies: tuple[WireReply, ...]
    planted: tuple[int, ...] = ()


@st.composite
def hostile_cases(draw: st.DrawFn, endpoint: Endpoint) -> ProviderCase:
    spec = draw(call_specs(endpoint))
    replies = tuple(draw(endpoint_reply(endpoint, spec, size)) for size in spec.batches)
    return ProviderCase(spec, replies)


@st.composite
def corrupt_cases(draw: st.DrawFn, endpoint: Endpoint) -> ProviderCase:
    spec = draw(call_specs(endpoint))
    bad = draw(st.integers(0, len(spec.batches) - 1))
    replies = []
    for position, size in enumerate(spec.batches):
        tree = draw(valid_body(endpoint, spec, size, at_least_one=True))
        note = "valid"
        if position == bad:
            tree, note = draw(corrupted_body(endpoint, tree))
        replies.append(plain_reply(tree, note))
    return ProviderCase(spec, tuple(replies))


@st.composite
def oversized_cases(draw: st.DrawFn, endpoint: Endpoint) -> ProviderCase:
    """Valid bodies whose usage is above 2**63 - 1 in at least one request; or, for a chunked
    call, sound halves whose sum is above it."""
    spec = draw(call_specs(endpoint))
    batches = spec.batches
    summed = len(batches) > 1 and draw(st.booleans())
    huge_at = draw(st.integers(0, len(batches) - 1))
    replies: list[WireReply] = []
    planted: list[int] = []
    for position, size in enumerate(batches):
        tree = draw(valid_body(endpoint, spec, size))
        if summed:
            value = INT64_MAX // 2 + 1 + draw(st.integers(0, 1000))
        elif position == huge_at or draw(st.booleans()):
            value = draw(st.sampled_from(HUGE_FIGURES))
        else:
            value = draw(st.integers(0, 1000))
        for path in usage_paths_in(endpoint, tree):
            tree = replaced(tree, path, lambda _, v=value: v)  # type: ignore[misc]
        planted.append(value)
        replies.append(plain_reply(tree, f"usage figure {value}"))
    return ProviderCase(spec, tuple(replies), tuple(planted))


def run_provider_fuzz(
    endpoint: Endpoint,
    mode: str,
    tmp_path: Path,
    name: str,
    cases: st.SearchStrategy[ProviderCase],
    budget: int,
    oracle: Callable[[ProviderCase, CallRun, Tally], list[str]] | None = None,
) -> None:
    tally = Tally(f"{name} {endpoint.label} {mode}")
    wire = MockWire()
    harness = Harness(tmp_path, mode, wire.transport)
    try:

        @fuzz_settings(budget)
        @given(case=cases)
        def run(case: ProviderCase) -> None:
            wire.script(case.replies)
            call = harness.call(endpoint, case.spec)
            kinds = contract_findings(
                call,
                endpoint.operation,
                tally,
                input_count=len(case.spec.texts),
                top_k=case.spec.top_k,
            )
            if oracle is not None:
                kinds += oracle(case, call, tally)
            tally.add(
                kinds,
                lambda: provider_repro(endpoint, mode, case.spec, case.replies),
                sum(len(reply.body) for reply in case.replies),
            )

        run()
    finally:
        harness.close()
    tally.assert_clean()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("endpoint", PROVIDED, ids=IDS)
def test_provider_wire_fuzz(endpoint: Endpoint, mode: str, tmp_path: Path) -> None:
    """Mutated bodies, statuses, headers and codings: the contract holds for every call."""
    run_provider_fuzz(endpoint, mode, tmp_path, "wire fuzz", hostile_cases(endpoint), 160)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("endpoint", PROVIDED, ids=IDS)
def test_corruption_fails_loudly(endpoint: Endpoint, mode: str, tmp_path: Path) -> None:
    """A valid 2xx body with one NaN / +-Infinity / 1e999 / 10**400 in a vector or score."""
    run_provider_fuzz(
        endpoint,
        mode,
        tmp_path,
        "corruption",
        corrupt_cases(endpoint),
        25,
        lambda case, run, tally: corruption_findings(run),
    )


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("endpoint", REPORTING, ids=[e.label for e in REPORTING])
def test_oversized_usage_is_not_reported(endpoint: Endpoint, mode: str, tmp_path: Path) -> None:
    """A usage figure above 2**63 - 1 (or chunk figures summing above it) is not reported."""
    run_provider_fuzz(
        endpoint,
        mode,
        tmp_path,
        "oversized usage",
        oversized_cases(endpoint),
        25,
        lambda case, run, tally: oversized_findings(endpoint, run, case.planted, tally),
    )


# --------------------------------------------------------------------------- seed corpus


@dataclass(frozen=True)
class Seed:
    """A named hostile reply every provider class meets, and the oracle it is held to."""

    name: str
    reply: WireReply
    oracle: str = ""
    planted: tuple[int, ...] = ()


JSON_TYPE = ((b"content-type", b"application/json"),)


def seeds(endpoint: Endpoint, spec: CallSpec) -> list[Seed]:
    vendor, operation = endpoint.vendor, endpoint.operation
    count = len(spec.texts)
    tree = sound_body(endpoint, count, spec.width, spec.return_documents)
    declaration = endpoint.declaration

    def body(raw: bytes, status: int = 200, headers: Any = JSON_TYPE) -> WireReply:
        return WireReply(status, tuple(headers), raw)

    def edit(path: JsonPath, value: object) -> bytes:
        return encode(replaced(tree, path, lambda _: value))

    sentinel = BODY_SENTINEL.encode()
    out = [
        Seed("valid", body(encode(tree)), "sound"),
        Seed("[ x100000 ] x100000", body(DEEP_ARRAYS.data)),
        Seed('{"a": x100000', body(DEEP_OBJECTS.data)),
        Seed("[ x100000 ] x100000 with 500", body(DEEP_ARRAYS.data, 500)),
        Seed("[ x100000 unclosed", body(b"[" * 100_000)),
        Seed("empty 200", body(b"")),
        Seed("null 200", body(b"null")),
        Seed("html 200", body(b"<html>" + sentinel + b"</html>")),
        Seed("truncated 200", body(encode(tree)[: len(encode(tree)) // 2])),
        Seed("invalid UTF-8 200", body(encode(tree)[:-1] + b"\xff\xc3" + encode(tree)[-1:])),
        Seed("usage with 5000 digits", body(b'{"usage":{"total_tokens":1' + b"0" * 5000 + b"}}")),
        Seed(
            "gzip declared, not applied",
            body(encode(tree), headers=(*JSON_TYPE, (b"content-encoding", b"gzip"))),
        ),
        Seed(
            "gzip of [ x100000 ] x100000",
            body(
                gzip.compress(DEEP_ARRAYS.data, mtime=0),
                headers=(*JSON_TYPE, (b"content-encoding", b"gzip")),
            ),
        ),
        Seed("error body 400", body(encode(error_body(vendor)), 400)),
        Seed("error body 503", body(encode(error_body(vendor)), 503)),
        Seed("status 100", body(encode(error_body(vendor)), 100)),
        Seed("status 304", body(encode(error_body(vendor)), 304)),
        Seed("status 999", body(encode(error_body(vendor)), 999)),
        Seed(
            "transport ReadError before answering",
            WireReply(200, JSON_TYPE, encode(tree), TransportFailure(httpx.ReadError, None)),
        ),
        Seed(
            "body stream fails after 10 bytes",
            WireReply(
                200, JSON_TYPE, encode(tree), TransportFailure(httpx.RemoteProtocolError, 10)
            ),
        ),
    ]
    for value in (b"99999999999999999999999", b"1e999", b"-1", b"\xff\xfe", b"Mon, 01 Jan 99999"):
        out.append(
            Seed(
                f"429 with Retry-After {value!r}",
                body(encode(error_body(vendor)), 429, (*JSON_TYPE, (b"retry-after", value))),
            )
        )
    if isinstance(tree, dict):
        for key in ("id", "model"):
            lone = {**tree, key: "\ud800"}
            out.append(Seed(f"root {key} is a lone surrogate escape", body(encode(lone))))
        out.append(
            Seed("unknown key holds a lone surrogate", body(edit(("x_fuzz_note",), "\udfff")))
        )
        out.append(
            Seed(
                "unknown key holds invalid UTF-8",
                body(edit(("x_fuzz_note",), Raw(b'"\xed\xa0\x80"'))),
            )
        )
    paths = vectors_or_scores(endpoint, tree)
    first = paths[0]
    for token in NON_FINITE:
        out.append(Seed(f"{token!r} at {first}", body(edit(first, token)), "corrupt"))
    out.append(Seed(f"[ x100000 ] x100000 at {first}", body(edit(first, DEEP_ARRAYS))))
    by_index = declaration is None or declaration.vectors is VectorLayout.BY_INDEX
    if operation == "embeddings" and vendor not in ("cohere", "tei") and by_index:
        b64_path = first[:3]
        for bad in (float("nan"), float("inf")):
            out.append(
                Seed(
                    f"base64 float32 {bad} vector",
                    body(edit(b64_path, float32_base64([0.5, bad, 0.25][: spec.width]))),
                    "corrupt",
                )
            )
    if declaration is not None:
        out += declared_seeds(declaration, tree, body)
    elif operation == "rerank" and spec.return_documents and vendor != "cohere":
        echo = (*first[:-1], "text" if vendor == "tei" else "document")
        out.append(Seed("document echo is a lone surrogate", body(edit(echo, "\ud800"))))
    for figure in HUGE_FIGURES:
        edited = tree
        for path in endpoint.usage_paths:
            edited = replaced(edited, path, lambda _, v=figure: v)  # type: ignore[misc]
        if endpoint.usage_paths:
            out.append(Seed(f"usage {figure}", body(encode(edited)), "oversized", (figure,)))
    for path in endpoint.usage_paths:
        out.append(Seed(f"[ x100000 ] x100000 as usage {path}", body(edit(path, DEEP_ARRAYS))))
    return out


def declared_seeds(
    declaration: declared.Endpoint, tree: object, body: Callable[..., WireReply]
) -> list[Seed]:
    """Seeds of a declared endpoint's own rules: a lone surrogate as the document echo, a
    figure header of every kind (a sound body beside it), a vendor error code on a 4xx."""
    out: list[Seed] = []
    results = _dig(tree, declaration.results_at) if declaration.operation == "rerank" else None
    if declaration.document_key is not None and type(results) is list and results:
        echo: JsonPath = (*declaration.results_at, 0, declaration.document_key)
        lone = encode(replaced(tree, echo, lambda _: "\ud800"))
        out.append(Seed("document echo is a lone surrogate", body(lone)))
    if declaration.tokens_header is not None:
        name = declaration.tokens_header.encode("ascii")
        bare = tree
        if declaration.tokens_at is not None and type(tree) is dict:
            bare = replaced(tree, declaration.tokens_at, None)
        for value in (b"7", *HEADER_GARBAGE):
            reply = body(encode(bare), headers=(*JSON_TYPE, (name, value)))
            out.append(Seed(f"token header {value[:24]!r}", reply, "sound"))
    if declaration.error_code_header is not None:
        for code in ERROR_CODES:
            headers = (*JSON_TYPE, (b"x-amzn-errortype", code))
            error = encode({"message": f"no: {BODY_SENTINEL}"})
            out.append(Seed(f"400 coded {code[:24]!r}", body(error, 400, headers)))
    return out


def seed_spec(endpoint: Endpoint) -> CallSpec:
    """The seed corpus's call: two inputs, one where the endpoint takes one."""
    single = endpoint.declaration is not None and endpoint.declaration.single_input
    return CallSpec(tuple(f"{INPUT_SENTINEL} {n}" for n in range(1 if single else 2)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("endpoint", PROVIDED, ids=IDS)
def test_seed_corpus(endpoint: Endpoint, mode: str, tmp_path: Path) -> None:
    """Named hostile replies (the issue's repros among them), every class, sync and async."""
    tally = Tally(f"seed corpus {endpoint.label} {mode}")
    spec = seed_spec(endpoint)
    wire = MockWire()
    harness = Harness(tmp_path, mode, wire.transport)
    try:
        for seed in seeds(endpoint, spec):
            wire.script([seed.reply])
            run = harness.call(endpoint, spec)
            kinds = contract_findings(
                run, endpoint.operation, tally, input_count=len(spec.texts), top_k=spec.top_k
            )
            if seed.oracle == "corrupt":
                kinds += corruption_findings(run)
            elif seed.oracle == "oversized":
                kinds += oversized_findings(endpoint, run, seed.planted, tally)
            elif seed.oracle == "sound" and run.raised is not None:
                kinds.append(f"sound: a valid reply failed with {type(run.raised).__name__}")
            tally.add(
                kinds,
                lambda seed=seed: (  # type: ignore[misc]
                    f"[{seed.name}] {provider_repro(endpoint, mode, spec, (seed.reply,))}"
                ),
                len(seed.reply.body),
            )
    finally:
        harness.close()
    tally.assert_clean()


# --------------------------------------------------------------------------- byte-level framing


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("endpoint", PROVIDED, ids=IDS)
def test_provider_over_hostile_framing(
    endpoint: Endpoint, mode: str, raw_server: RawServer, tmp_path: Path
) -> None:
    """Illegal chunk headers, truncated chunked bodies, resets and short bodies over a real
    socket: the contract holds, and a well-formed answer still succeeds."""
    tally = Tally(f"raw framing {endpoint.label} {mode}")
    spec = seed_spec(endpoint)
    body = encode(sound_body(endpoint, len(spec.texts), spec.width))
    harness = Harness(tmp_path, mode, None)
    try:
        for script in raw_scripts(body):
            raw_server.script = script
            run = harness.call(endpoint, spec, origin=raw_server.origin)
            kinds = contract_findings(
                run, endpoint.operation, tally, input_count=len(spec.texts), top_k=spec.top_k
            )
            if script.sound and run.raised is not None:
                kinds.append(f"sound: a well-formed answer failed with {type(run.raised).__name__}")
            tally.add(
                kinds,
                lambda script=script: (  # type: ignore[misc]
                    f"{method_name(endpoint, mode)} {spec.describe(endpoint.operation)} | "
                    f"{script.describe()}"
                ),
                len(script.data),
            )
    finally:
        harness.close()
    tally.assert_clean()


# --------------------------------------------------------------------------- transport


REQUEST_HEADERS = {"content-type": "application/json", "authorization": f"Bearer {API_KEY}"}


def request_json(endpoint: Endpoint, spec: CallSpec) -> dict[str, Any]:
    """The vendor's own request for ``spec``, as a user's httpx code would send it (for a
    declared endpoint: as its declaration describes it)."""
    texts = list(spec.texts)
    vendor = endpoint.vendor
    if endpoint.declaration is not None:
        call = DeclaredCall(endpoint.declaration, spec.texts, QUERY, spec.top_k)
        sent: dict[str, Any] = json.loads(declared_request(endpoint.declaration, call)[1])
        return sent
    model = {"model": endpoint.model}
    if endpoint.operation == "embeddings":
        if vendor == "openai":
            return {**model, "input": texts}
        if vendor == "cohere":
            return {
                **model,
                "texts": texts,
                "input_type": "search_query",
                "embedding_types": ["float"],
            }
        if vendor == "jina":
            return {**model, "input": texts, "task": "retrieval.query"}
        if vendor == "voyage":
            return {**model, "input": texts, "input_type": "query"}
        return {"inputs": texts}
    if vendor == "tei":
        return {"query": QUERY, "texts": texts, "return_text": spec.return_documents}
    body: dict[str, Any] = {**model, "query": QUERY, "documents": texts}
    if spec.top_k is not None:
        body["top_k" if vendor == "voyage" else "top_n"] = spec.top_k
    if vendor != "cohere":
        body["return_documents"] = spec.return_documents
    return body


@dataclass(frozen=True)
class TransportCase:
    endpoint: Endpoint
    method: str
    url: str
    content: bytes
    recognised: bool
    reply: WireReply
    variant: str
    streamed: bool

    def describe(self, mode: str) -> str:
        shown = self.content[:120]
        read = "streamed raw" if self.streamed else "read"
        return (
            f"transport ({mode}) {self.method} {self.url} [{self.variant}, {read}] "
            f"request={shown!r} | reply: {self.reply.describe()}"
        )


@st.composite
def transport_cases(draw: st.DrawFn, wires: tuple[Endpoint, ...]) -> TransportCase:
    endpoint = draw(st.sampled_from(wires))
    spec = draw(call_specs(endpoint, chunking=False))
    origin = draw(st.sampled_from((endpoint.origin, INTERNAL_ORIGIN)))
    content = json.dumps(request_json(endpoint, spec)).encode()
    variant = draw(
        weighted(
            [
                (12, st.just("vendor call")),
                (1, st.just("GET")),
                (1, st.just("other route")),
                (1, st.just("body not JSON")),
                (1, st.just("body a JSON array")),
            ]
        )
    )
    method, route = "POST", endpoint.route
    if variant == "GET":
        method = "GET"
    elif variant == "other route":
        route = "/v1/chat/completions"
    elif variant == "body not JSON":
        content = b"not json " + INPUT_SENTINEL.encode()
    elif variant == "body a JSON array":
        content = json.dumps([INPUT_SENTINEL]).encode()
    reply = draw(endpoint_reply(endpoint, spec, len(spec.texts)))
    streamed = draw(st.integers(0, 3)) == 0
    recognised = variant == "vendor call"
    return TransportCase(
        endpoint, method, origin + route, content, recognised, reply, variant, streamed
    )


class _TeeSync(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, spy: Spy) -> None:
        self._inner, self._spy = inner, spy

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._inner
        except Exception as exc:
            self._spy.raised = type(exc).__name__
            raise

    def close(self) -> None:
        self._inner.close()


class _TeeAsync(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, spy: Spy) -> None:
        self._inner, self._spy = inner, spy

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._inner:
                yield chunk
        except Exception as exc:
            self._spy.raised = type(exc).__name__
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()


class Spy(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Wraps the inner transport and notes the exception type it raised, if any (while
    answering or while its body is read)."""

    def __init__(
        self, sync_inner: httpx.BaseTransport | None, async_inner: httpx.AsyncBaseTransport | None
    ) -> None:
        self._sync, self._async = sync_inner, async_inner
        self.raised: str | None = None

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert self._sync is not None
        try:
            response = self._sync.handle_request(request)
        except Exception as exc:
            self.raised = type(exc).__name__
            raise
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_TeeSync(response.stream, self),
            extensions=response.extensions,
            request=request,
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert self._async is not None
        try:
            response = await self._async.handle_async_request(request)
        except Exception as exc:
            self.raised = type(exc).__name__
            raise
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=_TeeAsync(response.stream, self),
            extensions=response.extensions,
            request=request,
        )

    def close(self) -> None:
        if self._sync is not None:
            self._sync.close()

    async def aclose(self) -> None:
        if self._async is not None:
            await self._async.aclose()


Outcome = tuple[object, ...]


Answer = tuple[int, tuple[tuple[str, str], ...], bytes]


def _read(client: httpx.Client, method: str, url: str, content: bytes, streamed: bool) -> Answer:
    if not streamed:
        response = client.request(method, url, content=content, headers=REQUEST_HEADERS)
        return response.status_code, tuple(response.headers.multi_items()), response.content
    request = client.build_request(method, url, content=content, headers=REQUEST_HEADERS)
    response = client.send(request, stream=True)
    try:
        body = b"".join(response.iter_raw())
    finally:
        response.close()
    return response.status_code, tuple(response.headers.multi_items()), body


async def _aread(
    client: httpx.AsyncClient, method: str, url: str, content: bytes, streamed: bool
) -> Answer:
    if not streamed:
        response = await client.request(method, url, content=content, headers=REQUEST_HEADERS)
        return response.status_code, tuple(response.headers.multi_items()), response.content
    request = client.build_request(method, url, content=content, headers=REQUEST_HEADERS)
    response = await client.send(request, stream=True)
    try:
        body = b"".join([chunk async for chunk in response.aiter_raw()])
    finally:
        await response.aclose()
    return response.status_code, tuple(response.headers.multi_items()), body


class TransportHarness:
    """A plain client (the caller without spanledger) and a recording one over a spy of the
    same kind of inner transport."""

    def __init__(self, tmp_path: Path, mode: str, wire: MockWire | None) -> None:
        self.loop = asyncio.new_event_loop() if mode == "async" else None
        self._numbers = itertools.count()
        self._dir = tmp_path
        self.sync_plain: httpx.Client | None = None
        self.sync_recording: httpx.Client | None = None
        self.async_plain: httpx.AsyncClient | None = None
        self.async_recording: httpx.AsyncClient | None = None
        options: dict[str, Any] = {"trust_env": False, "timeout": CLIENT_TIMEOUT}
        if self.loop is None:
            plain: httpx.BaseTransport = wire.transport if wire else httpx.HTTPTransport()
            inner: httpx.BaseTransport = wire.transport if wire else httpx.HTTPTransport()
            self.spy = Spy(inner, None)
            self.sync_plain = httpx.Client(transport=plain, **options)
            self.sync_recording = httpx.Client(
                transport=spanledger.instrumentation.transport(self.spy), **options
            )
        else:
            aplain: httpx.AsyncBaseTransport = (
                wire.transport if wire else httpx.AsyncHTTPTransport()
            )
            ainner: httpx.AsyncBaseTransport = (
                wire.transport if wire else httpx.AsyncHTTPTransport()
            )
            self.spy = Spy(None, ainner)
            self.async_plain = httpx.AsyncClient(transport=aplain, **options)
            self.async_recording = httpx.AsyncClient(
                transport=spanledger.instrumentation.async_transport(self.spy), **options
            )

    def next_log(self) -> Path:
        return self._dir / f"transport-{next(self._numbers)}.jsonl"

    def close(self) -> None:
        for client in (self.sync_plain, self.sync_recording):
            if client is not None:
                client.close()
        if self.loop is not None:
            for aclient in (self.async_plain, self.async_recording):
                if aclient is not None:
                    self.loop.run_until_complete(aclient.aclose())
            self.loop.close()

    def outcome(
        self, recording: bool, method: str, url: str, content: bytes, streamed: bool
    ) -> Outcome:
        """What the caller gets: status, headers and body (decoded, as ``client.request``
        reads it, or the raw bytes of a streamed read), or the exception type it raised."""
        try:
            if self.loop is None:
                client = self.sync_recording if recording else self.sync_plain
                assert client is not None
                answer = _read(client, method, url, content, streamed)
            else:
                aclient = self.async_recording if recording else self.async_plain
                assert aclient is not None
                answer = self.loop.run_until_complete(
                    _aread(aclient, method, url, content, streamed)
                )
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:
            return ("raised", type(exc).__name__)
        return ("answered", *answer)

    def run(
        self,
        endpoint: Endpoint,
        method: str,
        url: str,
        content: bytes,
        recognised: bool,
        tally: Tally,
        before: Callable[[], None],
        streamed: bool = False,
    ) -> list[str]:
        before()
        baseline = self.outcome(False, method, url, content, streamed)
        before()
        self.spy.raised = None
        capture = Capture(self.next_log())
        with spanledger.use(capture.recorder):
            recorded = self.outcome(True, method, url, content, streamed)
        log, data, kinds = capture.finish()
        ended = f"raised {recorded[1]}" if recorded[0] == "raised" else f"answered {recorded[1]}"
        tally.outcomes[f"{'recognised' if recognised else 'passed through'}, {ended}"] += 1
        if self.spy.raised is not None:
            if recorded != ("raised", self.spy.raised):
                kinds.append(
                    "transport: the caller did not get the inner transport's exception type"
                )
        elif recorded != baseline:
            kinds.append("transport: the caller's outcome differs from the one without spanledger")
        expected = 1 if recognised else 0
        events = capture.events
        if len(events) != expected:
            what = "a recognised vendor call" if recognised else "an unrecognised request"
            kinds.append(f"events: {len(events)} events for {what}")
        failed = (EmbeddingFailedEvent, RerankFailedEvent)
        for event in events:
            kinds += leaks("the event's model_dump_json()", event_json(event, tally))
            kinds += event_usage_findings(event)
            wanted = "embedding" if endpoint.operation == "embeddings" else "rerank"
            if not event.kind.startswith(wanted):
                kinds.append(f"events: a {endpoint.operation} call recorded as {event.kind}")
            if recorded[0] == "raised" and not isinstance(event, failed):
                kinds.append("events: the caller got an exception but the event is a success")
        kinds += log_findings(events[0] if len(events) == 1 else None, log, data, len(events))
        return kinds


WIRE_GROUPS = {"first-five-vendors": ENDPOINTS, "declared": DECLARED}
"""The transport fuzz's endpoints, in two groups of one budget each (so the later endpoints
do not thin out the first ones' cases)."""


@pytest.mark.parametrize("group", list(WIRE_GROUPS))
@pytest.mark.parametrize("mode", MODES)
def test_transport_wire_fuzz(mode: str, group: str, tmp_path: Path) -> None:
    """The recording transport over hostile replies, every endpoint, sync and async."""
    tally = Tally(f"transport fuzz {group} {mode}")
    wire = MockWire()
    harness = TransportHarness(tmp_path, mode, wire)
    try:

        @fuzz_settings(600)
        @given(case=transport_cases(WIRE_GROUPS[group]))
        def run(case: TransportCase) -> None:
            kinds = harness.run(
                case.endpoint,
                case.method,
                case.url,
                case.content,
                case.recognised,
                tally,
                lambda: wire.script([case.reply]),
                case.streamed,
            )
            tally.add(kinds, lambda: case.describe(mode), len(case.reply.body))

        run()
    finally:
        harness.close()
    tally.assert_clean()


@pytest.mark.parametrize("mode", MODES)
def test_transport_over_hostile_framing(mode: str, raw_server: RawServer, tmp_path: Path) -> None:
    """The recording transport over a real inner transport and hostile framing."""
    tally = Tally(f"transport raw framing {mode}")
    harness = TransportHarness(tmp_path, mode, None)
    try:
        for endpoint in WIRES:
            spec = seed_spec(endpoint)
            content = json.dumps(request_json(endpoint, spec)).encode()
            body = encode(sound_body(endpoint, len(spec.texts), spec.width))
            url = raw_server.origin + endpoint.route
            for script in raw_scripts(body):

                def before(script: Any = script) -> None:
                    raw_server.script = script

                kinds = harness.run(endpoint, "POST", url, content, True, tally, before)
                tally.add(
                    kinds,
                    lambda script=script, endpoint=endpoint: (  # type: ignore[misc]
                        f"transport ({mode}) POST {endpoint.route} ({endpoint.label} body) | "
                        f"{script.describe()}"
                    ),
                    len(script.data),
                )
    finally:
        harness.close()
    tally.assert_clean()


@pytest.mark.parametrize("mode", MODES)
def test_transport_seed_corpus(mode: str, tmp_path: Path) -> None:
    """The provider seed corpus (deep JSON, lone surrogates, non-finite numbers, oversized
    figures, failing transports...) through the recording transport, every endpoint."""
    tally = Tally(f"transport seed corpus {mode}")
    wire = MockWire()
    harness = TransportHarness(tmp_path, mode, wire)
    try:
        for endpoint in WIRES:
            spec = seed_spec(endpoint)
            content = json.dumps(request_json(endpoint, spec)).encode()
            for origin in (endpoint.origin, INTERNAL_ORIGIN):
                url = origin + endpoint.route
                for seed in seeds(endpoint, spec):

                    def before(seed: Seed = seed) -> None:
                        wire.script([seed.reply])

                    kinds = harness.run(endpoint, "POST", url, content, True, tally, before)
                    tally.add(
                        kinds,
                        lambda seed=seed, url=url, endpoint=endpoint: (  # type: ignore[misc]
                            f"[{seed.name}] transport ({mode}) POST {url} "
                            f"({endpoint.label} body) | reply: {seed.reply.describe()}"
                        ),
                        len(seed.reply.body),
                    )
    finally:
        harness.close()
    tally.assert_clean()
