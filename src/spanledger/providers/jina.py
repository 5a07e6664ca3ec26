"""Jina: ``/v1/embeddings`` and ``/v1/rerank``."""

from __future__ import annotations

from typing import Any

from spanledger.providers._calls import EmbedCall, RerankCall, invalid_request, with_extras
from spanledger.providers._mapping import EmbeddingMapping, RerankMapping
from spanledger.providers._provider import EmbeddingProvider, RerankProvider
from spanledger.wire.endpoints import JINA_EMBEDDINGS, JINA_RERANK

__all__ = ["JinaEmbeddingMapping", "JinaEmbeddings", "JinaRerankMapping", "JinaReranker"]

_TASKS = {"query": "retrieval.query", "document": "retrieval.passage"}


class JinaEmbeddingMapping(EmbeddingMapping):
    """``POST /v1/embeddings`` with ``truncate: false``. ``input_type`` is a closed set mapped to
    ``task``; other tasks ride extras as ``task`` only while ``input_type`` is absent."""

    endpoint = JINA_EMBEDDINGS

    def check(self, call: EmbedCall) -> None:
        if call.input_type is not None and call.input_type not in _TASKS:
            raise invalid_request("input_type is not one Jina accepts", "unsupported_input_type")

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": inputs}
        if call.input_type is not None:
            body["task"] = _TASKS[call.input_type]
        if call.dimensions is not None:
            body["dimensions"] = call.dimensions
        body["truncate"] = False
        return with_extras(body, call.extras)


class JinaRerankMapping(RerankMapping):
    """``POST /v1/rerank`` with ``truncation: false`` and ``return_documents`` always sent
    (Jina's own default is true). Echoed documents follow the echo rule."""

    endpoint = JINA_RERANK

    def body(self, call: RerankCall, documents: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "query": call.query, "documents": documents}
        if call.top_k is not None:
            body["top_n"] = call.top_k
        body["return_documents"] = call.wants_documents
        body["truncation"] = False
        return with_extras(body, call.extras)


class JinaEmbeddings(EmbeddingProvider):
    """Jina embeddings (no input cap, so never chunked unless ``chunk_size`` says so)."""

    mapping_class = JinaEmbeddingMapping


class JinaReranker(RerankProvider):
    """Jina rerank; usage is ``RerankUsage(input_tokens=...)`` from ``usage.total_tokens``."""

    mapping_class = JinaRerankMapping
