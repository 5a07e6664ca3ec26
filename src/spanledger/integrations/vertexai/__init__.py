"""The Vertex AI SDK (``vertexai``, in ``google-cloud-aiplatform``): ``get_embeddings`` and
``get_embeddings_async`` of a ``TextEmbeddingModel`` (``model``)."""

from __future__ import annotations

from spanledger.capture.declaration import ClassMethod, Integration

__all__ = ["INTEGRATION"]

_MODELS = "vertexai.language_models._language_models"

INTEGRATION = Integration(
    name="vertexai",
    distribution="google-cloud-aiplatform",
    tested=(((2, 7), (3,)),),
    accepts="vertexai TextEmbeddingModel",
    installs=f"{__name__}.model",
    methods=(
        ClassMethod(_MODELS, "_TextEmbeddingModel", "get_embeddings", False),
        ClassMethod(_MODELS, "_TextEmbeddingModel", "get_embeddings_async", True),
    ),
)
