"""Retrieved items as RAG frameworks hand them over: LangChain ``Document`` and LlamaIndex
``NodeWithScore`` lists, read for their text and their id.

A framework is never imported here: its class is looked up only among the modules already
loaded, so an application that does not use LangChain or LlamaIndex never loads them, and one
that does gets its own classes (whatever their version) checked with ``isinstance``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Passages", "framework_passages"]

_ID_KEYS = ("id", "doc_id", "document_id")
"""Metadata keys that name a passage, in the order they are looked for."""


@dataclass(frozen=True)
class Passages:
    """What a list of framework items held: each item's text, and its id where every item has
    one (``None``: some item has none, so positions name them all, as for plain passages)."""

    texts: list[str]
    ids: list[str] | None


def framework_passages(source: object) -> Passages | None:
    """``source`` read as a list of LangChain documents or LlamaIndex scored nodes, or ``None``
    when it is neither (or the framework was never loaded)."""
    if not isinstance(source, Sequence) or isinstance(source, str) or not source:
        return None
    for module, name, read in _FRAMEWORKS:
        kind = _loaded_class(module, name)
        if kind is not None and isinstance(source[0], kind):
            if not all(isinstance(item, kind) for item in source):
                raise TypeError(f"a list of {name} holds something else too")
            pairs = [read(item) for item in source]
            texts = [text for text, _ in pairs]
            ids = [found for _, found in pairs]
            named = [found for found in ids if found is not None]
            return Passages(texts, named if len(named) == len(ids) else None)
    return None


def _loaded_class(module: str, name: str) -> type | None:
    loaded = sys.modules.get(module)
    kind = getattr(loaded, name, None) if loaded is not None else None
    return kind if isinstance(kind, type) else None


def _langchain_document(item: object) -> tuple[str, str | None]:
    """A LangChain ``Document``: ``page_content``; its ``id``, else an id in its metadata."""
    text = getattr(item, "page_content", None)
    if not isinstance(text, str):
        raise TypeError("a LangChain Document without page_content text")
    return text, _text(getattr(item, "id", None)) or _metadata_id(getattr(item, "metadata", None))


def _llama_index_node(item: object) -> tuple[str, str | None]:
    """A LlamaIndex ``NodeWithScore``: its node's content without metadata, and its id (the
    node's ``node_id``, else an id in its metadata)."""
    node = getattr(item, "node", None)
    content = getattr(node, "get_content", None)
    text = content() if callable(content) else None
    if not isinstance(text, str):
        raise TypeError("a LlamaIndex NodeWithScore whose node has no text content")
    found = _text(getattr(node, "node_id", None))
    return text, found or _metadata_id(getattr(node, "metadata", None))


def _metadata_id(metadata: object) -> str | None:
    if not isinstance(metadata, Mapping):
        return None
    for key in _ID_KEYS:
        found = _text(metadata.get(key))
        if found is not None:
            return found
    return None


def _text(value: object) -> str | None:
    """An id as text: a non-empty string, or an integer written out."""
    if isinstance(value, str):
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


_FRAMEWORKS: tuple[tuple[str, str, Callable[[object], tuple[str, str | None]]], ...] = (
    ("langchain_core.documents.base", "Document", _langchain_document),
    ("llama_index.core.schema", "NodeWithScore", _llama_index_node),
)
