"""LlamaIndex's own query engines with the switch on, against the loopback stand-in: the served,
selected, rendered and cited frames are captured with no hand-written call, and the share is
the one counted by hand.

A ``VectorStoreIndex`` over the stand-in's OpenAI embeddings retrieves; a small LLM of the
test's own posts each prompt to the stand-in's chat route (``StandInLLM``); the answers are
scripted. ``RetrieverQueryEngine`` runs compact (one call, and several when the context does
not fit) and refine (a call per node); ``CitationQueryEngine`` re-splits nodes into
``Source N:`` chunks under fresh ids. The same runs with the real ``llama_index.llms.openai``
LLM are in ``tests/older_sdks/test_llama_index_openai.py`` (LlamaIndex's OpenAI LLM pins
openai 2.x).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.instrumentation.events.rerank import ReRankEndEvent, ReRankStartEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.postprocessor import LLMRerank
from llama_index.core.query_engine import CitationQueryEngine, RetrieverQueryEngine
from llama_index.core.response_synthesizers import ResponseMode
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeWithScore, TextNode

import spanledger
from spanledger.attribution import Evidence, ProblemKind, RequestReport
from spanledger.integrations.llama_index import handlers
from spanledger.testing import StandIn, openai_chat_completions
from tests.frameworks.llama_index_rig import (
    DOCUMENTS,
    PRIVATE,
    QUESTION,
    KeepFirst,
    Kept,
    StandInLLM,
    accounting_tokens,
    answering,
    chunk_sources,
    ids,
    index_of,
    plain_answer,
    prompts,
    refining,
    sets,
    share,
    switched_on,
    texts,
)

__all__ = ["PRIVATE"]


@pytest.fixture(scope="module")
def index(standin: StandIn) -> VectorStoreIndex:
    return index_of(standin)


@pytest.fixture(scope="module")
def labelled(standin: StandIn) -> VectorStoreIndex:
    return index_of(standin, labelled=True)


@pytest.fixture
def llm(standin: StandIn) -> StandInLLM:
    standin.reset()
    return StandInLLM(base_url=standin.base_url("openai") + "/v1")


def top(index: VectorStoreIndex, k: int = 3) -> list[str]:
    """The ids the retriever returns for ``QUESTION`` (asked with the switch off)."""
    return ids(index.as_retriever(similarity_top_k=k).retrieve(QUESTION))


def query_in_request(engine: Any) -> tuple[Any, RequestReport, Kept]:
    """``QUESTION`` through ``engine`` inside a request, with the switch on."""
    with switched_on() as kept, spanledger.request("turn-1") as turn:
        response = engine.query(QUESTION)
        report = turn.report()
    return response, report, kept


def test_compact_selects_what_a_postprocessor_kept_and_cites_by_the_nodes_own_labels(
    standin: StandIn, labelled: VectorStoreIndex, llm: StandInLLM
) -> None:
    served = top(labelled)
    kept_ids = served[:2]
    standin.route(openai_chat_completions(answer=answering(1)))
    engine = labelled.as_query_engine(
        llm=llm, similarity_top_k=3, node_postprocessors=[KeepFirst(keep=2)]
    )

    response, report, _ = query_in_request(engine)

    assert ids(response.source_nodes) == kept_ids
    assert sets(report) == {
        "served": set(served),
        "selected": set(kept_ids),
        "rendered": set(kept_ids),
        "cited": {kept_ids[1]},
    }
    attribution = report.attribution
    assert attribution.cited_token_share() == share(texts(kept_ids[1:]), texts(kept_ids))
    for use in attribution.uses:
        if use.rendered:
            assert use.rendered_tokens == accounting_tokens(DOCUMENTS[use.frame.frame_id])
            assert use.renders == 1
    assert {use.evidence for use in attribution.uses if use.cited} == {Evidence.PROMPT_LABEL}
    assert attribution.problems() == []
    assert report.model_calls == 1


def test_the_metadata_lines_llamaindex_puts_above_a_node_are_not_the_frame(
    standin: StandIn, index: VectorStoreIndex
) -> None:
    served = top(index)
    excerpt = DOCUMENTS[served[2]].split(". ")[1]
    standin.reset()
    standin.route(openai_chat_completions(answer=plain_answer))
    llm = StandInLLM(base_url=standin.base_url("openai") + "/v1", chat_model=True, citing=[excerpt])
    engine = index.as_query_engine(llm=llm, similarity_top_k=3)

    _, report, _ = query_in_request(engine)

    [prompt] = prompts(standin)
    for node_id in served:
        assert f"file_name: {node_id}.txt\n\n{DOCUMENTS[node_id]}" in prompt
    assert sets(report) == {
        "served": set(served),
        "selected": set(served),
        "rendered": set(served),
        "cited": {served[2]},
    }
    uses = {use.frame.frame_id: use for use in report.attribution.uses}
    assert uses[served[2]].evidence is Evidence.PROVIDER_CITATION
    for node_id in served:
        assert uses[node_id].rendered_tokens == accounting_tokens(DOCUMENTS[node_id])
    assert report.attribution.cited_token_share() == share(texts(served[2:]), texts(served))


def test_refine_renders_each_node_in_a_call_of_its_own_and_carries_the_first_citation(
    standin: StandIn, labelled: VectorStoreIndex, llm: StandInLLM
) -> None:
    served = top(labelled)
    standin.route(openai_chat_completions(answer=refining(answering(0))))
    engine = labelled.as_query_engine(llm=llm, similarity_top_k=3, response_mode="refine")

    _, report, _ = query_in_request(engine)

    assert len(prompts(standin)) == 3
    assert sets(report) == {
        "served": set(served),
        "selected": set(served),
        "rendered": set(served),
        "cited": {served[0]},
    }
    assert all(use.renders == 1 for use in report.attribution.uses)
    assert report.attribution.problems() == []  # the carried label names the first call's node
    assert report.attribution.cited_token_share() == share(texts(served[:1]), texts(served))
    assert report.model_calls == 3


def shown_chars(text: str, sent: list[str]) -> tuple[int, int]:
    """By hand: how many of the prompts hold a piece of ``text`` (its start or its end, at
    least 24 characters), and how many characters of it they hold together."""
    shown = [False] * len(text)
    calls = 0
    for prompt in sent:
        head = max((k for k in range(24, len(text) + 1) if text[:k] in prompt), default=0)
        tail = max((k for k in range(24, len(text) + 1) if text[-k:] in prompt), default=0)
        calls += bool(head or tail)
        for at in [*range(head), *range(len(text) - tail, len(text))]:
            shown[at] = True
    return calls, sum(shown)


def test_a_node_split_across_the_calls_of_compact_and_refine_counts_once_with_its_calls(
    standin: StandIn, index: VectorStoreIndex
) -> None:
    served = top(index)
    standin.reset()
    standin.route(openai_chat_completions(answer=plain_answer))
    llm = StandInLLM(base_url=standin.base_url("openai") + "/v1", window=900)
    engine = index.as_query_engine(llm=llm, similarity_top_k=3)

    _, report, _ = query_in_request(engine)

    sent = prompts(standin)
    assert len(sent) > 1, "the context must not fit one call"
    uses = {use.frame.frame_id: use for use in report.attribution.uses}
    by_hand = {node_id: shown_chars(DOCUMENTS[node_id], sent) for node_id in served}
    assert any(calls > 1 for calls, _ in by_hand.values()), "a node must span two calls"
    for node_id, (calls, chars) in by_hand.items():
        assert uses[node_id].renders == calls
        assert uses[node_id].rendered_tokens == -(-chars // 4)
    assert report.model_calls == len(sent)


def test_citation_chunks_map_back_to_their_nodes_by_the_text_they_hold(
    standin: StandIn, index: VectorStoreIndex, llm: StandInLLM
) -> None:
    served = top(index)
    standin.route(openai_chat_completions(answer=answering(1, -1)))
    engine = CitationQueryEngine.from_args(
        index, llm=llm, similarity_top_k=3, citation_chunk_size=24, citation_chunk_overlap=0
    )

    response, report, _ = query_in_request(engine)

    chunks = chunk_sources(response.source_nodes)  # label -> the node the chunk came from
    assert len(chunks) > len(served), "nodes must be re-split into several chunks"
    labels = list(chunks)
    cited = {chunks[labels[1]], chunks[labels[-1]]}
    assert sets(report) == {
        "served": set(served),
        "selected": set(served),
        "rendered": set(served),
        "cited": cited,
    }
    assert report.attribution.problems() == []
    assert report.attribution.cited_token_share() == share(texts(sorted(cited)), texts(served))


def test_citation_refine_reads_labels_given_by_an_earlier_call(
    standin: StandIn, index: VectorStoreIndex, llm: StandInLLM
) -> None:
    served = top(index)
    standin.route(openai_chat_completions(answer=refining(answering(0))))
    engine = CitationQueryEngine.from_args(
        index,
        llm=llm,
        similarity_top_k=3,
        citation_chunk_size=24,
        citation_chunk_overlap=0,
        response_mode=ResponseMode.REFINE,
    )

    response, report, _ = query_in_request(engine)

    chunks = chunk_sources(response.source_nodes)
    assert len(prompts(standin)) == len(chunks)
    assert sets(report)["cited"] == {chunks["1"]}
    assert sets(report)["rendered"] == set(served)
    assert report.attribution.problems() == []
    assert report.model_calls == len(chunks)


def test_a_phantom_label_is_an_unknown_label_problem(
    standin: StandIn, index: VectorStoreIndex, llm: StandInLLM
) -> None:
    standin.route(openai_chat_completions(answer=answering(0, "97")))
    engine = CitationQueryEngine.from_args(index, llm=llm, similarity_top_k=3)

    _, report, kept = query_in_request(engine)

    [problem] = report.attribution.problems()
    assert problem.kind is ProblemKind.UNKNOWN_LABEL
    assert "97" not in problem.detail
    [record] = kept.records
    assert not record.reconcilable
    assert len(sets(report)["cited"]) == 1


def test_each_top_level_query_is_a_request_of_its_own(
    standin: StandIn, labelled: VectorStoreIndex, llm: StandInLLM
) -> None:
    served = top(labelled)
    standin.route(openai_chat_completions(answer=answering(0)))
    engine = labelled.as_query_engine(llm=llm, similarity_top_k=3)

    with switched_on() as kept:
        engine.query(QUESTION)
        engine.query(QUESTION)
        labelled.as_retriever(similarity_top_k=3).retrieve(QUESTION)
    assert spanledger.attribution.current_request() is None

    first, second = kept.records  # a retrieval on its own is no request
    for record in (first, second):
        assert re.fullmatch(
            r"llama_index:RetrieverQueryEngine\.query:[0-9a-f]{8}", record.request_id
        )
        assert (record.frames_served, record.frames_rendered, record.frames_cited) == (3, 3, 1)
        assert record.cited_tokens == accounting_tokens(DOCUMENTS[served[0]])
        assert record.rendered_tokens == sum(map(accounting_tokens, texts(served)))
        assert record.model_calls == 1
    assert first.request_id != second.request_id
    embedded = [event.request_id for event in kept.events]
    assert embedded == [first.request_id, second.request_id, None]


def test_inside_a_request_every_query_joins_it(
    standin: StandIn, labelled: VectorStoreIndex, llm: StandInLLM
) -> None:
    standin.route(openai_chat_completions(answer=answering(0)))
    engine = labelled.as_query_engine(llm=llm, similarity_top_k=3)

    with switched_on() as kept, spanledger.request("turn-7"):
        engine.query(QUESTION)
        engine.query(QUESTION)

    [record] = kept.records
    assert record.request_id == "turn-7"
    assert record.model_calls == 2
    assert {event.request_id for event in kept.events} == {"turn-7"}


def reranking_then(answer: Callable[[str], str]) -> Callable[[str], str]:
    """``LLMRerank``'s choice prompt answered with documents 2 then 1; ``answer`` otherwise."""

    def respond(prompt: str) -> str:
        if "Relevance: 7" in prompt:  # the choice-select template's example
            return "Doc: 2, Relevance: 9\nDoc: 1, Relevance: 7"
        return answer(prompt)

    return respond


