"""Each kind of step in a chain: BM25, identity, your function (sync and async), a local
cross-encoder, a provider with no key; and ``as_step`` / ``step`` on what ranks and what not."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from spanledger.events import RerankResponse, RerankUsage, ScoredDocument
from spanledger.providers import CohereReranker
from spanledger.providers.fallback import RerankOutcome, awith_fallback, with_fallback
from spanledger.providers.steps import (
    BM25Step,
    CallableStep,
    CrossEncoderStep,
    IdentityStep,
    ProviderStep,
    StepRanking,
    as_step,
    step,
)

from .conftest import DOCUMENTS, QUERY, SENTINEL, Providers, good


def _ranked_by(outcome: RerankOutcome) -> list[int]:
    return [result.index for result in outcome.results]


# --------------------------------------------------------------------------- BM25


def test_bm25_ranks_the_document_sharing_the_query_words_first() -> None:
    documents = ["a recipe for bread", "volcanoes erupt lava", "the lunar tide table", "bread"]
    outcome = with_fallback([BM25Step()], "lunar tide", documents)
    assert outcome.status == "ok"
    assert _ranked_by(outcome)[0] == 2
    (attempt,) = outcome.attempts
    assert (attempt.kind, attempt.provider, attempt.billing) == ("bm25", "rank_bm25", "local")
    scores = [r.relevance_score for r in outcome.results]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] > 0


def test_bm25_ties_keep_input_order() -> None:
    documents = ["alpha", "beta", "tides here", "gamma", "delta"]
    outcome = with_fallback([BM25Step()], "tides", documents)
    assert _ranked_by(outcome) == [2, 0, 1, 3, 4]


def test_bm25_cuts_at_top_k() -> None:
    documents = ["alpha", "moon tides", "beta", "moon", "gamma", "delta"]
    outcome = with_fallback([BM25Step()], "moon tides", documents, top_k=2)
    assert _ranked_by(outcome) == [1, 3]


def test_bm25_over_documents_with_no_words_keeps_input_order() -> None:
    outcome = with_fallback([BM25Step()], "moon", ["", "", ""], top_k=2)
    assert outcome.status == "ok"
    assert _ranked_by(outcome) == [0, 1]
    assert [r.relevance_score for r in outcome.results] == [0.0, 0.0]
    only_punctuation = with_fallback([BM25Step()], "moon", ["?!", "...", ";;"])
    assert outcome.status == "ok"
    assert _ranked_by(only_punctuation) == [0, 1, 2]


def test_bm25_with_a_document_of_only_punctuation() -> None:
    documents = ["!!! ???", "the moon and the tides", "rocks"]
    outcome = with_fallback([BM25Step()], "moon tides", documents)
    assert outcome.status == "ok"
    assert _ranked_by(outcome)[0] == 1
    assert sorted(_ranked_by(outcome)) == [0, 1, 2]


# --------------------------------------------------------------------------- identity


def test_identity_keeps_input_order_and_later_steps_do_not_run() -> None:
    ran: list[str] = []

    def later(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        ran.append("later")
        return good(query, documents, top_k)

    outcome = with_fallback([IdentityStep(), later], QUERY, DOCUMENTS, top_k=3)
    assert outcome.status == "degraded"
    assert outcome.answered_by is None
    assert _ranked_by(outcome) == [0, 1, 2]
    assert all(r.relevance_score == 0.0 for r in outcome.results)
    (attempt,) = outcome.attempts
    assert (attempt.status, attempt.reason, attempt.kind) == ("skipped", "identity", "identity")
    assert ran == []


async def test_identity_in_the_async_chain() -> None:
    outcome = await awith_fallback([IdentityStep(), good], QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    assert _ranked_by(outcome) == [0, 1, 2, 3]
    assert [(a.status, a.reason) for a in outcome.attempts] == [("skipped", "identity")]


# --------------------------------------------------------------------------- callables


def _answers() -> list[object]:
    pairs = [(3, 0.9), (1, 0.5)]
    documents = [ScoredDocument(index=i, relevance_score=s) for i, s in pairs]
    usage = RerankUsage(search_units=1)
    return [
        StepRanking(documents, usage),
        RerankResponse(results=documents, model="m", usage=usage, raw=None),
        documents,
        pairs,
        tuple(pairs),
    ]


@pytest.mark.parametrize(
    "answer", _answers(), ids=["ranked", "response", "scored", "pairs", "tuple"]
)
def test_a_sync_callable_answer_in_each_shape(answer: object) -> None:
    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        assert (query, list(documents), top_k) == (QUERY, DOCUMENTS, 2)
        return answer

    outcome = with_fallback([CallableStep(rank, name="mine")], QUERY, DOCUMENTS, top_k=2)
    assert outcome.status == "ok"
    assert _ranked_by(outcome) == [3, 1]
    (attempt,) = outcome.attempts
    assert (attempt.kind, attempt.model, attempt.provider) == ("callable", "mine", "local")
    if isinstance(answer, StepRanking | RerankResponse):
        assert attempt.usage == RerankUsage(search_units=1)
    else:
        assert attempt.usage is None


@pytest.mark.parametrize(
    "answer", _answers(), ids=["ranked", "response", "scored", "pairs", "tuple"]
)
async def test_an_async_callable_answer_in_each_shape(answer: object) -> None:
    async def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        return answer

    outcome = await awith_fallback([rank], QUERY, DOCUMENTS, top_k=2)
    assert outcome.status == "ok"
    assert _ranked_by(outcome) == [3, 1]
    assert outcome.attempts[0].model.endswith("rank")


async def test_an_async_callable_in_the_sync_chain() -> None:
    async def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        return [(2, 1.0)]

    outcome = with_fallback([rank], QUERY, DOCUMENTS, top_k=1)
    assert outcome.status == "ok"
    assert _ranked_by(outcome) == [2]


def test_a_sync_callable_in_the_async_chain_runs_off_the_loop() -> None:
    import asyncio
    import threading

    threads: list[str] = []

    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        threads.append(threading.current_thread().name)
        return [(1, 1.0)]

    outcome = asyncio.run(awith_fallback([rank], QUERY, DOCUMENTS, top_k=1))
    assert outcome.status == "ok"
    assert threads
    assert threads[0] != threading.main_thread().name


class SentinelError(RuntimeError):
    pass


def _raising(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    raise SentinelError(f"upstream said {SENTINEL}")


async def _araising(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    raise SentinelError(f"upstream said {SENTINEL}")


def _raised_check(outcome: RerankOutcome) -> None:
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1
    failed = outcome.attempts[0]
    assert (failed.status, failed.reason, failed.error_type) == (
        "failed",
        "step_error",
        "SentinelError",
    )
    assert failed.usage is None
    assert SENTINEL not in outcome.model_dump_json()
    assert SENTINEL not in json.dumps(outcome.model_dump(mode="json"))


def test_a_raising_callable_fails_without_its_message() -> None:
    _raised_check(with_fallback([_raising, good], QUERY, DOCUMENTS))


async def test_a_raising_async_callable_fails_without_its_message() -> None:
    _raised_check(await awith_fallback([_araising, good], QUERY, DOCUMENTS))
    _raised_check(await awith_fallback([_raising, good], QUERY, DOCUMENTS))


# --------------------------------------------------------------------------- cross-encoder


class FakeCrossEncoder:
    """Scores a pair by how many query words the document holds, as numpy float32."""

    def __init__(self, drop: int = 0) -> None:
        self.drop = drop
        self.seen: list[list[tuple[str, str]]] = []

    def predict(self, pairs: list[tuple[str, str]], **options: Any) -> Any:
        self.seen.append(pairs)
        scores = [len(set(q.split()) & set(d.split())) for q, d in pairs]
        return np.asarray(scores[self.drop :], dtype=np.float32)


def test_a_cross_encoder_scores_pairs_with_numpy_floats() -> None:
    model = FakeCrossEncoder()
    outcome = with_fallback([CrossEncoderStep(model, name="mini-ce")], QUERY, DOCUMENTS, top_k=2)
    assert outcome.status == "ok"
    assert _ranked_by(outcome) == [1, 3]  # three words each, a tie kept in input order
    assert all(type(r.relevance_score) is float for r in outcome.results)
    (attempt,) = outcome.attempts
    assert (attempt.kind, attempt.model, attempt.provider, attempt.billing) == (
        "cross_encoder",
        "mini-ce",
        "sentence_transformers",
        "local",
    )
    assert model.seen == [[(QUERY, d) for d in DOCUMENTS]]


def test_a_cross_encoder_returning_the_wrong_count_fails() -> None:
    outcome = with_fallback([CrossEncoderStep(FakeCrossEncoder(drop=1)), good], QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    failed = outcome.attempts[0]
    assert (failed.status, failed.reason, failed.error_type) == (
        "failed",
        "step_error",
        "ValueError",
    )


@pytest.mark.parametrize(
    ("scores", "says"),
    [
        (np.array([True, False, True, False]), "a score is a bool"),
        ([0.9, "0.5", 0.2, 0.1], "a score is a str"),
        ([0.9, 0.5, True, 0.1], "a score is a bool"),
        ([0.9, 0.5, float("nan"), 0.1], "a score is a float, not a finite number"),
    ],
)
def test_a_cross_encoder_score_that_is_no_number_is_refused(scores: Any, says: str) -> None:
    class Model:
        def predict(self, pairs: list[tuple[str, str]]) -> Any:
            return scores

    outcome = with_fallback([CrossEncoderStep(Model()), good], QUERY, DOCUMENTS)
    refused = outcome.attempts[0]
    assert (refused.status, refused.reason) == ("failed", "invalid_results")
    assert refused.detail is not None
    assert says in refused.detail
    assert outcome.answered_by == 1


def test_a_cross_encoder_is_named_from_its_config_or_its_class() -> None:
    class Config:
        _name_or_path = "/home/someone/models/cross-encoder/ms-marco-MiniLM-L6-v2/"

    named = FakeCrossEncoder()
    named.config = Config()  # type: ignore[attr-defined]
    assert CrossEncoderStep(named).model == "ms-marco-MiniLM-L6-v2"
    assert CrossEncoderStep(FakeCrossEncoder()).model == "FakeCrossEncoder"


def test_a_cross_encoder_needs_predict() -> None:
    with pytest.raises(TypeError, match="predict"):
        CrossEncoderStep(object())


# --------------------------------------------------------------------------- as_step, step


def test_as_step_makes_each_kind(providers: Providers) -> None:
    reranker = providers.cohere()
    assert isinstance(as_step(reranker), ProviderStep)
    assert isinstance(as_step(FakeCrossEncoder()), CrossEncoderStep)
    assert isinstance(as_step(good), CallableStep)
    assert isinstance(as_step(lambda q, d, k: []), CallableStep)
    bm25 = BM25Step()
    assert as_step(bm25) is bm25
    identity = IdentityStep()
    assert as_step(identity) is identity


@pytest.mark.parametrize("thing", [7, "rerank-v3.5", None, int, FakeCrossEncoder, BM25Step])
def test_as_step_refuses_what_does_not_rank(thing: object) -> None:
    assert as_step(thing) is None
    with pytest.raises(TypeError, match="not something that ranks"):
        step(thing)


def test_a_class_is_not_a_step_in_a_chain() -> None:
    """Regression: a cross-encoder class (not an instance) was taken as a model."""
    outcome = with_fallback([FakeCrossEncoder, good], QUERY, DOCUMENTS)
    assert outcome.status == "invalid_request"
    assert outcome.reason is not None
    assert "step 0" in outcome.reason


def test_step_gives_a_copy_its_own_gate_and_timeout() -> None:
    original = BM25Step()
    made = step(original, gate=lambda check: True, timeout=0.5)
    assert made is not original
    assert made.timeout == 0.5
    assert made.gate is not None
    assert original.timeout is None
    assert original.gate is None


# --------------------------------------------------------------------------- no API key


def test_a_provider_with_no_key_is_skipped_and_sends_nothing(
    monkeypatch: pytest.MonkeyPatch, providers: Providers
) -> None:
    monkeypatch.delenv("CO_API_KEY", raising=False)
    keyless = CohereReranker("rerank-v3.5", recorder=providers.recorder)
    try:
        sent = providers.sent()
        outcome = with_fallback([keyless, good], QUERY, DOCUMENTS)
    finally:
        keyless.close()
    assert outcome.status == "degraded"
    skipped = outcome.attempts[0]
    assert (skipped.status, skipped.reason, skipped.kind) == ("skipped", "no_api_key", "provider")
    assert skipped.detail is not None
    assert "CO_API_KEY" in skipped.detail
    assert providers.sent() == sent
    assert providers.events == []


async def test_a_provider_with_no_key_is_skipped_in_the_async_chain(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CO_API_KEY", raising=False)
    keyless = CohereReranker("rerank-v3.5")
    try:
        outcome = await awith_fallback([keyless, good], QUERY, DOCUMENTS)
    finally:
        await keyless.aclose()
    assert [(a.status, a.reason) for a in outcome.attempts] == [
        ("skipped", "no_api_key"),
        ("ok", None),
    ]
