"""The request scope joins frames to the request's calls: serve, render, cite, report.

Provider calls go to the loopback stand-in (127.0.0.1) through a recorder that prices every
event from the example price table, so the report's bill is the one the calls produced.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest

import spanledger
from spanledger import EmbeddingEvent, Recorder, RerankEvent, RerankFailedEvent
from spanledger.attribution import (
    FrameId,
    FrameLike,
    ProblemKind,
    RequestReport,
    RequestScope,
    ServedFrame,
)
from spanledger.costs import CostStatus
from spanledger.events import AttributionRecord, Event
from spanledger.ledger import Ledger, example_prices_path
from spanledger.providers.fallback import awith_fallback, with_fallback

from .conftest import (
    PASSAGES,
    QUESTION,
    SENTINEL,
    Providers,
    accounting_tokens,
    digest_of,
)

UNPRICED_MODEL = "rerank-english-v2.0"  # the stand-in answers it; the example table has no entry


@pytest.fixture
def priced() -> Recorder:
    return Recorder(prices=example_prices_path())


def problem_kinds(report: RequestReport) -> list[ProblemKind]:
    return [problem.kind for problem in report.attribution.problems()]


def expected_frames(
    provider_id: str, indexes: list[int], ids: list[str] | None = None
) -> list[ServedFrame]:
    return [
        ServedFrame(
            FrameId(provider_id, ids[i] if ids else str(i), digest_of(PASSAGES[i])),
            accounting_tokens(PASSAGES[i]),
        )
        for i in indexes
    ]


# --------------------------------------------------------------------------- serving


def test_serving_a_rerank_response_keeps_rank_order_and_takes_content_from_documents(
    priced: Recorder, providers: Providers
) -> None:
    with spanledger.use(priced), spanledger.request("turn-42") as req:
        response = providers.reranker().rerank(QUESTION, PASSAGES, top_k=3)
        frames = req.serve(response, PASSAGES, provider_id="kb")

    order = [result.index for result in response.results]
    assert order != sorted(order) or order[0] != 0  # the ranking is not just input order
    assert frames == expected_frames("kb", order)
    [row] = req.frames.usage().providers
    assert row.provider_id == "kb"
    assert list(row.served_frames) == frames
    assert row.token_cost == sum(accounting_tokens(PASSAGES[i]) for i in order)


def test_serving_with_ids_names_frames_by_original_position(
    priced: Recorder, providers: Providers
) -> None:
    ids = [f"doc-{n}" for n in range(len(PASSAGES))]
    with spanledger.use(priced), spanledger.request("turn-42") as req:
        response = providers.reranker().rerank(QUESTION, PASSAGES, top_k=2)
        frames = req.serve(response, PASSAGES, provider_id="kb", ids=ids)

    order = [result.index for result in response.results]
    assert [f.frame.frame_id for f in frames] == [ids[i] for i in order]
    assert frames == expected_frames("kb", order, ids)


def test_serving_a_fallback_outcome(priced: Recorder, providers: Providers) -> None:
    with spanledger.use(priced), spanledger.request("turn-42") as req:
        outcome = with_fallback(
            [providers.slow_voyage_reranker(1500), providers.reranker()],
            QUESTION,
            PASSAGES,
            top_k=3,
            deadline=5.0,
            step_timeout=0.2,
        )
        frames = req.serve(outcome, PASSAGES, provider_id="rerank")
        req.render(frames)
        req.cite(frames[:1])
        report = req.report(emit=False)

    assert outcome.status == "degraded"
    assert [a.status for a in outcome.attempts] == ["timeout", "ok"]
    assert frames == expected_frames("rerank", [r.index for r in outcome.results])
    kinds: list[type[Event]] = [RerankFailedEvent, RerankEvent]
    assert [type(e) for e in report.events] == kinds
    statuses = report.by_status()
    assert set(statuses) == {"estimated", "priced"}
    assert statuses["estimated"][0] == 1
    assert statuses["priced"] == (1, Decimal("0.002"))  # one Cohere search unit
    record = report.record()
    assert record.spend_complete
    estimated = statuses["estimated"][1]
    assert estimated is not None
    assert estimated > 0
    assert record.spend == estimated + Decimal("0.002")
    assert record.billed_search_units == 1


def test_serving_a_list_of_scored_documents(priced: Recorder, providers: Providers) -> None:
    with spanledger.use(priced), spanledger.request("turn-42") as req:
        response = providers.reranker().rerank(QUESTION, PASSAGES, top_k=3)
        frames = req.serve(list(response.results), PASSAGES, provider_id="kb")

    assert frames == expected_frames("kb", [r.index for r in response.results])


def test_serving_plain_passages_numbers_them_by_position() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:3], provider_id="local")
        named = req.serve(PASSAGES[3:], provider_id="other", ids=["x", "y"])

    assert frames == expected_frames("local", [0, 1, 2])
    assert [f.frame.frame_id for f in named] == ["x", "y"]
    assert [f.frame.content_digest for f in named] == [digest_of(p) for p in PASSAGES[3:]]
    assert [row.provider_id for row in req.frames.usage().providers] == ["local", "other"]


def test_serving_nothing_serves_nothing() -> None:
    with spanledger.request("turn-42") as req:
        assert req.serve([], provider_id="local") == []
        report = req.report(emit=False)
    assert report.record().frames_served == 0
    assert report.attribution.cited_token_share() is None


def test_ranked_results_need_their_documents(priced: Recorder, providers: Providers) -> None:
    with spanledger.use(priced), spanledger.request("turn-42") as req:
        response = providers.reranker().rerank(QUESTION, PASSAGES, top_k=2)
        with pytest.raises(ValueError, match="documents"):
            req.serve(response, provider_id="kb")


def test_ids_must_cover_every_served_position() -> None:
    with spanledger.request("turn-42") as req, pytest.raises(ValueError, match="ids"):
        req.serve(PASSAGES[:3], provider_id="local", ids=["a", "b"])


# --------------------------------------------------------------------------- the joined report


def test_report_joins_citations_to_the_requests_bill(
    priced: Recorder, providers: Providers
) -> None:
    with spanledger.use(priced), spanledger.request("turn-42") as req:
        embedder = providers.embedder()
        embedder.embed(PASSAGES, input_type="document")
        embedder.embed([QUESTION], input_type="query")
        response = providers.reranker().rerank(QUESTION, PASSAGES, top_k=4)
        frames = req.serve(response, PASSAGES, provider_id="kb")
        rendered = frames[:3]
        req.render(rendered)
        cited = req.cite_from_text("The moon drives tides [1]; spring tides [3].", rendered)
        report = req.report()

    assert cited == [rendered[0].frame, rendered[2].frame]
    order = [r.index for r in response.results]
    costs = [accounting_tokens(PASSAGES[i]) for i in order[:3]]
    record = report.record()
    assert report.request_id == "turn-42"
    assert (record.frames_served, record.frames_rendered, record.frames_cited) == (4, 3, 2)
    assert record.rendered_tokens == sum(costs)
    assert record.cited_tokens == costs[0] + costs[2]
    assert record.uncited_rendered_tokens == costs[1]
    assert record.cited_token_share == (costs[0] + costs[2]) / sum(costs)
    assert record.reconcilable
    assert record.problems == []

    events = list(report.events)
    assert [e.kind for e in events] == ["embedding", "embedding", "rerank"]
    assert all(e.request_id == "turn-42" for e in events)
    embed_tokens = [
        e.usage.input_tokens or 0 for e in events if isinstance(e, EmbeddingEvent) and e.usage
    ]
    assert len(embed_tokens) == 2
    assert record.calls == 3
    assert record.calls_without_usage == 0
    assert record.billed_input_tokens == sum(embed_tokens)
    assert record.billed_input_tokens >= sum(accounting_tokens(p) for p in PASSAGES)
    assert record.billed_search_units == 1

    amounts = [e.cost.amount for e in events if e.cost is not None]
    assert len(amounts) == 3
    assert all(a is not None for a in amounts)
    spend = sum((a for a in amounts if a is not None), Decimal(0))
    assert report.by_status() == {"priced": (3, spend)}
    assert record.spend == spend
    assert record.currency == "USD"
    assert record.spend_complete
    assert record.unknown_spend is None
    assert record.spend_per_cited_token == spend / (costs[0] + costs[2])
    assert report.spend_per_cited_token() == record.spend_per_cited_token


def test_calls_outside_the_scope_are_not_on_its_bill(
    priced: Recorder, providers: Providers
) -> None:
    embedder = providers.embedder()
    with spanledger.use(priced):
        embedder.embed(["before the request"])
        with spanledger.request("first") as first:
            embedder.embed(["inside the first"])
        with spanledger.request("second") as second:
            embedder.embed(["inside the second", "and more"])
        embedder.embed(["after"])

    first_report, second_report = first.report(emit=False), second.report(emit=False)
    assert [e.request_id for e in first_report.events] == ["first"]
    assert [e.request_id for e in second_report.events] == ["second"]
    [first_event] = first_report.events
    [second_event] = second_report.events
    assert isinstance(first_event, EmbeddingEvent)
    assert isinstance(second_event, EmbeddingEvent)
    assert first_event.input_count == 1
    assert second_event.input_count == 2
    assert first_event.usage is not None
    assert first_report.record().billed_input_tokens == first_event.usage.input_tokens


def test_unknown_spend_names_the_part_and_gives_no_rate(
    priced: Recorder, providers: Providers
) -> None:
    with spanledger.use(priced), spanledger.request("turn-42") as req:
        providers.embedder().embed(PASSAGES)
        response = providers.reranker(UNPRICED_MODEL).rerank(QUESTION, PASSAGES, top_k=2)
        frames = req.serve(response, PASSAGES, provider_id="kb")
        req.render(frames)
        req.cite(frames)
        report = req.report()

    record = report.record()
    assert record.cited_token_share == 1.0
    assert record.cited_tokens > 0
    assert record.spend is None
    assert record.currency is None
    assert not record.spend_complete
    assert record.unknown_spend is not None
    assert "1 unpriced" in record.unknown_spend
    assert "of 2 calls" in record.unknown_spend
    assert record.spend_per_cited_token is None
    assert report.spend_per_cited_token() is None
    statuses = report.by_status()
    assert statuses["unpriced"] == (1, None)
    assert statuses["priced"][0] == 1
    assert statuses["priced"][1] is not None
    text = report.render()
    assert "spend: unknown" in text
    assert "1 unpriced" in text
    assert "spend per cited token: n/a" in text


def test_report_prices_events_the_recorder_left_unpriced(providers: Providers) -> None:
    with spanledger.use(Recorder()), spanledger.request("turn-42") as req:
        providers.embedder().embed(PASSAGES)
        response = providers.reranker().rerank(QUESTION, PASSAGES, top_k=2)
        frames = req.serve(response, PASSAGES, provider_id="kb")
        req.render(frames)
        req.cite(frames[:1])

    unpriced = req.report(emit=False)
    assert all(e.cost is None for e in unpriced.events)
    assert unpriced.by_status() == {"no_price_table": (2, None)}
    unpriced_record = unpriced.record()
    assert unpriced_record.spend is None
    assert unpriced_record.unknown_spend is not None
    assert "2 no price table" in unpriced_record.unknown_spend
    assert unpriced_record.spend_per_cited_token is None

    ledger = Ledger(example_prices_path(), warn=False)
    expected = sum((ledger.price(e).amount or Decimal(0) for e in unpriced.events), Decimal(0))
    assert expected > 0
    cited = accounting_tokens(PASSAGES[response.results[0].index])
    for prices in (example_prices_path(), ledger):
        record = req.report(prices=prices, emit=False).record()
        assert record.spend == expected
        assert record.spend_complete
        assert record.spend_per_cited_token == expected / cited


def test_events_priced_by_the_recorder_keep_their_cost_lines(
    priced: Recorder, providers: Providers, tmp_path: Path
) -> None:
    dear = tmp_path / "dear.toml"
    dear.write_text(
        'currency = "USD"\n\n[[prices]]\nprovider = "cohere"\nmodel = "embed-v4.0"\n'
        'input_per_mtok = "1000"\n',
        encoding="utf-8",
    )
    with spanledger.use(priced), spanledger.request("turn-42") as req:
        providers.embedder().embed(PASSAGES)
        frames = req.serve(PASSAGES[:1], provider_id="kb")
        req.render(frames)
        req.cite(frames)

    as_recorded = req.report(emit=False).record().spend
    assert as_recorded is not None
    assert req.report(prices=dear, emit=False).record().spend == as_recorded
    [event] = req.events
    assert event.cost is not None
    assert event.cost.status is CostStatus.PRICED


def test_budget_and_rejections_reach_the_usage_report() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:2], provider_id="kb")
        req.reject("kb", 2)
        req.reject("web")
        tight = req.report(budget_requested=1, emit=False)
        roomy = req.report(budget_requested=10_000, emit=False)

    usage = tight.attribution.usage
    rows = {row.provider_id: row for row in usage.providers}
    assert (rows["kb"].frames_served, rows["kb"].frames_rejected) == (2, 2)
    assert (rows["web"].frames_served, rows["web"].frames_rejected) == (0, 1)
    assert usage.budget_consumed == sum(f.token_cost for f in frames)
    assert usage.is_consistent()
    assert usage.within_budget() is False
    assert roomy.attribution.usage.within_budget() is True
    assert req.report(emit=False).attribution.usage.within_budget() is None


# --------------------------------------------------------------------------- citations


def test_cite_from_text_with_a_label_mapping() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:3], provider_id="kb")
        req.render(frames)
        cited = req.cite_from_text(
            "Tides [doc-b]; moon [doc-a] [doc-b].",
            {"doc-a": frames[0], "doc-b": frames[1].frame, "doc-c": frames[2]},
        )
        report = req.report(emit=False)

    assert cited == [frames[1].frame, frames[0].frame]
    assert report.attribution.cited_tokens() == frames[0].token_cost + frames[1].token_cost
    assert report.attribution.is_reconcilable()


def test_cite_from_text_with_a_caller_pattern() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:3], provider_id="kb")
        req.render(frames)
        cited = req.cite_from_text("Per (source 3) and [1].", frames, r"\(source (\d+)\)")

    assert cited == [frames[2].frame]


def test_two_labels_for_one_frame_cite_it_once() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:2], provider_id="kb")
        req.render(frames)
        cited = req.cite_from_text("[a] and [b]", {"a": frames[0], "b": frames[0]})
        report = req.report(emit=False)

    assert cited == [frames[0].frame]
    assert report.attribution.is_reconcilable()
    assert report.attribution.cited_tokens() == frames[0].token_cost


def test_labels_that_match_nothing_are_reported() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:2], provider_id="kb")
        req.render(frames)
        cited = req.cite_from_text("As shown [7] and [doc-9], and [2].", frames)
        report = req.report(emit=False)

    assert cited == [frames[1].frame]
    assert problem_kinds(report) == [ProblemKind.UNKNOWN_LABEL]
    details = report.record().problems
    # The labels come from the model's answer: counted, never quoted.
    assert any("2 citation label(s)" in detail for detail in details)
    assert not any("[7]" in detail or "doc-9" in detail for detail in details)
    assert not report.record().reconcilable
    assert report.attribution.cited_tokens() == frames[1].token_cost


# --------------------------------------------------------------------------- bad input

Scenario = Callable[[RequestScope, list[ServedFrame]], None]


def _cite_unserved(req: RequestScope, frames: list[ServedFrame]) -> None:
    req.render(frames)
    req.cite([FrameId.of("kb", "99", "never served")])


def _render_unselected(req: RequestScope, frames: list[ServedFrame]) -> None:
    late = req.serve(["served but never selected"], provider_id="late", selected=False)
    req.render([*frames, *late])


def _render_unserved(req: RequestScope, frames: list[ServedFrame]) -> None:
    req.render([*frames, FrameId("kb", "99")])


def _render_twice(req: RequestScope, frames: list[ServedFrame]) -> None:
    req.render(frames)
    req.render(frames[:1])


def _cite_twice(req: RequestScope, frames: list[ServedFrame]) -> None:
    req.render(frames)
    req.cite(frames[:1])
    req.cite(frames[:1])


def _serve_twice(req: RequestScope, frames: list[ServedFrame]) -> None:
    req.serve(PASSAGES[:2], provider_id="kb")
    req.render(frames)


def _bad_digest(req: RequestScope, frames: list[ServedFrame]) -> None:
    good = frames[0].frame
    bad: FrameLike = (good.provider_id, good.frame_id, "sha256:" + "A" * 64)
    req.render([*frames, bad])


def _wrong_arity(req: RequestScope, frames: list[ServedFrame]) -> None:
    req.render(frames)
    req.cite([("kb", "0", None, "extra")])  # type: ignore[list-item]


def _unknown_label(req: RequestScope, frames: list[ServedFrame]) -> None:
    req.render(frames)
    req.cite_from_text("nothing here matches [42]", frames)


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (_cite_unserved, {ProblemKind.NOT_BILLED, ProblemKind.INCOHERENT}),
        (_render_unselected, {ProblemKind.INCOHERENT}),
        (_render_unserved, {ProblemKind.NOT_BILLED, ProblemKind.INCOHERENT}),
        (_render_twice, {ProblemKind.DUPLICATE_USE}),
        (_cite_twice, {ProblemKind.DUPLICATE_USE}),
        (_serve_twice, {ProblemKind.DUPLICATE_USE}),
        (_bad_digest, {ProblemKind.BAD_IDENTITY}),
        (_wrong_arity, {ProblemKind.BAD_IDENTITY}),
        (_unknown_label, {ProblemKind.UNKNOWN_LABEL}),
    ],
)
def test_bad_input_is_reported_and_never_counted(
    scenario: Scenario, expected: set[ProblemKind]
) -> None:
    sink = AttributionSink()
    with spanledger.use(Recorder([sink])), spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:2], provider_id="kb")
        scenario(req, frames)
        report = req.report()

    attribution = report.attribution
    assert set(problem_kinds(report)) == expected
    assert not attribution.is_reconcilable()
    # every billed frame was rendered and is counted once; nothing unbilled adds tokens
    assert attribution.rendered_tokens() == attribution.usage.budget_consumed
    assert attribution.usage.is_consistent()
    assert attribution.cited_tokens() in (0, frames[0].token_cost)
    [record] = sink.records
    assert not record.reconcilable
    assert len(record.problems) == len(attribution.problems())
    assert all(detail for detail in record.problems)


def test_a_cited_frame_never_served_adds_no_cited_tokens() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:2], provider_id="kb")
        req.render(frames)
        req.cite(frames[:1])
        before = req.report(emit=False).attribution
        stranger = ServedFrame.of("kb", "99", "a passage nobody served")
        req.cite([stranger])
        req.render([stranger])  # even rendered afterwards, it was never billed
        after = req.report(emit=False).attribution

    assert before.is_reconcilable()
    assert after.cited_tokens() == before.cited_tokens() == frames[0].token_cost
    assert after.rendered_tokens() == before.rendered_tokens()
    assert after.cited_token_share() == before.cited_token_share()
    assert not after.is_reconcilable()
    problems = {problem.kind: problem for problem in after.problems()}
    assert set(problems) == {ProblemKind.NOT_BILLED, ProblemKind.INCOHERENT}  # never selected
    assert problems[ProblemKind.NOT_BILLED].frame == stranger.frame
    assert "kb/99" in problems[ProblemKind.NOT_BILLED].detail


def test_the_render_of_a_served_frame_is_counted_once_despite_a_second_serve() -> None:
    with spanledger.request("turn-42") as req:
        first = req.serve(PASSAGES[:2], provider_id="kb")
        again = req.serve(PASSAGES[:2], provider_id="kb")
        req.render(first)
        report = req.report(emit=False)

    assert first == again
    [row] = report.attribution.usage.providers
    assert row.frames_served == 2
    assert report.record().frames_served == 2
    details = report.record().problems
    assert len(details) == 2
    assert all("served twice" in d for d in details)


def test_a_well_formed_identity_tuple_is_accepted() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:2], provider_id="kb")
        identity = frames[0].frame
        req.render([(identity.provider_id, identity.frame_id, identity.content_digest), frames[1]])
        req.cite([identity])
        report = req.report(emit=False)

    assert report.attribution.is_reconcilable()
    assert report.attribution.cited_tokens() == frames[0].token_cost


def test_a_malformed_identity_is_reported_without_its_parts() -> None:
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:1], provider_id="kb")
        req.render([("kb", SENTINEL, "sha256:" + "Z" * 64)])
        report = req.report(emit=False)

    assert frames
    [problem] = report.attribution.problems()
    assert problem.kind is ProblemKind.BAD_IDENTITY
    assert SENTINEL not in problem.detail
    assert report.attribution.cited_token_share() is None


def test_report_without_emit_hands_nothing_to_the_sinks() -> None:
    sink = AttributionSink()
    with spanledger.use(Recorder([sink])), spanledger.request("turn-42") as req:
        req.render(req.serve(PASSAGES[:1], provider_id="kb"))
        req.report(emit=False)
        assert sink.records == []
        req.report()
    assert [r.request_id for r in sink.records] == ["turn-42"]


class AttributionSink:
    """A sink that keeps the attribution records handed to it."""

    def __init__(self) -> None:
        self.records: list[AttributionRecord] = []

    def emit(self, event: spanledger.Event) -> None:
        """Calls are not this sink's business."""

    def attribution(self, record: AttributionRecord) -> None:
        self.records.append(record)


