"""Rerank chains moved to ``spanledger.chains``; this address keeps working."""

from spanledger._moved import forward

# ruff: noqa: F822 - each name in __all__ is given by forward() on first use

__all__ = [
    "AttemptStatus",
    "BM25Step",
    "Breakers",
    "CallableStep",
    "CancelToken",
    "CrossEncoderStep",
    "FallbackAttempt",
    "GateCheck",
    "IdentityStep",
    "ProviderStep",
    "Reason",
    "RerankOutcome",
    "RerankStep",
    "StepRanking",
    "awith_fallback",
    "spend_below",
    "step",
    "when",
    "with_fallback",
]

forward(globals(), "spanledger.chains")
