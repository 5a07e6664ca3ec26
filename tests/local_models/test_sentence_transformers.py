"""SentenceTransformer.encode, recorded: one event per call, usage counted by its tokenizer."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

import spanledger
from spanledger import EmbeddingEvent, EmbeddingFailedEvent, ErrorCategory
from spanledger.instrumentation import is_instrumented

from .conftest import SENTINEL, Tape, tokens_of

TEXTS = ["a tick is a small arachnid", "ticks feed on blood", "the clock ticks"]


def _only(tape: Tape) -> Any:
    assert len(tape.events) == 1, tape.events
    return tape.events[0]


def test_a_list_is_one_event_with_the_tokens_the_model_saw(embedder: Any, tape: Tape) -> None:
    spanledger.instrument(embedder)
    vectors = embedder.encode(TEXTS)
    event = _only(tape)
    assert isinstance(event, EmbeddingEvent)
    assert event.provider == "sentence_transformers"
    assert event.billing == "local"
    assert event.input_count == 3
    assert event.dimensions == 384 == vectors.shape[1]
    assert event.usage is not None
    assert event.usage.input_tokens == tokens_of(embedder, *TEXTS)
    assert event.usage_source == "tokenizer"
    assert event.latency_ms > 0


def test_the_result_is_what_the_bare_model_returns(embedder: Any, tape: Tape) -> None:
    bare = embedder.encode(TEXTS, normalize_embeddings=True)
    spanledger.instrument(embedder)
    recorded = embedder.encode(TEXTS, normalize_embeddings=True)
    assert type(recorded) is np.ndarray
    np.testing.assert_array_equal(recorded, bare)
    assert _only(tape).usage is not None


@pytest.mark.parametrize(
    ("call", "kind", "count"),
    [
        (lambda m: m.encode("one text"), np.ndarray, 1),
        (lambda m: m.encode(TEXTS, convert_to_tensor=True), torch.Tensor, 3),
        (lambda m: m.encode(TEXTS, convert_to_numpy=False), list, 3),
        (lambda m: m.encode(np.array(TEXTS)), np.ndarray, 3),
        (lambda m: m.encode(tuple(TEXTS), batch_size=1), np.ndarray, 3),
    ],
    ids=["one string", "tensor", "list of tensors", "numpy input", "one per batch"],
)
def test_every_batch_shape_counts_alike(
    embedder: Any, tape: Tape, call: Any, kind: type, count: int
) -> None:
    spanledger.instrument(embedder)
    result = call(embedder)
    assert isinstance(result, kind)
    event = _only(tape)
    assert event.input_count == count
    assert event.dimensions == 384
    texts = ["one text"] if count == 1 else TEXTS
    assert event.usage.input_tokens == tokens_of(embedder, *texts)


def test_a_text_past_the_limit_counts_only_what_the_model_kept(embedder: Any, tape: Tape) -> None:
    long_text = "tick " * 1000
    spanledger.instrument(embedder)
    embedder.encode([long_text, "short"])
    usage = _only(tape).usage
    assert usage.input_tokens == embedder.max_seq_length + tokens_of(embedder, "short")


def test_prompt_task_and_truncation_are_read(embedder: Any, tape: Tape) -> None:
    spanledger.instrument(embedder)
    embedder.encode_query(["what is a tick"], prompt="query: ", truncate_dim=64)
    event = _only(tape)
    assert event.input_type == "query"
    assert event.dimensions == 64
    assert event.request_params == {"input_type": "query", "dimensions": 64}
    assert event.usage.input_tokens == tokens_of(embedder, "query: what is a tick")


def test_an_empty_batch_is_an_exact_zero(embedder: Any, tape: Tape) -> None:
    spanledger.instrument(embedder)
    embedder.encode([])
    event = _only(tape)
    assert event.input_count == 0
    assert event.usage.input_tokens == 0


def test_refused_input_is_an_invalid_request_named_by_its_class(embedder: Any, tape: Tape) -> None:
    spanledger.instrument(embedder)
    with pytest.raises(ValueError, match="batch_size"):
        embedder.encode(TEXTS, batch_size=0)
    failed = _only(tape)
    assert isinstance(failed, EmbeddingFailedEvent)
    assert failed.error_category is ErrorCategory.INVALID_REQUEST
    assert failed.error_type == "ValueError"
    assert "batch_size" not in failed.error_message
    assert failed.estimated_usage is None


def test_an_unexpected_failure_is_unavailable(embedder: Any, tape: Tape, monkeypatch: Any) -> None:
    error = RuntimeError(SENTINEL)

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(embedder, "_inference", broken)
    spanledger.instrument(embedder)
    with pytest.raises(RuntimeError) as raised:
        embedder.encode(TEXTS)
    assert raised.value is error
    assert str(raised.value) == SENTINEL
    failed = _only(tape)
    assert failed.error_category is ErrorCategory.UNAVAILABLE
    assert failed.error_type == "RuntimeError"
    assert SENTINEL not in failed.model_dump_json()


def test_uninstrument_stops_recording_and_puts_the_class_back(embedder: Any, tape: Tape) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.model import BaseModel

    bare = (vars(SentenceTransformer)["encode"], vars(BaseModel)["preprocess"])
    spanledger.instrument(embedder)
    assert is_instrumented(embedder)
    assert vars(SentenceTransformer)["encode"] is not bare[0]
    spanledger.uninstrument(embedder)
    embedder.encode(TEXTS)
    assert tape.events == []
    assert (vars(SentenceTransformer)["encode"], vars(BaseModel)["preprocess"]) == bare


def test_a_model_not_instrumented_is_not_recorded(
    embedder: Any, minilm_path: Any, tape: Tape
) -> None:
    from sentence_transformers import SentenceTransformer

    other = SentenceTransformer(str(minilm_path), device="cpu")
    spanledger.instrument(other)
    embedder.encode(TEXTS)
    other.encode(TEXTS[:1])
    assert [event.input_count for event in tape.events] == [1]


def test_nothing_is_recorded_without_an_active_recorder(embedder: Any) -> None:
    spanledger.instrument(embedder)
    assert embedder.encode(TEXTS).shape == (3, 384)


def test_no_path_in_the_model_name(embedder: Any, tape: Tape, minilm_path: Any) -> None:
    spanledger.instrument(embedder)
    embedder.encode(TEXTS[:1])
    name = _only(tape).model
    assert name == minilm_path.name
    assert "/" not in name
