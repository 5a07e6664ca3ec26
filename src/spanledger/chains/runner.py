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

import asyncio
import contextlib
import inspect
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from spanledger._logs import get_logger
from spanledger.attribution import current_request
from spanledger.breakers import Admission, Breakers
from spanledger.chains._bounded import (
    Cancellable,
    CancelToken,
    Finished,
    arun_in_thread,
    run_in_thread,
)
from spanledger.chains._chain import (
    Chain,
    OnAttempt,
    invalid_request,
    request_problem,
    skipped_outcome,
    steps_of,
)
from spanledger.chains.steps import RerankStep
from spanledger.outcomes import Reason, RerankOutcome
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
        outcome = _run_sync(chain, cancel)
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
        outcome = await _run_async(chain, cancel)
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


# -------------------------------------------------------------------- the sync runner


class _Aborted(Exception):
    """The caller cancelled the chain while it waited."""


def _run_sync(chain: Chain, cancel: Cancellable | None) -> RerankOutcome:
    for current in chain.steps:
        if cancel is not None and cancel.is_set():
            return chain.aborted()
        ready, breaker = _ready(chain, current)
        if not ready:
            continue
        if current.gate is not None:
            try:
                reason = _sync_gate(chain, current, cancel)
            except _Aborted:
                _release(breaker)
                return chain.aborted()
            if chain.gated_out(current, reason, breaker):
                continue
        budget = chain.budgeted(current, breaker)
        if budget is None:
            continue
        if current.kind == "identity":
            return chain.identity(current)
        started, t0 = datetime.now(UTC), time.perf_counter()
        if current.cooperative and cancel is None:
            try:
                answer = current.rank(chain.query, chain.documents, chain.top_k, budget)
            except Exception as error:
                chain.raised(current, error, started, t0, breaker)
                continue
            finished = Finished("done", answer)
        else:
            finished = run_in_thread(
                lambda current=current, budget=budget: current.rank(  # type: ignore[misc]
                    chain.query, chain.documents, chain.top_k, budget
                ),
                budget,
                cancel,
            )
        results = _settled(chain, current, finished, started, t0, breaker)
        if finished.how == "cancelled":
            return chain.aborted()
        if results is not None:
            return chain.outcome(results)
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


def _sync_gate(chain: Chain, current: RerankStep, cancel: Cancellable | None) -> str | None:
    gate = current.gate
    assert gate is not None
    check = chain.gate_check(current)
    left = chain.remaining()
    if left <= 0:
        return Reason.DEADLINE_EXHAUSTED
    finished = run_in_thread(lambda: gate(check), left, cancel)
    if finished.how == "cancelled":
        raise _Aborted
    if finished.how == "timeout":
        return Reason.GATE_TIMEOUT
    if finished.how == "raised" or inspect.isawaitable(finished.value):
        if inspect.iscoroutine(finished.value):
            finished.value.close()  # an async gate in a sync chain cannot be awaited here
        return Reason.GATE_FAILED
    return chain.gate_verdict(finished.value)


def _settled(
    chain: Chain,
    current: RerankStep,
    finished: Finished,
    started: datetime,
    t0: float,
    breaker: Admission | None,
) -> Any:
    """Record how a step ended; its kept results, if any."""
    if finished.how == "done":
        return chain.answered(current, finished.value, started, t0, breaker)
    if finished.how == "raised":
        assert finished.error is not None
        if not isinstance(finished.error, Exception):
            chain.abandoned(current, started, t0, breaker, aborted=True)
            return None
        chain.raised(current, finished.error, started, t0, breaker)
        return None
    chain.abandoned(current, started, t0, breaker, aborted=finished.how == "cancelled")
    return None


# -------------------------------------------------------------------- the async runner


