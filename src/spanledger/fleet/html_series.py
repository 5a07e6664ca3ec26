"""The figures of ``spanledger report --html``'s charts, taken from the priced report: what
each chart plots, with its exact labels, already cut to a size a page can carry.

Pure data, no charting library: a chart is categories, series of values aligned to them, and
for each value the exact text the text report would print (money as its Decimal string and
currency). Every series of money is in one currency. Long lists are capped (the latest days,
the models that matter most, the rest summed into one "other" bar) and the chart says so.

Names from the log stay whole here (they are what the figures are grouped by); the charts
and the page cut and escape them as they show them. Only a currency named inside a title of
ours is cut here, to ``LABEL_LIMIT``, so the title still reads as one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal

from spanledger.attribution.summary import counted
from spanledger.costs import CostStatus
from spanledger.display import LABEL_LIMIT, page_text
from spanledger.fleet.report import FleetReport
from spanledger.ledger.report import AMOUNT_STATUSES, money

__all__ = [
    "MAX_DAYS",
    "MAX_MODELS",
    "MAX_STACKED",
    "Chart",
    "Series",
    "report_charts",
]

MAX_DAYS = 92
"""Days a chart by day shows: the latest ones."""
MAX_MODELS = 15
"""Bars a chart by model shows; the rest are summed into one."""
MAX_STACKED = 8
"""Series a stacked chart shows; the rest are summed into one."""


@dataclass(frozen=True)
class Series:
    """One series: a value per category (``None``: nothing there) and the text it is read as."""

    name: str
    values: tuple[Decimal | int | None, ...]
    texts: tuple[str, ...]


@dataclass(frozen=True)
class Chart:
    """One chart's figures. ``unit`` names what the values count (a currency, calls,
    requests); ``empty`` says why there is nothing to draw; ``note`` what was left out."""

    key: str
    title: str
    categories: tuple[str, ...]
    series: tuple[Series, ...]
    axis: str
    unit: str
    horizontal: bool = False
    empty: str | None = None
    note: str | None = None
    legend: bool = False

    @property
    def stacked(self) -> bool:
        return len(self.series) > 1


def report_charts(report: FleetReport) -> list[tuple[str, list[Chart]]]:
    """The page's sections, in order, each with its charts."""
    return [
        ("Spend by day", _spend_by_day(report)),
        ("Spend by provider and model", _spend_by_model(report)),
        ("Calls by cost status", [_status_chart(report)]),
        ("Malformed and unpriced usage by model", [_not_priced(report), _malformed(report)]),
        ("Cited token share per request", [_share_chart(report)]),
    ]


def _named(currency: str) -> str:
    """A currency as a title of ours names it: escaped and cut to ``LABEL_LIMIT``."""
    return page_text(currency, LABEL_LIMIT)


def _money(amount: Decimal, currency: str) -> str:
    return f"{money(amount)} {currency}"


def _currencies(report: FleetReport) -> list[str]:
    return sorted(
        {
            currency
            for (_, _, status, currency) in report.models
            if status in AMOUNT_STATUSES and currency
        }
    )


def _no_spend(key: str, title: str, axis: str) -> Chart:
    return Chart(key, title, (), (), axis, "", empty="no known spend: no call was priced")


def _spend_by_day(report: FleetReport) -> list[Chart]:
    currencies = _currencies(report)
    if not currencies:
        return [_no_spend("spend-by-day", "Known spend by day", "day (UTC)")]
    charts = []
    for currency in currencies:
        spend: dict[tuple[str, str], Decimal] = {}
        for (day, provider, status, row_currency), total in report.daily.items():
            if status in AMOUNT_STATUSES and row_currency == currency:
                spend[(day, provider)] = spend.get((day, provider), Decimal(0)) + total.amount
        all_days = sorted({day for day, _ in spend})
        days = all_days[-MAX_DAYS:]
        by_provider: dict[str, Decimal] = {}
        for (day, provider), amount in spend.items():
            if day in days:
                by_provider[provider] = by_provider.get(provider, Decimal(0)) + amount
        shown, rest = _top(by_provider, MAX_STACKED)
        series = [
            _money_series(provider, [spend.get((day, provider)) for day in days], currency)
            for provider in shown
        ]
        if rest:
            other = [_sum(spend.get((day, provider)) for provider in rest) for day in days]
            series.append(
                _money_series(f"other ({counted(len(rest), 'provider')})", other, currency)
            )
        notes = []
        if len(all_days) > len(days):
            notes.append(
                f"the latest {len(days)} of {len(all_days)} days are shown; "
                "the table below covers them all"
            )
        if rest:
            notes.append(f"{counted(len(rest), 'provider')} with less spend summed as other")
        charts.append(
            Chart(
                f"spend-by-day-{currency}",
                f"Known spend by day, by provider ({_named(currency)})",
                tuple(days),
                tuple(series),
                "day (UTC)",
                currency,
                note="; ".join(notes) or None,
                legend=True,
            )
        )
    return charts


