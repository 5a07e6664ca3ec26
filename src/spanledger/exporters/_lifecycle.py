"""How spanledger-owned pipelines end: within a deadline, on a shutdown or at exit.

Each pipeline registers here while it is open; at interpreter exit every one nobody shut down
is closed within its own timeout (the SDKs' own exit handlers, which wait far longer, are never
registered for these pipelines). ``call_within`` bounds a call into SDK code that does not
bound itself.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref
from collections.abc import Callable
from typing import Protocol

from spanledger._logs import get_logger
from spanledger.errors import MissingExtra

__all__ = [
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "Closable",
    "call_within",
    "closed_at_exit",
    "missing_extra",
    "remaining",
    "still_open",
]

DEFAULT_SHUTDOWN_TIMEOUT = 5.0
"""Seconds that shutting a pipeline down may take, whatever state its backend is in."""

_log = get_logger("spanledger.exporters")


class Closable(Protocol):
    shutdown_timeout: float

    def shutdown(self, deadline: float) -> None: ...


def missing_extra(extra: str, error: ImportError) -> MissingExtra:
    """The sentence for an exporter whose SDK is not installed."""
    return MissingExtra(
        f"install spanledger[{extra}] to use this exporter ({error.name} missing): "
        f"pip install 'spanledger[{extra}]'",
        extra=extra,
    )


def call_within(action: Callable[[], object], timeout: float, *, name: str) -> bool:
    """Run ``action`` on a daemon thread and wait at most ``timeout`` seconds for it: for
    calls into code that does not bound itself (an SDK's flush). Whether it finished; an
    exception it raised is logged once by type, never raised here."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
        except BaseException as exc:  # reported below, by type only
            outcome.append(exc)
        else:
            outcome.append(None)

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(max(0.0, timeout))
    if not outcome:
        return False
    error = outcome[0]
    if error is not None:
        with contextlib.suppress(Exception):
            _log.warning("flush_failed", target=name, error_type=type(error).__name__)
        return False
    return True


_open_pipelines: weakref.WeakSet[Closable] = weakref.WeakSet()


def _close_open_pipelines() -> None:
    """At exit: close every pipeline nobody shut down, each within its own timeout, all
    measured from now (the SDKs' own exit handlers, which wait far longer, are never
    registered for these pipelines)."""
    started = time.monotonic()
    for pipeline in list(_open_pipelines):
        with contextlib.suppress(Exception):
            pipeline.shutdown(started + pipeline.shutdown_timeout)


atexit.register(_close_open_pipelines)


def remaining(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def closed_at_exit(pipeline: Closable) -> None:
    """Close ``pipeline`` at exit unless it is shut down first (``still_open``)."""
    _open_pipelines.add(pipeline)


def still_open(pipeline: Closable) -> None:
    """``pipeline`` is being shut down: the exit handler leaves it alone."""
    _open_pipelines.discard(pipeline)
