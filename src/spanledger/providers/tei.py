"""Hugging Face Text Embeddings Inference: ``/embed`` and ``/rerank`` on a deployment's origin.

TEI caps a request at ``max-client-batch-size`` (32 by default), so both endpoints chunk by
``chunk_size``. Rerank chunks documents, re-bases each chunk's indices, sorts globally and
applies ``top_k`` on the client (the wire has no ``top_n``). TEI reports no usage and no id.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Unpack

from spanledger.providers._calls import (
    EmbedCall,
    RerankCall,
    invalid_request,
    reject_conflict,
    with_extras,
)
from spanledger.providers._mapping import EmbeddingMapping, RerankMapping, apply_prefix
from spanledger.providers._provider import ClientOptions, EmbeddingProvider, RerankProvider
from spanledger.wire.endpoints import TEI_EMBEDDINGS, TEI_RERANK

__all__ = ["TEIEmbeddingMapping", "TEIEmbeddings", "TEIRerankMapping", "TEIReranker"]

_TRUNCATE = frozenset({"truncate"})


class TEIEmbeddingMapping(EmbeddingMapping):
    """``POST /embed``: ``{inputs, prompt_name?, dimensions?}``; ``truncate`` is never sent.

    ``input_type`` becomes TEI's ``prompt_name`` from ``input_type_prompt_map``, or else a
    client-side prefix. A deployment configured with neither is symmetric (``input_type`` is a
    no-op); one configured with some is a closed set, and an uncovered value is refused.
    """

    endpoint = TEI_EMBEDDINGS

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        chunk_size: int | None,
        input_type_prompt_map: Mapping[str, str] | None,
        query_prefix: str | None,
        document_prefix: str | None,
    ) -> None:
        super().__init__(model=model, base_url=base_url, api_key=api_key, chunk_size=chunk_size)
        self.prompt_map = dict(input_type_prompt_map or {})
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix

    def _prefix_for(self, input_type: str) -> str | None:
        return {"query": self.query_prefix, "document": self.document_prefix}.get(input_type)

    def check(self, call: EmbedCall) -> None:
        reject_conflict(call.extras, "truncate", False)
        kind = call.input_type
        if kind is None or kind in self.prompt_map or self._prefix_for(kind):
            return
        if self.prompt_map or self.query_prefix or self.document_prefix:
            raise invalid_request(
                "input_type has no prompt_name or prefix configured", "unsupported_input_type"
            )

    def wire_inputs(self, call: EmbedCall) -> list[str]:
        if call.input_type is None or call.input_type in self.prompt_map:
            return call.inputs
        return apply_prefix(call.inputs, call.input_type, self.query_prefix, self.document_prefix)

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"inputs": inputs}
        if call.input_type is not None and call.input_type in self.prompt_map:
            body["prompt_name"] = self.prompt_map[call.input_type]
        if call.dimensions is not None:
            body["dimensions"] = call.dimensions
        return with_extras(body, call.extras, handled=_TRUNCATE)


class TEIRerankMapping(RerankMapping):
    """``POST /rerank``: ``{query, texts, truncate: false, return_text}``; results
    ``[{index, score, text?}]`` in no guaranteed order."""

    endpoint = TEI_RERANK

    def body(self, call: RerankCall, documents: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "query": call.query,
            "texts": documents,
            "truncate": False,
            "return_text": call.wants_documents,
        }
        return with_extras(body, call.extras)


class TEIEmbeddings(EmbeddingProvider):
    """Embeddings from a TEI deployment; ``base_url`` (its origin) is required.
    ``input_type_prompt_map`` names TEI's ``prompt_name`` per ``input_type``; else
    ``query_prefix`` / ``document_prefix`` are put before the texts."""

    mapping_class = TEIEmbeddingMapping

    def __init__(
        self,
        model: str,
        *,
        input_type_prompt_map: Mapping[str, str] | None = None,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        self._prompts = {
            "input_type_prompt_map": input_type_prompt_map,
            "query_prefix": query_prefix,
            "document_prefix": document_prefix,
        }
        super().__init__(model, **options)

    def _mapping_options(self) -> dict[str, Any]:
        return self._prompts


class TEIReranker(RerankProvider):
    """Rerank on a TEI deployment; documents over ``chunk_size`` are sent in chunks."""

    mapping_class = TEIRerankMapping
