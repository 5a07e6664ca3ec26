"""Aggregating requests' attribution records (from the event log) for ``spanledger report``."""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from itertools import pairwise
from typing import Any

from spanledger.events import AttributionRecord

__all__ = ["AttributionSummary"]

_BUCKETS = (0.0, 0.25, 0.5, 0.75, 1.0)


@dataclass(frozen=True)
class AttributionSummary:
    """The last record of each request, summarised."""

    records: tuple[AttributionRecord, ...]

    @classmethod
    def of(cls, records: Iterable[AttributionRecord]) -> AttributionSummary:
        latest: dict[str, AttributionRecord] = {}
        for record in records:
            latest[record.request_id] = record
        return cls(tuple(latest.values()))

    def shares(self) -> list[float]:
        return [r.cited_token_share for r in self.records if r.cited_token_share is not None]

    def distribution(self) -> dict[str, int]:
        """Requests per share band (the last band includes 100%); requests with nothing
        rendered have no share and are not counted."""
        shares = self.shares()
        bands: dict[str, int] = {}
        for low, high in pairwise(_BUCKETS):
            inside = [s for s in shares if low <= s < high or (high == _BUCKETS[-1] and s == high)]
            bands[f"{low:.0%}-{high:.0%}"] = len(inside)
        return bands

    def earned_nothing(self) -> list[str]:
        """Requests whose rendered context was entirely uncited."""
        return [r.request_id for r in self.records if r.rendered_tokens > 0 and r.cited_tokens == 0]

    def spend_per_cited_token(self) -> tuple[Decimal | None, str | None, int]:
        """Spend over cited tokens across requests whose spend is fully known (one currency),
        and how many requests had to be left out because theirs is not."""
        spend, cited, currencies, left_out = Decimal(0), 0, set(), 0
        for record in self.records:
            if not record.spend_complete or record.spend is None:
                left_out += 1
                continue
            spend += record.spend
            cited += record.cited_tokens
            if record.currency:
                currencies.add(record.currency)
        if cited == 0 or len(currencies) > 1:
            return None, None, left_out
        return spend / cited, next(iter(currencies), None), left_out

    def to_json(self) -> dict[str, Any]:
        shares = self.shares()
        per_token, currency, left_out = self.spend_per_cited_token()
        return {
            "requests": len(self.records),
            "requests_with_share": len(shares),
            "mean_cited_token_share": statistics.fmean(shares) if shares else None,
            "median_cited_token_share": statistics.median(shares) if shares else None,
            "distribution": self.distribution(),
            "spend_per_cited_token": str(per_token) if per_token is not None else None,
            "currency": currency,
            "requests_with_unknown_spend": left_out,
            "unreconcilable_requests": [r.request_id for r in self.records if not r.reconcilable],
            "rendered_context_earned_nothing": self.earned_nothing(),
        }

    def render(self) -> str:
        data = self.to_json()
        if not self.records:
            return "attribution: no request reports in the log"
        mean = data["mean_cited_token_share"]
        lines = [
            f"attribution over {data['requests']} requests "
            f"({data['requests_with_share']} rendered context)",
            f"  cited token share: mean {mean:.1%}, median {data['median_cited_token_share']:.1%}"
            if mean is not None
            else "  cited token share: n/a (nothing rendered)",
            "  distribution: "
            + ", ".join(f"{band}: {count}" for band, count in data["distribution"].items()),
        ]
        per_token, currency, left_out = self.spend_per_cited_token()
        if per_token is not None:
            note = f" ({left_out} requests with unknown spend left out)" if left_out else ""
            lines.append(f"  spend per cited token: {per_token:.10f} {currency or ''}{note}")
        else:
            why = f"{left_out} requests with unknown spend" if left_out else "nothing was cited"
            lines.append(f"  spend per cited token: n/a ({why})")
        if data["rendered_context_earned_nothing"]:
            lines.append(
                "  rendered context earned nothing in: "
                + ", ".join(data["rendered_context_earned_nothing"])
            )
        if data["unreconcilable_requests"]:
            lines.append("  not reconcilable: " + ", ".join(data["unreconcilable_requests"]))
        return "\n".join(lines)
