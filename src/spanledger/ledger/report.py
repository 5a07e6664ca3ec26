"""The spend report over an event log: per provider and model, by cost status."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from spanledger.costs import (
    KNOWN_STATUSES,
    NOT_PRICED_STATUSES,
    CostCode,
    CostLine,
    CostStatus,
    plain,
)
from spanledger.events import EmbeddingFailedEvent, Event, RerankFailedEvent
from spanledger.ledger.pricing import LOCAL_BILLING, Ledger, local_model, unbilled_failure
from spanledger.ledger.totals import Totals

__all__ = ["AMOUNT_STATUSES", "SpendReport", "build_spend_report", "money", "unrecorded_cost"]

_NOT_PRICED = CostLine(
    status=CostStatus.UNPRICED,
    code=CostCode.NO_PRICE_ENTRY,
    reason="no price table was given and the log holds no cost line",
)


@dataclass
class SpendReport:
    """What ``spanledger report`` prints, also available as JSON."""

    totals: Totals
    events: int = 0
    unpriced_models: dict[tuple[str, str, str], int] = field(default_factory=dict)

    def status_counts(self) -> dict[str, int]:
        """Calls per cost status, every status listed (zero where none)."""
        return {status.value: self.totals.count(status) for status in CostStatus}

    def to_json(self) -> dict[str, Any]:
        """The report as JSON-ready values, amounts as exact decimal strings."""
        rows = []
        for (provider, model, status, currency), group in sorted(
            self.totals.by("provider", "model", "status", "currency").items()
        ):
            rows.append(
                {
                    "provider": provider,
                    "model": model,
                    "status": status,
                    "currency": currency or None,
                    "calls": group.calls,
                    "amount": plain(group.amount) if status in AMOUNT_STATUSES else None,
                    **group.figures_json(),
                }
            )
        return {
            "events": self.events,
            "status_counts": self.status_counts(),
            "spend": {currency: plain(amount) for currency, amount in self.totals.spend().items()},
            "rows": rows,
            "unpriced_models": [
                {"provider": p, "model": m, "reason": r, "calls": n}
                for (p, m, r), n in sorted(self.unpriced_models.items())
            ],
        }

    def render(self) -> str:
        """The report as the text ``spanledger report`` prints."""
        lines = [f"{self.events} calls"]
        lines.append(
            "  ".join(f"{status}: {count}" for status, count in self.status_counts().items())
        )
        spend = self.totals.spend()
        lines.append(
            "known spend: "
            + (", ".join(f"{amount:f} {currency}" for currency, amount in spend.items()) or "none")
        )
        lines.append("")
        header = f"{'provider':<10} {'model':<36} {'status':<11} {'calls':>6} {'amount':>18} "
        header += f"{'tokens':>10} {'units':>7} {'chars':>10}"
        lines.append(header)
        for (provider, model, status, currency), group in sorted(
            self.totals.by("provider", "model", "status", "currency").items()
        ):
            amount = (
                f"{money(group.amount)} {currency}".strip()
                if status in AMOUNT_STATUSES
                else "unknown"
            )
            lines.append(
                f"{provider:<10} {model:<36} {status:<11} {group.calls:>6} {amount:>18} "
                f"{group.figure_text('input_tokens'):>10} {group.figure_text('search_units'):>7} "
                f"{group.figure_text('billable_characters'):>10}"
            )
        if self.unpriced_models:
            lines.append("")
            lines.append("not priced (add these to the price table):")
            for (provider, model, reason), calls in sorted(self.unpriced_models.items()):
                lines.append(f"  {provider}/{model}: {calls} calls ({reason})")
        return "\n".join(lines)


AMOUNT_STATUSES = frozenset(status.value for status in KNOWN_STATUSES)
"""The statuses whose amount is the whole cost (priced, estimated, not billed)."""


def money(amount: Decimal) -> str:
    """The exact amount, never rounded away: a priced call must not print as free."""
    return f"{amount.normalize():f}" if amount else "0"


def unrecorded_cost(
    kind: str,
    failed: bool,
    failure: tuple[str | None, str | None, int | None],
    billing: str | None = None,
) -> CostLine:
    """The line of calls the log holds no cost for: ``not_billed`` when they ``failed`` (with
    nothing estimated) where the provider bills nothing, or ran on a local model (``billing``),
    since they need no price; else unpriced."""
    line = (unbilled_failure(kind, failure) if failed else None) or _NOT_PRICED
    return local_model(line) if billing == LOCAL_BILLING else line


def _unpriced(event: Event) -> CostLine:
    if isinstance(event, EmbeddingFailedEvent | RerankFailedEvent):
        kind = "embedding" if isinstance(event, EmbeddingFailedEvent) else "rerank"
        failure = (event.error_category.value, event.error_type, event.status_code)
        return unrecorded_cost(kind, event.estimated_usage is None, failure, event.billing)
    return local_model(_NOT_PRICED) if event.billing == LOCAL_BILLING else _NOT_PRICED


def build_spend_report(events: Iterable[Event], ledger: Ledger | None = None) -> SpendReport:
    """Price each event with ``ledger`` (else use the cost line the log recorded) and total."""
    report = SpendReport(Totals())
    for event in events:
        line = ledger.price(event) if ledger is not None else event.cost or _unpriced(event)
        report.totals.add(event, line)
        report.events += 1
        if line.status in NOT_PRICED_STATUSES:
            reason = line.code.value if line.code is not None else line.status.value
            key = (event.provider, event.model, reason)
            report.unpriced_models[key] = report.unpriced_models.get(key, 0) + 1
    return report
