"""An old address, kept working: the capture of the Vertex AI SDK lives in
``spanledger.integrations.vertexai``."""

from __future__ import annotations

from spanledger.integrations.vertexai.model import install

__all__ = ["install"]
