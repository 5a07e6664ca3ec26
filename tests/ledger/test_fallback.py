"""Rerank fallback chains against the stand-in: order, statuses, deadlines, cancellation, the
attempt records, their pricing, and exactly one event per attempt that called a provider."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from decimal import Decimal

import pytest

from spanledger import Recorder, RerankUsage
from spanledger.costs import CostCode, CostLine, CostStatus
from spanledger.events import Event, RerankEvent, RerankFailedEvent
from spanledger.ledger import outcome_spend, price_outcome
from spanledger.providers import CohereReranker, JinaReranker, RerankProvider, TEIReranker
from spanledger.providers.fallback import (
    FallbackAttempt,
    RerankOutcome,
    awith_fallback,
    with_fallback,
)
from spanledger.testing import StandIn

from .conftest import ListSink, entry, table

QUERY = "how do tides depend on the moon"
DOCUMENTS = [
    "lighthouses warn ships",
    "tides follow the moon",
    "sea salt from pools",
    "the moon pulls the oceans and tides rise",
]
PRICES = table(
    entry("cohere", "rerank-v3.5", per_search_unit="0.002"),
    entry("cohere", "slow-*", per_search_unit="0.0025"),
    entry("jina", "jina-reranker-v2", input_per_mtok="0.02"),
    entry("jina", "slow-*", input_per_mtok="0.05"),
    entry("jina", "fail-*", input_per_mtok="0.05"),
    entry("tei", "*", per_request="0"),
)


class Chain:
    """Providers bound to one recorder and one stand-in; closed at the end of the test."""

    def __init__(self, standin: StandIn) -> None:
        self.standin = standin
        self.sink = ListSink()
        self.recorder = Recorder([self.sink])
        self._made: list[RerankProvider] = []

    def cohere(self, model: str) -> CohereReranker:
        step = CohereReranker(
            model, base_url=self.standin.base_url("cohere"), recorder=self.recorder
        )
        self._made.append(step)
        return step

    def jina(self, model: str) -> JinaReranker:
        step = JinaReranker(model, base_url=self.standin.base_url("jina"), recorder=self.recorder)
        self._made.append(step)
        return step

    def tei(self, behaviour: str | None = None) -> TEIReranker:
        step = TEIReranker(
            "bge-reranker",
            base_url=self.standin.base_url("tei", behaviour),
            recorder=self.recorder,
        )
        self._made.append(step)
        return step

    async def aclose(self) -> None:
        for step in self._made:
            await step.aclose()

    def close(self) -> None:
        for step in self._made:
            step.close()


@pytest.fixture
def chain(standin: StandIn) -> Iterator[Chain]:
    made = Chain(standin)
    yield made
    made.close()


@pytest.fixture
async def achain(standin: StandIn) -> AsyncIterator[Chain]:
    made = Chain(standin)
    yield made
    await made.aclose()


def _identity_check(outcome: RerankOutcome, size: int) -> None:
    assert [result.index for result in outcome.results] == list(range(size))
    assert all(result.relevance_score == 0.0 for result in outcome.results)


# --------------------------------------------------------------------------- sync


def test_first_step_answers_ok(chain: Chain) -> None:
    outcome = with_fallback(
        [chain.cohere("rerank-v3.5"), chain.jina("jina-reranker-v2")], QUERY, DOCUMENTS
    )
    assert outcome.status == "ok"
    assert outcome.answered_by == 0
    assert outcome.reason is None
    assert len(outcome.results) == len(DOCUMENTS)
    assert outcome.results[0].index in (1, 3)
    (attempt,) = outcome.attempts
    assert (attempt.provider, attempt.model, attempt.status) == ("cohere", "rerank-v3.5", "ok")
    assert attempt.usage == RerankUsage(search_units=1)
    assert attempt.usage_estimated is False
    assert attempt.duration_ms is not None
    assert 0 <= attempt.duration_ms < 5000
    (event,) = chain.sink.events
    assert isinstance(event, RerankEvent)
    assert event.model == "rerank-v3.5"


def test_a_later_step_answering_is_degraded(chain: Chain) -> None:
    outcome = with_fallback(
        [chain.cohere("fail-503"), chain.jina("fail-429"), chain.jina("jina-reranker-v2")],
        QUERY,
        DOCUMENTS,
        top_k=2,
    )
    assert outcome.status == "degraded"
    assert outcome.answered_by == 2
    assert outcome.reason
    assert len(outcome.results) == 2
    statuses = [(a.provider, a.model, a.status) for a in outcome.attempts]
    assert statuses == [
        ("cohere", "fail-503", "failed"),
        ("jina", "fail-429", "failed"),
        ("jina", "jina-reranker-v2", "ok"),
    ]
    first, second, third = outcome.attempts
    assert first.reason == "provider_unavailable"
    assert second.reason == "provider_rate_limit"
    assert first.usage is None
    assert second.usage is None
    assert third.usage is not None
    assert third.usage.input_tokens is not None
    assert third.usage.input_tokens > 0
    assert all(a.duration_ms is not None for a in outcome.attempts)
    events = chain.sink.events
    kinds: list[type[Event]] = [RerankFailedEvent, RerankFailedEvent, RerankEvent]
    assert [type(e) for e in events] == kinds
    assert [e.model for e in events] == ["fail-503", "fail-429", "jina-reranker-v2"]


def test_every_step_failing_is_degraded_with_identity_order(chain: Chain) -> None:
    outcome = with_fallback(
        [chain.cohere("fail-500"), chain.tei("fail-503")], QUERY, DOCUMENTS, top_k=3
    )
    assert outcome.status == "degraded"
    assert outcome.answered_by is None
    assert outcome.reason
    _identity_check(outcome, 3)
    assert [a.status for a in outcome.attempts] == ["failed", "failed"]
    assert len(chain.sink.events) == 2


def test_identity_order_without_top_k_covers_every_document(chain: Chain) -> None:
    outcome = with_fallback([chain.jina("fail-500")], QUERY, DOCUMENTS)
    _identity_check(outcome, len(DOCUMENTS))


def test_top_k_above_the_document_count_is_capped(chain: Chain) -> None:
    outcome = with_fallback([chain.jina("fail-500")], QUERY, DOCUMENTS, top_k=50)
    _identity_check(outcome, len(DOCUMENTS))


def test_no_documents_is_skipped_without_calls(chain: Chain) -> None:
    sent_before = len(chain.standin.requests)
    outcome = with_fallback([chain.cohere("rerank-v3.5")], QUERY, [])
    assert outcome.status == "skipped"
    assert outcome.attempts == []
    assert outcome.results == []
    assert chain.sink.events == []
    assert len(chain.standin.requests) == sent_before


def test_no_steps_is_degraded_identity() -> None:
    outcome = with_fallback([], QUERY, DOCUMENTS, top_k=2)
    assert outcome.status == "degraded"
    assert outcome.attempts == []
    _identity_check(outcome, 2)


def test_timeout_is_estimated_and_later_steps_are_skipped(chain: Chain) -> None:
    documents = [f"passage {n}" for n in range(250)]
    started = time.monotonic()
    outcome = with_fallback(
        [chain.cohere("slow-2000"), chain.jina("jina-reranker-v2"), chain.tei()],
        QUERY,
        documents,
        top_k=5,
        deadline=0.4,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 1.5, "the chain must not wait for the slow step"
    assert outcome.status == "degraded"
    assert outcome.answered_by is None
    _identity_check(outcome, 5)
    slow, jina, tei = outcome.attempts
    assert slow.status == "timeout"
    assert slow.usage == RerankUsage(search_units=3)
    assert slow.usage_estimated is True
    assert slow.duration_ms is not None
    assert 300 <= slow.duration_ms < 1500
    assert (jina.status, tei.status) == ("skipped", "skipped")
    assert jina.reason is not None
    assert "deadline" in jina.reason
    assert jina.usage is None
    assert tei.usage is None
    # only the attempt that called a provider emitted an event, with its estimate
    (event,) = chain.sink.events
    assert isinstance(event, RerankFailedEvent)
    assert event.model == "slow-2000"
    assert event.estimated_usage == RerankUsage(search_units=3)

    lines = price_outcome(PRICES, outcome)
    assert [line.status for line in lines] == [
        CostStatus.ESTIMATED,
        CostStatus.NOT_BILLED,
        CostStatus.NOT_BILLED,
    ]
    assert lines[0].amount == Decimal("0.0075")
    assert lines[1].code is CostCode.NOT_ATTEMPTED
    assert lines[1].amount == 0
    assert lines[1].reason
    assert outcome_spend(lines) == Decimal("0.0075")


def test_timeout_on_a_token_vendor_is_estimated_in_tokens(chain: Chain) -> None:
    query, documents = "é", ["日本語x", "ab"]  # (2 + 10) + (2 + 2) = 16 bytes -> 4 tokens
    outcome = with_fallback([chain.jina("slow-2000")], query, documents, deadline=0.3)
    (attempt,) = outcome.attempts
    assert attempt.status == "timeout"
    assert attempt.usage == RerankUsage(input_tokens=4)
    (line,) = price_outcome(PRICES, outcome)
    assert line.status is CostStatus.ESTIMATED
    assert line.amount == Decimal("0.05") * 4 / Decimal(1_000_000)


def test_exhausted_deadline_skips_every_step(chain: Chain) -> None:
    outcome = with_fallback(
        [chain.cohere("rerank-v3.5"), chain.jina("jina-reranker-v2")],
        QUERY,
        DOCUMENTS,
        deadline=0,
    )
    assert outcome.status == "degraded"
    assert [a.status for a in outcome.attempts] == ["skipped", "skipped"]
    assert chain.sink.events == []
    lines = price_outcome(PRICES, outcome)
    assert all(line.code is CostCode.NOT_ATTEMPTED for line in lines)
    assert outcome_spend(lines) == 0


def test_failed_then_answered_prices_attempt_by_attempt(chain: Chain) -> None:
    outcome = with_fallback([chain.jina("fail-500"), chain.cohere("rerank-v3.5")], QUERY, DOCUMENTS)
    lines = price_outcome(PRICES, outcome)
    failed, answered = lines
    assert failed.status is CostStatus.NOT_BILLED
    assert failed.code is CostCode.FAILED_UNBILLED
    assert failed.amount == 0
    assert failed.reason is not None
    assert "failed" in failed.reason
    assert answered.status is CostStatus.PRICED
    assert answered.amount == Decimal("0.002")
    assert outcome_spend(lines) == Decimal("0.002")


def test_a_failed_attempt_the_provider_did_the_work_for_is_priced_from_its_estimate() -> None:
    """An unreadable 2xx body: the step failed, but the provider billed the work."""
    estimate = RerankUsage(search_units=1)
    attempt = FallbackAttempt(
        provider="cohere",
        model="rerank-v3.5",
        status="failed",
        reason="provider_invalid_response",
        started_at=datetime.now(UTC),
        usage=estimate,
        usage_estimated=True,
    )
    (line,) = price_outcome(PRICES, RerankOutcome(status="degraded", attempts=[attempt]))
    assert line.status is CostStatus.ESTIMATED
    assert line.amount == Decimal("0.002")


def test_an_unpriced_attempt_makes_the_chain_spend_unknown(chain: Chain) -> None:
    outcome = with_fallback([chain.jina("jina-unlisted")], QUERY, DOCUMENTS)
    lines = price_outcome(PRICES, outcome)
    assert lines[0].status is CostStatus.UNPRICED
    assert outcome_spend(lines) is None


def test_outcome_spend_sums_exactly() -> None:
    lines = [
        CostLine(status=CostStatus.PRICED, amount=Decimal("0.0000001234567"), currency="USD"),
        CostLine(status=CostStatus.ESTIMATED, amount=Decimal("0.1"), currency="USD"),
        CostLine(status=CostStatus.NOT_BILLED, amount=Decimal(0)),
    ]
    assert outcome_spend(lines) == Decimal("0.1000001234567")
    assert outcome_spend([]) == 0
    unknown = CostLine(status=CostStatus.UNMETERED, amount=None)
    assert outcome_spend([*lines, unknown]) is None


def test_a_closed_step_does_not_make_the_chain_raise(chain: Chain) -> None:
    closed = chain.cohere("rerank-v3.5")
    closed.close()
    outcome = with_fallback([closed, chain.jina("jina-reranker-v2")], QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1
    assert outcome.attempts[0].status == "failed"


# --------------------------------------------------------------------------- async


async def test_async_first_step_answers_ok(achain: Chain) -> None:
    outcome = await awith_fallback([achain.jina("jina-reranker-v2")], QUERY, DOCUMENTS, top_k=2)
    assert outcome.status == "ok"
    assert outcome.answered_by == 0
    assert len(outcome.results) == 2
    assert len(achain.sink.events) == 1


async def test_async_later_step_answers_degraded(achain: Chain) -> None:
    outcome = await awith_fallback(
        [achain.tei("fail-503"), achain.cohere("rerank-v3.5")], QUERY, DOCUMENTS
    )
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1
    assert [a.status for a in outcome.attempts] == ["failed", "ok"]
    kinds: list[type[Event]] = [RerankFailedEvent, RerankEvent]
    assert [type(e) for e in achain.sink.events] == kinds


async def test_async_step_running_at_the_deadline_is_cancelled(achain: Chain) -> None:
    documents = [f"passage {n}" for n in range(150)]
    started = time.monotonic()
    outcome = await awith_fallback(
        [achain.cohere("slow-2000"), achain.cohere("rerank-v3.5")],
        QUERY,
        documents,
        top_k=4,
        deadline=0.3,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 1.5
    assert outcome.status == "degraded"
    _identity_check(outcome, 4)
    slow, fast = outcome.attempts
    assert slow.status == "timeout"
    assert slow.usage == RerankUsage(search_units=2)
    assert slow.usage_estimated is True
    assert slow.duration_ms is not None
    assert slow.duration_ms < 1500
    assert fast.status == "skipped"
    (event,) = achain.sink.events
    assert isinstance(event, RerankFailedEvent)
    assert event.estimated_usage == RerankUsage(search_units=2)
    lines = price_outcome(PRICES, outcome)
    assert lines[0].status is CostStatus.ESTIMATED
    assert lines[0].amount == Decimal("0.005")
    assert lines[1].code is CostCode.NOT_ATTEMPTED
    assert outcome_spend(lines) == Decimal("0.005")


async def test_async_every_step_failing_is_identity(achain: Chain) -> None:
    outcome = await awith_fallback(
        [achain.jina("fail-500"), achain.cohere("fail-502")], QUERY, DOCUMENTS, top_k=1
    )
    assert outcome.status == "degraded"
    _identity_check(outcome, 1)
    assert len(achain.sink.events) == 2


async def test_async_no_documents_is_skipped(achain: Chain) -> None:
    outcome = await awith_fallback([achain.jina("jina-reranker-v2")], QUERY, [])
    assert outcome.status == "skipped"
    assert outcome.attempts == []
    assert achain.sink.events == []


async def test_async_closed_step_does_not_make_the_chain_raise(achain: Chain) -> None:
    closed = achain.jina("jina-reranker-v2")
    await closed.aclose()
    outcome = await awith_fallback([closed, achain.cohere("rerank-v3.5")], QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1
