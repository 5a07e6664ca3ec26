"""The outcome contract: an answer that breaks any rule is refused as ``invalid_results`` with a
detail, and the chain keeps the next step's answer instead."""

from __future__ import annotations

import math
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from spanledger.chains._contract import broken_rule
from spanledger.events import ScoredDocument
from spanledger.providers.fallback import RerankOutcome, awith_fallback, with_fallback
from spanledger.providers.steps import CallableStep, StepRanking

from .conftest import DOCUMENTS, QUERY, SENTINEL, answering, good, returning


def sneaked(index: Any, score: Any) -> ScoredDocument:
    """A result built past validation, as a careless step might hand one over."""
    return ScoredDocument.model_construct(index=index, relevance_score=score)


def _refused_then_kept(outcome: RerankOutcome, detail_has: str) -> None:
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1
    refused, kept = outcome.attempts
    assert refused.status == "failed"
    assert refused.reason == "invalid_results"
    assert refused.detail is not None
    assert detail_has in refused.detail
    assert SENTINEL not in refused.detail
    assert kept.status == "ok"
    assert kept.kind == "callable"
    assert [r.index for r in outcome.results] == [3, 2, 1, 0]


def _through_chain(broken: Any, detail_has: str, top_k: int | None = None) -> None:
    steps = [CallableStep(returning(broken), name="broken"), CallableStep(good, name="good")]
    outcome = with_fallback(steps, QUERY, DOCUMENTS, top_k=top_k)
    if top_k is None:
        _refused_then_kept(outcome, detail_has)
    else:
        assert outcome.status == "degraded"
        assert outcome.answered_by == 1
        assert outcome.attempts[0].reason == "invalid_results"
        assert outcome.attempts[0].detail is not None
        assert detail_has in outcome.attempts[0].detail
        assert len(outcome.results) == top_k


# --------------------------------------------------------------------------- each rule


def test_too_few_results_is_refused() -> None:
    _through_chain([(1, 0.9), (0, 0.5), (2, 0.1)], "3 results where 4")


def test_a_document_scored_twice_is_refused() -> None:
    _through_chain([(1, 0.9), (1, 0.8), (0, 0.5), (2, 0.1)], "more than once")


def test_an_index_past_the_end_is_refused() -> None:
    _through_chain([(1, 0.9), (4, 0.8), (0, 0.5), (2, 0.1)], "out of range")


def test_a_negative_index_is_refused_when_the_result_is_built() -> None:
    _through_chain([(1, 0.9), (-1, 0.8), (0, 0.5), (2, 0.1)], "result 2's index is out of range")


def test_a_negative_index_sneaked_past_validation_is_refused() -> None:
    broken = [sneaked(1, 0.9), sneaked(-1, 0.8), sneaked(0, 0.5), sneaked(2, 0.1)]
    _through_chain(broken, "out of range")


def test_an_index_that_is_no_int_is_refused() -> None:
    broken = [sneaked(1, 0.9), sneaked("3", 0.8), sneaked(0, 0.5), sneaked(2, 0.1)]
    _through_chain(broken, "result 2's index is a str, not an int")


@pytest.mark.parametrize("score", [math.nan, math.inf, -math.inf])
def test_a_score_that_is_not_finite_is_refused(score: float) -> None:
    broken = [sneaked(1, 0.9), sneaked(3, score), sneaked(0, 0.5), sneaked(2, 0.1)]
    _through_chain(broken, "not a finite number")


def test_a_non_finite_score_in_a_pair_is_refused() -> None:
    _through_chain([(1, 0.9), (3, math.nan), (0, 0.5), (2, 0.1)], "not a finite number")


def test_a_bool_or_a_string_is_no_score() -> None:
    """Regression: pairs went through ``float()``, so ``True`` ranked as 1.0 and ``"0.5"`` as
    0.5, and this answer was kept as a ranking."""
    two = DOCUMENTS[:2]
    steps = [CallableStep(returning([(1, True), (0, "0.5")]), name="broken"), good]
    outcome = with_fallback(steps, QUERY, two)
    refused, kept = outcome.attempts
    assert (refused.status, refused.reason) == ("failed", "invalid_results")
    assert refused.detail == "a ranking item's score is a bool, not a finite number"
    assert kept.status == "ok"
    assert outcome.answered_by == 1


@pytest.mark.parametrize(
    ("pair", "says"),
    [
        ((3, "0.8"), "score is a str"),
        ((3, b"0.8"), "score is a bytes"),
        ((3, False), "score is a bool"),
        ((3, np.bool_(True)), "score is a bool"),
        ((3, None), "score is a NoneType"),
        ((3, Decimal("0.8")), "score is a Decimal"),
        (("3", 0.8), "index is a str, not an int"),
        ((True, 0.8), "index is a bool, not an int"),
        ((3.0, 0.8), "index is a float, not an int"),
    ],
)
def test_a_pair_takes_its_index_and_score_as_they_are(pair: tuple[Any, Any], says: str) -> None:
    _through_chain([(1, 0.9), pair, (0, 0.5), (2, 0.1)], says)


async def test_the_async_chain_refuses_a_bool_score_too() -> None:
    steps = [CallableStep(returning([(1, True), (0, 0.5)]), name="broken"), good]
    outcome = await awith_fallback(steps, QUERY, DOCUMENTS[:2])
    assert [a.reason for a in outcome.attempts] == ["invalid_results", None]


