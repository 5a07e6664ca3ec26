"""A progress line on a terminal while a long read runs: how much is being read, for how long,
and, when the work says so (``progress_step``), which step it is at and how far along.

Shown only when standard error is a terminal and the logs are large enough to take a moment;
the line is cleared when the read ends, so nothing of it stays in the output.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

__all__ = ["progress_step", "reading_progress"]

SHOWN_FROM_BYTES = 64 * 2**20
_EVERY_SECONDS = 0.5


@dataclass
class _Line:
    """The step a shown line names: its name and how to ask how far along it is. The lock is
    held while the progress thread asks and while the step changes, so once a step is
    replaced its figure is never asked for again (the work may close what answered it)."""

    step: tuple[str, Callable[[], float] | None] = ("", None)
    lock: threading.Lock = field(default_factory=threading.Lock)


_SHOWN: ContextVar[_Line | None] = ContextVar("spanledger_progress", default=None)
"""The progress line shown for the read running in this context, if any."""


@contextlib.contextmanager
def reading_progress(files: Sequence[Path], err: TextIO | None) -> Iterator[None]:
    """Show ``reading N files (X MB): Ts`` on ``err`` while the block runs, when it is a
    terminal and the files hold at least ``SHOWN_FROM_BYTES``; followed by the step the block
    names with ``progress_step`` (``, writing events 40%``), if it names one."""
    size = sum(path.stat().st_size for path in files)
    if err is None or size < SHOWN_FROM_BYTES or not _is_terminal(err):
        yield
        return
    done = threading.Event()
    started = time.monotonic()
    what = f"reading {len(files)} file{'s' if len(files) != 1 else ''} ({size / 2**20:,.0f} MB)"
    line = _Line()

    def show() -> None:
        while not done.wait(_EVERY_SECONDS):
            with line.lock:
                said = _said(line.step)
            with contextlib.suppress(OSError, ValueError):
                err.write(f"\r{what}: {time.monotonic() - started:.0f}s{said}\033[K")
                err.flush()

    shower = threading.Thread(target=show, name="spanledger-progress", daemon=True)
    token = _SHOWN.set(line)
    shower.start()
    try:
        yield
    finally:
        done.set()
        shower.join()
        _SHOWN.reset(token)
        with contextlib.suppress(OSError, ValueError):
            err.write("\r\033[K")
            err.flush()


def progress_step(name: str, percent: Callable[[], float] | None = None) -> None:
    """Name the step the work inside ``reading_progress`` is at (``writing events``) and, with
    ``percent``, how to ask how far along it is (0 to 100, negative when unknown; asked from
    the progress thread, and any error it raises hides the figure). A long export's steps each
    read the logs again: the time alone would not tell how far it is. Nothing happens when no
    progress line is shown."""
    line = _SHOWN.get()
    if line is not None:
        with line.lock:
            line.step = (name, percent)


def _said(step: tuple[str, Callable[[], float] | None]) -> str:
    """``, <step> <N>%``: what the progress line adds for ``step`` (nothing for no step)."""
    name, percent = step
    if not name:
        return ""
    figure = -1.0
    if percent is not None:
        with contextlib.suppress(Exception):  # a display nicety: never fail the work for it
            figure = float(percent())
    return f", {name} {figure:.0f}%" if 0 <= figure <= 100 else f", {name}"


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False
