"""FlashRank (``flashrank``), run in this process: ``Ranker.rerank`` (``ranker``), patched once
the program imports the library."""

from __future__ import annotations

from spanledger.capture.declaration import Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="flashrank",
    distribution="flashrank",
    tested=(((0, 2, 10), (0, 3)),),
    accepts="flashrank Ranker",
    installs=f"{__name__}.ranker",
    creation=f"{__name__}.ranker",
)