# --------------------------------------------------------------------------- async and threads


async def test_serving_an_async_fallback_outcome(priced: Recorder, providers: Providers) -> None:
    with spanledger.use(priced), spanledger.request("turn-async") as req:
        outcome = await awith_fallback(
            [providers.reranker("fail-400"), providers.reranker()],
            QUESTION,
            PASSAGES,
            top_k=2,
            deadline=5.0,
        )
        frames = req.serve(outcome, PASSAGES, provider_id="rerank")
        req.render(frames)
        req.cite_from_text("[2]", frames)
        report = req.report(emit=False)

    assert [a.status for a in outcome.attempts] == ["failed", "ok"]
    assert frames == expected_frames("rerank", [r.index for r in outcome.results])
    assert [e.kind for e in report.events] == ["rerank_failed", "rerank"]
    assert all(e.request_id == "turn-async" for e in report.events)
    assert report.by_status() == {"not_billed": (1, Decimal(0)), "priced": (1, Decimal("0.002"))}
    record = report.record()
    assert record.spend == Decimal("0.002")
    assert record.cited_tokens == frames[1].token_cost
    assert record.spend_per_cited_token == Decimal("0.002") / frames[1].token_cost


def test_concurrent_requests_keep_their_own_calls_and_frames(
    priced: Recorder, providers: Providers
) -> None:
    embedder = providers.embedder()
    reports: dict[str, RequestReport] = {}
    lock = threading.Lock()

    def turn(n: int) -> None:
        request_id = f"turn-{n}"
        with spanledger.use(priced), spanledger.request(request_id) as req:
            embedder.embed(PASSAGES[: n + 1])
            frames = req.serve(PASSAGES[: n + 1], provider_id=f"kb-{n}")
            req.render(frames)
            req.cite(frames[:1])
            report = req.report(emit=False)
        with lock:
            reports[request_id] = report

    threads = [threading.Thread(target=turn, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert sorted(reports) == [f"turn-{n}" for n in range(4)]
    for n in range(4):
        report = reports[f"turn-{n}"]
        [event] = report.events
        assert isinstance(event, EmbeddingEvent)
        assert event.request_id == f"turn-{n}"
        assert event.input_count == n + 1
        record = report.record()
        assert record.frames_served == n + 1
        assert record.cited_tokens == accounting_tokens(PASSAGES[0])
        assert record.rendered_tokens == sum(accounting_tokens(p) for p in PASSAGES[: n + 1])
        assert record.reconcilable


def test_marking_from_many_threads_loses_nothing() -> None:
    passages = [f"passage number {n}" for n in range(2000)]
    with spanledger.request("turn-42") as req:
        frames = req.serve(passages, provider_id="kb")
        chunks = [frames[n::8] for n in range(8)]

        def mark(chunk: list[ServedFrame]) -> None:
            for item in chunk:
                req.render([item])
                if int(item.frame.frame_id) % 2 == 0:
                    req.cite([item])

        threads = [threading.Thread(target=mark, args=(chunk,)) for chunk in chunks]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)
        report = req.report(emit=False)

    attribution = report.attribution
    assert attribution.is_reconcilable()
    assert attribution.rendered_tokens() == sum(f.token_cost for f in frames)
    assert attribution.cited_tokens() == sum(f.token_cost for f in frames[::2])
    assert report.record().frames_cited == 1000


# --------------------------------------------------------------------------- record counts


def test_record_counts_only_frames_that_were_billed() -> None:
    ghost = FrameId.of("kb", "99", "a passage nobody served")
    with spanledger.request("turn-42") as req:
        frames = req.serve(PASSAGES[:2], provider_id="kb")
        req.render(frames)
        req.cite(frames[:1])
        req.select([ghost])  # coherent (selected, rendered, cited) but never billed
        req.render([ghost])
        req.cite([ghost])
        report = req.report(emit=False)

    assert [p.kind for p in report.attribution.problems()] == [ProblemKind.NOT_BILLED]
    record = report.record()
    assert not record.reconcilable
    assert record.frames_served == 2
    assert record.cited_tokens == frames[0].token_cost
    # the counts describe the same billed frames the token figures do
    assert record.frames_rendered == 2
    assert record.frames_cited == 1


def test_costs_in_two_currencies_are_never_added_together(
    providers: Providers, tmp_path: Path
) -> None:
    table = tmp_path / "two-currencies.toml"
    table.write_text(
        'currency = "USD"\n\n'
        '[[prices]]\nprovider = "cohere"\nmodel = "embed-v4.0"\ninput_per_mtok = "100"\n'
        'currency = "EUR"\n\n'
        '[[prices]]\nprovider = "cohere"\nmodel = "rerank-v3.5"\nper_search_unit = "0.002"\n',
        encoding="utf-8",
    )
    with spanledger.use(Recorder(prices=table)), spanledger.request("turn-42") as req:
        providers.embedder().embed(PASSAGES)
        response = providers.reranker().rerank(QUESTION, PASSAGES, top_k=2)
        frames = req.serve(response, PASSAGES, provider_id="kb")
        req.render(frames)
        req.cite(frames)
        report = req.report(emit=False)

    lines = [e.cost for e in report.events]
    assert [(line.status, line.currency) for line in lines if line is not None] == [
        (CostStatus.PRICED, "EUR"),
        (CostStatus.PRICED, "USD"),
    ]
    mixed = sum((line.amount or Decimal(0) for line in lines if line is not None), Decimal(0))
    record = report.record()
    assert record.spend is None
    assert record.unknown_spend is not None
    assert "2 currencies" in record.unknown_spend
    assert record.spend_per_cited_token is None
    count, amount = report.by_status()["priced"]
    assert count == 2
    assert amount != mixed, "EUR and USD amounts were added into one figure"
    assert f"{mixed:f}" not in report.render()
