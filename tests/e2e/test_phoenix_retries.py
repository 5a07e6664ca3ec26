"""A retried call as Arize Phoenix stores it: one span under the request, its attempts as events.

The exporter is driven with what the recording core sends for a call the SDK retried twice
after a 429 (one start notice, then each attempt's event), exported over OTLP/HTTP and read back
through Phoenix's REST API.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from spanledger import ErrorCategory
from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.events import CallStarted, RerankEvent, RerankFailedEvent, RerankUsage
from spanledger.exporters.otel import ATTEMPT_EVENT, OtelExporter

from .phoenix_backend import PhoenixServer

pytestmark = pytest.mark.timeout(300)

PROJECT = "spanledger-e2e-retries"
LOGICAL = "retried-call-1"
STARTED_AT = datetime.now(UTC) - timedelta(seconds=10)
NOT_BILLED = CostLine(CostStatus.NOT_BILLED, Decimal(0), code=CostCode.FAILED_UNBILLED)


def _rate_limited(number: int, retry_after: float | None) -> RerankFailedEvent:
    return RerankFailedEvent(
        call_id=LOGICAL if number == 1 else f"retried-call-{number}",
        logical_call_id=LOGICAL,
        attempt=number,
        retried=True,
        provider="cohere",
        model="rerank-v3.5",
        started_at=STARTED_AT + timedelta(seconds=number),
        latency_ms=15.0,
        query_length=5,
        document_count=3,
        error_category=ErrorCategory.RATE_LIMIT,
        error_type="http_429",
        status_code=429,
        retry_after=retry_after,
        cost=NOT_BILLED,
    )


def _exported_call(phoenix: PhoenixServer) -> list[dict[str, Any]]:
    session = requests.Session()
    session.trust_env = False  # only 127.0.0.1 is contacted
    provider = TracerProvider(resource=Resource.create({"openinference.project.name": PROJECT}))
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=phoenix.otlp_traces_endpoint, session=session, timeout=10)
        )
    )
    exporter = OtelExporter(tracer_provider=provider, enable_metrics=False)
    try:
        with provider.get_tracer("test").start_as_current_span("request"):
            exporter.call_started(
                CallStarted(
                    call_id=LOGICAL,
                    operation="rerank",
                    provider="cohere",
                    model="rerank-v3.5",
                    started_at=STARTED_AT,
                )
            )
            exporter.emit(_rate_limited(1, 2.0))
            exporter.emit(_rate_limited(2, None))
            exporter.emit(
                RerankEvent(
                    call_id="retried-call-3",
                    logical_call_id=LOGICAL,
                    attempt=3,
                    provider="cohere",
                    model="rerank-v3.5",
                    started_at=STARTED_AT + timedelta(seconds=3),
                    latency_ms=40.0,
                    query_length=5,
                    document_count=3,
                    result_count=3,
                    usage=RerankUsage(search_units=1),
                    cost=CostLine(CostStatus.PRICED, Decimal("0.002"), "USD"),
                )
            )
        assert provider.force_flush(timeout_millis=15_000)
    finally:
        provider.shutdown()
    return phoenix.spans(project=PROJECT, expected=2)


def test_phoenix_stores_a_retried_call_as_one_span_with_its_attempts(
    phoenix: PhoenixServer,
) -> None:
    spans = _exported_call(phoenix)

    assert sorted(span["name"] for span in spans) == ["request", "rerank rerank-v3.5"]
    by_name = {span["name"]: span for span in spans}
    call, request = by_name["rerank rerank-v3.5"], by_name["request"]
    assert call["parent_id"] == request["context"]["span_id"]
    assert call["context"]["trace_id"] == request["context"]["trace_id"]
    assert call["status_code"] in {"OK", "UNSET"}
    attributes = call["attributes"]
    assert attributes["spanledger.attempts"] == 3
    assert attributes["spanledger.logical_call_id"] == LOGICAL
    assert attributes["gen_ai.usage.cost"] == pytest.approx(0.002)
    attempts = [event for event in call["events"] if event["name"] == ATTEMPT_EVENT]
    assert [event["attributes"]["spanledger.attempt"] for event in attempts] == [1, 2]
    assert all(event["attributes"]["error.type"] == "provider_rate_limit" for event in attempts)
    assert attempts[0]["attributes"]["spanledger.error.retry_after"] == 2.0
    assert "spanledger.error.retry_after" not in attempts[1]["attributes"]
