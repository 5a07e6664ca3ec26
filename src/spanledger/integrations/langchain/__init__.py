"""LangChain (``langchain_core``): a pipeline's served, selected, rendered and cited frames,
heard by a callback handler LangChain adds to every run itself (``handler``), with no
hand-written call and no callback passed. Nothing is patched and no client is instrumented:
the switch registers the handler with langchain-core's configure hook once the program imports
it, and switches it on and off (``switch``)."""

from __future__ import annotations

from spanledger.capture.declaration import Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="langchain_core",
    distribution="langchain-core",
    tested=(((1, 8), (2,)),),
    creation=f"{__name__}.switch",
)
