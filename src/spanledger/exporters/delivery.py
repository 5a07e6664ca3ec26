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
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from spanledger import _forksafe
from spanledger._logs import get_logger
from spanledger.exporters._export_logs import EXPORT_THREAD_PREFIX

__all__ = ["DeliveryStats", "ExportQueue", "deadline_in"]

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

    @property
    def balanced(self) -> bool:
        """Whether every item produced is accounted for."""
        return self.exported + self.failed + self.dropped + self.pending == self.produced


def _log_once(seen: set[str], kind: str, **fields: object) -> None:
    """Log one warning per kind (without any exception message: it may hold payload)."""
    if kind in seen or len(seen) >= 64:
        return
    seen.add(kind)
    with contextlib.suppress(Exception):
        _log.warning("export_lost", **fields)


T = TypeVar("T")

_LAST_WORDS = 0.5
"""Seconds (within the deadline) a closed queue waits for its worker to stop, so that what the
worker logs as the exporter lets go is written before ``close`` returns."""


class ExportQueue(Generic[T]):
    """A bounded queue, the worker thread that exports from it, and the fate of every item.

    Putting an item takes no lock unless the queue is full or no worker runs yet. The worker
    exports what is queued when a batch is full, when ``interval`` seconds pass, and on a
    flush. ``survives_fork=False`` makes a forked child's copy inert (closed).
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
        with self._lock:
            self._arrived_dropped += weight
            self._dropped += weight
        _log_once(
            self._logged, "queue_full", backend=self.backend, unit=self.unit, reason="queue_full"
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
            _log_once(
                self._logged,
                f"worker:{type(exc).__name__}",
                backend=self.backend,
                unit=self.unit,
                reason=type(exc).__name__,
            )

    def _export_queued(self) -> None:
        while True:
            taken = self._take_batch()
            if taken is None:
                return
            number, batch = taken
            try:
                problem = self._send(batch)
            except Exception as exc:
                problem = type(exc).__name__
            self._settle(number, problem)

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
            _log_once(
                self._logged,
                f"failed:{problem}",
                backend=self.backend,
                unit=self.unit,
                reason=problem,
                count=flight[1],
            )
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
            _log_once(
                self._logged,
                "written_off",
                backend=self.backend,
                unit=self.unit,
                reason="pending_at_deadline",
                count=written_off,
            )
        return written_off

    def close(self, deadline: float) -> None:
        """Export what is queued until ``deadline``, write off the rest, stop the worker and
        release the exporter. Later items are counted dropped."""
        if self._closed:
            return
        self.flush(deadline)
        with self._lock:
            self._closed = True
        self.write_off()
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
            return DeliveryStats(
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
