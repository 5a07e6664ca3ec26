"""The ready-made gates of chain steps moved to ``spanledger.chains.gates``; this address
keeps working."""

from spanledger._moved import forward

# ruff: noqa: F822 - each name in __all__ is given by forward() on first use

__all__ = ["BUDGET_SPENT", "request_spend", "spend_below", "when"]

forward(globals(), "spanledger.chains.gates")
