"""The deadline bounds the whole chain, timed from the caller's side (a wall clock around the
chain call): a sync chain stops waiting for a step at its budget whatever the step does (BM25
over a large input, a server trickling its answer), and an async chain hears the caller's
cancellation even while a step that ran out of its budget is still unwinding.

Margins are generous for a loaded two-core machine, and still far below what the chain took
when it waited for such a step to finish."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import pytest

from spanledger import Recorder
from spanledger.chains import (
    BM25Step,
    CallableStep,
    CancelToken,
    RerankStep,
    StepRanking,
    awith_fallback,
    step,
    with_fallback,
)
from spanledger.chains.steps import INLINE_CHARACTERS, ranked_by_scores
from spanledger.events import Event, RerankFailedEvent
from spanledger.providers import CohereReranker
from spanledger.testing import StandIn

from .conftest import DOCUMENTS, QUERY, Trickle, good

SLACK = 1.0
"""Seconds a chain may take past its deadline here: a loaded machine's scheduling, and
building a degraded outcome over 10,000 documents while an abandoned step still runs."""


@pytest.fixture(scope="module")
def large() -> list[str]:
    """10,000 documents of 300 words: BM25 over them takes seconds (3.5-5.5 s here)."""
    texts = [" ".join(f"w{(seed * 7919 + k) % 5000}" for k in range(300)) for seed in range(50)]
    return [f"{texts[n % 50]} tides moon {n}" for n in range(10_000)]


def _timed(run: Any) -> tuple[Any, float]:
    started = time.monotonic()
    outcome = run()
    return outcome, time.monotonic() - started


# --------------------------------------------------------------------------- sync: BM25


def test_bm25_over_a_large_input_ends_at_the_deadline(large: list[str]) -> None:
    bm25 = BM25Step()
    outcome, elapsed = _timed(lambda: with_fallback([bm25], QUERY, large, deadline=0.5))
    assert elapsed < 0.5 + SLACK, f"the chain took {elapsed:.2f} s with a 0.5 s deadline"
    (attempt,) = outcome.attempts
    assert (attempt.status, attempt.reason) == ("timeout", "timeout")
    assert outcome.status == "degraded"


def test_bm25_past_its_own_timeout_lets_the_chain_move_on(large: list[str]) -> None:
    steps = [step(BM25Step(), timeout=0.3), CallableStep(good, name="next")]
    outcome, elapsed = _timed(lambda: with_fallback(steps, QUERY, large, top_k=3, deadline=5))
    assert elapsed < 0.3 + SLACK
    assert [a.status for a in outcome.attempts] == ["timeout", "ok"]
    assert outcome.answered_by == 1


class _OneLongStretch(BM25Step):
    """BM25 whose work is one stretch that never looks at the clock, as inside the library;
    here a wait that ends with the test, so nothing is left spending a core afterwards."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        self.release.wait(5)
        return StepRanking(ranked_by_scores([0.0] * len(documents), top_k))


def test_bm25_that_never_looks_at_the_clock_still_ends_at_the_deadline(large: list[str]) -> None:
    """The chain stops waiting for it: the bound is the caller's, not the step's."""
    release = threading.Event()
    stretch = _OneLongStretch(release)
    try:
        outcome, elapsed = _timed(lambda: with_fallback([stretch], QUERY, large, deadline=0.2))
    finally:
        release.set()
    assert elapsed < 0.2 + SLACK, f"the chain took {elapsed:.2f} s with a 0.2 s deadline"
    assert [a.status for a in outcome.attempts] == ["timeout"]


def test_bm25_left_behind_stops_at_its_next_look_at_the_clock(large: list[str]) -> None:
    """A run the chain stopped waiting for does not spend a core for seconds more."""
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        BM25Step().rank(QUERY, large, None, 0.2)
    assert time.monotonic() - started < 0.2 + SLACK


