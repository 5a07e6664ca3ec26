"""The peer instrumentations spanledger is held to beside, each with the work it traces against
the loopback stand-in, and what spanledger records of that work.

Peers: OpenLLMetry's openai, cohere and voyageai instrumentors; OpenInference's openai, cohere,
langchain and llama-index; OpenTelemetry contrib's httpx, httpx2 and botocore. Each is switched
on and off as an application does (``instrument()`` / ``uninstrument()``, on the global
providers). ``shares`` marks a peer that wraps a class attribute the switch replaces too.

``Classes`` puts back every method a test left wrapped: some peers leave wrappers behind on
``uninstrument()`` (see ``test_peer_matrix``), and a test must not hand them to the next.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3  # type: ignore[import-untyped]
import cohere
import httpx
import httpx2
import openai
import wrapt
from voyageai.client import Client as VoyageClient

from spanledger import EmbeddingEvent, Event, RerankEvent
from spanledger.integrations import INTEGRATIONS
from spanledger.testing import StandIn
from tests.instrument.conftest import API_KEY, QUERY, TEXTS

OPENAI_MODEL = "text-embedding-3-small"
JINA_BODY = {"model": "jina-embeddings-v3", "input": TEXTS}
PACKAGES = (
    "openai",
    "cohere",
    "voyageai",
    "httpx",
    "httpx2",
    "requests",
    "botocore",
    "langchain_core",
    "langchain_openai",
    "llama_index",
)
"""Where peers and spanledger wrap methods."""
PEER_PACKAGES = ("opentelemetry.instrumentation.", "openinference.instrumentation.")


@dataclass(frozen=True)
class Peer:
    """One peer instrumentation, the work it traces and what spanledger records of it."""

    name: str
    instrumentor: str
    """``module:Class`` of its ``BaseInstrumentor`` (a singleton: each call is the same)."""
    work: Callable[[StandIn], list[Any]]
    """The calls, each one's result in a form that compares equal when nothing changed."""
    records: tuple[type[Event], ...]
    sdks: tuple[str, ...]
    shares: bool
    options: Mapping[str, Any] = field(default_factory=dict)

    def _instance(self) -> Any:
        module, name = self.instrumentor.split(":")
        return getattr(importlib.import_module(module), name)()

    def on(self) -> None:
        self._instance().instrument(**self.options)

    def off(self) -> None:
        self._instance().uninstrument()


def openai_embeddings(standin: StandIn) -> list[Any]:
    client = openai.OpenAI(api_key=API_KEY, base_url=f"{standin.url}/openai/v1", max_retries=0)
    return [client.embeddings.create(model=OPENAI_MODEL, input=TEXTS).model_dump()]


def cohere_v2(standin: StandIn) -> list[Any]:
    """An embedding and a rerank, and a rerank of the async client."""
    options: dict[str, Any] = {
        "api_key": API_KEY,
        "base_url": f"{standin.url}/cohere",
        "max_retries": 0,
    }
    client = cohere.ClientV2(**options)
    embedded = client.embed(model="embed-v4.0", texts=TEXTS, input_type="search_document")
    ranked = client.rerank(model="rerank-v3.5", query=QUERY, documents=TEXTS)

    async def rerank_async() -> Any:
        return await cohere.AsyncClientV2(**options).rerank(
            model="rerank-v3.5", query=QUERY, documents=TEXTS
        )

    return [embedded.model_dump(), ranked.model_dump(), asyncio.run(rerank_async()).model_dump()]


def voyage(standin: StandIn) -> list[Any]:
    client = VoyageClient(api_key=API_KEY, base_url=f"{standin.url}/voyageai/v1", max_retries=0)
    embedded = client.embed(TEXTS, model="voyage-3.5")
    ranked = client.rerank(QUERY, TEXTS, model="rerank-2.5")
    return [
        (embedded.embeddings, embedded.total_tokens),
        ([(r.index, r.relevance_score) for r in ranked.results], ranked.total_tokens),
    ]


def langchain_runnable(standin: StandIn) -> list[Any]:
    """LangChain's ``OpenAIEmbeddings`` inside a runnable (an embedding call alone is no
    LangChain run, so OpenInference would trace nothing)."""
    from langchain_core.runnables import RunnableLambda
    from langchain_openai import OpenAIEmbeddings

    options: dict[str, Any] = {  # passed by their aliases, which the model's hints omit
        "model": OPENAI_MODEL,
        "api_key": API_KEY,
        "base_url": f"{standin.url}/openai/v1",
        "check_embedding_ctx_length": False,
        "max_retries": 0,
    }
    embedder = OpenAIEmbeddings(**options)
    return [RunnableLambda(embedder.embed_documents).invoke(TEXTS)]


def llama_index(standin: StandIn) -> list[Any]:
    from llama_index.embeddings.openai import OpenAIEmbedding  # type: ignore[import-untyped]

    embedder = OpenAIEmbedding(
        model=OPENAI_MODEL, api_key=API_KEY, api_base=f"{standin.url}/openai/v1", max_retries=0
    )
    return [embedder.get_text_embedding_batch(TEXTS)]


def bedrock_titan(standin: StandIn) -> list[Any]:
    client = boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        endpoint_url=standin.base_url("aws.bedrock"),
        aws_access_key_id="test",
        aws_secret_access_key="test-secret",
    )
    answer = client.invoke_model(
        modelId="amazon.titan-embed-text-v2:0", body=json.dumps({"inputText": TEXTS[0]})
    )
    return [answer["body"].read()]


