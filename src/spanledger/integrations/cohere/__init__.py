"""Cohere's SDK (``cohere``): ``embed`` and ``rerank`` of the v2 clients ``ClientV2`` /
``AsyncClientV2`` and the v1 clients ``Client`` / ``AsyncClient`` (``client``)."""

from __future__ import annotations

from spanledger.capture.declaration import ClassMethod, Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="cohere",
    distribution="cohere",
    tested=(((5, 21), (6,)), ((7, 3), (8,))),
    accepts="cohere.ClientV2/AsyncClientV2, cohere.Client/AsyncClient",
    installs=f"{__name__}.client",
    methods=tuple(
        ClassMethod("cohere", owner, name, owner.startswith("Async"))
        for owner in ("ClientV2", "AsyncClientV2", "Client", "AsyncClient")
        for name in ("embed", "rerank")
    ),
)
