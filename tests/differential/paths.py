"""The recording paths the differential test drives, each answering from one in-process server.

For one ``Case`` (a call and the reply it gets), every path that can carry the reply makes the
call once and yields the one event it recorded:

- ``provider``: spanledger's own provider class for the endpoint (``PROVIDERS``, or in another
  mode ``VARIANT_PROVIDERS``), over ``httpx.MockTransport``, for every endpoint in
  ``ENDPOINTS`` and ``VARIANT_ENDPOINTS``;
- ``transport``: the recording httpx transport, posting the exact body the provider sent to
  the same URL; for an endpoint only SDKs reach (``SDK_ONLY_ENDPOINTS``), the request its
  declaration describes (``declared_request``) to its route on ``BASE``;
- ``manual``: ``record_embedding`` / ``record_rerank`` with ``succeeded(raw=<body bytes>,
  headers=<the reply's>)`` (and ``document_ids=`` for results named by id), for 2xx replies only
  (it is not told the status); the body as a client reads it, so one whose declared content
  encoding does not decode raises the client's ``DecodingError`` inside the block instead;
- ``openai-sdk``, ``azure-sdk``, ``cohere-sdk``, ``voyage-sdk``, ``bedrock-sdk``,
  ``genai-sdk``, ``mistral-sdk``, ``ollama-sdk``: the official SDK (openai's ``OpenAI`` and
  ``AzureOpenAI``, cohere, voyageai, boto3, google-genai, mistralai, ollama), instrumented with
  ``spanledger.instrument``, wherever the endpoint has one (``SDKS``, by endpoint name).

The SDK clients and the providers are built once per ``Rig`` and answer whatever reply the
rig's ``Server`` holds at the time: an ``httpx.MockTransport`` for everything on httpx,
httpx2's for the Mistral SDK, a ``before-send`` handler on each boto3 client (botocore takes
the ``AWSResponse`` it returns and sends nothing), and a ``requests`` adapter for the Voyage
SDK, mounted on this thread's Voyage session for the rig's lifetime (the session another test
may have made is put back afterwards). Nothing leaves the process. SDK retries are off, and
every path that sends is checked to have sent exactly one request.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import boto3  # type: ignore[import-untyped]
import cohere
import google.oauth2.credentials
import httpx
import httpx2
import ollama
import openai
import requests
import urllib3
import voyageai.api_resources.api_requestor as voyage_requestor
from botocore.awsrequest import AWSResponse  # type: ignore[import-untyped]
from botocore.config import Config  # type: ignore[import-untyped]
from google import genai
from google.genai import types as genai_types
from mistralai.client import Mistral
from mistralai.client.utils import BackoffStrategy, RetryConfig
from voyageai.client import Client as VoyageClient

import spanledger
from spanledger import Event, ProviderError, Recorder
from spanledger.instrumentation import transport
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
from spanledger.wire.endpoints import ENDPOINTS, Endpoint, Operation, Vendor
from spanledger.wire.http import join_route
from tests.differential.bodies import Call, Case, Reply

__all__ = [
    "BASE",
    "CASES_RUN",
    "KNOWN_SEEN",
    "MODEL",
    "MODELS",
    "PATHS_RUN",
    "PROJECT",
    "PROVIDERS",
    "SDKS",
    "VARIANT_PROVIDERS",
    "Key",
    "Rig",
    "SdkPath",
    "Seen",
    "call_model",
    "declared_request",
    "error_carriers",
    "has_provider",
    "model_for",
    "path_names",
    "rig_for_module",
]

BASE = "https://vendor.test"
"""Every path's origin: no vendor's own host, so no provider refuses a call for want of a key
(``Endpoint.serves_host``); the transport is told the vendor for it (``vendors={BASE: ...}``).
The one exception: ``openai.OpenAI`` aimed at another vendor, which only the URL it requests
tells apart (an Azure host, Ollama's port, Mistral's host: ``_openai_on``)."""
MODEL = "m"
API_KEY = "k"
PROJECT = "p"

MODELS: dict[str, str] = {
    "bedrock-titan-embed": "amazon.titan-embed-text-v2:0",
    "bedrock-cohere-embed": "cohere.embed-v4:0",
    "bedrock-nova-embed": "amazon.nova-2-multimodal-embeddings-v1:0",
    "bedrock-cohere-rerank": "cohere.rerank-v3-5:0",
    "bedrock-rerank": "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0",
    "vertex-embed": "gemini-embedding-2",
    "vertex-express-embed": "gemini-embedding-2",
}
"""The model of a call, by endpoint name, where the model chooses among a vendor's endpoints
(Bedrock: ``endpoint_for`` reads the model's prefix; google-genai sends a Vertex call of a
Gemini embedding model to ``:embedContent``, of any other to ``:predict``); ``MODEL``
elsewhere."""


def model_for(endpoint: Endpoint) -> str:
    return MODELS.get(endpoint.name, MODEL)


def call_model(call: Call) -> str:
    """The model ``call`` names on the paths that name one (the transport's request for an
    endpoint no provider calls, ``record_*``)."""
    return call.model if call.model is not None else model_for(call.endpoint)


Key = tuple[Vendor, Operation]

CASES_RUN: Counter[str] = Counter()
"""Cases run per endpoint, and per endpoint and body family, for the end-of-run summary."""

KNOWN_SEEN: Counter[str] = Counter()
"""How often each known divergence turned up in the fuzz."""

PATHS_RUN: Counter[tuple[str, str, bool]] = Counter()
"""Cases each path carried, by endpoint name, path and whether it handed the body over (an
SDK that raised on a 2xx body did not), for the end-of-run summary."""
ProviderClass = Callable[..., EmbeddingProvider | RerankProvider]

PROVIDERS: dict[Key, ProviderClass] = {
    (Vendor.GEMINI, "embeddings"): GeminiEmbeddings,
    (Vendor.VERTEX, "embeddings"): functools.partial(VertexEmbeddings, project=PROJECT),
    (Vendor.VERTEX, "rerank"): functools.partial(VertexReranker, project=PROJECT),
    (Vendor.AZURE, "embeddings"): AzureOpenAIEmbeddings,  # base_url=BASE: it has no default
    (Vendor.MISTRAL, "embeddings"): MistralEmbeddings,
    (Vendor.OLLAMA, "embeddings"): OllamaEmbeddings,
    (Vendor.OPENAI, "embeddings"): OpenAIEmbeddings,
    (Vendor.COHERE, "embeddings"): CohereEmbeddings,
    (Vendor.COHERE, "rerank"): CohereReranker,
    (Vendor.JINA, "embeddings"): JinaEmbeddings,
    (Vendor.JINA, "rerank"): JinaReranker,
    (Vendor.TEI, "embeddings"): TEIEmbeddings,
    (Vendor.TEI, "rerank"): TEIReranker,
    (Vendor.VOYAGE, "embeddings"): VoyageEmbeddings,
    (Vendor.VOYAGE, "rerank"): VoyageReranker,
}
"""Our provider class for each endpoint: every endpoint in ``ENDPOINTS`` must have one."""

VARIANT_PROVIDERS: dict[str, ProviderClass] = {
    "vertex-express-predict": functools.partial(VertexEmbeddings, api_key=API_KEY),
}
"""Our provider class in another mode, by the name of the endpoint it then calls: every endpoint
in ``VARIANT_ENDPOINTS`` must have one (``VertexEmbeddings`` with no project is Vertex AI
express mode)."""


def has_provider(endpoint: Endpoint) -> bool:
    """Whether our provider class calls ``endpoint`` (not another of its vendor's)."""
    default = ENDPOINTS.get((endpoint.vendor, endpoint.operation)) is endpoint
    return default or endpoint.name in VARIANT_PROVIDERS


@dataclass(frozen=True)
class Seen:
    """What one path recorded for a case. ``carried`` is false for an SDK that raised on a
    2xx body itself: it never handed the body over, so only the event's kind is judged."""

    path: str
    event: Event
    carried: bool = True
    knows_status: bool = True
    """Whether the path is told the HTTP status of a 2xx body (``manual`` is not)."""


class Server:
    """Answers every request with the reply it holds, and keeps the request bodies."""

    def __init__(self) -> None:
        self.reply: Reply | None = None
        self.requests: list[tuple[str, bytes]] = []
        self.read_first = False
        """Answer with responses already read, as test tools build them: httpx's (and
        httpx2's) ``Response(content=...)`` reads the body at once, and a ``requests``
        response is given its body whole, decoded. For bodies that decode only: one that
        does not cannot be built so."""

    def _next(self, url: str, body: bytes) -> Reply:
        reply = self.reply
        assert reply is not None, "no reply set"
        self.requests.append((url, body))
        return reply

    def handle(self, request: httpx.Request) -> httpx.Response:
        reply = self._next(str(request.url), request.read())
        if self.read_first:
            return httpx.Response(reply.status, headers=list(reply.headers), content=reply.body)
        body = httpx.ByteStream(reply.body)  # read by the client, as off a socket
        return httpx.Response(reply.status, headers=list(reply.headers), stream=body)

    def handle_httpx2(self, request: httpx2.Request) -> httpx2.Response:
        """``handle`` for the httpx fork the Mistral SDK sends through."""
        reply = self._next(str(request.url), request.read())
        if self.read_first:
            return httpx2.Response(reply.status, headers=list(reply.headers), content=reply.body)
        body = httpx2.ByteStream(reply.body)
        return httpx2.Response(reply.status, headers=list(reply.headers), stream=body)

    def botocore_send(self, request: Any, **_: Any) -> Any:
        """A ``before-send`` handler: botocore takes the ``AWSResponse`` it returns for the
        answer and sends nothing. Every handler spanledger registers still runs around it
        (``before-call``, ``request-created``: the request is built and signed as for the
        wire; ``response-received``, ``after-call`` / ``after-call-error``: the response is
        converted and parsed from it as from urllib3's), and InvokeModel's body is a
        ``StreamingBody`` over the raw stream, as botocore makes it."""
        body = request.body
        if isinstance(body, str):
            body = body.encode("utf-8")
        elif not isinstance(body, bytes):
            body = body.read() if hasattr(body, "read") else b""
        reply = self._next(request.url, body)
        return AWSResponse(request.url, reply.status, list(reply.headers), _RawStream(reply.body))

    def voyage_adapter(self) -> requests.adapters.BaseAdapter:
        server = self

        class Adapter(requests.adapters.BaseAdapter):
            def send(self, request: requests.PreparedRequest, *args: Any, **kw: Any) -> Any:
                body = request.body or b""
                sent = body.encode("utf-8") if isinstance(body, str) else bytes(body)
                reply = server._next(request.url or "", sent)
                response = requests.Response()
                response.status_code = reply.status
                response._content = _as_read(reply) if server.read_first else reply.body
                encoded = reply.header("content-encoding") is not None
                if encoded and not server.read_first:  # requests decodes it, reading raw
                    response._content = False  # type: ignore[assignment]  # unread, to requests
                    response.raw = urllib3.HTTPResponse(
                        body=io.BytesIO(reply.body),
                        headers=dict(reply.headers),
                        status=reply.status,
                        preload_content=False,
                        decode_content=True,
                    )
                response.headers.update(dict(reply.headers))
                response.encoding = "utf-8"
                response.url = request.url or ""
                response.request = request
                return response

            def close(self) -> None:
                return None

        return Adapter()


def _as_read(reply: Reply) -> bytes:
    """The body as the caller's httpx client hands it over: decoded by the content encoding
    it declares; one that does not decode raises ``httpx.DecodingError`` inside the
    ``record_*`` block, which records it, as a caller's block would."""
    stream = httpx.ByteStream(reply.body)
    return httpx.Response(reply.status, headers=list(reply.headers), stream=stream).read()


class _RawStream(io.BytesIO):
    """The raw stream of a botocore response, as urllib3's is read: ``read`` for a
    ``StreamingBody``, ``stream`` for ``AWSResponse.content``."""

    def stream(self, amt: int = 2**16, decode_content: bool | None = None) -> Iterator[bytes]:
        while chunk := self.read(amt):
            yield chunk


@dataclass(frozen=True)
class SdkPath:
    """One official SDK method for one endpoint."""

    name: str
    make: Callable[[Server], Any]
    call: Callable[[Any, Call], object]
    knows_status: bool = True
    """Whether the instrumentation hears a 2xx body's status on this SDK (every SDK here
    does: Voyage's requestor hands over the decoded body and headers only, and its
    session's response hook tells the status)."""


def _openai_on(base_url: str) -> Callable[[Server], openai.OpenAI]:
    """``openai.OpenAI`` at ``base_url``: the URL it requests tells the vendor (an Azure host's
    ``/openai/v1/``, Ollama's port, Mistral's host; anything else is OpenAI's)."""

    def make(server: Server) -> openai.OpenAI:
        http = httpx.Client(transport=httpx.MockTransport(server.handle))
        return openai.OpenAI(
            api_key=API_KEY,
            base_url=base_url,
            max_retries=0,
            http_client=http,  # type: ignore[arg-type]  # the SDK takes plain httpx at runtime
        )

    return make


_openai = _openai_on(f"{BASE}/v1")


def _cohere(server: Server) -> cohere.ClientV2:
    http = httpx.Client(transport=httpx.MockTransport(server.handle))
    return cohere.ClientV2(api_key=API_KEY, base_url=BASE, max_retries=0, httpx_client=http)


def _voyage(server: Server) -> VoyageClient:
    return VoyageClient(api_key=API_KEY, base_url=f"{BASE}/v1", max_retries=0)


@functools.cache
def _boto_session() -> Any:
    """One boto3 session for every Bedrock client (its loaded service models are shared)."""
    return boto3.session.Session()


def _bedrock(service: str) -> Callable[[Server], Any]:
    """A ``service`` client answered by ``server`` through its ``before-send`` event (nothing
    leaves the process), retries off."""

    def make(server: Server) -> Any:
        client = _boto_session().client(
            service,
            region_name="us-west-2",
            endpoint_url=BASE,
            aws_access_key_id="test",
            aws_secret_access_key=API_KEY,
            config=Config(retries={"total_max_attempts": 1}),
        )
        service_id = client.meta.service_model.service_id.hyphenize()
        client.meta.events.register(f"before-send.{service_id}", server.botocore_send)
        return client

    return make


def _invoke(body: Callable[[Call], dict[str, Any]]) -> Callable[[Any, Call], object]:
    """``invoke_model`` with the JSON body ``body`` makes for the call, its answer's
    ``StreamingBody`` read to the end as a caller reads it."""

    def invoke(client: Any, call: Call) -> object:
        response = client.invoke_model(
            modelId=call_model(call),
            body=json.dumps(body(call)),
            contentType="application/json",
            accept="application/json",
        )
        return response["body"].read()

    return invoke


def _top_n(call: Call, key: str) -> dict[str, Any]:
    return {} if call.top_k is None else {key: call.top_k}


def _titan_body(call: Call) -> dict[str, Any]:
    return {"inputText": call.items[0]}


def _bedrock_cohere_body(call: Call) -> dict[str, Any]:
    return {"texts": list(call.items), "input_type": "search_document"}


def _nova_body(call: Call) -> dict[str, Any]:
    return {
        "taskType": "SINGLE_EMBEDDING",
        "singleEmbeddingParams": {
            "embeddingPurpose": "GENERIC_INDEX",
            "text": {"truncationMode": "END", "value": call.items[0]},
        },
    }


def _bedrock_cohere_rerank_body(call: Call) -> dict[str, Any]:
    body = {"query": call.query, "documents": list(call.items), "api_version": 2}
    return {**body, **_top_n(call, "top_n")}


def _agent_rerank(client: Any, call: Call) -> object:
    configuration = {
        "modelConfiguration": {"modelArn": call_model(call)},
        **_top_n(call, "numberOfResults"),
    }
    return client.rerank(
        queries=[{"type": "TEXT", "textQuery": {"text": call.query}}],
        sources=[
            {
                "type": "INLINE",
                "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": text}},
            }
            for text in call.items
        ],
        rerankingConfiguration={
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": configuration,
        },
    )


