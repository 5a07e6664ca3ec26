"""Counting what a backend exporter delivered and lost, so a down or slow backend is visible.

Every span or metric data point a spanledger-owned pipeline produces ends in exactly one of
four states, and ``DeliveryStats`` always balances::

    exported + failed + dropped + pending == produced

*exported*: the backend accepted it; *failed*: the backend refused it or the export raised;
*dropped*: it never reached the backend (the queue was full, or it was still queued or in
flight when the pipeline shut down); *pending*: queued or in flight now. After a shutdown
nothing is pending.

``ExportQueue`` keeps that account: the export runs on a worker thread of spanledger's own
(named ``spanledger-export-…``), behind a bounded queue, so a call never waits for a backend;
flushing and shutting down wait at most until a deadline, then write off what is left as
dropped. A forked child starts with an empty queue, zero counts and no worker (one starts when
the child first queues something): it never exports its parent's data.

Every loss is logged as a sentence naming the backend, its address and the cause, once per
cause (``export_lost``)::

    6 spans for OTLP traces at http://127.0.0.1:4318/v1/traces were not delivered:
    connection refused (given up at the shutdown deadline)
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from spanledger import _forksafe
from spanledger._logs import get_logger
from spanledger.exporters._export_logs import (
    EXPORT_THREAD_PREFIX,
    Backend,
    lost_sentence,
    plural,
    work_for,
)

__all__ = ["DeliveryStats", "ExportQueue", "deadline_in", "not_delivered"]

_log = get_logger("spanledger.exporters")


@dataclass(frozen=True)
class DeliveryStats:
    """What one backend pipeline produced and what became of it, in ``unit`` (``spans`` or
    ``data points``): ``exported + failed + dropped + pending == produced``."""

    backend: str
    exported: int
    failed: int
    produced: int = 0
    dropped: int = 0
    pending: int = 0
    unit: str = "spans"
    label: str | None = field(default=None, compare=False)
    """The backend as a person names it (``OTLP traces``, ``OTLP metrics``, ``Langfuse``)."""
    address: str | None = field(default=None, compare=False)
    """Where it is: ``scheme://host:port/path``, never credentials or a query."""
    cause: str | None = field(default=None, compare=False)
    """Why items were lost (``connection refused``, ``HTTP 401 Unauthorized …``), if any were."""

    @property
    def balanced(self) -> bool:
        """Whether every item produced is accounted for."""
        return self.exported + self.failed + self.dropped + self.pending == self.produced

    @property
    def named(self) -> str:
        """``OTLP traces at http://127.0.0.1:4318/v1/traces`` (the backend id when unnamed)."""
        label = self.label or self.backend
        return f"{label} at {self.address}" if self.address else label


def not_delivered(sinks: Iterable[object]) -> str | None:
    """What the exporters among ``sinks`` did not deliver (their ``delivery`` and
    ``metric_delivery``), one phrase per backend: ``9 spans to OTLP traces at
    http://127.0.0.1:4318/v1/traces (connection refused)``; ``None`` when all was delivered
    or none of them counts its delivery."""
    phrases = []
    for sink in sinks:
        for accessor in ("delivery", "metric_delivery"):
            stats = getattr(sink, accessor, None)
            if not isinstance(stats, DeliveryStats):
                continue
            missing = stats.produced - stats.exported
            if missing > 0:
                why = f" ({stats.cause})" if stats.cause else ""
                phrases.append(f"{plural(missing, stats.unit)} to {stats.named}{why}")
    return "; ".join(phrases) or None


T = TypeVar("T")

_LAST_WORDS = 0.5
"""Seconds (within the deadline) a closed queue waits for its worker to stop, so that what the
worker logs as the exporter lets go is written before ``close`` returns."""


