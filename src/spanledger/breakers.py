"""Circuit breakers for rerank steps: one per provider and model, shared across calls and threads.

A breaker is ``closed`` until ``failures`` failures land within ``window`` seconds; it is then
``open`` for ``cooldown`` seconds, refusing every call (the chain records a ``circuit_open``
skip, sends nothing, bills nothing); after the cool-down it is ``half_open`` and lets exactly one
probe through: a probe that answers closes it, one that fails opens it again. A probe that never
reports back (its thread died, its caller vanished) frees the slot after another cool-down.

Every breaker alive in the process can be read by ``live_breakers()``, which the OTel exporter
turns into the ``spanledger.breaker.state`` gauge. Locks are renewed in a forked child, where a
probe the parent had in flight does not exist, so the child's slot is freed.
"""

from __future__ import annotations

import math
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Literal

from spanledger import _forksafe

__all__ = ["STATE_VALUES", "BreakerState", "Breakers", "CircuitBreaker", "live_breakers"]

BreakerState = Literal["closed", "open", "half_open"]

STATE_VALUES: dict[str, int] = {"closed": 0, "open": 1, "half_open": 2}
"""The gauge value of each state (``spanledger.breaker.state``): alert on ``== 1``."""

Clock = Callable[[], float]

_live: weakref.WeakSet[CircuitBreaker] = weakref.WeakSet()
_live_lock = _forksafe.module_lock(globals(), "_live_lock")


def _positive(name: str, value: object, *, whole: bool = False) -> float:
    """``value`` as a positive finite number, or a ``ValueError`` naming the setting."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
        or (whole and not isinstance(value, int))
    ):
        kind = "a positive whole number" if whole else "a positive number of seconds"
        raise ValueError(f"circuit breaker setting {name} must be {kind}, not {value!r}")
    return float(value)


class CircuitBreaker:
    """The breaker of one provider and model. Thread-safe; ``allow`` is a few microseconds."""

    def __init__(
        self,
        provider: str,
        model: str,
        *,
        failures: int = 5,
        window: float = 60.0,
        cooldown: float = 30.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.provider = provider
        self.model = model
        self.failures = int(_positive("failures", failures, whole=True))
        self.window = _positive("window", window)
        self.cooldown = _positive("cooldown", cooldown)
        self._clock = clock
        self._recent: deque[float] = deque(maxlen=self.failures)
        self._opened_at: float | None = None
        self._probe_since: float | None = None
        self._probes = 0
        """Probes let through so far: each half-open admission's number."""
        self._openings = 0
        """How many times the breaker opened: a closed admission remembers the count."""
        self._lock = _forksafe.lock(self, "_lock")
        _forksafe.after_fork_in_child(self._forget_probe)
        with _live_lock:
            _live.add(self)

    @property
    def state(self) -> BreakerState:
        """``closed``, ``open`` (refusing) or ``half_open`` (cool-down over: one probe may go)."""
        with self._lock:
            return self._state(self._clock())

    def _state(self, now: float) -> BreakerState:
        if self._opened_at is None:
            return "closed"
        if now - self._opened_at < self.cooldown:
            return "open"
        return "half_open"

    def allow(self) -> bool:
        """Whether a call may go now (see ``admit``, which also says which call it is)."""
        return self.admit() is not None

    def admit(self) -> Admission | None:
        """Let a call through, or refuse it (``None``). In ``half_open`` only the first caller
        gets through (the probe); the others are refused until it reports, or until a cool-down
        passes without a report. The ``Admission`` reports the call's verdict back, so a call
        admitted before the breaker opened cannot close it, nor free another's probe slot."""
        with self._lock:
            if self._opened_at is None:
                return Admission(self, 0, self._openings)
            now = self._clock()
            if now - self._opened_at < self.cooldown:
                return None
            if self._probe_since is not None and now - self._probe_since < self.cooldown:
                return None
            self._probe_since = now
            self._probes += 1
            return Admission(self, self._probes, self._openings)

    def succeeded(self, admission: Admission | None = None) -> None:
        """A call answered: the probe in flight closes the breaker (``admission``: the call's,
        else any call counts as the probe)."""
        with self._lock:
            if self._is_probe(admission):
                self._opened_at = self._probe_since = None
                self._recent.clear()

    def failed(self, admission: Admission | None = None) -> None:
        """A call failed: the probe in flight reopens the breaker; a closed one opens at
        ``failures`` failures within ``window`` seconds. A call admitted before the breaker
        last opened reports too late to count."""
        with self._lock:
            now = self._clock()
            if self._opened_at is not None:
                if self._is_probe(admission):
                    self._opened_at, self._probe_since = now, None
                return
            if admission is not None and admission.openings != self._openings:
                return
            self._recent.append(now)
            if len(self._recent) == self.failures and now - self._recent[0] <= self.window:
                self._opened_at = now
                self._openings += 1
                self._recent.clear()

    def released(self, admission: Admission | None = None) -> None:
        """A call that was let through ended with no verdict (the caller cancelled it): its
        probe slot is freed for the next caller."""
        with self._lock:
            if self._is_probe(admission):
                self._probe_since = None

    def _is_probe(self, admission: Admission | None) -> bool:
        """Whether the report is the probe's now in flight."""
        if self._opened_at is None or self._probe_since is None:
            return False
        return admission is None or admission.probe == self._probes

    def _forget_probe(self) -> None:
        self._probe_since = None

    def __repr__(self) -> str:
        return f"CircuitBreaker({self.provider!r}, {self.model!r}, state={self.state!r})"