_GENAI_RETRIES = genai_types.HttpRetryOptions(attempts=1)


def _gemini(server: Server) -> genai.Client:
    http = httpx.Client(transport=httpx.MockTransport(server.handle))
    options = genai_types.HttpOptions(
        base_url=BASE, httpx_client=http, retry_options=_GENAI_RETRIES
    )
    return genai.Client(api_key=API_KEY, http_options=options)


def _vertex(server: Server) -> genai.Client:
    http = httpx.Client(transport=httpx.MockTransport(server.handle))
    options = genai_types.HttpOptions(
        base_url=BASE, httpx_client=http, retry_options=_GENAI_RETRIES
    )
    credentials = google.oauth2.credentials.Credentials(token=API_KEY)  # type: ignore[no-untyped-call]
    return genai.Client(
        vertexai=True,
        project=PROJECT,
        location="us-central1",
        credentials=credentials,
        http_options=options,
    )


def _vertex_express(server: Server) -> genai.Client:
    """Vertex AI express mode: an API key, and no project or location in the path."""
    http = httpx.Client(transport=httpx.MockTransport(server.handle))
    options = genai_types.HttpOptions(
        base_url=BASE, httpx_client=http, retry_options=_GENAI_RETRIES
    )
    return genai.Client(vertexai=True, api_key=API_KEY, http_options=options)


