"""OpenAI-compatible embeddings (OpenAI, vLLM, LocalAI, Together, TEI's OpenAI route, ...)."""

from __future__ import annotations

from typing import Any, Unpack

from spanledger.providers._calls import EmbedCall, with_extras
from spanledger.providers._mapping import EmbeddingMapping, apply_prefix
from spanledger.providers._provider import ClientOptions, EmbeddingProvider
from spanledger.wire.endpoints import OPENAI_EMBEDDINGS

__all__ = ["OpenAIEmbeddingMapping", "OpenAIEmbeddings"]


class OpenAIEmbeddingMapping(EmbeddingMapping):
    """``POST /v1/embeddings``: ``{model, input, dimensions?}`` plus extras at the root.

    ``input_type`` is never a wire field: a no-op, or a client-side prefix when one is bound.
    ``encoding_format`` rides extras untouched; vectors are decoded by their shape.
    """

    endpoint = OPENAI_EMBEDDINGS

    def __init__(
        self,
        *,
        model: str,
        base_url: str | None,
        api_key: str | None,
        chunk_size: int | None,
        query_prefix: str | None,
        document_prefix: str | None,
    ) -> None:
        super().__init__(model=model, base_url=base_url, api_key=api_key, chunk_size=chunk_size)
        self.query_prefix = query_prefix
        self.document_prefix = document_prefix

    def wire_inputs(self, call: EmbedCall) -> list[str]:
        return apply_prefix(call.inputs, call.input_type, self.query_prefix, self.document_prefix)

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": inputs}
        if call.dimensions is not None:
            body["dimensions"] = call.dimensions
        return with_extras(body, call.extras)


class OpenAIEmbeddings(EmbeddingProvider):
    """Embeddings over the OpenAI-compatible wire; ``base_url`` is an origin.
    ``query_prefix`` / ``document_prefix``: text put before each input of that ``input_type``."""

    mapping_class = OpenAIEmbeddingMapping

    def __init__(
        self,
        model: str,
        *,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        **options: Unpack[ClientOptions],
    ) -> None:
        self._prefixes = {"query_prefix": query_prefix, "document_prefix": document_prefix}
        super().__init__(model, **options)

    def _mapping_options(self) -> dict[str, Any]:
        return self._prefixes
