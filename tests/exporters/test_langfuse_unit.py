"""LangfuseExporter through a real ``langfuse.Langfuse`` client whose spans stay in memory."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

import spanledger
from spanledger import ProviderError
from spanledger.events import EmbeddingEvent, RerankEvent

from .conftest import (
    SENTINEL,
    LangfuseRig,
    Providers,
    StatusServer,
    embedding_event,
    rerank_event,
)

TYPE = "langfuse.observation.type"
MODEL = "langfuse.observation.model.name"
USAGE = "langfuse.observation.usage_details"
LEVEL = "langfuse.observation.level"
STATUS_MESSAGE = "langfuse.observation.status_message"
INPUT = "langfuse.observation.input"
OUTPUT = "langfuse.observation.output"
METADATA = "langfuse.observation.metadata."


def attributes_of(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def metadata_of(span: ReadableSpan) -> dict[str, Any]:
    return {
        key[len(METADATA) :]: json.loads(str(value))
        for key, value in attributes_of(span).items()
        if key.startswith(METADATA)
    }


def every_value(spans: list[ReadableSpan]) -> str:
    parts = [span.name for span in spans]
    for span in spans:
        parts.extend(f"{key}={value!r}" for key, value in attributes_of(span).items())
        parts.append(str(span.status.description))
    return "\n".join(parts)


# --------------------------------------------------------------------------- embeddings


def test_embedding_observation(langfuse_rig: LangfuseRig, providers: Providers) -> None:
    embedder = providers.embedder("cohere", "embed-v4.0", langfuse_rig.recorder)
    with spanledger.request("r1"):
        embedder.embed(["hello world", "second"], input_type="query")

    span = langfuse_rig.only_span()
    (event,) = langfuse_rig.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is not None
    attributes = attributes_of(span)
    assert span.name == "embeddings embed-v4.0"
    assert attributes[TYPE] == "embedding"
    assert attributes[MODEL] == "embed-v4.0"
    assert json.loads(attributes[USAGE]) == {"input": event.usage.input_tokens}
    assert attributes.get(LEVEL) != "ERROR"
    metadata = metadata_of(span)
    assert metadata["spanledger_call_id"] == event.call_id
    assert metadata["input_count"] == 2
    assert metadata["input_type"] == "query"
    assert metadata["provider"] == "cohere"
    assert metadata["request_id"] == "r1"
    assert metadata["dimensions"] == 16


@pytest.mark.parametrize(
    ("vendor", "model"),
    [("tei", "BAAI/bge-small-en-v1.5"), ("cohere", "usage-missing"), ("openai", "usage-missing")],
)
def test_unreported_usage_sends_no_usage_details(
    langfuse_rig: LangfuseRig, providers: Providers, vendor: str, model: str
) -> None:
    providers.embedder(vendor, model, langfuse_rig.recorder).embed(["some text"])

    (event,) = langfuse_rig.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is None
    attributes = attributes_of(langfuse_rig.only_span())
    assert attributes[TYPE] == "embedding"
    assert USAGE not in attributes  # absent, never {"input": 0}
    assert not any("usage" in key or "cost" in key for key in attributes)


def test_observation_covers_the_live_call(langfuse_rig: LangfuseRig, providers: Providers) -> None:
    providers.embedder("cohere", "slow-200", langfuse_rig.recorder).embed(["a"])

    span = langfuse_rig.only_span()
    assert span.start_time is not None
    assert span.end_time is not None
    assert span.end_time - span.start_time >= 200_000_000


def test_event_without_start_notice_still_becomes_one_observation(
    langfuse_rig: LangfuseRig,
) -> None:
    langfuse_rig.exporter.emit(embedding_event())

    span = langfuse_rig.only_span()
    attributes = attributes_of(span)
    assert attributes[TYPE] == "embedding"
    assert json.loads(attributes[USAGE]) == {"input": 42}
    assert metadata_of(span)["spanledger_call_id"] == "call-emb-1"


# --------------------------------------------------------------------------- reranks


def test_cohere_rerank_is_a_generation_with_search_units(
    langfuse_rig: LangfuseRig, providers: Providers
) -> None:
    providers.reranker("cohere", "rerank-v3.5", langfuse_rig.recorder).rerank(
        "héllo", ["a", "b", "c"], top_k=2
    )

    span = langfuse_rig.only_span()
    (event,) = langfuse_rig.events
    attributes = attributes_of(span)
    assert span.name == "rerank rerank-v3.5"
    assert attributes[TYPE] == "generation"
    assert attributes[MODEL] == "rerank-v3.5"
    assert json.loads(attributes[USAGE]) == {"search_units": 1}
    metadata = metadata_of(span)
    assert metadata["spanledger_call_id"] == event.call_id
    assert metadata["document_count"] == 3
    assert metadata["query_length"] == len("héllo".encode())
    assert metadata["result_count"] == 2
    assert metadata["top_k"] == 2
    assert metadata["operation"] == "rerank"


def test_token_billed_rerank_reports_input_tokens(
    langfuse_rig: LangfuseRig, providers: Providers
) -> None:
    providers.reranker("jina", "jina-reranker-v2", langfuse_rig.recorder).rerank("q", ["a", "b"])

    (event,) = langfuse_rig.events
    assert isinstance(event, RerankEvent)
    assert event.usage is not None
    attributes = attributes_of(langfuse_rig.only_span())
    assert attributes[TYPE] == "generation"
    assert json.loads(attributes[USAGE]) == {"input": event.usage.input_tokens}
    assert "top_k" not in metadata_of(langfuse_rig.only_span())


def test_rerank_without_usage_sends_no_usage_details(
    langfuse_rig: LangfuseRig, providers: Providers
) -> None:
    providers.reranker("cohere", "usage-missing", langfuse_rig.recorder).rerank("q", ["a"])

    assert USAGE not in attributes_of(langfuse_rig.only_span())


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize("operation", ["embeddings", "rerank"])
def test_failure_is_error_level_with_category_and_no_output(
    make_langfuse: Callable[..., LangfuseRig], providers: Providers, operation: str
) -> None:
    rig = make_langfuse(capture_payload=True)
    call = providers.failing_call(operation, rig.recorder)
    with pytest.raises(ProviderError):
        call()

    span = rig.only_span()
    attributes = attributes_of(span)
    assert attributes[LEVEL] == "ERROR"
    assert attributes[STATUS_MESSAGE] == "provider_rate_limit"
    assert OUTPUT not in attributes
    assert USAGE not in attributes
    assert metadata_of(span)["status_code"] == 429
    assert "stand-in error" not in every_value([span])  # the vendor's error body stays out


# --------------------------------------------------------------------------- payload


def test_payload_is_off_by_default(langfuse_rig: LangfuseRig, providers: Providers) -> None:
    extras = {"tag": SENTINEL}
    providers.embedder("cohere", "embed-v4.0", langfuse_rig.recorder).embed(
        [f"text {SENTINEL}"], extras=extras
    )
    providers.reranker("jina", "jina-reranker-v2", langfuse_rig.recorder).rerank(
        f"q {SENTINEL}", [f"doc {SENTINEL}"], return_documents=True, extras=extras
    )
    with pytest.raises(ProviderError):
        providers.embedder("cohere", "fail-429", langfuse_rig.recorder).embed([SENTINEL])

    spans = langfuse_rig.spans()
    assert len(spans) == 3
    assert SENTINEL not in every_value(spans)
    for span in spans:
        assert INPUT not in attributes_of(span)
        assert OUTPUT not in attributes_of(span)


def test_payload_on_sends_input_and_rerank_output_never_vectors(
    make_langfuse: Callable[..., LangfuseRig], providers: Providers
) -> None:
    rig = make_langfuse(capture_payload=True)
    response = providers.embedder("openai", "text-embedding-3-small", rig.recorder).embed(
        [f"text {SENTINEL}", "plain"]
    )
    providers.reranker("jina", "jina-reranker-v2", rig.recorder).rerank(
        f"q {SENTINEL}", [f"doc {SENTINEL}", "other"]
    )

    embedding_span, rerank_span = sorted(rig.spans(), key=lambda span: span.name)
    embedding_attributes = attributes_of(embedding_span)
    assert json.loads(embedding_attributes[INPUT]) == [f"text {SENTINEL}", "plain"]
    assert OUTPUT not in embedding_attributes  # the output of an embedding is vectors: never sent
    text = every_value([embedding_span, rerank_span])
    for vector in response.vectors:
        for value in vector[:4]:
            assert repr(value) not in text
    rerank_attributes = attributes_of(rerank_span)
    assert json.loads(rerank_attributes[INPUT]) == {
        "query": f"q {SENTINEL}",
        "documents": [f"doc {SENTINEL}", "other"],
    }
    results = json.loads(rerank_attributes[OUTPUT])
    assert sorted(result["index"] for result in results) == [0, 1]


def test_over_cap_payload_is_truncated_with_marker(
    make_langfuse: Callable[..., LangfuseRig],
) -> None:
    rig = make_langfuse(capture_payload=True, payload_cap=256)
    rig.exporter.emit(embedding_event(inputs=["é" * 1000]))

    value = str(attributes_of(rig.only_span())[INPUT])
    assert len(value.encode()) <= 256
    assert value.endswith("…[truncated, 2004 bytes total]")


def test_payload_within_cap_by_its_own_measure_stays_within_cap_on_the_wire(
    make_langfuse: Callable[..., LangfuseRig],
) -> None:
    rig = make_langfuse(capture_payload=True, payload_cap=256)
    rig.exporter.emit(embedding_event(inputs=["é" * 120]))  # 244 bytes as compact UTF-8 JSON

    value = str(attributes_of(rig.only_span())[INPUT])
    assert len(value.encode()) <= 256


# --------------------------------------------------------------------------- no network


def test_in_memory_client_sends_nothing_over_the_network(
    make_langfuse: Callable[..., LangfuseRig], providers: Providers
) -> None:
    with StatusServer(200) as backend:
        rig = make_langfuse(base_url=backend.url)
        providers.embedder("cohere", "embed-v4.0", rig.recorder).embed(["a"])
        rig.exporter.emit(rerank_event())
        spans = rig.spans()
        rig.recorder.shutdown()
        rig.client.shutdown()
        seen = backend.seen
    assert len(spans) == 2
    assert seen == []
