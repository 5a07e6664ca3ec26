"""Spend totals grouped by request, provider, model, status and currency.

Memory grows with the number of groups, never with the number of events. Amounts are exact
``Decimal`` sums; a group whose lines are unpriced or unmetered keeps a count, not a number.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal

from spanledger import _forksafe
from spanledger.costs import KNOWN_STATUSES, CostLine, CostStatus
from spanledger.events import EmbeddingEvent, Event, RerankEvent

__all__ = [
    "FIGURES",
    "NOT_APPLICABLE",
    "UNKNOWN",
    "GroupKey",
    "GroupTotal",
    "Totals",
    "billed_figures",
    "reported_figures",
]


def billed_figures(event: Event) -> tuple[int, int]:
    """Provider-reported input tokens and search units of an event, 0 for a figure not
    reported (``reported_figures`` tells the two apart)."""
    figures = reported_figures(event)
    return figures.get("input_tokens") or 0, figures.get("search_units") or 0


def reported_figures(event: Event) -> dict[str, int | None]:
    """The billed figures a successful call's provider reported, by name; ``None`` for a
    figure it did not report (and for every figure of a failed call, which bills none)."""
    kind = type(event)
    usage = event.usage if kind is EmbeddingEvent or kind is RerankEvent else None  # type: ignore[union-attr]
    if usage is None:
        return {}
    return {name: getattr(usage, name, None) for name in FIGURES}


@dataclass(frozen=True, order=True)
class GroupKey:
    """What ``Totals`` groups cost lines by: the request, provider, model, cost status and
    currency."""

    request_id: str
    provider: str
    model: str
    status: str
    currency: str


FIGURES = ("input_tokens", "search_units", "billable_characters")
"""The billed figures a group sums, in the order the reports show them."""

NOT_APPLICABLE = "—"
"""How a report shows a figure the group's operations do not have (units of an embedding)."""
UNKNOWN = "unknown"
"""How a report shows a figure none of the group's calls reported."""


@dataclass
class GroupTotal:
    """One group's count, known amount, and billed usage: each figure summed over the calls
    that reported it, with how many did (``*_calls``), so that a figure nobody reported is
    unknown, never 0. ``reranks`` says how many calls were reranks: search units apply to
    them, billable characters to the rest."""

    calls: int = 0
    amount: Decimal = Decimal(0)
    input_tokens: int = 0
    search_units: int = 0
    billable_characters: int = 0
    input_tokens_calls: int = 0
    search_units_calls: int = 0
    billable_characters_calls: int = 0
    reranks: int = 0

    def count(self, calls: int, figures: Mapping[str, int | None], *, reranks: int = 0) -> None:
        """Add ``calls`` calls whose summed ``figures`` (by name; ``None`` or absent when they
        reported none) are given."""
        self.calls += calls
        self.reranks += reranks
        for name in FIGURES:
            value = figures.get(name)
            if value is not None:
                setattr(self, name, getattr(self, name) + value)
                setattr(self, f"{name}_calls", getattr(self, f"{name}_calls") + calls)

    def merge(self, other: GroupTotal) -> None:
        """Add another group's calls, amount and figures."""
        self.calls += other.calls
        self.amount += other.amount
        self.reranks += other.reranks
        for name in FIGURES:
            setattr(self, name, getattr(self, name) + getattr(other, name))
            calls = f"{name}_calls"
            setattr(self, calls, getattr(self, calls) + getattr(other, calls))

    def applies(self, name: str) -> bool:
        """Whether any of the group's operations has the figure ``name``."""
        return self._having(name) > 0

    def figure(self, name: str) -> int | None:
        """The figure summed over the calls that reported it; ``None`` when none did."""
        return getattr(self, name) if getattr(self, f"{name}_calls") else None

    def figure_text(self, name: str) -> str:
        """The figure as a table shows it: the sum, ``sum (k/n)`` when only k of the n calls
        that have it reported it, ``unknown`` when none did, ``—`` where the operation has
        no such figure."""
        if not self.applies(name):
            return NOT_APPLICABLE
        value = self.figure(name)
        if value is None:
            return UNKNOWN
        covered, having = getattr(self, f"{name}_calls"), self._having(name)
        return str(value) if covered >= having else f"{value} ({covered}/{having})"

    def _having(self, name: str) -> int:
        """How many of the group's calls are of an operation that has the figure ``name``."""
        if name == "search_units":
            return self.reranks
        if name == "billable_characters":
            return self.calls - self.reranks
        return self.calls

    def figures_json(self) -> dict[str, int | None]:
        """Each figure (``null`` when unknown or not applicable) and how many calls reported
        it, for JSON."""
        data: dict[str, int | None] = {}
        for name in FIGURES:
            data[name] = self.figure(name) if self.applies(name) else None
            data[f"{name}_calls"] = getattr(self, f"{name}_calls")
        return data


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
        figures = reported_figures(event)
        reranks = 1 if event.kind in ("rerank", "rerank_failed") else 0
        with self._lock:
            group = self._groups.get(key)
            if group is None:
                group = self._groups[key] = GroupTotal()
            if line.amount is not None:
                group.amount += line.amount
            group.count(1, figures, reranks=reranks)

    def extend(self, priced: Iterable[tuple[Event, CostLine]]) -> None:
        """Count each (event, cost line) pair."""
        for event, line in priced:
            self.add(event, line)

    @property
    def groups(self) -> dict[GroupKey, GroupTotal]:
        with self._lock:
            return {
                GroupKey(request, provider, model, status.value, currency): replace(g)
                for (request, provider, model, status, currency), g in self._groups.items()
            }

    def by(self, *fields: str) -> dict[tuple[str, ...], GroupTotal]:
        """Roll the groups up by the named ``GroupKey`` fields (e.g. ``"provider", "model"``)."""
        rolled: dict[tuple[str, ...], GroupTotal] = {}
        for key, group in self.groups.items():
            name = tuple(getattr(key, field) for field in fields)
            rolled.setdefault(name, GroupTotal()).merge(group)
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
