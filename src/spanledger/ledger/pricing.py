"""The ledger: prices each event (or fallback attempt) from a price table, in ``Decimal``.

A used dimension with no rate, a model with no entry, or an ambiguous entry is ``unpriced``
with the missing piece named; usage the provider did not report is ``unmetered``; an explicit
``0`` rate is free. Each unpriced or unmetered (provider, model, reason) is logged once per
process so a gap in the price table is noticed.
"""

from __future__ import annotations

import contextlib
import threading
from datetime import datetime
from decimal import Decimal
from os import PathLike

import structlog

from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.events import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankUsage,
)
from spanledger.ledger.prices import PriceEntry, PriceTable

__all__ = ["Ledger", "price_usage"]

_MILLION = Decimal(1_000_000)
_log = structlog.get_logger("spanledger.ledger")
_warned: set[tuple[str, str, str]] = set()
_warned_lock = threading.Lock()


def _warn_once(provider: str, model: str, line: CostLine) -> None:
    if line.status not in (CostStatus.UNPRICED, CostStatus.UNMETERED):
        return
    key = (provider, model, line.code.value if line.code else line.status.value)
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    with contextlib.suppress(Exception):
        _log.warning(
            "usage_not_priced",
            provider=provider,
            model=model,
            status=line.status.value,
            reason=line.reason,
        )


def _figures(usage: EmbeddingUsage | RerankUsage) -> dict[str, int]:
    figures: dict[str, int] = {}
    if usage.input_tokens is not None:
        figures["input_tokens"] = usage.input_tokens
    if isinstance(usage, RerankUsage) and usage.search_units is not None:
        figures["search_units"] = usage.search_units
    return figures


_RATE_FOR = {"input_tokens": "input_per_mtok", "search_units": "per_search_unit"}


def price_usage(
    table: PriceTable,
    provider: str,
    model: str,
    at: datetime,
    usage: EmbeddingUsage | RerankUsage | None,
    *,
    estimated: bool = False,
) -> CostLine:
    """Price one billed call's usage (``None``: the provider reported none)."""
    lookup = table.lookup(provider, model, at)
    if lookup.entry is None:
        if lookup.ambiguous:
            labels = ", ".join(entry.label for entry in lookup.ambiguous)
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
    entry = lookup.entry
    dimensions: dict[str, Decimal] = {}
    if entry.per_request is not None:
        dimensions["requests"] = entry.per_request
    if usage is None and entry.input_per_mtok is None and entry.per_search_unit is None:
        return CostLine(
            status=CostStatus.PRICED,
            amount=entry.per_request,
            currency=entry.currency,
            dimensions=dimensions,
            price_entry=entry.label,
        )
    if usage is None:
        return CostLine(
            status=CostStatus.UNMETERED,
            amount=entry.per_request,
            currency=entry.currency if entry.per_request is not None else None,
            code=CostCode.USAGE_NOT_REPORTED,
            reason="the provider reported no usage; only a per-request rate can be charged",
            dimensions=dimensions,
            price_entry=entry.label,
        )
    for figure, count in _figures(usage).items():
        rate_name = _RATE_FOR[figure]
        rate = _rate(entry, rate_name)
        if rate is None:
            if count == 0:
                continue
            return CostLine(
                status=CostStatus.UNPRICED,
                currency=entry.currency,
                code=CostCode.MISSING_RATE,
                reason=f"no {rate_name} rate in {entry.label} for {count} {figure}",
                price_entry=entry.label,
            )
        per_unit = rate / _MILLION if figure == "input_tokens" else rate
        dimensions[figure] = per_unit * count
    return CostLine(
        status=CostStatus.ESTIMATED if estimated else CostStatus.PRICED,
        amount=sum(dimensions.values(), Decimal(0)),
        currency=entry.currency,
        reason="usage estimated for an attempt abandoned after sending" if estimated else None,
        dimensions=dimensions,
        price_entry=entry.label,
    )


def _rate(entry: PriceEntry, name: str) -> Decimal | None:
    rate: Decimal | None = getattr(entry, name)
    return rate


def not_billed(reason: str, code: CostCode = CostCode.FAILED_UNBILLED) -> CostLine:
    """A call the provider did not bill: zero, with the reason."""
    return CostLine(status=CostStatus.NOT_BILLED, amount=Decimal(0), code=code, reason=reason)


class Ledger:
    """Prices events from a ``PriceTable`` (or a path to one)."""

    def __init__(self, prices: PriceTable | str | PathLike[str], *, warn: bool = True) -> None:
        self.prices = prices if isinstance(prices, PriceTable) else PriceTable.load(prices)
        self._warn = warn

    def price(self, event: Event) -> CostLine:
        """The cost line for one event."""
        if isinstance(event, EmbeddingEvent | RerankEvent):
            line = price_usage(
                self.prices, event.provider, event.model, event.started_at, event.usage
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
        else:
            kind = "embedding" if isinstance(event, EmbeddingFailedEvent) else "rerank"
            line = not_billed(
                f"the {kind} call failed ({event.error_category.value}) before the provider "
                "could bill it"
            )
        if self._warn:
            _warn_once(event.provider, event.model, line)
        return line
