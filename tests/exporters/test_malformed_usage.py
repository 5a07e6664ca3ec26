"""Garbage from a provider is told apart from a figure it never sent: the figure rule still
leaves it unreported, but the event names it, the cost line says ``usage_malformed``, spans and
observations carry the figure's name (never its value), and a counter counts it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics.export import Sum

from spanledger import EmbeddingEvent, JsonlSink, Recorder, RerankEvent, read_events
from spanledger.costs import CostCode, CostStatus
from spanledger.ledger import Ledger, PriceTable
from spanledger.providers import CohereReranker, OpenAIEmbeddings
from spanledger.testing import StandIn

from .conftest import LangfuseRig, OtelRig, rerank_event

GARBAGE = "abc"  # what the stand-in sends as the figure for the model "usage-malformed"
PRICES = PriceTable.from_dict(
    {
        "prices": [
            {"provider": "openai", "model": "usage-*", "input_per_mtok": "0.02"},
            {"provider": "cohere", "model": "*", "per_search_unit": "0.002"},
        ]
    }
)


def _embed(standin: StandIn, model: str, recorder: Recorder) -> None:
    with OpenAIEmbeddings(model, base_url=standin.base_url("openai"), recorder=recorder) as embed:
        embed.embed(["hello"])


def test_a_malformed_figure_is_named_on_the_event_and_priced_as_malformed(
    standin: StandIn,
) -> None:
    events: list[object] = []
    recorder = Recorder([events.append], prices=PRICES)
    _embed(standin, "usage-malformed", recorder)
    _embed(standin, "usage-missing", recorder)

    malformed, missing = events
    assert isinstance(malformed, EmbeddingEvent)
    assert isinstance(missing, EmbeddingEvent)
    assert (malformed.usage, malformed.malformed_usage) == (None, ("input_tokens",))
    assert (missing.usage, missing.malformed_usage) == (None, ())
    assert malformed.cost is not None
    assert missing.cost is not None
    assert (malformed.cost.status, malformed.cost.code) == (
        CostStatus.UNMETERED,
        CostCode.USAGE_MALFORMED,
    )
    assert missing.cost.code is CostCode.USAGE_NOT_REPORTED


def test_rerank_names_each_bad_figure_and_prices_the_sound_one(standin: StandIn) -> None:
    events: list[object] = []
    recorder = Recorder([events.append], prices=PRICES)
    with CohereReranker(
        "usage-malformed", base_url=standin.base_url("cohere"), recorder=recorder
    ) as rerank:
        rerank.rerank("q", ["a", "b"])

    [event] = events
    assert isinstance(event, RerankEvent)
    assert event.usage is None
    assert event.malformed_usage == ("search_units",)
    assert event.cost is not None
    assert event.cost.code is CostCode.USAGE_MALFORMED
    assert f"'{GARBAGE}'" not in repr(event)
    assert GARBAGE not in (event.cost.reason or "")


def test_the_log_writes_the_names_only_when_there_are_some(
    standin: StandIn, tmp_path: Path
) -> None:
    log = tmp_path / "events.jsonl"
    with Recorder([JsonlSink(log)]) as recorder:
        _embed(standin, "usage-malformed", recorder)
        _embed(standin, "text-embedding-3-small", recorder)

    text = log.read_text()
    assert f'"{GARBAGE}"' not in text  # the name of the figure, never its value
    bad, good = (json.loads(line) for line in text.splitlines())
    assert bad["malformed_usage"] == ["input_tokens"]
    assert "malformed_usage" not in good  # no new bytes on the lines of sound calls
    read = read_events(log)
    assert read.problems == []
    assert [getattr(e, "malformed_usage", None) for e in read.events] == [("input_tokens",), ()]


def test_the_span_names_the_figure_and_a_counter_counts_it(otel: OtelRig) -> None:
    line = Ledger(PRICES).price(
        rerank_event(
            model="rerank-v3.5", provider="cohere", usage=None, malformed_usage=["search_units"]
        )
    )
    event = rerank_event(
        model="rerank-v3.5",
        provider="cohere",
        usage=None,
        malformed_usage=["search_units"],
        cost=line,
    )
    otel.recorder.emit(event)
    otel.recorder.emit(rerank_event(model="rerank-v3.5", provider="cohere"))

    spans = otel.call_spans()
    assert spans[0].attributes is not None
    assert spans[1].attributes is not None
    assert list(spans[0].attributes["spanledger.usage.malformed"]) == ["search_units"]  # type: ignore[arg-type]
    assert spans[0].attributes["spanledger.cost.reason"] == "usage_malformed"
    assert "spanledger.usage.malformed" not in spans[1].attributes
    counter = otel.metrics()["spanledger.usage.malformed"]
    assert isinstance(counter.data, Sum)
    assert counter.data.is_monotonic
    [point] = counter.data.data_points
    assert point.value == 1
    assert dict(point.attributes or {}) == {
        "gen_ai.provider.name": "cohere",
        "gen_ai.request.model": "rerank-v3.5",
        "spanledger.usage.figure": "search_units",
    }
    unpriced = otel.metrics()["spanledger.cost.unpriced"]
    assert isinstance(unpriced.data, Sum)
    assert [
        dict(p.attributes or {})["spanledger.cost.reason"] for p in unpriced.data.data_points
    ] == ["usage_malformed"]


def test_the_langfuse_observation_names_the_figure(langfuse_rig: LangfuseRig) -> None:
    langfuse_rig.recorder.emit(rerank_event(usage=None, malformed_usage=["search_units"]))
    attributes = langfuse_rig.only_span().attributes or {}
    assert json.loads(str(attributes["langfuse.observation.metadata.malformed_usage"])) == [
        "search_units"
    ]
    assert "langfuse.observation.usage_details" not in attributes


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        ({"input_tokens": "12"}, ("input_tokens",)),
        ({"input_tokens": -1, "search_units": 2}, ("input_tokens",)),
        ({"input_tokens": 3, "search_units": 1.0}, ("search_units",)),
        ({"input_tokens": None}, ()),
        ({}, ()),
    ],
)
def test_a_caller_given_usage_is_judged_the_same_way(
    usage: dict[str, object], expected: tuple[str, ...]
) -> None:
    import spanledger

    events: list[object] = []
    with (
        spanledger.use(Recorder([events.append])),
        spanledger.record_rerank(
            provider="cohere", model="rerank-v3.5", query="q", documents=["d"]
        ) as call,
    ):
        call.succeeded(result_count=1, usage=usage)
    [event] = events
    assert isinstance(event, RerankEvent)
    assert event.malformed_usage == expected
