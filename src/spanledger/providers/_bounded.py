"""Running a piece of a chain (a step, a gate) for at most a budget, and cancelling a chain.

Python cannot stop a thread, so what may overrun runs on a daemon thread of its own, carrying
the caller's context (recorder, request scope, trace); the chain waits for it until the budget
runs out or the caller cancels, then moves on and leaves it to finish on its own (what it emits
still reaches the recorder). Each wait is bounded by the budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from spanledger import _forksafe

__all__ = ["CancelToken", "Cancellable", "Finished", "arun_in_thread", "run_in_thread"]

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
    function: Callable[[], Any], box: Finished, done: threading.Event
) -> Callable[[], None]:
    context = contextvars.copy_context()

    def run() -> None:
        try:
            box.value = context.run(function)
            box.how = "done"
        except BaseException as error:  # handed to the chain, which records it
            box.error, box.how = error, "raised"
        finally:
            done.set()

    return run


def run_in_thread(
    function: Callable[[], Any], budget: float, cancel: Cancellable | None
) -> Finished:
    """Run ``function`` on a daemon thread and wait at most ``budget`` seconds, or until
    ``cancel`` is set."""
    if cancel is not None and cancel.is_set():
        return Finished("cancelled")
    box = Finished("timeout")
    done = threading.Event()
    forget: Callable[[], None] = lambda: None  # noqa: E731
    if isinstance(cancel, CancelToken):
        forget = cancel.when_cancelled(done.set)
    threading.Thread(
        target=_runner(function, box, done), name="spanledger-chain", daemon=True
    ).start()
    try:
        end = time.monotonic() + budget
        polling = cancel is not None and not isinstance(cancel, CancelToken)
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return Finished("timeout")
            finished = done.wait(min(left, _POLL if polling else _LONGEST_WAIT))
            if box.how != "timeout":
                return box
            if cancel is not None and cancel.is_set():
                return Finished("cancelled")
            if finished:
                return Finished("cancelled")  # woken by the token
    finally:
        forget()


async def arun_in_thread(function: Callable[[], Any], budget: float | None) -> Finished:
    """Run a sync ``function`` (a gate, a local step) on a daemon thread of its own, awaiting
    it at most ``budget`` seconds (``None``: until it ends or the awaiting task is cancelled);
    the default executor is left alone, so a hung one starves nothing."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[None] = loop.create_future()
    box = Finished("timeout")
    done = threading.Event()
    run = _runner(function, box, done)

    def run_then_wake() -> None:
        run()
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
            loop.call_soon_threadsafe(_settle, future)

    threading.Thread(target=run_then_wake, name="spanledger-chain", daemon=True).start()
    try:
        await asyncio.wait_for(asyncio.shield(future), budget)
    except TimeoutError:
        return Finished("timeout")
    return box


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
