"""Events carry what their endpoint bills by (``billing``), set by the recording core from the
call's facts, written to the log only when set, and read back from logs written before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import spanledger
from spanledger.errors import ErrorCategory, ProviderError
from spanledger.eventlog import event_line, read_events
from spanledger.events import (
    EmbeddingEvent,
    EmbeddingFailedEvent,
    EmbeddingUsage,
    Event,
    RerankEvent,
    RerankFailedEvent,
)
from spanledger.recording import EmbedFacts, Figures, Recording, RerankFacts
from tests.ledger.conftest import (
    ListSink,
    embedding_event,
    embedding_failed_event,
    rerank_event,
    rerank_failed_event,
)

TIMED_OUT = ProviderError(ErrorCategory.UNAVAILABLE, error_type="ReadTimeout")
LIMITED = ProviderError(ErrorCategory.RATE_LIMIT, status_code=429, error_type="http_429")


def embed_facts(billing: str | None) -> EmbedFacts:
    return EmbedFacts(provider="ollama", model="m", input_count=1, inputs=["x"], billing=billing)


def rerank_facts(billing: str | None) -> RerankFacts:
    return RerankFacts(
        provider="aws.bedrock",
        model="amazon.rerank-v1:0",
        query_length=1,
        document_count=2,
        query="q",
        documents=["a", "b"],
        billing=billing,
    )


def recorded(facts: EmbedFacts | RerankFacts, outcome: str) -> Event:
    sink = ListSink()
    recording = Recording(spanledger.Recorder([sink]), facts)
    if outcome == "succeeded":
        recording.succeeded(Figures(result_count=0))
    else:
        recording.failed(TIMED_OUT if outcome == "abandoned" else LIMITED)
    [event] = sink.events
    return event


@pytest.mark.parametrize("billing", ["tokens", "search_units", "queries", "local"])
@pytest.mark.parametrize("outcome", ["succeeded", "abandoned", "refused"])
def test_the_recording_core_puts_the_facts_billing_on_every_event(
    billing: str, outcome: str
) -> None:
    for facts in (embed_facts(billing), rerank_facts(billing)):
        event = recorded(facts, outcome)
        assert event.billing == billing
        assert json.loads(event_line(event))["billing"] == billing


def test_an_undeclared_endpoint_records_no_billing_and_writes_none() -> None:
    for facts in (embed_facts(None), rerank_facts(None)):
        for outcome in ("succeeded", "abandoned"):
            event = recorded(facts, outcome)
            assert event.billing is None
            assert "billing" not in json.loads(event_line(event))


class Unreadable:
    """Figures whose reading fails: the event cannot be built."""

    @property
    def usage(self) -> EmbeddingUsage:
        raise RuntimeError("unreadable")


def test_an_event_that_could_not_be_built_still_keeps_its_billing() -> None:
    sink = ListSink()
    recording = Recording(spanledger.Recorder([sink]), embed_facts("local"))
    recording.succeeded(Unreadable())  # type: ignore[arg-type]
    [event] = sink.events
    assert isinstance(event, EmbeddingFailedEvent)
    assert event.error_type == "unrecordable_outcome"
    assert event.billing == "local"


@pytest.mark.parametrize(
    "event",
    [
        embedding_event(billing="local"),
        embedding_failed_event(billing="tokens"),
        rerank_event(billing="queries", document_count=250),
        rerank_failed_event(billing="search_units"),
    ],
    ids=["embedding", "embedding_failed", "rerank", "rerank_failed"],
)
def test_billing_round_trips_through_the_log(event: Event, tmp_path: Path) -> None:
    log = tmp_path / "events.jsonl"
    log.write_bytes(event_line(event))
    [back] = read_events(log)
    assert back == event
    assert back.billing == event.billing


def test_a_log_written_before_billing_was_recorded_reads_back(tmp_path: Path) -> None:
    old: list[Event] = [
        embedding_event(),
        embedding_failed_event(),
        rerank_event(),
        rerank_failed_event(),
    ]
    lines = []
    for event in old:
        data = json.loads(event_line(event))
        assert "billing" not in data  # exactly what an older spanledger wrote
        lines.append(json.dumps(data) + "\n")
    log = tmp_path / "old.jsonl"
    log.write_text("".join(lines))
    back = read_events(log)
    assert [type(e) for e in back] == [
        EmbeddingEvent,
        EmbeddingFailedEvent,
        RerankEvent,
        RerankFailedEvent,
    ]
    assert [e.billing for e in back] == [None] * 4
    assert list(back) == old
