"""Client ownership: close only what the provider created; repr never shows the key."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

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

from .conftest import (
    API_KEY,
    TEI_URL,
    FakeServer,
    call,
    embed_payload,
    rerank_payload,
    vectors_for,
)

_REAL_CLIENT = httpx.Client
_REAL_ASYNC_CLIENT = httpx.AsyncClient


def _route_created_clients(
    monkeypatch: pytest.MonkeyPatch, server: FakeServer
) -> tuple[list[httpx.Client], list[httpx.AsyncClient]]:
    """Make clients a provider creates for itself talk to ``server`` (never the network)."""
    created: list[httpx.Client] = []
    created_async: list[httpx.AsyncClient] = []

    def client(*args: Any, **kw: Any) -> httpx.Client:
        made = _REAL_CLIENT(*args, transport=server.transport, **kw)
        created.append(made)
        return made

    def async_client(*args: Any, **kw: Any) -> httpx.AsyncClient:
        made = _REAL_ASYNC_CLIENT(*args, transport=server.transport, **kw)
        created_async.append(made)
        return made

    monkeypatch.setattr(httpx, "Client", client)
    monkeypatch.setattr(httpx, "AsyncClient", async_client)
    return created, created_async


def test_context_manager_closes_a_client_it_created(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    created, _ = _route_created_clients(monkeypatch, server)
    server.reply(embed_payload("openai", vectors_for(1)))
    with OpenAIEmbeddings("m", api_key=API_KEY) as provider:
        assert len(provider.embed(["a"]).vectors) == 1
        assert len(created) == 1
        assert not created[0].is_closed
    assert created[0].is_closed
    assert len(server.requests) == 1


def test_context_manager_leaves_an_injected_client_open(server: FakeServer) -> None:
    client = server.client()
    server.reply(rerank_payload("jina", [(0, 0.5)]))
    with JinaReranker("m", api_key=API_KEY, http_client=client) as provider:
        provider.rerank("q", ["x"])
    assert not client.is_closed
    server.reply({"still": "usable"})
    assert client.get("https://example.invalid/ping").json() == {"still": "usable"}
    assert len(server.requests) == 2
    client.close()


def test_close_never_closes_an_injected_client(server: FakeServer) -> None:
    client = server.client()
    provider = TEIEmbeddings("m", base_url=TEI_URL, http_client=client)
    provider.close()
    assert not client.is_closed
    client.close()


async def test_async_context_manager_closes_created_clients(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, created_async = _route_created_clients(monkeypatch, server)
    server.reply(embed_payload("cohere", vectors_for(1)))
    async with CohereEmbeddings("m", api_key=API_KEY) as provider:
        response = await provider.aembed(["a"])
        assert len(response.vectors) == 1
        assert len(created_async) == 1
        assert not created_async[0].is_closed
    assert created_async[0].is_closed


async def test_aclose_closes_created_async_client(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, created_async = _route_created_clients(monkeypatch, server)
    server.reply(rerank_payload("voyage", [(0, 0.5)]))
    provider = VoyageReranker("m", api_key=API_KEY)
    await provider.arerank("q", ["x"])
    await provider.aclose()
    assert len(created_async) == 1
    assert created_async[0].is_closed


async def test_aclose_closes_both_created_clients(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    created, created_async = _route_created_clients(monkeypatch, server)
    server.reply(embed_payload("jina", vectors_for(1)))
    server.reply(embed_payload("jina", vectors_for(1)))
    provider = JinaEmbeddings("m", api_key=API_KEY)
    provider.embed(["a"])
    await provider.aembed(["a"])
    await provider.aclose()
    assert [c.is_closed for c in created] == [True]
    assert [c.is_closed for c in created_async] == [True]


async def test_async_context_manager_leaves_injected_async_client_open(
    server: FakeServer,
) -> None:
    async_client = server.async_client()
    client = server.client()
    server.reply(embed_payload("tei", vectors_for(1)))
    async with TEIEmbeddings(
        "m", base_url=TEI_URL, http_client=client, async_http_client=async_client
    ) as provider:
        await provider.aembed(["a"])
    assert not async_client.is_closed
    assert not client.is_closed
    server.reply({"ok": True})
    assert (await async_client.get("http://tei.test/health")).json() == {"ok": True}
    await async_client.aclose()
    client.close()


# --------------------------------------------------------------------------- repr


def _all_providers() -> list[EmbeddingProvider | RerankProvider]:
    return [
        OpenAIEmbeddings("m", api_key=API_KEY),
        CohereEmbeddings("m", api_key=API_KEY),
        CohereReranker("m", api_key=API_KEY),
        JinaEmbeddings("m", api_key=API_KEY),
        JinaReranker("m", api_key=API_KEY),
        TEIEmbeddings("m", base_url=TEI_URL, api_key=API_KEY),
        TEIReranker("m", base_url=TEI_URL, api_key=API_KEY),
        VoyageEmbeddings("m", api_key=API_KEY),
        VoyageReranker("m", api_key=API_KEY),
    ]


@pytest.mark.parametrize("index", range(9))
def test_repr_contains_no_api_key(index: int) -> None:
    provider = _all_providers()[index]
    try:
        assert API_KEY not in repr(provider)
        assert API_KEY not in str(provider)
        assert "m" in repr(provider)
        assert type(provider).__name__ in repr(provider)
    finally:
        provider.close()


@pytest.mark.parametrize(
    ("provider", "url"),
    [
        (OpenAIEmbeddings("m"), "https://api.openai.com/v1/embeddings"),
        (CohereEmbeddings("m"), "https://api.cohere.com/v2/embed"),
        (CohereReranker("m"), "https://api.cohere.com/v2/rerank"),
        (JinaEmbeddings("m"), "https://api.jina.ai/v1/embeddings"),
        (JinaReranker("m"), "https://api.jina.ai/v1/rerank"),
        (TEIEmbeddings("m", base_url="http://tei.test/"), "http://tei.test/embed"),
        (TEIReranker("m", base_url="http://tei.test"), "http://tei.test/rerank"),
        (VoyageEmbeddings("m"), "https://api.voyageai.com/v1/embeddings"),
        (VoyageReranker("m"), "https://api.voyageai.com/v1/rerank"),
    ],
    ids=lambda value: value if isinstance(value, str) else type(value).__name__,
)
def test_default_endpoints(provider: EmbeddingProvider | RerankProvider, url: str) -> None:
    assert provider.url == url


# --------------------------------------------------------------------------- timeout


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_timeout_is_applied_to_every_request(server: FakeServer, is_async: bool) -> None:
    for n in range(2):
        server.reply(embed_payload("openai", vectors_for(1, start=n)))
    provider = OpenAIEmbeddings(
        "m",
        api_key=API_KEY,
        http_client=server.client(),
        async_http_client=server.async_client(),
        timeout=4.5,
        chunk_size=1,
    )
    call(provider, "embed", ["a", "b"], is_async=is_async)
    expected = {"connect": 4.5, "read": 4.5, "write": 4.5, "pool": 4.5}
    assert [seen.timeout for seen in server.requests] == [expected, expected]


def test_client_timeout_used_when_none_given(server: FakeServer) -> None:
    server.reply(embed_payload("tei", vectors_for(1)))
    client = httpx.Client(transport=server.transport, timeout=httpx.Timeout(9.0, connect=2.0))
    TEIEmbeddings("m", base_url=TEI_URL, http_client=client).embed(["a"])
    assert server.only.timeout == {"connect": 2.0, "read": 9.0, "write": 9.0, "pool": 9.0}
