"""One run of a rerank chain: the request checked, then each step in turn, each an attempt.

The state the walk over the steps (``_walk``) keeps and records into: the request check, the
attempt records, the breaker verdicts, ``on_attempt``, and the outcome. Sync and async chains
share all of it; they differ only in how a step or a gate is run and waited for.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from spanledger._logs import get_logger
from spanledger.breakers import Admission, Breakers, CircuitBreaker
from spanledger.chains._contract import InvalidAnswer, broken_rule
from spanledger.chains.steps import GateCheck, RerankStep, StepRanking, as_step
from spanledger.errors import ErrorCategory, ProviderError
from spanledger.estimates import ABANDONED_ERROR_TYPES, estimate_rerank_usage, may_have_billed
from spanledger.events import RerankUsage, ScoredDocument, trusted_builder_of
from spanledger.outcomes import AttemptStatus, FallbackAttempt, Reason, RerankOutcome

__all__ = [
    "REASON_LENGTH",
    "Chain",
    "OnAttempt",
    "gate_reason",
    "invalid_request",
    "request_problem",
    "skipped_outcome",
    "steps_of",
]

_log = get_logger("spanledger.providers")

OnAttempt = Callable[[FallbackAttempt], object]

# Every field below is made here, or checked by the contract: no second validation pass.
_attempt = trusted_builder_of(FallbackAttempt)
_outcome = trusted_builder_of(RerankOutcome)
_scored = trusted_builder_of(ScoredDocument)

NOTHING_TO_DO = "nothing to rerank"
EVERY_STEP_FAILED = "every step failed; results are the input order"
IDENTITY_KEPT = "no step ranked; the identity step kept the input order"
FALLBACK_ANSWERED = "answered by a fallback step"
ABORTED = "cancelled by the caller"


REASON_LENGTH = 64
"""The most characters of a gate's own reason an attempt keeps."""
_NOT_IN_A_REASON = re.compile(r"[^A-Za-z0-9_.:-]")


def gate_reason(text: str) -> str:
    """A gate's own reason as its attempt carries it to spans, logs and Langfuse: a code of at
    most ``REASON_LENGTH`` characters, each an ASCII letter, a digit, or one of ``_ - . :``;
    any other character becomes ``_`` and the rest is cut. A gate's string is the user's, so it
    is bounded before anything renders it."""
    return _NOT_IN_A_REASON.sub("_", text[:REASON_LENGTH])


def skipped_outcome() -> RerankOutcome:
    """Nothing to rank (no documents, ``top_k=0``): no step runs."""
    return _outcome({"status": "skipped", "reason": NOTHING_TO_DO, "results": [], "attempts": []})


def invalid_request(reason: str) -> RerankOutcome:
    return _outcome({"status": "invalid_request", "reason": reason, "results": [], "attempts": []})


def _seconds(name: str, value: object, *, optional: bool, zero: bool = False) -> str | None:
    if value is None and optional:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < 0
        or (value == 0 and not zero)
    ):
        least = "0 or more" if zero else "more than 0"
        return f"{name} must be a number of seconds, {least}; got {type(value).__name__}"
    return None


def request_problem(
    query: object, documents: object, top_k: object, deadline: object, step_timeout: object
) -> str | None:
    """What makes a request unusable (said without its text), or ``None``."""
    if not isinstance(query, str) or not query.strip():
        return "the query must be a non-blank string"
    if type(documents) is not list and (
        isinstance(documents, str | bytes) or not isinstance(documents, Sequence)
    ):
        return f"documents must be a list of strings, not {type(documents).__name__}"
    if not all(type(document) is str for document in documents):
        for position, document in enumerate(documents):
            if not isinstance(document, str):
                return f"document {position} is a {type(document).__name__}, not a string"
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        return "top_k must be a whole number of at least 0, or None"
    return _seconds("deadline", deadline, optional=False, zero=True) or _seconds(
        "step_timeout", step_timeout, optional=True
    )


def steps_of(given: object) -> list[RerankStep] | str:
    """The chain's steps, or why they are not steps."""
    if isinstance(given, str | bytes) or not isinstance(given, Sequence):
        return f"steps must be a list, not {type(given).__name__}"
    steps: list[RerankStep] = []
    for position, thing in enumerate(given):
        try:
            made = as_step(thing)
        except Exception as refused:  # an object that looks like a model but is not one
            name = type(refused).__name__  # its message could quote what it was given
            return f"step {position} ({type(thing).__name__}) is not a step: {name}"
        if made is None:
            return f"step {position} is a {type(thing).__name__}, not something that ranks"
        timeout = _seconds(f"step {position} timeout", made.timeout, optional=True)
        if timeout is not None:  # a bad one would start the step on no budget, or fail the run
            return timeout
        steps.append(made)
    return steps


