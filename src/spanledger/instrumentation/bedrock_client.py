"""An old address, kept working: the capture of Bedrock through botocore lives in
``spanledger.integrations.botocore``."""

from __future__ import annotations

from spanledger.integrations.botocore.client import OPERATIONS, install, serves

__all__ = ["OPERATIONS", "install", "serves"]
