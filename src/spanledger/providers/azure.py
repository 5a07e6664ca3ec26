"""Azure OpenAI: embeddings on a deployment (``/openai/deployments/{deployment}/embeddings``).

The model is the deployment's: events record the deployment as ``model`` and the model the
response names (``text-embedding-3-small``) as ``response_model``; the ledger prices by either.
"""

from __future__ import annotations

import os
from typing import Any, Unpack

from spanledger.providers._calls import EmbedCall, with_extras
from spanledger.providers._mapping import EmbeddingMapping
from spanledger.providers._provider import ClientOptions, EmbeddingProvider
from spanledger.wire.endpoints import AZURE_EMBEDDINGS

__all__ = ["AzureOpenAIEmbeddingMapping", "AzureOpenAIEmbeddings"]

DEFAULT_API_VERSION = "2024-10-21"
"""The generally available Azure OpenAI data-plane version spanledger sends by default."""


class AzureOpenAIEmbeddingMapping(EmbeddingMapping):
    """``POST /openai/deployments/{deployment}/embeddings?api-version=…``: OpenAI's body and
    answer; the key travels in ``api-key``."""

    endpoint = AZURE_EMBEDDINGS

    def __init__(self, *, api_version: str, **common: Any) -> None:
        if type(api_version) is not str or not api_version:
            raise ValueError("api_version must be a non-empty string")
        self.api_version = api_version
        super().__init__(**common)

    def query(self) -> dict[str, str]:
        return {"api-version": self.api_version}

    def body(self, call: EmbedCall, inputs: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"input": inputs}
        if call.dimensions is not None:
            body["dimensions"] = call.dimensions
        return with_extras(body, call.extras)


class AzureOpenAIEmbeddings(EmbeddingProvider):
    """Embeddings from an Azure OpenAI deployment: ``deployment`` is the model argument;
    ``base_url`` is the resource's endpoint (else ``AZURE_OPENAI_ENDPOINT``), the key
    ``api_key`` or ``AZURE_OPENAI_API_KEY``; ``api_version`` defaults to a GA version."""

    mapping_class = AzureOpenAIEmbeddingMapping

    def __init__(
        self,
        deployment: str,
        *,
        api_version: str = DEFAULT_API_VERSION,
        **options: Unpack[ClientOptions],
    ) -> None:
        self._version = {"api_version": api_version}
        if options.get("base_url") is None:
            options["base_url"] = os.environ.get("AZURE_OPENAI_ENDPOINT") or None
        super().__init__(deployment, **options)

    def _mapping_options(self) -> dict[str, Any]:
        return self._version
