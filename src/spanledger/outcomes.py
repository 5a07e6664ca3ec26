"""Records of a rerank fallback chain: each attempt, and what the chain produced.

Plain data below both of their users: ``spanledger.chains`` runs chains and makes these records,
``spanledger.ledger.price_outcome`` prices them, exporters render them, and none of them imports
another for it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spanledger.errors import ErrorCategory
from spanledger.events import RerankUsage, ScoredDocument

__all__ = [
    "AttemptStatus",
    "FallbackAttempt",
    "OutcomeStatus",
    "Reason",
    "RerankOutcome",
    "StepKind",
]

AttemptStatus = Literal["ok", "failed", "timeout", "skipped", "aborted"]
"""``ok``: the step answered and its answer kept the contract; ``failed``: it raised, or its
answer broke the contract; ``timeout``: its budget ran out while it ran; ``skipped``: it never
ran (a gate, an open breaker, a spent deadline) or it is the identity step; ``aborted``: the
caller cancelled the chain while it ran."""

OutcomeStatus = Literal["ok", "degraded", "skipped", "aborted", "invalid_request"]
"""``ok``: the first step that ran answered; ``degraded``: a later step answered, or none did
and the results are the input order; ``skipped``: nothing to rank (no documents, ``top_k=0``);
``aborted``: the caller cancelled the chain; ``invalid_request``: the request or a step was not
usable, and nothing was called."""

StepKind = Literal["provider", "cross_encoder", "bm25", "identity", "callable"]
"""What a step is: a remote reranker, a local cross-encoder, BM25, input order, your function."""


class Reason:
    """The reason codes a chain writes on attempts (low-cardinality: fit for a metric label)."""

    DEADLINE_EXHAUSTED = "deadline_exhausted"
    CIRCUIT_OPEN = "circuit_open"
    NO_API_KEY = "no_api_key"
    GATE_DECLINED = "gate_declined"
    GATE_FAILED = "gate_failed"
    GATE_TIMEOUT = "gate_timeout"
    IDENTITY = "identity"
    INVALID_RESULTS = "invalid_results"
    STEP_ERROR = "step_error"
    TIMEOUT = "timeout"
    ABORTED = "aborted"


class FallbackAttempt(BaseModel):
    """One step of a chain: what it did, how long it took, and its (maybe estimated) usage.

    ``usage_estimated``: the usage was reconstructed from the request because the step was
    abandoned after sending (a timeout, the caller's cancellation), when the provider may still
    have billed it. ``reason``: a ``Reason`` code, a gate's own reason, or the error category of
    a failed provider call; ``detail`` says more where there is more to say (never a payload).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    model: str
    status: AttemptStatus
    reason: str | None = None
    started_at: datetime
    duration_ms: float | None = None
    usage: RerankUsage | None = None
    usage_estimated: bool = False
    error_category: ErrorCategory | None = None
    error_type: str | None = None
    """The class of what a failed step raised (never its message)."""
    detail: str | None = None
    billing: str | None = None
    """What the step's endpoint bills by (``queries``: by rule, no usage reported; ``local``)."""
    document_count: int | None = None
    """How many documents the step was sent, for a rule that bills by them."""
    kind: StepKind = "provider"
    breaker_state: str | None = None
    """The step's circuit breaker after this attempt (``closed``, ``open``, ``half_open``), when
    the chain has breakers."""


class RerankOutcome(BaseModel):
    """What a chain produced: always results (a ranking, or the input order), every attempt in
    order, and which attempt's ranking was kept (``answered_by``, an index into ``attempts``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: OutcomeStatus
    reason: str | None = None
    results: list[ScoredDocument] = Field(default_factory=list, repr=False)
    attempts: list[FallbackAttempt] = Field(default_factory=list)
    answered_by: int | None = None
    callback_failures: int = 0
    """How many times ``on_attempt`` raised (each failure is also logged, by type)."""
