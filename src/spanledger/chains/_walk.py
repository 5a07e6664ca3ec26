"""The walk over a chain's steps, written once for sync and async chains.

The walk decides everything but how to wait: for each step it checks the caller's cancellation,
the deadline, the key and the breaker, asks for the gate's verdict, takes the budget, and asks
for the step's answer, then records how it ended and returns the outcome. It is a generator:
it yields a ``RunGate`` or ``RunStep`` (run this within this budget) and is sent back what became
of it (``Ended``). A driver (``_sync_driver`` on worker threads, ``_async_driver`` on tasks)
runs what the walk asks for and sends the answer back; ``resume`` is the one step of that loop.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Generator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from spanledger.breakers import Admission
from spanledger.chains._bounded import Cancellable, Finished
from spanledger.chains._chain import Chain
from spanledger.chains.steps import Gate, GateCheck, RerankStep
from spanledger.outcomes import Reason, RerankOutcome

__all__ = [
    "ABORTED",
    "INTERRUPTED",
    "TIMED_OUT",
    "Ended",
    "Request",
    "RunGate",
    "RunStep",
    "Walk",
    "resume",
    "walk",
]


@dataclass(frozen=True, slots=True)
class RunGate:
    """Ask a gate for its verdict on ``check`` within ``budget`` seconds."""

    gate: Gate
    check: GateCheck
    budget: float


@dataclass(frozen=True, slots=True)
class RunStep:
    """Run a step within ``budget`` seconds."""

    step: RerankStep
    budget: float


Request = RunGate | RunStep


@dataclass(frozen=True, slots=True)
class Ended:
    """What became of a gate or a step the walk asked for: ``done`` (``value``), ``raised``
    (``error``), ``timeout`` (its budget ran out, or it raised ``TimeoutError``), ``aborted``
    (the caller cancelled the chain) or ``interrupted`` (it ended with neither an answer nor an
    error of its own: its task was cancelled, or its worker thread ended on a
    ``BaseException`` that is not an ``Exception``)."""

    how: Literal["done", "raised", "timeout", "aborted", "interrupted"]
    value: Any = None
    error: Exception | None = None

    @staticmethod
    def of(finished: Finished) -> Ended:
        """How a run on a worker thread ended, as the walk hears it."""
        if finished.how == "done":
            return Ended("done", finished.value)
        if finished.how == "raised":
            return Ended.raised(finished.error)
        return TIMED_OUT if finished.how == "timeout" else ABORTED

    @staticmethod
    def raised(error: BaseException | None) -> Ended:
        """A run that raised ``error``: a ``TimeoutError`` is its budget running out, as an
        async chain hears it."""
        if isinstance(error, TimeoutError):
            return TIMED_OUT
        return Ended("raised", error=error) if isinstance(error, Exception) else INTERRUPTED


ABORTED = Ended("aborted")
INTERRUPTED = Ended("interrupted")
TIMED_OUT = Ended("timeout")

Walk = Generator[Request, Ended, RerankOutcome]


def resume(steps: Walk, ended: Ended | None) -> Request | RerankOutcome:
    """The walk's next request once it hears ``ended`` (``None``: start it), or its outcome."""
    try:
        return next(steps) if ended is None else steps.send(ended)
    except StopIteration as finished:
        outcome: RerankOutcome = finished.value
        return outcome


def walk(chain: Chain, cancel: Cancellable | None) -> Walk:
    """Try each step in turn until one's answer is kept; the chain's outcome."""
    for current in chain.steps:
        if cancel is not None and cancel.is_set():
            return chain.aborted()
        ready, breaker = _ready(chain, current)
        if not ready:
            continue
        gate = current.gate
        if gate is not None:
            check = chain.gate_check(current)
            left = chain.remaining()
            if left <= 0:
                reason: str | None = Reason.DEADLINE_EXHAUSTED
            else:
                verdict = yield RunGate(gate, check, left)
                if verdict.how == "aborted":
                    _release(breaker)
                    return chain.aborted()
                reason = _gate_reason(chain, verdict)
            if chain.gated_out(current, reason, breaker):
                continue
        budget = chain.budgeted(current, breaker)
        if budget is None:
            continue
        if current.kind == "identity":
            return chain.identity(current)
        started, t0 = datetime.now(UTC), time.perf_counter()
        ended = yield RunStep(current, budget)
        if ended.how == "done":
            results = chain.answered(current, ended.value, started, t0, breaker)
            if results is not None:
                return chain.outcome(results)
        elif ended.how == "raised":
            assert ended.error is not None
            chain.raised(current, ended.error, started, t0, breaker)
        else:
            aborted = ended.how != "timeout"
            chain.abandoned(current, started, t0, breaker, aborted=aborted)
            if ended.how == "aborted":
                return chain.aborted()
    if cancel is not None and cancel.is_set():  # heard while the last step was left behind
        return chain.aborted()
    return chain.outcome(None)


def _ready(chain: Chain, current: RerankStep) -> tuple[bool, Admission | None]:
    """Checks that need no waiting: the deadline, the key, the breaker. Whether the step may
    go on (else it was recorded as skipped), and its breaker, which has let the call through."""
    if chain.remaining() <= 0:
        chain.skipped(current, Reason.DEADLINE_EXHAUSTED)
        return False, None
    if current.missing_key is not None:
        chain.skipped(current, Reason.NO_API_KEY, detail=f"set {current.missing_key}")
        return False, None
    breaker = chain.breaker(current)
    if breaker is None:
        return True, None
    admission = breaker.admit()
    if admission is None:
        chain.skipped(current, Reason.CIRCUIT_OPEN, breaker)
        return False, None
    return True, admission


def _release(breaker: Admission | None) -> None:
    if breaker is not None:
        breaker.released()


def _gate_reason(chain: Chain, verdict: Ended) -> str | None:
    """``None`` to run the step, else the reason its gate skips it: a gate that ran out of
    time, ended without a verdict, or answered with an awaitable (unawaited) cannot pass."""
    if verdict.how == "timeout":
        return Reason.GATE_TIMEOUT
    if verdict.how != "done" or inspect.isawaitable(verdict.value):
        return Reason.GATE_FAILED
    return chain.gate_verdict(verdict.value)
