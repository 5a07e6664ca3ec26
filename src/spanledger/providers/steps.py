"""The steps of a rerank chain moved to ``spanledger.chains.steps``; this address keeps
working."""

from spanledger._moved import forward

# ruff: noqa: F822 - each name in __all__ is given by forward() on first use

__all__ = [
    "BM25Step",
    "CallableStep",
    "CrossEncoderStep",
    "Gate",
    "GateCheck",
    "IdentityStep",
    "ProviderStep",
    "RerankStep",
    "StepRanking",
    "as_step",
    "step",
]

forward(globals(), "spanledger.chains.steps")
