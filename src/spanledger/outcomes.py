"""Records of a rerank fallback chain: each attempt, and what the chain produced.

Plain data below both of their users: ``spanledger.providers.fallback`` runs chains and makes
these records, ``spanledger.ledger.price_outcome`` prices them, and neither imports the other.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spanledger.errors import ErrorCategory
from spanledger.events import RerankUsage, ScoredDocument

__all__ = ["AttemptStatus", "FallbackAttempt", "RerankOutcome"]

AttemptStatus = Literal["ok", "failed", "timeout", "skipped"]


class FallbackAttempt(BaseModel):
    """One step of a chain: what it did, how long it took, and its (maybe estimated) usage.

    ``usage_estimated``: the usage was reconstructed from the request because the step was
    abandoned after sending (a timeout), when the provider may still have billed it.
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
    billing: str | None = None
    """What the step's endpoint bills by (``queries``: by rule, no usage reported; ``local``)."""
    document_count: int | None = None
    """How many documents the step was sent, for a rule that bills by them."""


class RerankOutcome(BaseModel):
    """What a chain produced. ``ok``: the first step answered; ``degraded``: a later step
    answered, or none did and the results are the input order; ``skipped``: nothing to do."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    status: Literal["ok", "degraded", "skipped"]
    reason: str | None = None
    results: list[ScoredDocument] = Field(default_factory=list, repr=False)
    attempts: list[FallbackAttempt] = Field(default_factory=list)
    answered_by: int | None = None
