"""Ready-made gates for chain steps (``step(reranker, gate=...)``).

A gate is any callable that takes a ``GateCheck`` and returns ``True`` (run the step), ``False``
or a reason string (skip it). A step whose vendor key is missing is skipped (``no_api_key``)
without any gate; these cover the other usual reasons.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal, InvalidOperation

from spanledger.attribution import current_request
from spanledger.chains.steps import GateCheck
from spanledger.costs import KNOWN_STATUSES

__all__ = ["BUDGET_SPENT", "request_spend", "spend_below", "when"]

BUDGET_SPENT = "budget_spent"


def request_spend(currency: str) -> Decimal:
    """What the open request's calls have cost so far in ``currency``, from the cost lines the
    recorder's pricing put on them (``0`` outside a request, or when nothing was priced)."""
    scope = current_request()
    if scope is None:
        return Decimal(0)
    total = Decimal(0)
    for event in scope.events:
        line = event.cost
        if line is not None and line.status in KNOWN_STATUSES and line.currency == currency:
            total += line.amount or Decimal(0)
    return total


def spend_below(
    limit: Decimal | str | int, *, currency: str = "USD"
) -> Callable[[GateCheck], object]:
    """A gate that skips its step (``budget_spent``) once the open request has spent ``limit``
    or more in ``currency``. It reads the cost lines on the request's events, so the recorder
    must price them (``Recorder(prices=...)``); unpriced calls count for nothing here."""
    try:
        bound = Decimal(str(limit))
    except InvalidOperation:
        raise ValueError(f"spend_below limit must be a number, not {limit!r}") from None
    if not bound.is_finite() or bound < 0:
        raise ValueError(f"spend_below limit must be a finite amount of at least 0, not {limit!r}")

    def gate(check: GateCheck) -> object:
        return True if request_spend(currency) < bound else BUDGET_SPENT

    return gate


def when(
    predicate: Callable[[], object], reason: str = "gate_declined"
) -> Callable[[GateCheck], object]:
    """A gate from a predicate of no arguments (a feature flag, a quota check): the step runs
    while it is true, and is skipped with ``reason`` otherwise."""

    def gate(check: GateCheck) -> object:
        return True if predicate() else reason

    return gate
