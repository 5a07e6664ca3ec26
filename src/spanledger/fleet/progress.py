"""A progress line on a terminal while a long read runs: how much is being read, for how long.

Shown only when standard error is a terminal and the logs are large enough to take a moment;
the line is cleared when the read ends, so nothing of it stays in the output.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

__all__ = ["reading_progress"]

SHOWN_FROM_BYTES = 64 * 2**20
_EVERY_SECONDS = 0.5


@contextlib.contextmanager
def reading_progress(files: Sequence[Path], err: TextIO | None) -> Iterator[None]:
    """Show ``reading N files (X MB): Ts`` on ``err`` while the block runs, when it is a
    terminal and the files hold at least ``SHOWN_FROM_BYTES``."""
    size = sum(path.stat().st_size for path in files)
    if err is None or size < SHOWN_FROM_BYTES or not _is_terminal(err):
        yield
        return
    done = threading.Event()
    started = time.monotonic()
    what = f"reading {len(files)} file{'s' if len(files) != 1 else ''} ({size / 2**20:,.0f} MB)"

    def show() -> None:
        while not done.wait(_EVERY_SECONDS):
            with contextlib.suppress(OSError, ValueError):
                err.write(f"\r{what}: {time.monotonic() - started:.0f}s")
                err.flush()

    shower = threading.Thread(target=show, name="spanledger-progress", daemon=True)
    shower.start()
    try:
        yield
    finally:
        done.set()
        shower.join()
        with contextlib.suppress(OSError, ValueError):
            err.write("\r\033[K")
            err.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False
