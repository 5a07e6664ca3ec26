"""Read what a request asked for by its endpoint's declaration: one reader for every path.

The provider classes build bodies with the same paths these functions read, and the httpx
transport, the HTTP switch and SDK captures read them here, so a key (``top_n``, ``topN``,
``outputDimensionality``) is named once, in ``endpoints``. Nothing here raises: a value that is
missing or of the wrong shape reads as absent.
"""

from __future__ import annotations

from typing import Any

from spanledger.wire.endpoints import Endpoint, Vendor, bedrock_model

__all__ = ["item_texts", "request_ids", "request_items", "request_model", "value_at"]


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
