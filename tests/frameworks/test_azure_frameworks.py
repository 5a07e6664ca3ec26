"""LangChain's ``AzureOpenAIEmbeddings`` (langchain-openai) under the process-wide switch,
against the stand-in's Azure prefix: it builds its own ``openai.AzureOpenAI`` /
``AsyncAzureOpenAI``, so only the switch reaches it. Each call is recorded as
``azure.ai.openai`` with the deployment as the model, the stand-in's figures, and the
vectors LangChain returns unchanged (it asks for base64 and decodes them itself)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from langchain_openai import AzureOpenAIEmbeddings

import spanledger
from spanledger import EmbeddingEvent, EmbeddingUsage
from spanledger.testing import StandIn
from tests.frameworks.conftest import tokens
from tests.frameworks.privacy import Kept, Recording

API_KEY = "azure-langchain-key-SENTINEL-61b0"
SENTINEL = "SENTINEL-lc-azure-9d3a"
TEXTS = [f"ticks feed on blood {SENTINEL}", f"deer carry ticks {SENTINEL}"]
QUERY = f"what do ticks eat {SENTINEL}"
PRIVATE = (SENTINEL, API_KEY)


def openai_on() -> None:
    spanledger.instrument(sdks=["openai"])


@pytest.fixture
def switched(standin: StandIn, recording: Recording) -> Iterator[Kept]:
    standin.reset()
    with recording.switched(openai_on) as kept:
        yield kept


def embedder(standin: StandIn) -> AzureOpenAIEmbeddings:
    options: dict[str, Any] = {  # the documented aliases, which the typed signature lacks
        "azure_deployment": "lc-embedder",
        "api_key": API_KEY,
        "api_version": "2024-10-21",
    }
    return AzureOpenAIEmbeddings(
        azure_endpoint=standin.base_url("azure.ai.openai"),
        check_embedding_ctx_length=False,  # no tiktoken download offline
        max_retries=0,
        **options,
    )


def test_embed_documents_and_query(standin: StandIn, switched: Kept, recording: Recording) -> None:
    model = embedder(standin)
    vectors = model.embed_documents(TEXTS)
    query = model.embed_query(QUERY)

    assert [r.path for r in standin.requests] == ["/openai/deployments/lc-embedder/embeddings"] * 2
    assert len(vectors) == len(TEXTS)
    assert len(query) == len(vectors[0])
    documents, asked = switched.events
    for event, texts in ((documents, TEXTS), (asked, [QUERY])):
        assert isinstance(event, EmbeddingEvent)
        assert (event.provider, event.model) == ("azure.ai.openai", "lc-embedder")
        assert event.response_model == "text-embedding-3-small"
        assert event.input_count == len(texts)
        assert event.dimensions == len(query)
        assert event.usage == EmbeddingUsage(input_tokens=sum(map(tokens, texts)))
    recording.assert_private(switched.events)


async def test_async_embed_documents(
    standin: StandIn, switched: Kept, recording: Recording
) -> None:
    vectors = await embedder(standin).aembed_documents(TEXTS)

    assert len(vectors) == len(TEXTS)
    [event] = switched.events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.model) == ("azure.ai.openai", "lc-embedder")
    assert event.usage == EmbeddingUsage(input_tokens=sum(map(tokens, TEXTS)))
    recording.assert_private(switched.events)


def test_vectors_are_unchanged_by_recording(standin: StandIn, recording: Recording) -> None:
    vectors, _ = recording.run(lambda: embedder(standin).embed_documents(TEXTS), openai_on)
    assert len(vectors) == len(TEXTS)
