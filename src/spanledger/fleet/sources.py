"""Which files a report reads: files, directories (every ``*.jsonl`` inside, rotated ones
included) and glob patterns, each named by the caller."""

from __future__ import annotations

import errno
import glob
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from spanledger.errors import ConfigurationError

__all__ = ["log_files"]

_GLOB_CHARACTERS = frozenset("*?[")


def log_files(specs: Iterable[str | Path]) -> list[Path]:
    """The event-log files ``specs`` name, in name order (rotated files sort by time), each
    once. A path that does not exist raises ``FileNotFoundError``; a pattern or directory
    holding no log, ``-`` (standard input) and a device, FIFO or socket raise
    ``ConfigurationError`` naming it."""
    found: dict[Path, None] = {}
    for spec in specs:
        text = str(spec)
        if _GLOB_CHARACTERS & set(text) and not Path(text).exists():
            matches = sorted(Path(match) for match in glob.glob(text, recursive=True))
            files = [match for match in matches if match.is_file()]
            if not files:
                raise ConfigurationError(f"{text}: no file matches this pattern")
        elif Path(text).is_dir():
            files = sorted(path for path in Path(text).rglob("*.jsonl") if path.is_file())
            if not files:
                raise ConfigurationError(f"{text}: a directory with no *.jsonl file in it")
        elif Path(text).is_file():
            files = [Path(text)]
        elif text == "-":
            raise ConfigurationError(
                "-: reading an event log from standard input is not supported; "
                "save it to a file and name the file"
            )
        elif (kind := _special_kind(text)) is not None:
            raise ConfigurationError(f"{text}: {kind}, not an event log file")
        else:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)
        for path in files:
            if not os.access(path, os.R_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            found.setdefault(path.resolve(), None)
    return sorted(found, key=lambda path: (path.parent, path.name))


def _special_kind(text: str) -> str | None:
    """What an existing path that is neither a file nor a directory is, in a few words."""
    try:
        mode = os.stat(text).st_mode
    except (OSError, ValueError):
        return None
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")
