"""The ledger's locks are renewed in a forked child: a lock held by the parent when it forks
(by a thread that does not exist in the child) must not hang the child's first warning or
total."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

import pytest

from spanledger.ledger import Ledger, Totals, pricing
from tests.forking import fork, outcome, timed

from .conftest import embedding_event, table

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

CHILD_DEADLINE = 3.0


def in_child_within_deadline(work: Callable[[], object]) -> bool:
    """Fork; the child runs ``work``. True when the child finished it, in time, without error."""
    return outcome(fork(timed(CHILD_DEADLINE, work))) == 0


def held_while_forking(lock: threading.Lock, work: Callable[[], object]) -> bool:
    """Fork while another thread holds ``lock``; whether the child could do ``work``."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    taken.wait(5)
    try:
        return in_child_within_deadline(work)
    finally:
        release.set()
        holder.join()


def test_a_forked_child_can_warn_about_unpriced_usage() -> None:
    ledger = Ledger(table())

    assert held_while_forking(
        pricing._warned_lock, lambda: ledger.price(embedding_event("unknown"))
    )


def test_a_forked_child_can_add_to_totals() -> None:
    totals = Totals()
    event = embedding_event("unknown")
    line = Ledger(table(), warn=False).price(event)

    assert held_while_forking(totals._lock, lambda: totals.add(event, line))
