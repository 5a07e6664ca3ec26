"""sentence-transformers (``sentence_transformers``), run in this process:
``SentenceTransformer.encode`` and ``CrossEncoder.predict`` / ``rank`` (``model``). Their
classes are patched once the program imports the library, never before (it brings in torch)."""

from __future__ import annotations

from spanledger.capture.declaration import Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="sentence_transformers",
    distribution="sentence-transformers",
    tested=(((6, 2), (7,)),),
    accepts="sentence_transformers SentenceTransformer/CrossEncoder",
    installs=f"{__name__}.model",
    creation=f"{__name__}.model",
)
