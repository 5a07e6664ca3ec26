"""Circuit breakers: when they open, refuse, let one probe through and close or reopen; their
settings; and through chains: skipped steps send nothing and bill nothing, one ``Breakers``
serves many threads, a forked child keeps the state, and the state gauge reads it."""

from __future__ import annotations

import math
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from spanledger.breakers import Breakers, CircuitBreaker, live_breakers
from spanledger.costs import CostCode, CostStatus
from spanledger.ledger import price_outcome
from spanledger.providers.fallback import awith_fallback, with_fallback
from spanledger.providers.steps import CallableStep
from tests.forking import fork, outcome, timed

from .conftest import DOCUMENTS, PRICES, QUERY, Otel, Providers, good


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _breaker(clock: FakeClock, failures: int = 3) -> CircuitBreaker:
    return CircuitBreaker("cohere", "m", failures=failures, window=10, cooldown=30, clock=clock)


def state(breaker: CircuitBreaker) -> str:
    """The state, read afresh (the property changes under mypy's narrowing)."""
    return breaker.state


def _fail(breaker: CircuitBreaker, clock: FakeClock, *moments: float) -> None:
    for moment in moments:
        clock.now = 1000.0 + moment
        breaker.failed()


# --------------------------------------------------------------------------- opening


def test_it_opens_at_n_failures_within_the_window_not_before() -> None:
    clock = FakeClock()
    breaker = _breaker(clock)
    _fail(breaker, clock, 0, 1)
    assert breaker.state == "closed"
    assert breaker.allow()
    _fail(breaker, clock, 2)
    assert state(breaker) == "open"
    assert not breaker.allow()


def test_failures_spread_beyond_the_window_do_not_open_it() -> None:
    clock = FakeClock()
    breaker = _breaker(clock)
    _fail(breaker, clock, 0, 6, 12)
    assert breaker.state == "closed"
    _fail(breaker, clock, 15)  # 6, 12, 15: within 10 s
    assert state(breaker) == "open"


def test_failures_exactly_one_window_apart_open_it() -> None:
    clock = FakeClock()
    breaker = _breaker(clock)
    _fail(breaker, clock, 0, 5, 10)
    assert breaker.state == "open"


def test_successes_in_between_do_not_reset_a_closed_breakers_count() -> None:
    clock = FakeClock()
    breaker = _breaker(clock)
    _fail(breaker, clock, 0, 1)
    breaker.succeeded()
    _fail(breaker, clock, 2)
    assert state(breaker) == "open"


def test_it_refuses_throughout_the_cooldown() -> None:
    clock = FakeClock()
    breaker = _breaker(clock)
    _fail(breaker, clock, 0, 1, 2)
    for later in (2, 10, 31.9):
        clock.now = 1000.0 + later
        assert breaker.state == "open"
        assert not breaker.allow()
    clock.now = 1000.0 + 32
    assert breaker.state == "half_open"


# --------------------------------------------------------------------------- half-open


def _half_open(clock: FakeClock) -> CircuitBreaker:
    breaker = _breaker(clock)
    _fail(breaker, clock, 0, 1, 2)
    clock.now = 1000.0 + 40
    assert breaker.state == "half_open"
    return breaker


def test_half_open_lets_exactly_one_probe_through_among_eight_threads() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    barrier = threading.Barrier(8)

    def ask() -> bool:
        barrier.wait(5)
        return breaker.allow()

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: ask(), range(8)))
    assert answers.count(True) == 1


def test_a_probe_that_succeeds_closes_it() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    assert breaker.allow()
    assert not breaker.allow()
    breaker.succeeded()
    assert breaker.state == "closed"
    assert breaker.allow()
    assert breaker.allow()
    _fail(breaker, clock, 41, 42)
    assert breaker.state == "closed", "the old failures were forgotten"


def test_a_probe_that_fails_reopens_it_for_another_cooldown() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    assert breaker.allow()
    breaker.failed()
    assert breaker.state == "open"
    clock.now = 1000.0 + 40 + 29
    assert not breaker.allow()
    clock.now = 1000.0 + 40 + 30
    assert breaker.allow()


def test_a_probe_that_never_reports_frees_its_slot_after_a_cooldown() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    assert breaker.allow()
    clock.now = 1000.0 + 40 + 29
    assert not breaker.allow()
    clock.now = 1000.0 + 40 + 30
    assert breaker.allow()
    assert not breaker.allow()


def test_released_frees_the_probe_slot_at_once() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    assert breaker.allow()
    assert not breaker.allow()
    breaker.released()
    assert breaker.state == "half_open"
    assert breaker.allow()


