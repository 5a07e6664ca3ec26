"""Recognise a vendor's embedding or rerank request in plain httpx traffic, and read its facts.

The vendor is taken, in order, from the caller's ``vendors`` map (a host, or a URL prefix), the
vendor's public API host, the route itself (``/v2/embed`` is Cohere, ``/embed`` with ``texts``
is Cohere's v1 and with ``inputs`` TEI), and finally the body's shape (Voyage's ``input_type`` /
``top_k``, Cohere's rerank models and keys, Jina's ``jina-`` models and ``task`` / ``top_n``;
other ``/embeddings`` requests are the OpenAI-compatible wire). Which keys carry what
is each endpoint's declaration in ``spanledger.wire``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import httpx

from spanledger.recording.facts import (
    CallFacts,
    EmbedFacts,
    RerankFacts,
    given,
    input_texts,
    positive_int,
    text_or_none,
    utf8_length,
)
from spanledger.wire.endpoints import COHERE_V1_EMBEDDINGS, ENDPOINTS, Endpoint, Vendor
from spanledger.wire.http import server_of
from spanledger.wire.read import vector_type

__all__ = ["checked_vendors", "facts_for", "recognise"]

_HOSTS = {host: endpoint.vendor for endpoint in ENDPOINTS.values() for host in endpoint.hosts}
_BY_SUFFIX = {(endpoint.vendor, endpoint.suffix): endpoint for endpoint in ENDPOINTS.values()}
_VOYAGE_EMBED_KEYS = frozenset({"input_type", "output_dimension", "output_dtype", "truncation"})
_JINA_EMBED_KEYS = frozenset({"task", "late_chunking", "embedding_type", "truncate"})
_DTYPE_KEYS = ("output_dtype", "embedding_type", "encoding_format")
_COHERE_RERANK_KEYS = frozenset({"rank_fields", "max_chunks_per_doc", "max_tokens_per_doc"})
_COHERE_RERANK_MODEL = re.compile(r"rerank-(?:english|multilingual|v\d)")
"""Cohere's rerank model names (``rerank-v3.5``, ``rerank-english-v3.0``); Voyage's are
``rerank-2``, ``rerank-lite-1``."""


def checked_vendors(vendors: Mapping[str, str] | None) -> dict[str, Vendor]:
    """The caller's host / URL-prefix map, refusing vendor names this module cannot read."""
    declared = dict(vendors or {})
    known = sorted(vendor.value for vendor in Vendor)
    unknown = sorted({str(name) for name in declared.values()} - set(known))
    if unknown:
        raise ValueError(f"unknown vendor names {unknown}; known: {known}")
    return {key: Vendor(name) for key, name in declared.items()}


def recognise(
    url: httpx.URL, body: dict[str, Any], vendors: Mapping[str, Vendor]
) -> Endpoint | None:
    """The vendor endpoint ``url`` + ``body`` calls, or ``None`` for any other request."""
    path = url.path.rstrip("/")
    suffix = path[path.rfind("/") :]
    vendor = _declared(url, vendors) or _HOSTS.get(url.host) or _guess(path, suffix, body)
    if vendor is None:
        return None
    if vendor is Vendor.COHERE and path.endswith(COHERE_V1_EMBEDDINGS.route):
        return COHERE_V1_EMBEDDINGS
    return _BY_SUFFIX.get((vendor, suffix))


def _declared(url: httpx.URL, vendors: Mapping[str, Vendor]) -> Vendor | None:
    if not vendors:
        return None
    text = str(url.copy_with(query=None, fragment=None))
    for key, vendor in vendors.items():
        if key == url.host or text.startswith(key):
            return vendor
    return None


def _guess(path: str, suffix: str, body: dict[str, Any]) -> Vendor | None:
    if path.endswith(("/v2/embed", "/v2/rerank")):
        return Vendor.COHERE
    if suffix == "/embed":
        if "texts" in body or "images" in body:
            return Vendor.COHERE
        return Vendor.TEI if "inputs" in body else None
    model = body.get("model")
    named = model if type(model) is str else ""
    if suffix == "/embeddings":
        if body.keys() & _VOYAGE_EMBED_KEYS:
            return Vendor.VOYAGE
        jina = body.keys() & _JINA_EMBED_KEYS or named.startswith("jina")
        return Vendor.JINA if jina else Vendor.OPENAI
    if suffix == "/rerank":
        if "texts" in body and "documents" not in body:
            return Vendor.TEI
        if "top_k" in body:
            return Vendor.VOYAGE
        if body.keys() & _COHERE_RERANK_KEYS or _COHERE_RERANK_MODEL.match(named):
            return Vendor.COHERE
        if "top_n" in body or named.startswith("jina"):
            return Vendor.JINA
        return Vendor.VOYAGE
    return None


def facts_for(endpoint: Endpoint, body: dict[str, Any], url: httpx.URL) -> CallFacts:
    """What the request asked for, read from its JSON body by the endpoint's declaration."""
    model = text_or_none(body.get("model")) or "unknown"
    address, port = server_of(url)
    items_key = endpoint.items_key
    if endpoint.operation == "embeddings":
        source = body.get(items_key)
        if source is None and endpoint.vendor is Vendor.COHERE:
            source = body.get("inputs", body.get("images"))
        count, texts = input_texts(source)
        type_key, dims_key = endpoint.input_type_key, endpoint.dimensions_key
        input_type = text_or_none(body.get(type_key)) if type_key else None
        params: dict[str, Any] = {"input_type": input_type} if input_type else {}
        dimensions = body.get(dims_key) if dims_key else None
        if given(dimensions):
            params["dimensions"] = dimensions
        used = {"model", items_key, "inputs", "images", type_key, dims_key}
        return EmbedFacts(
            provider=endpoint.provider,
            model=model,
            input_count=count,
            inputs=texts,
            input_type=input_type,
            request_params=params,
            extras={k: v for k, v in body.items() if k not in used},
            server_address=address,
            server_port=port,
            billing=endpoint.billing,
            dtype=_requested_type(endpoint, body),
        )
    count, documents = input_texts(body.get(items_key))
    query = body.get("query")
    text = query if type(query) is str else None
    top_key, returns_key = endpoint.top_k_key, endpoint.return_documents_key
    returns = body.get(returns_key) if returns_key else None
    used = {"model", "query", items_key, top_key, returns_key}
    return RerankFacts(
        provider=endpoint.provider,
        model=model,
        query_length=utf8_length(text) if text is not None else 0,
        document_count=count,
        query=text,
        documents=documents,
        top_k=positive_int(body.get(top_key)) if top_key else None,
        request_params={"return_documents": returns} if type(returns) is bool else {},
        extras={k: v for k, v in body.items() if k not in used},
        server_address=address,
        server_port=port,
        billing=endpoint.billing,
    )


def _requested_type(endpoint: Endpoint, body: dict[str, Any]) -> str | None:
    """The vector type the body asks for (Cohere: its first ``embedding_types``, float when
    it asks for floats at all)."""
    if endpoint.vendor is Vendor.COHERE:
        return cohere_vector_type(body.get("embedding_types"))
    for key in _DTYPE_KEYS:
        if key in body:
            return vector_type(body[key])
    return None


def cohere_vector_type(embedding_types: object) -> str | None:
    """The type read from a Cohere body: float when asked for (or nothing was said), else the
    first type asked for."""
    if not given(embedding_types) or type(embedding_types) is not list or not embedding_types:
        return None
    if "float" in embedding_types:
        return None
    return vector_type(embedding_types[0])
