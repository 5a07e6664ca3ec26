"""Where events go: the current recorder, sink isolation, and request scopes.

Providers hand each finished call's event to the current recorder, which fans it out to its
sinks. A sink that raises never reaches the caller: the failure is counted per sink and logged
once per sink and error type, without the exception message (messages can carry payload).
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from os import PathLike
from types import TracebackType
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import structlog

from spanledger import _forksafe
from spanledger.attribution.tracker import FrameTracker
from spanledger.costs import Pricer
from spanledger.errors import ConfigurationError
from spanledger.events import AttributionRecord, CallStarted, Event

if TYPE_CHECKING:
    from spanledger.attribution.bill import RequestReport
    from spanledger.ledger.prices import PriceTable

__all__ = [
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "Recorder",
    "RequestScope",
    "Sink",
    "SinkStats",
    "checked_timeout",
    "current_request",
    "get_recorder",
    "request",
    "set_default_recorder",
    "use",
]

_log = structlog.get_logger("spanledger.recorder")


@runtime_checkable
class Sink(Protocol):
    """Receives finished call events. ``flush()`` and ``shutdown()`` are optional."""

    def emit(self, event: Event) -> None: ...


@runtime_checkable
class StartAwareSink(Protocol):
    """A sink that also wants to know when a call begins (to open a live span, say)."""

    def call_started(self, started: CallStarted) -> None: ...


SinkLike = Sink | Callable[[Event], None]

DEFAULT_SHUTDOWN_TIMEOUT = 5.0
"""Seconds ``Recorder.shutdown()`` may take in all, whatever state the backends are in."""


@dataclass
class SinkStats:
    """Delivery counts for one sink."""

    name: str
    delivered: int = 0
    failed: int = 0
    failures_by_type: dict[str, int] = field(default_factory=dict)


def checked_timeout(shutdown_timeout: object) -> float:
    """A shutdown timeout as seconds: a positive, finite number, else a ``ConfigurationError``."""
    if (
        isinstance(shutdown_timeout, bool)
        or not isinstance(shutdown_timeout, int | float)
        or not 0 < shutdown_timeout < float("inf")
    ):
        raise ConfigurationError(
            f"shutdown_timeout must be a positive number of seconds, not {shutdown_timeout!r}"
        )
    return float(shutdown_timeout)


def _takes_timeout(method: Callable[..., object] | None) -> bool:
    """Whether ``method`` takes a ``timeout`` keyword (our exporters do; a user's may not)."""
    if method is None:
        return False
    try:
        parameters = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return "timeout" in parameters or any(
        parameter.kind is inspect.Parameter.VAR_KEYWORD for parameter in parameters.values()
    )


class _SinkSlot:
    __slots__ = (
        "emit",
        "flush",
        "flush_takes_timeout",
        "logged",
        "name",
        "shutdown",
        "shutdown_takes_timeout",
        "sink",
        "start",
        "stats",
    )

    def __init__(self, sink: SinkLike, position: int) -> None:
        self.sink = sink
        emit = getattr(sink, "emit", None)
        if callable(emit):
            self.emit: Callable[[Event], None] = emit
            label = type(sink).__name__
        elif callable(sink):
            self.emit = sink
            label = getattr(sink, "__qualname__", type(sink).__name__)
        else:
            raise TypeError("a sink needs an emit(event) method or must be callable")
        start = getattr(sink, "call_started", None)
        self.start: Callable[[CallStarted], None] | None = start if callable(start) else None
        flush = getattr(sink, "flush", None)
        self.flush: Callable[[], object] | None = flush if callable(flush) else None
        shutdown = getattr(sink, "shutdown", None)
        self.shutdown: Callable[[], object] | None = shutdown if callable(shutdown) else None
        self.flush_takes_timeout = _takes_timeout(self.flush)
        self.shutdown_takes_timeout = _takes_timeout(self.shutdown)
        self.name = f"{position}:{label}"
        self.stats = SinkStats(self.name)
        self.logged: set[str] = set()


class Recorder:
    """Fans events out to sinks, isolating each sink's failures from the caller.

    With ``prices`` (a ``PriceTable``, a path to one, or a ``Ledger``) every event is priced
    as it is emitted: sinks receive it with its ``cost`` line. ``shutdown_timeout`` bounds
    ``flush()`` and ``shutdown()`` in seconds, over all sinks together.
    """

    def __init__(
        self,
        sinks: Iterable[SinkLike] = (),
        *,
        prices: Pricer | PriceTable | str | PathLike[str] | None = None,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    ) -> None:
        self.shutdown_timeout = checked_timeout(shutdown_timeout)
        self._slots = tuple(_SinkSlot(sink, i) for i, sink in enumerate(sinks))
        self._starters = tuple((slot, slot.start) for slot in self._slots if slot.start is not None)
        starting = {id(slot) for slot, _ in self._starters}
        self._enders = tuple(
            slot for slot in reversed(self._slots) if id(slot) in starting
        ) + tuple(slot for slot in self._slots if id(slot) not in starting)
        self.wants_call_started = bool(self._starters)
        """Whether any sink takes start notices (callers skip building one otherwise)."""
        self._lock = _forksafe.lock(self, "_lock")
        self.ledger: Pricer | None = None
        if isinstance(prices, Pricer):
            self.ledger = prices
        elif prices is not None:
            from spanledger.ledger.pricing import Ledger

            self.ledger = Ledger(prices)
        self._pricing_failures = 0

    @property
    def sinks(self) -> tuple[SinkLike, ...]:
        return tuple(slot.sink for slot in self._slots)

    @property
    def stats(self) -> dict[str, SinkStats]:
        """Per-sink delivery and failure counts, keyed by ``"<position>:<sink type>"``."""
        with self._lock:
            return {
                slot.name: SinkStats(
                    slot.name,
                    slot.stats.delivered,
                    slot.stats.failed,
                    dict(slot.stats.failures_by_type),
                )
                for slot in self._slots
            }

    @property
    def active(self) -> bool:
        """Whether an event emitted now would reach anyone (a sink or a request scope)."""
        return bool(self._slots) or _current_scope.get() is not None

    def call_started(self, started: CallStarted) -> None:
        """Tell start-aware sinks that a call has begun."""
        for slot, start in self._starters:
            try:
                start(started)
            except Exception as exc:
                self._count_failure(slot, exc, "call_started")

    def emit(self, event: Event) -> None:
        """Price the event (when a ledger is set), then deliver it to the request scope and
        every sink. Sinks that heard the call start go first, in the reverse order, so what they
        made current (a live span) is ended as nested blocks end; the others follow in order,
        outside it."""
        if self.ledger is not None and event.cost is None:
            event = self._priced(event)
        scope = _current_scope.get()
        if scope is not None:
            scope.add(event)
        for slot in self._enders:
            try:
                slot.emit(event)
            except Exception as exc:
                self._count_failure(slot, exc, "emit")
            else:
                with self._lock:
                    slot.stats.delivered += 1

    def record_attribution(self, record: AttributionRecord) -> None:
        """Hand a request's attribution summary to every sink that takes one."""
        for slot in self._slots:
            handler = getattr(slot.sink, "attribution", None)
            if not callable(handler):
                continue
            try:
                handler(record)
            except Exception as exc:
                self._count_failure(slot, exc, "attribution")

    def _priced(self, event: Event) -> Event:
        assert self.ledger is not None
        try:
            return event.model_copy(update={"cost": self.ledger.price(event)})
        except Exception as exc:
            with self._lock:
                self._pricing_failures += 1
                first = self._pricing_failures == 1
            if first:
                with contextlib.suppress(Exception):
                    _log.warning("pricing_failed", error_type=type(exc).__name__)
            return event

    @property
    def pricing_failures(self) -> int:
        """Events that reached the sinks unpriced because the ledger raised."""
        with self._lock:
            return self._pricing_failures

    def flush(self, timeout: float | None = None) -> None:
        """Ask every sink that can to write out what it holds, within ``timeout`` seconds in
        all (default: ``shutdown_timeout``); a sink whose ``flush`` takes a ``timeout`` gets
        what is left of it."""
        self._close_all("flush", timeout)

    def shutdown(self, timeout: float | None = None) -> None:
        """Flush and release every sink, within ``timeout`` seconds in all (default:
        ``shutdown_timeout``). A sink that cannot deliver in time counts what it lost."""
        self._close_all("shutdown", timeout)

    def _close_all(self, stage: str, timeout: float | None) -> None:
        budget = self.shutdown_timeout if timeout is None else max(0.0, timeout)
        deadline = time.monotonic() + budget
        for slot in self._slots:
            closer: Callable[..., object] | None = slot.flush
            takes_timeout = slot.flush_takes_timeout
            if stage == "shutdown" and slot.shutdown is not None:
                closer, takes_timeout = slot.shutdown, slot.shutdown_takes_timeout
            if closer is None:
                continue
            try:
                if takes_timeout:
                    closer(timeout=max(0.0, deadline - time.monotonic()))
                else:
                    closer()
            except Exception as exc:
                self._count_failure(slot, exc, stage)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.shutdown()

    def _count_failure(self, slot: _SinkSlot, exc: Exception, stage: str) -> None:
        error_type = type(exc).__name__
        with self._lock:
            slot.stats.failed += 1
            slot.stats.failures_by_type[error_type] = (
                slot.stats.failures_by_type.get(error_type, 0) + 1
            )
            first = error_type not in slot.logged
            slot.logged.add(error_type)
        if first:
            with contextlib.suppress(Exception):  # a broken log stream must not break the call
                _log.warning("sink_failed", sink=slot.name, stage=stage, error_type=error_type)


_NOOP = Recorder()
_default: Recorder | None = None
_current: ContextVar[Recorder | None] = ContextVar("spanledger_recorder", default=None)


def get_recorder() -> Recorder:
    """The recorder in effect here: set by ``use``, else the process default, else a no-op."""
    recorder = _current.get()
    if recorder is not None:
        return recorder
    return _default if _default is not None else _NOOP


def set_default_recorder(recorder: Recorder | None) -> None:
    """Set the recorder that every thread and task falls back to when none is in context."""
    global _default
    _default = recorder


class use:
    """Make ``recorder`` current; as a context manager, restore the previous one on exit."""

    __slots__ = ("_token", "recorder")

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self._token: Token[Recorder | None] = _current.set(recorder)

    def __enter__(self) -> Recorder:
        return self.recorder

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _current.reset(self._token)


class RequestScope:
    """The calls made while serving one request, joined by ``request_id``, and the frames
    (retrieved passages) the request served, rendered into its prompt and got cited for."""

    def __init__(self, request_id: str) -> None:
        if not request_id:
            raise ValueError("request_id must be a non-empty string")
        self.request_id = request_id
        self._events: list[Event] = []
        self._lock = _forksafe.lock(self, "_lock")
        self.frames = FrameTracker()
        self.serve = self.frames.serve
        self.select = self.frames.select
        self.render = self.frames.render
        self.cite = self.frames.cite
        self.cite_from_text = self.frames.cite_from_text
        self.reject = self.frames.reject

    def report(
        self,
        *,
        prices: Pricer | PriceTable | str | PathLike[str] | None = None,
        budget_requested: int | None = None,
        emit: bool = True,
    ) -> RequestReport:
        """The request's attribution joined to its bill. Events already priced by the
        recorder keep their cost lines; ``prices`` prices the others. With ``emit`` the summary
        goes to the current recorder's sinks (event log, span attributes, metrics, Langfuse)."""
        from spanledger.attribution.bill import RequestReport

        ledger: Pricer | None = None
        if isinstance(prices, Pricer):
            ledger = prices
        elif prices is not None:
            from spanledger.ledger.pricing import Ledger

            ledger = Ledger(prices, warn=False)
        report = RequestReport.build(
            self.request_id,
            self.frames.report(budget_requested=budget_requested),
            self.events,
            ledger,
        )
        if emit:
            get_recorder().record_attribution(report.record())
        return report

    @property
    def events(self) -> list[Event]:
        """The events emitted inside this scope, in emission order (a copy)."""
        with self._lock:
            return list(self._events)

    def add(self, event: Event) -> None:
        with self._lock:
            self._events.append(event)

    def __repr__(self) -> str:
        return f"RequestScope(request_id={self.request_id!r}, events={len(self._events)})"


_current_scope: ContextVar[RequestScope | None] = ContextVar("spanledger_request", default=None)


def current_request() -> RequestScope | None:
    """The innermost open request scope, if any."""
    return _current_scope.get()


@contextmanager
def request(request_id: str) -> Iterator[RequestScope]:
    """Open a request scope: calls inside carry ``request_id`` and are kept on the scope."""
    scope = RequestScope(request_id)
    token = _current_scope.set(scope)
    try:
        yield scope
    finally:
        _current_scope.reset(token)
