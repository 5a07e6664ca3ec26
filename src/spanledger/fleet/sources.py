"""Which files a report reads: files, directories and glob patterns, each named by the caller.

A name that exists is taken literally, whatever characters it holds: the shell has already
expanded the user's patterns into names, and a log may be called ``a[1].jsonl`` or ``c*.jsonl``.
A name that does not exist and holds ``*``, ``?`` or ``[`` is a pattern, expanded here, once. A
directory, named or matched by a pattern, is read whole: every ``*.jsonl`` inside, at any depth,
rotated files included. Each file is read once however many names reach it (named twice, through
a symbolic or a hard link, by two patterns). What cannot be read, a file or a directory at any
depth, is an error naming it; or, when the caller asks, it is skipped and listed in the result,
so that a report can say what it did not read.
"""

from __future__ import annotations

import errno
import fnmatch
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from spanledger.errors import ConfigurationError

__all__ = ["LogFiles", "describe_unreadable", "log_files"]

_GLOB_CHARACTERS = frozenset("*?[")
_NAMED_AT_MOST = 10
"""How many unreadable paths a message names before it says how many more there are."""


@dataclass(frozen=True)
class LogFiles:
    """The files to read, in name order (rotated files sort by time), each once; and the paths
    that could not be read and were skipped, as they were named or found (``len(unreadable)``
    is the count a report gives)."""

    files: tuple[Path, ...]
    unreadable: tuple[Path, ...] = ()


def log_files(specs: Iterable[str | Path], *, skip_unreadable: bool = False) -> LogFiles:
    """The event-log files ``specs`` name. A path that does not exist raises
    ``FileNotFoundError``; a pattern or directory holding no log, ``-`` (standard input) and a
    device, FIFO or socket raise ``ConfigurationError`` naming it. A file or directory that
    cannot be read raises its ``OSError`` naming it, unless ``skip_unreadable``: then it is
    listed in ``LogFiles.unreadable`` (and ``ConfigurationError`` says so when nothing at all
    could be read)."""
    found = _Found(skip_unreadable)
    for spec in specs:
        found.add(str(spec))
    unreadable = tuple(found.unreadable)
    if not found.files:  # every source was skipped as unreadable, or none was given
        named = f": {describe_unreadable(unreadable)}" if unreadable else ""
        raise ConfigurationError(f"no log can be read{named}")
    files = sorted((path.resolve() for path in found.files.values()), key=_name_order)
    return LogFiles(tuple(files), unreadable)


def describe_unreadable(paths: Sequence[Path]) -> str:
    """``2 unreadable paths: a, b``; past ``_NAMED_AT_MOST`` names, ``... and N more``."""
    noun = "path" if len(paths) == 1 else "paths"
    named = ", ".join(str(path) for path in paths[:_NAMED_AT_MOST])
    more = len(paths) - _NAMED_AT_MOST
    return f"{len(paths)} unreadable {noun}: {named}" + (f" and {more} more" if more > 0 else "")