def test_a_core_reranker_without_rerank_events_selects_through_its_span(
    standin: StandIn, labelled: VectorStoreIndex, llm: StandInLLM
) -> None:
    served = top(labelled)
    standin.route(openai_chat_completions(answer=reranking_then(answering(0))))
    reranker = LLMRerank(llm=llm, top_n=2, choice_batch_size=3)
    engine = labelled.as_query_engine(llm=llm, similarity_top_k=3, node_postprocessors=[reranker])

    response, report, _ = query_in_request(engine)

    chosen = [served[1], served[0]]
    assert ids(response.source_nodes) == chosen
    assert sets(report) == {
        "served": set(served),
        "selected": set(chosen),
        "rendered": set(chosen),
        "cited": {served[1]},
    }
    assert len(prompts(standin)) == 2
    assert report.model_calls == 1  # the reranker's own call is part of its step


def test_an_outer_retriever_judges_what_the_retrievers_inside_it_returned(
    standin: StandIn, index: VectorStoreIndex, labelled: VectorStoreIndex, llm: StandInLLM
) -> None:
    inner = {name: top(found, 2) for name, found in (("plain", index), ("labelled", labelled))}
    standin.route(openai_chat_completions(answer=plain_answer))
    fusion = QueryFusionRetriever(
        [index.as_retriever(similarity_top_k=2), labelled.as_retriever(similarity_top_k=2)],
        llm=llm,
        similarity_top_k=1,
        num_queries=1,
        use_async=True,
    )
    engine = RetrieverQueryEngine.from_args(fusion, llm=llm)

    response, report, _ = query_in_request(engine)

    [fused] = ids(response.source_nodes)
    found = sets(report)
    assert found["served"] == set(inner["plain"]) | set(inner["labelled"])
    assert found["selected"] == found["rendered"] == {fused}


