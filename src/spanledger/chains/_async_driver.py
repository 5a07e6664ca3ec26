"""Walking a chain in async code: each step and each coroutine gate runs as a task, awaited
until it ends, its budget runs out (it is then cancelled) or the caller cancels, by the token
or by cancelling the task that awaits the chain; a sync gate runs on a worker thread. The chain
answers the caller's cancellation with its ``aborted`` outcome, and takes the cancellation back.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from typing import Any

from spanledger.chains._bounded import CancelToken, arun_in_thread
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
    waker = _TokenWaker(cancel) if cancel is not None else None
    steps = walk(chain, cancel)
    ended: Ended | None = None
    try:
        while True:
            request = resume(steps, ended)
            if isinstance(request, RerankOutcome):
                if ended is not None and ended.how == "aborted":
                    _uncancel()
                return request
            ended = await _waited(chain, request, waker)
    finally:
        if waker is not None:
            waker.close()


async def _waited(chain: Chain, request: Request, waker: _TokenWaker | None) -> Ended:
    if isinstance(request, RunStep):
        step, budget = request.step, request.budget
        task = asyncio.ensure_future(step.arank(chain.query, chain.documents, chain.top_k, budget))
        ended = await _task_ended(task, budget, waker)
        if ended.how == "aborted":  # give the step a moment to record its own call as it unwinds
            _uncancel()
            await _cancelled(task)
        return ended
    gate, check = request.gate, request.check
    if not inspect.iscoroutinefunction(gate):
        return await _thread_gate_ended(gate, check, request.budget, waker)
    task = asyncio.ensure_future(gate(check))
    ended = await _task_ended(task, request.budget, waker)
    if ended.how in ("aborted", "interrupted"):
        task.cancel()
    return ended


async def _task_ended(task: asyncio.Future[Any], budget: float, waker: _TokenWaker | None) -> Ended:
    """How ``task`` ended within ``budget`` seconds; a ``BaseException`` that is not an
    ``Exception`` (nor a cancellation) propagates."""
    try:
        value = await _bounded(task, budget, waker)
    except (asyncio.CancelledError, _Aborted) as stop:
        return ABORTED if _by_caller(stop) else INTERRUPTED
    except TimeoutError:
        return TIMED_OUT
    except Exception as error:
        return Ended("raised", error=error)
    return Ended("done", value)


async def _thread_gate_ended(
    gate: Gate, check: GateCheck, budget: float, waker: _TokenWaker | None
) -> Ended:
    """A sync gate's verdict from a worker thread; the token ends the wait for a hung one as it
    does for a step."""
    waiting = asyncio.ensure_future(arun_in_thread(lambda: gate(check), budget))
    try:
        finished = await _bounded(waiting, budget, waker)
    except TimeoutError:
        return TIMED_OUT
    except (asyncio.CancelledError, _Aborted):
        waiting.cancel()
        return ABORTED
    return Ended.of(finished)


class _Aborted(Exception):
    """The caller cancelled the chain while it waited."""


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
