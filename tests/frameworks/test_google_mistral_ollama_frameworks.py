"""The frameworks' Google, Mistral and Ollama components, recorded, against the stand-in: one
event per HTTP call, the figures the stand-in sent, the framework's result unchanged, no input
text and no key on any event.

LangChain's ``GoogleGenerativeAIEmbeddings`` and ``VertexAIEmbeddings``, LlamaIndex's
``GoogleGenAIEmbedding`` and both ``Ollama`` embedders build SDK clients inside: the SDK switch
(``spanledger.instrument()``) reaches them. LangChain's ``MistralAIEmbeddings`` posts with plain
httpx, and LiteLLM with its own handlers (its ``mistral/`` route through the OpenAI SDK's
httpx2): ``http=True`` records those.

langchain-google-vertexai (through google-cloud-aiplatform) and llama-index-embeddings-google-genai
cap google-genai below its newest major, so the newest-releases lane, which runs google-genai's
newest, cannot install them: each is imported inside its own test, which that lane leaves out.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # MistralAIEmbeddings: its dummy tokenizer

import google.oauth2.credentials
import litellm
import pytest
from google.genai import types as gtypes
from langchain_google_genai import GoogleGenerativeAIEmbeddings
from langchain_mistralai import MistralAIEmbeddings
from langchain_ollama import OllamaEmbeddings
from litellm.llms.vertex_ai.vertex_llm_base import VertexBase
from llama_index.embeddings.ollama import OllamaEmbedding  # type: ignore[import-untyped]

import spanledger
from spanledger import EmbeddingEvent, Event
from spanledger.testing import StandIn
from tests.frameworks.conftest import tokens
from tests.frameworks.privacy import Recording

API_KEY = "sk-SENTINEL-frameworks-key-6a1f"
SENTINEL = "SENTINEL-cloud-frameworks-93b0"
TEXTS = [f"ticks feed on blood {SENTINEL}", f"the clock ticks {SENTINEL}"]
TOTAL = sum(map(tokens, TEXTS))
PRIVATE = (SENTINEL, API_KEY)


def run(
    recording: Recording, work: Callable[[], Any], *, http: bool = False
) -> tuple[Any, list[EmbeddingEvent]]:
    """``work`` recorded (the SDK switch, and other code's HTTP with ``http``), checked against
    the same work unrecorded: one embedding event per HTTP call, none carrying a text or the
    key, nor any log line."""
    result, events = recording.run(
        work, lambda: spanledger.instrument(http=http), comparable=_comparable
    )
    assert all(isinstance(event, EmbeddingEvent) for event in events)
    return result, [event for event in events if isinstance(event, EmbeddingEvent)]


def _comparable(result: Any) -> Any:
    if hasattr(result, "data"):  # LiteLLM's response: the vectors
        return [item["embedding"] for item in result.data]
    return result


def _one(events: list[Event] | list[EmbeddingEvent], provider: str) -> EmbeddingEvent:
    [event] = events
    assert isinstance(event, EmbeddingEvent)
    assert event.provider == provider
    return event


def vertex_credentials() -> Any:
    return google.oauth2.credentials.Credentials(token=API_KEY)  # type: ignore[no-untyped-call]


def test_langchain_google_genai_embeddings(standin: StandIn, recording: Recording) -> None:
    embedder = GoogleGenerativeAIEmbeddings(
        model="gemini-embedding-001",
        api_key=API_KEY,
        base_url=standin.base_url("gcp.gemini"),
    )
    vectors, events = run(recording, lambda: embedder.embed_documents(TEXTS))
    assert len(vectors) == 2
    event = _one(events, "gcp.gemini")
    assert (event.model, event.input_count) == ("gemini-embedding-001", 2)
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL
    assert event.input_type == "RETRIEVAL_DOCUMENT"


def test_langchain_google_genai_async_query(standin: StandIn, recording: Recording) -> None:
    embedder = GoogleGenerativeAIEmbeddings(
        model="gemini-embedding-001",
        api_key=API_KEY,
        base_url=standin.base_url("gcp.gemini"),
    )
    vector, events = run(recording, lambda: asyncio.run(embedder.aembed_query(TEXTS[0])))
    assert len(vector) == 16
    event = _one(events, "gcp.gemini")
    assert event.usage is not None
    assert event.usage.input_tokens == tokens(TEXTS[0])


@pytest.fixture
def vertex_base_url(standin: StandIn, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", standin.base_url("gcp.vertex_ai"))


def test_langchain_vertexai_embeddings(
    standin: StandIn, recording: Recording, vertex_base_url: None
) -> None:
    from langchain_google_vertexai import VertexAIEmbeddings

    embedder = VertexAIEmbeddings(  # type: ignore[call-arg]
        model_name="text-embedding-005",
        project="proj",
        location="us-central1",
        credentials=vertex_credentials(),
    )
    vectors, events = run(recording, lambda: embedder.embed_documents(TEXTS))
    assert len(vectors) == 2
    event = _one(events, "gcp.vertex_ai")
    assert (event.model, event.input_count) == ("text-embedding-005", 2)
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL  # each prediction's token_count, summed
    assert standin.requests[-1].path.endswith(":predict")


def test_llamaindex_google_genai_embedding(standin: StandIn, recording: Recording) -> None:
    from llama_index.embeddings.google_genai import (  # type: ignore[import-untyped]
        GoogleGenAIEmbedding,
    )

    embedder = GoogleGenAIEmbedding(
        model_name="text-embedding-004",
        api_key=API_KEY,
        http_options=gtypes.HttpOptions(base_url=standin.base_url("gcp.gemini")),
    )
    vectors, events = run(recording, lambda: embedder.get_text_embedding_batch(TEXTS))
    assert len(vectors) == 2
    event = _one(events, "gcp.gemini")
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL


def test_langchain_mistralai_embeddings(standin: StandIn, recording: Recording) -> None:
    embedder = MistralAIEmbeddings(  # type: ignore[call-arg]
        model="mistral-embed",
        api_key=API_KEY,
        endpoint=standin.base_url("mistral_ai") + "/v1/",
        max_retries=1,
    )
    vectors, events = run(recording, lambda: embedder.embed_documents(TEXTS), http=True)
    assert len(vectors) == 2
    event = _one(events, "mistral_ai")
    assert (event.model, event.response_model, event.input_count) == (
        "mistral-embed",
        "mistral-embed",
        2,
    )
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_langchain_ollama_embeddings(
    is_async: bool, standin: StandIn, recording: Recording
) -> None:
    def work() -> Any:  # a new embedder each time: its async client keeps its first loop
        embedder = OllamaEmbeddings(model="nomic-embed-text", base_url=standin.base_url("ollama"))
        if is_async:
            return asyncio.run(embedder.aembed_documents(TEXTS))
        return embedder.embed_documents(TEXTS)

    vectors, events = run(recording, work)
    assert len(vectors) == 2
    event = _one(events, "ollama")
    assert (event.model, event.input_count, event.dimensions) == ("nomic-embed-text", 2, 16)
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL


def test_llamaindex_ollama_embedding(standin: StandIn, recording: Recording) -> None:
    embedder = OllamaEmbedding(model_name="nomic-embed-text", base_url=standin.base_url("ollama"))
    vectors, events = run(recording, lambda: embedder.get_text_embedding_batch(TEXTS))
    assert len(vectors) == 2
    event = _one(events, "ollama")
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL


def _litellm(model: str, api_base: str, **options: Any) -> Callable[[], Any]:
    return lambda: litellm.embedding(
        model=model, input=TEXTS, api_base=api_base, api_key=API_KEY, **options
    )


def test_litellm_gemini(standin: StandIn, recording: Recording) -> None:
    work = _litellm("gemini/gemini-embedding-001", standin.base_url("gcp.gemini") + "/v1beta")
    result, events = run(recording, work, http=True)
    assert len(result.data) == 2
    event = _one(events, "gcp.gemini")
    assert (event.model, event.input_count) == ("gemini-embedding-001", 2)
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL


def test_litellm_vertex_ai(
    standin: StandIn, recording: Recording, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        VertexBase, "_ensure_access_token", lambda self, *args, **kwargs: (API_KEY, "proj")
    )
    model = "/v1/projects/proj/locations/us-central1/publishers/google/models/text-embedding-005"
    work = _litellm(
        "vertex_ai/text-embedding-005",
        standin.base_url("gcp.vertex_ai") + model,  # LiteLLM appends only ":predict"
        vertex_project="proj",
        vertex_location="us-central1",
    )
    result, events = run(recording, work, http=True)
    assert len(result.data) == 2
    event = _one(events, "gcp.vertex_ai")
    assert (event.model, event.input_count) == ("text-embedding-005", 2)
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL


def test_litellm_mistral(standin: StandIn, recording: Recording) -> None:
    work = _litellm("mistral/mistral-embed", standin.base_url("mistral_ai") + "/v1", max_retries=0)
    result, events = run(recording, work, http=True)
    assert len(result.data) == 2
    event = _one(events, "mistral_ai")
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL


def test_litellm_ollama(standin: StandIn, recording: Recording) -> None:
    work = _litellm("ollama/nomic-embed-text", standin.base_url("ollama"))
    result, events = run(recording, work, http=True)
    assert len(result.data) == 2
    event = _one(events, "ollama")
    assert (event.model, event.input_count) == ("nomic-embed-text", 2)
    assert event.usage is not None
    assert event.usage.input_tokens == TOTAL
