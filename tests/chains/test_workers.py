"""The worker threads local steps run on: reused between chains, never shared with a step that
overran, and fresh in a forked child (even one forked while the pool's lock was held)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

from spanledger.chains import _bounded
from spanledger.providers.fallback import step, with_fallback
from spanledger.providers.steps import CallableStep
from tests.forking import fork, outcome, timed

DOCUMENTS = ["the moon and the tides", "clocks tick", "salt"]


def ranked(query: str, documents: Sequence[str], top_k: int | None) -> list[tuple[int, float]]:
    return [(i, 1.0 - i / 10) for i in range(len(documents))]


def workers() -> int:
    return sum(1 for thread in threading.enumerate() if thread.name == "spanledger-chain")


def test_local_steps_reuse_their_workers() -> None:
    local = CallableStep(ranked, name="ranked")
    with_fallback([local], "tides", DOCUMENTS)
    before = workers()
    for _ in range(30):
        outcome_ = with_fallback([local], "tides", DOCUMENTS)
        assert outcome_.status == "ok"
    assert workers() <= max(before, 1) + 1


def test_a_step_that_overran_does_not_hold_up_the_next_chain() -> None:
    release = threading.Event()

    def stuck(query: str, documents: Sequence[str], top_k: int | None) -> object:
        release.wait(10)
        return ranked(query, documents, top_k)

    try:
        first = with_fallback([step(CallableStep(stuck), timeout=0.1)], "tides", DOCUMENTS)
        assert first.attempts[0].status == "timeout"
        started = time.monotonic()
        second = with_fallback([CallableStep(ranked)], "tides", DOCUMENTS)
        assert second.status == "ok"
        assert time.monotonic() - started < 1.0
    finally:
        release.set()


def test_a_forked_child_starts_with_workers_of_its_own() -> None:
    local = CallableStep(ranked, name="ranked")
    with_fallback([local], "tides", DOCUMENTS)
    deadline = time.monotonic() + 5
    while _bounded._workers._idle < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _bounded._workers._idle >= 1  # the parent has an idle worker, which the child lacks
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with _bounded._workers._lock:
            taken.set()
            release.wait(10)

    def work() -> None:
        run = with_fallback([local], "tides", DOCUMENTS, deadline=2.0)
        if run.status != "ok":  # the child exits RAISED
            raise RuntimeError(run.status)

    holder = threading.Thread(target=hold)
    holder.start()
    assert taken.wait(5)
    try:
        assert outcome(fork(timed(3.0, work))) == 0
    finally:
        release.set()
        holder.join()