def _spend_by_model(report: FleetReport) -> list[Chart]:
    currencies = _currencies(report)
    if not currencies:
        return [_no_spend("spend-by-model", "Known spend by provider/model", "model")]
    charts = []
    for currency in currencies:
        spend: dict[str, Decimal] = {}
        for (provider, model, status, row_currency), total in report.models.items():
            if status in AMOUNT_STATUSES and row_currency == currency:
                name = f"{provider}/{model}"
                spend[name] = spend.get(name, Decimal(0)) + total.amount
        shown, rest = _top(spend, MAX_MODELS)
        categories = list(shown)
        values: list[Decimal | None] = [spend[name] for name in shown]
        if rest:
            categories.append(f"other ({counted(len(rest), 'model')})")
            values.append(_sum(spend[name] for name in rest))
        charts.append(
            Chart(
                f"spend-by-model-{currency}",
                f"Known spend by provider/model ({_named(currency)})",
                tuple(categories),
                (_money_series(f"spend ({_named(currency)})", values, currency),),
                "model",
                currency,
                horizontal=True,
                note=(
                    f"the {len(shown)} models with the most spend are shown, "
                    f"{counted(len(rest), 'other model')} summed as one bar"
                    if rest
                    else None
                ),
            )
        )
    return charts


def _status_chart(report: FleetReport) -> Chart:
    counts = report.status_counts()
    statuses = [status.value for status in CostStatus]
    empty = None if report.calls else "no call in the log (or in the range asked for)"
    return Chart(
        "calls-by-status",
        "Calls by cost status",
        tuple(statuses) if not empty else (),
        (_count_series("calls", [counts[status] for status in statuses]),) if not empty else (),
        "cost status",
        "calls",
        horizontal=True,
        empty=empty,
    )


def _not_priced(report: FleetReport) -> Chart:
    by_model: dict[str, dict[str, int]] = {}
    for (provider, model, reason), calls in report.unpriced_models.items():
        reasons = by_model.setdefault(f"{provider}/{model}", {})
        reasons[reason] = reasons.get(reason, 0) + calls
    return _by_model_chart(
        "not-priced-by-model",
        "Calls not priced (unpriced or unmetered), by reason",
        by_model,
        "no call is unpriced or unmetered",
    )


def _malformed(report: FleetReport) -> Chart:
    by_model: dict[str, dict[str, int]] = {}
    for (provider, model, figure), calls in report.malformed_models.items():
        figures = by_model.setdefault(f"{provider}/{model}", {})
        figures[figure] = figures.get(figure, 0) + calls
    return _by_model_chart(
        "malformed-by-model",
        "Calls whose provider sent a malformed usage figure, by figure",
        by_model,
        "no malformed usage figure",
    )


def _by_model_chart(
    key: str, title: str, by_model: Mapping[str, Mapping[str, int]], empty: str
) -> Chart:
    if not by_model:
        return Chart(key, title, (), (), "model", "calls", horizontal=True, empty=empty)
    totals = {name: sum(kinds.values()) for name, kinds in by_model.items()}
    shown, rest = _top(totals, MAX_MODELS)
    kinds = sorted({kind for name in shown for kind in by_model[name]})
    rows: list[dict[str, int]] = [dict(by_model[name]) for name in shown]
    categories = list(shown)
    if rest:
        summed: dict[str, int] = {}
        for name in rest:
            for kind, calls in by_model[name].items():
                summed[kind] = summed.get(kind, 0) + calls
        kinds = sorted({*kinds, *summed})
        rows.append(summed)
        categories.append(f"other ({counted(len(rest), 'model')})")
    series = tuple(_count_series(kind, [row.get(kind) for row in rows]) for kind in kinds)
    return Chart(
        key,
        title,
        tuple(categories),
        series,
        "model",
        "calls",
        horizontal=True,
        note=(
            f"the {len(shown)} models with the most calls are shown, "
            f"{counted(len(rest), 'other model')} summed as one bar"
            if rest
            else None
        ),
    )


def _share_chart(report: FleetReport) -> Chart:
    figures = report.attribution
    if not figures.requests:
        return Chart(
            "cited-share",
            "Requests by cited token share",
            (),
            (),
            "cited token share",
            "requests",
            empty="no request summaries: the log holds no attribution record",
        )
    bands = list(figures.bands.items())
    note = f"{counted(figures.requests, 'request')}, {figures.with_share} with rendered context"
    if figures.mean_share is not None and figures.median_share is not None:
        note += f"; mean {figures.mean_share:.1%}, median {figures.median_share:.1%}"
    return Chart(
        "cited-share",
        "Requests by cited token share",
        tuple(band for band, _ in bands),
        (_count_series("requests", [count for _, count in bands]),),
        "cited token share",
        "requests",
        note=note,
    )


def _top(
    amounts: Mapping[str, Decimal] | Mapping[str, int], keep: int
) -> tuple[list[str], list[str]]:
    """The names with the largest amounts (ties by name), and the rest."""
    ranked = sorted(amounts, key=lambda name: (-amounts[name], name))
    if len(ranked) <= keep:
        return ranked, []
    return ranked[: keep - 1], ranked[keep - 1 :]


def _sum(values: Iterable[Decimal | None]) -> Decimal | None:
    present = [value for value in values if value is not None]
    return sum(present, Decimal(0)) if present else None


def _money_series(name: str, values: Iterable[Decimal | None], currency: str) -> Series:
    kept = tuple(values)
    return Series(
        name,
        kept,
        tuple("" if value is None else _money(value, currency) for value in kept),
    )


def _count_series(name: str, values: Iterable[int | None]) -> Series:
    kept = tuple(values)
    return Series(name, kept, tuple("" if value is None else str(value) for value in kept))
