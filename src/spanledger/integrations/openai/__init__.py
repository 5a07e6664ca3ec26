"""OpenAI's SDK (``openai``): ``embeddings.create`` of ``OpenAI`` / ``AsyncOpenAI`` and of
Azure's ``AzureOpenAI`` / ``AsyncAzureOpenAI``, recorded as the vendor whose wire each request
reaches (``client``)."""

from __future__ import annotations

from typing import Any

from spanledger.capture.declaration import ClassMethod, Integration

__all__ = ["INTEGRATION"]


def _client_of(resource: Any) -> Any:
    """The client an ``Embeddings`` resource belongs to."""
    return resource._client


INTEGRATION = Integration(
    name="openai",
    distribution="openai",
    tested=(((2, 52), (3,)), ((3, 57), (4,))),
    accepts="openai.OpenAI/AsyncOpenAI (Azure's too)",
    installs=f"{__name__}.client",
    methods=(
        ClassMethod("openai.resources.embeddings", "Embeddings", "create", False, _client_of),
        ClassMethod("openai.resources.embeddings", "AsyncEmbeddings", "create", True, _client_of),
    ),
)
