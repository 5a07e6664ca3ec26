"""An old address, kept working: the capture of OpenAI's SDK lives in
``spanledger.integrations.openai``."""

from __future__ import annotations

from spanledger.integrations.openai.client import install

__all__ = ["install"]
