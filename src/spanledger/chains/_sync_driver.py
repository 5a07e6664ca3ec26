"""Walking a chain in sync code, bounded from the caller's side: each gate, and each step,
runs on a worker thread the caller stops waiting for at its budget or at its cancel flag, so no
step holds the chain past its deadline, however it spends its time (a server trickling its
answer, BM25 over a large input). A step that ``runs_inline`` for its documents (about a
millisecond of work) runs on the caller's thread when there is no cancel flag to watch, and
counts as timed out if it still ended past its budget."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import Any

from spanledger.chains._bounded import SETTLE, Cancellable, run_in_thread
from spanledger.chains._chain import Chain
from spanledger.chains._walk import TIMED_OUT, Ended, Request, RunGate, resume, walk
from spanledger.outcomes import RerankOutcome

__all__ = ["run_sync"]


def run_sync(chain: Chain, cancel: Cancellable | None) -> RerankOutcome:
    """The chain's outcome, waiting on this thread for what its walk asks."""
    steps = walk(chain, cancel)
    ended: Ended | None = None
    while True:
        request = resume(steps, ended)
        if isinstance(request, RerankOutcome):
            return request
        ended = _waited(chain, request, cancel)


def _waited(chain: Chain, request: Request, cancel: Cancellable | None) -> Ended:
    if isinstance(request, RunGate):
        gate, check = request.gate, request.check
        finished = run_in_thread(lambda: gate(check), request.budget, cancel)
        if inspect.iscoroutine(finished.value):
            finished.value.close()  # an async gate in a sync chain cannot be awaited here
        return Ended.of(finished)
    step, budget = request.step, request.budget

    def rank() -> Any:
        return step.rank(chain.query, chain.documents, chain.top_k, budget)

    if cancel is None and step.runs_inline(chain.documents):
        return _inline(rank, budget)
    settle = SETTLE if step.ends_at_budget else 0.0
    return Ended.of(run_in_thread(rank, budget, cancel, settle))


def _inline(rank: Callable[[], Any], budget: float) -> Ended:
    """A step run on this thread; one that ended past its budget, however it ended, timed
    out, as it would have on a worker thread."""
    started = time.monotonic()
    try:
        ended = Ended("done", rank())
    except Exception as error:
        ended = Ended.raised(error)
    return TIMED_OUT if time.monotonic() - started > budget else ended