def test_rerank_events_say_what_was_handed_and_what_was_kept() -> None:
    candidates = [
        NodeWithScore(node=TextNode(text=text, id_=key)) for key, text in DOCUMENTS.items()
    ]
    events = handlers.EventHandler()
    with switched_on(), spanledger.request("turn-3") as turn:
        events.handle(RetrievalEndEvent(str_or_query_bundle=QUESTION, nodes=candidates[:4]))
        events.handle(
            ReRankStartEvent(query=QUESTION, nodes=candidates[:4], top_n=2, model_name="m")
        )
        events.handle(ReRankEndEvent(nodes=[candidates[3], candidates[0]]))
        events.handle(
            ReRankStartEvent(query=QUESTION, nodes=candidates[4:], top_n=1, model_name="m")
        )
        report = turn.report()
    found = sets(report)
    assert found["served"] == set(DOCUMENTS)
    assert found["selected"] == {"kb-3", "kb-0"}


def test_concurrent_queries_in_threads_and_tasks_stay_apart(
    standin: StandIn, llm: StandInLLM
) -> None:
    labelled = index_of(standin, labelled=True)  # its async client is bound to this test's loop
    served = top(labelled)
    standin.route(openai_chat_completions(answer=answering(0)))
    engines = {
        keep: labelled.as_query_engine(
            llm=llm, similarity_top_k=3, node_postprocessors=[KeepFirst(keep=keep)]
        )
        for keep in (1, 2, 3)
    }
    work = [1, 2, 3] * 3

    def in_thread(number: int) -> None:
        keep = work[number]
        if number % 2:
            with spanledger.request(f"thread-{number}-keeps-{keep}"):
                engines[keep].query(QUESTION)
        else:
            engines[keep].query(QUESTION)

    async def in_tasks() -> None:
        await asyncio.gather(*(engines[keep].aquery(QUESTION) for keep in work))

    with switched_on() as kept:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(spanledger.carry(in_thread), range(len(work))))  # the recorder
        asyncio.run(in_tasks())

    assert len(kept.records) == 2 * len(work)
    rendered = {keep: sum(map(accounting_tokens, texts(served[:keep]))) for keep in (1, 2, 3)}
    keeps = []
    for record in kept.records:
        (keep,) = [k for k, tokens in rendered.items() if tokens == record.rendered_tokens]
        keeps.append(keep)
        assert (record.frames_served, record.frames_rendered, record.frames_cited) == (3, keep, 1)
        assert record.cited_tokens == accounting_tokens(DOCUMENTS[served[0]])
        assert record.model_calls == 1
        named = re.search(r"keeps-(\d)", record.request_id)
        assert named is None or int(named.group(1)) == keep
    assert sorted(keeps) == sorted(work * 2)
    by_request = [event.request_id or "" for event in kept.events]
    assert sorted(by_request) == sorted(record.request_id for record in kept.records)