class Admission:
    """A call a breaker let through: report its verdict here (``succeeded``, ``failed``, or
    ``released`` when it ended with none)."""

    __slots__ = ("breaker", "openings", "probe")

    def __init__(self, breaker: CircuitBreaker, probe: int, openings: int) -> None:
        self.breaker = breaker
        self.probe = probe
        """The probe's number, or ``0`` for a call let through while closed."""
        self.openings = openings

    @property
    def state(self) -> BreakerState:
        return self.breaker.state

    def succeeded(self) -> None:
        self.breaker.succeeded(self)

    def failed(self) -> None:
        self.breaker.failed(self)

    def released(self) -> None:
        self.breaker.released(self)


class Breakers:
    """Breakers by (provider, model), made on first use with the same settings; share one
    ``Breakers`` across the chains (and threads) that call the same providers."""

    def __init__(
        self,
        *,
        failures: int = 5,
        window: float = 60.0,
        cooldown: float = 30.0,
        clock: Clock = time.monotonic,
    ) -> None:
        _positive("failures", failures, whole=True)
        _positive("window", window)
        _positive("cooldown", cooldown)
        self._settings = (failures, window, cooldown)
        self._clock = clock
        self._by_key: dict[tuple[str, str], CircuitBreaker] = {}
        self._lock = _forksafe.lock(self, "_lock")

    def get(self, provider: str, model: str) -> CircuitBreaker:
        """The breaker of ``provider`` / ``model``."""
        key = (provider, model)
        found = self._by_key.get(key)
        if found is not None:
            return found
        with self._lock:
            found = self._by_key.get(key)
            if found is None:
                failures, window, cooldown = self._settings
                found = self._by_key[key] = CircuitBreaker(
                    provider,
                    model,
                    failures=failures,
                    window=window,
                    cooldown=cooldown,
                    clock=self._clock,
                )
            return found

    def states(self) -> dict[tuple[str, str], BreakerState]:
        """Each breaker's state, by (provider, model)."""
        with self._lock:
            held = list(self._by_key.items())
        return {key: breaker.state for key, breaker in held}

    def __repr__(self) -> str:
        failures, window, cooldown = self._settings
        return (
            f"Breakers(failures={failures}, window={window}, cooldown={cooldown}, "
            f"breakers={len(self._by_key)})"
        )


def live_breakers() -> list[CircuitBreaker]:
    """Every breaker alive in this process."""
    with _live_lock:
        return list(_live)
