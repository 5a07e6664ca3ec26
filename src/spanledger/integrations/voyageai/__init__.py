"""Voyage AI's SDK (``voyageai``): ``embed`` and ``rerank`` of ``Client`` / ``AsyncClient``,
read at the SDK's requestor (``client``)."""

from __future__ import annotations

from spanledger.capture.declaration import ClassMethod, Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="voyageai",
    distribution="voyageai",
    tested=(((0, 3, 7), (0, 4)), ((0, 5), (0, 6))),
    accepts="voyageai.Client/AsyncClient",
    installs=f"{__name__}.client",
    methods=(
        ClassMethod("voyageai.client", "Client", "embed", False),
        ClassMethod("voyageai.client", "Client", "rerank", False),
        ClassMethod("voyageai.client_async", "AsyncClient", "embed", True),
        ClassMethod("voyageai.client_async", "AsyncClient", "rerank", True),
    ),
)
