"""A chain never raises: any unusable request is an ``invalid_request`` outcome that names the
problem (never the request's text) and calls nothing; a fuzz of arbitrary inputs to both chains
always returns an outcome whose results keep the contract."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spanledger.chains._contract import broken_rule
from spanledger.providers.fallback import (
    CancelToken,
    RerankOutcome,
    awith_fallback,
    with_fallback,
)
from spanledger.providers.steps import BM25Step, CallableStep, IdentityStep, step

from .conftest import DOCUMENTS, QUERY, SENTINEL, Providers, answering, good, returning

GOOD_CALL: dict[str, Any] = {"top_k": None, "deadline": 5.0}


def _refused(outcome: RerankOutcome, names: str) -> None:
    assert outcome.status == "invalid_request"
    assert outcome.reason is not None
    assert names in outcome.reason
    assert SENTINEL not in outcome.model_dump_json()
    assert outcome.attempts == []
    assert outcome.results == []


BAD_REQUESTS: list[tuple[str, dict[str, Any], str]] = [
    ("blank query", {"query": ""}, "query"),
    ("whitespace query", {"query": " \t\n "}, "query"),
    ("query not a str", {"query": 42}, "query"),
    ("query bytes", {"query": SENTINEL.encode()}, "query"),
    ("documents a str", {"documents": SENTINEL}, "documents must be a list"),
    ("documents a dict", {"documents": {"a": SENTINEL}}, "documents must be a list"),
    ("a document not a str", {"documents": [SENTINEL, 3, "x"]}, "document 1 is a int"),
    ("a None document", {"documents": [None]}, "document 0 is a NoneType"),
    ("top_k negative", {"top_k": -1}, "top_k"),
    ("top_k bool", {"top_k": True}, "top_k"),
    ("top_k float", {"top_k": 2.0}, "top_k"),
    ("top_k str", {"top_k": "3"}, "top_k"),
    ("deadline negative", {"deadline": -1}, "deadline"),
    ("deadline nan", {"deadline": math.nan}, "deadline"),
    ("deadline inf", {"deadline": math.inf}, "deadline"),
    ("deadline str", {"deadline": "5"}, "deadline"),
    ("deadline None", {"deadline": None}, "deadline"),
    ("step_timeout 0", {"step_timeout": 0}, "step_timeout"),
    ("step_timeout negative", {"step_timeout": -0.5}, "step_timeout"),
    ("step_timeout bool", {"step_timeout": True}, "step_timeout"),
    ("breakers not Breakers", {"breakers": {"cohere": 1}}, "breakers must be a Breakers"),
    ("on_attempt not callable", {"on_attempt": 3}, "on_attempt must be callable"),
    ("steps not a list", {"steps": good}, "steps must be a list"),
    ("steps a str", {"steps": SENTINEL}, "steps must be a list"),
    ("a step that is not a step", {"steps": [good, 7]}, "step 1 is a int"),
    ("a step that is a str", {"steps": [SENTINEL]}, "step 0 is a str"),
    ("a step's timeout 0", {"steps": [step(good, timeout=0)]}, "step 0 timeout"),
    ("a step's timeout a str", {"steps": [step(good, timeout="1")]}, "step 0 timeout"),  # type: ignore[arg-type]
    ("a step's timeout nan", {"steps": [good, step(good, timeout=math.nan)]}, "step 1 timeout"),
]


def _call(overrides: dict[str, Any], providers: Providers) -> dict[str, Any]:
    call: dict[str, Any] = {
        "steps": [providers.cohere(), good],
        "query": QUERY,
        "documents": DOCUMENTS,
        **GOOD_CALL,
    }
    call.update(overrides)
    return call


@pytest.mark.parametrize(
    ("overrides", "names"), [c[1:] for c in BAD_REQUESTS], ids=[c[0] for c in BAD_REQUESTS]
)
def test_a_bad_request_is_refused_naming_the_problem(
    overrides: dict[str, Any], names: str, providers: Providers
) -> None:
    call = _call(overrides, providers)
    sent = providers.sent()
    steps, query, documents = call.pop("steps"), call.pop("query"), call.pop("documents")
    _refused(with_fallback(steps, query, documents, **call), names)
    _refused(asyncio.run(awith_fallback(steps, query, documents, **call)), names)
    assert providers.sent() == sent
    assert providers.events == []


def test_a_cancel_that_is_no_flag_is_refused(providers: Providers) -> None:
    """Regression: a cancel without ``is_set`` failed the chain inside, running no step."""
    _refused(with_fallback([good], QUERY, DOCUMENTS, cancel="stop"), "cancel must be")  # type: ignore[arg-type]
    _refused(with_fallback([good], QUERY, DOCUMENTS, cancel=5), "cancel must be")  # type: ignore[arg-type]


async def test_the_async_chain_refuses_a_threading_event_as_cancel() -> None:
    """Regression: a ``threading.Event`` (which cannot wake the loop) failed the chain inside."""
    outcome = await awith_fallback(
        [good],
        QUERY,
        DOCUMENTS,
        cancel=threading.Event(),  # type: ignore[arg-type]
    )
    _refused(outcome, "cancel must be a CancelToken")


def test_a_steps_bad_timeout_starts_nothing() -> None:
    """Regression: a step timeout of 0 started the step then called it a timeout at once; a
    string one failed the whole chain inside."""
    ran: list[int] = []

    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        ran.append(1)
        return good(query, documents, top_k)

    for timeout in (0, -1, "1"):
        made = CallableStep(rank, timeout=timeout)  # type: ignore[arg-type]
        _refused(with_fallback([made], QUERY, DOCUMENTS), "step 0 timeout")
    assert ran == []


def test_no_documents_or_top_k_zero_is_skipped() -> None:
    for documents, top_k in (([], None), ([], 3), (DOCUMENTS, 0)):
        outcome = with_fallback([good], QUERY, documents, top_k=top_k)
        assert outcome.status == "skipped"
        assert outcome.attempts == []
        assert outcome.results == []
        assert asyncio.run(awith_fallback([good], QUERY, documents, top_k=top_k)).status == (
            "skipped"
        )


def test_documents_may_be_any_sequence_of_strings() -> None:
    outcome = with_fallback([good], QUERY, tuple(DOCUMENTS), top_k=2)
    assert outcome.status == "ok"
    assert [r.index for r in outcome.results] == [3, 2]


# --------------------------------------------------------------------------- the fuzz


def _raising(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    raise RuntimeError(SENTINEL)


def _base_exception(query: str, documents: Sequence[str], top_k: int | None) -> Any:
    raise GeneratorExit  # not an Exception: the chain must still not raise it


STEPS = st.sampled_from(
    [
        good,
        _raising,
        returning(None),
        returning({"a": 1}),
        returning(SENTINEL),
        answering((0, 1.0)),
        answering((0, 1.0), (0, 0.5)),
        answering((0, math.nan)),
        answering((5, 1.0)),
        IdentityStep(),
        BM25Step(),
        step(good, gate=lambda check: False),
        step(good, gate=lambda check: 1 / 0),
        step(good, gate=lambda check: "no"),
        7,
        None,
        "text",
        int,
    ]
)
ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.text(max_size=5), max_size=3),
)
QUERIES = st.one_of(st.text(max_size=20), ANYTHING)
DOCS = st.one_of(
    st.lists(st.text(max_size=15), max_size=8),
    st.lists(st.one_of(st.text(max_size=5), st.integers(), st.none()), max_size=4),
    ANYTHING,
)
TOP_KS = st.one_of(st.none(), st.integers(-2, 10), ANYTHING)
SECONDS = st.one_of(st.none(), st.floats(0, 2), ANYTHING)


def _keeps_the_contract(outcome: object, documents: object, top_k: object) -> None:
    assert isinstance(outcome, RerankOutcome)
    if outcome.status in ("invalid_request", "skipped"):
        assert outcome.results == []
        return
    assert isinstance(documents, Sequence)
    assert top_k is None or isinstance(top_k, int)
    assert broken_rule(outcome.results, len(documents), top_k) is None
    if outcome.answered_by is not None:
        assert outcome.attempts[outcome.answered_by].status == "ok"


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(
    steps=st.one_of(st.lists(STEPS, max_size=4), ANYTHING),
    query=QUERIES,
    documents=DOCS,
    top_k=TOP_KS,
    deadline=st.one_of(st.floats(0, 2), ANYTHING),
    step_timeout=SECONDS,
    cancelled=st.booleans(),
)
def test_the_sync_chain_never_raises(
    steps: Any,
    query: Any,
    documents: Any,
    top_k: Any,
    deadline: Any,
    step_timeout: Any,
    cancelled: bool,
) -> None:
    token = CancelToken()
    if cancelled:
        token.cancel()
    outcome = with_fallback(
        steps,
        query,
        documents,
        top_k=top_k,
        deadline=deadline,
        step_timeout=step_timeout,
        cancel=token,
    )
    _keeps_the_contract(outcome, documents, top_k)


@FUZZ
@given(
    steps=st.one_of(st.lists(STEPS, max_size=4), ANYTHING),
    query=QUERIES,
    documents=DOCS,
    top_k=TOP_KS,
    deadline=st.one_of(st.floats(0, 2), ANYTHING),
    step_timeout=SECONDS,
)
def test_the_async_chain_never_raises(
    steps: Any, query: Any, documents: Any, top_k: Any, deadline: Any, step_timeout: Any
) -> None:
    outcome = asyncio.run(
        awith_fallback(
            steps, query, documents, top_k=top_k, deadline=deadline, step_timeout=step_timeout
        )
    )
    _keeps_the_contract(outcome, documents, top_k)


def test_a_step_raising_a_base_exception_does_not_end_the_sync_chain() -> None:
    outcome = with_fallback([_base_exception, good], QUERY, DOCUMENTS)
    assert outcome.status == "degraded"
    assert outcome.answered_by == 1
    assert outcome.attempts[0].status == "aborted"


@pytest.mark.parametrize("far", [1e10, 1e300, float(2**63)])
def test_a_far_deadline_is_waited_for(far: float) -> None:
    """Regression: a deadline past the platform's longest lock wait made the sync chain fail
    inside (``OverflowError``) and return the input order without an answer."""

    def slow(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        threading.Event().wait(0.05)
        return good(query, documents, top_k)

    for cancel in (None, CancelToken(), threading.Event()):
        outcome = with_fallback([slow], QUERY, DOCUMENTS, deadline=far, cancel=cancel)
        assert outcome.status == "ok"
        assert [a.status for a in outcome.attempts] == ["ok"]
    gated = with_fallback([step(slow, gate=lambda check: True)], QUERY, DOCUMENTS, deadline=far)
    assert gated.status == "ok"
    assert asyncio.run(awith_fallback([slow], QUERY, DOCUMENTS, deadline=far)).status == "ok"