class ExportQueue(Generic[T]):
    """A bounded queue, the worker thread that exports from it, and the fate of every item.

    Putting an item takes no lock unless the queue is full or no worker runs yet. The worker
    exports what is queued when a batch is full, when ``interval`` seconds pass, and on a
    flush. ``survives_fork=False`` makes a forked child's copy inert (closed). ``target``
    names the backend in what is logged, and hears what the exporter's requests ran into.
    """

    def __init__(
        self,
        *,
        backend: str,
        unit: str,
        name: str,
        max_queue: int,
        max_batch: int,
        interval: float,
        survives_fork: bool = True,
        target: Backend | None = None,
    ) -> None:
        if max_queue < 1 or max_batch < 1 or not interval > 0:
            raise ValueError("queue and batch sizes must be positive, and so must the interval")
        self.backend = backend
        self.unit = unit
        self._name = name
        self._max_queue = max_queue
        self._max_batch = max_batch
        self._interval = interval
        self._survives_fork = survives_fork
        self.target = target
        self._logged: set[str] = set()
        self._start_afresh()
        _forksafe.after_fork_in_child(self._forget_parent)

    def _start_afresh(self) -> None:
        self._queue: deque[T] = deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._arrived_dropped = 0
        self._taken = 0
        self._settled = 0
        self._exported = 0
        self._failed = 0
        self._dropped = 0
        self._flight: tuple[int, int] | None = None
        self._batches = 0
        self._closed = False
        self._causes: dict[str, None] = {}
        self._told = 0

    def _forget_parent(self) -> None:
        """In a forked child: the parent's queue, counts, locks and worker are the parent's."""
        self._start_afresh()
        self._closed = not self._survives_fork
        self._renew_in_child()

    def _renew_in_child(self) -> None:
        """What else a subclass must renew in a forked child."""

    # -- the hooks a subclass fills in --

    def _weight(self, items: Sequence[T]) -> int:
        """How many units (spans, data points) ``items`` hold."""
        return len(items)

    def _send(self, batch: list[T]) -> str | None:
        """Export ``batch``: ``None`` when the backend accepted it, else why not."""
        raise NotImplementedError

    def _on_tick(self) -> None:
        """Run by the worker every ``interval`` seconds, before it exports."""

    def _after_close(self) -> None:
        """Release the exporter once the queue is closed."""

    # -- telling what was lost --

    def _named(self) -> str:
        return self.target.named if self.target is not None else self.backend

    def _lost(self, kind: str, message: str, **fields: object) -> bool:
        """Log one ``export_lost`` sentence per kind (never an exception's message: it may
        hold payload); whether this was the first."""
        if kind in self._logged or len(self._logged) >= 64:
            return False
        self._logged.add(kind)
        self._tell(message, **fields)
        return True

    def _tell(self, message: str, **fields: object) -> None:
        target = self.target
        where = {"address": target.address} if target is not None else {}
        with contextlib.suppress(Exception):
            _log.warning(
                "export_lost",
                message=message,
                backend=target.label if target is not None else self.backend,
                **where,
                **fields,
                unit=self.unit,
            )

    def _note_cause(self, cause: str) -> None:
        with self._lock:
            if len(self._causes) < 4:
                self._causes[cause] = None

    def _cause_of(self, problem: str) -> str:
        """What the failed export ran into: what its requests told the target, else the
        exporter's own answer."""
        target = self.target
        if target is not None and target.failed_in_send and target.last_cause is not None:
            return target.last_cause
        if problem == "export_failed":
            return "the exporter reported a failure"
        return f"the exporter raised {problem}"

    # -- putting items --

    def put(self, item: T) -> None:
        """Queue ``item`` for export, or count it dropped when the queue is full or closed."""
        queue = self._queue
        if len(queue) >= self._max_queue or self._closed:
            self._drop_arrival(item)
            return
        queue.append(item)
        if self._worker is None:
            self._start_worker()
        if len(queue) >= self._max_batch and not self._wake.is_set():
            self._wake.set()

    def put_all(self, items: Iterable[T]) -> None:
        for item in items:
            self.put(item)

    def _drop_arrival(self, item: T) -> None:
        weight = self._weight((item,))
        closed = self._closed
        with self._lock:
            self._arrived_dropped += weight
            self._dropped += weight
            if len(self._causes) < 4:
                self._causes.setdefault("exporter shut down" if closed else "export queue full")
        kind = "closed" if closed else "queue_full"
        if kind in self._logged:
            return
        last = self.target.last_cause if self.target is not None else None
        if closed:
            cause = "the exporter is shut down"
        else:
            cause = f"the export queue is full ({self._max_queue} waiting)"
            cause += f"; the backend's last answer: {last}" if last else ""
        self._lost(
            kind,
            f"{self.unit} for {self._named()} are being dropped: {cause}",
            reason="queue_full",
            cause=cause,
        )

    def _start_worker(self) -> None:
        with self._lock:
            if self._worker is not None or self._closed:
                return
            self._worker = threading.Thread(
                target=self._run, name=f"{EXPORT_THREAD_PREFIX}-{self._name}", daemon=True
            )
            self._worker.start()

    # -- the worker --

    def _run(self) -> None:
        work_for(self.target)
        while not self._closed:
            woken = self._wake.wait(self._interval)
            self._wake.clear()
            if self._closed:
                return
            if not woken:
                self._guarded(self._on_tick)
            self._export_queued()

    def _guarded(self, action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:
            name = type(exc).__name__
            self._lost(
                f"worker:{name}",
                f"the export worker for {self._named()} raised {name}",
                reason=name,
            )

    def _export_queued(self) -> None:
        while True:
            taken = self._take_batch()
            if taken is None:
                return
            number, batch = taken
            target = self.target
            if target is not None:
                target.between_sends()
            try:
                problem = self._send(batch)
            except Exception as exc:
                problem = type(exc).__name__
            self._settle(number, problem)
            if target is not None:
                target.between_sends()

    def _take_batch(self) -> tuple[int, list[T]] | None:
        with self._lock:
            queue = self._queue
            if self._closed or not queue:
                return None
            batch = [queue.popleft() for _ in range(min(self._max_batch, len(queue)))]
            weight = self._weight(batch)
            self._batches += 1
            self._taken += weight
            self._flight = (self._batches, weight)
            return self._batches, batch

    def _settle(self, number: int, problem: str | None) -> None:
        """Count the batch's outcome (logged first, so that no one waiting for it returns
        while the line is still being written)."""
        with self._lock:
            flight = self._flight
        if flight is None or flight[0] != number:
            return  # written off at a deadline while it was in flight: counted already
        if problem is not None:
            cause = self._cause_of(problem)
            self._note_cause(cause)
            if self._lost(
                f"failed:{cause}",
                lost_sentence(flight[1], self.unit, self._named(), cause),
                reason=problem,
                cause=cause,
                count=flight[1],
            ):
                self._told += flight[1]
        with self._changed:
            if self._flight is not flight:
                return
            self._flight = None
            weight = flight[1]
            self._settled += weight
            if problem is None:
                self._exported += weight
            else:
                self._failed += weight
            self._changed.notify_all()

    # -- flush, write-off and close --

    def flush(self, deadline: float) -> bool:
        """Wait (until ``deadline``, a ``time.monotonic()`` value) for everything queued now to
        be exported or to fail; whether it all was."""
        with self._changed:
            target = self._taken + self._weight(self._queue)
            if self._settled >= target:
                return True
        self._wake.set()
        with self._changed:
            while self._settled < target and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return self._settled >= target

    def write_off(self) -> int:
        """Count what is still queued or in flight as dropped (its outcome would come too
        late); the units written off."""
        with self._changed:
            queued = self._weight(self._queue)
            self._queue.clear()
            self._taken += queued
            in_flight = self._flight[1] if self._flight is not None else 0
            self._flight = None
            written_off = queued + in_flight
            self._settled += written_off
            self._dropped += written_off
            self._changed.notify_all()
        if written_off:
            cause, told = self._cause_at_deadline(in_flight)
            self._note_cause(cause)
            if self._lost(
                f"written_off:{cause}",
                lost_sentence(written_off, self.unit, self._named(), told),
                reason="pending_at_deadline",
                cause=cause,
                count=written_off,
            ):
                self._told += written_off
        return written_off

    def _cause_at_deadline(self, in_flight: int) -> tuple[str, str]:
        """Why what was still queued or in flight at a deadline never arrived: the cause, and
        how the sentence tells it."""
        target = self.target
        if target is not None and target.last_cause is not None:
            cause = target.last_cause
            return cause, f"{cause} (given up at the shutdown deadline)"
        if in_flight and target is not None and target.awaiting:
            cause = "timed out (no answer before the shutdown deadline)"
        elif in_flight:
            cause = "still being exported at the shutdown deadline"
        else:
            cause = "not sent before the shutdown deadline"
        return cause, cause

    def tell_total(self) -> None:
        """Log the total lost, if the sentences so far (one per cause) told less."""
        stats = self.stats
        lost = stats.failed + stats.dropped
        if lost <= self._told:
            return
        self._told = lost
        verb = "was" if lost == 1 else "were"
        why = f": {stats.cause}" if stats.cause else ""
        self._tell(
            f"in all, {lost} of {plural(stats.produced, self.unit)} for {self._named()} {verb} "
            f"not delivered{why}",
            reason="total",
            cause=stats.cause,
            count=lost,
        )

    def close(self, deadline: float) -> None:
        """Export what is queued until ``deadline``, write off the rest, stop the worker and
        release the exporter. Later items are counted dropped."""
        if self._closed:
            return
        self.flush(deadline)
        with self._lock:
            self._closed = True
        self.write_off()
        self.tell_total()
        if self.target is not None:
            self.target.retired = True
        self._wake.set()
        self._guarded(self._after_close)
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(min(_LAST_WORDS, max(0.0, deadline - time.monotonic())))

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def stats(self) -> DeliveryStats:
        with self._lock:
            queued = self._weight(self._queue)
            in_flight = self._flight[1] if self._flight is not None else 0
            target = self.target
            return DeliveryStats(
                label=target.label if target is not None else None,
                address=target.address if target is not None else None,
                cause=", ".join(self._causes) or None,
                backend=self.backend,
                exported=self._exported,
                failed=self._failed,
                produced=self._arrived_dropped + self._taken + queued,
                dropped=self._dropped,
                pending=queued + in_flight,
                unit=self.unit,
            )


def deadline_in(timeout_millis: float | None, default: float) -> float:
    seconds = default if timeout_millis is None else max(0.0, timeout_millis / 1000)
    return time.monotonic() + seconds
