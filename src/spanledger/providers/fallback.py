"""Rerank chains moved to ``spanledger.chains``; this address keeps working."""

from spanledger._moved import forward

forward(globals(), "spanledger.chains")
