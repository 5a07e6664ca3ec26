"""A rerank call recorded inside an open request serves its documents to the request's context
and selects those its results name, whichever path recorded it: a provider class, the
recording transport, ``record_rerank``. Each frame is named by the id the request gave its
document, else by its content digest. Outside a request, or when the call failed, nothing is
served.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

import spanledger
from spanledger.attribution import ProblemKind, RequestScope
from spanledger.events import ScoredDocument
from spanledger.instrumentation import transport
from spanledger.providers import CohereReranker
from spanledger.recording.facts import RerankFacts
from spanledger.recording.reported import reported
from spanledger.testing import StandIn, cohere_rerank
from spanledger.wire.endpoints import COHERE_RERANK

from .conftest import API_KEY, PASSAGES, QUESTION, digest_of


@pytest.fixture
def server(standin: StandIn) -> Iterator[StandIn]:
    standin.reset()
    yield standin
    standin.reset()


def uses_by_text(scope: RequestScope, texts: list[str]) -> dict[str, tuple[str, bool]]:
    """Each served text's frame id and whether it was selected."""
    digests = {digest_of(text): text for text in texts}
    return {
        digests[use.frame.content_digest]: (use.frame.frame_id, use.selected)
        for use in scope.frames.report().uses
        if use.frame.content_digest in digests
    }


def test_a_provider_class_serves_every_document_and_selects_its_results(server: StandIn) -> None:
    with (
        CohereReranker(
            "rerank-v3.5", base_url=server.base_url("cohere"), api_key=API_KEY
        ) as ranker,
        spanledger.request("turn-provider") as turn,
    ):
        response = ranker.rerank(QUESTION, PASSAGES, top_k=2)
        found = uses_by_text(turn, PASSAGES)
    chosen = {PASSAGES[result.index] for result in response.results}
    assert set(found) == set(PASSAGES)
    assert {text for text, (_, selected) in found.items() if selected} == chosen
    for text, (frame_id, _) in found.items():
        assert frame_id == digest_of(text).removeprefix("sha256:")[:16]
    assert {use.frame.provider_id for use in turn.frames.report().uses} == {"cohere"}


def test_the_transport_serves_and_selects_from_the_answer_on_the_wire(server: StandIn) -> None:
    base = server.base_url("jina")
    body = {"model": "jina-reranker-v2", "query": QUESTION, "documents": PASSAGES, "top_n": 3}
    with (
        httpx.Client(transport=transport(vendors={base: "jina"})) as client,
        spanledger.request("turn-transport") as turn,
    ):
        answer = client.post(base + "/v1/rerank", json=body).json()
        found = uses_by_text(turn, PASSAGES)
    chosen = {PASSAGES[result["index"]] for result in answer["results"]}
    assert len(chosen) == 3
    assert {text for text, (_, selected) in found.items() if selected} == chosen
    assert set(found) == set(PASSAGES)


def test_frames_are_named_by_the_ids_the_request_gave(server: StandIn) -> None:
    base = server.base_url("gcp.vertex_ai")
    url = base + "/v1/projects/p/locations/global/rankingConfigs/default_ranking_config:rank"
    records = [{"id": f"rec-{n}", "content": text} for n, text in enumerate(PASSAGES)]
    body = {
        "model": "semantic-ranker-default-004",
        "query": QUESTION,
        "records": records,
        "topN": 2,
    }
    with (
        httpx.Client(transport=transport(vendors={base: "gcp.vertex_ai"})) as client,
        spanledger.request("turn-ids") as turn,
    ):
        answer = client.post(url, json=body).json()
        found = uses_by_text(turn, PASSAGES)
    assert {frame_id for frame_id, _ in found.values()} == {r["id"] for r in records}
    chosen = {record["id"] for record in answer["records"]}
    assert {frame_id for frame_id, selected in found.values() if selected} == chosen


def test_record_rerank_serves_what_its_results_name() -> None:
    with spanledger.request("turn-manual") as turn:
        with spanledger.record_rerank(
            provider="cohere", model="rerank-v3.5", query=QUESTION, documents=PASSAGES
        ) as call:
            call.succeeded(results=[ScoredDocument(index=3, relevance_score=0.9)])
        found = uses_by_text(turn, PASSAGES)
    assert set(found) == set(PASSAGES)
    assert [text for text, (_, selected) in found.items() if selected] == [PASSAGES[3]]


def test_a_document_given_twice_is_one_frame(server: StandIn) -> None:
    texts = [PASSAGES[0], PASSAGES[1], PASSAGES[0]]
    with (
        CohereReranker(
            "rerank-v3.5", base_url=server.base_url("cohere"), api_key=API_KEY
        ) as ranker,
        spanledger.request("turn-twice") as turn,
    ):
        ranker.rerank(QUESTION, texts)
        report = turn.frames.report()
    assert len(report.uses) == 2
    assert ProblemKind.DUPLICATE_USE not in {problem.kind for problem in report.problems()}


def test_a_failed_rerank_serves_nothing(server: StandIn) -> None:
    server.route(cohere_rerank().failing(500))
    with (
        CohereReranker(
            "rerank-v3.5", base_url=server.base_url("cohere"), api_key=API_KEY
        ) as ranker,
        spanledger.request("turn-failed") as turn,
    ):
        with pytest.raises(spanledger.ProviderError):
            ranker.rerank(QUESTION, PASSAGES)
        assert turn.frames.report().uses == ()
        assert not turn.context.captured


def test_outside_a_request_nothing_is_served_and_the_results_are_not_kept() -> None:
    """Reading a rerank answer keeps its result positions only for an open request's context
    (the event never carries them); outside one the results are only counted."""
    facts = RerankFacts("cohere", "rerank-v3.5", 10, len(PASSAGES), QUESTION, list(PASSAGES))
    body = {"results": [{"index": 2, "relevance_score": 0.8}, {"index": 0, "relevance_score": 0.9}]}
    assert reported(COHERE_RERANK, body, facts).positions is None
    with spanledger.request("turn-positions"):
        assert reported(COHERE_RERANK, body, facts).positions == (0, 2)
    facts.documents = None
    with spanledger.request("turn-no-texts"):
        assert reported(COHERE_RERANK, body, facts).positions is None
