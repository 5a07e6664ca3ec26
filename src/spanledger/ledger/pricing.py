"""The ledger: prices each event (or fallback attempt) from a price table, in ``Decimal``.

A used dimension with no rate, a model with no entry, or an ambiguous entry is ``unpriced``
with the missing piece named; usage the provider did not report is ``unmetered``; an explicit
``0`` rate is free. A model with no entry of its own is looked up by the model the response
reported (an Azure deployment name answers with the model it serves). A rerank billed per query
by the vendor's documented rule, whose API reports no usage, is ``estimated`` from that rule; a
call on a local model, which no vendor bills, is never unpriced or unmetered: priced by the
user's own entry when it can be, else ``not_billed``.

Each unpriced or unmetered (provider, model, reason) is logged once per process so a gap in the
price table is noticed; past ``WARNED_KEYS_LIMIT`` distinct keys the rest are counted instead
(``suppressed_warnings()``), so caller-chosen model names cannot grow the process's memory or
its log without bound.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from datetime import datetime
from decimal import Decimal
from os import PathLike
from typing import Literal

from spanledger import _forksafe
from spanledger._logs import get_logger
from spanledger.costs import NOT_PRICED_STATUSES, CostCode, CostLine, CostStatus
from spanledger.estimates import SEARCH_UNIT_DOCUMENTS, may_have_billed, rule_search_units
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
    "LOCAL_BILLING",
    "RULE_BILLING",
    "WARNED_KEYS_LIMIT",
    "Ledger",
    "compute_seconds",
    "local_model",
    "price_by_rule",
    "price_usage",
    "suppressed_warnings",
    "unbilled_failure",
]

WARNED_KEYS_LIMIT = 1000
"""Distinct (provider, model, reason) keys that get their own ``usage_not_priced`` warning per
process. Past it, one ``usage_not_priced_suppressed`` warning says so and further unwarned calls
are only counted (``suppressed_warnings()``); the ``spanledger.cost.unpriced`` metric still
counts every call."""

LOCAL_BILLING = "local"
"""An event's ``billing`` for a local model, which no vendor bills (Ollama)."""
RULE_BILLING = "queries"
"""An event's ``billing`` for a rerank billed per query of up to 100 documents, by the vendor's
documented rule, whose API reports no usage (AWS Bedrock Rerank, Google's Vertex ranking API)."""
_ABANDONED = "usage estimated for an attempt abandoned after sending"
_BY_RULE = (
    "search units from the vendor's documented rule, one per query of up to "
    f"{SEARCH_UNIT_DOCUMENTS} documents (ceil(documents / {SEARCH_UNIT_DOCUMENTS})): "
    "the API reports no usage"
)

