"""A request's report: its attribution joined to the retrieval bill of the same request.

The bill comes from the request's events: provider-billed tokens and search units, and each
call's cost line (priced, estimated, unpriced, unmetered, not billed kept apart). Spend per
cited token is stated only when the spend is fully known; otherwise the report says which part
is unknown rather than printing a number that silently leaves it out. Beside it stands what the
context cost again as the model calls' input tokens (``context_spend``), cited and unused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from spanledger.attribution.context import ContextCapture
from spanledger.attribution.context_spend import ContextSpend, price_context
from spanledger.attribution.summary import context_spend_text, counted
from spanledger.attribution.uses import AttributionReport, Evidence
from spanledger.costs import KNOWN_STATUSES, CostLine
from spanledger.events import (
    AttributionRecord,
    EmbeddingEvent,
    Event,
    RerankEvent,
)
from spanledger.ledger import Pricer, PriceTable
from spanledger.ledger.report import AMOUNT_STATUSES
from spanledger.outcomes import RerankOutcome

__all__ = ["RequestReport"]


@dataclass(frozen=True)
class RequestReport:
    """Attribution and bill of one request."""

    request_id: str
    attribution: AttributionReport
    events: tuple[Event, ...]
    cost_lines: tuple[CostLine | None, ...]
    outcomes: tuple[RerankOutcome, ...] = ()
    """The request's rerank chains (their attempts' calls are among ``events``)."""
    quoted_tokens: int = 0
    """Accounting tokens of answer text copied verbatim from rendered frames (not citing)."""
    model_calls: int = 0
    """The model calls whose prompts were matched against the request's frames."""
    context_spend: ContextSpend = field(
        default_factory=lambda: ContextSpend(unknown="no model call was captured")
    )
    """What the rendered context cost as the model calls' input tokens: all, cited, unused."""
    capture_cut: Mapping[str, int] = field(default_factory=dict)
    """What the capture's caps cut, by what (only what was cut)."""

    @classmethod
    def build(
        cls,
        request_id: str,
        attribution: AttributionReport,
        events: Sequence[Event],
        ledger: Pricer | None = None,
        *,
        outcomes: Sequence[RerankOutcome] = (),
        capture: ContextCapture | None = None,
        rates: PriceTable | None = None,
    ) -> RequestReport:
        """Join the request's attribution to its calls' cost lines: an event that carries none
        is priced by ``ledger`` here, or left without one when there is no ledger. The context
        ``capture`` saw is priced at the input rates of ``rates``."""
        lines = tuple(
            event.cost if event.cost is not None else (ledger.price(event) if ledger else None)
            for event in events
        )
        calls = capture.calls() if capture is not None else []
        cut = capture.cut() if capture is not None else {}
        return cls(
            request_id,
            attribution,
            tuple(events),
            lines,
            tuple(outcomes),
            capture.quoted_tokens if capture is not None else 0,
            len(calls),
            price_context(calls, attribution, rates, datetime.now(UTC), cut=cut),
            cut,
        )

    def cited_by(self) -> dict[str, int]:
        """Frames cited per evidence that made them so (the frames ``frames_cited`` counts),
        strongest evidence first."""
        served = {served.frame for served in self.attribution.usage.served_frames()}
        counts: dict[str, int] = {}
        for frame in dict.fromkeys(use.frame for use in self.attribution.uses):
            use = self.attribution.use_of(frame)
            if use is None or not (use.rendered and use.cited) or frame not in served:
                continue
            if use.evidence is not None:
                counts[use.evidence.value] = counts.get(use.evidence.value, 0) + 1
        return {
            evidence.value: counts[evidence.value]
            for evidence in Evidence
            if evidence.value in counts
        }

    def chains_by_status(self) -> dict[str, int]:
        """The request's rerank chains per outcome status (``ok``, ``degraded``, ...)."""
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
        return counts

    def billed(self) -> tuple[int, int, int]:
        """(input tokens, search units, calls whose usage was not reported), as billed."""
        tokens = units = unreported = 0
        for event in self.events:
            if not isinstance(event, EmbeddingEvent | RerankEvent):
                continue
            if event.usage is None:
                unreported += 1
                continue
            tokens += event.usage.input_tokens or 0
            if isinstance(event, RerankEvent):
                units += event.usage.search_units or 0
        return tokens, units, unreported

    def billed_characters(self) -> int | None:
        """The billable characters the calls reported (Vertex AI's ``:predict``), ``None``
        when none reported any."""
        found = [
            event.usage.billable_characters
            for event in self.events
            if isinstance(event, EmbeddingEvent)
            and event.usage is not None
            and event.usage.billable_characters is not None
        ]
        return sum(found) if found else None

    def by_status(self) -> dict[str, tuple[int, Decimal | None]]:
        """Calls and known amount per cost status. The amount is ``None`` for unpriced and
        unmetered lines, and where one status mixes currencies (never added together)."""
        counts: dict[str, int] = {}
        amounts: dict[str, Decimal | None] = {}
        currencies: dict[str, set[str]] = {}
        for line in self.cost_lines:
            status = line.status.value if line is not None else "no_price_table"
            counts[status] = counts.get(status, 0) + 1
            known = line is not None and line.status in KNOWN_STATUSES
            running = amounts.get(status, Decimal(0))
            amounts[status] = (
                running + (line.amount or Decimal(0))
                if known and running is not None and line is not None
                else None
            )
            if line is not None and line.currency:
                currencies.setdefault(status, set()).add(line.currency)
        return {
            status: (count, None if len(currencies.get(status, ())) > 1 else amounts[status])
            for status, count in counts.items()
        }

    def currency_of(self, status: str) -> str:
        """The one currency of a status's lines, or ``""``."""
        found = {
            line.currency
            for line in self.cost_lines
            if line is not None and line.currency and line.status.value == status
        }
        return next(iter(found)) if len(found) == 1 else ""

    def spend(self) -> tuple[Decimal | None, str | None, str | None]:
        """(amount, currency, what is unknown): the amount only when every call is known and
        in one currency."""
        unknown = [
            line for line in self.cost_lines if line is None or line.status not in KNOWN_STATUSES
        ]
        currencies = {line.currency for line in self.cost_lines if line and line.currency}
        if unknown:
            parts: dict[str, int] = {}
            for line in unknown:
                key = "no price table" if line is None else line.status.value
                parts[key] = parts.get(key, 0) + 1
            detail = ", ".join(f"{count} {key}" for key, count in sorted(parts.items()))
            return None, None, f"spend unknown for {detail} of {len(self.cost_lines)} calls"
        if len(currencies) > 1:
            return None, None, f"calls priced in {len(currencies)} currencies"
        total = sum((line.amount or Decimal(0) for line in self.cost_lines if line), Decimal(0))
        return total, next(iter(currencies), None), None

    def spend_per_cited_token(self) -> Decimal | None:
        """The request's spend over its cited tokens; ``None`` when part of the spend is
        unknown or nothing was cited, rather than a figure that would mislead."""
        amount, _, unknown = self.spend()
        cited = self.attribution.cited_tokens()
        if amount is None or unknown is not None or cited == 0:
            return None
        return amount / cited

    def record(self) -> AttributionRecord:
        """The summary written to the event log and rendered by exporters."""
        attribution = self.attribution
        tokens, units, unreported = self.billed()
        amount, currency, unknown = self.spend()
        by_status = self.by_status()
        return AttributionRecord(
            request_id=self.request_id,
            at=datetime.now(UTC),
            frames_served=sum(1 for _ in attribution.usage.served_frames()),
            frames_rendered=attribution.rendered_frames(),
            frames_cited=attribution.cited_frames(),
            rendered_tokens=attribution.rendered_tokens(),
            cited_tokens=attribution.cited_tokens(),
            uncited_rendered_tokens=attribution.uncited_rendered_tokens(),
            cited_token_share=attribution.cited_token_share(),
            reconcilable=attribution.is_reconcilable(),
            problems=[problem.detail for problem in attribution.problems()],
            calls=len(self.events),
            billed_input_tokens=tokens,
            billed_search_units=units,
            billed_characters=self.billed_characters(),
            calls_without_usage=unreported,
            spend=amount,
            currency=currency,
            spend_complete=unknown is None,
            unknown_spend=unknown,
            spend_per_cited_token=self.spend_per_cited_token(),
            calls_by_status={status: count for status, (count, _) in by_status.items()},
            spend_by_status={
                status: known
                for status, (_, known) in by_status.items()
                if known is not None and status in AMOUNT_STATUSES
            },
            chains_by_status=self.chains_by_status(),
            model_calls=self.model_calls,
            quoted_tokens=self.quoted_tokens,
            cited_by=self.cited_by(),
            context_spend=self.context_spend.context,
            cited_context_spend=self.context_spend.cited,
            unused_context_spend=self.context_spend.unused,
            context_currency=self.context_spend.currency,
            unknown_context_spend=self.context_spend.unknown,
            capture_cut=dict(self.capture_cut),
        )

    def render(self) -> str:
        """The per-request report as text."""
        record = self.record()
        share = f"{record.cited_token_share:.1%}" if record.cited_token_share is not None else "n/a"
        lines = [
            f"request {self.request_id}",
            f"  calls: {record.calls} ({record.calls_without_usage} without reported usage)",
            f"  billed: {counted(record.billed_input_tokens, 'input token')}, "
            f"{counted(record.billed_search_units, 'search unit')}"
            + (
                f", {counted(record.billed_characters, 'billable character')}"
                if record.billed_characters is not None
                else ""
            ),
        ]
        for status, (count, amount) in sorted(self.by_status().items()):
            money = (
                f"{amount:f} {self.currency_of(status)}".rstrip()
                if amount is not None
                else "unknown"
            )
            calls = "call " if count == 1 else "calls"
            lines.append(f"  cost {status:<11} {count:>3} {calls}  {money}")
        if record.chains_by_status:
            chains = ", ".join(
                f"{count} {status}" for status, count in sorted(record.chains_by_status.items())
            )
            lines.append(f"  rerank chains: {chains}")
        if record.spend is not None:
            lines.append(f"  spend: {record.spend:f} {record.currency or ''}".rstrip())
        else:
            lines.append(f"  spend: unknown ({record.unknown_spend})")
        lines.append(
            f"  context: {counted(record.frames_served, 'frame')} served, "
            f"{record.frames_rendered} rendered ({counted(record.rendered_tokens, 'token')}), "
            f"{record.frames_cited} cited ({counted(record.cited_tokens, 'token')})"
        )
        lines.append(
            f"  cited token share: {share}; uncited rendered tokens: "
            f"{record.uncited_rendered_tokens}"
        )
        if record.spend_per_cited_token is not None:
            lines.append(
                f"  spend per cited token: {record.spend_per_cited_token:.10f} "
                f"{record.currency or ''}".rstrip()
            )
        else:
            lines.append("  spend per cited token: n/a (spend not fully known or nothing cited)")
        lines.append(f"  context spend: {context_spend_text(record)}")
        cited_by = ", ".join(f"{n} {evidence}" for evidence, n in record.cited_by.items())
        lines.append(
            f"  model calls: {record.model_calls}; quoted tokens: {record.quoted_tokens}"
            + (f"; cited by: {cited_by}" if cited_by else "")
        )
        if record.capture_cut:
            cut = ", ".join(
                f"{n} {what.replace('_', ' ')}" for what, n in record.capture_cut.items()
            )
            lines.append(f"  cut by the capture's caps: {cut}")
        if not record.reconcilable:
            lines.append("  NOT reconcilable:")
            lines.extend(f"    - {problem}" for problem in record.problems)
        return "\n".join(lines)
