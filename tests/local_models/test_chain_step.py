"""A real cross-encoder as a rerank chain step: its attempt is named as its recorded call is,
the call is one event with the tokenizer's count, and the attempt is local (never unpriced)."""

from __future__ import annotations

from typing import Any

import spanledger
from spanledger.costs import CostCode, CostStatus
from spanledger.events import RerankEvent
from spanledger.ledger import PriceTable, example_prices_path, price_outcome
from spanledger.providers.fallback import with_fallback

from .conftest import Tape

DOCUMENTS = ["the moon pulls the tides", "clocks tick in the hall", "salt in the sea"]


def test_an_instrumented_cross_encoder_step_is_one_event_named_as_its_attempt(
    cross_encoder: Any, tape: Tape
) -> None:
    spanledger.instrument(cross_encoder)
    try:
        with spanledger.use(spanledger.Recorder([tape])):
            outcome = with_fallback([cross_encoder], "what moves the tides", DOCUMENTS, top_k=2)
    finally:
        spanledger.uninstrument(cross_encoder)
    assert outcome.status == "ok"
    (attempt,) = outcome.attempts
    (event,) = tape.events
    assert isinstance(event, RerankEvent)
    assert (attempt.kind, attempt.provider, attempt.model) == (
        "cross_encoder",
        event.provider,
        event.model,
    )
    assert event.usage is not None
    assert event.usage.input_tokens is not None
    assert event.usage_source == "tokenizer"
    (line,) = price_outcome(PriceTable.load(example_prices_path()), outcome)
    assert (line.status, line.code) == (CostStatus.NOT_BILLED, CostCode.LOCAL_MODEL)
