"""An old address, kept working: the capture of Ollama's SDK lives in
``spanledger.integrations.ollama``."""

from __future__ import annotations

from spanledger.integrations.ollama.client import hook, install

__all__ = ["hook", "install"]