def _genai_embed(client: Any, call: Call) -> object:
    return client.models.embed_content(model=call_model(call), contents=list(call.items))


def _mistral(server: Server) -> Mistral:
    http = httpx2.Client(transport=httpx2.MockTransport(server.handle_httpx2))
    no_retries = RetryConfig("none", BackoffStrategy(1, 1, 1.0, 1), False)
    return Mistral(api_key=API_KEY, server_url=BASE, client=http, retry_config=no_retries)


def _ollama(server: Server) -> ollama.Client:
    return ollama.Client(host=BASE, transport=httpx.MockTransport(server.handle))


def _azure(server: Server) -> openai.AzureOpenAI:
    # the SDK takes plain httpx at runtime (it is typed for httpx2's client)
    http: Any = httpx.Client(transport=httpx.MockTransport(server.handle))
    return openai.AzureOpenAI(
        azure_endpoint=BASE,
        api_version="2024-10-21",
        api_key=API_KEY,
        max_retries=0,
        http_client=http,
    )


def _openai_embed(client: Any, call: Call) -> object:
    return client.embeddings.create(
        model=call_model(call), input=list(call.items), encoding_format="float"
    )


def _cohere_rerank(client: Any, call: Call) -> object:
    options: dict[str, Any] = {} if call.top_k is None else {"top_n": call.top_k}
    return client.rerank(model=MODEL, query=call.query, documents=list(call.items), **options)


