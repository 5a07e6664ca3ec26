"""The one reader of event logs at fleet scale: every line judged by the library's own decoder.

``read_events`` and the fleet commands must keep and skip the same lines, so the fleet side
has no rules of its own. Every line goes through the decoder ``read_events`` uses. A file
whose every line is kept and already in the form the library writes is handed to DuckDB as
it is; any other file gets a working copy holding only the kept records, each in the form
the library writes, so DuckDB's lenient reading can never differ from the models'. A skipped
line is counted by the decoder's reason, never quoted (lines may hold payload). Large logs
are judged by several processes, each taking byte ranges of the files.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from spanledger.eventlog import TRUNCATED, decode_line, decode_written, event_line
from spanledger.fleet.report_cache import working_directory

__all__ = [
    "TRUNCATED",
    "ReadLogs",
    "Span",
    "read_logs",
    "read_spans",
    "reading_copy",
]

_RANGE_BYTES = 32 << 20
"""Bytes of log one worker judges at a time."""
_PARALLEL_BYTES = 64 << 20
"""Below this much log, one process judges it all: a worker's start costs more."""
_BUFFER = 1 << 20
_MOMENT = re.compile(
    rb'"(?:started_at|at)":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}'
    rb'(?:\.[0-9]{1,6})?(?:Z|[+-][0-9]{2}:[0-9]{2})"'
)
"""A record's time as the writer writes it, which DuckDB reads as the models do."""


@contextmanager
def reading_copy() -> Iterator[Path]:
    """A fresh directory for one reading's working copies, removed afterwards; the system's
    temporary directory when the cache directory cannot be written."""
    root: Path | None = working_directory()
    try:
        assert root is not None
        root.mkdir(parents=True, exist_ok=True)
    except OSError:
        root = None
    with tempfile.TemporaryDirectory(prefix="read-", dir=root) as workdir:
        yield Path(workdir)


@dataclass
class ReadLogs:
    """What DuckDB reads (``sources``: clean logs and working copies), what was skipped
    (``problems``: lines by reason), and how many lines there were."""

    sources: list[Path] = field(default_factory=list)
    lines: int = 0
    problems: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Span:
    """The lines of ``path`` that start in [``start``, ``end``); ``end`` is the file's size
    when read (``None``: its size now). A span from 0 to the end is the whole file."""

    path: Path
    start: int = 0
    end: int | None = None


@dataclass(frozen=True)
class _Range:
    """The lines of ``path`` that start in [``start``, ``end``); ``last``: it ends the file;
    ``copy``: where its kept records go, when the file needs a copy."""

    path: Path
    start: int
    end: int
    last: bool
    copy: Path


@dataclass
class _Judged:
    lines: int = 0
    problems: dict[str, int] = field(default_factory=dict)
    clean: bool = True
    """Every line kept, each already as the library writes it."""


def read_logs(files: Sequence[Path], workdir: Path, *, workers: int | None = None) -> ReadLogs:
    """Judge every line of ``files`` by the library's decoder; write a working copy under
    ``workdir`` of each file that needs one. ``workers`` processes (default: one per CPU;
    one for small logs)."""
    result = ReadLogs()
    for read in read_spans([Span(path) for path in files], workdir, workers=workers):
        result.sources += read.sources
        result.lines += read.lines
        for reason, count in read.problems.items():
            result.problems[reason] = result.problems.get(reason, 0) + count
    return result


def read_spans(
    spans: Sequence[Span], workdir: Path, *, workers: int | None = None
) -> list[ReadLogs]:
    """What ``read_logs`` finds, for each span on its own: a whole file whose every line is
    kept as written is its own source; any other span gets a working copy of its kept
    records under ``workdir``."""
    planned = list(_ranges(spans, workdir))
    ranges = [part for _, part in planned]
    wanted = workers if workers is not None else (os.cpu_count() or 1)
    total = sum(part.end - part.start for part in ranges)
    parallel = wanted > 1 and len(ranges) > 1 and total >= _PARALLEL_BYTES
    judged = _run("judge", ranges, wanted if parallel else 1)
    results = [ReadLogs() for _ in spans]
    dirty = {index for index, span in enumerate(spans) if span.start > 0}
    for (index, _), verdict in zip(planned, judged, strict=True):
        result = results[index]
        result.lines += verdict.lines
        for reason, count in verdict.problems.items():
            result.problems[reason] = result.problems.get(reason, 0) + count
        if not verdict.clean:
            dirty.add(index)
    copied = [(index, part) for index, part in planned if index in dirty]
    _run("copy", [part for _, part in copied], wanted if parallel else 1)
    for index, span in enumerate(spans):
        if index not in dirty:
            results[index].sources.append(span.path)
    for index, part in copied:
        results[index].sources.append(part.copy)
    return results


