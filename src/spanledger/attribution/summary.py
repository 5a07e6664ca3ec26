"""Requests' attribution records aggregated, as ``spanledger report`` prints them: the mean,
median and spread of the cited token share, spend per cited token, and the requests whose
rendered context earned nothing."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

__all__ = ["AttributionFigures", "counted"]


def counted(count: int, noun: str) -> str:
    """``1 call``, ``2 calls``: a count with its noun agreeing."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


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

    def to_json(self) -> dict[str, Any]:
        """The figures as JSON-ready values (an amount as an exact decimal string)."""
        return _to_json(self)

    def render(self) -> str:
        """The figures as lines of text (``spanledger report`` prints them under the spend)."""
        return _render(self)


def _to_json(figures: AttributionFigures) -> dict[str, Any]:
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


def _render(figures: AttributionFigures) -> str:
    if not figures.requests:
        return "attribution: no request reports in the log"
    lines = [
        f"attribution over {counted(figures.requests, 'request')} "
        f"({figures.with_share} rendered context)"
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
        note = f" ({counted(left_out, 'request')} with unknown spend left out)" if left_out else ""
        lines.append(f"  spend per cited token: {per_token:.10f} {currency or ''}{note}")
    else:
        why = (
            f"{counted(left_out, 'request')} with unknown spend"
            if left_out
            else "nothing was cited"
        )
        lines.append(f"  spend per cited token: n/a ({why})")
    if figures.earned_nothing:
        lines.append("  rendered context earned nothing in: " + _some(figures.earned_nothing))
    if figures.unreconcilable:
        lines.append("  not reconcilable: " + _some(figures.unreconcilable))
    return "\n".join(lines)


_LISTED = 20


def _some(requests: Sequence[str]) -> str:
    """The first request ids, and how many more there are (a fleet's list can be long)."""
    shown = ", ".join(requests[:_LISTED])
    more = len(requests) - _LISTED
    return shown + (f" and {more} more" if more > 0 else "")
