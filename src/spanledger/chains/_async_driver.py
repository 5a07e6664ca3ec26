"""Walking a chain in async code: each step and each coroutine gate runs as a task, awaited
until it ends, its budget runs out (it is then cancelled and given a moment to unwind) or the
caller cancels, by the token or by cancelling the task that awaits the chain; a sync gate runs
on a worker thread. The caller's cancellation is heard whenever it lands, even while a step
that ran out of its budget is still unwinding: the chain answers it with its ``aborted``
outcome at once, and takes the cancellation back.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Callable
from typing import Any

from spanledger.chains._bounded import SETTLE, CancelToken, arun_in_thread
from spanledger.chains._chain import Chain
from spanledger.chains._walk import (
    ABORTED,
    INTERRUPTED,
    TIMED_OUT,
    Ended,
    Request,
    RunStep,
    resume,
    walk,
)
from spanledger.chains.steps import Gate, GateCheck
from spanledger.outcomes import RerankOutcome

__all__ = ["run_async"]


async def run_async(chain: Chain, cancel: CancelToken | None) -> RerankOutcome:
    """The chain's outcome, awaiting on the running loop what its walk asks."""
    caller = _Caller(cancel)
    steps = walk(chain, caller)
    ended: Ended | None = None
    try:
        while True:
            request = resume(steps, ended)
            if isinstance(request, RerankOutcome):
                return request
            ended = await _waited(chain, request, caller)
    finally:
        caller.close()


class _Caller:
    """The caller's cancellation as the walk asks for it (``is_set``): the token, or the task
    that awaits the chain cancelled, a cancellation the chain has taken back since it answers
    it with its outcome. ``woken`` resolves when the token is set (from any thread)."""

    def __init__(self, token: CancelToken | None) -> None:
        self.token = token
        self.cancelled_task = False
        self.woken: asyncio.Future[None] | None = None
        self.close: Callable[[], None] = lambda: None
        if token is not None:
            loop = asyncio.get_running_loop()
            woken: asyncio.Future[None] = loop.create_future()

            def wake() -> None:
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(_resolve, woken)

            self.woken = woken
            self.close = token.when_cancelled(wake)

    def is_set(self) -> bool:
        return self.cancelled_task or (self.token is not None and self.token.is_set())

    def took_cancellation(self) -> None:
        """The task awaiting the chain was cancelled: the chain ends ``aborted`` and takes the
        cancellation back."""
        self.cancelled_task = True
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            task.uncancel()

    def waiting_with(self, future: asyncio.Future[Any]) -> set[asyncio.Future[Any]]:
        """``future`` and, while the token is not set, what wakes when it is."""
        if self.woken is None or self.woken.done():
            return {future}
        return {future, self.woken}


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _waited(chain: Chain, request: Request, caller: _Caller) -> Ended:
    if isinstance(request, RunStep):
        step, budget = request.step, request.budget
        task = asyncio.ensure_future(step.arank(chain.query, chain.documents, chain.top_k, budget))
        ended = await _task_ended(task, budget, caller)
        if ended.how == "aborted":  # give the step a moment to record its own call as it unwinds
            await _cancelled(task, caller)
        return ended
    gate, check = request.gate, request.check
    if not inspect.iscoroutinefunction(gate):
        return await _thread_gate_ended(gate, check, request.budget, caller)
    task = asyncio.ensure_future(gate(check))
    ended = await _task_ended(task, request.budget, caller)
    if ended.how in ("aborted", "interrupted"):
        task.cancel()
    return ended


async def _task_ended(task: asyncio.Future[Any], budget: float, caller: _Caller) -> Ended:
    """How ``task`` ended within ``budget`` seconds; a ``BaseException`` that is not an
    ``Exception`` (nor a cancellation) propagates."""
    try:
        value = await _bounded(task, budget, caller)
    except _Aborted:
        return ABORTED
    except asyncio.CancelledError:
        if not _by_caller():  # the step's or the gate's own task ended cancelled
            return INTERRUPTED
        caller.took_cancellation()
        return ABORTED
    except TimeoutError:
        return TIMED_OUT
    except Exception as error:
        return Ended("raised", error=error)
    return Ended("done", value)


async def _thread_gate_ended(gate: Gate, check: GateCheck, budget: float, caller: _Caller) -> Ended:
    """A sync gate's verdict from a worker thread; the token ends the wait for a hung one as it
    does for a step."""
    waiting = asyncio.ensure_future(arun_in_thread(lambda: gate(check), budget))
    try:
        finished = await _bounded(waiting, budget, caller)
    except TimeoutError:
        return TIMED_OUT
    except _Aborted:
        waiting.cancel()
        return ABORTED
    except asyncio.CancelledError:  # only the caller cancels this wait
        waiting.cancel()
        caller.took_cancellation()
        return ABORTED
    return Ended.of(finished)


class _Aborted(Exception):
    """The token was set while the chain waited."""


def _by_caller() -> bool:
    """Whether a cancellation that reached the chain is the caller's (the task awaiting the
    chain cancelled), rather than a step's or a gate's own task ending cancelled."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _bounded(task: asyncio.Future[Any], budget: float, caller: _Caller) -> Any:
    """``task``'s result within ``budget`` seconds: ``TimeoutError`` at the budget (the task
    cancelled and given a moment to unwind), ``_Aborted`` when the token is set first (the
    task is left to the caller)."""
    done, _ = await asyncio.wait(
        caller.waiting_with(task), timeout=budget, return_when=asyncio.FIRST_COMPLETED
    )
    if task in done:
        return task.result()
    if caller.woken is not None and caller.woken in done:
        raise _Aborted
    await _cancelled(task, caller)
    raise TimeoutError


async def _cancelled(task: asyncio.Future[Any], caller: _Caller) -> None:
    """Cancel ``task`` and give it ``SETTLE`` seconds to unwind (its call records its own
    event as it does); one that ignores cancellation is left. The caller's cancellation ends
    the wait at once: the chain hears it (``caller.is_set()``) and aborts."""
    task.cancel()
    try:
        await asyncio.wait(
            caller.waiting_with(task), timeout=SETTLE, return_when=asyncio.FIRST_COMPLETED
        )
    except asyncio.CancelledError:
        caller.took_cancellation()
