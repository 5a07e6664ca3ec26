"""Deadlines and cancellation: no step starts on a spent budget, a step's own timeout, a local
step that overruns, and the caller cancelling (a token, an event, cancelling the task): the
chain returns ``aborted`` at once with every attempt so far."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest

from spanledger.costs import CostStatus
from spanledger.events import RerankUsage
from spanledger.ledger import price_outcome
from spanledger.providers.fallback import CancelToken, RerankOutcome, awith_fallback, with_fallback
from spanledger.providers.steps import CallableStep, GateCheck, step

from .conftest import DOCUMENTS, PRICES, QUERY, Providers, good

MANY = [f"passage {n} about the tides" for n in range(150)]
"""Enough documents for two Cohere search units."""


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test, so a sleeping step's thread ends."""
    event = threading.Event()
    yield event
    event.set()


def _sleeping(release: threading.Event, seconds: float = 5.0) -> Callable[..., Any]:
    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        release.wait(seconds)
        return good(query, documents, top_k)

    return rank


def _later(seconds: float, action: Callable[[], object]) -> list[float]:
    """Run ``action`` on a timer thread after ``seconds``; the list gets the moment it ran."""
    moments: list[float] = []

    def run() -> None:
        time.sleep(seconds)
        moments.append(time.monotonic())
        action()

    threading.Thread(target=run, daemon=True).start()
    return moments


# --------------------------------------------------------------------------- budgets


def test_a_spent_deadline_starts_no_step(providers: Providers) -> None:
    ran: list[int] = []

    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        ran.append(1)
        return good(query, documents, top_k)

    sent = providers.sent()
    outcome = with_fallback([providers.cohere(), rank], QUERY, DOCUMENTS, deadline=0)
    assert [(a.status, a.reason) for a in outcome.attempts] == [
        ("skipped", "deadline_exhausted"),
        ("skipped", "deadline_exhausted"),
    ]
    assert outcome.status == "degraded"
    assert ran == []
    assert providers.sent() == sent


async def test_a_spent_deadline_starts_no_step_in_the_async_chain() -> None:
    outcome = await awith_fallback([good, good], QUERY, DOCUMENTS, deadline=0)
    assert [a.reason for a in outcome.attempts] == ["deadline_exhausted"] * 2