SDKS: dict[str, tuple[SdkPath, ...]] = {
    "openai-embeddings": (
        SdkPath(
            "openai-sdk",
            _openai,
            lambda c, call: c.embeddings.create(
                model=MODEL, input=list(call.items), encoding_format="float"
            ),
        ),
    ),
    "cohere-embed": (
        SdkPath(
            "cohere-sdk",
            _cohere,
            lambda c, call: c.embed(
                model=MODEL,
                texts=list(call.items),
                input_type="search_document",
                embedding_types=["float"],
            ),
        ),
    ),
    "cohere-rerank": (SdkPath("cohere-sdk", _cohere, _cohere_rerank),),
    "voyageai-embeddings": (
        SdkPath(
            "voyage-sdk",
            _voyage,
            lambda c, call: c.embed(list(call.items), model=MODEL),
        ),
    ),
    "voyageai-rerank": (
        SdkPath(
            "voyage-sdk",
            _voyage,
            lambda c, call: c.rerank(call.query, list(call.items), model=MODEL, top_k=call.top_k),
        ),
    ),
    # botocore never parses InvokeModel's body (the caller reads the stream), so every 2xx is
    # carried; it parses Rerank's against its output shape (and raises on a body of another)
    "bedrock-titan-embed": (
        SdkPath("bedrock-sdk", _bedrock("bedrock-runtime"), _invoke(_titan_body)),
    ),
    "bedrock-cohere-embed": (
        SdkPath("bedrock-sdk", _bedrock("bedrock-runtime"), _invoke(_bedrock_cohere_body)),
    ),
    "bedrock-nova-embed": (
        SdkPath("bedrock-sdk", _bedrock("bedrock-runtime"), _invoke(_nova_body)),
    ),
    "bedrock-cohere-rerank": (
        SdkPath("bedrock-sdk", _bedrock("bedrock-runtime"), _invoke(_bedrock_cohere_rerank_body)),
    ),
    "bedrock-rerank": (SdkPath("bedrock-sdk", _bedrock("bedrock-agent-runtime"), _agent_rerank),),
    "gemini-batch-embed": (SdkPath("genai-sdk", _gemini, _genai_embed),),
    "vertex-predict": (SdkPath("genai-sdk", _vertex, _genai_embed),),
    "vertex-embed": (SdkPath("genai-sdk", _vertex, _genai_embed),),
    "vertex-express-predict": (SdkPath("genai-sdk", _vertex_express, _genai_embed),),
    "vertex-express-embed": (SdkPath("genai-sdk", _vertex_express, _genai_embed),),
    # the Mistral SDK validates its typed result: a 2xx body without ``id``, ``model`` or
    # ``usage`` is raised on (not carried), so it is compared on the bodies that have all three
    "mistral-embeddings": (
        SdkPath(
            "mistral-sdk",
            _mistral,
            lambda c, call: c.embeddings.create(model=MODEL, inputs=list(call.items)),
        ),
        SdkPath("openai-sdk", _openai_on("https://api.mistral.ai/v1"), _openai_embed),
    ),
    "ollama-embed": (
        SdkPath(
            "ollama-sdk",
            _ollama,
            lambda c, call: c.embed(model=MODEL, input=list(call.items)),
        ),
    ),
    "ollama-legacy-embeddings": (
        SdkPath(
            "ollama-sdk",
            _ollama,
            lambda c, call: c.embeddings(model=MODEL, prompt=call.items[0]),
        ),
    ),
    "ollama-v1-embeddings": (
        SdkPath("openai-sdk", _openai_on("http://vendor.test:11434/v1"), _openai_embed),
    ),
    "azure-deployment-embeddings": (SdkPath("azure-sdk", _azure, _openai_embed),),
    "azure-v1-embeddings": (
        SdkPath(
            "openai-sdk", _openai_on("https://vendor.openai.azure.com/openai/v1"), _openai_embed
        ),
    ),
}
"""The instrumented SDK methods that call each endpoint, by ``Endpoint.name`` (none for Jina and
TEI). Each makes the call as a user would (boto3's InvokeModel answer is a ``StreamingBody``:
it is read to the end), through a client made by the SDK's ordinary constructor with its
retries off and its HTTP pointed at the rig's server. Not reached: ``gemini-embed``
(google-genai's Gemini API backend sends every ``embed_content`` to ``:batchEmbedContents``),
``cohere-v1-embed`` (no path yet). The model a call names is ``call_model``'s: google-genai
picks Vertex's route by it (``MODELS``). An entry for an endpoint only SDKs reach also brings
its error statuses into the differential test (``error_carriers``)."""


