"""Event logs for the HTML report's tests, written as spanledger writes them."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.eventlog import event_line
from spanledger.events import (
    AttributionRecord,
    EmbeddingEvent,
    EmbeddingUsage,
    Event,
    UsageFigure,
)

START = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)
SCRIPT_MODEL = "<script>alert(1)</script>"
ATTRIBUTE_MODEL = '"><img src=x onerror=alert(1)>'


@dataclass(frozen=True)
class Call:
    """One embedding call: its model, day, usage and the cost line it was recorded with."""

    provider: str = "openai"
    model: str = "text-embedding-3-small"
    day: int = 0
    tokens: int | None = 1000
    cost: CostLine | None = None
    malformed: tuple[UsageFigure, ...] = field(default=())


def priced(amount: str, currency: str = "USD") -> CostLine:
    return CostLine(CostStatus.PRICED, Decimal(amount), currency)


def unpriced(code: CostCode = CostCode.NO_PRICE_ENTRY) -> CostLine:
    return CostLine(CostStatus.UNPRICED, None, None, "no price", code)


def unmetered(code: CostCode = CostCode.USAGE_NOT_REPORTED) -> CostLine:
    return CostLine(CostStatus.UNMETERED, None, None, "no usage", code)


def call_event(call: Call, number: int) -> Event:
    return EmbeddingEvent(
        call_id=f"{number:032x}",
        provider=call.provider,
        model=call.model,
        started_at=START + timedelta(days=call.day, seconds=number),
        latency_ms=2.0,
        input_count=1,
        dimensions=8,
        usage=EmbeddingUsage(input_tokens=call.tokens) if call.tokens is not None else None,
        cost=call.cost,
        malformed_usage=call.malformed,
    )


def attribution(request: str, share: float | None, day: int = 0) -> AttributionRecord:
    rendered = 0 if share is None else 100
    cited = 0 if share is None else round(100 * share)
    return AttributionRecord(
        request_id=request,
        at=START + timedelta(days=day, hours=1),
        frames_served=4,
        frames_rendered=2 if rendered else 0,
        frames_cited=1 if cited else 0,
        rendered_tokens=rendered,
        cited_tokens=cited,
        uncited_rendered_tokens=rendered - cited,
        cited_token_share=share,
        reconcilable=True,
        calls=1,
        billed_input_tokens=1000,
        billed_search_units=0,
        calls_without_usage=0,
        spend="0.002",
        currency="USD",
        spend_complete=True,
        spend_per_cited_token=None,
    )


def write_log(path: Path, calls: Iterable[Call], records: Iterable[AttributionRecord] = ()) -> Path:
    with path.open("wb") as out:
        for number, call in enumerate(calls):
            out.write(event_line(call_event(call, number)))
        for record in records:
            out.write(event_line(record))
    return path


def mixed_calls() -> list[Call]:
    """Priced calls in two currencies over three days, unpriced and unmetered ones (one with
    a malformed figure), and the two hostile model names."""
    return [
        Call(day=0, cost=priced("0.00002")),
        Call(day=0, cost=priced("0.00002")),
        Call(day=1, cost=priced("0.00002")),
        Call(provider="cohere", model="embed-v4.0", day=1, cost=priced("0.00012")),
        Call(provider="cohere", model="embed-v4.0", day=2, cost=priced("0.00012")),
        Call(provider="mistral_ai", model="mistral-embed", day=2, cost=priced("0.0001", "EUR")),
        Call(provider="acme", model=SCRIPT_MODEL, day=1, cost=unpriced()),
        Call(provider="acme", model=SCRIPT_MODEL, day=2, cost=unpriced()),
        Call(
            provider="acme",
            model=ATTRIBUTE_MODEL,
            day=2,
            tokens=None,
            cost=unmetered(CostCode.USAGE_MALFORMED),
            malformed=("input_tokens",),
        ),
        Call(provider="tei", model="bge-small", day=0, tokens=None, cost=unmetered()),
    ]


def mixed_records() -> list[AttributionRecord]:
    return [
        attribution("req-1", 0.1),
        attribution("req-2", 0.4),
        attribution("req-3", 0.45),
        attribution("req-4", 1.0),
        attribution("req-5", None),
    ]
