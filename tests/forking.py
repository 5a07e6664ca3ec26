"""Forking in tests: run work in a forked child that reports by its exit code, and wait for
the child with a bound (a child that hangs is killed and reported as hung)."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

__all__ = ["HUNG_LIMIT", "RAISED", "SLOW", "fork", "outcome", "timed"]

RAISED = 99
"""The exit code of a child whose work raised."""
SLOW = 98
"""The exit code of a child whose work took longer than it was allowed (see ``timed``)."""
HUNG_LIMIT = 15.0
"""Seconds the parent waits for a child before calling it hung: far above any limit a child
checks itself, since a test process's fork hooks (other libraries') can be slow."""


def fork(work: Callable[[], int | None]) -> int:
    """Run ``work`` in a forked child that exits with what it returns (0 for ``None``), or
    ``RAISED``; the child's pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = RAISED
        try:
            code = work() or 0
        finally:
            os._exit(code)
    return pid


def timed(limit: float, work: Callable[[], object]) -> Callable[[], int]:
    """``work`` as a child's work that must finish within ``limit`` seconds of the child
    starting, or exit ``SLOW``; a whole number it returns is the child's exit code (a check
    that returns 1 fails the child), anything else exits 0."""

    def run() -> int:
        started = time.monotonic()
        code = work()
        if time.monotonic() - started > limit:
            return SLOW
        return code if type(code) is int else 0

    return run


def outcome(pid: int, limit: float = HUNG_LIMIT) -> int | None:
    """The child's exit code, or ``None`` if it outlived ``limit`` (it is killed then)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None
