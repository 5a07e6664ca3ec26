"""``on_attempt``: each attempt, in order, as it ends; one that raises is counted on the
outcome and logged once per exception type, and never breaks the chain."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import pytest

from spanledger.outcomes import FallbackAttempt
from spanledger.providers.fallback import awith_fallback, with_fallback
from spanledger.providers.steps import CallableStep, step

from .conftest import DOCUMENTS, QUERY, SENTINEL, good


def _failing(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    raise ConnectionError("down")


def test_on_attempt_sees_every_attempt_in_order_as_it_ends() -> None:
    seen: list[FallbackAttempt] = []
    seen_when_last_ran: list[int] = []

    def last(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        seen_when_last_ran.append(len(seen))
        return good(query, documents, top_k)

    outcome = with_fallback(
        [_failing, step(good, gate=lambda check: False), last],
        QUERY,
        DOCUMENTS,
        on_attempt=seen.append,
    )
    assert seen == outcome.attempts
    assert [a.status for a in seen] == ["failed", "skipped", "ok"]
    assert seen_when_last_ran == [2], "each attempt was reported before the next step ran"
    assert outcome.callback_failures == 0


async def test_on_attempt_in_the_async_chain() -> None:
    seen: list[FallbackAttempt] = []
    outcome = await awith_fallback([_failing, good], QUERY, DOCUMENTS, on_attempt=seen.append)
    assert seen == outcome.attempts
    assert [a.status for a in seen] == ["failed", "ok"]


def test_an_on_attempt_that_raises_is_counted_and_logged_once_per_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def on_attempt(attempt: FallbackAttempt) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise KeyError(SENTINEL)
        raise ValueError(f"callback broke on {SENTINEL}")

    with caplog.at_level(logging.WARNING, logger="spanledger"):
        outcome = with_fallback(
            [_failing, _failing, _failing, good], QUERY, DOCUMENTS, on_attempt=on_attempt
        )
    assert outcome.status == "degraded"
    assert outcome.answered_by == 3
    assert [a.status for a in outcome.attempts] == ["failed", "failed", "failed", "ok"]
    assert outcome.callback_failures == 4
    logged = [r for r in caplog.records if "on_attempt_failed" in r.getMessage()]
    assert len(logged) == 2, "once for ValueError, once for KeyError"
    assert {r.name for r in logged} == {"spanledger.providers"}
    assert "ValueError" in logged[0].getMessage()
    assert "KeyError" in logged[1].getMessage()
    assert SENTINEL not in caplog.text


async def test_an_on_attempt_that_raises_never_breaks_the_async_chain(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def on_attempt(attempt: FallbackAttempt) -> None:
        raise RuntimeError(SENTINEL)

    with caplog.at_level(logging.WARNING, logger="spanledger"):
        outcome = await awith_fallback(
            [CallableStep(_failing, name="a"), good], QUERY, DOCUMENTS, on_attempt=on_attempt
        )
    assert outcome.status == "degraded"
    assert outcome.callback_failures == 2
    assert len([r for r in caplog.records if "on_attempt_failed" in r.getMessage()]) == 1
    assert SENTINEL not in caplog.text


def test_each_chain_logs_its_own_callback_failures(caplog: pytest.LogCaptureFixture) -> None:
    def on_attempt(attempt: FallbackAttempt) -> None:
        raise RuntimeError("broken")

    with caplog.at_level(logging.WARNING, logger="spanledger"):
        for _ in range(2):
            with_fallback([_failing, good], QUERY, DOCUMENTS, on_attempt=on_attempt)
    assert len([r for r in caplog.records if "on_attempt_failed" in r.getMessage()]) == 2
