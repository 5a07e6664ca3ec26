"""Cohere's clients: ``embed`` and ``rerank``, recorded as ``cohere``.

``ClientV2`` / ``AsyncClientV2`` post to ``/v2/embed`` and ``/v2/rerank``; the older ``Client``
/ ``AsyncClient`` to ``/v1/embed`` and ``/v1/rerank``, whose ``embed`` splits the texts into
batches of 96 sent side by side (``Client`` from a thread pool). Each batch is its own HTTP call,
so a v1 client is recorded one level down, at its raw client, where each batch passes; the
pool is given tasks that carry the caller's context, so every batch's span sits in the
caller's trace and turn.

Usage is read from the raw JSON body (``meta.billed_units``) as the SDK decodes it, through
hooks on the SDK's own httpx client. The SDK's typed result is not trusted for figures: it
turns ``search_units: 1`` into ``1.0`` and an absent figure into ``None``.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from functools import partial
from typing import Any, TypeVar

import cohere

from spanledger.capture.installation import Installation
from spanledger.capture.sdk_calls import MethodSpec
from spanledger.recording.facts import (
    EmbedFacts,
    RerankFacts,
    given,
    input_texts,
    passed,
    positive_int,
    server_of,
    text_or_none,
    utf8_length,
)
from spanledger.wire.endpoints import COHERE_EMBEDDINGS, COHERE_RERANK, COHERE_V1_EMBEDDINGS
from spanledger.wire.request import cohere_vector_type

__all__ = ["install"]

T = TypeVar("T")
Server = tuple[str | None, int | None]
_EMBED_EXTRAS = ("max_tokens", "embedding_types", "truncate", "priority")
_RERANK_EXTRAS = (
    "max_tokens_per_doc",
    "relevant_spans",
    "priority",
    "rank_fields",  # v1's
    "max_chunks_per_doc",
)


def install(client: Any, installation: Installation) -> None:
    """What ``spanledger.instrument`` does to a Cohere v2 or v1 client, sync or async.

    Anything else is refused with a ``TypeError``.
    """
    installation.is_async = isinstance(client, cohere.AsyncClient | cohere.AsyncClientV2)
    if isinstance(client, cohere.ClientV2 | cohere.AsyncClientV2):
        owners = (client, *_raw_clients(client))  # a call wrapped twice is recorded once
        version = "v2"
    elif isinstance(client, cohere.Client | cohere.AsyncClient):
        owners = (client._raw_client,)
        version = "v1"
        if not installation.is_async:
            installation.replace(client, "_executor", _CarryingContext(client._executor))
    else:
        raise TypeError(
            "spanledger.instrument supports cohere.ClientV2 / AsyncClientV2 and Client / "
            f"AsyncClient, not {type(client).__qualname__}"
        )
    wrapper = client._client_wrapper
    server = server_of(wrapper.get_base_url())
    required = version == "v2"  # v1 falls back to the account's default model
    embed = MethodSpec(
        facts=partial(_embed_facts, server, required),
        endpoint=COHERE_EMBEDDINGS if required else COHERE_V1_EMBEDDINGS,
        shape=_width,
        route=f"/{version}/embed",
    )
    rerank = MethodSpec(
        facts=partial(_rerank_facts, server, required),
        endpoint=COHERE_RERANK,
        shape=_result_count,
        route=f"/{version}/rerank",
    )
    for owner in owners:
        installation.wrap(owner, "embed", embed)
        installation.wrap(owner, "rerank", rerank)
    installation.hook(wrapper.httpx_client.httpx_client)


class _CarryingContext:
    """A v1 client's thread pool, whose tasks run in a copy of the submitting caller's
    context (its current span, its turn): ``embed`` sends its batches from the pool."""

    def __init__(self, pool: Executor) -> None:
        self.pool = pool

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        return self.pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)

    def map(self, fn: Callable[..., T], *iterables: Any, **options: Any) -> Iterator[T]:
        context = contextvars.copy_context()

        def carried(*args: Any) -> T:
            return context.copy().run(fn, *args)  # a context runs in one thread at a time

        return self.pool.map(carried, *iterables, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)


def _raw_clients(client: Any) -> list[Any]:
    """The v2 raw clients every v2 call goes through: ``embed`` / ``rerank`` and their
    ``with_raw_response`` twins use one; ``client.v2``, made on first use, has its own."""
    found: list[Any] = []
    v2 = vars(client).get("_v2")
    for raw in (client._raw_client, getattr(v2, "_raw_client", None)):
        if raw is None:
            continue
        raw = getattr(raw, "_v2", raw)  # ClientV2 puts a v1/v2 proxy in front of its own
        if all(raw is not seen for seen in found):
            found.append(raw)
    return found


def _model(kwargs: dict[str, Any], required: bool) -> str | None:
    """The model asked for; a v1 call that names none is billed to the account's default,
    which the response does not name: ``"unknown"``."""
    model = text_or_none(kwargs.get("model"))
    return model if model is not None or required else "unknown"


def _embed_facts(
    server: Server, required: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> EmbedFacts | None:
    model = _model(kwargs, required)
    if model is None:
        return None
    texts = kwargs.get("texts")
    if given(texts):
        count, inputs = input_texts(texts)
    else:
        others = next((kwargs[k] for k in ("inputs", "images") if given(kwargs.get(k))), ())
        count, inputs = input_texts(others)[0], None
    input_type = text_or_none(kwargs.get("input_type"))
    params: dict[str, Any] = {"input_type": input_type} if input_type else {}
    if given(kwargs.get("output_dimension")):
        params["dimensions"] = kwargs["output_dimension"]
    return EmbedFacts(
        provider=COHERE_EMBEDDINGS.provider,
        model=model,
        input_count=count,
        inputs=inputs,
        input_type=input_type,
        request_params=params,
        extras=passed(kwargs, _EMBED_EXTRAS),
        server_address=server[0],
        server_port=server[1],
        billing=COHERE_EMBEDDINGS.billing,
        dtype=cohere_vector_type(kwargs.get("embedding_types")),
    )


def _rerank_facts(
    server: Server, required: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> RerankFacts | None:
    model = _model(kwargs, required)
    if model is None:
        return None
    query = text_or_none(kwargs.get("query"))
    count, documents = input_texts(kwargs.get("documents"))
    returns = kwargs.get("return_documents")  # v1's
    return RerankFacts(
        provider=COHERE_EMBEDDINGS.provider,
        model=model,
        query_length=utf8_length(query) if query is not None else 0,
        document_count=count,
        query=query,
        documents=documents,
        top_k=positive_int(kwargs.get("top_n")),
        request_params={"return_documents": returns} if type(returns) is bool else {},
        extras=passed(kwargs, _RERANK_EXTRAS),
        server_address=server[0],
        server_port=server[1],
        billing=COHERE_RERANK.billing,
    )


def _width(result: Any) -> int | None:
    embeddings = getattr(result, "data", result).embeddings  # a raw response holds it in data
    rows = embeddings if isinstance(embeddings, list) else embeddings.float_  # v1: a list
    return len(rows[0]) if rows else None


def _result_count(result: Any) -> int:
    return len(getattr(result, "data", result).results)
