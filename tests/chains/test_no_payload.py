"""No value from a step's answer reaches a detail, a span, the event log, Langfuse or a log:
a step that answers with a document's text where its index (or score) belongs is refused by
type and position only."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import spanledger
from spanledger import JsonlSink, Recorder
from spanledger.chains import (
    CallableStep,
    RerankOutcome,
    StepRanking,
    awith_fallback,
    with_fallback,
)
from spanledger.events import RerankResponse, ScoredDocument
from spanledger.exporters.langfuse import chain_metadata

from .conftest import DOCUMENTS, QUERY, SENTINEL, Otel, good

TEXT = DOCUMENTS[0]
"""A document's text, holding the sentinel, used as an index or a score by the steps below."""


def _sneaked(index: Any, score: Any) -> ScoredDocument:
    return ScoredDocument.model_construct(index=index, relevance_score=score)


def _answering(value: object) -> Any:
    def rank(query: str, documents: Sequence[str], top_k: int | None) -> Any:
        return value

    return rank


def _text_as_index() -> list[object]:
    """Steps answering with a document's text where its index or score belongs."""
    rest = [_sneaked(1, 0.5), _sneaked(2, 0.4), _sneaked(3, 0.3)]
    return [
        CallableStep(_answering([(TEXT, 0.9), (1, 0.5), (2, 0.4), (3, 0.3)]), name="pairs"),
        CallableStep(_answering([_sneaked(TEXT, 0.9), *rest]), name="results"),
        CallableStep(_answering(StepRanking([_sneaked(TEXT, 0.9), *rest])), name="ranking"),
        CallableStep(
            _answering(
                RerankResponse.model_construct(
                    results=[_sneaked(TEXT, 0.9), *rest], model="m", raw=None
                )
            ),
            name="response",
        ),
        CallableStep(_answering([_sneaked(0, TEXT), *rest]), name="score"),
        CallableStep(_answering([(0, TEXT), (1, 0.5), (2, 0.4), (3, 0.3)]), name="pair score"),
        good,
    ]


def _refused_by_type(outcome: RerankOutcome) -> None:
    *refused, kept = outcome.attempts
    assert [a.reason for a in refused] == ["invalid_results"] * 6
    assert kept.status == "ok"
    for attempt in refused:
        assert attempt.detail is not None
        assert "str" in attempt.detail, attempt.detail
        assert SENTINEL not in attempt.detail
    assert SENTINEL not in outcome.model_dump_json()
    assert SENTINEL not in repr(outcome)
    assert SENTINEL not in json.dumps(chain_metadata(outcome))


def _spans_text(otel: Otel) -> str:
    parts: list[str] = []
    for span in otel.spans():
        parts += [span.name, str(span.status.description)]
        parts += [f"{k}={v!r}" for k, v in (span.attributes or {}).items()]
        for event in span.events:
            parts += [event.name, *(f"{k}={v!r}" for k, v in (event.attributes or {}).items())]
    return "\n".join(parts)


def test_a_documents_text_as_an_index_appears_nowhere(
    otel: Otel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="spanledger")
    path = tmp_path / "events.jsonl"
    recorder = Recorder([otel.exporter, JsonlSink(path)])
    with spanledger.use(recorder), spanledger.request("turn-1") as turn:
        outcome = with_fallback(_text_as_index(), QUERY, DOCUMENTS)
        turn.report()
    recorder.shutdown()

    _refused_by_type(outcome)
    (chain,) = [span for span in otel.spans() if span.name == "rerank_chain"]
    details = [dict(e.attributes or {}).get("spanledger.attempt.detail") for e in chain.events]
    assert len([d for d in details if d]) == 6
    assert SENTINEL not in _spans_text(otel)
    assert SENTINEL not in path.read_text(encoding="utf-8")
    assert SENTINEL not in caplog.text


async def test_the_async_chain_quotes_no_answer_either() -> None:
    _refused_by_type(await awith_fallback(_text_as_index(), QUERY, DOCUMENTS))
