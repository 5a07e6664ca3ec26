"""An old address, kept working: the capture of Cohere's SDK lives in
``spanledger.integrations.cohere``."""

from __future__ import annotations

from spanledger.integrations.cohere.client import install

__all__ = ["install"]
