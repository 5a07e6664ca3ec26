"""Mistral: ``/v1/embeddings`` (``mistral-embed``, ``codestral-embed``), OpenAI's shape."""

from __future__ import annotations

from typing import Any

from spanledger.providers._calls import EmbedCall, with_extras
from spanledger.providers._mapping import EmbeddingMapping
from spanledger.providers._provider import EmbeddingProvider
from spanledger.wire.endpoints import MISTRAL_EMBEDDINGS

__all__ = ["MistralEmbeddingMapping", "MistralEmbeddings"]


class MistralEmbeddingMapping(EmbeddingMapping):
    """``POST /v1/embeddings``: ``{model, input, output_dimension?}``; ``input_type`` is not a
    wire field (a no-op); ``output_dtype`` rides extras."""

    endpoint = MISTRAL_EMBEDDINGS

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "input": inputs}
        if call.dimensions is not None:
            body["output_dimension"] = call.dimensions
        return with_extras(body, call.extras)


class MistralEmbeddings(EmbeddingProvider):
    """Mistral embeddings (key: ``MISTRAL_API_KEY``)."""

    mapping_class = MistralEmbeddingMapping
