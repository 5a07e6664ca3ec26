"""LiteLLM's ``embedding()`` and ``rerank()`` with ``instrument(http=True)``, against the loopback
stand-in: one event per HTTP call, the stand-in's figures, LiteLLM's result unchanged.

LiteLLM reaches OpenAI through the OpenAI SDK (recorded by the SDK switch) and the others with
its own httpx handler (recorded by ``http=True``). Its Voyage body carries nothing Voyage-only,
so on a host that is not Voyage's the vendor is named with ``vendors``; its Cohere embeddings
go to v1's ``/embed``, recognised by their ``texts``. Not covered: Jina (LiteLLM drops the path
of ``api_base``, so it cannot be pointed at the stand-in's ``/jina`` prefix).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no cost-map download

import litellm

import spanledger
from spanledger import EmbeddingEvent, Event, RerankEvent
from spanledger.testing import StandIn
from tests.frameworks.conftest import tokens
from tests.frameworks.privacy import Recording

API_KEY = "sk-litellm-key-0d4c"
SENTINEL = "SENTINEL-litellm-8e1b"
QUERY = f"what do ticks eat {SENTINEL}"
TEXTS = [
    f"ticks feed on blood {SENTINEL}",
    f"clocks tick {SENTINEL}",
    f"deer carry ticks {SENTINEL}",
]
PRIVATE = (SENTINEL, API_KEY)


def recorded(recording: Recording, work: Callable[[], Any]) -> tuple[Any, list[Event]]:
    """``work`` recorded, checked against the same work unrecorded: the events it made, one
    per HTTP call, none carrying the inputs or the key, nor any log line."""
    voyage = recording.standin.base_url("voyageai")

    def switch_on() -> None:
        spanledger.instrument(http=True, vendors={voyage: "voyageai"})

    return recording.run(work, switch_on, comparable=_shape)


def _shape(result: Any) -> Any:
    if hasattr(result, "data"):  # an embedding response: the vectors
        return [item["embedding"] for item in result.data]
    return [(item["index"], item["relevance_score"]) for item in result.results]


def test_cohere_rerank(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.rerank(
            model="cohere/rerank-v3.5",
            query=QUERY,
            documents=TEXTS,
            top_n=2,
            api_base=standin.base_url("cohere"),
            api_key=API_KEY,
        )

    result, events = recorded(recording, work)
    assert len(result.results) == 2
    [event] = events
    assert isinstance(event, RerankEvent)
    assert (event.provider, event.document_count, event.result_count) == ("cohere", 3, 2)
    assert event.usage is not None
    assert event.usage.search_units == 1


def test_voyage_embedding(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.embedding(
            model="voyage/voyage-3.5",
            input=TEXTS,
            api_base=standin.base_url("voyageai") + "/v1",
            api_key=API_KEY,
        )

    result, events = recorded(recording, work)
    assert len(result.data) == len(TEXTS)
    [event] = events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.input_count) == ("voyageai", len(TEXTS))
    assert event.usage is not None
    assert event.usage.input_tokens == sum(map(tokens, TEXTS))


def test_openai_embedding(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.embedding(
            model="openai/text-embedding-3-small",
            input=TEXTS,
            api_base=standin.base_url("openai") + "/v1",
            api_key=API_KEY,
        )

    result, events = recorded(recording, work)
    assert len(result.data) == len(TEXTS)
    [event] = events
    assert isinstance(event, EmbeddingEvent)
    assert event.provider == "openai"
    assert event.usage is not None
    assert event.usage.input_tokens == sum(map(tokens, TEXTS))


def test_cohere_embedding(standin: StandIn, recording: Recording) -> None:
    def work() -> Any:
        return litellm.embedding(
            model="cohere/embed-english-v3.0",
            input=TEXTS,
            input_type="search_document",
            api_base=standin.base_url("cohere") + "/v1/embed",
            api_key=API_KEY,
        )

    result, events = recorded(recording, work)
    assert len(result.data) == len(TEXTS)
    [event] = events
    assert isinstance(event, EmbeddingEvent)
    assert (event.provider, event.input_count) == ("cohere", len(TEXTS))
    assert event.usage is not None
    assert event.usage.input_tokens == sum(map(tokens, TEXTS))
