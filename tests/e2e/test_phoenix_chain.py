"""A rerank fallback chain exported over OTLP to a real Arize Phoenix: one ``rerank_chain`` span
with each provider step's call span under it, the outcome and every attempt on it, as Phoenix
stores them; nothing of the query or the documents anywhere."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import spanledger
from spanledger.exporters.otel import OtelExporter
from spanledger.providers import CohereReranker, JinaReranker
from spanledger.providers.fallback import BM25Step, Breakers, with_fallback
from spanledger.testing import StandIn

from .phoenix_backend import PhoenixServer

pytestmark = pytest.mark.timeout(300)

SENTINEL = "SENTINEL-phoenix-chain-9e2f-c0ffee"
QUERY = f"{SENTINEL} what moves the tides"
DOCUMENTS = [f"{SENTINEL} the moon pulls the sea", f"{SENTINEL} clocks tick", "tides and moon"]
PROJECT = "spanledger-chain"


def _provider(phoenix: PhoenixServer) -> TracerProvider:
    session = requests.Session()
    session.trust_env = False  # only 127.0.0.1 is contacted
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "spanledger-e2e", "openinference.project.name": PROJECT}
        )
    )
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=phoenix.otlp_traces_endpoint, session=session, timeout=10)
        )
    )
    return provider


@pytest.fixture(scope="module")
def chain_spans(phoenix: PhoenixServer) -> dict[str, dict[str, Any]]:
    provider = _provider(phoenix)
    recorder = spanledger.Recorder([OtelExporter(tracer_provider=provider)])
    breakers = Breakers(failures=5, window=60, cooldown=60)
    try:
        with StandIn() as standin, httpx.Client(trust_env=False, timeout=10.0) as http:
            common: dict[str, Any] = {"api_key": "test-key", "http_client": http}
            failing = CohereReranker("fail-503", base_url=standin.base_url("cohere"), **common)
            jina = JinaReranker("jina-reranker-v2", base_url=standin.base_url("jina"), **common)
            with spanledger.use(recorder):
                outcome = with_fallback(
                    [failing, jina, BM25Step()], QUERY, DOCUMENTS, top_k=2, breakers=breakers
                )
        assert outcome.status == "degraded"
        assert provider.force_flush(timeout_millis=15_000)
        spans = phoenix.spans(project=PROJECT, expected=3)
    finally:
        provider.shutdown()
    named = {span["name"]: span for span in spans}
    assert len(named) == len(spans)
    return named


def test_the_chain_is_one_span_with_its_calls_under_it(
    chain_spans: dict[str, dict[str, Any]],
) -> None:
    assert sorted(chain_spans) == ["rerank fail-503", "rerank jina-reranker-v2", "rerank_chain"]
    chain = chain_spans["rerank_chain"]
    assert chain["parent_id"] is None
    for name in ("rerank fail-503", "rerank jina-reranker-v2"):
        assert chain_spans[name]["parent_id"] == chain["context"]["span_id"], name
        assert chain_spans[name]["context"]["trace_id"] == chain["context"]["trace_id"]


def test_the_outcome_is_on_the_chain_span(chain_spans: dict[str, dict[str, Any]]) -> None:
    attributes = chain_spans["rerank_chain"]["attributes"]
    assert attributes["spanledger.chain.status"] == "degraded"
    assert attributes["spanledger.chain.answered_by"] == 2
    assert attributes["spanledger.chain.attempts"] == 2
    assert attributes["gen_ai.request.model"] == "jina-reranker-v2"
    assert attributes["spanledger.breaker.states"] == ["closed", "closed"]


def test_every_attempt_is_an_event_on_the_chain_span(
    chain_spans: dict[str, dict[str, Any]],
) -> None:
    events = chain_spans["rerank_chain"]["events"]
    attempts = [
        event["attributes"] for event in events if event["name"] == "spanledger.chain.attempt"
    ]
    assert [(a["spanledger.attempt"], a["spanledger.attempt.status"]) for a in attempts] == [
        (1, "failed"),
        (2, "ok"),
    ]
    assert attempts[0]["spanledger.attempt.reason"] == "provider_unavailable"
    assert attempts[1]["gen_ai.usage.input_tokens"] > 0


def test_nothing_of_the_text_reached_phoenix(chain_spans: dict[str, dict[str, Any]]) -> None:
    assert SENTINEL not in json.dumps(chain_spans)
