"""Rerank chains: try each step in turn under one deadline, and always return an outcome.

A chain is not a provider: its steps are anything that ranks (a remote reranker, a local
cross-encoder, BM25, the input order, or your function), and it records each one it tried as an
attempt the ledger can price. Where each part lives:

- ``runner``: ``with_fallback`` and ``awith_fallback``, the chain's entry points;
- ``steps``: the steps (``ProviderStep``, ``CrossEncoderStep``, ``BM25Step``, ``IdentityStep``,
  ``CallableStep``) and ``step(thing, gate=..., timeout=...)``;
- ``gates``: ready-made gates (``spend_below``, ``when``);
- ``_walk``: the walk over the steps, written once for sync and async chains, and the two
  drivers that wait for what it asks (``_sync_driver`` on threads, ``_async_driver`` on tasks);
- ``_chain``: one run's state and attempt records; ``_contract``: the rules an answer keeps;
  ``_bounded``: deadlines, worker threads and ``CancelToken``.

The attempt and outcome records (``spanledger.outcomes``) and the circuit breakers
(``spanledger.breakers``) sit lower in the package, where exporters and the ledger read them.
"""

from spanledger.breakers import Breakers
from spanledger.chains._bounded import CancelToken
from spanledger.chains.gates import spend_below, when
from spanledger.chains.runner import awith_fallback, with_fallback
from spanledger.chains.steps import (
    BM25Step,
    CallableStep,
    CrossEncoderStep,
    GateCheck,
    IdentityStep,
    ProviderStep,
    RerankStep,
    StepRanking,
    step,
)
from spanledger.outcomes import AttemptStatus, FallbackAttempt, Reason, RerankOutcome

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
