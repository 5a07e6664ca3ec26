"""LiteLLM's cloud and local routes, recorded by ``instrument(http=True)`` (which turns the SDK
switch on too), against the loopback stand-in: one event per HTTP call LiteLLM makes, retries
counted, provider and model as the wire names them, the stand-in's figures, LiteLLM's result
unchanged, and neither the caller's text nor the key anywhere.

Which path records each route is LiteLLM's choice: ``azure/`` and ``mistral/`` go through the
OpenAI SDK (the SDK switch: an Azure client is Azure's, a Mistral model Mistral's), the others
through LiteLLM's own httpx handler (``http=True``); ``bedrock/`` signs with SigV4 and sends one
Titan request per text. Vertex's access token is stubbed (LiteLLM has no offline credential);
its ``api_base`` is the model's whole URL, to which LiteLLM appends ``:predict``.

LiteLLM's own accounting, beside ours (asserted, so a change in LiteLLM shows): Gemini's usage
is LiteLLM's local estimate, not the ``usageMetadata`` the response carried; Vertex is priced by
a character count LiteLLM makes itself; Bedrock's rerank, which reports no usage, gets an
invented ``search_units: 1`` and a price from LiteLLM, where the event has none.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download

import litellm
import pytest
from litellm.exceptions import RateLimitError
from litellm.llms.vertex_ai.vertex_llm_base import VertexBase

import spanledger
from spanledger import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    ErrorCategory,
    Event,
    RerankEvent,
)
from spanledger.testing import Reply, Route, StandIn, gemini_embeddings
from tests.frameworks.conftest import tokens
from tests.frameworks.privacy import Recording

API_KEY = "sk-litellm-cloud-key-93fa"
AWS_SECRET = "aws-secret-SENTINEL-0b7d"
SENTINEL = "SENTINEL-litellm-clouds-4c2e"
QUERY = f"what do ticks eat {SENTINEL}"
TEXTS = [f"ticks feed on blood {SENTINEL}", f"clocks tick {SENTINEL}", f"deer {SENTINEL}"]
AWS: dict[str, Any] = {
    "aws_access_key_id": "AKIAFAKEKEY0000",
    "aws_secret_access_key": AWS_SECRET,
    "aws_region_name": "us-west-2",
}
VERTEX_MODEL = "/v1/projects/rag/locations/us-central1/publishers/google/models/text-embedding-005"
RERANK_ARN = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"
PRIVATE = (SENTINEL, API_KEY, AWS_SECRET)


@pytest.fixture
def vertex_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM asks google.auth for a token; offline, it gets a fake one."""
    monkeypatch.setattr(
        VertexBase, "_ensure_access_token", lambda self, *args, **kwargs: ("fake-token", "rag")
    )


def forget_clients() -> None:
    """Drop the SDK clients LiteLLM keeps between calls."""
    litellm.in_memory_llm_clients_cache.flush_cache()  # type: ignore[no-untyped-call]


def http_on() -> None:
    spanledger.instrument(http=True)


def recorded(recording: Recording, work: Callable[[], Any]) -> tuple[Any, list[Event]]:
    """``work`` recorded, checked against the same work unrecorded: the events it made, one per
    HTTP call, none carrying the inputs or a key, nor any log line."""
    return recording.run(work, http_on, comparable=_shape)


def _shape(result: Any) -> Any:
    if hasattr(result, "data"):  # an embedding response: the vectors
        return [item["embedding"] for item in result.data]
    return [(item["index"], item["relevance_score"]) for item in result.results]


def embedding(event: Event) -> EmbeddingEvent:
    assert isinstance(event, EmbeddingEvent)
    return event


def expected(texts: list[str]) -> EmbeddingUsage:
    return EmbeddingUsage(input_tokens=sum(map(tokens, texts)))


def azure(standin: StandIn) -> Any:
    return litellm.embedding(
        model="azure/rag-embedder",
        input=TEXTS,
        api_base=standin.base_url("azure.ai.openai"),
        api_key=API_KEY,
        api_version="2024-10-21",
    )


def test_azure_deployment(standin: StandIn, recording: Recording) -> None:
    result, events = recorded(recording, lambda: azure(standin))
    [request] = standin.requests
    assert request.path == "/openai/deployments/rag-embedder/embeddings"
    event = embedding(*events)
    assert (event.provider, event.model) == ("azure.ai.openai", "rag-embedder")
    assert event.response_model == result.model == "text-embedding-3-small"
    assert event.input_count == len(TEXTS)
    assert event.usage == expected(TEXTS)
    assert result.usage.prompt_tokens == expected(TEXTS).input_tokens


