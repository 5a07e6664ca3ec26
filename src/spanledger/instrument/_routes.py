"""Recognise a vendor's embedding or rerank request in plain httpx traffic, and read its facts.

The vendor is taken, in order, from the caller's ``vendors`` map (a host, or a URL prefix), the
vendor's public API host, the route itself (``/v2/embed`` is Cohere, ``/embed`` with ``inputs``
is TEI), and finally the body's shape (Voyage's ``input_type`` / ``top_k``, Jina's ``task`` /
``top_n``; other ``/embeddings`` requests are the OpenAI-compatible wire).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from spanledger.instrument._facts import (
    CallFacts,
    EmbedFacts,
    RerankFacts,
    given,
    input_texts,
    positive_int,
    text_or_none,
    utf8_length,
)
from spanledger.instrument._wire import BILLING

__all__ = ["Route", "checked_vendors", "facts_for", "recognise"]

Operation = Literal["embeddings", "rerank"]

_HOSTS = {
    "api.openai.com": "openai",
    "api.cohere.com": "cohere",
    "api.cohere.ai": "cohere",
    "api.jina.ai": "jina",
    "api.voyageai.com": "voyageai",
    "ai.mongodb.com": "voyageai",
}
_ROUTES: dict[str, dict[str, Operation]] = {
    "openai": {"/embeddings": "embeddings"},
    "cohere": {"/embed": "embeddings", "/rerank": "rerank"},
    "jina": {"/embeddings": "embeddings", "/rerank": "rerank"},
    "voyageai": {"/embeddings": "embeddings", "/rerank": "rerank"},
    "tei": {"/embed": "embeddings", "/rerank": "rerank"},
}
_INPUTS = {
    "openai": "input",
    "cohere": "texts",
    "jina": "input",
    "voyageai": "input",
    "tei": "inputs",
}
_INPUT_TYPE = {"cohere": "input_type", "voyageai": "input_type", "jina": "task"}
_DIMENSIONS = {"cohere": "output_dimension", "voyageai": "output_dimension"}
_DOCUMENTS = {"tei": "texts"}
_TOP_K = {"cohere": "top_n", "jina": "top_n", "voyageai": "top_k"}
_RETURN_DOCUMENTS = {
    "jina": "return_documents",
    "voyageai": "return_documents",
    "tei": "return_text",
}
_VOYAGE_EMBED_KEYS = frozenset({"input_type", "output_dimension", "output_dtype", "truncation"})
_JINA_EMBED_KEYS = frozenset({"task", "late_chunking", "embedding_type", "truncate"})


@dataclass(frozen=True, slots=True)
class Route:
    vendor: str
    operation: Operation


def checked_vendors(vendors: Mapping[str, str] | None) -> dict[str, str]:
    """The caller's host / URL-prefix map, refusing vendor names this module cannot read."""
    declared = dict(vendors or {})
    unknown = sorted(set(declared.values()) - set(_ROUTES))
    if unknown:
        raise ValueError(f"unknown vendor names {unknown}; known: {sorted(_ROUTES)}")
    return declared


def recognise(url: httpx.URL, body: dict[str, Any], vendors: Mapping[str, str]) -> Route | None:
    """The vendor endpoint ``url`` + ``body`` calls, or ``None`` for any other request."""
    path = url.path.rstrip("/")
    suffix = path[path.rfind("/") :]
    vendor = _declared(url, vendors) or _HOSTS.get(url.host) or _guess(path, suffix, body)
    if vendor is None:
        return None
    operation = _ROUTES.get(vendor, {}).get(suffix)
    return Route(vendor, operation) if operation is not None else None


def _declared(url: httpx.URL, vendors: Mapping[str, str]) -> str | None:
    if not vendors:
        return None
    text = str(url.copy_with(query=None, fragment=None))
    for key, vendor in vendors.items():
        if key == url.host or text.startswith(key):
            return vendor
    return None


def _guess(path: str, suffix: str, body: dict[str, Any]) -> str | None:
    if path.endswith(("/v2/embed", "/v2/rerank")):
        return "cohere"
    if suffix == "/embed":
        return "tei" if "inputs" in body else None
    if suffix == "/embeddings":
        if body.keys() & _VOYAGE_EMBED_KEYS:
            return "voyageai"
        return "jina" if body.keys() & _JINA_EMBED_KEYS else "openai"
    if suffix == "/rerank":
        if "texts" in body and "documents" not in body:
            return "tei"
        if "top_k" in body:
            return "voyageai"
        model = body.get("model")
        if "top_n" in body or (type(model) is str and model.startswith("jina")):
            return "jina"
        return "voyageai"
    return None


def facts_for(route: Route, body: dict[str, Any], url: httpx.URL) -> CallFacts:
    """What the request asked for, read from its JSON body."""
    vendor = route.vendor
    model = text_or_none(body.get("model")) or "unknown"
    address = url.host or None
    port = url.port or {"https": 443, "http": 80}.get(url.scheme)
    billing = BILLING.get((vendor, route.operation))
    if route.operation == "embeddings":
        inputs_key = _INPUTS[vendor]
        source = body.get(inputs_key)
        if source is None and vendor == "cohere":
            source = body.get("inputs", body.get("images"))
        count, texts = input_texts(source)
        input_type = text_or_none(body.get(_INPUT_TYPE.get(vendor, "")))
        params: dict[str, Any] = {"input_type": input_type} if input_type else {}
        dimensions = body.get(_DIMENSIONS.get(vendor, "dimensions"))
        if given(dimensions):
            params["dimensions"] = dimensions
        used = {"model", inputs_key, "inputs", "images", _INPUT_TYPE.get(vendor), "dimensions"}
        used.add(_DIMENSIONS.get(vendor))
        return EmbedFacts(
            provider=vendor,
            model=model,
            input_count=count,
            inputs=texts,
            input_type=input_type,
            request_params=params,
            extras={k: v for k, v in body.items() if k not in used},
            server_address=address,
            server_port=port,
            billing=billing,
        )
    documents_key = _DOCUMENTS.get(vendor, "documents")
    count, documents = input_texts(body.get(documents_key))
    query = body.get("query")
    text = query if type(query) is str else None
    returns = body.get(_RETURN_DOCUMENTS.get(vendor, ""))
    used = {"model", "query", documents_key, _TOP_K.get(vendor), _RETURN_DOCUMENTS.get(vendor)}
    return RerankFacts(
        provider=vendor,
        model=model,
        query_length=utf8_length(text) if text is not None else 0,
        document_count=count,
        query=text,
        documents=documents,
        top_k=positive_int(body.get(_TOP_K.get(vendor, ""))),
        request_params={"return_documents": returns} if type(returns) is bool else {},
        extras={k: v for k, v in body.items() if k not in used},
        server_address=address,
        server_port=port,
        billing=billing,
    )
