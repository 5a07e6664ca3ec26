"""``record_*`` reads a raw body by the endpoint it answers: the one named, else the one the
model names, else the vendor's own."""

from __future__ import annotations

import json

import pytest

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, Event


def record(raw: object, endpoint: str | None = None) -> Event:
    events: list[Event] = []
    with (
        spanledger.use(spanledger.Recorder([events.append])),
        spanledger.record_embedding(
            provider="ollama", model="all-minilm", inputs=["hi"], endpoint=endpoint
        ) as call,
    ):
        call.succeeded(raw=json.dumps(raw))
    (event,) = events
    return event


def test_a_named_endpoint_reads_the_body_it_answers() -> None:
    event = record({"embedding": [0.5, 0.25]}, endpoint="ollama-legacy-embeddings")
    assert isinstance(event, EmbeddingEvent)
    assert (event.dimensions, event.usage) == (2, None)


def test_without_a_name_the_vendors_own_endpoint_reads_it() -> None:
    legacy = record({"embedding": [0.5, 0.25]})
    assert isinstance(legacy, EmbeddingFailedEvent)  # /api/embed answers "embeddings"
    native = record({"model": "all-minilm", "embeddings": [[0.5, 0.25]], "prompt_eval_count": 2})
    assert isinstance(native, EmbeddingEvent)
    assert native.usage == spanledger.EmbeddingUsage(input_tokens=2)


def test_a_name_that_is_no_endpoint_or_not_the_vendors_is_refused_with_a_sentence() -> None:
    with pytest.raises(ValueError, match=r"no endpoint named 'ollama-embedz'.*ollama-embed"):
        spanledger.record_embedding(
            provider="ollama", model="m", inputs=["a"], endpoint="ollama-embedz"
        )
    with pytest.raises(ValueError, match="is openai's embeddings, not ollama's"):
        spanledger.record_embedding(
            provider="ollama", model="m", inputs=["a"], endpoint="openai-embeddings"
        )
    with pytest.raises(ValueError, match="rerank, not ollama's embeddings"):
        spanledger.record_embedding(
            provider="ollama", model="m", inputs=["a"], endpoint="cohere-rerank"
        )
