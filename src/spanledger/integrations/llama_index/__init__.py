"""LlamaIndex (``llama_index.core``): a pipeline's served, selected, rendered and cited frames,
heard through the root instrumentation dispatcher (``dispatcher``), with no hand-written call.
Nothing is patched and no client is instrumented: the switch adds one event handler and one
span handler once the program imports ``llama_index.core``, and takes them off again."""

from __future__ import annotations

from spanledger.capture.declaration import Integration

__all__ = ["INTEGRATION"]

INTEGRATION = Integration(
    name="llama_index.core",
    distribution="llama-index-core",
    tested=(((0, 14), (0, 15)),),
    creation=f"{__name__}.dispatcher",
)