def test_a_failure_reported_while_open_but_not_by_the_probe_changes_nothing() -> None:
    clock = FakeClock()
    breaker = _breaker(clock)
    _fail(breaker, clock, 0, 1, 2)
    clock.now = 1000.0 + 20
    breaker.failed()
    clock.now = 1000.0 + 32
    assert breaker.allow(), "the cool-down still runs from the opening"


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize("setting", ["failures", "window", "cooldown"])
@pytest.mark.parametrize("value", [0, -1, math.nan, math.inf, "5", True, None])
def test_bad_settings_are_refused_naming_the_setting(setting: str, value: object) -> None:
    with pytest.raises(ValueError, match=setting):
        CircuitBreaker("p", "m", **{setting: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=setting):
        Breakers(**{setting: value})  # type: ignore[arg-type]


def test_failures_must_be_whole() -> None:
    with pytest.raises(ValueError, match="failures"):
        CircuitBreaker("p", "m", failures=2.5)  # type: ignore[arg-type]


def test_breakers_are_one_per_provider_and_model() -> None:
    breakers = Breakers(failures=2)
    first = breakers.get("cohere", "a")
    assert breakers.get("cohere", "a") is first
    assert breakers.get("cohere", "b") is not first
    assert breakers.get("jina", "a") is not first
    assert first.failures == 2
    assert breakers.states() == {
        ("cohere", "a"): "closed",
        ("cohere", "b"): "closed",
        ("jina", "a"): "closed",
    }


# --------------------------------------------------------------------------- in chains


def test_a_failing_provider_is_skipped_once_open_and_sends_nothing(providers: Providers) -> None:
    clock = FakeClock()
    breakers = Breakers(failures=2, window=10, cooldown=30, clock=clock)
    failing = providers.cohere("fail-503")
    runs = [with_fallback([failing, good], QUERY, DOCUMENTS, breakers=breakers) for _ in range(2)]
    assert [r.attempts[0].status for r in runs] == ["failed", "failed"]
    assert [r.attempts[0].breaker_state for r in runs] == ["closed", "open"]
    assert runs[0].attempts[1].breaker_state == "closed"

    sent = providers.sent()
    events = len(providers.events)
    refused = with_fallback([failing, good], QUERY, DOCUMENTS, breakers=breakers)
    assert providers.sent() == sent
    assert len(providers.events) == events
    skipped = refused.attempts[0]
    assert (skipped.status, skipped.reason, skipped.breaker_state) == (
        "skipped",
        "circuit_open",
        "open",
    )
    assert refused.status == "degraded"
    assert refused.answered_by == 1
    line = price_outcome(PRICES, refused)[0]
    assert line.status is CostStatus.NOT_BILLED
    assert line.code is CostCode.NOT_ATTEMPTED

    clock.now += 30  # the cool-down is over: one probe goes
    probe = with_fallback([failing, good], QUERY, DOCUMENTS, breakers=breakers)
    assert providers.sent() == sent + 1
    assert probe.attempts[0].status == "failed"
    assert probe.attempts[0].breaker_state == "open"


async def test_the_async_chain_honours_an_open_breaker(aproviders: Providers) -> None:
    breakers = Breakers(failures=1)
    failing = aproviders.cohere("fail-503")
    first = await awith_fallback([failing, good], QUERY, DOCUMENTS, breakers=breakers)
    sent = aproviders.sent()
    second = await awith_fallback([failing, good], QUERY, DOCUMENTS, breakers=breakers)
    assert first.attempts[0].status == "failed"
    assert (second.attempts[0].status, second.attempts[0].reason) == ("skipped", "circuit_open")
    assert aproviders.sent() == sent


def _flaky(name: str) -> tuple[CallableStep, dict[str, Any]]:
    """A step that raises until ``state["ok"]`` is set; counts its runs."""
    state: dict[str, Any] = {"ok": False, "runs": 0}
    lock = threading.Lock()

    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        with lock:
            state["runs"] += 1
        if not state["ok"]:
            raise ConnectionError("down")
        return good(query, documents, top_k)

    return CallableStep(rank, name=name), state


def test_a_probe_that_answers_closes_the_breaker_in_a_chain() -> None:
    clock = FakeClock()
    breakers = Breakers(failures=2, window=10, cooldown=5, clock=clock)
    flaky, state = _flaky("flaky")
    for _ in range(3):
        with_fallback([flaky, good], QUERY, DOCUMENTS, breakers=breakers)
    assert state["runs"] == 2
    clock.now += 5
    state["ok"] = True
    probe = with_fallback([flaky, good], QUERY, DOCUMENTS, breakers=breakers)
    assert probe.status == "ok"
    assert probe.attempts[0].breaker_state == "closed"
    assert breakers.states()[("local", "flaky")] == "closed"


def test_one_breakers_is_shared_by_chains_on_many_threads() -> None:
    breakers = Breakers(failures=3, window=60, cooldown=60)
    flaky, state = _flaky("shared")
    barrier = threading.Barrier(8)

    def run(_: int) -> Any:
        barrier.wait(5)
        return with_fallback([flaky, good], QUERY, DOCUMENTS, breakers=breakers)

    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(run, range(8)))
    firsts = [o.attempts[0] for o in outcomes]
    failed = [a for a in firsts if a.status == "failed"]
    refused = [a for a in firsts if a.reason == "circuit_open"]
    assert len(failed) + len(refused) == 8
    assert len(failed) == state["runs"] >= 3
    assert all(o.status == "degraded" for o in outcomes)
    assert breakers.states()[("local", "shared")] == "open"
    after = with_fallback([flaky, good], QUERY, DOCUMENTS, breakers=breakers)
    assert after.attempts[0].reason == "circuit_open"
    assert state["runs"] == len(failed)


