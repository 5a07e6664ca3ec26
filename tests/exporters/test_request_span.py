"""One trace per request: ``spanledger.request`` opens a ``request`` span when none is current,
the request's calls nest under it (across asyncio tasks, and threads given ``carry``), and its
attribution summary lands on it. Call spans carry the kinds and usage the backends key on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan

import spanledger
from spanledger import Recorder
from spanledger.events import CallStarted, Event
from spanledger.ledger import PriceTable
from spanledger.providers import CohereEmbeddings, CohereReranker, JinaReranker
from spanledger.testing import StandIn

from .conftest import LangfuseRig, OtelRig, all_text

SENTINEL = "SENTINEL-QUERY-TEXT-7f3a"
PRICES = PriceTable.from_dict(
    {
        "prices": [
            {"provider": "cohere", "model": "embed-v4.0", "input_per_mtok": "0.12"},
            {"provider": "cohere", "model": "rerank-v3.5", "per_search_unit": "0.002"},
        ]
    }
)


def _turn(standin: StandIn, rig: OtelRig, request_id: str = "turn-1") -> None:
    """Two embedding calls and a rerank inside one request, reported inside it."""
    recorder = Recorder([rig.exporter], prices=PRICES)
    url = standin.base_url("cohere")
    documents = [f"{SENTINEL} passage {n}" for n in range(3)]
    with (
        spanledger.use(recorder),
        spanledger.request(request_id) as turn,
        CohereEmbeddings("embed-v4.0", base_url=url, api_key="k") as embed,
        CohereReranker("rerank-v3.5", base_url=url, api_key="k") as rerank,
    ):
        embed.embed([SENTINEL])
        embed.embed(documents, input_type="document")
        ranked = rerank.rerank(SENTINEL, documents, top_k=2)
        served = turn.serve(ranked, documents, provider_id="kb")
        turn.render(served)
        turn.cite_from_text("see [1]", served)
        turn.report()


def _by_name(spans: list[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def _parent_of(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def test_a_request_is_one_trace_under_its_own_span(standin: StandIn, otel: OtelRig) -> None:
    _turn(standin, otel)

    spans = _by_name(otel.call_spans())
    [root] = spans["request"]
    calls = spans["embeddings embed-v4.0"] + spans["rerank rerank-v3.5"]
    assert len(calls) == 3
    assert root.parent is None
    assert {span.context.trace_id for span in calls} == {root.context.trace_id}
    assert {_parent_of(span) for span in calls} == {root.context.span_id}
    attributes: dict[str, Any] = dict(root.attributes or {})
    assert attributes["spanledger.request_id"] == "turn-1"
    assert attributes["openinference.span.kind"] == "CHAIN"
    assert attributes["spanledger.attribution.cited_token_share"] == pytest.approx(
        attributes["spanledger.attribution.cited_tokens"]
        / attributes["spanledger.attribution.rendered_tokens"]
    )
    assert attributes["spanledger.attribution.frames_served"] == 2
    assert attributes["spanledger.attribution.reconcilable"] is True
    assert attributes["spanledger.attribution.calls"] == 3
    assert attributes["spanledger.attribution.calls.priced"] == 3
    assert attributes["spanledger.attribution.spend.priced"] == pytest.approx(
        attributes["spanledger.attribution.spend"]
    )
    assert root.end_time is not None
    assert SENTINEL not in all_text(otel.call_spans())


def test_a_span_the_application_has_is_used_as_is(standin: StandIn, otel: OtelRig) -> None:
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("POST /search") as app_span:
        _turn(standin, otel)

    spans = _by_name(otel.spans())
    assert "request" not in spans
    calls = spans["embeddings embed-v4.0"] + spans["rerank rerank-v3.5"]
    assert {_parent_of(span) for span in calls} == {app_span.get_span_context().span_id}
    [finished] = spans["POST /search"]
    assert "spanledger.attribution.cited_token_share" in dict(finished.attributes or {})


def test_request_spans_can_be_turned_off(
    standin: StandIn, make_otel: Callable[..., OtelRig]
) -> None:
    rig = make_otel(request_spans=False)
    _turn(standin, rig)

    spans = rig.call_spans()
    assert "request" not in {span.name for span in spans}
    assert all(span.parent is None for span in spans)  # as before: each call its own trace


def test_a_report_made_after_the_scope_closed_leaves_the_ended_span_alone(
    standin: StandIn, otel: OtelRig
) -> None:
    recorder = Recorder([otel.exporter])
    with spanledger.use(recorder):
        with spanledger.request("late") as turn:
            pass
        turn.report()
    [root] = otel.call_spans()
    assert "spanledger.attribution.calls" not in dict(root.attributes or {})


def test_calls_in_threads_given_carry_stay_in_the_request(standin: StandIn, otel: OtelRig) -> None:
    recorder = Recorder([otel.exporter])
    url = standin.base_url("cohere")
    with (
        spanledger.use(recorder),
        CohereEmbeddings("embed-v4.0", base_url=url, api_key="k") as embed,
        ThreadPoolExecutor(2) as pool,
    ):
        with spanledger.request("threaded") as turn:
            carried = [pool.submit(spanledger.carry(embed.embed), [f"t{n}"]) for n in range(4)]
            for future in carried:
                future.result()
            pool.submit(embed.embed, ["not carried"]).result()
        spans = _by_name(otel.call_spans())

    [root] = spans["request"]
    calls = spans["embeddings embed-v4.0"]
    inside = [s for s in calls if _parent_of(s) == root.context.span_id]
    assert len(inside) == 4
    assert len(turn.events) == 4  # the uncarried thread saw no request: documented
    assert all(e.request_id == "threaded" for e in turn.events)


def test_calls_in_asyncio_tasks_stay_in_the_request(standin: StandIn, otel: OtelRig) -> None:
    recorder = Recorder([otel.exporter])

    async def turn() -> None:
        async with CohereEmbeddings(
            "embed-v4.0", base_url=standin.base_url("cohere"), api_key="k"
        ) as embed:
            with spanledger.request("async-turn"):
                await asyncio.gather(*(embed.aembed([f"a{n}"]) for n in range(3)))

    with spanledger.use(recorder):
        asyncio.run(turn())

    spans = _by_name(otel.call_spans())
    [root] = spans["request"]
    assert [_parent_of(s) for s in spans["embeddings embed-v4.0"]] == [root.context.span_id] * 3


def test_call_spans_carry_the_kinds_and_usage_backends_key_on(
    standin: StandIn, otel: OtelRig
) -> None:
    _turn(standin, otel)
    spans = _by_name(otel.call_spans())
    embedding = dict(spans["embeddings embed-v4.0"][0].attributes or {})
    rerank = dict(spans["rerank rerank-v3.5"][0].attributes or {})

    assert embedding["openinference.span.kind"] == "EMBEDDING"
    assert embedding["embedding.model_name"] == "embed-v4.0"
    assert embedding["langfuse.observation.type"] == "embedding"
    assert json.loads(str(embedding["langfuse.observation.usage_details"])) == {
        "input": embedding["gen_ai.usage.input_tokens"]
    }
    assert json.loads(str(embedding["langfuse.observation.cost_details"])) == {
        "total": embedding["gen_ai.usage.cost"]
    }
    assert rerank["openinference.span.kind"] == "RERANKER"
    assert rerank["reranker.model_name"] == "rerank-v3.5"
    assert rerank["reranker.top_k"] == 2
    assert rerank["langfuse.observation.type"] == "generation"
    assert json.loads(str(rerank["langfuse.observation.usage_details"])) == {
        "search_units": rerank["spanledger.usage.search_units"]
    }
    assert "gen_ai.rerank.candidate.count" not in rerank  # only under the opt-in


def test_unreported_usage_and_unpriced_cost_are_absent_for_langfuse_too(
    standin: StandIn, otel: OtelRig
) -> None:
    recorder = Recorder([otel.exporter], prices=PRICES)
    with (
        spanledger.use(recorder),
        JinaReranker("usage-missing", base_url=standin.base_url("jina"), api_key="k") as rerank,
    ):
        rerank.rerank("q", ["a", "b"])
    attributes = dict(otel.only_span().attributes or {})
    assert "langfuse.observation.usage_details" not in attributes
    assert "langfuse.observation.cost_details" not in attributes
    assert attributes["spanledger.cost.status"] == "unpriced"


def test_the_rerank_proposal_names_come_with_the_opt_in(
    standin: StandIn, make_otel: Callable[..., OtelRig]
) -> None:
    rig = make_otel(semconv_latest=True)
    _turn(standin, rig)
    rerank = dict(_by_name(rig.call_spans())["rerank rerank-v3.5"][0].attributes or {})
    assert rerank["gen_ai.rerank.candidate.count"] == 3
    assert rerank["gen_ai.rerank.top_n"] == 2


class _Broken:
    def emit(self, event: Event) -> None:
        pass

    def call_started(self, started: CallStarted) -> None:
        pass

    def request_started(self, request_id: str) -> object:
        raise RuntimeError("boom")

    def request_ended(self, handle: object) -> None:
        raise AssertionError("never opened, never ended")


def test_a_sink_failing_to_open_a_request_is_counted_and_the_request_goes_on(
    otel: OtelRig,
) -> None:
    recorder = Recorder([_Broken(), otel.exporter])
    with spanledger.use(recorder), spanledger.request("r"):
        assert trace.get_current_span().is_recording()  # the exporter's span opened anyway
    stats = recorder.stats["0:_Broken"]
    assert stats.failures_by_type == {"RuntimeError": 1}
    assert [span.name for span in otel.call_spans()] == ["request"]


def test_a_request_span_lists_a_bounded_number_of_problems() -> None:
    from datetime import UTC, datetime

    from spanledger.events import AttributionRecord
    from spanledger.exporters.otel import MAX_PROBLEMS_SHOWN, attribution_attributes

    record = AttributionRecord(
        request_id="r",
        at=datetime.now(UTC),
        frames_served=0,
        frames_rendered=0,
        frames_cited=40,
        rendered_tokens=0,
        cited_tokens=0,
        uncited_rendered_tokens=0,
        reconcilable=False,
        problems=[f"kb/{n} was cited but never served" for n in range(40)],
        calls=0,
        billed_input_tokens=0,
        billed_search_units=0,
        calls_without_usage=0,
        spend_complete=True,
    )
    attributes = attribution_attributes(record)
    assert len(attributes["spanledger.attribution.problems"]) == MAX_PROBLEMS_SHOWN
    assert attributes["spanledger.attribution.problem_count"] == 40
    assert attributes["spanledger.attribution.reconcilable"] is False


def test_langfuse_nests_the_request_and_shares_the_otel_trace(
    standin: StandIn, otel: OtelRig, langfuse_rig: LangfuseRig
) -> None:
    recorder = Recorder([otel.exporter, langfuse_rig.exporter], prices=PRICES)
    url = standin.base_url("cohere")
    documents = ["moon", "sea"]
    with (
        spanledger.use(recorder),
        spanledger.request("both") as turn,
        CohereReranker("rerank-v3.5", base_url=url, api_key="k") as rerank,
    ):
        served = turn.serve(rerank.rerank("q", documents), documents, provider_id="kb")
        turn.render(served)
        turn.cite_from_text("[1]", served)
        share = turn.report().record().cited_token_share

    [otel_request] = [s for s in otel.call_spans() if s.name == "request"]
    observations = {span.name: span for span in langfuse_rig.spans()}
    request, call = observations["request"], observations["rerank rerank-v3.5"]
    assert request.context is not None
    assert call.context is not None
    assert request.context.trace_id == otel_request.context.trace_id  # one id in both
    assert call.parent is not None
    assert call.parent.span_id == request.context.span_id
    metadata = dict(request.attributes or {})
    assert share is not None
    assert json.loads(str(metadata["langfuse.observation.metadata.cited_token_share"])) == share
    assert json.loads(str(metadata["langfuse.observation.metadata.request_id"])) == "both"
