"""A recorder with prices puts a cost line on every event as it is emitted: sinks, request
scopes and the JSONL log see it; a ledger that raises never fails the call."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from structlog.testing import capture_logs

import spanledger
from spanledger import JsonlSink, Recorder, RerankUsage, read_events, use
from spanledger.costs import CostLine, CostStatus
from spanledger.errors import ProviderError
from spanledger.events import EmbeddingEvent, Event, RerankEvent
from spanledger.ledger import Ledger, PriceTable, Pricing
from spanledger.providers import CohereReranker, JinaReranker, OpenAIEmbeddings
from spanledger.testing import StandIn

from .conftest import (
    ListSink,
    embedding_event,
    embedding_failed_event,
    entry,
    rerank_event,
    rerank_failed_event,
    table,
)

TOML = """
currency = "USD"

[[prices]]
provider = "openai"
model = "text-embedding-3-small"
input_per_mtok = "0.0000001234567"

[[prices]]
provider = "cohere"
model = "rerank-*"
per_search_unit = "0.002"
"""


def _prices() -> PriceTable:
    return table(
        entry("openai", "text-embedding-3-small", input_per_mtok="0.0000001234567"),
        entry("cohere", "rerank-*", per_search_unit="0.002"),
    )


class BrokenLedger:
    """A pricer that always raises."""

    def __init__(self) -> None:
        self.calls = 0

    def price(self, event: Event) -> CostLine:
        self.calls += 1
        raise RuntimeError("the ledger broke")


def _embed_once(standin: StandIn, recorder: Recorder, texts: list[str]) -> None:
    with OpenAIEmbeddings(
        "text-embedding-3-small", base_url=standin.base_url("openai"), recorder=recorder
    ) as embedder:
        embedder.embed(texts)


@pytest.mark.parametrize("kind", ["table", "str-path", "path", "ledger"])
def test_every_form_of_prices_prices_events(tmp_path: Path, standin: StandIn, kind: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(TOML, encoding="utf-8")
    choices: dict[str, PriceTable | str | Path | Ledger] = {
        "table": _prices(),
        "str-path": str(path),
        "path": path,
        "ledger": Ledger(_prices()),
    }
    prices = choices[kind]
    sink = ListSink()
    recorder = Recorder([sink], prices=prices)
    _embed_once(standin, recorder, ["hello world"])  # the stand-in bills 3 tokens
    (event,) = sink.events
    assert isinstance(event, EmbeddingEvent)
    assert event.usage is not None
    assert event.usage.input_tokens == 3
    assert event.cost is not None
    assert event.cost.status is CostStatus.PRICED
    assert event.cost.amount == Decimal("0.0000000000003703701")


def test_recorder_without_prices_leaves_cost_empty(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink])
    _embed_once(standin, recorder, ["hi"])
    (event,) = sink.events
    assert event.cost is None
    assert recorder.ledger is None


def test_every_sink_sees_the_same_priced_event(standin: StandIn) -> None:
    first, second = ListSink(), ListSink()
    recorder = Recorder([first, second], prices=_prices())
    with CohereReranker(
        "rerank-v3.5", base_url=standin.base_url("cohere"), recorder=recorder
    ) as reranker:
        reranker.rerank("q", ["a", "b", "c"])
    (one,) = first.events
    (two,) = second.events
    assert one is two
    assert one.cost is not None
    assert one.cost.amount == Decimal("0.002")


def test_failures_and_unpriced_calls_are_priced_too(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=_prices())
    with (
        OpenAIEmbeddings("fail-503", base_url=standin.base_url("openai"), recorder=recorder) as bad,
        pytest.raises(ProviderError),
    ):
        bad.embed(["x"])
    with JinaReranker("jina-unlisted", base_url=standin.base_url("jina"), recorder=recorder) as j:
        j.rerank("q", ["a"])
    failed, unlisted = sink.events
    assert failed.cost is not None
    assert failed.cost.status is CostStatus.NOT_BILLED
    assert failed.cost.amount == 0
    assert unlisted.cost is not None
    assert unlisted.cost.status is CostStatus.UNPRICED
    assert unlisted.cost.amount is None


def test_request_scope_events_carry_their_cost(standin: StandIn) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=_prices())
    with use(recorder), spanledger.request("req-42") as scope:
        with OpenAIEmbeddings(
            "text-embedding-3-small", base_url=standin.base_url("openai")
        ) as embedder:
            embedder.embed(["hello world", "hello world"])
        with CohereReranker("rerank-v3.5", base_url=standin.base_url("cohere")) as reranker:
            reranker.rerank("q", [f"d{n}" for n in range(101)])
    embedded, reranked = scope.events
    assert embedded.request_id == reranked.request_id == "req-42"
    assert embedded.cost is not None
    assert embedded.cost.amount == Decimal("0.0000000000007407402")
    assert reranked.cost is not None
    assert reranked.cost.amount == Decimal("0.004")  # 101 documents: two search units
    assert sink.events == scope.events


def test_jsonl_log_keeps_cost_lines_with_exact_decimals(tmp_path: Path, standin: StandIn) -> None:
    log = tmp_path / "events.jsonl"
    jsonl = JsonlSink(log)
    recorder = Recorder([jsonl], prices=_prices())
    _embed_once(standin, recorder, ["hello world"])
    built: list[Event] = [
        embedding_event("text-embedding-3-small", tokens=7),
        embedding_event("no-entry", tokens=7),
        rerank_event("rerank-v3.5", usage=RerankUsage(search_units=3)),
        rerank_failed_event("rerank-v3.5", estimated=RerankUsage(search_units=2)),
        embedding_failed_event("text-embedding-3-small"),
    ]
    for event in built:
        recorder.emit(event)
    recorder.shutdown()

    read = read_events(log)
    assert read.problems == []
    assert len(read.events) == 6
    costs = [event.cost for event in read.events]
    assert all(cost is not None for cost in costs)
    first, seven, unknown, units, estimated, failed = (cost for cost in costs if cost is not None)
    assert first.amount == Decimal("0.0000000000003703701")
    assert seven.amount == Decimal("0.0000000000008641969")
    assert type(seven.amount) is Decimal
    assert seven.dimensions == {"input_tokens": Decimal("0.0000000000008641969")}
    assert unknown.status is CostStatus.UNPRICED
    assert unknown.amount is None
    assert units.amount == Decimal("0.006")
    assert estimated.status is CostStatus.ESTIMATED
    assert estimated.amount == Decimal("0.004")
    assert failed.status is CostStatus.NOT_BILLED
    assert failed.amount == Decimal(0)
    # the round trip is lossless: what was emitted is what is read back
    ledger = Ledger(_prices(), warn=False)
    for original, again in zip(built, read.events[1:], strict=True):
        assert again.cost == ledger.price(original)


def test_a_ledger_that_raises_never_fails_the_call(standin: StandIn) -> None:
    sink = ListSink()
    broken = BrokenLedger()
    recorder = Recorder([sink], prices=broken)
    with capture_logs() as logs:
        for _ in range(2):
            with CohereReranker(
                "rerank-v3.5", base_url=standin.base_url("cohere"), recorder=recorder
            ) as reranker:
                answer = reranker.rerank("q", ["a", "b"])
            assert len(answer.results) == 2
    assert broken.calls == 2
    assert recorder.pricing_failures == 2
    assert len(sink.events) == 2
    assert all(isinstance(event, RerankEvent) for event in sink.events)
    assert all(event.cost is None for event in sink.events)
    assert recorder.stats["0:ListSink"].delivered == 2
    warnings = [log for log in logs if log.get("event") == "processor_failed"]
    assert warnings == [
        {
            "event": "processor_failed",
            "processor": "0:Pricing",
            "error_type": "RuntimeError",
            "log_level": "warning",
        }
    ]
    assert recorder.processor_stats["0:Pricing"].failures_by_type == {"RuntimeError": 2}


def test_a_ledger_that_raises_on_a_failed_call_keeps_the_original_error(
    standin: StandIn,
) -> None:
    sink = ListSink()
    recorder = Recorder([sink], prices=BrokenLedger())
    with (
        CohereReranker("fail-429", base_url=standin.base_url("cohere"), recorder=recorder) as r,
        pytest.raises(ProviderError) as caught,
    ):
        r.rerank("q", ["a"])
    assert caught.value.status_code == 429
    assert recorder.pricing_failures == 1
    (event,) = sink.events
    assert event.cost is None


def test_an_event_that_already_has_a_cost_is_not_repriced() -> None:
    sink = ListSink()
    broken = BrokenLedger()
    recorder = Recorder([sink], prices=broken)
    line = CostLine(status=CostStatus.PRICED, amount=Decimal("1.5"), currency="USD")
    recorder.emit(embedding_event(cost=line))
    (event,) = sink.events
    assert event.cost == line
    assert broken.calls == 0
    assert recorder.pricing_failures == 0


def test_bad_price_table_path_is_refused_when_the_recorder_is_built(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[prices]]\nprovider = "p"\nmodel = "m"\ninput_per_mtok = "-1"\n')
    with pytest.raises(spanledger.ledger.PriceTableError, match="input_per_mtok"):
        Recorder([], prices=path)


class SeesCost:
    """A processor that remembers the cost line each event had when it reached it."""

    def __init__(self) -> None:
        self.costs: list[CostLine | None] = []

    def process(self, event: Event) -> Event:
        self.costs.append(event.cost)
        return event


def test_prices_puts_pricing_before_the_other_processors() -> None:
    sees = SeesCost()
    recorder = Recorder([], processors=[sees], prices=_prices())
    pricing, after = recorder.processors
    assert isinstance(pricing, Pricing)
    assert after is sees
    assert recorder.ledger is pricing.pricer
    recorder.emit(embedding_event())
    (cost,) = sees.costs
    assert cost is not None
    assert cost.status is CostStatus.PRICED


def test_pricing_given_as_a_processor_prices_and_counts_its_failures() -> None:
    sink = ListSink()
    sees = SeesCost()
    recorder = Recorder([sink], processors=[sees, Pricing(BrokenLedger())])
    recorder.emit(embedding_event())
    assert sees.costs == [None]
    assert recorder.pricing_failures == 1
    assert isinstance(recorder.ledger, BrokenLedger)
    (event,) = sink.events
    assert event.cost is None


def test_pricing_keeps_a_cost_the_event_already_has() -> None:
    line = CostLine(status=CostStatus.PRICED, amount=Decimal("2"), currency="EUR")
    event = embedding_event(cost=line)
    assert Pricing(_prices()).process(event) is event
