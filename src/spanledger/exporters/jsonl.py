"""The embedded default sink: an append-only JSONL event log."""

from __future__ import annotations

import atexit
import threading
import weakref
from os import PathLike
from pathlib import Path

from spanledger.eventlog import encode_event
from spanledger.events import AttributionRecord, Event

__all__ = ["JsonlSink"]


class JsonlSink:
    """Appends one JSON line per event; safe for concurrent emitters in one process.

    Lines are buffered and written out on ``flush()``, ``shutdown()`` and at interpreter exit.
    Payload fields are never written.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file = self.path.open("a", encoding="utf-8", newline="\n")
        self._closed = False
        ref = weakref.ref(self)
        self._atexit = lambda: _shutdown_ref(ref)
        atexit.register(self._atexit)

    def emit(self, event: Event) -> None:
        self._write(encode_event(event) + "\n")

    def _write(self, line: str) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("JsonlSink is shut down")
            self._file.write(line)

    def attribution(self, record: AttributionRecord) -> None:
        """Append a request's attribution summary (``spanledger report`` aggregates them)."""
        self._write(encode_event(record) + "\n")

    def flush(self) -> None:
        with self._lock:
            if not self._closed:
                self._file.flush()

    def shutdown(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._file.flush()
            self._file.close()
        atexit.unregister(self._atexit)

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"


def _shutdown_ref(ref: weakref.ref[JsonlSink]) -> None:
    sink = ref()
    if sink is not None:
        sink.shutdown()
