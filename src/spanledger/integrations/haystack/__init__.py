"""Haystack (``haystack``, the ``haystack-ai`` distribution): a pipeline's served, selected,
rendered and cited context, heard through a tracer that stands in front of the application's
own (``switch``, ``tracer``) and read from the components' inputs and outputs (``components``,
``runs``). Nothing is patched: the tracer is enabled once the program imports Haystack."""

from __future__ import annotations

from spanledger.capture.declaration import Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="haystack",
    distribution="haystack-ai",
    tested=(((2, 31), (3,)), ((3, 4), (4,))),
    creation=f"{__name__}.switch",
)
