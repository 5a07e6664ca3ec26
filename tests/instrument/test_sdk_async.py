"""The async SDK clients, instrumented: concurrent calls keep their own events."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from functools import partial

import pytest

import spanledger
from spanledger import EmbeddingEvent, ErrorCategory, Recorder, RerankEvent
from spanledger.events import FailedEvent
from spanledger.testing import StandIn
from tests.instrument.conftest import OP_IDS, OPS, TEXTS, Op, Tape, aoutcome


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
async def test_concurrent_calls_each_get_their_own_event(op: Op, standin: StandIn) -> None:
    tape = Tape()
    client = spanledger.instrument(op.client(standin, is_async=True))
    batches = [
        [f"text {n} {word}" for word in ("alpha", "beta", "gamma")[: 1 + n % 3]] for n in range(10)
    ]

    with spanledger.use(Recorder([tape])), spanledger.request("turn-async"):
        results = await asyncio.gather(*(op.acall(client, "model-a", batch) for batch in batches))

    assert len(results) == 10
    assert len(tape.events) == 10
    assert len({event.call_id for event in tape.events}) == 10
    assert {event.request_id for event in tape.events} == {"turn-async"}
    by_payload = {}
    for event in tape.events:
        assert isinstance(event, EmbeddingEvent | RerankEvent)
        texts = event.inputs if isinstance(event, EmbeddingEvent) else event.documents
        assert texts is not None
        by_payload[tuple(texts)] = event
    for batch in batches:
        event = by_payload[tuple(batch)]
        assert event.usage is not None
        assert event.usage.model_dump() == op.expected_usage(batch)
    starts = [item.call_id for kind, item in tape.log if kind == "start"]
    assert sorted(starts) == sorted(event.call_id for event in tape.events)


@pytest.mark.parametrize("op", OPS, ids=OP_IDS)
async def test_async_callers_see_what_the_bare_client_gives(op: Op, standin: StandIn) -> None:
    tape = Tape()
    bare = op.client(standin, is_async=True)
    client = spanledger.instrument(op.client(standin, is_async=True))

    with spanledger.use(Recorder([tape])):
        for model in ("model-a", "usage-malformed", "fail-429"):
            expected = await aoutcome(partial(op.acall, bare, model, TEXTS), op.dump)
            seen = await aoutcome(partial(op.acall, client, model, TEXTS), op.dump)
            assert seen == expected

    ok, malformed, limited = tape.events
    assert isinstance(ok, EmbeddingEvent | RerankEvent)
    assert ok.usage is not None
    if isinstance(malformed, EmbeddingEvent | RerankEvent):
        assert malformed.usage is None
    assert isinstance(limited, FailedEvent)
    assert (limited.error_category, limited.retry_after) == (ErrorCategory.RATE_LIMIT, 2.0)
    assert limited.fingerprint is not None  # the async client read the error body


@pytest.mark.parametrize("op", [OPS[0], OPS[2]], ids=["openai-embed", "cohere-rerank"])
def test_a_sync_client_shared_by_threads_keeps_calls_apart(op: Op, standin: StandIn) -> None:
    tape = Tape()
    recorder = Recorder([tape])
    client = spanledger.instrument(op.client(standin))

    def one(n: int) -> None:
        with spanledger.use(recorder):
            op.call(client, "model-a", [f"thread {n}"] * (n + 1))

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(one, range(8)))

    assert len({event.call_id for event in tape.events}) == 8
    for event in tape.events:
        assert isinstance(event, EmbeddingEvent | RerankEvent)
        texts = event.inputs if isinstance(event, EmbeddingEvent) else event.documents
        assert texts is not None
        assert event.usage is not None
        assert event.usage.model_dump() == op.expected_usage(texts)