def _azure_rate_limited() -> Route:
    body = {"error": {"code": "429", "message": "Rate limit is exceeded."}}
    return Route(
        "azure.ai.openai",
        "/openai/deployments/{deployment}/embeddings",
        lambda request: Reply(429, body, {"retry-after-ms": "1", "retry-after": "0"}),
    )


def test_azure_429s_the_openai_sdk_retries_are_an_event_each(
    standin: StandIn, recording: Recording
) -> None:
    """LiteLLM leaves the OpenAI SDK's two retries on: a 429 then an answer is two events;
    429s throughout are three, the last one not retried, and LiteLLM's RateLimitError.

    LiteLLM's cached client is dropped first: one it used before the switch holds the SDK's
    ``with_raw_response`` (a cached property) bound to the unpatched ``create``, so the SDK
    switch never sees its calls and only ``http=True`` records them, an event per attempt
    each on its own, not linked as retries (``test_a_client_litellm_used_before_...``)."""
    forget_clients()
    standin.reset()
    with recording.switched(http_on) as kept:
        standin.route(_azure_rate_limited(), times=1)
        azure(standin)
        standin.route(_azure_rate_limited())
        with pytest.raises(RateLimitError):
            azure(standin)

    assert len(standin.requests) == len(kept.events) == 2 + 3
    first, answered, *limited = kept.events
    assert isinstance(first, EmbeddingFailedEvent)
    assert first.retried
    assert embedding(answered).usage == expected(TEXTS)
    assert answered.logical_call_id == first.call_id
    assert [(e.status_code, e.retried) for e in limited] == [  # type: ignore[union-attr]
        (429, True),
        (429, True),
        (429, False),
    ]
    assert all(
        isinstance(e, EmbeddingFailedEvent)
        and (e.provider, e.model, e.error_category)
        == ("azure.ai.openai", "rag-embedder", ErrorCategory.RATE_LIMIT)
        for e in limited
    )
    recording.assert_private(kept.events)


def test_a_client_litellm_used_before_the_switch_is_recorded_per_request(
    standin: StandIn, recording: Recording
) -> None:
    forget_clients()
    standin.reset()
    azure(standin)  # LiteLLM caches this client, and the SDK its ``with_raw_response``
    standin.reset()
    with recording.switched(http_on) as kept:
        standin.route(_azure_rate_limited(), times=1)
        azure(standin)

    assert len(standin.requests) == len(kept.events) == 2
    limited, answered = kept.events
    assert isinstance(limited, EmbeddingFailedEvent)
    assert (limited.provider, limited.model, limited.status_code) == (
        "azure.ai.openai",
        "rag-embedder",
        429,
    )
    assert embedding(answered).usage == expected(TEXTS)
    assert limited.retried is False  # not linked as retries
    assert answered.logical_call_id is None
    recording.assert_private(kept.events)