def test_numpy_numbers_are_scores_and_indices() -> None:
    pairs = [(np.int64(1), np.float32(0.5)), (3, np.float64(0.25)), (0, 0), (np.int32(2), 0)]
    outcome = with_fallback([answering(*pairs)], QUERY, DOCUMENTS)  # type: ignore[arg-type]
    assert outcome.status == "ok"
    assert [(r.index, r.relevance_score) for r in outcome.results] == [
        (1, 0.5),
        (3, 0.25),
        (0, 0.0),
        (2, 0.0),
    ]
    assert all(type(r.index) is int and type(r.relevance_score) is float for r in outcome.results)


def test_rising_scores_are_refused() -> None:
    _through_chain([(1, 0.2), (3, 0.8), (0, 0.5), (2, 0.1)], "descending")


def test_ties_out_of_input_order_are_refused() -> None:
    _through_chain([(3, 0.5), (1, 0.5), (0, 0.4), (2, 0.1)], "tie out of input order")


def test_ties_in_input_order_are_kept() -> None:
    outcome = with_fallback([answering((0, 0.5), (1, 0.5), (3, 0.5), (2, 0.1))], QUERY, DOCUMENTS)
    assert outcome.status == "ok"
    assert [r.index for r in outcome.results] == [0, 1, 3, 2]


def test_more_results_than_top_k_are_refused() -> None:
    _through_chain([(1, 0.9), (3, 0.8), (0, 0.5)], "than top_k (2)", top_k=2)


def test_fewer_results_than_top_k_are_refused() -> None:
    _through_chain([(1, 0.9)], "1 results where 2", top_k=2)


@pytest.mark.parametrize(
    ("value", "named"),
    [(None, "NoneType"), ({"1": 0.9}, "dict"), ("1,3,0,2", "str"), (7, "int")],
)
def test_an_answer_that_is_no_ranking_is_refused(value: object, named: str) -> None:
    _through_chain(value, named)


def test_a_ranking_item_that_is_no_pair_is_refused() -> None:
    _through_chain([(1, 0.9, "x"), (3, 0.8), (0, 0.5), (2, 0.1)], "(index, score)")


def test_a_ranked_holding_no_scored_documents_is_refused() -> None:
    """Regression: a ``StepRanking`` of pairs made the whole chain fail with no attempts."""
    broken = StepRanking([(1, 0.9), (3, 0.8), (0, 0.5), (2, 0.1)])  # type: ignore[list-item]
    _through_chain(broken, "list of scored documents")


def test_a_ranked_whose_results_are_no_list_is_refused() -> None:
    _through_chain(StepRanking(None), "list of scored documents")  # type: ignore[arg-type]


def test_a_result_missing_its_score_is_refused() -> None:
    scoreless = ScoredDocument.model_construct(index=3)  # type: ignore[call-arg]
    _through_chain([sneaked(1, 0.9), scoreless, sneaked(0, 0.5), sneaked(2, 0.1)], "finite")


async def test_the_async_chain_refuses_a_broken_answer_and_moves_on() -> None:
    async def broken(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        return [(1, 0.9), (1, 0.8), (0, 0.5), (2, 0.1)]

    outcome = await awith_fallback(
        [CallableStep(broken, name="broken"), CallableStep(good, name="good")], QUERY, DOCUMENTS
    )
    _refused_then_kept(outcome, "more than once")


def test_a_refused_answer_leaves_no_text_in_the_outcome() -> None:
    outcome = with_fallback([returning(SENTINEL), good], QUERY, DOCUMENTS)
    assert outcome.attempts[0].reason == "invalid_results"
    assert SENTINEL not in outcome.model_dump_json()


# --------------------------------------------------------------------------- broken_rule


def _docs(*pairs: tuple[Any, Any]) -> list[ScoredDocument]:
    return [sneaked(index, score) for index, score in pairs]


def test_broken_rule_accepts_a_good_ranking() -> None:
    assert broken_rule(_docs((2, 3.0), (0, 1.0), (1, 1.0)), 3, None) is None
    assert broken_rule(_docs((2, 3.0), (0, 1.0)), 3, 2) is None
    assert broken_rule(_docs((0, 1), (1, 0)), 2, 10) is None
    assert broken_rule([], 0, None) is None


def test_broken_rule_refuses_what_is_no_list_of_scored_documents() -> None:
    pairs: Any = [(0, 1.0), (1, 0.5)]
    assert broken_rule(pairs, 2, None) == "a ranking must be a list of scored documents"
    assert broken_rule(None, 2, None) == "a ranking must be a list of scored documents"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("pairs", "count", "top_k", "says"),
    [
        (((0, 1.0),), 2, None, "1 results where 2"),
        (((0, 1.0), (1, 0.5), (2, 0.1)), 3, 2, "more results (3) than top_k (2)"),
        (((0, 1.0), (0, 0.5)), 2, None, "scored more than once"),
        (((0, 1.0), (2, 0.5)), 2, None, "result 2's index is out of range for 2 documents"),
        (((-1, 1.0), (0, 0.5)), 2, None, "result 1's index is out of range"),
        (((True, 1.0), (0, 0.5)), 2, None, "result 1's index is a bool, not an int"),
        (((0, math.nan), (1, 0.5)), 2, None, "not a finite number"),
        (((0, 1.0), (1, math.inf)), 2, None, "not a finite number"),
        (((0, "1.0"), (1, 0.5)), 2, None, "not a finite number"),
        (((0, 0.1), (1, 0.5)), 2, None, "scores rise"),
        (((1, 0.5), (0, 0.5)), 2, None, "tie out of input order"),
        (((0, None), (1, 0.5)), 2, None, "not a finite number"),
    ],
)
def test_broken_rule_names_each_rule(
    pairs: tuple[tuple[Any, Any], ...], count: int, top_k: int | None, says: str
) -> None:
    rule = broken_rule(_docs(*pairs), count, top_k)
    assert rule is not None
    assert says in rule
