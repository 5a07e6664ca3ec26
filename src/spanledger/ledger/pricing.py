"""The ledger: prices each event (or fallback attempt) from a price table, in ``Decimal``.

A used dimension with no rate, a model with no entry, or an ambiguous entry is ``unpriced``
with the missing piece named; usage the provider did not report is ``unmetered``; an explicit
``0`` rate is free. Each unpriced or unmetered (provider, model, reason) is logged once per
process so a gap in the price table is noticed; past ``WARNED_KEYS_LIMIT`` distinct keys the
rest are counted instead (``suppressed_warnings()``), so caller-chosen model names cannot grow
the process's memory or its log without bound.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from os import PathLike
from typing import Literal

from spanledger import _forksafe
from spanledger._logs import get_logger
from spanledger.costs import NOT_PRICED_STATUSES, CostCode, CostLine, CostStatus
from spanledger.estimates import may_have_billed
from spanledger.events import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankUsage,
)
from spanledger.ledger.prices import PriceEntry, PriceTable

__all__ = [
    "WARNED_KEYS_LIMIT",
    "Ledger",
    "price_usage",
    "suppressed_warnings",
    "unbilled_failure",
]

WARNED_KEYS_LIMIT = 1000
"""Distinct (provider, model, reason) keys that get their own ``usage_not_priced`` warning per
process. Past it, one ``usage_not_priced_suppressed`` warning says so and further unwarned calls
are only counted (``suppressed_warnings()``); the ``spanledger.cost.unpriced`` metric still
counts every call."""

_log = get_logger("spanledger.ledger")
_warned: set[tuple[str, str, str]] = set()
_suppressed = 0
_ZERO = Decimal(0)
_SUCCESS = (EmbeddingEvent, RerankEvent)
_warned_lock = _forksafe.module_lock(globals(), "_warned_lock")


def suppressed_warnings() -> int:
    """Unpriced calls not warned about because ``WARNED_KEYS_LIMIT`` keys were already warned."""
    with _warned_lock:
        return _suppressed


def _forget_warnings() -> None:
    """Start the warn-once bookkeeping afresh (for tests)."""
    global _suppressed
    with _warned_lock:
        _warned.clear()
        _suppressed = 0


def _warn_once(provider: str, model: str, line: CostLine) -> None:
    global _suppressed
    if line.status not in NOT_PRICED_STATUSES:
        return
    key = (provider, model, line.code.value if line.code else line.status.value)
    with _warned_lock:
        if key in _warned:
            return
        if len(_warned) < WARNED_KEYS_LIMIT:
            _warned.add(key)
            suppressed = 0
        else:
            _suppressed += 1
            suppressed = _suppressed
    with contextlib.suppress(Exception):
        if not suppressed:
            _log.warning(
                "usage_not_priced",
                provider=provider,
                model=model,
                status=line.status.value,
                reason=line.reason,
            )
        elif suppressed == 1:
            _log.warning(
                "usage_not_priced_suppressed",
                limit=WARNED_KEYS_LIMIT,
                reason="more unpriced (provider, model, reason) keys than the warn-once limit; "
                "further ones are counted, not logged",
            )


def price_usage(
    table: PriceTable,
    provider: str,
    model: str,
    at: datetime,
    usage: EmbeddingUsage | RerankUsage | None,
    *,
    estimated: bool = False,
    malformed: Sequence[str] = (),
) -> CostLine:
    """Price one billed call's usage (``None``: the provider reported none; ``malformed``
    names the figures it sent that were not counts)."""
    lookup = table.lookup(provider, model, at)
    entry = lookup.entry
    if entry is None:
        if lookup.ambiguous:
            labels = ", ".join(candidate.label for candidate in lookup.ambiguous)
            return CostLine(
                status=CostStatus.UNPRICED,
                code=CostCode.AMBIGUOUS_PRICE,
                reason=f"equally specific entries with different rates match: {labels}",
            )
        return CostLine(
            status=CostStatus.UNPRICED,
            code=CostCode.NO_PRICE_ENTRY,
            reason=f"no price entry for {provider}/{model}",
        )
    per_request = entry.per_request
    if usage is None:
        if entry.input_per_mtok is None and entry.per_search_unit is None:
            return CostLine(
                CostStatus.PRICED,
                per_request,
                entry.currency,
                dimensions={"requests": per_request} if per_request is not None else {},
                price_entry=entry.label,
            )
        return CostLine(
            status=CostStatus.UNMETERED,
            amount=per_request,
            currency=entry.currency if per_request is not None else None,
            code=CostCode.USAGE_MALFORMED if malformed else CostCode.USAGE_NOT_REPORTED,
            reason=(
                f"the provider's usage ({', '.join(malformed)}) was not a count"
                if malformed
                else "the provider reported no usage"
            )
            + "; only a per-request rate can be charged",
            dimensions={"requests": per_request} if per_request is not None else {},
            price_entry=entry.label,
        )
    dimensions: dict[str, Decimal] = {}
    amount: Decimal | None = None
    if per_request is not None:
        dimensions["requests"] = amount = per_request
    tokens = usage.input_tokens
    if tokens:
        if entry.per_token is None:
            return _missing_rate(entry, "input_per_mtok", tokens, "input_tokens")
        dimensions["input_tokens"] = cost = entry.per_token * tokens
        amount = cost if amount is None else amount + cost
    units = usage.search_units if type(usage) is RerankUsage else None
    if units:
        if entry.per_search_unit is None:
            return _missing_rate(entry, "per_search_unit", units, "search_units")
        dimensions["search_units"] = cost = entry.per_search_unit * units
        amount = cost if amount is None else amount + cost
    if amount is None:
        amount = _ZERO
    if estimated:
        return CostLine(
            CostStatus.ESTIMATED,
            amount,
            entry.currency,
            "usage estimated for an attempt abandoned after sending",
            dimensions=dimensions,
            price_entry=entry.label,
        )
    return CostLine(CostStatus.PRICED, amount, entry.currency, None, None, dimensions, entry.label)


def _missing_rate(entry: PriceEntry, rate: str, count: int, figure: str) -> CostLine:
    return CostLine(
        status=CostStatus.UNPRICED,
        currency=entry.currency,
        code=CostCode.MISSING_RATE,
        reason=f"no {rate} rate in {entry.label} for {count} {figure}",
        price_entry=entry.label,
    )


def not_billed(reason: str, code: CostCode = CostCode.FAILED_UNBILLED) -> CostLine:
    """A call the provider did not bill: zero, with the reason."""
    return CostLine(status=CostStatus.NOT_BILLED, amount=Decimal(0), code=code, reason=reason)


def _unbilled_reason(kind: str, category: str | None) -> str:
    return (
        f"the {kind} call failed ({category}) where the provider bills nothing: refused "
        "before sending or at connect, or answered with an error status"
    )


def unbilled_failure(
    kind: str, failure: tuple[str | None, str | None, int | None]
) -> CostLine | None:
    """The ``not_billed`` line of a failed call the provider cannot have billed (its category,
    error type and status code), which needs no price; ``None`` when it may have billed."""
    category, error_type, status_code = failure
    if may_have_billed(category or "", error_type, status_code):
        return None
    return not_billed(_unbilled_reason(kind, category))


class Ledger:
    """Prices events from a ``PriceTable`` (or a path to one)."""

    def __init__(self, prices: PriceTable | str | PathLike[str], *, warn: bool = True) -> None:
        self.prices = prices if isinstance(prices, PriceTable) else PriceTable.load(prices)
        self._warn = warn

    def price_calls(
        self,
        calls: int,
        provider: str,
        model: str,
        at: datetime,
        usage: EmbeddingUsage | RerankUsage | None,
        *,
        outcome: Literal["succeeded", "estimated", "failed"],
        failure: tuple[str | None, str | None, int | None] = (None, None, None),
        kind: Literal["embedding", "rerank"] = "embedding",
        malformed: Sequence[str] = (),
    ) -> CostLine:
        """The cost of ``calls`` calls that price alike (one provider, model and outcome, started
        within one validity window of the table, with the same figures present), ``usage``
        their summed figures. Pricing is linear in usage, so this is exactly the sum of pricing
        each call: ``spanledger report`` prices a log's groups this way. ``failure``: the
        failed calls' category, error type and status code; ``malformed``: the usage figures
        they sent that were not counts."""
        if outcome == "failed":
            unbilled = unbilled_failure(kind, failure)
            if unbilled is not None:
                return unbilled
            line = price_usage(self.prices, provider, model, at, None)
        else:
            line = price_usage(
                self.prices,
                provider,
                model,
                at,
                usage,
                estimated=outcome == "estimated",
                malformed=malformed,
            )
        per_request = line.dimensions.get("requests")
        if calls == 1 or per_request is None or line.amount is None:
            return line
        extra = per_request * (calls - 1)
        dimensions = {**line.dimensions, "requests": per_request * calls}
        return CostLine(
            line.status,
            line.amount + extra,
            line.currency,
            line.reason,
            line.code,
            dimensions,
            line.price_entry,
        )

    def price(self, event: Event) -> CostLine:
        """The cost line for one event."""
        if isinstance(event, _SUCCESS):
            line = price_usage(
                self.prices,
                event.provider,
                event.model,
                event.started_at,
                event.usage,
                malformed=event.malformed_usage,
            )
        elif event.estimated_usage is not None:
            line = price_usage(
                self.prices,
                event.provider,
                event.model,
                event.started_at,
                event.estimated_usage,
                estimated=True,
            )
        elif may_have_billed(event.error_category, event.error_type, event.status_code):
            # billed, perhaps, but nothing to estimate from: unknown, never free
            line = price_usage(self.prices, event.provider, event.model, event.started_at, None)
        else:
            kind = "embedding" if isinstance(event, EmbeddingFailedEvent) else "rerank"
            line = not_billed(_unbilled_reason(kind, event.error_category.value))
        if self._warn and line.status in NOT_PRICED_STATUSES:
            _warn_once(event.provider, event.model, line)
        return line
