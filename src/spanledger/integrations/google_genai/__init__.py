"""Google's Gen AI SDK (``google.genai``): ``models.embed_content`` and
``aio.models.embed_content`` of a ``Client``, on the Gemini API and on Vertex AI (``client``)."""

from __future__ import annotations

from spanledger.capture.declaration import ClassMethod, Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="google.genai",
    distribution="google-genai",
    tested=(((2, 30), (3,)), ((3, 6), (4,))),
    accepts="google.genai.Client",
    installs=f"{__name__}.client",
    methods=(
        ClassMethod("google.genai.models", "Models", "embed_content", False),
        ClassMethod("google.genai.models", "AsyncModels", "embed_content", True),
    ),
)