def error_carriers(endpoint: Endpoint) -> int:
    """How many paths carry an error status for ``endpoint`` (``manual`` carries none: it is
    told a failure's category, never reads one)."""
    return int(has_provider(endpoint)) + 1 + len(SDKS.get(endpoint.name, ()))


def _placed(path: tuple[str, ...], value: object, into: Any = None) -> Any:
    """``into`` (a fresh object when ``None``) with ``value`` at ``path``; a digit step is a
    list position (``("queries", "0", "textQuery", "text")``)."""
    if not path:
        return value
    head, rest = path[0], path[1:]
    if head.isdigit():
        positions: list[Any] = into if type(into) is list else []
        while len(positions) <= int(head):
            positions.append(None)
        positions[int(head)] = _placed(rest, value, positions[int(head)])
        return positions
    keys: dict[str, Any] = into if type(into) is dict else {}
    keys[head] = _placed(rest, value, keys.get(head))
    return keys


def declared_request(endpoint: Endpoint, call: Call) -> tuple[str, bytes]:
    """The URL on ``BASE`` and the JSON body an SDK would send for ``call``, built from the
    endpoint's declaration alone (for an endpoint no provider class calls)."""
    model = model_for(endpoint)
    route = endpoint.route
    if endpoint.route_pattern is not None:
        route = endpoint.route_with(
            model=model, project=PROJECT, location="us-central1", config="default_config"
        )
    body: dict[str, Any] = {}
    for path in endpoint.selects_by[:1]:  # the keys that tell the endpoint apart
        if path != endpoint.items_at and path != endpoint.query_at:
            body = _placed(path, {}, body)
    texts = list(call.items)
    ids = call.document_ids
    items: list[Any] = []
    for position, text in enumerate(texts):
        item = _placed(endpoint.item_text_at, text)
        if ids is not None and endpoint.result_ids_at is not None:
            item = _placed(endpoint.result_ids_at, ids[position], item)
        items.append(item)
    assert endpoint.items_at is not None
    body = _placed(endpoint.items_at, items[0] if endpoint.single_input else items, body)
    if endpoint.request_model_at is not None:
        body = _placed(endpoint.request_model_at, model, body)
    if endpoint.operation == "rerank":
        body = _placed(endpoint.query_at, call.query, body)
        if call.top_k is not None and endpoint.top_k_at is not None:
            body = _placed(endpoint.top_k_at, call.top_k, body)
    return join_route(BASE, route), json.dumps(body).encode()


