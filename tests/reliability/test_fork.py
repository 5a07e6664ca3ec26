"""Forking servers: a child forked while threads record starts with fresh locks, records its own
calls within seconds, and never writes the parent's events; a shared log stays readable."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

import spanledger
from spanledger import EmbeddingEvent, JsonlSink, Recorder, read_events
from spanledger.providers import CohereEmbeddings
from tests.forking import fork, outcome, timed

TRIALS = 20
THREADS = 4
RECORD_LIMIT = 3.0
"""Seconds within which a forked child must have recorded its calls."""
CHILD_EVENTS = 5
BURST = 10

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


@pytest.fixture
def busy_recorder(tmp_path: Path) -> Iterator[tuple[Recorder, Path]]:
    """A recorder writing a JSONL log, kept busy by four threads for the whole test."""
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    stop = threading.Event()
    counter = iter(range(10**9))

    def record() -> None:
        while not stop.is_set():  # bursts: busy in the sink at most forks, a log of bounded size
            for _ in range(BURST):
                recorder.emit(event(f"parent-{next(counter)}"))
            time.sleep(0.005)

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

        status = outcome(fork(timed(RECORD_LIMIT, child_work)))
        if status != 0:
            late.append(trial)
    assert late == [], f"children that hung or failed: {late}"

    log = read_events(path)
    assert log.problems == []
    call_ids = [e.call_id for e in log.events]
    assert len(call_ids) == len(set(call_ids)), "a line was written twice"
    children = {c for c in call_ids if c.startswith("child-")}
    assert children == {f"child-{t}-{i}" for t in range(TRIALS) for i in range(CHILD_EVENTS)}


def held_while_forking(lock: object, work: Callable[[], object]) -> int | None:
    """Fork while another thread holds ``lock``; the child's outcome of ``work``."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:  # type: ignore[attr-defined]
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(5)
    try:
        return outcome(fork(timed(RECORD_LIMIT, work)))
    finally:
        release.set()
        holder.join()


def test_a_child_forked_while_a_thread_holds_the_log_or_recorder_lock_records(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(path)
    recorder = Recorder([sink])
    with spanledger.request("turn") as scope:
        for lock, name in (
            (sink._lock, "log"),
            (recorder._lock, "recorder"),
            (scope._lock, "scope"),
        ):

            def work(name: str = name) -> None:
                recorder.emit(event(f"child-{name}"))
                assert recorder.stats["0:JsonlSink"].delivered >= 1

            assert held_while_forking(lock, work) == 0, name
    recorder.shutdown()
    ids = {e.call_id for e in read_events(path).events}
    assert ids == {"child-log", "child-recorder", "child-scope"}


def test_an_idle_fork_writes_nothing_of_the_parents(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    for i in range(10):
        recorder.emit(event(f"parent-{i}"))

    status = outcome(fork(timed(RECORD_LIMIT, recorder.shutdown)))
    assert status == 0
    recorder.shutdown()
    ids = [e.call_id for e in read_events(path).events]
    assert sorted(ids) == sorted(f"parent-{i}" for i in range(10))


def test_a_child_that_ends_with_os_exit_keeps_its_events(tmp_path: Path) -> None:
    """Multiprocessing and Celery children end with ``os._exit``: no exit hook runs there."""
    path = tmp_path / "events.jsonl"
    recorder = Recorder([JsonlSink(path)])
    status = outcome(fork(timed(RECORD_LIMIT, lambda: recorder.emit(event("child-only")))))
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
            assert outcome(fork(timed(RECORD_LIMIT, call_once))) == 0
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

    status = outcome(fork(report))
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

    pids = [fork(write_many(f"worker{n}")) for n in range(4)]
    write_many("parent")()
    assert [outcome(pid) for pid in pids] == [0, 0, 0, 0]
    recorder.shutdown()
    log = read_events(path)
    assert log.problems == []
    assert len(log.events) == 5 * 500
