"""Mistral's SDK (``mistralai``): ``embeddings.create`` and ``embeddings.create_async`` of a
``Mistral`` client (``client``)."""

from __future__ import annotations

from typing import Any

from spanledger.capture.declaration import ClassMethod, Integration

__all__ = ["INTEGRATION"]

_EMBEDDINGS = "mistralai.client.embeddings"


def _client_of(resource: Any) -> Any:
    """The ``Mistral`` client an ``Embeddings`` resource belongs to (the resource itself when
    it was made on its own)."""
    parent = getattr(resource, "parent_ref", None)
    return parent if type(parent).__name__ == "Mistral" else resource


INTEGRATION = Integration(
    name="mistralai",
    distribution="mistralai",
    tested=(((3, 7), (4,)),),
    accepts="mistralai Mistral",
    installs=f"{__name__}.client",
    methods=(
        ClassMethod(_EMBEDDINGS, "Embeddings", "create", False, _client_of),
        ClassMethod(_EMBEDDINGS, "Embeddings", "create_async", True, _client_of),
    ),
)
