"""``spanledger report`` over a fleet's logs: the scan's groups priced exactly, per the chosen
grouping, and rendered as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from spanledger.costs import KNOWN_STATUSES, NOT_PRICED_STATUSES, CostCode, CostLine, CostStatus
from spanledger.events import EmbeddingUsage, RerankUsage
from spanledger.fleet.scan import AttributionFigures, CallGroup, Grouping, Scan
from spanledger.ledger.pricing import Ledger

__all__ = ["FleetReport", "price_scan"]

_NOT_PRICED = CostLine(
    status=CostStatus.UNPRICED,
    code=CostCode.NO_PRICE_ENTRY,
    reason="no price table was given and the log holds no cost line",
)
_AMOUNT_STATUSES = frozenset(status.value for status in KNOWN_STATUSES)


@dataclass
class Row:
    """One row of the report: calls of one group, status and currency."""

    calls: int = 0
    amount: Decimal = Decimal(0)
    input_tokens: int = 0
    search_units: int = 0


@dataclass
class FleetReport:
    """What ``spanledger report`` prints."""

    by: tuple[Grouping, ...]
    rows: dict[tuple[tuple[str, ...], str, str], Row] = field(default_factory=dict)
    unpriced_models: dict[tuple[str, str, str], int] = field(default_factory=dict)
    events: int = 0
    lines: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    attribution: AttributionFigures = field(default_factory=AttributionFigures)

    @property
    def calls(self) -> int:
        return sum(row.calls for row in self.rows.values())

    def status_counts(self) -> dict[str, int]:
        counts = {status.value: 0 for status in CostStatus}
        for (_, status, _), row in self.rows.items():
            counts[status] += row.calls
        return counts

    def spend(self) -> dict[str, Decimal]:
        """Known spend (priced, estimated, not billed) per currency."""
        spend: dict[str, Decimal] = {}
        for (_, status, currency), row in self.rows.items():
            if status in _AMOUNT_STATUSES and currency:
                spend[currency] = spend.get(currency, Decimal(0)) + row.amount
        return spend

    def _sorted_rows(self) -> list[tuple[tuple[tuple[str, ...], str, str], Row]]:
        return sorted(self.rows.items())

    def to_json(self) -> dict[str, Any]:
        return {
            "events": self.calls,
            "by": list(self.by),
            "status_counts": self.status_counts(),
            "spend": {currency: str(amount) for currency, amount in self.spend().items()},
            "rows": [
                {
                    **dict(zip(self.by, keys, strict=True)),
                    "status": status,
                    "currency": currency or None,
                    "calls": row.calls,
                    "amount": str(row.amount) if status in _AMOUNT_STATUSES else None,
                    "input_tokens": row.input_tokens,
                    "search_units": row.search_units,
                }
                for (keys, status, currency), row in self._sorted_rows()
            ],
            "unpriced_models": [
                {"provider": p, "model": m, "reason": r, "calls": n}
                for (p, m, r), n in sorted(self.unpriced_models.items())
            ],
            "attribution": _attribution_json(self.attribution),
            "lines_read": self.lines,
            "skipped_lines": dict(sorted(self.problems.items())),
        }

    def to_csv(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(
            [*self.by, "status", "currency", "calls", "amount", "input_tokens", "search_units"]
        )
        for (keys, status, currency), row in self._sorted_rows():
            amount = str(row.amount) if status in _AMOUNT_STATUSES else ""
            writer.writerow(
                [*keys, status, currency, row.calls, amount, row.input_tokens, row.search_units]
            )
        return out.getvalue()

    def render(self) -> str:
        lines = [f"{self.calls} calls"]
        lines.append("  ".join(f"{status}: {n}" for status, n in self.status_counts().items()))
        spend = self.spend()
        lines.append(
            "known spend: "
            + (
                ", ".join(f"{_money(amount)} {currency}" for currency, amount in spend.items())
                or "none"
            )
        )
        lines.append("")
        widths = {"provider": 10, "model": 36, "day": 10, "request": 24}
        header = " ".join(f"{name:<{widths[name]}}" for name in self.by)
        header += f" {'status':<11} {'calls':>8} {'amount':>18} {'tokens':>12} {'units':>8}"
        lines.append(header.strip())
        for (keys, status, currency), row in self._sorted_rows():
            amount = (
                f"{_money(row.amount)} {currency}".strip()
                if status in _AMOUNT_STATUSES
                else "unknown"
            )
            cells = " ".join(
                f"{key:<{widths[name]}}" for name, key in zip(self.by, keys, strict=True)
            )
            lines.append(
                f"{cells} {status:<11} {row.calls:>8} {amount:>18} {row.input_tokens:>12} "
                f"{row.search_units:>8}".strip()
            )
        if self.unpriced_models:
            lines.append("")
            lines.append("not priced (add these to the price table):")
            for (provider, model, reason), calls in sorted(self.unpriced_models.items()):
                lines.append(f"  {provider}/{model}: {calls} calls ({reason})")
        lines.append("")
        lines.append(_attribution_text(self.attribution))
        return "\n".join(lines)


def price_scan(scan: Scan, by: Sequence[Grouping], ledger: Ledger | None) -> FleetReport:
    """Price each of the scan's groups (with ``ledger``, else from the cost line the log
    recorded) into the report's rows."""
    report = FleetReport(
        tuple(by), events=scan.events, lines=scan.lines, problems=dict(scan.problems)
    )
    report.attribution = scan.attribution
    for group in scan.groups:
        line = _priced(group, ledger)
        key = (group.keys, line.status.value, line.currency or "")
        row = report.rows.setdefault(key, Row())
        row.calls += group.calls
        if line.amount is not None:
            row.amount += line.amount
        if group.outcome == "succeeded":  # billed figures: what the provider reported
            row.input_tokens += group.input_tokens
            row.search_units += group.search_units
        if line.status in NOT_PRICED_STATUSES:
            reason = line.code.value if line.code is not None else line.status.value
            named = (group.provider, group.model, reason)
            report.unpriced_models[named] = report.unpriced_models.get(named, 0) + group.calls
    return report