def test_bm25_over_a_small_input_runs_on_the_callers_thread(large: list[str]) -> None:
    threads: list[str] = []

    class Watched(BM25Step):
        def rank(
            self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
        ) -> StepRanking:
            threads.append(threading.current_thread().name)
            return super().rank(query, documents, top_k, timeout)

    small = ["w" * (INLINE_CHARACTERS // 4)] * 4
    assert Watched().runs_inline(small)
    assert not Watched().runs_inline([*small, "one more"])
    assert not Watched().runs_inline([""] * (INLINE_CHARACTERS + 1))
    assert with_fallback([Watched()], QUERY, small).status == "ok"
    assert with_fallback([Watched()], QUERY, large[:100], deadline=30).status == "ok"
    assert threads == [threading.current_thread().name, "spanledger-chain"]


class _LateInline(RerankStep):
    """A step that says it runs inline, then takes longer than its budget and answers well."""

    kind = "callable"

    def __init__(self) -> None:
        super().__init__("local", "late", timeout=0.05)

    def runs_inline(self, documents: Sequence[str]) -> bool:
        return True

    def rank(
        self, query: str, documents: Sequence[str], top_k: int | None, timeout: float | None
    ) -> StepRanking:
        time.sleep(0.15)
        return StepRanking(ranked_by_scores([1.0] * len(documents), top_k))


def test_a_step_run_inline_that_ends_past_its_budget_timed_out() -> None:
    outcome = with_fallback([_LateInline(), good], QUERY, DOCUMENTS)
    assert [(a.status, a.reason) for a in outcome.attempts] == [
        ("timeout", "timeout"),
        ("ok", None),
    ]


def test_a_step_raising_timeout_error_timed_out_as_in_an_async_chain() -> None:
    def expired(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        raise TimeoutError

    async def aexpired(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        raise TimeoutError

    sync = with_fallback([expired, good], QUERY, DOCUMENTS)
    async_ = asyncio.run(awith_fallback([aexpired, good], QUERY, DOCUMENTS))
    assert [a.status for a in sync.attempts] == ["timeout", "ok"]
    assert [(a.status, a.reason) for a in sync.attempts] == [
        (a.status, a.reason) for a in async_.attempts
    ]


# --------------------------------------------------------------------------- sync: remote


def _trickling(trickle: Trickle, events: list[Event]) -> CohereReranker:
    return CohereReranker(
        "rerank-v3.5", base_url=trickle.base_url, api_key="k", recorder=Recorder([events.append])
    )


def test_a_trickling_reranker_ends_at_the_deadline(trickle: Trickle) -> None:
    """The server sends a byte every 50 ms: no read ever times out, and the answer takes
    about 5 s to arrive."""
    events: list[Event] = []
    with _trickling(trickle, events) as reranker:
        outcome, elapsed = _timed(
            lambda: with_fallback([reranker, BM25Step()], QUERY, DOCUMENTS, top_k=1, deadline=0.5)
        )
    assert elapsed < 0.5 + SLACK, f"the chain took {elapsed:.2f} s with a 0.5 s deadline"
    assert trickle.served == 1
    remote, bm25 = outcome.attempts
    assert (remote.status, remote.reason) == ("timeout", "timeout")
    assert remote.usage_estimated is True, "the request left: it may have been billed"
    assert (bm25.status, bm25.reason) == ("skipped", "deadline_exhausted")


def test_a_trickling_reranker_past_its_timeout_lets_the_chain_move_on(trickle: Trickle) -> None:
    events: list[Event] = []
    with _trickling(trickle, events) as reranker:
        outcome, elapsed = _timed(
            lambda: with_fallback(
                [step(reranker, timeout=0.3), BM25Step()], QUERY, DOCUMENTS, top_k=1, deadline=5
            )
        )
    assert elapsed < 0.3 + SLACK
    assert [a.status for a in outcome.attempts] == ["timeout", "ok"]
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1


def test_a_slow_remote_step_records_its_own_call_before_the_chain_ends(standin: StandIn) -> None:
    """A remote step's timeout ends its call at about its budget; the chain gives it a moment
    to record its event, so the request that ran the chain sees the call. (The HTTP client is
    made beforehand: making one, the first call's, takes longer than any read timeout.)"""
    events: list[Event] = []
    with httpx.Client() as client:
        slow = CohereReranker(
            "slow-2000",
            base_url=standin.base_url("cohere"),
            http_client=client,
            recorder=Recorder([events.append]),
        )
        outcome = with_fallback([slow, good], QUERY, DOCUMENTS, deadline=0.3)
        (event,) = events  # already there when the chain returns
    assert isinstance(event, RerankFailedEvent)
    assert outcome.attempts[0].status == "timeout"


# --------------------------------------------------------------------------- async: cancel


def _unwinding_slowly() -> Any:
    """A step that catches its cancellation and takes 0.5 s to unwind."""

    async def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            await asyncio.sleep(0.5)
            raise
        return good(query, documents, top_k)

    return rank


async def _sleeping(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    await asyncio.sleep(5)
    return good(query, documents, top_k)


async def test_cancelling_the_task_while_a_timed_out_step_unwinds_aborts_at_once() -> None:
    task = asyncio.ensure_future(
        awith_fallback(
            [step(_unwinding_slowly(), timeout=0.2), _sleeping], QUERY, DOCUMENTS, deadline=4
        )
    )
    await asyncio.sleep(0.25)  # step 0 ran out of its budget at 0.2 s and is unwinding
    cancelled_at = time.monotonic()
    task.cancel()
    outcome = await task
    returned = time.monotonic() - cancelled_at
    assert returned < 0.5, f"the chain returned {returned:.2f} s after the cancel"
    assert outcome.status == "aborted"
    assert [(a.status, a.reason) for a in outcome.attempts] == [("timeout", "timeout")]
    assert not task.cancelled()


async def test_a_token_set_while_the_last_step_unwinds_aborts() -> None:
    token = CancelToken()
    asyncio.get_running_loop().call_later(0.25, token.cancel)
    outcome, elapsed = await _atimed(
        awith_fallback(
            [step(_unwinding_slowly(), timeout=0.2)], QUERY, DOCUMENTS, deadline=4, cancel=token
        )
    )
    assert outcome.status == "aborted"
    assert [a.status for a in outcome.attempts] == ["timeout"]
    assert elapsed < 0.25 + 0.5


async def test_cancelling_the_task_while_the_last_step_unwinds_aborts() -> None:
    task = asyncio.ensure_future(
        awith_fallback([step(_unwinding_slowly(), timeout=0.2)], QUERY, DOCUMENTS, deadline=4)
    )
    await asyncio.sleep(0.25)
    task.cancel()
    outcome = await task
    assert outcome.status == "aborted"
    assert [a.status for a in outcome.attempts] == ["timeout"]
    assert not task.cancelled()


async def _atimed(run: Any) -> tuple[Any, float]:
    started = time.monotonic()
    outcome = await run
    return outcome, time.monotonic() - started
