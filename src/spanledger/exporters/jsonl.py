"""The embedded default sink: an append-only JSONL event log."""

from __future__ import annotations

import contextlib
import os
from os import PathLike
from pathlib import Path

from spanledger import _forksafe
from spanledger.eventlog import event_line
from spanledger.events import AttributionRecord, Event

__all__ = ["JsonlSink"]

_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)


class JsonlSink:
    """Appends one JSON line per event; payload fields are never written.

    Each line goes to the file in one ``write`` on a descriptor opened for appending, as the
    event arrives: nothing is held in memory, so a crash, ``os._exit`` or a fork loses or
    repeats nothing, and processes forked from one parent can share the log (each line lands
    whole). A log whose last line was cut off (a crash mid-write) gets a newline before the
    first new line, so the torn line stays one reported problem and the new events stay
    readable.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, _FLAGS, 0o644)
        self._lock = _forksafe.lock(self, "_lock")
        self._closed = False
        try:
            self._end_torn_line()
        except BaseException:
            os.close(self._fd)
            raise

    def _end_torn_line(self) -> None:
        with self.path.open("rb") as log:
            if log.seek(0, os.SEEK_END) == 0:
                return
            log.seek(-1, os.SEEK_END)
            if log.read(1) != b"\n":
                self._write(b"\n")

    def emit(self, event: Event) -> None:
        self._append(event_line(event))

    def attribution(self, record: AttributionRecord) -> None:
        """Append a request's attribution summary (``spanledger report`` aggregates them)."""
        self._append(event_line(record))

    def _append(self, data: bytes) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("JsonlSink is shut down")
            self._write(data)

    def _write(self, data: bytes) -> None:
        """The whole of ``data``; a short write (a full disk) raises after writing what fit."""
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            if written <= 0:
                raise OSError("the event log accepted no bytes")
            view = view[written:]

    def flush(self, timeout: float | None = None) -> None:
        """Nothing to do: every line is written as its event arrives."""

    def shutdown(self, timeout: float | None = None) -> None:
        """Close the log; later events are refused (and counted by the recorder)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._fd)

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"