_log = get_logger("spanledger.ledger")
_warned: set[tuple[str, str, str]] = set()
_suppressed = 0
_ZERO = Decimal(0)
_MICROSECONDS = Decimal(1_000_000)
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
    response_model: str | None = None,
    basis: str = _ABANDONED,
    seconds: Decimal | None = None,
) -> CostLine:
    """Price one billed call's usage (``None``: the provider reported none; ``malformed``
    names the figures it sent that were not counts). ``response_model``: the model the
    response reported, looked up when no entry matches ``model`` (which is then said in the
    reason); ``basis``: why the usage of an ``estimated`` line is an estimate; ``seconds``:
    the compute time an entry's ``per_compute_second`` rate prices (see ``compute_seconds``).
    An entry with that rate bills compute: a token or search-unit figure it has no rate for
    is then recorded, not charged. Tokens and billable characters are two measures of one
    input: an entry with a rate for one (``input_per_mtok``, ``input_per_kchar``) records the
    other, and an embedding whose provider did not report the measure the entry bills by is
    unmetered."""
    lookup = table.lookup(provider, model, at)
    fallback: str | None = None
    if (
        lookup.entry is None
        and not lookup.ambiguous
        and response_model is not None
        and response_model != model
    ):
        fallback = (
            f"no price entry for {provider}/{model}, so the model the response reported, "
            f"{response_model}, was looked up"
        )
        lookup = table.lookup(provider, response_model, at)
    entry = lookup.entry
    if entry is None:
        if lookup.ambiguous:
            labels = ", ".join(candidate.label for candidate in lookup.ambiguous)
            return CostLine(
                status=CostStatus.UNPRICED,
                code=CostCode.AMBIGUOUS_PRICE,
                reason=_noting(
                    f"equally specific entries with different rates match: {labels}", fallback
                ),
            )
        later = _later_entry(table, provider, (model, response_model if fallback else None), at)
        if later is not None:
            return CostLine(
                status=CostStatus.UNPRICED,
                code=CostCode.PRICE_NOT_YET_VALID,
                reason=f"the price entry {later.label} applies only from "
                f"{later.valid_from.isoformat() if later.valid_from else '?'}, after the call "
                f"({at.isoformat()}); give the table an entry for the time before it",
            )
        return CostLine(
            status=CostStatus.UNPRICED,
            code=CostCode.NO_PRICE_ENTRY,
            reason=f"no price entry for {provider}/{model}"
            + (f" nor for the model the response reported, {response_model}" if fallback else ""),
        )
    per_request = entry.per_request
    by_compute = entry.per_compute_second is not None
    if by_compute and seconds is None:
        return CostLine(
            status=CostStatus.UNMETERED,
            amount=per_request,
            currency=entry.currency if per_request is not None else None,
            code=CostCode.USAGE_NOT_REPORTED,
            reason=_noting(
                "the call's compute time is unknown; only a per-request rate can be charged",
                fallback,
            ),
            dimensions={"requests": per_request} if per_request is not None else {},
            price_entry=entry.label,
        )
    if usage is None:
        if (
            entry.input_per_mtok is None
            and entry.input_per_kchar is None
            and entry.per_search_unit is None
        ):
            charged = {"requests": per_request} if per_request is not None else {}
            return CostLine(
                CostStatus.PRICED,
                _compute(charged, entry, seconds, per_request),
                entry.currency,
                fallback,
                dimensions=charged,
                price_entry=entry.label,
            )
        return CostLine(
            status=CostStatus.UNMETERED,
            amount=per_request,
            currency=entry.currency if per_request is not None else None,
            code=CostCode.USAGE_MALFORMED if malformed else CostCode.USAGE_NOT_REPORTED,
            reason=_noting(
                (
                    f"the provider's usage ({', '.join(malformed)}) was not a count"
                    if malformed
                    else "the provider reported no usage"
                )
                + "; only a per-request rate can be charged",
                fallback,
            ),
            dimensions={"requests": per_request} if per_request is not None else {},
            price_entry=entry.label,
        )
    characters = usage.billable_characters if type(usage) is EmbeddingUsage else None
    if type(usage) is EmbeddingUsage:
        unreported = _unreported_measure(entry, usage.input_tokens, characters)
        if unreported is not None:
            return _unmetered_measure(entry, unreported, malformed, fallback)
    dimensions: dict[str, Decimal] = {}
    amount: Decimal | None = None
    if per_request is not None:
        dimensions["requests"] = amount = per_request
    amount = _compute(dimensions, entry, seconds, amount)
    # an input measure the entry has no rate for is recorded, not charged, when the entry
    # bills the call another way (compute, or the other measure of the same input)
    tokens = usage.input_tokens
    if tokens and not (entry.per_token is None and (by_compute or entry.per_character is not None)):
        if entry.per_token is None:
            return _missing_rate(entry, "input_per_mtok", tokens, "input_tokens", fallback)
        dimensions["input_tokens"] = cost = entry.per_token * tokens
        amount = cost if amount is None else amount + cost
    if characters and not (
        entry.per_character is None and (by_compute or entry.per_token is not None)
    ):
        if entry.per_character is None:
            return _missing_rate(
                entry, "input_per_kchar", characters, "billable_characters", fallback
            )
        dimensions["billable_characters"] = cost = entry.per_character * characters
        amount = cost if amount is None else amount + cost
    units = usage.search_units if type(usage) is RerankUsage else None
    if units and not (by_compute and entry.per_search_unit is None):
        if entry.per_search_unit is None:
            return _missing_rate(entry, "per_search_unit", units, "search_units", fallback)
        dimensions["search_units"] = cost = entry.per_search_unit * units
        amount = cost if amount is None else amount + cost
    if amount is None:
        amount = _ZERO
    if estimated:
        return CostLine(
            CostStatus.ESTIMATED,
            amount,
            entry.currency,
            _noting(basis, fallback),
            dimensions=dimensions,
            price_entry=entry.label,
        )
    return CostLine(
        CostStatus.PRICED, amount, entry.currency, fallback, None, dimensions, entry.label
    )


