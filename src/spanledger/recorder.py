"""Where events go: the current recorder, its processor pipeline, sink isolation, and the
call-scope hook.

Providers hand each finished call's event to the current recorder. Its processors run first, in
order (pricing is one), each turning the event into the one the sinks receive; then the event goes
to the open call scope, if any, and to every sink. A processor or sink that raises never reaches
the caller: the failure is counted per processor or sink and logged once per processor or sink
and error type, without the exception message (messages can carry payload).

The call scope is a generic hook: the recorder knows only that a scope has a ``request_id`` and
takes events (``CallScope``). Request scopes with frames and reports are built on it in
``spanledger.attribution``, which sits above the recorder.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Callable, Iterable
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from os import PathLike
from types import TracebackType
from typing import Protocol, runtime_checkable

from spanledger import _forksafe
from spanledger._logs import get_logger
from spanledger.errors import ConfigurationError
from spanledger.events import (
    AttributionRecord,
    CallStarted,
    EmbeddingEvent,
    EmbeddingFailedEvent,
    Event,
    RerankEvent,
    RerankFailedEvent,
)
from spanledger.ledger import Pricer, PriceTable, Pricing
from spanledger.outcomes import RerankOutcome

__all__ = [
    "DEFAULT_SHUTDOWN_TIMEOUT",
    "CallScope",
    "ChainAwareSink",
    "Processor",
    "ProcessorStats",
    "Recorder",
    "RequestAwareSink",
    "Sink",
    "SinkStats",
    "checked_timeout",
    "current_scope",
    "enter_scope",
    "exit_scope",
    "get_recorder",
    "set_default_recorder",
    "use",
]

_log = get_logger("spanledger.recorder")


@runtime_checkable
class Sink(Protocol):
    """Receives finished call events. ``flush()`` and ``shutdown()`` are optional."""

    def emit(self, event: Event) -> None: ...


@runtime_checkable
class StartAwareSink(Protocol):
    """A sink that also wants to know when a call begins (to open a live span, say)."""

    def call_started(self, started: CallStarted) -> None: ...


@runtime_checkable
class RequestAwareSink(Protocol):
    """A sink that opens something around a whole request (the OTel exporter's request span):
    ``request_started`` returns a handle that ``request_ended`` is given back."""

    def request_started(self, request_id: str) -> object: ...

    def request_ended(self, handle: object) -> None: ...


@runtime_checkable
@runtime_checkable
class ChainAwareSink(Protocol):
    """A sink that hears rerank chains begin and end (the OTel exporter renders each chain as
    one span): ``chain_started`` returns a handle that ``chain_ended`` is given back with the
    chain's outcome. ``document_count`` is ``None`` for a request refused before it ran."""

    def chain_started(self, document_count: int | None, top_k: int | None) -> object: ...

    def chain_ended(self, handle: object, outcome: RerankOutcome) -> None: ...


class Processor(Protocol):
    """Turns each event into the one the sinks receive (a copy with a field set, say), before
    fan-out. ``spanledger.ledger.Pricing`` is one."""

    def process(self, event: Event) -> Event: ...


class CallScope(Protocol):
    """A scope open around calls: the ``request_id`` they carry, and a place for their events
    (``spanledger.attribution.RequestScope`` is one)."""

    request_id: str

    def add(self, event: Event) -> None: ...


SinkLike = Sink | Callable[[Event], None]

DEFAULT_SHUTDOWN_TIMEOUT = 5.0
"""Seconds ``Recorder.shutdown()`` may take in all, whatever state the backends are in."""

_EVENT_TYPES = (EmbeddingEvent, EmbeddingFailedEvent, RerankEvent, RerankFailedEvent)


@dataclass
class SinkStats:
    """Delivery counts for one sink."""

    name: str
    delivered: int = 0
    failed: int = 0
    failures_by_type: dict[str, int] = field(default_factory=dict)


@dataclass
class ProcessorStats:
    """Failure counts for one processor: events it let through unchanged because it raised."""

    name: str
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


class _ProcessorSlot:
    __slots__ = ("logged", "name", "process", "processor", "stats")

    def __init__(self, processor: Processor, position: int) -> None:
        process = getattr(processor, "process", None)
        if not callable(process):
            raise TypeError("a processor needs a process(event) method")
        self.processor = processor
        self.process: Callable[[Event], object] = process
        self.name = f"{position}:{type(processor).__name__}"
        self.stats = ProcessorStats(self.name)
        self.logged: set[str] = set()


class Recorder:
    """Runs each event through its processors, then fans it out to the open call scope and
    every sink, isolating each processor's and sink's failures from the caller.

    ``processors`` run in order; one that raises (or returns something that is not an event)
    is skipped for that event, counted and logged. ``prices`` (a ``Pricer`` such as a
    ``Ledger``, a ``PriceTable``, or a path to one) is a shorthand that puts a
    ``spanledger.ledger.Pricing`` processor first, so sinks receive each event with its ``cost``
    line. ``shutdown_timeout`` bounds ``flush()`` and ``shutdown()`` in seconds, over all sinks
    together.
    """

    def __init__(
        self,
        sinks: Iterable[SinkLike] = (),
        *,
        processors: Iterable[Processor] = (),
        prices: Pricer | PriceTable | str | PathLike[str] | None = None,
        shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT,
    ) -> None:
        self.shutdown_timeout = checked_timeout(shutdown_timeout)
        pipeline = list(processors)
        if prices is not None:
            pipeline.insert(0, Pricing(prices))
        self._processors = tuple(_ProcessorSlot(p, i) for i, p in enumerate(pipeline))
        self._slots = tuple(_SinkSlot(sink, i) for i, sink in enumerate(sinks))
        self._starters = tuple((slot, slot.start) for slot in self._slots if slot.start is not None)
        starting = {id(slot) for slot, _ in self._starters}
        self._enders = tuple(
            slot for slot in reversed(self._slots) if id(slot) in starting
        ) + tuple(slot for slot in self._slots if id(slot) not in starting)
        self.wants_call_started = bool(self._starters)
        """Whether any sink takes start notices (callers skip building one otherwise)."""
        self._request_sinks = tuple(
            slot for slot in self._slots if isinstance(slot.sink, RequestAwareSink)
        )
        self._chain_sinks = tuple(
            slot for slot in self._slots if isinstance(slot.sink, ChainAwareSink)
        )
        self._lock = _forksafe.lock(self, "_lock")
        self._scope_logged: set[str] = set()

    @property
    def sinks(self) -> tuple[SinkLike, ...]:
        return tuple(slot.sink for slot in self._slots)

    @property
    def processors(self) -> tuple[Processor, ...]:
        """The processor pipeline, in the order it runs (a ``prices`` shorthand first)."""
        return tuple(slot.processor for slot in self._processors)

    @property
    def ledger(self) -> Pricer | None:
        """The pricer of the first ``Pricing`` processor, if the recorder prices events."""
        for slot in self._processors:
            if isinstance(slot.processor, Pricing):
                return slot.processor.pricer
        return None

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
    def processor_stats(self) -> dict[str, ProcessorStats]:
        """Per-processor failure counts, keyed by ``"<position>:<processor type>"``."""
        with self._lock:
            return {
                slot.name: ProcessorStats(
                    slot.name, slot.stats.failed, dict(slot.stats.failures_by_type)
                )
                for slot in self._processors
            }

    @property
    def pricing_failures(self) -> int:
        """Events that reached the sinks unpriced because a ``Pricing`` processor failed."""
        with self._lock:
            return sum(
                slot.stats.failed
                for slot in self._processors
                if isinstance(slot.processor, Pricing)
            )

    @property
    def active(self) -> bool:
        """Whether an event emitted now would reach anyone (a sink or a call scope)."""
        return bool(self._slots) or _current_scope.get() is not None

    def call_started(self, started: CallStarted) -> None:
        """Tell start-aware sinks that a call has begun."""
        for slot, start in self._starters:
            try:
                start(started)
            except Exception as exc:
                self._count_failure(slot, exc, "call_started")

    def emit(self, event: Event) -> None:
        """Run the processors, then deliver the event to the call scope and every sink. Sinks
        that heard the call start go first, in the reverse order, so what they made current (a
        live span) is ended as nested blocks end; the others follow in order, outside it."""
        if self._processors:
            event = self._processed(event)
        scope = _current_scope.get()
        if scope is not None:
            try:
                scope.add(event)
            except Exception as exc:
                self._scope_failed(exc)
        for slot in self._enders:
            try:
                slot.emit(event)
            except Exception as exc:
                self._count_failure(slot, exc, "emit")
            else:
                with self._lock:
                    slot.stats.delivered += 1

    def request_started(self, request_id: str) -> tuple[tuple[_SinkSlot, object], ...]:
        """Tell request-aware sinks that a request scope opened; what each opened is handed
        back to ``request_ended``, innermost first."""
        if not self._request_sinks:
            return ()
        opened: list[tuple[_SinkSlot, object]] = []
        for slot in self._request_sinks:
            try:
                opened.append((slot, slot.sink.request_started(request_id)))  # type: ignore[union-attr]
            except Exception as exc:
                self._count_failure(slot, exc, "request_started")
        return tuple(opened)

    def request_ended(self, opened: tuple[tuple[_SinkSlot, object], ...]) -> None:
        """Close what ``request_started`` opened, in the reverse order."""
        for slot, handle in reversed(opened):
            try:
                slot.sink.request_ended(handle)  # type: ignore[union-attr]
            except Exception as exc:
                self._count_failure(slot, exc, "request_ended")

    def chain_started(
        self, document_count: int | None, top_k: int | None
    ) -> tuple[tuple[_SinkSlot, object], ...]:
        """Tell chain-aware sinks that a rerank chain began; what each opened is handed back
        to ``chain_ended``."""
        if not self._chain_sinks:
            return ()
        opened: list[tuple[_SinkSlot, object]] = []
        for slot in self._chain_sinks:
            try:
                opened.append((slot, slot.sink.chain_started(document_count, top_k)))  # type: ignore[union-attr]
            except Exception as exc:
                self._count_failure(slot, exc, "chain_started")
        return tuple(opened)

    def chain_ended(
        self, opened: tuple[tuple[_SinkSlot, object], ...], outcome: RerankOutcome
    ) -> None:
        """Hand each chain-aware sink the chain's outcome, in the reverse order."""
        for slot, handle in reversed(opened):
            try:
                slot.sink.chain_ended(handle, outcome)  # type: ignore[union-attr]
            except Exception as exc:
                self._count_failure(slot, exc, "chain_ended")

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

    def _processed(self, event: Event) -> Event:
        """The event after every processor; a failing processor's step is skipped."""
        for slot in self._processors:
            try:
                result = slot.process(event)
            except Exception as exc:
                self._processor_failed(slot, type(exc).__name__)
                continue
            if isinstance(result, _EVENT_TYPES):
                event = result
            else:  # a processor bug must not hand the sinks something that is not an event
                self._processor_failed(slot, "TypeError")
        return event

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

    def __repr__(self) -> str:
        """What it records to, readable: ``Recorder(sinks=[JsonlSink('events.jsonl')])``; a
        recorder with no sink says that nothing is recorded."""
        sinks = ", ".join(_named(slot.sink) for slot in self._slots)
        parts = [f"sinks=[{sinks}]" if sinks else "no sinks: nothing is recorded"]
        if self._processors:
            parts.append(f"processors=[{', '.join(_named(p.processor) for p in self._processors)}]")
        return f"Recorder({', '.join(parts)})"

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

    def _processor_failed(self, slot: _ProcessorSlot, error_type: str) -> None:
        with self._lock:
            slot.stats.failed += 1
            slot.stats.failures_by_type[error_type] = (
                slot.stats.failures_by_type.get(error_type, 0) + 1
            )
            first = error_type not in slot.logged
            slot.logged.add(error_type)
        if first:
            with contextlib.suppress(Exception):
                _log.warning("processor_failed", processor=slot.name, error_type=error_type)

    def _scope_failed(self, exc: Exception) -> None:
        error_type = type(exc).__name__
        with self._lock:
            first = error_type not in self._scope_logged
            self._scope_logged.add(error_type)
        if first:
            with contextlib.suppress(Exception):
                _log.warning("scope_failed", error_type=error_type)


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


# --------------------------------------------------------------------------- the scope hook

_current_scope: ContextVar[CallScope | None] = ContextVar("spanledger_scope", default=None)

current_scope: Callable[[], CallScope | None] = _current_scope.get
"""The innermost open call scope, if any. It is the context variable's own ``get``, bound once,
because every recorded call reads it to stamp its ``request_id``."""


def enter_scope(scope: CallScope) -> Token[CallScope | None]:
    """Open ``scope`` around the calls that follow in this context; ``exit_scope`` closes it."""
    return _current_scope.set(scope)


def exit_scope(token: Token[CallScope | None]) -> None:
    """Close the scope that ``enter_scope`` opened, restoring the one around it."""
    _current_scope.reset(token)


def _named(part: object) -> str:
    """A sink's or processor's own ``repr`` when its class defines one, else its type's name
    (never an object address)."""
    kind = type(part)
    if kind.__repr__ is not object.__repr__:
        return repr(part)
    return kind.__name__
