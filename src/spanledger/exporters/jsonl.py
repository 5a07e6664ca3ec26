"""The embedded default sink: an append-only JSONL event log, rotated by size and age.

Given a file, the sink appends to it; given ``max_bytes`` or ``max_age`` it also rotates it:
the full file is renamed (atomically) to ``<name>.<UTC time>.jsonl`` and a new one started.
Given a directory, each process writes files of its own there,
``events-<UTC time>-<host>-<pid>.jsonl``, rotated by default at ``DEFAULT_MAX_BYTES`` or
``DEFAULT_MAX_AGE``: processes on one host never share a file, a forked child starts its own,
and the names sort by time. ``spanledger report <directory>`` reads them all.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from datetime import UTC, datetime, timedelta
from enum import Enum
from os import PathLike
from pathlib import Path

from spanledger import _forksafe
from spanledger.eventlog import event_line
from spanledger.events import AttributionRecord, Event

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: rotation of a shared file is not locked
    fcntl = None  # type: ignore[assignment]

__all__ = ["DEFAULT_MAX_AGE", "DEFAULT_MAX_BYTES", "JsonlSink"]

DEFAULT_MAX_BYTES = 64 * 2**20
"""A directory's files are rotated once the next line would take them past this size."""
DEFAULT_MAX_AGE = timedelta(days=1)
"""...or once they have been written to for this long."""

_FLAGS = os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
"""Read as well as append: the last byte is read through the descriptor itself, since another
process may rename the file by then."""


class _Default(Enum):
    """The default of a rotation setting: rotate a directory's files, not a file."""

    DEFAULT = "default"


def _stamp() -> str:
    """The current UTC time, to the microsecond, in a form that sorts as it reads."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


class JsonlSink:
    """Appends one JSON line per event; payload fields are never written.

    Each line goes to the file in one ``write`` on a descriptor opened for appending, as the
    event arrives: nothing is held in memory, so a crash, ``os._exit`` or a fork loses or
    repeats nothing, and processes forked from one parent can share a log file (each line lands
    whole). A log whose last line was cut off (a crash mid-write) gets a newline before the
    first new line, so the torn line stays one reported problem and the new events stay
    readable.

    ``path`` is a file, or a directory (an existing one, or a path ending in a separator) for
    files of this process's own. ``max_bytes`` / ``max_age`` rotate: a file is closed once the
    next line would take it past ``max_bytes`` or once it has been written to for ``max_age``
    (``None``: never for that reason). A file is not rotated unless asked; a directory's
    files are, at ``DEFAULT_MAX_BYTES`` / ``DEFAULT_MAX_AGE``.
    """

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        max_bytes: int | _Default | None = _Default.DEFAULT,
        max_age: timedelta | float | _Default | None = _Default.DEFAULT,
    ) -> None:
        text = os.fspath(path)
        self.directory = Path(text).is_dir() or text.endswith((os.sep, "/"))
        default_bytes = DEFAULT_MAX_BYTES if self.directory else None
        default_age = DEFAULT_MAX_AGE if self.directory else None
        self.max_bytes = _size(default_bytes if max_bytes is _Default.DEFAULT else max_bytes)
        self.max_age = _seconds(default_age if max_age is _Default.DEFAULT else max_age)
        self.path = Path(text)
        folder = self.path if self.directory else self.path.parent
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = _forksafe.lock(self, "_lock")
        self._closed = False
        self._fd = -1
        self._open()
        if self.directory:
            _forksafe.after_fork_in_child(self._start_own_file)

    @property
    def current(self) -> Path:
        """The file being written now."""
        return self._current

    def _open(self) -> None:
        """Open the file to append to (a new one, in a directory), and note its size and age."""
        if self.directory:
            self._fd, self._current = self._new_file()
        else:
            self._current = self.path
            self._fd = os.open(self.path, _FLAGS, 0o644)
        try:
            self._end_torn_line()
            self._written = os.fstat(self._fd).st_size
        except BaseException:
            os.close(self._fd)
            raise
        self._rotate_at = time.monotonic() + self.max_age if self.max_age is not None else None

    def _new_file(self) -> tuple[int, Path]:
        host = socket.gethostname().replace(os.sep, "_") or "host"
        for attempt in range(100):
            extra = f"-{attempt}" if attempt else ""
            name = self.path / f"events-{_stamp()}-{host}-{os.getpid()}{extra}.jsonl"
            try:
                return os.open(name, _FLAGS | os.O_EXCL, 0o644), name
            except FileExistsError:
                continue
        raise FileExistsError(f"no free event-log name in {self.path}")

    def _end_torn_line(self) -> None:
        size = os.fstat(self._fd).st_size
        if size and os.pread(self._fd, 1, size - 1) != b"\n":
            self._write(b"\n")

    def emit(self, event: Event) -> None:
        """Append the event as one whole JSON line, without its payload fields."""
        self._append(event_line(event))

    def attribution(self, record: AttributionRecord) -> None:
        """Append a request's attribution summary (``spanledger report`` aggregates them)."""
        self._append(event_line(record))

    def _append(self, data: bytes) -> None:
        with self._lock:
            if self._closed:
                raise RuntimeError("JsonlSink is shut down")
            if self._fd < 0 or self._due(len(data)):
                self._rotate()
            self._write(data)
            self._written += len(data)

    def _due(self, size: int) -> bool:
        limit = self.max_bytes
        if limit is not None and self._written and self._written + size > limit:
            return True
        return self._rotate_at is not None and time.monotonic() >= self._rotate_at

    def _rotate(self) -> None:
        """Close the file and start the next; a shared file is renamed first, by whichever of
        its writers gets there first (the others then only reopen it)."""
        if self._fd >= 0:
            if not self.directory:
                self._rename_shared_file()
            os.close(self._fd)
            self._fd = -1
        self._open()

    def _rename_shared_file(self) -> None:
        if fcntl is not None:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            try:
                ours = os.stat(self.path).st_ino == os.fstat(self._fd).st_ino
            except FileNotFoundError:
                ours = False  # renamed by another writer, not yet started again
            if ours:
                os.rename(self.path, self._free_name())
        finally:
            if fcntl is not None:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _free_name(self) -> Path:
        """A name for the full file that no file has (a rename would replace one)."""
        stamp = _stamp()
        for attempt in range(100):
            extra = f"-{attempt}" if attempt else ""
            name = self.path.with_name(f"{self.path.stem}.{stamp}{extra}{self.path.suffix}")
            if not name.exists():
                return name
        raise FileExistsError(f"no free name to rotate {self.path} to")

    def _start_own_file(self) -> None:
        """In a forked child: leave the parent's file to the parent; the next line starts a
        file of the child's own."""
        with contextlib.suppress(OSError):
            if self._fd >= 0:
                os.close(self._fd)
        self._fd = -1

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
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __del__(self) -> None:
        if not getattr(self, "_closed", True) and getattr(self, "_fd", -1) >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)

    def __repr__(self) -> str:
        return f"JsonlSink({str(self.path)!r})"


def _size(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_bytes must be a whole number of bytes >= 1 or None, not {value!r}")
    return value


def _seconds(value: object) -> float | None:
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else value
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise ValueError(f"max_age must be a positive timedelta or seconds, or None, not {value!r}")
    return float(seconds)
