"""spanledger's OpenTelemetry exporter against a real Arize Phoenix: OTLP/HTTP in, REST out.

Real provider calls go to the loopback stand-in inside a parent ``request`` span; the
``OtelExporter`` renders each call as a span on an SDK ``TracerProvider`` (never the global one)
that exports to Phoenix over OTLP/HTTP. The spans are then read back through Phoenix's REST API
(``GET /v1/projects/{project}/spans``) and checked as Phoenix stores them.

What Phoenix does to spans, as seen through that API (arize-phoenix 20.x):

- attributes come back flattened to dotted keys, ``gen_ai.*`` and ``spanledger.*`` kept as sent;
- it *adds* OpenInference attributes derived from ``gen_ai.*`` (``llm.provider``,
  ``llm.system``, ``embedding.model_name`` or ``llm.model_name``, ``llm.token_count.prompt``
  from ``gen_ai.usage.input_tokens``) and takes ``span_kind`` from the
  ``openinference.span.kind`` spanledger sends (EMBEDDING, RERANKER: without it a rerank would
  be UNKNOWN, having no GenAI operation value upstream);
- it does not return the OTel span kind (CLIENT) nor resource attributes, so the CLIENT kind is
  checked on the same spans through an in-memory exporter on the same provider.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import requests
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import spanledger
from spanledger import ErrorCategory, ProviderError
from spanledger.exporters.otel import OtelExporter
from spanledger.providers import CohereEmbeddings, CohereReranker, JinaReranker, TEIEmbeddings
from spanledger.testing import StandIn

from .phoenix_backend import HOST, PhoenixServer

pytestmark = pytest.mark.timeout(300)  # a cold Phoenix start may take a while on a busy machine

SENTINEL = "SENTINEL-phoenix-e2e-5d1a-c0ffee"
"""Put in every input, query and document; must appear nowhere Phoenix stored."""

TEXTS = [f"{SENTINEL} the moon pulls the sea", f"{SENTINEL} lighthouses warn ships"]
QUERY = f"{SENTINEL} what moves the tides"
DOCS = [
    f"{SENTINEL} the moon pulls the sea",
    f"{SENTINEL} lighthouses warn ships",
    f"{SENTINEL} tides follow the moon",
]

COHERE_EMBED = "embeddings embed-v4.0"
TEI_EMBED = "embeddings BAAI/bge-small-en-v1.5"
USAGE_MISSING_EMBED = "embeddings usage-missing"
COHERE_RERANK = "rerank rerank-v3.5"
JINA_RERANK = "rerank jina-reranker-v2-base-multilingual"
FAILED_RERANK = "rerank fail-429"

EMBED_SPANS = (COHERE_EMBED, TEI_EMBED, USAGE_MISSING_EMBED)
RERANK_SPANS = (COHERE_RERANK, JINA_RERANK, FAILED_RERANK)
PROVIDER_SPANS = EMBED_SPANS + RERANK_SPANS
SUCCESS_SPANS = (COHERE_EMBED, TEI_EMBED, USAGE_MISSING_EMBED, COHERE_RERANK, JINA_RERANK)

EXPECTED_IDENTITY = {
    COHERE_EMBED: ("embeddings", "cohere", "embed-v4.0"),
    TEI_EMBED: ("embeddings", "tei", "BAAI/bge-small-en-v1.5"),
    USAGE_MISSING_EMBED: ("embeddings", "cohere", "usage-missing"),
    COHERE_RERANK: ("rerank", "cohere", "rerank-v3.5"),
    JINA_RERANK: ("rerank", "jina", "jina-reranker-v2-base-multilingual"),
    FAILED_RERANK: ("rerank", "cohere", "fail-429"),
}

USAGE_PREFIXES = ("gen_ai.usage.", "spanledger.usage.", "llm.token_count.")
"""spanledger's usage attributes, and the OpenInference token counts Phoenix derives from them."""


def _tracer_provider(
    phoenix: PhoenixServer, project: str
) -> tuple[TracerProvider, InMemorySpanExporter]:
    """A private SDK provider exporting to Phoenix's ``project`` and to memory."""
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment: only 127.0.0.1 is contacted
    provider = TracerProvider(
        resource=Resource.create(
            {"service.name": "spanledger-e2e", "openinference.project.name": project}
        )
    )
    provider.add_span_processor(
        BatchSpanProcessor(
            OTLPSpanExporter(endpoint=phoenix.otlp_traces_endpoint, session=session, timeout=10)
        )
    )
    local = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(local))
    return provider, local


