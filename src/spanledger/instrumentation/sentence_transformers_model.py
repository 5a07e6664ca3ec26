"""An old address, kept working: the capture of sentence-transformers lives in
``spanledger.integrations.sentence_transformers``."""

from __future__ import annotations

from spanledger.integrations.sentence_transformers.model import LIBRARY, hook, install

__all__ = ["LIBRARY", "hook", "install"]