def test_an_aborted_step_releases_its_probe_slot() -> None:
    clock = FakeClock()
    breakers = Breakers(failures=1, cooldown=5, clock=clock)
    breaker = breakers.get("local", "probe")
    breaker.failed()
    clock.now += 5
    gate_declined = CallableStep(good, name="probe", gate=lambda check: False)
    outcome = with_fallback([gate_declined, good], QUERY, DOCUMENTS, breakers=breakers)
    assert outcome.attempts[0].reason == "gate_declined"
    assert breaker.allow(), "a gated-out step gave its probe slot back"


# --------------------------------------------------------------------------- fork


pytestmark_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _held_while_forking(lock: Any, work: Callable[[], object]) -> int | None:
    """Fork while another thread holds ``lock``; the child's exit code (0: ``work`` ran
    in time)."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(5)

    def checked() -> None:
        if work() != 0:  # ``timed`` keeps no return value: a failed check exits RAISED
            raise RuntimeError("the child's check failed")

    try:
        return outcome(fork(timed(3.0, checked)))
    finally:
        release.set()
        holder.join()


@pytestmark_fork
def test_a_forked_child_sees_the_open_state_even_with_the_lock_held() -> None:
    breaker = CircuitBreaker("cohere", "forked", failures=1, cooldown=60)
    breaker.failed()

    def work() -> int:
        return 0 if breaker.state == "open" and not breaker.allow() else 1

    assert _held_while_forking(breaker._lock, work) == 0


@pytestmark_fork
def test_a_forked_child_gets_the_probe_slot_the_parent_held() -> None:
    clock = FakeClock()
    breaker = _half_open(clock)
    assert breaker.allow()  # the parent's probe is in flight

    def work() -> int:
        return 0 if breaker.allow() and not breaker.allow() else 1

    assert _held_while_forking(breaker._lock, work) == 0
    assert not breaker.allow(), "the parent's own slot is still taken"


@pytestmark_fork
def test_a_forked_child_can_run_a_chain_with_the_parents_breakers() -> None:
    breakers = Breakers(failures=1)
    flaky, _ = _flaky("fork-chain")
    with_fallback([flaky, good], QUERY, DOCUMENTS, breakers=breakers)

    def work() -> int:
        run = with_fallback([flaky, good], QUERY, DOCUMENTS, breakers=breakers)
        return 0 if run.attempts[0].reason == "circuit_open" and run.status == "degraded" else 1

    lock = breakers.get("local", "fork-chain")._lock
    assert _held_while_forking(lock, work) == 0


# --------------------------------------------------------------------------- the gauge


def test_the_state_gauge_shows_each_breaker(otel: Otel) -> None:
    clock = FakeClock()
    tag = uuid.uuid4().hex[:8]
    breakers = Breakers(failures=1, cooldown=10, clock=clock)
    closed = breakers.get("cohere", f"closed-{tag}")
    opened = breakers.get("cohere", f"open-{tag}")
    half = breakers.get("jina", f"half-{tag}")
    half.failed()
    clock.now += 5
    opened.failed()
    clock.now += 6  # ``half`` opened 11 s ago (past its cool-down), ``opened`` 6 s ago
    assert closed.allow()

    ours = {
        (attributes["gen_ai.provider.name"], attributes["gen_ai.request.model"]): value
        for attributes, value in otel.points("spanledger.breaker.state")
        if str(attributes.get("gen_ai.request.model", "")).endswith(tag)
    }
    assert ours == {
        ("cohere", f"closed-{tag}"): 0,
        ("cohere", f"open-{tag}"): 1,
        ("jina", f"half-{tag}"): 2,
    }
    assert {closed, opened, half} <= set(live_breakers())
