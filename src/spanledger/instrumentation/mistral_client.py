"""An old address, kept working: the capture of Mistral's SDK lives in
``spanledger.integrations.mistralai``."""

from __future__ import annotations

from spanledger.integrations.mistralai.client import install

__all__ = ["install"]