@contextlib.contextmanager
def _voyage_session(server: Server) -> Iterator[None]:
    """Route this thread's Voyage SDK traffic to ``server``; the thread's own session (another
    test may have made one) is put back afterwards."""
    context = voyage_requestor._thread_context
    saved = {
        name: getattr(context, name)
        for name in ("session", "session_create_time")
        if hasattr(context, name)
    }
    session = requests.Session()
    session.mount("https://", server.voyage_adapter())
    context.session = session
    context.session_create_time = math.inf  # never renewed by the SDK (it does so at 180 s)
    try:
        yield
    finally:
        session.close()
        for name in ("session", "session_create_time"):
            if name in saved:
                setattr(context, name, saved[name])
            elif hasattr(context, name):
                delattr(context, name)


@dataclass
class Rig:
    """The server, the recorder, and every path's client, made once per module."""

    server: Server = field(default_factory=Server)
    events: list[Event] = field(default_factory=list)
    _providers: dict[str, EmbeddingProvider | RerankProvider] = field(default_factory=dict)
    _transports: dict[Vendor, httpx.Client] = field(default_factory=dict)
    _sdks: dict[tuple[str, str], Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.recorder = Recorder([self.events.append])

    def close(self) -> None:
        for provider in self._providers.values():
            provider.close()
        for client in self._transports.values():
            client.close()
        for sdk in self._sdks.values():
            spanledger.uninstrument(sdk)

    def _one_event(self, path: str, run: Callable[[], None]) -> Event:
        self.events.clear()
        with spanledger.use(self.recorder):
            run()
        assert len(self.events) == 1, f"{path}: {len(self.events)} events, not one"
        return self.events[0]

    def provider(self, endpoint: Endpoint) -> EmbeddingProvider | RerankProvider:
        name = endpoint.name
        if name not in self._providers:
            http = httpx.Client(transport=httpx.MockTransport(self.server.handle))
            make = VARIANT_PROVIDERS.get(name) or PROVIDERS[endpoint.vendor, endpoint.operation]
            self._providers[name] = make(MODEL, base_url=BASE, http_client=http)
        return self._providers[name]

    @staticmethod
    def check_url(endpoint: Endpoint, url: str) -> None:
        """The provider called ``endpoint``'s route on ``BASE`` (a templated one filled in,
        naming the call's model where it names one)."""
        sent = httpx.URL(url)
        assert f"{sent.scheme}://{sent.host}" == BASE, url
        pattern = endpoint.route_pattern
        if pattern is None:
            assert url == join_route(BASE, endpoint.route), url
            return
        assert pattern.search(sent.path), url
        if endpoint.model_in_route:
            assert endpoint.route_model(sent.path) == model_for(endpoint), url

    def run_provider(self, case: Case) -> tuple[Seen, str, bytes]:
        """The provider's event, and the URL and body it sent."""
        provider = self.provider(case.endpoint)
        call = case.call
        self.server.reply = case.reply
        self.server.requests.clear()

        def run() -> None:
            with contextlib.suppress(ProviderError):
                if isinstance(provider, EmbeddingProvider):
                    provider.embed(list(call.items))
                else:
                    provider.rerank(call.query, list(call.items), top_k=call.top_k)

        event = self._one_event("provider", run)
        assert len(self.server.requests) == 1, "the provider sent more than one request"
        url, body = self.server.requests[0]
        self.check_url(case.endpoint, url)
        return Seen("provider", event), url, body

    def run_transport(self, case: Case, url: str, body: bytes) -> Seen:
        vendor = case.endpoint.vendor
        if vendor not in self._transports:
            inner = httpx.MockTransport(self.server.handle)
            self._transports[vendor] = httpx.Client(
                transport=transport(inner, vendors={BASE: vendor.value})
            )
        client = self._transports[vendor]
        self.server.reply = case.reply
        self.server.requests.clear()
        seen: list[tuple[int, bytes]] = []

        def run() -> None:
            # Read as sent (before any content encoding), so a body whose declared encoding
            # does not decode still reaches the comparison; the caller's own read would fail.
            request = client.build_request(
                "POST", url, content=body, headers={"content-type": "application/json"}
            )
            response = client.send(request, stream=True)
            try:  # one handed over read has no raw bytes left: it is read as it was made
                read = response.read() if self.server.read_first else b"".join(response.iter_raw())
                seen.append((response.status_code, read))
            finally:
                response.close()

        event = self._one_event("transport", run)
        assert self.server.requests == [(url, body)], "the transport changed the request"
        status, sent = seen[0]
        assert status == case.reply.status
        made = _as_read(case.reply) if self.server.read_first else case.reply.body
        assert sent == made, "the transport changed the body"
        return Seen("transport", event)

    def run_manual(self, case: Case) -> Seen:
        call = case.call
        provider = case.endpoint.vendor.value
        model = call_model(call)
        ids = call.document_ids

        def run() -> None:
            if case.endpoint.operation == "embeddings":
                with (
                    contextlib.suppress(httpx.DecodingError),
                    spanledger.record_embedding(
                        provider=provider,
                        model=model,
                        inputs=list(call.items),
                        endpoint=case.endpoint.name,
                    ) as embedding,
                ):
                    body = _as_read(case.reply)
                    embedding.succeeded(raw=body, headers=dict(case.reply.headers))
            else:
                with (
                    contextlib.suppress(httpx.DecodingError),
                    spanledger.record_rerank(
                        provider=provider,
                        model=model,
                        query=call.query,
                        documents=list(call.items),
                        top_k=call.top_k,
                        document_ids=list(ids) if ids is not None else None,
                        endpoint=case.endpoint.name,
                    ) as rerank,
                ):
                    rerank.succeeded(raw=_as_read(case.reply))

        return Seen("manual", self._one_event("manual", run), knows_status=False)

    def run_sdk(self, sdk: SdkPath, case: Case) -> Seen:
        key = case.endpoint.name
        if (sdk.name, key) not in self._sdks:
            self._sdks[sdk.name, key] = spanledger.instrument(sdk.make(self.server))
        client = self._sdks[sdk.name, key]
        self.server.reply = case.reply
        self.server.requests.clear()
        raised: list[BaseException] = []

        def run() -> None:
            try:
                sdk.call(client, case.call)
            except Exception as exc:  # each SDK raises its own types
                raised.append(exc)

        event = self._one_event(sdk.name, run)
        assert len(self.server.requests) == 1, f"{sdk.name} sent {len(self.server.requests)}"
        sent = json.loads(self.server.requests[0][1])
        assert isinstance(sent, dict)
        return Seen(
            sdk.name,
            event,
            carried=not (raised and case.reply.success),
            knows_status=sdk.knows_status,
        )

    def paths(self, case: Case) -> list[Seen]:
        """Every path's event for ``case``: the provider's first, where there is one, else the
        transport's (replaying the request the declaration describes)."""
        seen: list[Seen] = []
        if has_provider(case.endpoint):
            provider, url, body = self.run_provider(case)
            seen.append(provider)
        else:
            url, body = declared_request(case.endpoint, case.call)
        seen.append(self.run_transport(case, url, body))
        if case.reply.success:
            seen.append(self.run_manual(case))
        for sdk in SDKS.get(case.endpoint.name, ()):
            seen.append(self.run_sdk(sdk, case))
        for each in seen:
            PATHS_RUN[case.endpoint.name, each.path, each.carried] += 1
        return seen


def path_names(endpoint: Endpoint, success: bool) -> list[str]:
    """The paths that carry a reply to ``endpoint``, in ``Rig.paths`` order."""
    names = ["provider"] if has_provider(endpoint) else []
    names += ["transport", *(["manual"] if success else [])]
    return names + [sdk.name for sdk in SDKS.get(endpoint.name, ())]


@contextlib.contextmanager
def rig_for_module() -> Iterator[Rig]:
    rig = Rig()
    with _voyage_session(rig.server):
        try:
            yield rig
        finally:
            rig.close()
