"""Voyage AI: ``/v1/embeddings`` and ``/v1/rerank``.

Voyage truncates over-length inputs by default; like Jina and Cohere here, the mapping sends
``truncation: false`` so an over-length input fails loudly instead of being embedded in part.
"""

from __future__ import annotations

from typing import Any

from spanledger.providers._calls import EmbedCall, RerankCall, invalid_request, with_extras
from spanledger.providers._mapping import EmbeddingMapping, RerankMapping
from spanledger.providers._provider import EmbeddingProvider, RerankProvider
from spanledger.wire.endpoints import VOYAGE_EMBEDDINGS, VOYAGE_RERANK

__all__ = ["VoyageEmbeddingMapping", "VoyageEmbeddings", "VoyageRerankMapping", "VoyageReranker"]

_INPUT_TYPES = frozenset({"query", "document"})


class VoyageEmbeddingMapping(EmbeddingMapping):
    """``POST /v1/embeddings``: ``{model, input, input_type?, output_dimension?, truncation}``.

    Voyage accepts at most 1,000 texts per request; longer lists are chunked and stitched.
    """

    endpoint = VOYAGE_EMBEDDINGS

    def check(self, call: EmbedCall) -> None:
        if call.input_type is not None and call.input_type not in _INPUT_TYPES:
            raise invalid_request("input_type is not one Voyage accepts", "unsupported_input_type")

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": inputs}
        if call.input_type is not None:
            body["input_type"] = call.input_type
        if call.dimensions is not None:
            body["output_dimension"] = call.dimensions
        body["truncation"] = False
        return with_extras(body, call.extras)


class VoyageRerankMapping(RerankMapping):
    """``POST /v1/rerank``: ``{model, query, documents, top_k?, return_documents, truncation}``;
    results arrive under ``data``; ``usage.total_tokens`` is the billed figure."""

    endpoint = VOYAGE_RERANK

    def body(self, call: RerankCall, documents: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "query": call.query, "documents": documents}
        if call.top_k is not None:
            body["top_k"] = call.top_k
        body["return_documents"] = call.wants_documents
        body["truncation"] = False
        return with_extras(body, call.extras)


class VoyageEmbeddings(EmbeddingProvider):
    """Voyage embeddings; inputs over 1,000 (or ``chunk_size``) are chunked and stitched."""

    mapping_class = VoyageEmbeddingMapping


class VoyageReranker(RerankProvider):
    """Voyage rerank; usage is ``RerankUsage(input_tokens=...)``."""

    mapping_class = VoyageRerankMapping
