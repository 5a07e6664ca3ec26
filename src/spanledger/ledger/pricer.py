"""What prices an event (``Pricer``), and pricing as a recorder processor (``Pricing``).

The recorder runs processors on each event before its sinks see it; ``Pricing`` is the one that
puts the cost line on. It lives here, below the recorder, so the recorder can use it without the
ledger knowing anything of recorders.
"""

from __future__ import annotations

from os import PathLike
from typing import Protocol, runtime_checkable

from spanledger.costs import CostLine
from spanledger.events import Event
from spanledger.ledger.prices import PriceTable
from spanledger.ledger.pricing import Ledger

__all__ = ["Pricer", "Pricing", "as_pricer"]


@runtime_checkable
class Pricer(Protocol):
    """Anything that prices an event (``Ledger`` is one)."""

    def price(self, event: Event) -> CostLine:
        """The event's cost line."""
        ...


def as_pricer(prices: Pricer | PriceTable | str | PathLike[str], *, warn: bool = True) -> Pricer:
    """A pricer as given, else a ``Ledger`` over the table (loaded when given a path).
    ``warn``: whether the ledger logs unpriced usage (once per provider, model and reason)."""
    return prices if isinstance(prices, Pricer) else Ledger(prices, warn=warn)


class Pricing:
    """A recorder processor: gives each event without a cost line the one its pricer says.

    An event that already carries a cost (priced upstream, or replayed from a log) keeps it.
    """

    __slots__ = ("pricer",)

    def __init__(self, prices: Pricer | PriceTable | str | PathLike[str]) -> None:
        self.pricer = as_pricer(prices)

    def process(self, event: Event) -> Event:
        """The event with its cost line; one that already carries a cost line is kept as is."""
        if event.cost is not None:
            return event
        return event.model_copy(update={"cost": self.pricer.price(event)})

    def __repr__(self) -> str:
        return f"Pricing({type(self.pricer).__name__})"
