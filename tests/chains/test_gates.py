"""Gates: a step's own yes, no or reason before it runs; a gate that raises, answers nonsense
or hangs skips its step, and a hanging gate never holds the chain past its deadline."""

from __future__ import annotations

import asyncio
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from spanledger.chains import when
from spanledger.chains._chain import REASON_LENGTH
from spanledger.costs import CostCode, CostStatus
from spanledger.exporters.langfuse import chain_metadata
from spanledger.ledger import price_outcome
from spanledger.providers.fallback import awith_fallback, with_fallback
from spanledger.providers.steps import CallableStep, GateCheck, step

from .conftest import DOCUMENTS, PRICES, QUERY, SENTINEL, Otel, Providers, good


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """Set at the end of the test, so a hung gate's thread ends."""
    event = threading.Event()
    yield event
    event.set()


def _gated(gate: Any) -> list[Any]:
    return [step(good, gate=gate), CallableStep(good, name="next")]


def _reasons(outcome: Any) -> list[tuple[str, str | None]]:
    return [(a.status, a.reason) for a in outcome.attempts]


def test_a_gate_saying_true_runs_its_step() -> None:
    outcome = with_fallback(_gated(lambda check: True), QUERY, DOCUMENTS)
    assert outcome.status == "ok"
    assert _reasons(outcome) == [("ok", None)]