def _priced(group: CallGroup, ledger: Ledger | None) -> CostLine:
    if ledger is None:
        return _recorded(group)
    usage: EmbeddingUsage | RerankUsage | None = None
    if group.usage_reported and group.outcome != "failed":
        if group.operation == "rerank":
            usage = RerankUsage(input_tokens=group.input_tokens, search_units=group.search_units)
        else:
            usage = EmbeddingUsage(input_tokens=group.input_tokens)
    return ledger.price_calls(
        group.calls,
        group.provider,
        group.model,
        group.first_at,
        usage,
        outcome=group.outcome,
        failure=group.failure,
        kind=group.operation,
    )


def _recorded(group: CallGroup) -> CostLine:
    """The group's recorded cost line, times its calls (all share one amount)."""
    if group.cost is None:
        return _NOT_PRICED
    status, currency, code, amount = group.cost
    try:
        known = CostStatus(status) if status else CostStatus.UNPRICED
        reason = CostCode(code) if code else None
    except ValueError:
        return _NOT_PRICED
    total = Decimal(amount) * group.calls if amount is not None else None
    return CostLine(known, total, currency, None, reason)


_LISTED = 20


def _some(requests: Sequence[str]) -> str:
    """The first request ids, and how many more there are (a fleet's list can be long)."""
    shown = ", ".join(requests[:_LISTED])
    more = len(requests) - _LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _money(amount: Decimal) -> str:
    """The exact amount, never rounded away: a priced call must not print as free."""
    return f"{amount.normalize():f}" if amount else "0"


def _attribution_json(figures: AttributionFigures) -> dict[str, Any]:
    per_token, currency = _per_cited_token(figures)
    return {
        "requests": figures.requests,
        "requests_with_share": figures.with_share,
        "mean_cited_token_share": figures.mean_share,
        "median_cited_token_share": figures.median_share,
        "distribution": figures.bands,
        "spend_per_cited_token": str(per_token) if per_token is not None else None,
        "currency": currency,
        "requests_with_unknown_spend": figures.unknown_spend,
        "rendered_context_earned_nothing": list(figures.earned_nothing),
        "unreconcilable_requests": list(figures.unreconcilable),
    }


def _per_cited_token(figures: AttributionFigures) -> tuple[Decimal | None, str | None]:
    if figures.cited_tokens == 0 or len(figures.currencies) > 1:
        return None, None
    currency = figures.currencies[0] if figures.currencies else None
    return figures.spend / figures.cited_tokens, currency


def _attribution_text(figures: AttributionFigures) -> str:
    if not figures.requests:
        return "attribution: no request reports in the log"
    lines = [
        f"attribution over {figures.requests} requests ({figures.with_share} rendered context)"
    ]
    if figures.mean_share is not None and figures.median_share is not None:
        lines.append(
            f"  cited token share: mean {figures.mean_share:.1%}, median {figures.median_share:.1%}"
        )
    else:
        lines.append("  cited token share: n/a (nothing rendered)")
    lines.append(
        "  distribution: " + ", ".join(f"{band}: {n}" for band, n in figures.bands.items())
    )
    per_token, currency = _per_cited_token(figures)
    left_out = figures.unknown_spend
    if per_token is not None:
        note = f" ({left_out} requests with unknown spend left out)" if left_out else ""
        lines.append(f"  spend per cited token: {per_token:.10f} {currency or ''}{note}")
    else:
        why = f"{left_out} requests with unknown spend" if left_out else "nothing was cited"
        lines.append(f"  spend per cited token: n/a ({why})")
    if figures.earned_nothing:
        lines.append("  rendered context earned nothing in: " + _some(figures.earned_nothing))
    if figures.unreconcilable:
        lines.append("  not reconcilable: " + _some(figures.unreconcilable))
    return "\n".join(lines)
