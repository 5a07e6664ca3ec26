"""``spanledger report`` over a fleet's logs: the scan's groups priced exactly, per the chosen
grouping, and rendered as a table, JSON or CSV."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from spanledger.attribution.summary import AttributionFigures, ContextFigures, counted
from spanledger.costs import NOT_PRICED_STATUSES, CostCode, CostLine, CostStatus, plain
from spanledger.display import CELL_LIMIT, terminal_text
from spanledger.events import EmbeddingUsage, RerankUsage
from spanledger.fleet.layout import (
    FIGURE_LEGEND,
    PARTIAL_LEGEND,
    REPORT_SCHEMA_VERSION,
    REQUEST_CONTEXT_COLUMNS,
)
from spanledger.fleet.scan import CallGroup, Grouping, Scan
from spanledger.ledger.pricing import Ledger
from spanledger.ledger.report import AMOUNT_STATUSES, money, unrecorded_cost
from spanledger.ledger.totals import FIGURES, GroupTotal

_MICROSECONDS = Decimal(1_000_000)

__all__ = ["FleetReport", "amount_text", "price_scan"]


@dataclass
class FleetReport:
    """What ``spanledger report`` prints."""

    by: tuple[Grouping, ...]
    rows: dict[tuple[tuple[str, ...], str, str], GroupTotal] = field(default_factory=dict)
    unpriced_models: dict[tuple[str, str, str], int] = field(default_factory=dict)
    events: int = 0
    lines: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    attribution: AttributionFigures = field(default_factory=AttributionFigures)
    daily: dict[tuple[str, str, str, str], GroupTotal] = field(default_factory=dict)
    """By (UTC day, provider, status, currency), when the scan was split by day."""
    models: dict[tuple[str, str, str, str], GroupTotal] = field(default_factory=dict)
    """By (provider, model, status, currency), whatever the rows are grouped by."""
    malformed_models: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """Calls by (provider, model, figure) for each usage figure sent malformed."""
    duplicates: int = 0
    """Lines that repeated a call already counted (same call id), left out."""
    unreadable: tuple[str, ...] = ()
    """Paths skipped as unreadable (``--skip-unreadable``)."""

    @property
    def calls(self) -> int:
        return sum(row.calls for row in self.rows.values())

    def status_counts(self) -> dict[str, int]:
        """Calls per cost status, every status listed (zero where none)."""
        counts = {status.value: 0 for status in CostStatus}
        for (_, status, _), row in self.rows.items():
            counts[status] += row.calls
        return counts

    def spend(self) -> dict[str, Decimal]:
        """Known spend (priced, estimated, not billed) per currency, by currency name (the
        same order whatever order the log's groups came in)."""
        spend: dict[str, Decimal] = {}
        for (_, status, currency), row in self.rows.items():
            if status in AMOUNT_STATUSES and currency:
                spend[currency] = spend.get(currency, Decimal(0)) + row.amount
        return dict(sorted(spend.items()))

    def _sorted_rows(self) -> list[tuple[tuple[tuple[str, ...], str, str], GroupTotal]]:
        return sorted(self.rows.items())

    def to_json(self) -> dict[str, Any]:
        """The report as ``--json`` prints it: amounts as exact decimal strings."""
        return {
            "schema_version": REPORT_SCHEMA_VERSION,
            "events": self.calls,
            "by": list(self.by),
            "status_counts": self.status_counts(),
            "spend": {currency: plain(amount) for currency, amount in self.spend().items()},
            "rows": [
                {
                    **dict(zip(self.by, keys, strict=True)),
                    "status": status,
                    "currency": currency or None,
                    "calls": row.calls,
                    "amount": plain(row.amount) if status in AMOUNT_STATUSES else None,
                    **row.figures_json(),
                }
                for (keys, status, currency), row in self._sorted_rows()
            ],
            "unpriced_models": [
                {"provider": p, "model": m, "reason": r, "calls": n}
                for (p, m, r), n in sorted(self.unpriced_models.items())
            ],
            "attribution": self.attribution.to_json(),
            "lines_read": self.lines,
            "skipped_lines": dict(sorted(self.problems.items())),
            "duplicate_calls_dropped": self.duplicates,
            "unreadable_paths": list(self.unreadable),
        }

    def to_csv(self) -> str:
        """The report as ``--csv`` prints it: one row per group, status and currency. Grouped
        by request, each row also carries its request's context spend (``request_*``: the
        same on each of the request's rows; an empty amount is unknown, and why is said)."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        per_request = "request" in self.by
        writer.writerow(
            [
                *self.by,
                "status",
                "currency",
                "calls",
                "amount",
                *(name for figure in FIGURES for name in (figure, f"{figure}_calls")),
                *(REQUEST_CONTEXT_COLUMNS if per_request else ()),
            ]
        )
        contexts = {each.request_id: each for each in self.attribution.by_request or ()}
        at = self.by.index("request") if per_request else 0
        for (keys, status, currency), row in self._sorted_rows():
            amount = plain(row.amount) if status in AMOUNT_STATUSES else ""
            writer.writerow(
                [
                    *keys,
                    status,
                    currency,
                    row.calls,
                    amount,
                    *("" if value is None else value for value in row.figures_json().values()),
                    *(_context_cells(contexts.get(keys[at])) if per_request else ()),
                ]
            )
        return out.getvalue()

    def render(self) -> str:
        """The report as ``spanledger report`` prints it on a terminal."""
        lines = [counted(self.calls, "call")]
        lines.append("  ".join(f"{status}: {n}" for status, n in self.status_counts().items()))
        spend = self.spend()
        lines.append(
            "known spend: "
            + (
                ", ".join(
                    f"{money(amount)} {terminal_text(currency)}"
                    for currency, amount in spend.items()
                )
                or "none"
            )
        )
        lines.append("")
        rows = self._sorted_rows()
        shown = [
            (
                [terminal_text(_shown(key)) for key in keys],
                status,
                terminal_text(amount_text(status, currency, row.amount)),
                row,
            )
            for (keys, status, currency), row in rows
        ]
        widths = {  # each column as wide as its longest value, so long model names fit
            name: max([len(name), *(len(cells[i]) for cells, _, _, _ in shown)])
            for i, name in enumerate(self.by)
        }
        figure_widths = {
            name: max([width, *(len(row.figure_text(name)) for _, _, _, row in shown)])
            for name, width in zip(FIGURES, (12, 8, 12), strict=True)
        }
        header = " ".join(f"{name:<{widths[name]}}" for name in self.by)
        header += f" {'status':<11} {'calls':>8} {'amount':>18}"
        for name, title in zip(FIGURES, ("tokens", "units", "chars"), strict=True):
            header += f" {title:>{figure_widths[name]}}"
        lines.append(header.strip())
        partial = False
        for cells, status, amount, row in shown:
            keyed = " ".join(
                f"{cell:<{widths[name]}}" for name, cell in zip(self.by, cells, strict=True)
            )
            figures = ""
            for name in FIGURES:
                text = row.figure_text(name)
                partial = partial or text.endswith(")")
                figures += f" {text:>{figure_widths[name]}}"
            lines.append(f"{keyed} {status:<11} {row.calls:>8} {amount:>18}{figures}".rstrip())
        lines.append("")
        lines.append(FIGURE_LEGEND + (PARTIAL_LEGEND if partial else "") + ")")
        if self.duplicates:
            lines.append(
                f"{counted(self.duplicates, 'line')} repeated a call already counted "
                "(same call id): counted once"
            )
        if self.unpriced_models:
            lines.append("")
            lines.append("not priced (add or fix these in the price table):")
            for (provider, model, reason), calls in sorted(self.unpriced_models.items()):
                named = terminal_text(f"{provider}/{model}", 2 * CELL_LIMIT)
                lines.append(f"  {named}: {counted(calls, 'call')} ({reason})")
        lines.append("")
        lines.append(self.attribution.render())
        return "\n".join(lines)


NO_KEY = "(none)"
"""How the text report shows a group with no value (calls made outside any request)."""


def _shown(key: str) -> str:
    return key or NO_KEY


def _context_cells(figures: ContextFigures | None) -> list[str]:
    """A request's context spend as CSV cells: amounts, currency, and why they are unknown
    (cells left empty)."""
    if figures is None:
        return ["", "", "", "", "", "no attribution record"]
    data = figures.to_json()
    share = data["cited_token_share"]
    return [
        "" if share is None else repr(share),
        data["context_spend"] or "",
        data["cited_context_spend"] or "",
        data["unused_context_spend"] or "",
        data["currency"] or "",
        data["unknown_context_spend"] or "",
    ]


def amount_text(status: str, currency: str, amount: Decimal) -> str:
    """A row's amount as the report prints it: exact, with its currency, or ``unknown``."""
    if status not in AMOUNT_STATUSES:
        return "unknown"
    return f"{money(amount)} {currency}".strip()


def _add(totals: dict[Any, GroupTotal], key: Any, group: CallGroup, line: CostLine) -> None:
    """Count ``group``'s calls, amount and reported figures into ``totals[key]``."""
    total = totals.setdefault(key, GroupTotal())
    if line.amount is not None:
        total.amount += line.amount
    reranks = group.calls if group.operation == "rerank" else 0
    total.count(group.calls, group.figures(), reranks=reranks)


def price_scan(scan: Scan, by: Sequence[Grouping], ledger: Ledger | None) -> FleetReport:
    """Price each of the scan's groups (with ``ledger``, else from the cost line the log
    recorded) into the report's rows."""
    report = FleetReport(
        tuple(by), events=scan.events, lines=scan.lines, problems=dict(scan.problems)
    )
    report.attribution = scan.attribution
    report.duplicates = scan.duplicates
    for group in scan.groups:
        line = _priced(group, ledger)
        status, currency = line.status.value, line.currency or ""
        _add(report.rows, (group.keys, status, currency), group, line)
        _add(report.models, (group.provider, group.model, status, currency), group, line)
        if group.day is not None:
            _add(report.daily, (group.day, group.provider, status, currency), group, line)
        for figure in group.malformed:
            named_figure = (group.provider, group.model, figure)
            report.malformed_models[named_figure] = (
                report.malformed_models.get(named_figure, 0) + group.calls
            )
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
            usage = _embedding_usage(group)
    return ledger.price_calls(
        group.calls,
        group.provider,
        group.model,
        group.first_at,
        usage,
        outcome=group.outcome,
        failure=group.failure,
        kind=group.operation,
        malformed=group.malformed,
        billing=group.billing,
        response_model=group.response_model,
        documents=group.documents,
        seconds=Decimal(group.micros) / _MICROSECONDS,
    )


def _embedding_usage(group: CallGroup) -> EmbeddingUsage | None:
    """The group's summed embedding figures: tokens only where its calls reported them, so
    a group that reported only characters is not priced as if it had reported 0 tokens."""
    tokens = group.input_tokens if group.tokens_reported else None
    if tokens is None and group.billable_characters is None:
        return None
    return EmbeddingUsage(input_tokens=tokens, billable_characters=group.billable_characters)


def _recorded(group: CallGroup) -> CostLine:
    """The group's recorded cost line, times its calls (all share one amount); with none
    recorded, a failure the provider cannot have billed is ``not_billed`` (it needs no
    price), anything else unpriced."""
    if group.cost is None:
        return unrecorded_cost(
            group.operation, group.outcome == "failed", group.failure, group.billing
        )
    status, currency, code, amount = group.cost
    try:
        known = CostStatus(status) if status else CostStatus.UNPRICED
        reason = CostCode(code) if code else None
    except ValueError:  # not a cost line spanledger wrote: unpriced
        return unrecorded_cost(group.operation, False, group.failure, group.billing)
    total = Decimal(amount) * group.calls if amount is not None else None
    return CostLine(known, total, currency, None, reason)
