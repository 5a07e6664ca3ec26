"""The recording paths the differential test drives, each answering from one in-process server.

For one ``Case`` (a call and the reply it gets), every path that can carry the reply makes the
call once and yields the one event it recorded:

- ``provider``: spanledger's own provider class for the endpoint, over ``httpx.MockTransport``;
- ``transport``: the recording httpx transport, posting the exact body the provider sent to
  the same URL;
- ``manual``: ``record_embedding`` / ``record_rerank`` with ``succeeded(raw=<body bytes>)``,
  for 2xx replies only (it is not told the status);
- ``openai-sdk``, ``cohere-sdk``, ``voyage-sdk``: the official SDK, instrumented with
  ``spanledger.instrument``, wherever the endpoint has one.

The SDK clients and the providers are built once per ``Rig`` and answer whatever reply the
rig's ``Server`` holds at the time: an ``httpx.MockTransport`` for everything on httpx, and a
``requests`` adapter for the Voyage SDK, mounted on this thread's Voyage session for the
rig's lifetime (the session another test may have made is put back afterwards). SDK retries
are off, and every path that sends is checked to have sent exactly one request.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import cohere
import httpx
import openai
import requests
import voyageai.api_resources.api_requestor as voyage_requestor
from voyageai.client import Client as VoyageClient

import spanledger
from spanledger import Event, ProviderError, Recorder
from spanledger.instrumentation import transport
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
from spanledger.wire.endpoints import Endpoint, Operation, Vendor
from spanledger.wire.http import join_route
from tests.differential.bodies import Call, Case, Reply

__all__ = [
    "BASE",
    "CASES_RUN",
    "KNOWN_SEEN",
    "MODEL",
    "PROVIDERS",
    "SDKS",
    "Key",
    "Rig",
    "SdkPath",
    "Seen",
    "rig_for_module",
]

BASE = "https://vendor.test"
MODEL = "m"
API_KEY = "k"

Key = tuple[Vendor, Operation]

CASES_RUN: Counter[str] = Counter()
"""Cases run per endpoint, and per endpoint and body family, for the end-of-run summary."""

KNOWN_SEEN: Counter[str] = Counter()
"""How often each known divergence turned up in the fuzz."""
ProviderClass = Callable[..., EmbeddingProvider | RerankProvider]

PROVIDERS: dict[Key, ProviderClass] = {
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

    def _next(self, url: str, body: bytes) -> Reply:
        reply = self.reply
        assert reply is not None, "no reply set"
        self.requests.append((url, body))
        return reply

    def handle(self, request: httpx.Request) -> httpx.Response:
        reply = self._next(str(request.url), request.read())
        return httpx.Response(reply.status, headers=list(reply.headers), content=reply.body)

    def voyage_adapter(self) -> requests.adapters.BaseAdapter:
        server = self

        class Adapter(requests.adapters.BaseAdapter):
            def send(self, request: requests.PreparedRequest, *args: Any, **kw: Any) -> Any:
                body = request.body or b""
                sent = body.encode("utf-8") if isinstance(body, str) else bytes(body)
                reply = server._next(request.url or "", sent)
                response = requests.Response()
                response.status_code = reply.status
                response._content = reply.body
                response.headers.update(dict(reply.headers))
                response.encoding = "utf-8"
                response.url = request.url or ""
                response.request = request
                return response

            def close(self) -> None:
                return None

        return Adapter()


@dataclass(frozen=True)
class SdkPath:
    """One official SDK method for one endpoint."""

    name: str
    make: Callable[[Server], Any]
    call: Callable[[Any, Call], object]
    knows_status: bool = True
    """Whether the SDK tells the instrumentation a 2xx body's status (Voyage's requestor
    hands over the decoded body and headers only)."""


def _openai(server: Server) -> openai.OpenAI:
    http = httpx.Client(transport=httpx.MockTransport(server.handle))
    return openai.OpenAI(
        api_key=API_KEY,
        base_url=f"{BASE}/v1",
        max_retries=0,
        http_client=http,  # type: ignore[arg-type]  # the SDK takes plain httpx at runtime
    )


def _cohere(server: Server) -> cohere.ClientV2:
    http = httpx.Client(transport=httpx.MockTransport(server.handle))
    return cohere.ClientV2(api_key=API_KEY, base_url=BASE, max_retries=0, httpx_client=http)


def _voyage(server: Server) -> VoyageClient:
    return VoyageClient(api_key=API_KEY, base_url=f"{BASE}/v1", max_retries=0)


def _cohere_rerank(client: Any, call: Call) -> object:
    options: dict[str, Any] = {} if call.top_k is None else {"top_n": call.top_k}
    return client.rerank(model=MODEL, query=call.query, documents=list(call.items), **options)


SDKS: dict[Key, tuple[SdkPath, ...]] = {
    (Vendor.OPENAI, "embeddings"): (
        SdkPath(
            "openai-sdk",
            _openai,
            lambda c, call: c.embeddings.create(
                model=MODEL, input=list(call.items), encoding_format="float"
            ),
        ),
    ),
    (Vendor.COHERE, "embeddings"): (
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
    (Vendor.COHERE, "rerank"): (SdkPath("cohere-sdk", _cohere, _cohere_rerank),),
    (Vendor.VOYAGE, "embeddings"): (
        SdkPath(
            "voyage-sdk",
            _voyage,
            lambda c, call: c.embed(list(call.items), model=MODEL),
            knows_status=False,
        ),
    ),
    (Vendor.VOYAGE, "rerank"): (
        SdkPath(
            "voyage-sdk",
            _voyage,
            lambda c, call: c.rerank(call.query, list(call.items), model=MODEL, top_k=call.top_k),
            knows_status=False,
        ),
    ),
}
"""The instrumented SDK methods that call each endpoint (none for Jina and TEI)."""


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
    context.session_create_time = time.time()
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
    _providers: dict[Key, EmbeddingProvider | RerankProvider] = field(default_factory=dict)
    _transports: dict[Vendor, httpx.Client] = field(default_factory=dict)
    _sdks: dict[tuple[str, Key], Any] = field(default_factory=dict)

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
        key = (endpoint.vendor, endpoint.operation)
        if key not in self._providers:
            http = httpx.Client(transport=httpx.MockTransport(self.server.handle))
            self._providers[key] = PROVIDERS[key](MODEL, base_url=BASE, http_client=http)
        return self._providers[key]

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
        assert url == join_route(BASE, case.endpoint.route)
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
        seen: list[httpx.Response] = []

        def run() -> None:
            seen.append(
                client.post(url, content=body, headers={"content-type": "application/json"})
            )

        event = self._one_event("transport", run)
        assert self.server.requests == [(url, body)], "the transport changed the request"
        response = seen[0]
        assert response.status_code == case.reply.status
        assert response.content == case.reply.body, "the transport changed the body"
        return Seen("transport", event)

    def run_manual(self, case: Case) -> Seen:
        call = case.call
        provider = case.endpoint.vendor.value

        def run() -> None:
            if case.endpoint.operation == "embeddings":
                with spanledger.record_embedding(
                    provider=provider, model=MODEL, inputs=list(call.items)
                ) as embedding:
                    embedding.succeeded(raw=case.reply.body)
            else:
                with spanledger.record_rerank(
                    provider=provider,
                    model=MODEL,
                    query=call.query,
                    documents=list(call.items),
                    top_k=call.top_k,
                ) as rerank:
                    rerank.succeeded(raw=case.reply.body)

        return Seen("manual", self._one_event("manual", run), knows_status=False)

    def run_sdk(self, sdk: SdkPath, case: Case) -> Seen:
        key = (case.endpoint.vendor, case.endpoint.operation)
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
        """Every path's event for ``case``, the provider's first."""
        provider, url, body = self.run_provider(case)
        seen = [provider, self.run_transport(case, url, body)]
        if case.reply.success:
            seen.append(self.run_manual(case))
        for sdk in SDKS.get((case.endpoint.vendor, case.endpoint.operation), ()):
            seen.append(self.run_sdk(sdk, case))
        return seen


@contextlib.contextmanager
def rig_for_module() -> Iterator[Rig]:
    rig = Rig()
    with _voyage_session(rig.server):
        try:
            yield rig
        finally:
            rig.close()
