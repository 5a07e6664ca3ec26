"""CrossEncoder.predict / rank and FlashRank's Ranker.rerank, recorded as reranks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import spanledger
from spanledger import ErrorCategory, RerankEvent, RerankFailedEvent

from .conftest import FLASHRANK_MODEL, Tape, tokens_of

QUERY = "what is a tick"
DOCUMENTS = ["a tick is a small arachnid", "ticks feed on blood", "the clock ticks loudly"]


def _only(tape: Tape) -> Any:
    assert len(tape.events) == 1, tape.events
    return tape.events[0]


def test_rank_is_one_event_not_also_its_inner_predict(cross_encoder: Any, tape: Tape) -> None:
    spanledger.instrument(cross_encoder)
    ranked = cross_encoder.rank(QUERY, DOCUMENTS, top_k=2)
    event = _only(tape)
    assert isinstance(event, RerankEvent)
    assert event.provider == "sentence_transformers"
    assert event.billing == "local"
    assert event.document_count == 3
    assert event.top_k == 2
    assert event.result_count == len(ranked) == 2
    assert event.query_length == len(QUERY)
    assert event.usage is not None
    assert event.usage.input_tokens == tokens_of(cross_encoder, *DOCUMENTS, pair=QUERY)
    assert event.usage.search_units is None
    assert event.usage_source == "tokenizer"
    assert event.results is not None
    assert [r.index for r in event.results] == [item["corpus_id"] for item in ranked]


def test_predict_scores_pairs_and_returns_what_the_bare_model_does(
    cross_encoder: Any, tape: Tape
) -> None:
    pairs = [(QUERY, document) for document in DOCUMENTS]
    bare = cross_encoder.predict(pairs, batch_size=2)  # the same batches: the same floats
    spanledger.instrument(cross_encoder)
    scores = cross_encoder.predict(pairs, batch_size=2)
    np.testing.assert_array_equal(scores, bare)
    event = _only(tape)
    assert event.document_count == 3
    assert event.result_count == 3
    assert event.query_length == len(QUERY)
    assert event.usage.input_tokens == tokens_of(cross_encoder, *DOCUMENTS, pair=QUERY)
    best = int(np.argmax(scores))
    assert event.results[0].index == best


def test_one_pair_is_one_document(cross_encoder: Any, tape: Tape) -> None:
    spanledger.instrument(cross_encoder)
    cross_encoder.predict((QUERY, DOCUMENTS[0]))
    event = _only(tape)
    assert event.document_count == 1
    assert event.result_count == 1
    assert event.usage.input_tokens == tokens_of(cross_encoder, DOCUMENTS[0], pair=QUERY)


def test_pairs_of_many_queries_name_no_query(cross_encoder: Any, tape: Tape) -> None:
    spanledger.instrument(cross_encoder)
    cross_encoder.predict([("q one", "a"), ("q two", "b")])
    event = _only(tape)
    assert event.query_length == 0
    assert event.document_count == 2


def test_a_cross_encoder_failure_is_a_rerank_failure(cross_encoder: Any, tape: Tape) -> None:
    spanledger.instrument(cross_encoder)
    with pytest.raises(ValueError, match="batch_size"):
        cross_encoder.rank(QUERY, DOCUMENTS, batch_size=-1)
    failed = _only(tape)
    assert isinstance(failed, RerankFailedEvent)
    assert failed.error_category is ErrorCategory.INVALID_REQUEST
    assert failed.error_type == "ValueError"


def test_flashrank_rerank_counts_the_encodings_it_scored(ranker: Any, tape: Tape) -> None:
    from flashrank.Ranker import RerankRequest  # type: ignore[import-untyped]

    passages = [{"id": i, "text": text} for i, text in enumerate(DOCUMENTS)]
    spanledger.instrument(ranker)
    ranked = ranker.rerank(RerankRequest(query=QUERY, passages=passages))
    event = _only(tape)
    assert isinstance(event, RerankEvent)
    assert event.provider == "flashrank"
    assert event.model == FLASHRANK_MODEL
    assert event.billing == "local"
    assert event.document_count == event.result_count == len(ranked) == 3
    encodings = ranker.tokenizer.encode_batch([[QUERY, text] for text in DOCUMENTS])
    assert event.usage is not None
    assert event.usage.input_tokens == sum(sum(e.attention_mask) for e in encodings)
    assert event.usage_source == "tokenizer"
    # the tiny scorer's score is the count of mask ones: the longest pair ranks first
    lengths = [sum(encoding.attention_mask) for encoding in encodings]
    assert ranked[0]["text"] == DOCUMENTS[lengths.index(max(lengths))]


def test_flashrank_gets_its_own_tokenizer_back(ranker: Any, tape: Tape) -> None:
    from flashrank.Ranker import RerankRequest

    original = ranker.tokenizer
    spanledger.instrument(ranker)
    ranker.rerank(RerankRequest(query=QUERY, passages=[{"text": "x"}]))
    assert ranker.tokenizer is not original
    spanledger.uninstrument(ranker)
    assert ranker.tokenizer is original
    ranker.rerank(RerankRequest(query=QUERY, passages=[{"text": "y"}]))
    assert len(tape.events) == 1


def test_a_flashrank_failure_names_its_class(ranker: Any, tape: Tape) -> None:
    from flashrank.Ranker import RerankRequest

    spanledger.instrument(ranker)
    with pytest.raises(TypeError):
        ranker.rerank(RerankRequest(query=QUERY, passages=[{"text": 5}]))
    failed = _only(tape)
    assert isinstance(failed, RerankFailedEvent)
    assert failed.error_category is ErrorCategory.INVALID_REQUEST
    assert failed.error_type == "TypeError"


def test_something_else_is_refused_by_name(ranker: Any) -> None:
    with pytest.raises(TypeError, match="not dict"):
        spanledger.instrument({})
