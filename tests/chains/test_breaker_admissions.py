"""A breaker hears each call's verdict through the admission it was let through by: a call
admitted while the breaker was closed, reporting late, can neither close a half-open breaker
nor free or take the probe's slot, and a failure from before the breaker opened is not counted
again."""

from __future__ import annotations

from spanledger.breakers import Admission, CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def state(breaker: CircuitBreaker) -> str:
    """The state, read afresh (mypy would narrow the property across calls)."""
    return breaker.state


def _opened(clock: Clock) -> tuple[CircuitBreaker, Admission]:
    breaker = CircuitBreaker("cohere", "m", failures=2, window=10, cooldown=30, clock=clock)
    early = breaker.admit()  # let through while closed, still running
    assert early is not None
    for _ in range(2):
        admission = breaker.admit()
        assert admission is not None
        admission.failed()
    assert state(breaker) == "open"
    return breaker, early


def test_a_late_success_from_before_the_opening_does_not_close_a_half_open_breaker() -> None:
    clock = Clock()
    breaker, early = _opened(clock)
    clock.now += 31
    probe = breaker.admit()
    assert probe is not None
    assert breaker.admit() is None  # one probe at a time
    early.succeeded()
    assert state(breaker) == "half_open"
    assert breaker.admit() is None  # the probe's slot is still taken
    probe.succeeded()
    assert state(breaker) == "closed"


def test_a_late_release_does_not_free_the_probes_slot() -> None:
    clock = Clock()
    breaker, early = _opened(clock)
    clock.now += 31
    probe = breaker.admit()
    assert probe is not None
    early.released()
    assert breaker.admit() is None
    probe.failed()
    assert state(breaker) == "open"


def test_a_late_failure_from_before_the_opening_is_not_counted_after_it_closes() -> None:
    clock = Clock()
    breaker, early = _opened(clock)
    clock.now += 31
    probe = breaker.admit()
    assert probe is not None
    probe.succeeded()
    assert state(breaker) == "closed"
    early.failed()
    fresh = breaker.admit()
    assert fresh is not None
    fresh.failed()
    assert state(breaker) == "closed"  # one failure since it closed, not two
