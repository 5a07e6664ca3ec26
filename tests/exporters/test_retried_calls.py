"""A call an SDK retried is one span and one Langfuse observation, with every attempt visible.

The exporters are driven directly with what the recording core sends for a retried call: one
``CallStarted`` for the logical call, then each attempt's event, ``retried=True`` on all but the
last. Metrics stay per attempt; the span's cost is what the whole logical call was charged.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import Histogram, Sum
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import StatusCode

from spanledger.costs import CostCode, CostLine, CostStatus, summed_cost
from spanledger.events import CallStarted, Event
from spanledger.exporters.otel import ATTEMPT_EVENT, MAX_ATTEMPT_EVENTS
from tests.forking import fork, outcome

from .conftest import (
    STARTED_AT,
    LangfuseRig,
    OtelRig,
    embedding_event,
    rerank_event,
    rerank_failed_event,
)

LOGICAL = "call-attempt-1"
DURATION = "gen_ai.client.operation.duration"
COST = "spanledger.cost"
METADATA = "langfuse.observation.metadata."
COST_DETAILS = "langfuse.observation.cost_details"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

NOT_BILLED = CostLine(
    status=CostStatus.NOT_BILLED, amount=Decimal(0), code=CostCode.FAILED_UNBILLED
)


def priced(amount: str) -> CostLine:
    return CostLine(status=CostStatus.PRICED, amount=Decimal(amount), currency="USD")


def estimated(amount: str) -> CostLine:
    return CostLine(status=CostStatus.ESTIMATED, amount=Decimal(amount), currency="USD")


def started(call_id: str = LOGICAL) -> CallStarted:
    return CallStarted(
        call_id=call_id,
        operation="rerank",
        provider="cohere",
        model="rerank-v3.5",
        started_at=STARTED_AT,
        server_address="api.cohere.com",
        server_port=443,
    )


def attempt(number: int, *, last: bool = False, **overrides: Any) -> Event:
    """Attempt ``number`` of the logical call ``LOGICAL``: a 429 unless ``last`` (a success)."""
    fields: dict[str, Any] = {
        "call_id": LOGICAL if number == 1 else f"call-attempt-{number}",
        "provider": "cohere",
        "model": "rerank-v3.5",
        "started_at": STARTED_AT + timedelta(seconds=number),
        "latency_ms": 10.0 * number,
        "logical_call_id": LOGICAL,
        "attempt": number,
        "retried": not last,
    }
    fields.update(overrides)
    if last and "error_category" not in overrides:
        return rerank_event(**fields)
    return rerank_failed_event(**fields)


def timed_out(number: int, **overrides: Any) -> Event:
    """Attempt ``number``, abandoned on a read timeout (the provider may have billed it)."""
    return attempt(
        number,
        error_category="provider_unavailable",
        error_type="ReadTimeout",
        status_code=None,
        **overrides,
    )


def three_attempts(**last: Any) -> list[Event]:
    """A 429 with Retry-After 2, a 429 without, then the success (or ``last``'s overrides)."""
    return [
        attempt(1, retry_after=2.0, cost=NOT_BILLED),
        attempt(2, cost=NOT_BILLED),
        attempt(3, last=True, **last),
    ]


def exact_ns(moment: datetime) -> int:
    """``moment`` in integer nanoseconds since the epoch, without float rounding."""
    return (moment - EPOCH) // timedelta(microseconds=1) * 1000


def attempt_events(span: ReadableSpan) -> list[dict[str, Any]]:
    return [dict(event.attributes or {}) for event in span.events if event.name == ATTEMPT_EVENT]


def attributes_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def run(exporter: Any, events: list[Event], *, start: bool = True) -> None:
    if start:
        exporter.call_started(started())
    for event in events:
        exporter.emit(event)


# --------------------------------------------------------------------------- OTel: one span


def test_three_attempts_are_one_span_with_the_retried_ones_as_events(otel: OtelRig) -> None:
    run(otel.exporter, three_attempts(cost=priced("0.001")))

    span = otel.only_span()
    assert len(otel.spans()) == 1  # nothing else in the trace either
    first, second = attempt_events(span)
    assert first["spanledger.attempt"] == 1
    assert first["spanledger.call_id"] == LOGICAL
    assert first["error.type"] == "provider_rate_limit"
    assert first["spanledger.error.type"] == "http_429"
    assert first["http.response.status_code"] == 429
    assert first["spanledger.error.retry_after"] == 2.0
    assert first["spanledger.attempt.latency_ms"] == 10.0
    assert first["spanledger.cost.status"] == "not_billed"
    assert second["spanledger.attempt"] == 2
    assert second["spanledger.call_id"] == "call-attempt-2"
    assert second["error.type"] == "provider_rate_limit"
    assert "spanledger.error.retry_after" not in second
    assert [event.timestamp for event in span.events] == [
        exact_ns(STARTED_AT + timedelta(seconds=1, milliseconds=10)),
        exact_ns(STARTED_AT + timedelta(seconds=2, milliseconds=20)),
    ]

    attributes = attributes_of(span)
    assert span.name == "rerank rerank-v3.5"
    assert attributes["spanledger.attempts"] == 3
    assert attributes["spanledger.logical_call_id"] == LOGICAL
    assert attributes["spanledger.call_id"] == "call-attempt-3"
    assert attributes["spanledger.rerank.result_count"] == 2
    assert attributes["spanledger.usage.search_units"] == 1
    assert "error.type" not in attributes
    assert "http.response.status_code" not in attributes
    assert span.status.status_code is StatusCode.UNSET
    assert "exception" not in [event.name for event in span.events]
    assert span.start_time == exact_ns(STARTED_AT)
    assert otel.exporter._live == {}
    assert otel.exporter._retried == {}


def test_metrics_count_every_attempt(otel: OtelRig) -> None:
    run(otel.exporter, three_attempts())

    duration = otel.metrics()[DURATION].data
    assert isinstance(duration, Histogram)
    counts = {
        (point.attributes or {}).get("error.type"): point.count for point in duration.data_points
    }
    assert counts == {"provider_rate_limit": 2, None: 1}


def test_a_single_attempt_call_looks_as_it_always_did(otel: OtelRig) -> None:
    otel.exporter.call_started(started("call-single"))
    otel.exporter.emit(rerank_event(call_id="call-single", started_at=STARTED_AT))

    span = otel.only_span()
    attributes = attributes_of(span)
    assert attributes["spanledger.call_id"] == "call-single"
    assert not [key for key in attributes if "attempt" in key or "logical" in key]
    assert list(span.events) == []
    assert otel.exporter._retried == {}


def test_http_spans_between_attempts_nest_under_the_one_call_span(otel: OtelRig) -> None:
    tracer = otel.tracer_provider.get_tracer("http-client")
    otel.exporter.call_started(started())
    events = three_attempts()
    for event in events:
        tracer.start_span(f"POST /v2/rerank (attempt {event.attempt})").end()
        otel.exporter.emit(event)
    assert trace.get_current_span() is trace.INVALID_SPAN  # the call's context was restored

    call = otel.only_span()
    http = [span for span in otel.spans() if span.name.startswith("POST")]
    assert len(http) == 3
    for child in http:
        assert child.parent is not None
        assert child.parent.span_id == call.context.span_id
        assert child.context.trace_id == call.context.trace_id


def test_the_span_stays_current_while_an_attempt_is_retried(otel: OtelRig) -> None:
    otel.exporter.call_started(started())
    live = trace.get_current_span()
    otel.exporter.emit(attempt(1))

    assert trace.get_current_span() is live
    assert live.is_recording()
    assert otel.call_spans() == []
    otel.exporter.emit(attempt(2, last=True))
    assert not live.is_recording()


def test_a_failed_last_attempt_is_an_error_span_with_its_own_figures(otel: OtelRig) -> None:
    run(
        otel.exporter,
        [
            attempt(1),
            attempt(
                2,
                last=True,
                error_category="provider_unavailable",
                error_type="http_503",
                status_code=503,
            ),
        ],
    )

    span = otel.only_span()
    attributes = attributes_of(span)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "provider_unavailable"
    assert attributes["error.type"] == "provider_unavailable"
    assert attributes["http.response.status_code"] == 503
    assert attributes["spanledger.attempts"] == 2
    assert [event["error.type"] for event in attempt_events(span)] == ["provider_rate_limit"]
    assert [event.name for event in span.events] == [ATTEMPT_EVENT, "exception"]


# --------------------------------------------------------------------------- OTel: cost


def test_span_cost_is_what_the_logical_call_was_charged(otel: OtelRig) -> None:
    """An abandoned attempt may have been billed (estimated), a 429 was not; the span's cost is
    the sum, each attempt's own cost stays on its span event, and metrics count each once."""
    run(
        otel.exporter,
        [
            timed_out(1, cost=estimated("0.002")),
            attempt(2, cost=NOT_BILLED),
            attempt(3, last=True, cost=priced("0.001")),
        ],
    )

    span = otel.only_span()
    attributes = attributes_of(span)
    assert attributes["gen_ai.usage.cost"] == pytest.approx(0.003)
    assert attributes["spanledger.cost.status"] == "estimated"
    assert attributes["spanledger.cost.currency"] == "USD"
    timeout, rate_limited = attempt_events(span)
    assert timeout["gen_ai.usage.cost"] == pytest.approx(0.002)
    assert timeout["spanledger.cost.status"] == "estimated"
    assert "gen_ai.usage.cost" not in rate_limited
    assert rate_limited["spanledger.cost.status"] == "not_billed"

    cost = otel.metrics()[COST].data
    assert isinstance(cost, Sum)
    assert sum(point.value for point in cost.data_points) == pytest.approx(0.003)


def test_an_unpriced_attempt_leaves_the_calls_cost_unstated(otel: OtelRig) -> None:
    unpriced = CostLine(status=CostStatus.UNPRICED, code=CostCode.NO_PRICE_ENTRY)
    run(otel.exporter, [attempt(1, cost=unpriced), attempt(2, last=True, cost=priced("0.001"))])

    attributes = attributes_of(otel.only_span())
    assert "gen_ai.usage.cost" not in attributes
    assert attributes["spanledger.cost.status"] == "unpriced"
    assert attributes["spanledger.cost.reason"] == "no_price_entry"


@pytest.mark.parametrize(
    ("earlier", "later", "status", "amount"),
    [
        (NOT_BILLED, priced("0.001"), CostStatus.PRICED, Decimal("0.001")),
        (priced("0.001"), NOT_BILLED, CostStatus.PRICED, Decimal("0.001")),
        (NOT_BILLED, NOT_BILLED, CostStatus.NOT_BILLED, Decimal(0)),
        (estimated("0.002"), priced("0.001"), CostStatus.ESTIMATED, Decimal("0.003")),
        (priced("0.001"), estimated("0.002"), CostStatus.ESTIMATED, Decimal("0.003")),
        (
            priced("0.001"),
            CostLine(status=CostStatus.UNMETERED, code=CostCode.USAGE_NOT_REPORTED),
            CostStatus.UNMETERED,
            None,
        ),
        (
            CostLine(status=CostStatus.PRICED, amount=Decimal(1), currency="EUR"),
            priced("0.001"),
            CostStatus.UNPRICED,
            None,
        ),
    ],
)
def test_summed_cost(
    earlier: CostLine, later: CostLine, status: CostStatus, amount: Decimal | None
) -> None:
    total = summed_cost(earlier, later)
    assert total is not None
    assert total.status is status
    assert total.amount == amount


def test_an_attempt_that_was_not_priced_at_all_makes_the_total_unknown() -> None:
    assert summed_cost(None, priced("0.001")) is None
    assert summed_cost(priced("0.001"), None) is None


# --------------------------------------------------------------------------- OTel: no live span


def test_attempts_without_a_live_span_are_spans_of_their_own(otel: OtelRig) -> None:
    """No start notice (a sink added late): each attempt is rendered whole, with its own cost
    only, since the earlier attempts' spans already carry theirs."""
    run(otel.exporter, three_attempts(cost=priced("0.001")), start=False)

    spans = sorted(otel.call_spans(), key=lambda span: span.start_time or 0)
    assert len(spans) == 3
    first, second, last = (attributes_of(span) for span in spans)
    assert first["spanledger.attempt"] == 1
    assert second["spanledger.attempt"] == 2
    assert first["spanledger.logical_call_id"] == second["spanledger.logical_call_id"] == LOGICAL
    assert first["error.type"] == "provider_rate_limit"
    assert first["spanledger.error.retry_after"] == 2.0
    assert "spanledger.attempts" not in first
    assert last["spanledger.attempts"] == 3
    assert last["gen_ai.usage.cost"] == pytest.approx(0.001)
    assert all(list(span.events) == [] or span.events[0].name == "exception" for span in spans)
    assert otel.exporter._retried == {}


# --------------------------------------------------------------------------- OTel: bounds


def test_attempt_events_are_capped_and_the_rest_counted(otel: OtelRig) -> None:
    extra = 5
    retried = MAX_ATTEMPT_EVENTS + extra
    events = [attempt(number, cost=estimated("0.001")) for number in range(1, retried + 1)]
    events.append(attempt(retried + 1, last=True, cost=priced("0.001")))
    run(otel.exporter, events)

    span = otel.only_span()
    attributes = attributes_of(span)
    assert len(attempt_events(span)) == MAX_ATTEMPT_EVENTS
    assert attributes["spanledger.attempt.events_dropped"] == extra
    assert attributes["spanledger.attempts"] == retried + 1
    assert attributes["gen_ai.usage.cost"] == pytest.approx(0.001 * (retried + 1))


def test_retry_state_exists_only_for_live_calls(otel: OtelRig) -> None:
    otel.exporter.emit(attempt(1))  # no live span: nothing is kept for it
    assert otel.exporter._retried == {}
    otel.exporter.emit(attempt(2, last=True))

    otel.exporter.call_started(started())
    otel.exporter.emit(attempt(1))
    assert set(otel.exporter._retried) == set(otel.exporter._live) == {LOGICAL}
    otel.exporter.emit(attempt(2, last=True))
    assert otel.exporter._retried == {}
    assert otel.exporter._live == {}


def test_a_forked_child_forgets_the_parents_retried_calls(otel: OtelRig) -> None:
    otel.exporter.call_started(started())
    otel.exporter.emit(attempt(1, cost=estimated("0.002")))

    def child() -> int:
        exporter = otel.exporter
        if exporter._live or exporter._retried:
            return 1
        exporter.emit(attempt(2, last=True, cost=priced("0.001")))
        (span,) = otel.call_spans()  # rendered whole, with its own cost only
        attributes = attributes_of(span)
        return 0 if attributes["gen_ai.usage.cost"] == pytest.approx(0.001) else 2

    assert outcome(fork(child)) == 0
    assert set(otel.exporter._retried) == {LOGICAL}
    otel.exporter.emit(attempt(2, last=True, cost=priced("0.001")))
    assert attributes_of(otel.only_span())["gen_ai.usage.cost"] == pytest.approx(0.003)


# --------------------------------------------------------------------------- Langfuse


def metadata_of(span: ReadableSpan) -> dict[str, Any]:
    return {
        key[len(METADATA) :]: json.loads(str(value))
        for key, value in attributes_of(span).items()
        if key.startswith(METADATA)
    }


def test_langfuse_renders_a_retried_call_as_one_observation(langfuse_rig: LangfuseRig) -> None:
    events = [
        attempt(1, retry_after=2.0, cost=NOT_BILLED),
        timed_out(2, cost=estimated("0.002")),
        attempt(3, last=True, cost=priced("0.001")),
    ]
    run(langfuse_rig.exporter, events)

    span = langfuse_rig.only_span()
    attributes = attributes_of(span)
    metadata = metadata_of(span)
    assert span.name == "rerank rerank-v3.5"
    assert metadata["attempts"] == 3
    assert metadata["logical_call_id"] == LOGICAL
    assert metadata["spanledger_call_id"] == "call-attempt-3"
    assert metadata["result_count"] == 2
    assert metadata["retried_attempts"] == [
        {
            "attempt": 1,
            "call_id": LOGICAL,
            "latency_ms": 10.0,
            "error_category": "provider_rate_limit",
            "status_code": 429,
            "retry_after": 2.0,
            "cost_status": "not_billed",
        },
        {
            "attempt": 2,
            "call_id": "call-attempt-2",
            "latency_ms": 20.0,
            "error_category": "provider_unavailable",
            "cost_status": "estimated",
            "cost": 0.002,
            "cost_currency": "USD",
        },
    ]
    assert json.loads(attributes[COST_DETAILS]) == {"total": pytest.approx(0.003)}
    assert metadata["cost_status"] == "estimated"
    assert attributes.get("langfuse.observation.level") != "ERROR"
    assert langfuse_rig.exporter._live == {}
    assert langfuse_rig.exporter._retried == {}


def test_langfuse_single_attempt_call_has_no_attempt_metadata(langfuse_rig: LangfuseRig) -> None:
    langfuse_rig.exporter.call_started(started("call-single"))
    langfuse_rig.exporter.emit(rerank_event(call_id="call-single", cost=priced("0.001")))

    span = langfuse_rig.only_span()
    metadata = metadata_of(span)
    assert metadata["spanledger_call_id"] == "call-single"
    assert not [key for key in metadata if "attempt" in key or "logical" in key]
    assert json.loads(attributes_of(span)[COST_DETAILS]) == {"total": pytest.approx(0.001)}


def test_langfuse_attempts_without_a_live_observation_are_their_own(
    langfuse_rig: LangfuseRig,
) -> None:
    run(langfuse_rig.exporter, three_attempts(cost=priced("0.001")), start=False)

    spans = langfuse_rig.spans()
    assert len(spans) == 3
    by_attempt = {
        metadata.get("attempt", metadata.get("attempts")): (metadata, attributes_of(span))
        for span in spans
        for metadata in [metadata_of(span)]
    }
    assert set(by_attempt) == {1, 2, 3}
    assert by_attempt[1][1]["langfuse.observation.level"] == "ERROR"
    assert "retried_attempts" not in by_attempt[3][0]
    assert json.loads(by_attempt[3][1][COST_DETAILS]) == {"total": pytest.approx(0.001)}
    assert langfuse_rig.exporter._retried == {}


def test_langfuse_forked_child_forgets_the_parents_retried_calls(
    langfuse_rig: LangfuseRig,
) -> None:
    langfuse_rig.exporter.call_started(started())
    langfuse_rig.exporter.emit(attempt(1))

    def child() -> int:
        exporter = langfuse_rig.exporter
        return 1 if exporter._live or exporter._retried else 0

    assert outcome(fork(child)) == 0
    assert set(langfuse_rig.exporter._retried) == {LOGICAL}
    langfuse_rig.exporter.emit(attempt(2, last=True))
    assert metadata_of(langfuse_rig.only_span())["attempts"] == 2


def test_langfuse_lists_at_most_the_cap_and_counts_the_rest(langfuse_rig: LangfuseRig) -> None:
    retried = MAX_ATTEMPT_EVENTS + 3
    events = [attempt(number) for number in range(1, retried + 1)]
    events.append(attempt(retried + 1, last=True))
    run(langfuse_rig.exporter, events)

    metadata = metadata_of(langfuse_rig.only_span())
    assert len(metadata["retried_attempts"]) == MAX_ATTEMPT_EVENTS
    assert metadata["retried_attempts_dropped"] == 3
    assert metadata["attempts"] == retried + 1


def test_a_lone_last_embedding_attempt_ends_the_live_span(otel: OtelRig) -> None:
    otel.exporter.call_started(
        CallStarted(
            call_id="emb-1",
            operation="embeddings",
            provider="openai",
            model="text-embedding-3-small",
            started_at=STARTED_AT,
        )
    )
    otel.exporter.emit(
        embedding_event(call_id="emb-2", logical_call_id="emb-1", attempt=2, retried=False)
    )

    span = otel.only_span()
    attributes = attributes_of(span)
    assert span.name == "embeddings text-embedding-3-small"
    assert attributes["spanledger.attempts"] == 2
    assert attributes["gen_ai.usage.input_tokens"] == 42
