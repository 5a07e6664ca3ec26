"""``cohere.ClientV2`` / ``AsyncClientV2``: ``embed`` and ``rerank``, recorded as ``cohere``.

Usage is read from the raw JSON body (``meta.billed_units``) as the SDK decodes it, through
hooks on the SDK's own httpx client. The SDK's typed result is not trusted for figures: it
turns ``search_units: 1`` into ``1.0`` and an absent figure into ``None``. The v1 ``Client``
is not supported: its ``embed`` splits work over a thread pool the hooks cannot follow.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import cohere

from spanledger.instrumentation._capture import MethodSpec
from spanledger.instrumentation._registry import Installation
from spanledger.instrumentation._routes import cohere_vector_type
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
from spanledger.wire.endpoints import COHERE_EMBEDDINGS, COHERE_RERANK

__all__ = ["install"]

Server = tuple[str | None, int | None]
_EMBED_EXTRAS = ("max_tokens", "embedding_types", "truncate", "priority")
_RERANK_EXTRAS = ("max_tokens_per_doc", "relevant_spans", "priority")


def install(client: Any, installation: Installation) -> None:
    if isinstance(client, cohere.AsyncClientV2):
        installation.is_async = True
    elif not isinstance(client, cohere.ClientV2):
        raise TypeError(
            "spanledger.instrument supports cohere.ClientV2 and AsyncClientV2, "
            f"not {type(client).__qualname__}"
        )
    wrapper = client._client_wrapper
    server = server_of(wrapper.get_base_url())
    embed = MethodSpec(
        facts=partial(_embed_facts, server),
        endpoint=COHERE_EMBEDDINGS,
        shape=_width,
        route="/v2/embed",
    )
    rerank = MethodSpec(
        facts=partial(_rerank_facts, server),
        endpoint=COHERE_RERANK,
        shape=_result_count,
        route="/v2/rerank",
    )
    for owner in (client, *_raw_clients(client)):  # a call wrapped twice is recorded once
        installation.wrap(owner, "embed", embed)
        installation.wrap(owner, "rerank", rerank)
    installation.hook(wrapper.httpx_client.httpx_client)


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


def _model(kwargs: dict[str, Any]) -> str | None:
    return text_or_none(kwargs.get("model"))


def _embed_facts(
    server: Server, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> EmbedFacts | None:
    model = _model(kwargs)
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
    server: Server, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> RerankFacts | None:
    model = _model(kwargs)
    if model is None:
        return None
    query = text_or_none(kwargs.get("query"))
    count, documents = input_texts(kwargs.get("documents"))
    return RerankFacts(
        provider=COHERE_EMBEDDINGS.provider,
        model=model,
        query_length=utf8_length(query) if query is not None else 0,
        document_count=count,
        query=query,
        documents=documents,
        top_k=positive_int(kwargs.get("top_n")),
        extras=passed(kwargs, _RERANK_EXTRAS),
        server_address=server[0],
        server_port=server[1],
        billing=COHERE_RERANK.billing,
    )


def _width(result: Any) -> int | None:
    rows = getattr(result, "data", result).embeddings.float_  # a raw response holds it in data
    return len(rows[0]) if rows else None


def _result_count(result: Any) -> int:
    return len(getattr(result, "data", result).results)