def test_mistral(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.embedding(
            model="mistral/mistral-embed",
            input=TEXTS,
            api_base=standin.base_url("mistral_ai") + "/v1",
            api_key=API_KEY,
        )

    result, events = recorded(recording, work)
    event = embedding(*events)
    assert (event.provider, event.model, event.response_model) == (
        "mistral_ai",
        "mistral-embed",
        "mistral-embed",
    )
    assert event.usage == expected(TEXTS)
    assert result.usage.prompt_tokens == expected(TEXTS).input_tokens


def gemini(standin: StandIn) -> Any:
    return litellm.embedding(
        model="gemini/gemini-embedding-001",
        input=TEXTS,
        api_base=standin.base_url("gcp.gemini") + "/v1beta",
        api_key=API_KEY,
    )


def test_gemini(standin: StandIn, recording: Recording) -> None:
    result, events = recorded(recording, lambda: gemini(standin))
    [request] = standin.requests
    assert request.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    event = embedding(*events)
    assert (event.provider, event.model) == ("gcp.gemini", "gemini-embedding-001")
    assert event.usage == expected(TEXTS)
    # LiteLLM's usage is its own estimate, not the usageMetadata the response carried
    assert result.usage.prompt_tokens != expected(TEXTS).input_tokens


def test_gemini_without_usage_is_unknown_while_litellm_counts(
    standin: StandIn, recording: Recording
) -> None:
    standin.route(gemini_embeddings(report_usage=False))
    bare = gemini(standin)
    with recording.switched(http_on) as kept:
        result = gemini(standin)
    assert _shape(result) == _shape(bare)
    event = embedding(*kept.events)
    assert event.usage is None
    assert event.malformed_usage == ()
    assert result.usage.prompt_tokens > 0  # LiteLLM reports a figure the wire never had
    recording.assert_private(kept.events)


def test_gemini_429_is_one_attempt(standin: StandIn, recording: Recording) -> None:
    standin.reset()
    standin.route(gemini_embeddings().failing(429, retry_after=1))
    with recording.switched(http_on) as kept, pytest.raises(RateLimitError):
        gemini(standin)
    [event] = kept.events
    assert len(standin.requests) == 1
    assert isinstance(event, EmbeddingFailedEvent)
    assert (event.provider, event.status_code, event.retry_after) == ("gcp.gemini", 429, 1.0)
    assert event.error_category == ErrorCategory.RATE_LIMIT
    recording.assert_private(kept.events)


def test_vertex_ai(standin: StandIn, recording: Recording, vertex_token: None) -> None:
    def work() -> Any:
        return litellm.embedding(
            model="vertex_ai/text-embedding-005",
            input=TEXTS,
            api_base=standin.base_url("gcp.vertex_ai") + VERTEX_MODEL,
            vertex_project="rag",
            vertex_location="us-central1",
        )

    result, events = recorded(recording, work)
    [request] = standin.requests
    assert request.path == VERTEX_MODEL + ":predict"
    event = embedding(*events)
    assert (event.provider, event.model) == ("gcp.vertex_ai", "text-embedding-005")
    # Google bills characters, whitespace left out: the stand-in reports them as Vertex does,
    # and the event carries the reported figure beside the tokens
    billed = sum(len("".join(text.split())) for text in TEXTS)
    assert event.usage == expected(TEXTS).model_copy(update={"billable_characters": billed})
    assert result.usage.prompt_tokens == expected(TEXTS).input_tokens
    # LiteLLM prices Vertex by the characters it counted itself, not by what the wire reported
    characters = result.usage.prompt_tokens_details.character_count
    assert characters == billed


def test_ollama(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.embedding(
            model="ollama/nomic-embed-text", input=TEXTS, api_base=standin.base_url("ollama")
        )

    result, events = recorded(recording, work)
    [request] = standin.requests
    assert request.path == "/api/embed"
    event = embedding(*events)
    assert (event.provider, event.model, event.billing) == ("ollama", "nomic-embed-text", "local")
    assert event.usage == expected(TEXTS)
    assert result._hidden_params["response_cost"] == 0.0  # a local model: free, rightly


def test_bedrock_titan_one_request_per_text(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.embedding(
            model="bedrock/amazon.titan-embed-text-v2:0",
            input=TEXTS,
            api_base=standin.base_url("aws.bedrock"),
            **AWS,
        )

    result, events = recorded(recording, work)
    titan = "/model/amazon.titan-embed-text-v2%3A0/invoke"
    assert [r.path for r in standin.requests] == [titan] * 3
    assert [embedding(e).usage for e in events] == [expected([text]) for text in TEXTS]
    assert {(e.provider, e.model) for e in events} == {
        ("aws.bedrock", "amazon.titan-embed-text-v2:0")
    }
    assert result.usage.prompt_tokens == expected(TEXTS).input_tokens  # LiteLLM's sum


def test_bedrock_rerank_reports_no_usage_litellm_invents_one(
    standin: StandIn, recording: Recording
) -> None:
    def work() -> Any:
        return litellm.rerank(
            model=f"bedrock/{RERANK_ARN}",
            query=QUERY,
            documents=TEXTS,
            top_n=2,
            api_base=standin.base_url("aws.bedrock"),
            **AWS,
        )

    result, events = recorded(recording, work)
    [request] = standin.requests
    assert request.path == "/rerank"
    [event] = events
    assert isinstance(event, RerankEvent)
    assert (event.provider, event.model) == ("aws.bedrock", "amazon.rerank-v1:0")
    assert (event.document_count, event.top_k, event.result_count) == (3, 2, 2)
    assert event.usage is None  # Bedrock's Rerank reports none
    assert event.billing == "queries"
    assert result.meta["billed_units"]["search_units"] == 1  # LiteLLM's, not the wire's
    assert result._hidden_params["response_cost"] > 0


async def test_azure_async_goes_through_the_openai_sdk_too(
    standin: StandIn, recording: Recording
) -> None:
    standin.reset()
    with recording.switched(http_on) as kept:
        result = await litellm.aembedding(
            model="azure/rag-embedder",
            input=TEXTS,
            api_base=standin.base_url("azure.ai.openai"),
            api_key=API_KEY,
            api_version="2024-10-21",
        )
    event = embedding(*kept.events)
    assert (event.provider, event.model) == ("azure.ai.openai", "rag-embedder")
    assert event.usage == expected(TEXTS)
    assert len(result.data) == len(TEXTS)
    recording.assert_private(kept.events)
