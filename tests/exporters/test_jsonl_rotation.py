"""``JsonlSink`` rotation: a file renamed atomically when full or old, a directory where each
process (and each forked child) writes files of its own, and no line lost, torn or repeated
when several processes rotate one shared file."""

from __future__ import annotations

import io
import json
import os
import re
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import pytest

import spanledger
from spanledger.eventlog import event_line, read_events
from spanledger.events import EmbeddingEvent, EmbeddingUsage
from spanledger.exporters.jsonl import JsonlSink
from spanledger.reporting import run_report
from tests.forking import fork, outcome

DIRECTORY_FILE = re.compile(r"events-\d{8}T\d{12}Z-.+-(\d+)(?:-\d+)?\.jsonl")
ROTATED_FILE = re.compile(r"events\.\d{8}T\d{12}Z(?:-\d+)?\.jsonl")


def event(number: int, prefix: str = "call") -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=f"{prefix}-{number}",
        provider="openai",
        model="text-embedding-3-small",
        started_at=datetime.now(UTC),
        latency_ms=1.0,
        input_count=1,
        usage=EmbeddingUsage(input_tokens=number + 1),
    )


def call_ids(files: list[Path]) -> list[str]:
    """Every call id in ``files``; each line must be a whole event."""
    found: list[str] = []
    for path in files:
        log = read_events(path)
        assert log.problems == [], path
        found.extend(event.call_id for event in log.events)
    return found


def test_a_file_is_renamed_when_the_next_line_would_overfill_it(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    size = len(event_line(event(0)))
    sink = JsonlSink(path, max_bytes=size * 10)
    for number in range(95):
        sink.emit(event(number))
    sink.shutdown()

    rotated = sorted(p for p in tmp_path.iterdir() if p != path)
    assert all(ROTATED_FILE.fullmatch(p.name) for p in rotated)
    assert len(rotated) >= 8  # about ten lines a file (ids and figures grow by a digit)
    assert all(p.stat().st_size <= size * 10 for p in [*rotated, path])
    assert call_ids([*rotated, path]) == [f"call-{n}" for n in range(95)]  # in order: names sort


def test_a_file_is_rotated_once_it_is_old_enough(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path, max_age=timedelta(milliseconds=50))
    sink.emit(event(0))
    time.sleep(0.06)
    sink.emit(event(1))
    sink.shutdown()

    [rotated] = [p for p in tmp_path.iterdir() if p != path]
    assert call_ids([rotated]) == ["call-0"]
    assert call_ids([path]) == ["call-1"]


def test_a_file_is_not_rotated_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    for number in range(50):
        sink.emit(event(number))
    sink.shutdown()
    assert list(tmp_path.iterdir()) == [path]
    assert (sink.max_bytes, sink.max_age) == (None, None)


def test_a_directory_gets_files_of_this_process_rotated_by_default(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path)
    sink.emit(event(0))
    sink.shutdown()

    [written] = list(tmp_path.iterdir())
    found = DIRECTORY_FILE.fullmatch(written.name)
    assert found is not None
    assert int(found.group(1)) == os.getpid()
    assert (sink.max_bytes, sink.max_age) == (64 * 2**20, 86400.0)


def test_a_forked_child_writes_its_own_file_and_the_parent_keeps_its_own(
    tmp_path: Path,
) -> None:
    sink = JsonlSink(tmp_path, max_bytes=2**20)
    sink.emit(event(0, "parent"))

    def child() -> None:
        for number in range(200):
            sink.emit(event(number, "child"))

    pid = fork(child)
    for number in range(1, 200):
        sink.emit(event(number, "parent"))
    assert outcome(pid) == 0
    sink.shutdown()

    by_pid = {
        int(match.group(1)): path
        for path in tmp_path.iterdir()
        if (match := DIRECTORY_FILE.fullmatch(path.name))
    }
    assert set(by_pid) == {os.getpid(), pid}
    assert call_ids([by_pid[os.getpid()]]) == [f"parent-{n}" for n in range(200)]
    assert call_ids([by_pid[pid]]) == [f"child-{n}" for n in range(200)]


def test_processes_rotating_one_shared_file_lose_and_repeat_nothing(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path, max_bytes=len(event_line(event(0))) * 40)
    writers = 4

    def write(name: str) -> None:
        for number in range(300):
            sink.emit(event(number, name))

    pids = [fork(partial(write, f"w{i}")) for i in range(writers)]
    write("parent")
    assert [outcome(pid) for pid in pids] == [0] * writers
    sink.shutdown()

    files = sorted(tmp_path.iterdir())
    assert len(files) > 10
    seen = Counter(call_ids(files))
    expected = {
        f"{name}-{n}" for name in ["parent", *(f"w{i}" for i in range(writers))] for n in range(300)
    }
    assert set(seen) == expected
    assert set(seen.values()) == {1}


def test_the_report_reads_a_rotated_directory_whole(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path, max_bytes=len(event_line(event(0))) * 7)
    for number in range(100):
        sink.emit(event(number))
    sink.shutdown()
    out = io.StringIO()

    assert run_report([tmp_path], None, as_json=True, out=out) == 0
    data = json.loads(out.getvalue())
    assert len(list(tmp_path.iterdir())) > 10
    assert data["events"] == 100
    assert data["rows"][0]["input_tokens"] == sum(range(1, 101))


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"max_bytes": 0}, "max_bytes"),
        ({"max_bytes": True}, "max_bytes"),
        ({"max_bytes": "64MB"}, "max_bytes"),
        ({"max_age": -1}, "max_age"),
        ({"max_age": timedelta(0)}, "max_age"),
        ({"max_age": "1d"}, "max_age"),
    ],
)
def test_a_bad_rotation_setting_is_named(
    tmp_path: Path, options: dict[str, object], named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        JsonlSink(tmp_path / "events.jsonl", **options)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_spanledger_events_may_name_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    recorder = spanledger.configure(
        environ={"SPANLEDGER_EVENTS": str(folder) + os.sep}, install=False
    )
    try:
        [sink] = [s for s in recorder.sinks if isinstance(s, JsonlSink)]
        assert sink.directory
        assert sink.current.parent == folder
    finally:
        recorder.shutdown()
