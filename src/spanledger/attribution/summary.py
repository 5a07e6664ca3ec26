"""Requests' attribution records aggregated, as ``spanledger report`` prints them: the mean,
median and spread of the cited token share, spend per cited token, the requests whose
rendered context earned nothing, and what the context cost as input tokens (cited and unused),
in total and per request."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from spanledger.costs import plain
from spanledger.display import escaped
from spanledger.events import AttributionRecord
from spanledger.ledger.report import money

__all__ = [
    "AttributionFigures",
    "ContextFigures",
    "context_spend_text",
    "counted",
    "figure_rows",
    "printable",
]


def counted(count: int, noun: str) -> str:
    """``1 call``, ``2 calls``: a count with its noun agreeing."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on escaped (a log's request id or
    reason is written by whoever wrote the log): ``display.escaped``."""
    return escaped(text)


def context_spend_text(record: AttributionRecord) -> str:
    """A record's context spend as one phrase: the amounts with their currency, or
    ``unknown (<reason>)``."""
    figures = ContextFigures.of(record)
    return figures.text()


@dataclass(frozen=True)
class ContextFigures:
    """One request's figures as ``--by request`` shows them: its cited token share (of its
    rendered tokens) and its context spend (all, cited, unused) in ``currency``, or why that is
    unknown (``not recorded`` for records written before it was)."""

    request_id: str
    context: Decimal | None = None
    cited: Decimal | None = None
    unused: Decimal | None = None
    currency: str | None = None
    unknown: str | None = None
    share: float | None = None
    """The cited token share; ``None`` when nothing was rendered."""
    rendered_tokens: int | None = None
    cited_tokens: int | None = None

    @classmethod
    def of(cls, record: AttributionRecord) -> ContextFigures:
        return cls(
            record.request_id,
            record.context_spend,
            record.cited_context_spend,
            record.unused_context_spend,
            record.context_currency,
            record.unknown_context_spend,
            record.cited_token_share,
            record.rendered_tokens,
            record.cited_tokens,
        )

    def share_text(self) -> str:
        """The share with the tokens it is made of, or why there is none."""
        if self.share is None:
            return "cited token share n/a (nothing rendered)"
        if self.rendered_tokens is None or self.cited_tokens is None:
            return f"cited token share {self.share:.1%}"
        return (
            f"cited token share {self.share:.1%} ({self.cited_tokens} of "
            f"{counted(self.rendered_tokens, 'rendered token')})"
        )

    @property
    def known(self) -> bool:
        return self.context is not None and self.cited is not None and self.unused is not None

    def text(self) -> str:
        if self.context is None or self.cited is None or self.unused is None:
            return f"unknown ({printable(self.unknown or 'not recorded')})"
        unit = f" {printable(self.currency)}" if self.currency else ""
        return (
            f"{money(self.context)}{unit} (cited {money(self.cited)}{unit}, "
            f"unused {money(self.unused)}{unit})"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "request_id": self.request_id,
            "cited_token_share": self.share,
            "rendered_tokens": self.rendered_tokens,
            "cited_tokens": self.cited_tokens,
            "context_spend": _amount(self.context),
            "cited_context_spend": _amount(self.cited),
            "unused_context_spend": _amount(self.unused),
            "currency": self.currency,
            "unknown_context_spend": None if self.known else self.unknown or "not recorded",
        }


def _amount(value: Decimal | None) -> str | None:
    return money(value) if value is not None else None


@dataclass(frozen=True)
class AttributionFigures:
    """Each request's latest attribution record, aggregated (``spanledger report`` has DuckDB
    do it over a fleet's logs)."""

    requests: int = 0
    with_share: int = 0
    mean_share: float | None = None
    median_share: float | None = None
    bands: dict[str, int] = field(default_factory=dict)
    spend: Decimal = Decimal(0)
    cited_tokens: int = 0
    currencies: tuple[str, ...] = ()
    unknown_spend: int = 0
    earned_nothing: tuple[str, ...] = ()
    unreconcilable: tuple[str, ...] = ()
    context_spend: dict[str, tuple[Decimal, Decimal, Decimal]] = field(default_factory=dict)
    """Context spend per currency as (all, cited, unused), summed over the requests whose
    context spend is known."""
    context_known: int = 0
    """Requests whose context spend is known (a known zero included)."""
    by_request: tuple[ContextFigures, ...] | None = None
    """Each request's context spend, when the report is grouped by request."""

    @property
    def context_unknown(self) -> int:
        """Requests whose context spend is unknown (or was not recorded): left out of the
        totals, never counted as zero."""
        return self.requests - self.context_known

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON-ready values (an amount as an exact decimal string)."""
        return _to_json(self)

    def render(self) -> str:
        """The figures as lines of text (``spanledger report`` prints them under the spend)."""
        return _render(self)


def _to_json(figures: AttributionFigures) -> dict[str, Any]:
    per_token, currency = _per_cited_token(figures)
    data: dict[str, Any] = {
        "requests": figures.requests,
        "requests_with_share": figures.with_share,
        "mean_cited_token_share": figures.mean_share,
        "median_cited_token_share": figures.median_share,
        "distribution": figures.bands,
        "spend_per_cited_token": plain(per_token) if per_token is not None else None,
        "currency": currency,
        "requests_with_unknown_spend": figures.unknown_spend,
        "rendered_context_earned_nothing": list(figures.earned_nothing),
        "unreconcilable_requests": list(figures.unreconcilable),
        "known_context_spend": {
            currency: {"context": money(all_), "cited": money(cited), "unused": money(unused)}
            for currency, (all_, cited, unused) in sorted(figures.context_spend.items())
        },
        "requests_with_context_spend": figures.context_known,
        "requests_with_unknown_context_spend": figures.context_unknown,
    }
    if figures.by_request is not None:
        data["by_request"] = [each.to_json() for each in figures.by_request]
    return data


def _per_cited_token(figures: AttributionFigures) -> tuple[Decimal | None, str | None]:
    if figures.cited_tokens == 0 or len(figures.currencies) > 1:
        return None, None
    currency = figures.currencies[0] if figures.currencies else None
    return figures.spend / figures.cited_tokens, currency


def _render(figures: AttributionFigures) -> str:
    if not figures.requests:
        return "attribution: no request reports in the log"
    lines = [
        f"attribution over {counted(figures.requests, 'request')} "
        f"({figures.with_share} with rendered context)"
    ]
    lines.extend(f"  {label}: {value}" for label, value in figure_rows(figures))
    if figures.by_request:
        lines.append("  by request:")
        lines.extend(
            f"    {printable(each.request_id)}: {each.share_text()}; context spend {each.text()}"
            for each in figures.by_request
        )
    return "\n".join(lines)


def figure_rows(figures: AttributionFigures) -> list[tuple[str, str]]:
    """The aggregate figures as (label, value) rows: the text report prints them as lines,
    the HTML page as a table."""
    rows: list[tuple[str, str]] = []
    if figures.mean_share is not None and figures.median_share is not None:
        rows.append(
            (
                "cited token share",
                f"mean {figures.mean_share:.1%}, median {figures.median_share:.1%}",
            )
        )
    else:
        rows.append(("cited token share", "n/a (nothing rendered)"))
    rows.append(("distribution", ", ".join(f"{band}: {n}" for band, n in figures.bands.items())))
    per_token, currency = _per_cited_token(figures)
    left_out = figures.unknown_spend
    if per_token is not None:
        note = f" ({counted(left_out, 'request')} with unknown spend left out)" if left_out else ""
        rows.append(("spend per cited token", f"{per_token:.10f} {currency or ''}{note}"))
    else:
        if len(figures.currencies) > 1:
            why = f"the spend is in {len(figures.currencies)} currencies"
        elif left_out:
            why = f"{counted(left_out, 'request')} with unknown spend"
        else:
            why = "nothing was cited"
        rows.append(("spend per cited token", f"n/a ({why})"))
    if figures.earned_nothing:
        rows.append(("rendered context earned nothing in", _some(figures.earned_nothing)))
    if figures.unreconcilable:
        rows.append(("not reconcilable", _some(figures.unreconcilable)))
    rows.append(_context_total(figures))
    return rows


def _context_total(figures: AttributionFigures) -> tuple[str, str]:
    """The known context spend over the requests, with the unknown ones counted apart."""
    if not figures.context_known:
        return "context spend", f"unknown for {counted(figures.requests, 'request')}"
    amounts = "; ".join(
        f"{money(all_)} {currency} (cited {money(cited)} {currency}, "
        f"unused {money(unused)} {currency})"
        for currency, (all_, cited, unused) in sorted(figures.context_spend.items())
    )
    left_out = figures.context_unknown
    note = (
        f" ({counted(left_out, 'request')} with unknown context spend left out)" if left_out else ""
    )
    return "known context spend", f"{amounts or '0'}{note}"


_LISTED = 20


def _some(requests: Sequence[str]) -> str:
    """The first request ids, and how many more there are (a fleet's list can be long)."""
    shown = ", ".join(requests[:_LISTED])
    more = len(requests) - _LISTED
    return shown + (f" and {more} more" if more > 0 else "")
