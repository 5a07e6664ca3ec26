"""Cost records: what one call or attempt cost, or why that cannot be said.

``amount`` is a ``Decimal`` or ``None``; ``None`` means unknown, never free. A cost line is
``priced`` (every used dimension had a rate), ``estimated`` (priced from usage reconstructed
for an attempt abandoned after sending), ``unpriced`` (no entry, an ambiguous entry, or a
missing rate), ``unmetered`` (the provider reported no usage; only a per-request rate can be
charged) or ``not_billed`` (the call failed where the provider bills nothing, or ran on a local
model that no vendor bills).

Pure records: this module imports nothing of spanledger (events carry a ``CostLine``; what
prices an event, ``Pricer``, lives in ``spanledger.ledger``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, PlainSerializer

__all__ = [
    "CHARGED_STATUSES",
    "KNOWN_STATUSES",
    "NOT_PRICED_STATUSES",
    "Amount",
    "CostCode",
    "CostLine",
    "CostStatus",
    "plain",
    "summed_cost",
]


class CostStatus(StrEnum):
    """How a cost line's amount was arrived at.

    ``priced``: from reported usage and a rate. ``estimated``: from usage spanledger
    reconstructed (an attempt abandoned after sending, a body that could not be used) or a
    vendor's documented billing rule. ``unpriced``: no entry, an ambiguous one, or a missing
    rate; the amount is ``None``. ``unmetered``: the provider reported no usage. ``not_billed``:
    a failure the provider bills nothing for, or a model nobody bills (a local one).
    """

    PRICED = "priced"
    ESTIMATED = "estimated"
    UNPRICED = "unpriced"
    UNMETERED = "unmetered"
    NOT_BILLED = "not_billed"


CHARGED_STATUSES = frozenset({CostStatus.PRICED, CostStatus.ESTIMATED})
"""Statuses whose amount is a charge (exporters render it as ``gen_ai.usage.cost``)."""
KNOWN_STATUSES = CHARGED_STATUSES | {CostStatus.NOT_BILLED}
"""Statuses whose amount is the whole cost of the call."""
NOT_PRICED_STATUSES = frozenset({CostStatus.UNPRICED, CostStatus.UNMETERED})
"""Statuses that are counted, logged and alerted on: the amount is not known."""


class CostCode(StrEnum):
    """A short, low-cardinality reason code, fit for a metric attribute."""

    NO_PRICE_ENTRY = "no_price_entry"
    PRICE_NOT_YET_VALID = "price_not_yet_valid"
    """The table has an entry for the model, but it applies only from a date after the call."""
    AMBIGUOUS_PRICE = "ambiguous_price"
    MISSING_RATE = "missing_rate"
    USAGE_NOT_REPORTED = "usage_not_reported"
    USAGE_MALFORMED = "usage_malformed"
    FAILED_UNBILLED = "failed_unbilled"
    NOT_ATTEMPTED = "not_attempted"
    LOCAL_MODEL = "local_model"
    """A local model (``billing == "local"``): no vendor bills it."""


def plain(amount: Decimal) -> str:
    """An amount as a plain decimal (``0.00000012``, never ``1.2E-7``), every digit it has: how
    the event log, the reports and the exports write money for people and programs to read."""
    return f"{amount:f}"


MAX_AMOUNT_DIGITS = 15
"""An amount's integer digits at most (a quadrillion of a currency): past that it is no cost."""
MAX_AMOUNT_DECIMALS = 60
"""An amount's decimal places at most: finer than any rate divides."""


def _sound_amount(value: Decimal) -> Decimal:
    """An amount read from a log or built by hand: finite, not negative, and of a size money
    has, so that no reader sums a NaN, a credit nobody gave or a billion-digit number."""
    if not value.is_finite() or value < 0:
        raise ValueError("an amount is a finite decimal that is not negative")
    exponent = value.as_tuple().exponent
    too_fine = isinstance(exponent, int) and exponent < -MAX_AMOUNT_DECIMALS
    if value and (value.adjusted() >= MAX_AMOUNT_DIGITS or too_fine):
        raise ValueError("an amount has at most 15 integer digits and 60 decimal places")
    return value


Amount = Annotated[
    Decimal,
    AfterValidator(_sound_amount),
    PlainSerializer(plain, return_type=str, when_used="json"),
]
"""A ``Decimal`` amount that JSON gets as a plain decimal string; validated as sound."""


@dataclass(slots=True)
class CostLine:
    """The cost of one call; ``reason`` says which rate or figure is missing, when one is.

    A value: treat it as read-only. It is a plain slotted dataclass (pydantic validates and
    serializes it inside events) because the ledger makes one per event, and a frozen
    dataclass costs several times more to build.
    """

    status: CostStatus
    amount: Amount | None = None
    currency: str | None = None
    reason: str | None = None
    code: CostCode | None = None
    dimensions: dict[str, Amount] = field(default_factory=dict)
    price_entry: str | None = None

    @property
    def is_known(self) -> bool:
        """Whether ``amount`` is the whole cost (priced, estimated or not billed)."""
        return self.status in KNOWN_STATUSES


def summed_cost(earlier: CostLine | None, later: CostLine | None) -> CostLine | None:
    """What two attempts of one logical call were charged together.

    A retried call is one span (one observation), so its cost must be what the whole logical
    call was charged: backends add up ``gen_ai.usage.cost`` (and Langfuse its cost details) per
    trace, and only the sum keeps their totals equal to the ledger's, which prices every
    attempt. The last attempt alone would lose an abandoned attempt that may have been billed
    (a timeout carries an estimated cost); a 429 is ``not_billed`` and adds nothing. Known
    amounts add up (``estimated`` if either was, else ``priced`` if either was); a total that
    cannot be stated is not stated: an attempt that is not priced (``unpriced``,
    ``unmetered``) makes the total that line, one with no cost line at all (pricing failed)
    makes it ``None``, and amounts in two currencies make it ``unpriced``.
    """
    if earlier is None or later is None:
        return None
    if later.status not in KNOWN_STATUSES or later.amount is None:
        return later
    if earlier.status not in KNOWN_STATUSES or earlier.amount is None:
        return earlier
    currency = later.currency or earlier.currency
    if earlier.currency and earlier.currency != currency:
        return CostLine(
            status=CostStatus.UNPRICED,
            code=CostCode.AMBIGUOUS_PRICE,
            reason="the attempts were priced in different currencies",
        )
    statuses = {earlier.status, later.status}
    if CostStatus.ESTIMATED in statuses:
        status = CostStatus.ESTIMATED
    elif CostStatus.PRICED in statuses:
        status = CostStatus.PRICED
    else:
        status = CostStatus.NOT_BILLED
    named = later if later.status is status else earlier
    dimensions = dict(earlier.dimensions)
    for name, amount in later.dimensions.items():
        dimensions[name] = dimensions[name] + amount if name in dimensions else amount
    return CostLine(
        status=status,
        amount=earlier.amount + later.amount,
        currency=currency,
        reason=named.reason,
        code=named.code,
        dimensions=dimensions,
        price_entry=later.price_entry or earlier.price_entry,
    )
