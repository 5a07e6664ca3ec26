"""Spend totals grouped by request, provider, model, status and currency.

Memory grows with the number of groups, never with the number of events. Amounts are exact
``Decimal`` sums; a group whose lines are unpriced or unmetered keeps a count, not a number.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal

from spanledger import _forksafe
from spanledger.costs import KNOWN_STATUSES, CostLine, CostStatus
from spanledger.events import EmbeddingEvent, Event, RerankEvent

__all__ = ["GroupKey", "GroupTotal", "Totals", "billed_characters", "billed_figures"]


def billed_figures(event: Event) -> tuple[int, int]:
    """Provider-reported input tokens and search units of an event (0 when not reported)."""
    kind = type(event)
    if kind is EmbeddingEvent or kind is RerankEvent:
        usage = event.usage  # type: ignore[union-attr]
        if usage is not None:
            units = usage.search_units if kind is RerankEvent else None  # type: ignore[union-attr]
            return usage.input_tokens or 0, units or 0
    return 0, 0


def billed_characters(event: Event) -> int:
    """Provider-reported billable characters of an event (0 when not reported)."""
    if type(event) is EmbeddingEvent and event.usage is not None:
        return event.usage.billable_characters or 0
    return 0


@dataclass(frozen=True, order=True)
class GroupKey:
    """What ``Totals`` groups cost lines by: the request, provider, model, cost status and
    currency."""

    request_id: str
    provider: str
    model: str
    status: str
    currency: str


@dataclass
class GroupTotal:
    """One group's count, known amount, and billed usage."""

    calls: int = 0
    amount: Decimal = Decimal(0)
    input_tokens: int = 0
    search_units: int = 0
    billable_characters: int = 0


class Totals:
    """A thread-safe accumulator of cost lines."""

    def __init__(self) -> None:
        self._groups: dict[tuple[str, str, str, CostStatus, str], GroupTotal] = {}
        self._lock = _forksafe.lock(self, "_lock")

    def add(self, event: Event, line: CostLine) -> None:
        """Count one priced call into its group."""
        key = (
            event.request_id or "",
            event.provider,
            event.model,
            line.status,
            line.currency or "",
        )
        tokens, units = billed_figures(event)
        characters = billed_characters(event)
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = GroupTotal()
            group.calls += 1
            if line.amount is not None:
                group.amount += line.amount
            group.input_tokens += tokens
            group.search_units += units
            group.billable_characters += characters

    def extend(self, priced: Iterable[tuple[Event, CostLine]]) -> None:
        """Count each (event, cost line) pair."""
        for event, line in priced:
            self.add(event, line)

    @property
    def groups(self) -> dict[GroupKey, GroupTotal]:
        with self._lock:
            return {
                GroupKey(request, provider, model, status.value, currency): GroupTotal(
                    g.calls, g.amount, g.input_tokens, g.search_units, g.billable_characters
                )
                for (request, provider, model, status, currency), g in self._groups.items()
            }

    def by(self, *fields: str) -> dict[tuple[str, ...], GroupTotal]:
        """Roll the groups up by the named ``GroupKey`` fields (e.g. ``"provider", "model"``)."""
        rolled: dict[tuple[str, ...], GroupTotal] = {}
        for key, group in self.groups.items():
            name = tuple(getattr(key, field) for field in fields)
            total = rolled.setdefault(name, GroupTotal())
            total.calls += group.calls
            total.amount += group.amount
            total.input_tokens += group.input_tokens
            total.search_units += group.search_units
            total.billable_characters += group.billable_characters
        return rolled

    def spend(self, currency: str | None = None) -> dict[str, Decimal]:
        """Known spend (priced + estimated + not billed) per currency."""
        known = {status.value for status in KNOWN_STATUSES}
        result: dict[str, Decimal] = {}
        for key, group in self.groups.items():
            if key.status in known and key.currency and (currency in (None, key.currency)):
                result[key.currency] = result.get(key.currency, Decimal(0)) + group.amount
        return result

    def count(self, status: CostStatus) -> int:
        """How many calls ended with this cost status."""
        return sum(group.calls for key, group in self.groups.items() if key.status == status.value)