def _later_entry(
    table: PriceTable, provider: str, models: tuple[str | None, ...], at: datetime
) -> PriceEntry | None:
    """The earliest entry for one of ``models`` that applies only from after ``at``, if any (a
    call the table has no entry for at its time, but does have one for later)."""
    later = [
        entry
        for entry in table.entries
        if entry.valid_from is not None
        and at < entry.valid_from
        and any(model is not None and entry.matches(provider, model) for model in models)
    ]
    return min(later, key=lambda entry: entry.valid_from or at, default=None)


def compute_seconds(latency_ms: float) -> Decimal:
    """A call's compute time for a ``per_compute_second`` rate: its latency in whole
    microseconds (rounded down), exactly as ``spanledger report`` sums it over a log."""
    return Decimal(math.floor(latency_ms * 1000)) / _MICROSECONDS


def _compute(
    dimensions: dict[str, Decimal],
    entry: PriceEntry,
    seconds: Decimal | None,
    amount: Decimal | None,
) -> Decimal | None:
    """``amount`` plus the entry's compute charge for ``seconds``, noted in ``dimensions``."""
    rate = entry.per_compute_second
    if rate is None or seconds is None:
        return amount
    dimensions["compute_seconds"] = cost = rate * seconds
    return cost if amount is None else amount + cost


def _noting(reason: str, fallback: str | None) -> str:
    return reason if fallback is None else f"{reason}; {fallback}"


_MEASURES = (("input_per_mtok", "input_tokens"), ("input_per_kchar", "billable_characters"))
"""The rates an embedding's input is billed by, each with the figure it prices."""


def _unreported_measure(
    entry: PriceEntry, tokens: int | None, characters: int | None
) -> tuple[str, str] | None:
    """The (rate, figure) of ``entry``'s that an embedding's usage lacks the figure for."""
    for (rate, figure), value in zip(_MEASURES, (tokens, characters), strict=True):
        if value is None and getattr(entry, rate) is not None:
            return rate, figure
    return None


def _unmetered_measure(
    entry: PriceEntry, measure: tuple[str, str], malformed: Sequence[str], fallback: str | None
) -> CostLine:
    """An embedding whose provider did not report (or sent malformed) the figure ``entry``
    bills by: only a per-request rate can be charged."""
    rate, figure = measure
    sent_bad = figure in malformed
    per_request = entry.per_request
    return CostLine(
        status=CostStatus.UNMETERED,
        amount=per_request,
        currency=entry.currency if per_request is not None else None,
        code=CostCode.USAGE_MALFORMED if sent_bad else CostCode.USAGE_NOT_REPORTED,
        reason=_noting(
            f"{entry.label} bills by {rate}, but the provider's {figure} "
            + ("was not a count" if sent_bad else "was not reported")
            + "; only a per-request rate can be charged",
            fallback,
        ),
        dimensions={"requests": per_request} if per_request is not None else {},
        price_entry=entry.label,
    )


def _missing_rate(
    entry: PriceEntry, rate: str, count: int, figure: str, fallback: str | None
) -> CostLine:
    return CostLine(
        status=CostStatus.UNPRICED,
        currency=entry.currency,
        code=CostCode.MISSING_RATE,
        reason=_noting(f"no {rate} rate in {entry.label} for {count} {figure}", fallback),
        price_entry=entry.label,
    )