async def _run_async(chain: Chain, cancel: CancelToken | None) -> RerankOutcome:
    waker = _TokenWaker(cancel) if cancel is not None else None
    try:
        for current in chain.steps:
            if cancel is not None and cancel.is_set():
                return chain.aborted()
            ready, breaker = _ready(chain, current)
            if not ready:
                continue
            if current.gate is not None:
                try:
                    reason = await _async_gate(chain, current, waker)
                except (asyncio.CancelledError, _Aborted):
                    _release(breaker)
                    _uncancel()
                    return chain.aborted()
                if chain.gated_out(current, reason, breaker):
                    continue
            budget = chain.budgeted(current, breaker)
            if budget is None:
                continue
            if current.kind == "identity":
                return chain.identity(current)
            started, t0 = datetime.now(UTC), time.perf_counter()
            task = asyncio.ensure_future(
                current.arank(chain.query, chain.documents, chain.top_k, budget)
            )
            try:
                answer = await _bounded(task, budget, waker)
            except (asyncio.CancelledError, _Aborted) as stop:
                if not _by_caller(stop):  # the step's own task was cancelled: the chain goes on
                    chain.abandoned(current, started, t0, breaker, aborted=True)
                    continue
                _uncancel()
                await _cancelled(task)
                chain.abandoned(current, started, t0, breaker, aborted=True)
                _uncancel()
                return chain.aborted()
            except TimeoutError:
                chain.abandoned(current, started, t0, breaker, aborted=False)
                continue
            except Exception as error:
                chain.raised(current, error, started, t0, breaker)
                continue
            results = chain.answered(current, answer, started, t0, breaker)
            if results is not None:
                return chain.outcome(results)
        return chain.outcome(None)
    finally:
        if waker is not None:
            waker.close()


def _by_caller(stop: BaseException) -> bool:
    """Whether ``stop`` is the caller's cancellation (the token, or the awaiting task
    cancelled), rather than a step's or a gate's own task ending cancelled."""
    if isinstance(stop, _Aborted):
        return True
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _uncancel() -> None:
    """Take back the cancellation the chain has answered with its ``aborted`` outcome."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        task.uncancel()


class _TokenWaker:
    """An asyncio future that resolves when the token is set (from any thread)."""

    def __init__(self, token: CancelToken) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_resolve, self.future)

        self.close = token.when_cancelled(wake)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _bounded(task: asyncio.Future[Any], budget: float, waker: _TokenWaker | None) -> Any:
    """``task``'s result within ``budget`` seconds: ``TimeoutError`` (the task cancelled) at
    the budget, ``_Aborted`` when the token is set first."""
    waiting: set[asyncio.Future[Any]] = {task}
    if waker is not None:
        waiting.add(waker.future)
    done, _ = await asyncio.wait(waiting, timeout=budget, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        return task.result()
    await _cancelled(task)
    if waker is not None and waker.future in done:
        raise _Aborted
    raise TimeoutError


_SETTLE = 0.1
"""Seconds a cancelled step gets to unwind (its call records its own event as it does)."""


async def _cancelled(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and give it a moment to unwind; one that ignores cancellation is left."""
    task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.wait({task}, timeout=_SETTLE)


async def _async_gate(chain: Chain, current: RerankStep, waker: _TokenWaker | None) -> str | None:
    gate = current.gate
    assert gate is not None
    check = chain.gate_check(current)
    left = chain.remaining()
    if left <= 0:
        return Reason.DEADLINE_EXHAUSTED
    if inspect.iscoroutinefunction(gate):
        task = asyncio.ensure_future(gate(check))
        try:
            verdict = await _bounded(task, left, waker)
        except TimeoutError:
            return Reason.GATE_TIMEOUT
        except (asyncio.CancelledError, _Aborted) as stop:
            task.cancel()
            if not _by_caller(stop):  # the gate's own task was cancelled
                return Reason.GATE_FAILED
            raise
        except Exception:
            return Reason.GATE_FAILED
        return chain.gate_verdict(verdict)
    waiting = asyncio.ensure_future(arun_in_thread(lambda: gate(check), left))
    try:  # the token ends the wait for a hung sync gate as it does for a step
        finished = await _bounded(waiting, left, waker)
    except TimeoutError:
        return Reason.GATE_TIMEOUT
    except (asyncio.CancelledError, _Aborted):
        waiting.cancel()
        raise
    if finished.how == "timeout":
        return Reason.GATE_TIMEOUT
    if finished.how == "raised" or inspect.isawaitable(finished.value):
        return Reason.GATE_FAILED
    return chain.gate_verdict(finished.value)
