"""Running a piece of a chain (a step, a gate) for at most a budget, and cancelling a chain.

Python cannot stop a thread, so what may overrun runs on a worker thread (a daemon, reused
between runs), carrying the caller's context (recorder, request scope, trace); the chain waits
for it until the budget runs out or the caller cancels, then moves on and leaves it to finish on
its own (what it emits still reaches the recorder). Each wait is bounded by the budget, and by
``SETTLE`` more for a step whose own call ends at its budget.
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import contextvars
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from spanledger import _forksafe

__all__ = ["SETTLE", "CancelToken", "Cancellable", "Finished", "arun_in_thread", "run_in_thread"]

SETTLE = 0.1
"""Seconds a step left at its budget gets to end on its own, so that the call it made records
its own event before the chain ends (a remote call's timeout ends it at about its budget; an
async step is cancelled and unwinds)."""

_POLL = 0.005
"""Seconds between looks at a cancel flag that cannot wake a waiter (a plain
``threading.Event``)."""


_LONGEST_WAIT = 3600.0
"""Seconds of one wait at most: a lock cannot wait past the platform's limit, so a far deadline
is waited for in turns."""


class Cancellable(Protocol):
    """What a sync chain accepts as its cancel flag: a ``CancelToken`` or a
    ``threading.Event``."""

    def is_set(self) -> bool: ...


class CancelToken:
    """Cancels a running chain from another thread (or task): the chain stops waiting for the
    step that is running, records it as ``aborted`` and returns at once with every attempt so
    far. One token may serve several chains; it cannot be reset."""

    def __init__(self) -> None:
        self._set = False
        self._wakers: list[Callable[[], None]] = []
        self._lock = _forksafe.lock(self, "_lock")

    def cancel(self) -> None:
        """Cancel every chain this token was given (and those it will be given)."""
        with self._lock:
            self._set = True
            wakers, self._wakers = self._wakers, []
        for wake in wakers:
            wake()

    def is_set(self) -> bool:
        return self._set

    @property
    def cancelled(self) -> bool:
        return self._set

    def when_cancelled(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake`` when cancelled (now, if already); returns what unregisters it."""
        with self._lock:
            if not self._set:
                self._wakers.append(wake)
                return lambda: self._forget(wake)
        wake()
        return lambda: None

    def _forget(self, wake: Callable[[], None]) -> None:
        with self._lock:
            if wake in self._wakers:
                self._wakers.remove(wake)

    def __repr__(self) -> str:
        return f"CancelToken(cancelled={self._set})"


@dataclass(slots=True)
class Finished:
    """How a bounded run ended: ``done`` (``value``), ``raised`` (``error``), ``timeout`` or
    ``cancelled`` (the run was left to finish on its own)."""

    how: Literal["done", "raised", "timeout", "cancelled"]
    value: Any = None
    error: BaseException | None = None


def _runner(
    function: Callable[[], Any], box: Finished, ended: Callable[[], None]
) -> Callable[[], None]:
    context = contextvars.copy_context()

    def run() -> None:
        try:
            box.value = context.run(function)
            box.how = "done"
        except BaseException as error:  # handed to the chain, which records it
            box.error, box.how = error, "raised"
        finally:
            ended()

    return run


def _opener(latch: _thread.LockType) -> Callable[[], None]:
    """What opens ``latch`` (a lock the waiter holds): the run ending, or the token; whichever
    comes second finds it open already."""

    def open_latch() -> None:
        with contextlib.suppress(RuntimeError):
            latch.release()

    return open_latch


_IDLE_SECONDS = 60.0
"""How long a worker with nothing to do waits for more before it ends."""


class _Workers:
    """Daemon threads that run what a chain may stop waiting for, reused between runs (a
    hand-off costs a fraction of starting a thread). A job that overruns keeps its worker; the
    next job then gets a new one, so a hung step never delays another chain's."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._idle = 0
        """Workers waiting for a job, less the jobs queued for them."""
        self._lock = _forksafe.lock(self, "_lock")
        _forksafe.after_fork_in_child(self._forget_parent)

    def run(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle > 0:
                self._idle -= 1
                self._jobs.put(job)
                return
        threading.Thread(
            target=self._work, args=(job,), name="spanledger-chain", daemon=True
        ).start()

    def _work(self, job: Callable[[], None]) -> None:
        while True:
            job()
            with self._lock:
                self._idle += 1
            while True:
                try:
                    job = self._jobs.get(timeout=_IDLE_SECONDS)
                    break
                except queue.Empty:
                    with self._lock:
                        if self._idle > 0:  # nothing was queued for this worker: it ends
                            self._idle -= 1
                            return

    def _forget_parent(self) -> None:
        """In a forked child the parent's workers do not exist: start from none."""
        self._jobs = queue.SimpleQueue()
        self._idle = 0


_workers = _Workers()


def run_in_thread(
    function: Callable[[], Any], budget: float, cancel: Cancellable | None, settle: float = 0.0
) -> Finished:
    """Run ``function`` on a worker thread and wait at most ``budget`` seconds, or until
    ``cancel`` is set. At the budget, wait ``settle`` seconds more for it to end on its own
    (what it recorded lands first); it has timed out all the same."""
    if cancel is not None and cancel.is_set():
        return Finished("cancelled")
    box = Finished("timeout")
    latch = _thread.allocate_lock()  # cheaper to hand over than an Event: one lock, no condition
    latch.acquire()
    opened = _opener(latch)
    forget: Callable[[], None] = lambda: None  # noqa: E731
    if isinstance(cancel, CancelToken):
        forget = cancel.when_cancelled(opened)
    _workers.run(_runner(function, box, opened))
    try:
        end = time.monotonic() + budget
        polling = cancel is not None and not isinstance(cancel, CancelToken)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                if settle > 0 and not (cancel is not None and cancel.is_set()):
                    latch.acquire(True, settle)
                return Finished("timeout")
            woken = latch.acquire(True, min(left, _POLL if polling else _LONGEST_WAIT))
            if box.how != "timeout":
                return box
            if cancel is not None and cancel.is_set():
                return Finished("cancelled")
            if woken:
                return Finished("cancelled")  # opened by the token
    finally:
        forget()


async def arun_in_thread(function: Callable[[], Any], budget: float | None) -> Finished:
    """Run a sync ``function`` (a gate, a local step) on a worker thread, awaiting it at most
    ``budget`` seconds (``None``: until it ends or the awaiting task is cancelled); the default
    executor is left alone, so a hung one starves nothing."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    box = Finished("timeout")
    run = _runner(function, box, lambda: None)

    def run_then_wake() -> None:
        run()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(_settle, future)

    _workers.run(run_then_wake)
    try:
        await asyncio.wait_for(asyncio.shield(future), budget)
    except TimeoutError:
        return Finished("timeout")
    return box


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
