"""Pricing a chain's outcome: local steps bill nothing (never "unpriced"), skipped steps are
not attempted, an abandoned Cohere call is estimated from its document count, and a callable
that calls a paid service is priced from the usage it returns."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

from spanledger.breakers import Breakers
from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.events import RerankUsage, ScoredDocument
from spanledger.ledger import outcome_spend, price_outcome
from spanledger.providers.fallback import CancelToken, with_fallback
from spanledger.providers.steps import (
    BM25Step,
    CallableStep,
    CrossEncoderStep,
    IdentityStep,
    StepRanking,
    step,
)

from .conftest import DOCUMENTS, PRICES, QUERY, Providers, good, returning

MANY = [f"passage {n}" for n in range(150)]


@pytest.fixture
def release() -> Iterator[threading.Event]:
    event = threading.Event()
    yield event
    event.set()


class Scorer:
    def predict(self, pairs: list[tuple[str, str]]) -> Any:
        return np.linspace(1.0, 0.0, num=len(pairs))


def _raising(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    raise RuntimeError("down")


def _not_billed(line: CostLine, code: CostCode) -> None:
    assert line.status is CostStatus.NOT_BILLED
    assert line.code is code
    assert line.amount == 0
    assert line.reason


def test_every_local_step_that_answers_bills_nothing() -> None:
    for made in (BM25Step(), CrossEncoderStep(Scorer()), CallableStep(good)):
        outcome = with_fallback([made], QUERY, DOCUMENTS)
        assert outcome.status == "ok"
        (line,) = price_outcome(PRICES, outcome)
        _not_billed(line, CostCode.LOCAL_MODEL)
        assert outcome_spend([line]) == 0


def test_local_steps_that_fail_skip_or_time_out_bill_nothing(release: threading.Event) -> None:
    outcome = with_fallback(
        [
            CallableStep(_raising, name="raising"),
            CallableStep(returning(None), name="nonsense"),
            step(lambda q, d, k: release.wait(5), timeout=0.05),
            step(good, gate=lambda check: False),
            IdentityStep(),
        ],
        QUERY,
        DOCUMENTS,
    )
    assert [(a.status, a.reason) for a in outcome.attempts] == [
        ("failed", "step_error"),
        ("failed", "invalid_results"),
        ("timeout", "timeout"),
        ("skipped", "gate_declined"),
        ("skipped", "identity"),
    ]
    lines = price_outcome(PRICES, outcome)
    for line in lines[:3]:
        _not_billed(line, CostCode.LOCAL_MODEL)
    for line in lines[3:]:
        _not_billed(line, CostCode.NOT_ATTEMPTED)
    assert all(line.status is not CostStatus.UNPRICED for line in lines)
    assert outcome_spend(lines) == 0


def test_a_breaker_skip_and_a_gate_skip_are_not_attempted(providers: Providers) -> None:
    breakers = Breakers(failures=1)
    failing = providers.cohere("fail-503")
    with_fallback([failing, good], QUERY, DOCUMENTS, breakers=breakers)
    outcome = with_fallback(
        [failing, step(providers.jina(), gate=lambda check: "too_big"), good],
        QUERY,
        DOCUMENTS,
        breakers=breakers,
    )
    assert [a.reason for a in outcome.attempts] == ["circuit_open", "too_big", None]
    circuit, gate, _ = price_outcome(PRICES, outcome)
    _not_billed(circuit, CostCode.NOT_ATTEMPTED)
    assert circuit.reason is not None
    assert "breaker" in circuit.reason
    _not_billed(gate, CostCode.NOT_ATTEMPTED)


def test_an_aborted_cohere_step_is_estimated_from_its_document_count(
    providers: Providers,
) -> None:
    token = CancelToken()
    threading.Timer(0.15, token.cancel).start()
    outcome = with_fallback([providers.cohere("slow-1000"), good], QUERY, MANY, cancel=token)
    assert outcome.status == "aborted"
    (line,) = price_outcome(PRICES, outcome)
    assert line.status is CostStatus.ESTIMATED
    assert line.amount == Decimal("0.004")  # 150 documents: 2 search units at 0.002
    assert outcome_spend([line]) == Decimal("0.004")


def test_a_timed_out_cohere_step_then_a_local_answer(providers: Providers) -> None:
    started = time.monotonic()
    outcome = with_fallback(
        [step(providers.cohere("slow-1000"), timeout=0.2), BM25Step()], QUERY, MANY
    )
    assert time.monotonic() - started < 0.9
    assert [a.status for a in outcome.attempts] == ["timeout", "ok"]
    estimated, local = price_outcome(PRICES, outcome)
    assert estimated.status is CostStatus.ESTIMATED
    assert estimated.amount == Decimal("0.004")
    _not_billed(local, CostCode.LOCAL_MODEL)
    assert outcome_spend([estimated, local]) == Decimal("0.004")


def test_a_callable_calling_a_paid_service_is_priced_from_its_usage() -> None:
    def paid(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        ranking = [
            ScoredDocument(index=i, relevance_score=s) for i, s in good(query, documents, top_k)
        ]
        return StepRanking(ranking, RerankUsage(search_units=3))

    made = CallableStep(paid, provider="cohere", name="rerank-v3.5", billing="search_units")
    outcome = with_fallback([made], QUERY, DOCUMENTS)
    (line,) = price_outcome(PRICES, outcome)
    assert line.status is CostStatus.PRICED
    assert line.amount == Decimal("0.006")


def test_a_paid_callable_that_reports_no_usage_is_not_priced_at_zero() -> None:
    made = CallableStep(good, provider="cohere", name="rerank-v3.5", billing="search_units")
    (line,) = price_outcome(PRICES, with_fallback([made], QUERY, DOCUMENTS))
    assert line.status is not CostStatus.PRICED
    assert line.amount is None or line.status is not CostStatus.NOT_BILLED
    assert outcome_spend([line]) is None


def test_the_spend_of_a_chain_sums_its_lines(providers: Providers) -> None:
    outcome = with_fallback(
        [providers.jina("fail-500"), providers.cohere(), good], QUERY, DOCUMENTS
    )
    lines = price_outcome(PRICES, outcome)
    assert [line.status for line in lines] == [CostStatus.NOT_BILLED, CostStatus.PRICED]
    assert outcome_spend(lines) == Decimal("0.002")
