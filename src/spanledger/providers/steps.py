"""The steps of a rerank chain moved to ``spanledger.chains.steps``; this address keeps
working."""

from spanledger._moved import forward

forward(globals(), "spanledger.chains.steps")
