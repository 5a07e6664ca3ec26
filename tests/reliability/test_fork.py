"""Forking servers: a child forked while threads record starts with fresh locks, records its own
calls within seconds, and never writes the parent's events; a shared log stays readable."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from spanledger import EmbeddingEvent, JsonlSink, Recorder, read_events
from spanledger.providers import CohereEmbeddings

TRIALS = 20
THREADS = 4
CHILD_DEADLINE = 3.0
CHILD_EVENTS = 5

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def event(call_id: str) -> EmbeddingEvent:
    return EmbeddingEvent(
        call_id=call_id,
        provider="cohere",
        model="embed-v4.0",
        started_at=datetime.now(UTC),
        latency_ms=1.0,
        input_count=1,
    )


def cohere_answer(request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "resp-1",
            "embeddings": {"float": [[0.1, 0.2]]},
            "meta": {"billed_units": {"input_tokens": 3}},
        },
    )


def run_child(work: Callable[[], None]) -> int:
    """Fork; the child runs ``work`` and exits 0 (1 if it raised). Returns the child's pid."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            work()
            code = 0
        finally:
            os._exit(code)
    return pid


def wait_bounded(pid: int, deadline: float) -> int | None:
    """The child's exit status, or ``None`` (after killing it) if it outlived the deadline."""
    ends = time.monotonic() + deadline
    while time.monotonic() < ends:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


@pytest.fixture
def busy_recorder(tmp_path: Path) -> Iterator[tuple[Recorder, Path]]:
    """A recorder writing a JSONL log, kept busy by four threads for the whole test."""
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    stop = threading.Event()
    counter = iter(range(10**9))

    def record() -> None:
        while not stop.is_set():
            recorder.emit(event(f"parent-{next(counter)}"))

    threads = [threading.Thread(target=record, daemon=True) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    try:
        yield recorder, path
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
        recorder.shutdown()


def test_children_forked_while_threads_record_never_hang_nor_repeat(
    busy_recorder: tuple[Recorder, Path],
) -> None:
    recorder, path = busy_recorder
    late: list[int] = []
    for trial in range(TRIALS):
        time.sleep(0.005)  # let the threads get into the sink between forks

        def child_work(trial: int = trial) -> None:
            for i in range(CHILD_EVENTS):
                recorder.emit(event(f"child-{trial}-{i}"))

        status = wait_bounded(run_child(child_work), CHILD_DEADLINE)
        if status != 0:
            late.append(trial)
    assert late == [], f"children that hung or failed: {late}"

    log = read_events(path)
    assert log.problems == []
    call_ids = [e.call_id for e in log.events]
    assert len(call_ids) == len(set(call_ids)), "a line was written twice"
    children = {c for c in call_ids if c.startswith("child-")}
    assert children == {f"child-{t}-{i}" for t in range(TRIALS) for i in range(CHILD_EVENTS)}


def test_an_idle_fork_writes_nothing_of_the_parents(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    for i in range(10):
        recorder.emit(event(f"parent-{i}"))

    status = wait_bounded(run_child(lambda: recorder.shutdown()), CHILD_DEADLINE)
    assert status == 0
    recorder.shutdown()
    ids = [e.call_id for e in read_events(path).events]
    assert sorted(ids) == sorted(f"parent-{i}" for i in range(10))


def test_a_child_that_ends_with_os_exit_keeps_its_events(tmp_path: Path) -> None:
    """Multiprocessing and Celery children end with ``os._exit``: no exit hook runs there."""
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    status = wait_bounded(run_child(lambda: recorder.emit(event("child-only"))), CHILD_DEADLINE)
    assert status == 0
    recorder.shutdown()
    assert [e.call_id for e in read_events(path).events] == ["child-only"]


def test_a_provider_call_in_a_child_forked_mid_call_completes(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    client = httpx.Client(transport=httpx.MockTransport(cohere_answer))
    embedder = CohereEmbeddings("embed-v4.0", api_key="k", http_client=client, recorder=recorder)
    stop = threading.Event()

    def call_in_a_loop() -> None:
        while not stop.is_set():
            embedder.embed(["parent"])

    def call_once() -> None:
        embedder.embed(["child"])

    threads = [threading.Thread(target=call_in_a_loop, daemon=True) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(5):
            time.sleep(0.005)
            assert wait_bounded(run_child(call_once), CHILD_DEADLINE) == 0
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=5)
    recorder.shutdown()
    log = read_events(path)
    assert log.problems == []
    call_ids = [e.call_id for e in log.events]
    assert len(call_ids) == len(set(call_ids))


def test_an_owned_http_client_is_not_shared_with_a_child() -> None:
    embedder = CohereEmbeddings("embed-v4.0", api_key="k", recorder=Recorder())
    parents = embedder._sync_client()
    read, write = os.pipe()

    def report() -> None:
        os.write(write, b"same" if embedder._sync_client() is parents else b"fresh")

    status = wait_bounded(run_child(report), CHILD_DEADLINE)
    os.close(write)
    answer = os.read(read, 16)
    os.close(read)
    embedder.close()
    assert status == 0
    assert answer == b"fresh"
    assert embedder._client is None  # the parent's own was closed by close(), not by the child


def test_processes_appending_to_one_log_never_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])

    def write_many(name: str) -> Callable[[], None]:
        def work() -> None:
            for i in range(500):
                recorder.emit(event(f"{name}-{i}"))

        return work

    pids = [run_child(write_many(f"worker{n}")) for n in range(4)]
    write_many("parent")()
    assert [wait_bounded(pid, 20.0) for pid in pids] == [0, 0, 0, 0]
    recorder.shutdown()
    log = read_events(path)
    assert log.problems == []
    assert len(log.events) == 5 * 500