def _by_name(spans: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    named = {span["name"]: span for span in spans}
    assert len(named) == len(spans), f"span names repeat: {sorted(s['name'] for s in spans)}"
    return named


def _usage_keys(attributes: dict[str, Any]) -> list[str]:
    return sorted(key for key in attributes if key.startswith(USAGE_PREFIXES))


# ---------------------------------------------------------------------------- the backend alone


def test_phoenix_stores_an_otlp_span_and_returns_it_over_rest(phoenix: PhoenixServer) -> None:
    """The fixture works with no spanledger code involved: OTLP/HTTP in, REST API out."""
    project = "fixture-check"
    provider, _ = _tracer_provider(phoenix, project)
    tracer = provider.get_tracer("fixture-check")
    try:
        inner_attributes: dict[str, str | int] = {"check.text": "hello", "check.count": 3}
        with (
            tracer.start_as_current_span("outer") as outer,
            tracer.start_as_current_span("inner", attributes=inner_attributes),
        ):
            pass
        assert provider.force_flush(timeout_millis=15_000)
    finally:
        provider.shutdown()

    spans = _by_name(phoenix.spans(project=project, expected=2))

    assert set(spans) == {"outer", "inner"}
    outer_context = outer.get_span_context()
    assert spans["outer"]["context"]["trace_id"] == format(outer_context.trace_id, "032x")
    assert spans["outer"]["context"]["span_id"] == format(outer_context.span_id, "016x")
    assert spans["outer"]["parent_id"] is None
    assert spans["inner"]["parent_id"] == spans["outer"]["context"]["span_id"]
    assert spans["inner"]["context"]["trace_id"] == spans["outer"]["context"]["trace_id"]
    assert spans["inner"]["attributes"]["check.text"] == "hello"
    assert spans["inner"]["attributes"]["check.count"] == 3


# ---------------------------------------------------------------------------- spanledger's spans


@dataclass(frozen=True)
class Exported:
    """What one round of real calls left in Phoenix, plus what the caller saw."""

    pages: list[dict[str, Any]]
    spans: dict[str, dict[str, Any]]
    local: dict[str, ReadableSpan]
    standin_port: int
    cohere_embed_tokens: int
    jina_rerank_tokens: int
    error: ProviderError
    sink_failures: dict[str, int]


@pytest.fixture(scope="module")
def exported(phoenix: PhoenixServer) -> Exported:
    project = "spanledger-e2e"
    provider, local = _tracer_provider(phoenix, project)
    exporter = OtelExporter(tracer_provider=provider)
    recorder = spanledger.Recorder([exporter])
    try:
        with StandIn() as standin, httpx.Client(trust_env=False, timeout=10.0) as http:
            common: dict[str, Any] = {"api_key": "test-key", "http_client": http}
            cohere, jina = standin.base_url("cohere"), standin.base_url("jina")
            with (
                spanledger.use(recorder),
                provider.get_tracer("test").start_as_current_span("request"),
            ):
                with CohereEmbeddings("embed-v4.0", base_url=cohere, **common) as embedder:
                    cohere_embed = embedder.embed(TEXTS, input_type="document")
                with TEIEmbeddings(
                    "BAAI/bge-small-en-v1.5", base_url=standin.base_url("tei"), **common
                ) as embedder:
                    embedder.embed(TEXTS)
                with CohereEmbeddings("usage-missing", base_url=cohere, **common) as embedder:
                    embedder.embed(TEXTS)
                with CohereReranker("rerank-v3.5", base_url=cohere, **common) as reranker:
                    reranker.rerank(QUERY, DOCS, top_k=2)
                with JinaReranker(
                    "jina-reranker-v2-base-multilingual", base_url=jina, **common
                ) as reranker:
                    jina_rerank = reranker.rerank(QUERY, DOCS)
                with (
                    CohereReranker("fail-429", base_url=cohere, **common) as reranker,
                    pytest.raises(ProviderError) as failure,
                ):
                    reranker.rerank(QUERY, DOCS)
            standin_port = int(standin.url.rsplit(":", 1)[1])
        assert provider.force_flush(timeout_millis=15_000)
        pages = phoenix.wait_for_pages(project, expected=1 + len(PROVIDER_SPANS))
    finally:
        provider.shutdown()

    assert cohere_embed.usage is not None
    assert cohere_embed.usage.input_tokens is not None
    assert jina_rerank.usage is not None
    assert jina_rerank.usage.input_tokens is not None
    return Exported(
        pages=pages,
        spans=_by_name([span for page in pages for span in page["data"]]),
        local={span.name: span for span in local.get_finished_spans()},
        standin_port=standin_port,
        cohere_embed_tokens=cohere_embed.usage.input_tokens,
        jina_rerank_tokens=jina_rerank.usage.input_tokens,
        error=failure.value,
        sink_failures={name: stats.failed for name, stats in recorder.stats.items()},
    )


def test_the_exporter_never_failed(exported: Exported) -> None:
    assert exported.sink_failures == {"0:OtelExporter": 0}


def test_one_span_per_call_named_operation_and_model(exported: Exported) -> None:
    assert sorted(exported.spans) == sorted(["request", *PROVIDER_SPANS])


def test_every_call_span_is_a_child_of_the_request_span(exported: Exported) -> None:
    request = exported.spans["request"]
    assert request["parent_id"] is None
    for name in PROVIDER_SPANS:
        span = exported.spans[name]
        assert span["parent_id"] == request["context"]["span_id"], name
        assert span["context"]["trace_id"] == request["context"]["trace_id"], name


def test_call_spans_are_client_spans(exported: Exported) -> None:
    """Phoenix's REST API does not return the OTel span kind: checked on the provider's copy."""
    for name in PROVIDER_SPANS:
        local = exported.local[name]
        assert local.kind is SpanKind.CLIENT, name
        context = local.get_span_context()
        assert context is not None
        assert exported.spans[name]["context"]["span_id"] == format(context.span_id, "016x")


def test_call_identity_attributes(exported: Exported) -> None:
    for name, (operation, provider, model) in EXPECTED_IDENTITY.items():
        attributes = exported.spans[name]["attributes"]
        assert attributes["gen_ai.operation.name"] == operation, name
        assert attributes["gen_ai.provider.name"] == provider, name
        assert attributes["gen_ai.request.model"] == model, name
        assert attributes["server.address"] == HOST, name
        assert attributes["server.port"] == exported.standin_port, name


def test_embedding_attributes(exported: Exported) -> None:
    for name in EMBED_SPANS:
        assert exported.spans[name]["attributes"]["spanledger.embedding.input_count"] == len(
            TEXTS
        ), name
    tokens = exported.spans[COHERE_EMBED]["attributes"]["gen_ai.usage.input_tokens"]
    assert type(tokens) is int
    assert tokens == exported.cohere_embed_tokens > 0


@pytest.mark.parametrize("name", [TEI_EMBED, USAGE_MISSING_EMBED])
def test_embedding_usage_absent_when_not_reported(exported: Exported, name: str) -> None:
    """TEI reports no usage, nor does the stand-in for ``usage-missing``: absent, never 0 (and
    Phoenix derives no token count either)."""
    attributes = exported.spans[name]["attributes"]
    assert _usage_keys(attributes) == []
    assert attributes["gen_ai.operation.name"] == "embeddings"


def test_rerank_attributes(exported: Exported) -> None:
    for name in RERANK_SPANS:
        assert exported.spans[name]["attributes"]["spanledger.rerank.document_count"] == len(
            DOCS
        ), name


def test_cohere_rerank_bills_search_units_only(exported: Exported) -> None:
    attributes = exported.spans[COHERE_RERANK]["attributes"]
    assert attributes["spanledger.usage.search_units"] == 1
    assert "gen_ai.usage.input_tokens" not in attributes


def test_jina_rerank_bills_tokens_only(exported: Exported) -> None:
    attributes = exported.spans[JINA_RERANK]["attributes"]
    tokens = attributes["gen_ai.usage.input_tokens"]
    assert type(tokens) is int
    assert tokens == exported.jina_rerank_tokens > 0
    assert "spanledger.usage.search_units" not in attributes


def test_failed_call_is_an_error_span_without_usage(exported: Exported) -> None:
    assert exported.error.category is ErrorCategory.RATE_LIMIT
    span = exported.spans[FAILED_RERANK]
    assert span["status_code"] == "ERROR"
    assert span["attributes"]["error.type"] == "provider_rate_limit"
    assert _usage_keys(span["attributes"]) == []


def test_successful_calls_are_not_error_spans(exported: Exported) -> None:
    for name in SUCCESS_SPANS:
        span = exported.spans[name]
        assert span["status_code"] in {"OK", "UNSET"}, name
        assert "error.type" not in span["attributes"], name


def test_no_payload_reaches_phoenix(exported: Exported) -> None:
    """Inputs, query and documents all carried the sentinel; Phoenix holds none of it."""
    everything = json.dumps(exported.pages)
    assert len(exported.pages[0]["data"]) == 1 + len(PROVIDER_SPANS)
    assert SENTINEL not in everything
    assert SENTINEL not in "".join(span.to_json() for span in exported.local.values())
