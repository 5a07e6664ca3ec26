"""Plain HTTP traffic to the clouds and local servers is told apart by route, host, port, the
body's keys and the model's name, and never read as another vendor's wire."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, Event
from spanledger.capture.vendors import checked_vendors, recognise
from spanledger.recording.facts import EmbedFacts, RerankFacts
from spanledger.recording.facts import request_facts as facts_for

TITAN = {"inputText": "hello", "dimensions": 256}
COHERE_EMBED = {"texts": ["a", "b"], "input_type": "search_document"}
NOVA = {"taskType": "SINGLE_EMBEDDING", "singleEmbeddingParams": {"text": {"value": "hi"}}}
BEDROCK_RERANK = {
    "queries": [{"type": "TEXT", "textQuery": {"text": "q"}}],
    "sources": [
        {"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}}}
        for t in ("a", "b", "c")
    ],
    "rerankingConfiguration": {
        "type": "BEDROCK_RERANKING_MODEL",
        "bedrockRerankingConfiguration": {
            "numberOfResults": 2,
            "modelConfiguration": {
                "modelArn": "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"
            },
        },
    },
}
RT = "https://bedrock-runtime.us-east-1.amazonaws.com"
GEMINI_BATCH = {
    "requests": [
        {"model": "models/gemini-embedding-001", "content": {"parts": [{"text": t}]}}
        for t in ("a", "b")
    ]
}

ROUTES: list[tuple[str, dict[str, Any], str, str]] = [
    (
        f"{RT}/model/amazon.titan-embed-text-v2%3A0/invoke",
        TITAN,
        "bedrock-titan-embed",
        "amazon.titan-embed-text-v2:0",
    ),
    (
        f"{RT}/model/us.cohere.embed-v4%3A0/invoke",
        COHERE_EMBED,
        "bedrock-cohere-embed",
        "cohere.embed-v4:0",
    ),
    (
        f"{RT}/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A%3Afoundation-model%2Fcohere.embed-english-v3"
        "/invoke",
        COHERE_EMBED,
        "bedrock-cohere-embed",
        "cohere.embed-english-v3",
    ),
    (
        f"{RT}/model/amazon.nova-2-multimodal-embeddings-v1%3A0/invoke",
        NOVA,
        "bedrock-nova-embed",
        "amazon.nova-2-multimodal-embeddings-v1:0",
    ),
    (
        f"{RT}/model/cohere.rerank-v3-5%3A0/invoke",
        {"query": "q", "documents": ["a"], "api_version": 2},
        "bedrock-cohere-rerank",
        "cohere.rerank-v3-5:0",
    ),
    (
        "https://bedrock-agent-runtime.us-west-2.amazonaws.com/rerank",
        BEDROCK_RERANK,
        "bedrock-rerank",
        "amazon.rerank-v1:0",
    ),
    (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-embedding-001"
        ":batchEmbedContents",
        GEMINI_BATCH,
        "gemini-batch-embed",
        "gemini-embedding-001",
    ),
    (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-embedding-001:embedContent",
        {"content": {"parts": [{"text": "a"}]}},
        "gemini-embed",
        "gemini-embedding-001",
    ),
    (
        "https://us-central1-aiplatform.googleapis.com/v1beta1/projects/p/locations/us-central1/"
        "publishers/google/models/text-embedding-005:predict",
        {"instances": [{"content": "a"}]},
        "vertex-predict",
        "text-embedding-005",
    ),
    (
        "https://discoveryengine.googleapis.com/v1/projects/p/locations/global/rankingConfigs/"
        "default_ranking_config:rank",
        {
            "model": "semantic-ranker-default-004",
            "query": "q",
            "records": [{"id": "a", "content": "x"}],
        },
        "vertex-rank",
        "semantic-ranker-default-004",
    ),
    (
        "https://res.openai.azure.com/openai/deployments/my-embedder/embeddings?api-version=2024-10-21",
        {"input": ["a"]},
        "azure-deployment-embeddings",
        "my-embedder",
    ),
    (
        "https://res.openai.azure.com/openai/v1/embeddings",
        {"model": "my-embedder", "input": ["a"]},
        "azure-v1-embeddings",
        "my-embedder",
    ),
    (
        "https://api.mistral.ai/v1/embeddings",
        {"model": "mistral-embed", "input": ["a"]},
        "mistral-embeddings",
        "mistral-embed",
    ),
    (
        "http://localhost:11434/api/embed",
        {"model": "nomic-embed-text", "input": "a"},
        "ollama-embed",
        "nomic-embed-text",
    ),
    (
        "http://gpu-box:9000/api/embeddings",
        {"model": "nomic-embed-text", "prompt": "a"},
        "ollama-legacy-embeddings",
        "nomic-embed-text",
    ),
    (
        "http://ollama:11434/v1/embeddings",
        {"model": "nomic-embed-text", "input": ["a"]},
        "ollama-v1-embeddings",
        "nomic-embed-text",
    ),
    (
        "https://my-proxy.internal/v1/embeddings",
        {"model": "voyage-3.5", "input": ["a"]},
        "voyageai-embeddings",
        "voyage-3.5",
    ),
    (
        "https://my-proxy.internal/v1/embeddings",
        {"model": "mistral-embed", "input": ["a"], "output_dimension": 512},
        "mistral-embeddings",
        "mistral-embed",
    ),
    (
        "https://proj.eastus.models.ai.azure.com/v1/rerank",
        {"model": "Cohere-rerank-v3.5", "query": "q", "documents": ["a"], "top_n": 1},
        "cohere-rerank",
        "Cohere-rerank-v3.5",
    ),
    (
        "https://res.services.ai.azure.com/v2/rerank",
        {"model": "Cohere-rerank-v3.5", "query": "q", "documents": ["a"]},
        "cohere-rerank",
        "Cohere-rerank-v3.5",
    ),
]


@pytest.mark.parametrize(("url", "body", "name", "model"), ROUTES, ids=[r[2] for r in ROUTES])
def test_each_route_is_its_endpoint_with_the_model_it_names(
    url: str, body: dict[str, Any], name: str, model: str
) -> None:
    parsed = httpx.URL(url)
    endpoint = recognise(parsed, body, {})
    assert endpoint is not None
    assert endpoint.name == name
    assert facts_for(endpoint, body, parsed).model == model


def test_bedrock_rerank_reads_query_documents_and_top_k_from_their_nested_places() -> None:
    url = httpx.URL("https://bedrock-agent-runtime.us-west-2.amazonaws.com/rerank")
    endpoint = recognise(url, BEDROCK_RERANK, {})
    assert endpoint is not None
    facts = facts_for(endpoint, BEDROCK_RERANK, url)
    assert isinstance(facts, RerankFacts)
    assert (facts.document_count, facts.top_k, facts.query_length) == (3, 2, 1)
    assert facts.documents == ["a", "b", "c"]
    assert facts.extras == {}


def test_gemini_batch_counts_one_input_per_request_entry() -> None:
    url = httpx.URL(ROUTES[6][0])
    endpoint = recognise(url, GEMINI_BATCH, {})
    assert endpoint is not None
    facts = facts_for(endpoint, GEMINI_BATCH, url)
    assert isinstance(facts, EmbedFacts)
    assert (facts.input_count, facts.inputs) == (2, ["a", "b"])


NOT_RETRIEVAL = [
    (f"{RT}/model/anthropic.claude-3-haiku/invoke", {"messages": [], "max_tokens": 5}),
    (
        f"{RT}/model/amazon.titan-text-express-v1/invoke",
        {"inputText": "hello", "textGenerationConfig": {"maxTokenCount": 10}},
    ),
    (f"{RT}/model/amazon.nova-lite-v1%3A0/converse", {"messages": []}),
    (
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
        {"contents": []},
    ),
    (
        "https://us-central1-aiplatform.googleapis.com/v1/projects/p/locations/l/publishers/google/"
        "models/imagen-3:predict",
        {"instances": [{"prompt": "a cat"}]},
    ),
    ("http://localhost:11434/api/chat", {"model": "llama3", "messages": []}),
    ("http://localhost:11434/api/generate", {"model": "llama3", "prompt": "hi"}),
]


@pytest.mark.parametrize(("url", "body"), NOT_RETRIEVAL)
def test_other_calls_to_the_same_services_are_not_recognised(
    url: str, body: dict[str, Any]
) -> None:
    assert recognise(httpx.URL(url), body, {}) is None


def test_a_declared_vendor_wins_over_the_port() -> None:
    url = httpx.URL("http://localhost:11434/v1/embeddings")
    body = {"model": "m", "input": ["a"]}
    declared = recognise(url, body, checked_vendors({"localhost": "openai"}))
    by_port = recognise(url, body, {})
    assert declared is not None
    assert by_port is not None
    assert (declared.name, by_port.name) == ("openai-embeddings", "ollama-v1-embeddings")


def ollama_legacy(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"embedding": [0.1, 0.2, 0.3]})


def test_a_legacy_ollama_embed_is_a_successful_ollama_call_not_a_failed_openai_one() -> None:
    events: list[Event] = []
    client = httpx.Client(
        transport=spanledger.instrumentation.transport(httpx.MockTransport(ollama_legacy))
    )
    with spanledger.use(spanledger.Recorder([events.append])), client:
        answer = client.post(
            "http://gpu-box:8080/api/embeddings", json={"model": "all-minilm", "prompt": "hi"}
        )
    assert answer.json() == {"embedding": [0.1, 0.2, 0.3]}
    (event,) = events
    assert not isinstance(event, EmbeddingFailedEvent)
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model, event.input_count) == ("ollama", "all-minilm", 1)
    assert (event.usage, event.dimensions) == (None, 3)
    assert event.billing == "local"


def voyage_like(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "object": "list",
            "data": [{"object": "embedding", "index": 0, "embedding": [0.5, 0.5]}],
            "model": "voyage-3.5",
            "usage": {"total_tokens": 6},
        },
    )


def test_a_voyage_model_sent_to_a_proxy_is_voyage_with_its_usage() -> None:
    events: list[Event] = []
    client = httpx.Client(
        transport=spanledger.instrumentation.transport(httpx.MockTransport(voyage_like))
    )
    with spanledger.use(spanledger.Recorder([events.append])), client:
        client.post(
            "https://llm-proxy.example/v1/embeddings", json={"model": "voyage-3.5", "input": ["a"]}
        )
    (event,) = events
    assert isinstance(event, EmbeddingEvent)
    assert event.provider == "voyageai"
    assert event.usage == spanledger.EmbeddingUsage(input_tokens=6)
