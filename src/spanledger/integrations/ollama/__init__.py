"""Ollama's SDK (``ollama``): ``embed`` and the legacy ``embeddings`` of ``Client`` /
``AsyncClient`` (``client``); the module-level ``ollama.embed`` is bound to a client made at
import, so the switch also rebinds those functions (``client.hook``)."""

from __future__ import annotations

from spanledger.capture.declaration import ClassMethod, Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="ollama",
    distribution="ollama",
    tested=(((0, 6), (0, 7)),),
    accepts="ollama.Client/AsyncClient",
    installs=f"{__name__}.client",
    methods=tuple(
        ClassMethod("ollama._client", owner, name, owner == "AsyncClient")
        for owner in ("Client", "AsyncClient")
        for name in ("embed", "embeddings")
    ),
    creation=f"{__name__}.client",
)
