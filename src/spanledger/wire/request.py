"""Read what a request asked for by its endpoint's declaration: one reader for every path.

The provider classes build bodies with the same paths these functions read, and the httpx
transport, the HTTP switch and SDK captures read them here, so a key (``top_n``, ``topN``,
``outputDimensionality``) is named once, in ``endpoints``. Nothing here raises: a value that is
missing or of the wrong shape reads as absent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from spanledger.wire.endpoints import Endpoint, VectorLayout, Vendor, bedrock_model
from spanledger.wire.http import server_of
from spanledger.wire.read import vector_type

__all__ = [
    "RequestRead",
    "cohere_vector_type",
    "item_texts",
    "read_request",
    "request_ids",
    "request_items",
    "request_model",
    "request_path",
    "value_at",
]

_BY_TYPE = (VectorLayout.BY_TYPE, VectorLayout.FLOATS_OR_BY_TYPE)
_DTYPE_KEYS = ("output_dtype", "embedding_type", "encoding_format")


def value_at(body: object, path: tuple[str, ...] | None) -> object:
    """``body`` followed along ``path``: object keys, and a digit step indexes a list."""
    if not path:
        return None
    node = body
    for step in path:
        if type(node) is dict:
            node = node.get(step)
        elif type(node) is list and step.isdigit():
            index = int(step)
            node = node[index] if index < len(node) else None
        else:
            return None
    return node


def request_items(endpoint: Endpoint, body: object) -> object:
    """The inputs (embeddings) or documents (rerank) the request carries, as sent."""
    return value_at(body, endpoint.items_at)


def item_texts(endpoint: Endpoint, items: object) -> object:
    """The texts inside ``items`` where each item wraps its text (``item_text_at``), a list
    with ``None`` for an item holding none; ``items`` as they are otherwise. A one-input
    request's single item is a list of one."""
    if endpoint.single_input:
        items = [items] if items is not None else None
    path = endpoint.item_text_at
    if not path or type(items) is not list:
        return items
    texts: list[Any] = []
    for item in items:
        text = value_at(item, path)
        texts.append(text if type(text) is str else None)
    return texts


def request_model(endpoint: Endpoint, body: object, url_path: str) -> str | None:
    """The model the request names: in the URL for a route that holds it, else in the body
    (a Bedrock id is read as the base model it names)."""
    named = endpoint.route_model(url_path) if endpoint.model_in_route else None
    if named is None:
        value = value_at(body, endpoint.request_model_at)
        named = value if type(value) is str and value else None
    if named is not None and endpoint.vendor is Vendor.BEDROCK:
        return bedrock_model(named)
    return named


def request_ids(endpoint: Endpoint, body: object) -> list[object] | None:
    """The id the request gave each document, for an endpoint whose results name them so."""
    if endpoint.result_ids_at is None:
        return None
    items = request_items(endpoint, body)
    if type(items) is not list:
        return None
    return [value_at(item, endpoint.result_ids_at) for item in items]


def request_path(url: httpx.URL) -> str:
    """The URL's path as sent (percent-encoding kept, so a Bedrock ARN stays one segment),
    without a trailing slash."""
    raw = url.raw_path.split(b"?", 1)[0]
    return raw.decode("ascii", "replace").rstrip("/")


@dataclass(frozen=True, slots=True)
class RequestRead:
    """Everything one request to a declared endpoint asked for, each value as it was sent
    (judging the values is the recording core's business)."""

    model: str | None
    items: object
    """The inputs (embeddings) or documents (rerank), as texts where the declaration says
    where each item keeps its text."""
    input_type: object
    dimensions: object
    query: object
    top_k: object
    returns_documents: object
    document_ids: list[object] | None
    extras: dict[str, Any]
    vector_type: str | None
    server_address: str | None
    server_port: int | None


def read_request(endpoint: Endpoint, body: dict[str, Any], url: httpx.URL) -> RequestRead:
    """Read the request that ``body`` (its JSON) sent to ``url`` by ``endpoint``'s declaration:
    the model from the route that names it, else from the body; every other value from where
    the declaration says it is."""
    items = request_items(endpoint, body)
    if items is None and endpoint.operation == "embeddings" and endpoint.vendor is Vendor.COHERE:
        items = body.get("inputs", body.get("images"))
    returns_key = endpoint.return_documents_key
    address, port = server_of(url)
    return RequestRead(
        model=request_model(endpoint, body, request_path(url)),
        items=item_texts(endpoint, items),
        input_type=value_at(body, endpoint.input_type_at),
        dimensions=value_at(body, endpoint.dimensions_at),
        query=value_at(body, endpoint.query_at),
        top_k=value_at(body, endpoint.top_k_at),
        returns_documents=body.get(returns_key) if returns_key else None,
        document_ids=request_ids(endpoint, body),
        extras=_extras(endpoint, body),
        vector_type=_requested_type(endpoint, body),
        server_address=address,
        server_port=port,
    )


def _extras(endpoint: Endpoint, body: dict[str, Any]) -> dict[str, Any]:
    """The body's top-level keys the declaration does not read (the caller's extras)."""
    read = _read_keys(endpoint)
    return {key: value for key, value in body.items() if key not in read}


_read_keys_kept: dict[int, tuple[Endpoint, frozenset[str]]] = {}
_READ_KEYS_KEPT = 256


def _read_keys(endpoint: Endpoint) -> frozenset[str]:
    """The top-level body keys ``endpoint``'s declaration reads, worked out once per
    declaration (cached by identity, checked to be the one cached)."""
    found = _read_keys_kept.get(id(endpoint))
    if found is not None and found[0] is endpoint:
        return found[1]
    read = {
        path[0]
        for path in (
            endpoint.items_at,
            endpoint.request_model_at,
            endpoint.input_type_at,
            endpoint.dimensions_at,
            endpoint.query_at,
            endpoint.top_k_at,
        )
        if path
    }
    read.add("model")
    if endpoint.operation == "embeddings":
        read.update(("inputs", "images"))
    if endpoint.return_documents_key:
        read.add(endpoint.return_documents_key)
    keys = frozenset(read)
    if len(_read_keys_kept) < _READ_KEYS_KEPT:
        _read_keys_kept[id(endpoint)] = (endpoint, keys)
    return keys


def _requested_type(endpoint: Endpoint, body: dict[str, Any]) -> str | None:
    """The vector type the body asks for (Cohere: its first ``embedding_types``, float when
    it asks for floats at all)."""
    if endpoint.vectors in _BY_TYPE:
        return cohere_vector_type(body.get("embedding_types"))
    for key in _DTYPE_KEYS:
        if key in body:
            return vector_type(body[key])
    return None


def cohere_vector_type(embedding_types: object) -> str | None:
    """The type read from a Cohere request's ``embedding_types``: float when asked for (or
    nothing was said), else the first type asked for."""
    if type(embedding_types) is not list or not embedding_types:
        return None
    if "float" in embedding_types:
        return None
    return vector_type(embedding_types[0])