def test_a_gate_saying_false_skips_its_step() -> None:
    outcome = with_fallback(_gated(lambda check: False), QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1
    assert _reasons(outcome) == [("skipped", "gate_declined"), ("ok", None)]


def test_a_gate_saying_a_string_skips_with_that_reason() -> None:
    outcome = with_fallback(_gated(lambda check: "over_budget"), QUERY, DOCUMENTS)
    assert _reasons(outcome) == [("skipped", "over_budget"), ("ok", None)]


@pytest.mark.parametrize(
    "reason", ["over_budget", "tier:gold-1.5", "A" * REASON_LENGTH, "x", "budget.spent:EU"]
)
def test_a_gates_reason_within_the_rule_is_kept_as_it_is(reason: str) -> None:
    outcome = with_fallback(_gated(lambda check: reason), QUERY, DOCUMENTS)
    assert _reasons(outcome)[0] == ("skipped", reason)


@pytest.mark.parametrize(
    ("reason", "kept"),
    [
        ("quota spent", "quota_spent"),
        ("über\nbudget\x1b[31m", "_ber_budget__31m"),
        ("a/b=c'd\"e", "a_b_c_d_e"),
        ("x" * 10_000, "x" * REASON_LENGTH),
        ("ü" * 10_000, "_" * REASON_LENGTH),
    ],
)
def test_a_gates_reason_is_bounded_before_anything_renders_it(
    reason: str, kept: str, otel: Otel
) -> None:
    outcome = with_fallback(
        _gated(when(lambda: False, reason)), QUERY, DOCUMENTS, recorder=otel.recorder
    )
    assert _reasons(outcome)[0] == ("skipped", kept)
    (chain,) = [span for span in otel.spans() if span.name == "rerank_chain"]
    event = dict(chain.events[0].attributes or {})
    assert event["spanledger.attempt.reason"] == kept
    assert chain_metadata(outcome)["attempts"][0]["reason"] == kept


def test_a_gates_reason_never_carries_what_it_quotes(otel: Otel) -> None:
    """A gate that quotes the request (or anything long) in its reason leaves at most the
    rule's first characters, made safe, on the span."""
    quoting = f"declined for {QUERY} because {DOCUMENTS[0]}" * 50
    outcome = with_fallback(_gated(lambda check: quoting), QUERY, DOCUMENTS, recorder=otel.recorder)
    reason = outcome.attempts[0].reason
    assert reason is not None
    assert len(reason) <= REASON_LENGTH
    assert re.fullmatch(r"[A-Za-z0-9_.:-]+", reason)
    (chain,) = [span for span in otel.spans() if span.name == "rerank_chain"]
    assert SENTINEL not in repr(chain.events[0].attributes)


async def test_an_async_gates_reason_is_bounded_too() -> None:
    async def gate(check: GateCheck) -> str:
        return "quiet hours\t" * 20

    outcome = await awith_fallback(_gated(gate), QUERY, DOCUMENTS)
    assert _reasons(outcome)[0] == ("skipped", ("quiet_hours_" * 20)[:REASON_LENGTH])


def test_a_gate_that_raises_skips_its_step() -> None:
    def gate(check: GateCheck) -> bool:
        raise RuntimeError("gate broke")

    outcome = with_fallback(_gated(gate), QUERY, DOCUMENTS)
    assert _reasons(outcome) == [("skipped", "gate_failed"), ("ok", None)]


@pytest.mark.parametrize("verdict", [None, 1, 0, "", [], 1.0])
def test_a_gate_answering_neither_bool_nor_reason_skips_its_step(verdict: object) -> None:
    outcome = with_fallback(_gated(lambda check: verdict), QUERY, DOCUMENTS)
    assert _reasons(outcome) == [("skipped", "gate_failed"), ("ok", None)]


def test_an_async_gate_in_the_sync_chain_fails_its_step() -> None:
    async def gate(check: GateCheck) -> bool:
        return True

    outcome = with_fallback(_gated(gate), QUERY, DOCUMENTS)
    assert _reasons(outcome) == [("skipped", "gate_failed"), ("ok", None)]


def test_a_hanging_gate_is_bounded_by_the_chain_deadline(release: threading.Event) -> None:
    started = time.monotonic()
    outcome = with_fallback(_gated(lambda check: release.wait(5)), QUERY, DOCUMENTS, deadline=0.3)
    elapsed = time.monotonic() - started
    assert elapsed < 0.3 + 0.25
    assert _reasons(outcome) == [("skipped", "gate_timeout"), ("skipped", "deadline_exhausted")]
    assert outcome.status == "degraded"
    assert [r.index for r in outcome.results] == [0, 1, 2, 3]


def test_the_gate_sees_the_check_without_text(providers: Providers) -> None:
    seen: list[GateCheck] = []

    def gate(check: GateCheck) -> bool:
        seen.append(check)
        return True

    with_fallback(
        [providers.cohere("fail-503"), step(providers.jina(), gate=gate)],
        QUERY,
        DOCUMENTS,
        top_k=2,
        deadline=5.0,
    )
    (check,) = seen
    assert (check.provider, check.model, check.kind) == ("jina", "jina-reranker-v2", "provider")
    assert (check.document_count, check.top_k) == (4, 2)
    assert [(a.model, a.status) for a in check.attempts] == [("fail-503", "failed")]
    assert 0 < check.remaining < 5.0
    assert QUERY not in repr(check)


def test_a_gated_out_step_sends_nothing_and_bills_nothing(providers: Providers) -> None:
    sent = providers.sent()
    outcome = with_fallback(
        [step(providers.cohere(), gate=lambda check: "too_many_documents"), good],
        QUERY,
        DOCUMENTS,
    )
    assert providers.sent() == sent
    assert providers.events == []
    assert _reasons(outcome)[0] == ("skipped", "too_many_documents")
    skipped_line = price_outcome(PRICES, outcome)[0]
    assert skipped_line.status is CostStatus.NOT_BILLED
    assert skipped_line.code is CostCode.NOT_ATTEMPTED
    assert skipped_line.amount == 0


# --------------------------------------------------------------------------- async chains


async def test_async_gates_decide_in_the_async_chain() -> None:
    async def yes(check: GateCheck) -> bool:
        return True

    async def no(check: GateCheck) -> bool:
        return False

    async def reason(check: GateCheck) -> str:
        return "quiet_hours"

    async def broken(check: GateCheck) -> bool:
        raise RuntimeError("gate broke")

    async def nonsense(check: GateCheck) -> int:
        return 3

    outcome = await awith_fallback(
        [
            step(good, gate=no),
            step(good, gate=reason),
            step(good, gate=broken),
            step(good, gate=nonsense),
            step(good, gate=yes),
        ],
        QUERY,
        DOCUMENTS,
    )
    assert _reasons(outcome) == [
        ("skipped", "gate_declined"),
        ("skipped", "quiet_hours"),
        ("skipped", "gate_failed"),
        ("skipped", "gate_failed"),
        ("ok", None),
    ]
    assert outcome.answered_by == 4


async def test_a_sync_gate_in_the_async_chain() -> None:
    outcome = await awith_fallback(_gated(lambda check: False), QUERY, DOCUMENTS)
    assert _reasons(outcome) == [("skipped", "gate_declined"), ("ok", None)]


async def test_a_hanging_async_gate_is_bounded_by_the_deadline() -> None:
    async def gate(check: GateCheck) -> bool:
        await asyncio.sleep(5)
        return True

    started = time.monotonic()
    outcome = await awith_fallback(_gated(gate), QUERY, DOCUMENTS, deadline=0.3)
    assert time.monotonic() - started < 0.3 + 0.25
    assert _reasons(outcome) == [("skipped", "gate_timeout"), ("skipped", "deadline_exhausted")]


async def test_a_hanging_sync_gate_in_the_async_chain_is_bounded(release: threading.Event) -> None:
    started = time.monotonic()
    outcome = await awith_fallback(
        _gated(lambda check: release.wait(5)), QUERY, DOCUMENTS, deadline=0.3
    )
    assert time.monotonic() - started < 0.3 + 0.25
    assert _reasons(outcome)[0] == ("skipped", "gate_timeout")


async def test_an_async_gate_sees_its_check() -> None:
    seen: list[GateCheck] = []

    async def gate(check: GateCheck) -> bool:
        seen.append(check)
        return True

    await awith_fallback([CallableStep(good, name="first", gate=gate)], QUERY, DOCUMENTS, top_k=3)
    (check,) = seen
    assert (check.provider, check.model, check.kind) == ("local", "first", "callable")
    assert (check.document_count, check.top_k, check.attempts) == (4, 3, ())
