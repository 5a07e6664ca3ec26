"""Cohere v2: ``/v2/embed`` and ``/v2/rerank``."""

from __future__ import annotations

from typing import Any

import httpx

from spanledger import figures
from spanledger.events import EmbeddingUsage
from spanledger.providers._calls import (
    EmbedCall,
    RerankCall,
    invalid_request,
    merge_list_extra,
    with_extras,
)
from spanledger.providers._decode import (
    decode_embedding,
    invalid_response,
    require_count,
    require_list,
    rerank_results,
)
from spanledger.providers._driver import Timeout
from spanledger.providers._mapping import (
    EmbeddingMapping,
    EmbeddingPart,
    RerankMapping,
    RerankPart,
    dig,
    rerank_usage,
)
from spanledger.providers._provider import EmbeddingProvider, RerankProvider
from spanledger.recorder import Recorder

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

    provider = "cohere"
    route = "/v2/embed"
    default_base_url = "https://api.cohere.com"
    api_key_env = "CO_API_KEY"
    default_chunk_size = 96

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

    def parse(self, payload: Any, expected: int) -> EmbeddingPart:
        floats = dig(payload, "embeddings", "float")
        if type(floats) is not list:
            raise invalid_response("embeddings.float is missing", "missing_field")
        require_count(floats, expected)
        tokens = figures.count(dig(payload, "meta", "billed_units", "input_tokens"))
        return EmbeddingPart(
            vectors=[_float_vector(v) for v in floats],
            usage=EmbeddingUsage(input_tokens=tokens) if tokens is not None else None,
            response_id=figures.response_id(dig(payload, "id")),
            model=None,
            raw=payload,
        )


def _float_vector(value: object) -> list[float]:
    if type(value) is not list:
        raise invalid_response("an embedding is not a number array", "bad_vector")
    return decode_embedding(value)


class CohereRerankMapping(RerankMapping):
    """``POST /v2/rerank``: bills search units; never echoes documents (``return_documents``
    is a no-op and leaves the body unchanged)."""

    provider = "cohere"
    route = "/v2/rerank"
    billing = "search_units"
    default_base_url = "https://api.cohere.com"
    api_key_env = "CO_API_KEY"

    def body(self, call: RerankCall, documents: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "query": call.query, "documents": documents}
        if call.top_k is not None:
            body["top_n"] = call.top_k
        return with_extras(body, call.extras)

    def parse(self, payload: Any, call: RerankCall, document_count: int) -> RerankPart:
        items = require_list(dig(payload, "results"), "results")
        return RerankPart(
            results=rerank_results(items, document_count, document_key=None, limit=call.top_k),
            usage=rerank_usage(dig(payload, "meta", "billed_units", "search_units"), None),
            response_id=figures.response_id(dig(payload, "id")),
            model=None,
            raw=payload,
        )


class CohereEmbeddings(EmbeddingProvider):
    """Cohere embeddings; inputs over 96 (or ``chunk_size``) are chunked and stitched."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        timeout: Timeout = None,
        recorder: Recorder | None = None,
        chunk_size: int | None = None,
    ) -> None:
        self._mapping = CohereEmbeddingMapping(
            model=model, base_url=base_url, api_key=api_key, chunk_size=chunk_size
        )
        super().__init__(
            http_client=http_client,
            async_http_client=async_http_client,
            timeout=timeout,
            recorder=recorder,
        )


class CohereReranker(RerankProvider):
    """Cohere rerank; usage is ``RerankUsage(search_units=...)``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        http_client: httpx.Client | None = None,
        async_http_client: httpx.AsyncClient | None = None,
        timeout: Timeout = None,
        recorder: Recorder | None = None,
    ) -> None:
        self._mapping = CohereRerankMapping(
            model=model, base_url=base_url, api_key=api_key, chunk_size=None
        )
        super().__init__(
            http_client=http_client,
            async_http_client=async_http_client,
            timeout=timeout,
            recorder=recorder,
        )
