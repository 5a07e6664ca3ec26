"""An old address, kept working: the capture of Voyage AI's SDK lives in
``spanledger.integrations.voyageai``."""

from __future__ import annotations

from spanledger.integrations.voyageai.client import install

__all__ = ["install"]