def httpx_traffic(standin: StandIn) -> list[Any]:
    """Cohere's SDK (over httpx), a Jina request with a plain client, sync and async, and a
    request to no vendor."""

    async def jina_async() -> Any:
        async with httpx.AsyncClient() as client:
            return (await client.post(f"{standin.url}/jina/v1/embeddings", json=JINA_BODY)).json()

    return [
        *cohere_v2(standin),
        httpx.post(f"{standin.url}/jina/v1/embeddings", json=JINA_BODY).json(),
        asyncio.run(jina_async()),
        httpx.get(f"{standin.url}/nowhere").status_code,
    ]


def httpx2_traffic(standin: StandIn) -> list[Any]:
    """OpenAI's SDK (over httpx2) and a Jina request with a plain httpx2 client."""
    jina = httpx2.post(f"{standin.url}/jina/v1/embeddings", json=JINA_BODY).json()
    return [*openai_embeddings(standin), jina]


EMBED = (EmbeddingEvent,)
EMBED_RERANK = (EmbeddingEvent, RerankEvent)
COHERE = (EmbeddingEvent, RerankEvent, RerankEvent)
PEERS = [
    Peer(
        "openllmetry-openai",
        "opentelemetry.instrumentation.openai:OpenAIInstrumentor",
        openai_embeddings,
        EMBED,
        ("openai",),
        shares=True,
    ),
    Peer(
        "openllmetry-cohere",
        "opentelemetry.instrumentation.cohere:CohereInstrumentor",
        cohere_v2,
        COHERE,
        ("cohere",),
        shares=True,
        options={"skip_dep_check": True},  # it declares cohere < 6
    ),
    Peer(
        "openllmetry-voyageai",
        "opentelemetry.instrumentation.voyageai:VoyageAIInstrumentor",
        voyage,
        EMBED_RERANK,
        ("voyageai",),
        shares=True,
    ),
    Peer(
        "openinference-openai",
        "openinference.instrumentation.openai:OpenAIInstrumentor",
        openai_embeddings,
        EMBED,
        ("openai",),
        shares=False,
    ),
    Peer(
        "openinference-cohere",
        "openinference.instrumentation.cohere:CohereInstrumentor",
        cohere_v2,
        COHERE,
        ("cohere",),
        shares=False,  # it wraps the base class V2Client
    ),
    Peer(
        "openinference-langchain",
        "openinference.instrumentation.langchain:LangChainInstrumentor",
        langchain_runnable,
        EMBED,
        ("openai",),
        shares=False,
    ),
    Peer(
        "openinference-llama-index",
        "openinference.instrumentation.llama_index:LlamaIndexInstrumentor",
        llama_index,
        EMBED,
        ("openai",),
        shares=False,
    ),
    Peer(
        "otel-httpx",
        "opentelemetry.instrumentation.httpx:HTTPXClientInstrumentor",
        httpx_traffic,
        (*COHERE, EmbeddingEvent, EmbeddingEvent),
        ("cohere",),
        shares=True,
    ),
    Peer(
        "otel-httpx2",
        "opentelemetry.instrumentation.httpx:HTTPX2ClientInstrumentor",
        httpx2_traffic,
        (EmbeddingEvent, EmbeddingEvent),
        ("openai",),
        shares=True,
    ),
    Peer(
        "otel-botocore",
        "opentelemetry.instrumentation.botocore:BotocoreInstrumentor",
        bedrock_titan,
        EMBED,
        ("botocore",),
        shares=False,
    ),
]


SDKS = {sdk for peer in PEERS for sdk in peer.sdks}


class Classes:
    """The methods of every class in ``PACKAGES`` as they are now, to put back later (the
    classes the switch patches loaded first: some SDKs import their modules on first use)."""

    def __init__(self) -> None:
        for integration in INTEGRATIONS:
            if integration.name not in SDKS:
                continue
            for method in integration.methods:
                getattr(importlib.import_module(method.module), method.owner)
        self._held = {klass: dict(vars(klass)) for klass in _classes()}

    def put_back(self) -> None:
        """Every method changed since as it was, every method added since taken off, and any
        peer's wrapper left on a class loaded since unwrapped."""
        for klass in _classes():
            held = self._held.get(klass)
            now = dict(vars(klass))
            for name in set(now) | set(held or {}):
                before = held.get(name, _MISSING) if held is not None else _unwrapped(now[name])
                after = now.get(name, _MISSING)
                if before is after or not (_is_method(before) or _is_method(after)):
                    continue
                if before is _MISSING:
                    delattr(klass, name)
                else:
                    setattr(klass, name, before)


@contextmanager
def classes_put_back() -> Iterator[None]:
    classes = Classes()
    try:
        yield
    finally:
        classes.put_back()


_MISSING = object()


def _classes() -> Iterator[type]:
    for name, module in list(sys.modules.items()):
        if not isinstance(module, types.ModuleType) or name.split(".")[0] not in PACKAGES:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == name:
                yield value


def _is_method(value: object) -> bool:
    return value is not _MISSING and (
        isinstance(value, types.FunctionType | staticmethod | classmethod | wrapt.BaseObjectProxy)
    )


def _unwrapped(value: object) -> object:
    """``value`` without the peers' wrappers on top."""
    while isinstance(value, wrapt.BaseObjectProxy) and _peer_made(value):
        value = value.__wrapped__
    return value


def _peer_made(proxy: wrapt.BaseObjectProxy[Any]) -> bool:
    wrapper = getattr(proxy, "_self_wrapper", None)
    wrapper = getattr(wrapper, "func", wrapper)
    module = getattr(wrapper, "__module__", None) or type(wrapper).__module__
    return isinstance(module, str) and module.startswith(PEER_PACKAGES)
