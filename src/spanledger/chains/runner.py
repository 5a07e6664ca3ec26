"""``with_fallback`` and ``awith_fallback``: rerank with each step in turn under one deadline,
and always return.

Before a step runs, its circuit breaker (``breakers=``) and its gate may skip it; a step never
starts on a spent budget. Every step's answer is checked against the outcome contract
(``_contract``) before it is kept; one that breaks it is ``invalid_results`` and the chain moves
on. Every step, answered or not, is an attempt on the outcome with its status, reason, duration
and usage (estimated for a step abandoned after sending, which may still have been billed), so
the ledger can price each one (``spanledger.ledger.price_outcome``). ``on_attempt`` sees each
attempt as it ends.

The chain never raises: a bad request (a blank query, a step that is not a step, a bad
setting) is an ``invalid_request`` outcome with no call made; the caller's cancellation (a
``CancelToken`` or ``threading.Event``, or cancelling the task in async code) is an ``aborted``
outcome with every attempt so far. Each provider step still emits its own event; the chain is
one span with every attempt on it (its sinks hear ``chain_started`` / ``chain_ended``), and an
open request scope keeps the outcome for its report.
"""

from __future__ import annotations

from collections.abc import Sequence

from spanledger._logs import get_logger
from spanledger.attribution import current_request
from spanledger.breakers import Breakers
from spanledger.chains._async_driver import run_async
from spanledger.chains._bounded import Cancellable, CancelToken
from spanledger.chains._chain import (
    Chain,
    OnAttempt,
    invalid_request,
    request_problem,
    skipped_outcome,
    steps_of,
)
from spanledger.chains._sync_driver import run_sync
from spanledger.outcomes import RerankOutcome
from spanledger.recorder import Recorder, get_recorder

__all__ = ["awith_fallback", "with_fallback"]

_log = get_logger("spanledger.providers")


def with_fallback(
    steps: Sequence[object],
    query: str,
    documents: Sequence[str],
    *,
    top_k: int | None = None,
    deadline: float = 10.0,
    step_timeout: float | None = None,
    breakers: Breakers | None = None,
    cancel: Cancellable | None = None,
    on_attempt: OnAttempt | None = None,
    recorder: Recorder | None = None,
) -> RerankOutcome:
    """Rerank with each step in turn until one's answer keeps the contract, within
    ``deadline`` seconds overall (and ``step_timeout`` seconds per step, or a step's own).

    ``breakers``: circuit breakers shared across calls, one per provider and model;
    ``cancel``: a ``CancelToken`` or ``threading.Event`` that aborts the chain when set;
    ``on_attempt``: called with each attempt as it ends. Never raises.
    """
    chain = _prepared(steps, query, documents, top_k, deadline, step_timeout, breakers, on_attempt)
    if cancel is not None and not callable(getattr(cancel, "is_set", None)):
        chain = invalid_request("cancel must be a CancelToken or a threading.Event")
    sinks = _opened(recorder, chain)
    if isinstance(chain, RerankOutcome):
        return _delivered(chain, sinks)
    try:
        outcome = run_sync(chain, cancel)
    except Exception as bug:  # the chain never raises: keep what it has
        _log.error("chain_failed", error_type=type(bug).__name__)
        outcome = chain.outcome(None)
    except BaseException:  # the process is being interrupted: close the chain's span first
        _delivered(chain.aborted(), sinks)
        raise
    return _delivered(outcome, sinks)


async def awith_fallback(
    steps: Sequence[object],
    query: str,
    documents: Sequence[str],
    *,
    top_k: int | None = None,
    deadline: float = 10.0,
    step_timeout: float | None = None,
    breakers: Breakers | None = None,
    cancel: CancelToken | None = None,
    on_attempt: OnAttempt | None = None,
    recorder: Recorder | None = None,
) -> RerankOutcome:
    """The async twin of ``with_fallback``: a step still running at its budget is cancelled,
    and cancelling the task that awaits the chain (or ``cancel``) ends it as ``aborted`` —
    the chain returns its outcome instead of re-raising the cancellation."""
    chain = _prepared(steps, query, documents, top_k, deadline, step_timeout, breakers, on_attempt)
    if cancel is not None and not isinstance(cancel, CancelToken):  # it must wake the loop
        chain = invalid_request(f"cancel must be a CancelToken, not {type(cancel).__name__}")
    sinks = _opened(recorder, chain)
    if isinstance(chain, RerankOutcome):
        return _delivered(chain, sinks)
    try:
        outcome = await run_async(chain, cancel)
    except Exception as bug:
        _log.error("chain_failed", error_type=type(bug).__name__)
        outcome = chain.outcome(None)
    except BaseException:
        _delivered(chain.aborted(), sinks)
        raise
    return _delivered(outcome, sinks)


def _prepared(
    steps: object,
    query: object,
    documents: object,
    top_k: object,
    deadline: object,
    step_timeout: object,
    breakers: object,
    on_attempt: object,
) -> Chain | RerankOutcome:
    """The chain to run, or the outcome of a request that needs no run."""
    try:
        problem = request_problem(query, documents, top_k, deadline, step_timeout)
        if problem is None and breakers is not None and not isinstance(breakers, Breakers):
            problem = f"breakers must be a Breakers, not {type(breakers).__name__}"
        if problem is None and on_attempt is not None and not callable(on_attempt):
            problem = "on_attempt must be callable"
        if problem is not None:
            return invalid_request(problem)
        made = steps_of(steps)
        if isinstance(made, str):
            return invalid_request(made)
        assert isinstance(query, str)
        assert isinstance(documents, Sequence)
        if not documents or top_k == 0:
            return skipped_outcome()
        return Chain(
            made,
            query,
            documents,
            top_k,  # type: ignore[arg-type]
            float(deadline),  # type: ignore[arg-type]
            None if step_timeout is None else float(step_timeout),  # type: ignore[arg-type]
            breakers,  # type: ignore[arg-type]
            on_attempt,  # type: ignore[arg-type]
        )
    except Exception as bug:
        return invalid_request(f"the request could not be read ({type(bug).__name__})")


def _opened(
    recorder: Recorder | None, chain: Chain | RerankOutcome
) -> tuple[Recorder, object] | None:
    """Tell the chain-aware sinks a chain began (the OTel exporter opens its span)."""
    target = recorder if recorder is not None else get_recorder()
    try:
        if isinstance(chain, RerankOutcome):
            return target, target.chain_started(None, None)
        return target, target.chain_started(chain.count, chain.top_k)
    except Exception as exc:
        _log.warning("chain_span_failed", error_type=type(exc).__name__)
        return None


def _delivered(outcome: RerankOutcome, sinks: tuple[Recorder, object] | None) -> RerankOutcome:
    """Hand the outcome to the request scope and to the sinks that heard the chain start."""
    try:
        scope = current_request()
        if scope is not None:
            scope.add_outcome(outcome)
        if sinks is not None:
            target, handles = sinks
            target.chain_ended(handles, outcome)  # type: ignore[arg-type]
    except Exception as exc:
        _log.warning("chain_outcome_not_delivered", error_type=type(exc).__name__)
    return outcome
