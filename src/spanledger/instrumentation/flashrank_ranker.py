"""An old address, kept working: the capture of FlashRank lives in
``spanledger.integrations.flashrank``."""

from __future__ import annotations

from spanledger.integrations.flashrank.ranker import LIBRARY, hook, install

__all__ = ["LIBRARY", "hook", "install"]
