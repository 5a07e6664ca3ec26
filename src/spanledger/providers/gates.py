"""The ready-made gates of chain steps moved to ``spanledger.chains.gates``; this address
keeps working."""

from spanledger._moved import forward

forward(globals(), "spanledger.chains.gates")
