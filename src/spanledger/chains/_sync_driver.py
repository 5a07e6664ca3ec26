"""Walking a chain in sync code: each gate, and each step that may overrun, runs on a worker
thread the caller stops waiting for at its budget or at its cancel flag; a cooperative step
(one that ends within its budget by itself) runs inline on the caller's thread when there is no
cancel flag to watch."""

from __future__ import annotations

import inspect

from spanledger.chains._bounded import Cancellable, run_in_thread
from spanledger.chains._chain import Chain
from spanledger.chains._walk import Ended, Request, RunGate, resume, walk
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
    if step.cooperative and cancel is None:
        try:
            return Ended("done", step.rank(chain.query, chain.documents, chain.top_k, budget))
        except Exception as error:
            return Ended("raised", error=error)
    return Ended.of(
        run_in_thread(
            lambda: step.rank(chain.query, chain.documents, chain.top_k, budget), budget, cancel
        )
    )
