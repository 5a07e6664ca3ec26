"""Cohere v2: ``/v2/embed`` and ``/v2/rerank``."""

from __future__ import annotations

from typing import Any

from spanledger.providers._calls import (
    EmbedCall,
    RerankCall,
    invalid_request,
    merge_list_extra,
    with_extras,
)
from spanledger.providers._mapping import EmbeddingMapping, RerankMapping
from spanledger.providers._provider import EmbeddingProvider, RerankProvider
from spanledger.wire.endpoints import COHERE_EMBEDDINGS, COHERE_RERANK

__all__ = ["CohereEmbeddingMapping", "CohereEmbeddings", "CohereRerankMapping", "CohereReranker"]

_INPUT_TYPES = {
    "query": "search_query",
    "document": "search_document",
    "classification": "classification",
    "clustering": "clustering",
}


class CohereEmbeddingMapping(EmbeddingMapping):
    """``POST /v2/embed``. ``input_type`` is mandatory on this wire: absent means
    ``search_document`` (not recorded as the caller's choice); unknown values are refused.
    Only ``embeddings.float`` is read; other precisions stay on ``raw``.
    """

    endpoint = COHERE_EMBEDDINGS

    def check(self, call: EmbedCall) -> None:
        if call.input_type is not None and call.input_type not in _INPUT_TYPES:
            raise invalid_request("input_type is not one Cohere accepts", "unsupported_input_type")

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "input_type": _INPUT_TYPES[call.input_type or "document"],
            "texts": inputs,
            "embedding_types": merge_list_extra(["float"], call.extras.get("embedding_types"), str),
            "truncate": "NONE",
        }
        if call.dimensions is not None:
            body["output_dimension"] = call.dimensions
        return with_extras(body, call.extras, handled=frozenset({"embedding_types"}))


class CohereRerankMapping(RerankMapping):
    """``POST /v2/rerank``: bills search units; never echoes documents (``return_documents``
    is a no-op and leaves the body unchanged)."""

    endpoint = COHERE_RERANK

    def body(self, call: RerankCall, documents: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "query": call.query, "documents": documents}
        if call.top_k is not None:
            body["top_n"] = call.top_k
        return with_extras(body, call.extras)


class CohereEmbeddings(EmbeddingProvider):
    """Cohere embeddings; inputs over 96 (or ``chunk_size``) are chunked and stitched."""

    mapping_class = CohereEmbeddingMapping


class CohereReranker(RerankProvider):
    """Cohere rerank; usage is ``RerankUsage(search_units=...)``."""

    mapping_class = CohereRerankMapping