def _ranges(spans: Sequence[Span], workdir: Path) -> Iterator[tuple[int, _Range]]:
    number = 0
    for index, span in enumerate(spans):
        size = span.end if span.end is not None else span.path.stat().st_size
        starts = list(range(span.start, max(size, span.start + 1), _RANGE_BYTES))
        for at, start in enumerate(starts):
            last = at + 1 == len(starts)
            end = size if last else starts[at + 1]
            yield index, _Range(span.path, start, end, last, workdir / f"part-{number:06d}.jsonl")
            number += 1


def _run(task: str, ranges: Sequence[_Range], processes: int) -> list[_Judged]:
    """``task`` (``judge`` or ``copy``) over ``ranges``, in order, in this process or in
    ``processes`` fresh interpreters."""
    if not ranges:
        return []
    if processes <= 1:
        return [_TASKS[task](part) for part in ranges]
    shares = [list(range(index, len(ranges), processes)) for index in range(processes)]
    shares = [share for share in shares if share]
    done: dict[int, _Judged] = {}
    for share, results in zip(
        shares, _in_processes(task, [[ranges[i] for i in s] for s in shares]), strict=True
    ):
        done.update(zip(share, results, strict=True))
    return [done[index] for index in range(len(ranges))]


def _judge(part: _Range) -> _Judged:
    """Count the range's lines, and the skipped ones by the decoder's reason."""
    verdict = _Judged()
    with part.path.open("rb", buffering=_BUFFER) as log:
        for line in _lines_from(log, part.start, part.end):
            if not line.strip():
                continue
            verdict.lines += 1
            if decode_written(line) is not None and _MOMENT.search(line):
                continue
            verdict.clean = False
            decoded = decode_line(line)
            if isinstance(decoded, str):
                if part.last and not line.endswith(b"\n"):
                    decoded = TRUNCATED
                verdict.problems[decoded] = verdict.problems.get(decoded, 0) + 1
    return verdict


def _copy(part: _Range) -> _Judged:
    """Write the range's kept records to its copy, each as the library writes it."""
    with part.path.open("rb", buffering=_BUFFER) as log, part.copy.open("wb") as copy:
        for line in _lines_from(log, part.start, part.end):
            if not line.strip():
                continue
            if decode_written(line) is not None and _MOMENT.search(line):
                copy.write(line if line.endswith(b"\n") else line + b"\n")
                continue
            decoded = decode_line(line)
            if not isinstance(decoded, str):
                copy.write(event_line(decoded))
    return _Judged()


_TASKS = {"judge": _judge, "copy": _copy}


def _lines_from(log: BinaryIO, start: int, end: int) -> Iterator[bytes]:
    """The lines that start at or after ``start`` and before ``end`` (a line that starts
    before ``start`` belongs to the range before)."""
    position = start
    if start > 0:
        log.seek(start - 1)
        position = start - 1 + len(log.readline())  # to the first line starting at >= start
    else:
        log.seek(0)
    while position < end:
        line = log.readline()
        if not line:
            return
        position += len(line)
        yield line


def _in_processes(task: str, shares: Sequence[Sequence[_Range]]) -> Iterator[list[_Judged]]:
    """Run ``task`` over each share of ranges in a fresh interpreter of its own (``python -m``
    this module), so nothing of the caller's process (threads, locks, main module) is
    inherited; each share's results, in order."""
    workers = [
        subprocess.Popen(  # noqa: S603 - our own interpreter and module, arguments we built
            [sys.executable, "-m", __name__, task],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # a failure is said in one line below, never a traceback
        )
        for _ in shares
    ]
    try:
        for worker, share in zip(workers, shares, strict=True):
            assert worker.stdin is not None
            worker.stdin.write(json.dumps([_plain(part) for part in share]).encode())
            worker.stdin.close()
        for worker in workers:
            assert worker.stdout is not None
            output = worker.stdout.read()
            if worker.wait() != 0:
                raise OSError(f"a log reader process failed (exit status {worker.returncode})")
            yield [_Judged(lines, problems, clean) for lines, problems, clean in json.loads(output)]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.wait()


def _plain(part: _Range) -> list[object]:
    return [str(part.path), part.start, part.end, part.last, str(part.copy)]


def _serve(task: str) -> None:
    """A reader process: ranges on standard input, their verdicts on standard output."""
    ranges = [
        _Range(Path(path), start, end, last, Path(copy))
        for path, start, end, last, copy in json.loads(sys.stdin.buffer.read())
    ]
    done = [_TASKS[task](part) for part in ranges]
    sys.stdout.write(json.dumps([[each.lines, each.problems, each.clean] for each in done]))


if __name__ == "__main__":
    _serve(sys.argv[1])