class Chain:
    """The state of one run: its attempts, its clock, and how it ends."""

    def __init__(
        self,
        steps: list[RerankStep],
        query: str,
        documents: Sequence[str],
        top_k: int | None,
        deadline: float,
        step_timeout: float | None,
        breakers: Breakers | None,
        on_attempt: OnAttempt | None,
    ) -> None:
        self.steps = steps
        self.query = query
        self.documents = documents
        self.count = len(documents)
        self.top_k = top_k
        self.deadline = deadline
        self.step_timeout = step_timeout
        self.breakers = breakers
        self.on_attempt = on_attempt
        self.attempts: list[FallbackAttempt] = []
        self.callback_failures = 0
        self._logged_failures: set[str] = set()
        self.started = time.monotonic()

    # ---------------------------------------------------------------- time

    def remaining(self) -> float:
        return self.deadline - (time.monotonic() - self.started)

    def budget(self, step: RerankStep) -> float | None:
        """Seconds the step may take, or ``None`` when the chain's deadline has run out."""
        left = self.remaining()
        if left <= 0:
            return None
        for limit in (self.step_timeout, step.timeout):
            if limit is not None:
                left = min(left, limit)
        return left

    # ---------------------------------------------------------------- before a step runs

    def breaker(self, step: RerankStep) -> CircuitBreaker | None:
        if self.breakers is None or step.kind == "identity":
            return None
        return self.breakers.get(step.provider, step.model)

    def gate_check(self, step: RerankStep) -> GateCheck:
        return GateCheck(
            provider=step.provider,
            model=step.model,
            kind=step.kind,
            document_count=self.count,
            top_k=self.top_k,
            attempts=tuple(self.attempts),
            remaining=max(self.remaining(), 0.0),
        )

    @staticmethod
    def gate_verdict(verdict: object) -> str | None:
        """``None`` to run the step, else the reason it is skipped."""
        if verdict is True:
            return None
        if verdict is False:
            return Reason.GATE_DECLINED
        if isinstance(verdict, str) and verdict:
            return gate_reason(verdict)
        return Reason.GATE_FAILED

    # ---------------------------------------------------------------- attempts

    def skipped(
        self,
        step: RerankStep,
        reason: str,
        breaker: Admission | CircuitBreaker | None = None,
        detail: str | None = None,
    ) -> None:
        self.add(
            _attempt(
                {
                    "provider": step.provider,
                    "model": step.model,
                    "status": "skipped",
                    "reason": reason,
                    "detail": detail,
                    "started_at": datetime.now(UTC),
                    "billing": step.billing,
                    "kind": step.kind,
                    "breaker_state": breaker.state if breaker is not None else None,
                }
            )
        )

    def answered(
        self,
        step: RerankStep,
        answer: object,
        started: datetime,
        t0: float,
        breaker: Admission | None,
    ) -> list[ScoredDocument] | None:
        """Record a step's answer; its results when they keep the contract, else ``None``."""
        elapsed = (time.perf_counter() - t0) * 1000
        rule = (
            broken_rule(answer.results, self.count, self.top_k)
            if isinstance(answer, StepRanking)
            else f"a step must return a ranking, not a {type(answer).__name__}"
        )
        if rule is not None or not isinstance(answer, StepRanking):
            self._invalid(step, started, elapsed, breaker, rule)
            return None
        if breaker is not None:
            breaker.succeeded()
        self.add(self._attempt(step, "ok", started, elapsed, breaker, usage=answer.usage))
        return answer.results

    def _invalid(
        self,
        step: RerankStep,
        started: datetime,
        elapsed: float,
        breaker: Admission | None,
        rule: str | None,
        error_type: str | None = None,
    ) -> None:
        """A step's answer that is no ranking, or breaks the contract: a failure for its
        breaker, and ``invalid_results`` with the broken rule."""
        if breaker is not None:
            breaker.failed()
        self.add(
            self._attempt(
                step,
                "failed",
                started,
                elapsed,
                breaker,
                reason=Reason.INVALID_RESULTS,
                detail=rule,
                error_type=error_type,
            )
        )

    def budgeted(self, step: RerankStep, breaker: Admission | None) -> float | None:
        """The step's budget once its gate let it through; ``None`` when the deadline ran out
        meanwhile (the step is then recorded as skipped and its breaker's slot freed)."""
        budget = self.budget(step)
        if budget is None:
            if breaker is not None:
                breaker.released()
            self.skipped(step, Reason.DEADLINE_EXHAUSTED, breaker)
        return budget

    def gated_out(self, step: RerankStep, reason: str | None, breaker: Admission | None) -> bool:
        """Whether the gate's ``reason`` skips the step (recorded, its breaker's slot freed)."""
        if reason is None:
            return False
        if breaker is not None:
            breaker.released()
        self.skipped(step, reason, breaker)
        return True

    def identity(self, step: RerankStep) -> RerankOutcome:
        """The identity step reached: the input order, on purpose."""
        self.skipped(step, Reason.IDENTITY)
        return self.outcome(None)

    def raised(
        self,
        step: RerankStep,
        error: BaseException,
        started: datetime,
        t0: float,
        breaker: Admission | None,
    ) -> None:
        """Record a step that raised; one the provider may have billed carries usage estimated
        from the request, in the unit its endpoint bills by."""
        elapsed = (time.perf_counter() - t0) * 1000
        if isinstance(error, InvalidAnswer):
            self._invalid(step, started, elapsed, breaker, str(error), type(error).__name__)
            return
        if isinstance(error, ProviderError):
            name, category, status = error.error_type, error.category, error.status_code
            reason: str = category.value
        else:
            name, category, status = type(error).__name__, ErrorCategory.UNAVAILABLE, None
            reason = Reason.TIMEOUT if name in ABANDONED_ERROR_TYPES else Reason.STEP_ERROR
        abandoned = name in ABANDONED_ERROR_TYPES
        if breaker is not None:
            if category is ErrorCategory.INVALID_REQUEST:
                breaker.released()
            else:
                breaker.failed()
        usage = self._estimate(step) if may_have_billed(category, name, status) else None
        self.add(
            self._attempt(
                step,
                "timeout" if abandoned else "failed",
                started,
                elapsed,
                breaker,
                reason=reason,
                usage=usage,
                estimated=usage is not None,
                category=category,
                error_type=name,
            )
        )

    def abandoned(
        self,
        step: RerankStep,
        started: datetime,
        t0: float,
        breaker: Admission | None,
        *,
        aborted: bool,
    ) -> None:
        """Record a step left running: at its budget (``timeout``, a failure for its breaker)
        or at the caller's cancellation (``aborted``, no verdict). It may have been billed."""
        elapsed = (time.perf_counter() - t0) * 1000
        if breaker is not None:
            if aborted:
                breaker.released()
            else:
                breaker.failed()
        usage = self._estimate(step)
        self.add(
            self._attempt(
                step,
                "aborted" if aborted else "timeout",
                started,
                elapsed,
                breaker,
                reason=Reason.ABORTED if aborted else Reason.TIMEOUT,
                usage=usage,
                estimated=usage is not None,
                error_type="CancelledError",
            )
        )

    def _estimate(self, step: RerankStep) -> RerankUsage | None:
        return estimate_rerank_usage(step.billing, self.query, self.documents)

    def _attempt(
        self,
        step: RerankStep,
        status: AttemptStatus,
        started: datetime,
        elapsed_ms: float,
        breaker: Admission | None,
        *,
        reason: str | None = None,
        detail: str | None = None,
        usage: RerankUsage | None = None,
        estimated: bool = False,
        category: ErrorCategory | None = None,
        error_type: str | None = None,
    ) -> FallbackAttempt:
        return _attempt(
            {
                "provider": step.provider,
                "model": step.model,
                "status": status,
                "reason": reason,
                "detail": detail,
                "started_at": started,
                "duration_ms": elapsed_ms,
                "usage": usage,
                "usage_estimated": estimated,
                "error_category": category,
                "error_type": error_type,
                "billing": step.billing,
                "document_count": self.count,
                "kind": step.kind,
                "breaker_state": breaker.state if breaker is not None else None,
            }
        )

    def add(self, attempt: FallbackAttempt) -> None:
        self.attempts.append(attempt)
        if self.on_attempt is None:
            return
        try:
            self.on_attempt(attempt)
        except Exception as exc:
            self.callback_failures += 1
            kind = type(exc).__name__
            if kind not in self._logged_failures:  # once per type: a callback failing on every
                self._logged_failures.add(kind)  # attempt says so once, counted on the outcome
                _log.warning("on_attempt_failed", error_type=kind)

    # ---------------------------------------------------------------- outcomes

    def outcome(self, results: list[ScoredDocument] | None) -> RerankOutcome:
        """The chain's outcome once a step's ranking was kept (``results``) or none was."""
        if results is not None:
            index = len(self.attempts) - 1
            return self._finished(
                "ok" if index == 0 else "degraded",
                None if index == 0 else FALLBACK_ANSWERED,
                results,
                index,
            )
        identity = bool(self.attempts) and self.attempts[-1].reason == Reason.IDENTITY
        return self._finished(
            "degraded", IDENTITY_KEPT if identity else EVERY_STEP_FAILED, self.input_order()
        )

    def aborted(self) -> RerankOutcome:
        return self._finished("aborted", ABORTED, self.input_order())

    def _finished(
        self,
        status: str,
        reason: str | None,
        results: list[ScoredDocument],
        answered_by: int | None = None,
    ) -> RerankOutcome:
        return _outcome(
            {
                "status": status,
                "reason": reason,
                "results": results,
                "attempts": list(self.attempts),
                "answered_by": answered_by,
                "callback_failures": self.callback_failures,
            }
        )

    def input_order(self) -> list[ScoredDocument]:
        """Input order, every score 0.0: a placeholder ranking, flagged by the status."""
        size = self.count if self.top_k is None else min(self.count, self.top_k)
        return [_scored({"index": i, "relevance_score": 0.0}) for i in range(size)]