def test_a_step_timeout_bounds_one_step_and_the_chain_moves_on(release: threading.Event) -> None:
    started = time.monotonic()
    outcome = with_fallback(
        [step(_sleeping(release), timeout=0.15), CallableStep(good, name="next")],
        QUERY,
        DOCUMENTS,
        deadline=5.0,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 0.15 + 0.2
    slow, kept = outcome.attempts
    assert (slow.status, slow.reason) == ("timeout", "timeout")
    assert slow.duration_ms is not None
    assert 140 <= slow.duration_ms < 350
    assert slow.usage is None, "a local step bills nothing, so nothing is estimated"
    assert kept.status == "ok"
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1


def test_step_timeout_applies_to_every_step(release: threading.Event) -> None:
    started = time.monotonic()
    outcome = with_fallback(
        [_sleeping(release), _sleeping(release), good],
        QUERY,
        DOCUMENTS,
        step_timeout=0.1,
    )
    assert time.monotonic() - started < 0.2 + 0.25
    assert [a.status for a in outcome.attempts] == ["timeout", "timeout", "ok"]


def test_the_smaller_of_step_timeout_and_a_steps_own_wins(release: threading.Event) -> None:
    started = time.monotonic()
    outcome = with_fallback(
        [step(_sleeping(release), timeout=0.1), good], QUERY, DOCUMENTS, step_timeout=2.0
    )
    assert time.monotonic() - started < 0.1 + 0.25
    assert [a.status for a in outcome.attempts] == ["timeout", "ok"]


def test_a_local_step_past_the_chain_deadline_is_a_timeout(release: threading.Event) -> None:
    started = time.monotonic()
    outcome = with_fallback([_sleeping(release), good], QUERY, DOCUMENTS, deadline=0.2)
    assert time.monotonic() - started < 0.2 + 0.2
    assert [(a.status, a.reason) for a in outcome.attempts] == [
        ("timeout", "timeout"),
        ("skipped", "deadline_exhausted"),
    ]
    assert [r.index for r in outcome.results] == [0, 1, 2, 3]


async def test_an_async_step_past_its_timeout_is_cancelled() -> None:
    cancelled: list[bool] = []

    async def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        return good(query, documents, top_k)

    started = time.monotonic()
    outcome = await awith_fallback([step(rank, timeout=0.1), good], QUERY, DOCUMENTS)
    assert time.monotonic() - started < 0.1 + 0.25
    assert [a.status for a in outcome.attempts] == ["timeout", "ok"]
    assert cancelled == [True]


# --------------------------------------------------------------------------- cancel (sync)


def _aborted_check(outcome: RerankOutcome, cancelled_at: list[float], returned: float) -> None:
    assert outcome.status == "aborted"
    assert cancelled_at, "the cancel ran"
    assert returned - cancelled_at[0] < 0.08, "the chain returns within ~50 ms of the cancel"
    (running,) = outcome.attempts  # the later step never appears
    assert (running.status, running.reason) == ("aborted", "aborted")
    assert running.usage == RerankUsage(search_units=2)
    assert running.usage_estimated is True
    assert [r.index for r in outcome.results] == [0, 1, 2]
    line = price_outcome(PRICES, outcome)[0]
    assert line.status is CostStatus.ESTIMATED
    assert line.amount is not None
    assert line.amount > 0


def test_a_cancel_token_aborts_a_running_provider_step(providers: Providers) -> None:
    token = CancelToken()
    cancelled_at = _later(0.2, token.cancel)
    outcome = with_fallback(
        [providers.cohere("slow-1000"), good], QUERY, MANY, top_k=3, cancel=token
    )
    _aborted_check(outcome, cancelled_at, time.monotonic())
    assert token.cancelled


def test_a_threading_event_aborts_a_running_provider_step(providers: Providers) -> None:
    event = threading.Event()
    cancelled_at = _later(0.2, event.set)
    outcome = with_fallback(
        [providers.cohere("slow-1000"), good], QUERY, MANY, top_k=3, cancel=event
    )
    _aborted_check(outcome, cancelled_at, time.monotonic())


def test_a_token_set_before_the_chain_aborts_with_no_attempt(providers: Providers) -> None:
    token = CancelToken()
    token.cancel()
    sent = providers.sent()
    outcome = with_fallback([providers.cohere(), good], QUERY, DOCUMENTS, cancel=token)
    assert outcome.status == "aborted"
    assert outcome.attempts == []
    assert providers.sent() == sent
    assert providers.events == []


def test_a_cancel_during_a_hanging_gate_aborts(release: threading.Event) -> None:
    token = CancelToken()
    cancelled_at = _later(0.1, token.cancel)
    outcome = with_fallback(
        [step(good, gate=lambda check: release.wait(5)), good],
        QUERY,
        DOCUMENTS,
        cancel=token,
    )
    assert time.monotonic() - cancelled_at[0] < 0.08
    assert outcome.status == "aborted"
    assert outcome.attempts == []


def test_one_token_cancels_several_chains(release: threading.Event) -> None:
    token = CancelToken()
    results: list[RerankOutcome] = []

    def run() -> None:
        results.append(with_fallback([_sleeping(release), good], QUERY, DOCUMENTS, cancel=token))

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    token.cancel()
    for thread in threads:
        thread.join(2)
    assert [o.status for o in results] == ["aborted"] * 3
    assert all([a.status for a in o.attempts] == ["aborted"] for o in results)


# --------------------------------------------------------------------------- cancel (async)


async def test_cancelling_the_task_returns_an_aborted_outcome(aproviders: Providers) -> None:
    task = asyncio.create_task(
        awith_fallback([aproviders.cohere("slow-1000"), good], QUERY, MANY, top_k=3)
    )
    await asyncio.sleep(0.2)
    cancelled_at = time.monotonic()
    task.cancel()
    outcome = await task  # returns, does not raise CancelledError
    returned = time.monotonic()
    assert returned - cancelled_at < 0.2
    assert outcome.status == "aborted"
    (running,) = outcome.attempts
    assert running.status == "aborted"
    assert running.usage == RerankUsage(search_units=2)
    assert running.usage_estimated is True
    assert not task.cancelled()


async def test_an_async_cancel_token_aborts_a_running_step(aproviders: Providers) -> None:
    token = CancelToken()
    loop = asyncio.get_running_loop()
    cancelled_at: list[float] = []

    def cancel() -> None:
        cancelled_at.append(time.monotonic())
        token.cancel()

    loop.call_later(0.2, cancel)
    outcome = await awith_fallback(
        [aproviders.cohere("slow-1000"), good], QUERY, MANY, top_k=3, cancel=token
    )
    returned = time.monotonic()
    assert returned - cancelled_at[0] < 0.15
    assert outcome.status == "aborted"
    assert [a.status for a in outcome.attempts] == ["aborted"]


async def test_a_token_cancelled_from_another_thread_aborts_the_async_chain() -> None:
    token = CancelToken()

    async def slow(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        await asyncio.sleep(5)

    cancelled_at = _later(0.1, token.cancel)
    outcome = await awith_fallback([slow, good], QUERY, DOCUMENTS, cancel=token)
    assert time.monotonic() - cancelled_at[0] < 0.15
    assert outcome.status == "aborted"


async def test_an_async_token_set_before_the_chain_sends_nothing(aproviders: Providers) -> None:
    token = CancelToken()
    token.cancel()
    sent = aproviders.sent()
    outcome = await awith_fallback([aproviders.cohere(), good], QUERY, DOCUMENTS, cancel=token)
    assert outcome.status == "aborted"
    assert outcome.attempts == []
    assert aproviders.sent() == sent


async def test_cancelling_the_task_during_an_async_gate_aborts() -> None:
    async def gate(check: GateCheck) -> bool:
        await asyncio.sleep(5)
        return True

    task = asyncio.create_task(awith_fallback([step(good, gate=gate)], QUERY, DOCUMENTS))
    await asyncio.sleep(0.1)
    task.cancel()
    outcome = await task
    assert outcome.status == "aborted"
    assert outcome.attempts == []


async def test_a_token_during_a_hanging_sync_gate_aborts_the_async_chain(
    release: threading.Event,
) -> None:
    token = CancelToken()
    cancelled_at = _later(0.1, token.cancel)
    outcome = await awith_fallback(
        [step(good, gate=lambda check: release.wait(5)), good],
        QUERY,
        DOCUMENTS,
        deadline=2.0,
        cancel=token,
    )
    assert outcome.status == "aborted"
    assert time.monotonic() - cancelled_at[0] < 0.15, "the token ends the wait for the gate"


async def test_cancelling_the_task_during_a_hanging_sync_gate_aborts(
    release: threading.Event,
) -> None:
    task = asyncio.create_task(
        awith_fallback([step(good, gate=lambda check: release.wait(5))], QUERY, DOCUMENTS)
    )
    await asyncio.sleep(0.1)
    cancelled_at = time.monotonic()
    task.cancel()
    outcome = await task
    assert time.monotonic() - cancelled_at < 0.15
    assert outcome.status == "aborted"


async def test_a_step_whose_own_task_is_cancelled_does_not_abort_the_chain() -> None:
    """Regression: a step ending in its own ``CancelledError`` made the async chain return
    ``aborted`` ("cancelled by the caller") though nobody cancelled it."""

    async def cancelled(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        raise asyncio.CancelledError

    outcome = await awith_fallback([cancelled, good], QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1
    assert outcome.attempts[0].status == "aborted"
    sync = with_fallback([cancelled, good], QUERY, DOCUMENTS)
    assert [(a.status, a.reason) for a in sync.attempts] == [
        (a.status, a.reason) for a in outcome.attempts
    ]
    current = asyncio.current_task()
    assert current is not None
    assert current.cancelling() == 0


async def test_a_gate_whose_own_task_is_cancelled_skips_its_step() -> None:
    async def gate(check: GateCheck) -> bool:
        raise asyncio.CancelledError

    outcome = await awith_fallback([step(good, gate=gate), good], QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    assert [(a.status, a.reason) for a in outcome.attempts] == [
        ("skipped", "gate_failed"),
        ("ok", None),
    ]


def test_hung_local_steps_hold_none_of_the_loops_executor(release: threading.Event) -> None:
    """Regression: a sync step left running in an async chain held a thread of the loop's
    default executor, so the application's own ``to_thread`` calls queued behind hung steps and
    ``asyncio.run`` waited for them at shutdown."""

    async def main() -> float:
        outcomes = await asyncio.gather(
            *(
                awith_fallback([_sleeping(release, 3.0), good], QUERY, DOCUMENTS, step_timeout=0.1)
                for _ in range(12)  # more than the default executor's threads
            )
        )
        assert all([a.status for a in o.attempts] == ["timeout", "ok"] for o in outcomes)
        started = time.monotonic()
        await asyncio.to_thread(lambda: None)
        return time.monotonic() - started

    started = time.monotonic()
    waited = asyncio.run(main())
    assert waited < 0.2, "the application's to_thread waited behind hung steps"
    assert time.monotonic() - started < 1.5, "asyncio.run waited for hung steps"