class _Found:
    """The files found so far, one per (device, inode), and the paths that could not be read.
    ``reached`` counts both, repeats included, so a source that named nothing can be told from
    one whose files were all named before."""

    def __init__(self, skip_unreadable: bool) -> None:
        self.skip_unreadable = skip_unreadable
        self.files: dict[tuple[int, int], Path] = {}
        self.unreadable: dict[Path, None] = {}
        self.reached = 0

    def add(self, text: str) -> None:
        """The files one source names: literally when it exists, else as a pattern."""
        before = self.reached
        try:
            mode: int | None = os.stat(text).st_mode
        except (FileNotFoundError, NotADirectoryError):
            mode = None
        except OSError as error:  # a directory on the way cannot be searched, say
            self.cannot_read(Path(text), error)
            return
        if mode is None and _GLOB_CHARACTERS & set(text):
            matches = self.matches(text)
            for match in matches:
                self.take(match)
            if self.reached == before:
                raise ConfigurationError(
                    f"{text}: no file matches this pattern"
                    if not matches
                    else f"{text}: nothing this pattern matches is a file or a directory with "
                    "a *.jsonl file in it"
                )
        elif mode is None and text == "-":
            raise ConfigurationError(
                "-: reading an event log from standard input is not supported; "
                "save it to a file and name the file"
            )
        elif mode is None:
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), text)
        elif stat.S_ISDIR(mode):
            self.directory(Path(text))
            if self.reached == before:
                raise ConfigurationError(f"{text}: a directory with no *.jsonl file in it")
        elif stat.S_ISREG(mode):
            self.file(Path(text))
        else:
            raise ConfigurationError(f"{text}: {_special_kind(mode)}, not an event log file")

    def take(self, path: Path) -> None:
        """A path a pattern matched: a directory is read whole, a file is read, anything else
        (a device, a FIFO, a link to nothing) is not a log and is left out, as in a directory."""
        try:
            mode = os.stat(path).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as error:
            self.cannot_read(path, error)
            return
        if stat.S_ISDIR(mode):
            self.directory(path)
        elif stat.S_ISREG(mode):
            self.file(path)

    def file(self, path: Path) -> None:
        """A regular file, kept once per (device, inode): opened, so that a file this process
        may not read is found now, by the system's own rule, rather than halfway through."""
        try:
            identity = _identity(path)
        except FileNotFoundError:  # rotated away or deleted since it was listed
            return
        except OSError as error:
            self.cannot_read(path, error)
            return
        self.reached += 1
        self.files.setdefault(identity, path)

    def directory(self, top: Path) -> None:
        """Every ``*.jsonl`` file under ``top``, at any depth. A symbolic link to a directory
        is not followed below ``top`` (a loop would never end); one to a file is read."""
        pending = [top]
        while pending:
            folder = pending.pop()
            for entry in self.listing(folder) or ():
                kind = self.kind(folder, entry)
                if kind == "directory":
                    pending.append(folder / entry.name)
                elif kind == "file" and fnmatch.fnmatch(entry.name, "*.jsonl"):
                    self.file(folder / entry.name)

    def matches(self, pattern: str) -> list[Path]:
        """The paths ``pattern`` matches, expanded one component at a time so that a directory
        that cannot be listed on the way is noted like any other. As in the shell, ``*`` and
        ``?`` do not match a leading dot and ``**`` is this directory and every one below it."""
        whole = Path(pattern)
        found = [Path(whole.anchor)] if whole.anchor else [Path()]
        for part in whole.parts[1:] if whole.anchor else whole.parts:
            if part == "**":
                found = [below for base in found for below in self.below(base)]
            elif _GLOB_CHARACTERS & set(part):
                found = [
                    base / name
                    for base in found
                    for name in fnmatch.filter(self.names(base, hidden=part[0] == "."), part)
                ]
            else:
                found = [base / part for base in found]
        return sorted({path: None for path in found if os.path.lexists(path)})

    def below(self, top: Path) -> list[Path]:
        """``top`` and every directory under it, leaving out hidden ones and not following
        symbolic links (as ``directory`` does)."""
        folders: list[Path] = []
        pending = [top]
        while pending:
            folder = pending.pop()
            entries = self.listing(folder)
            if entries is None:
                continue
            folders.append(folder)
            pending.extend(
                folder / entry.name
                for entry in entries
                if not entry.name.startswith(".") and self.kind(folder, entry) == "directory"
            )
        return folders

    def kind(self, folder: Path, entry: os.DirEntry[str]) -> Literal["directory", "file"] | None:
        """``directory`` for a directory (a link to one is not followed), ``file`` for a
        regular file (a link to one is); ``None`` for anything else, and, noted as
        unreadable, for an entry whose kind cannot be looked up (a link into a directory
        that cannot be searched)."""
        try:
            if entry.is_dir(follow_symlinks=False):
                return "directory"
            return "file" if entry.is_file() else None
        except OSError as error:
            self.cannot_read(folder / entry.name, error)
            return None

    def names(self, folder: Path, *, hidden: bool) -> list[str]:
        """The names in ``folder``; those starting with a dot only when ``hidden``."""
        return [
            entry.name
            for entry in self.listing(folder) or ()
            if hidden or not entry.name.startswith(".")
        ]

    def listing(self, folder: Path) -> list[os.DirEntry[str]] | None:
        """``folder``'s entries; ``None`` when it is gone or not a directory, and ``None``,
        noted as unreadable, when it cannot be listed."""
        try:
            with os.scandir(folder) as entries:
                return list(entries)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            self.cannot_read(folder, error)
            return None

    def cannot_read(self, path: Path, error: OSError) -> None:
        """Raise ``error`` naming ``path``; or, when skipping, note ``path`` once."""
        if not self.skip_unreadable:
            raise OSError(error.errno, error.strerror, str(path)) from error
        self.reached += 1
        self.unreadable.setdefault(path, None)


def _identity(path: Path) -> tuple[int, int]:
    """``path``'s (device, inode), from the file opened for reading; ``O_NONBLOCK`` so that a
    file swapped for a FIFO since it was listed cannot stop the run."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    descriptor = os.open(path, flags)
    try:
        status = os.fstat(descriptor)
    finally:
        os.close(descriptor)
    return (status.st_dev, status.st_ino)


def _name_order(path: Path) -> tuple[Path, str]:
    """Files sort by folder, then name: rotated files, named by time, sort by time."""
    return (path.parent, path.name)


def _special_kind(mode: int) -> str:
    """What an existing path that is neither a file nor a directory is, in a few words."""
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((kind for test, kind in kinds if test(mode)), "not a regular file")
