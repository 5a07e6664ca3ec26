"""An old address, kept working: the capture of Google's Gen AI SDK lives in
``spanledger.integrations.google_genai``."""

from __future__ import annotations

from spanledger.integrations.google_genai.client import install

__all__ = ["install"]
