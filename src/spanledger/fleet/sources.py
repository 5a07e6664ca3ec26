"""Which files a report reads: files, directories (every ``*.jsonl`` inside, rotated ones
included) and glob patterns, each named by the caller."""

from __future__ import annotations

import errno
import glob
import os
from collections.abc import Iterable
from pathlib import Path

from spanledger.errors import ConfigurationError

__all__ = ["log_files"]

_GLOB_CHARACTERS = frozenset("*?[")


def log_files(specs: Iterable[str | Path]) -> list[Path]:
    """The event-log files ``specs`` name, in name order (rotated files sort by time), each
    once. A path that does not exist raises ``FileNotFoundError``; a pattern or directory
    holding no log raises ``ConfigurationError`` naming it."""
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
        else:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)
        for path in files:
            if not os.access(path, os.R_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            found.setdefault(path.resolve(), None)
    return sorted(found, key=lambda path: (path.parent, path.name))