def price_by_rule(
    table: PriceTable,
    provider: str,
    model: str,
    at: datetime,
    documents: int,
    *,
    calls: int = 1,
    response_model: str | None = None,
) -> CostLine:
    """Price ``calls`` reranks of ``documents`` documents each, billed per query by the
    vendor's documented rule (``rule_search_units``) by an API that reports no usage: an
    estimate, never a reported figure."""
    usage = RerankUsage(search_units=rule_search_units(documents) * calls)
    return price_usage(
        table,
        provider,
        model,
        at,
        usage,
        estimated=True,
        response_model=response_model,
        basis=_BY_RULE,
    )


def local_model(line: CostLine) -> CostLine:
    """The line of a call on a local model (``billing == "local"``), which no vendor bills:
    the line as it is when the user's own entry prices it, else ``not_billed`` (code
    ``LOCAL_MODEL``) with the reason. Never unpriced or unmetered, so never alerted on."""
    if line.status not in NOT_PRICED_STATUSES:
        return line
    if line.code is CostCode.NO_PRICE_ENTRY:
        reason = (
            f"no vendor bills a local model, and the table has no entry of yours ({line.reason})"
        )
    elif line.code is CostCode.USAGE_NOT_REPORTED or line.code is CostCode.USAGE_MALFORMED:
        malformed = (
            " (the figures it sent were not counts)"
            if line.code is CostCode.USAGE_MALFORMED
            else ""
        )
        reason = (
            f"no vendor bills a local model; your rate in {line.price_entry} could not be "
            f"applied because no usage was reported{malformed}"
        )
    else:
        reason = f"no vendor bills a local model; your entry could not price it ({line.reason})"
    return CostLine(
        status=CostStatus.NOT_BILLED,
        amount=Decimal(0),
        reason=reason,
        code=CostCode.LOCAL_MODEL,
        price_entry=line.price_entry,
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
        billing: str | None = None,
        response_model: str | None = None,
        documents: int | None = None,
        seconds: Decimal | None = None,
    ) -> CostLine:
        """The cost of ``calls`` calls that price alike (one provider, model and outcome, started
        within one validity window of the table, with the same figures present), ``usage``
        their summed figures. Pricing is linear in usage, so this is exactly the sum of pricing
        each call: ``spanledger report`` prices a log's groups this way. ``failure``: the
        failed calls' category, error type and status code; ``malformed``: the usage figures
        they sent that were not counts; ``billing`` and ``response_model``: the events' own;
        ``documents``: the document count each of them sent, for reranks billed by rule (the
        rule rounds up per call, so such calls price alike only at one document count);
        ``seconds``: the succeeded calls' summed ``compute_seconds``."""
        if outcome == "failed":
            unbilled = unbilled_failure(kind, failure)
            if unbilled is not None:
                return unbilled
            line = price_usage(self.prices, provider, model, at, None)
        elif (
            outcome == "succeeded"
            and usage is None
            and billing == RULE_BILLING
            and kind == "rerank"
            and documents is not None
        ):
            line = price_by_rule(
                self.prices,
                provider,
                model,
                at,
                documents,
                calls=calls,
                response_model=response_model,
            )
        else:
            line = price_usage(
                self.prices,
                provider,
                model,
                at,
                usage,
                estimated=outcome == "estimated",
                malformed=malformed,
                response_model=response_model if outcome == "succeeded" else None,
                seconds=seconds if outcome == "succeeded" else None,
            )
        if billing == LOCAL_BILLING:
            line = local_model(line)
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
        if type(event) is RerankEvent and event.usage is None and event.billing == RULE_BILLING:
            line = price_by_rule(
                self.prices,
                event.provider,
                event.model,
                event.started_at,
                event.document_count,
                response_model=event.response_model,
            )
        elif isinstance(event, _SUCCESS):
            line = price_usage(
                self.prices,
                event.provider,
                event.model,
                event.started_at,
                event.usage,
                malformed=event.malformed_usage,
                response_model=event.response_model,
                seconds=compute_seconds(event.latency_ms),
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
        if event.billing == LOCAL_BILLING:
            line = local_model(line)
        if self._warn and line.status in NOT_PRICED_STATUSES:
            _warn_once(event.provider, event.model, line)
        return line
