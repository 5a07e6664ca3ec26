"""LlamaIndex's query engines with its real OpenAI LLM (``llama-index-llms-openai``, which pins
openai 2.x) against the loopback stand-in, the switch on: the served, selected, rendered and
cited frames are captured with no hand-written call, each model call with the input tokens and
model the provider reported, and nothing of the sentinel leaves the process. The same runs
with a small LLM of the test's own are in ``tests/frameworks/test_llama_index_attribution.py``.
Runs in ``.venv-older`` only."""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.query_engine import CitationQueryEngine
from llama_index.core.response_synthesizers import ResponseMode
from llama_index.llms.openai import OpenAI  # type: ignore[import-untyped]

import spanledger
from spanledger.attribution import Evidence, ProblemKind, RequestReport
from spanledger.testing import StandIn, openai_chat_completions
from tests.frameworks.llama_index_rig import (
    API_KEY,
    DOCUMENTS,
    PRIVATE,
    QUESTION,
    SENTINEL,
    KeepFirst,
    Kept,
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
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture(scope="module")
def index(standin: StandIn) -> VectorStoreIndex:
    return index_of(standin)


@pytest.fixture(scope="module")
def labelled(standin: StandIn) -> VectorStoreIndex:
    return index_of(standin, labelled=True)


@pytest.fixture
def llm(standin: StandIn, caplog: pytest.LogCaptureFixture) -> Iterator[Any]:
    caplog.set_level(logging.DEBUG, logger="spanledger")
    standin.reset()
    yield OpenAI(
        model="gpt-4o-mini",
        api_key=API_KEY,
        api_base=standin.base_url("openai") + "/v1",
        max_retries=0,
    )
    for private in PRIVATE:
        assert private not in caplog.text


def top(index: VectorStoreIndex, k: int = 3) -> list[str]:
    return ids(index.as_retriever(similarity_top_k=k).retrieve(QUESTION))


def run(standin: StandIn, engine: Any) -> tuple[Any, RequestReport, Kept]:
    """``QUESTION`` through ``engine`` inside a request with the switch on: each model call
    matched carries the input tokens the stand-in reported and the model, and nothing private
    is in a report, a record or an event."""
    before = len(prompts(standin))
    with switched_on() as kept, spanledger.request("turn-1") as turn:
        response = engine.query(QUESTION)
        report = turn.report()
        calls = turn.context.calls()
    sent = prompts(standin)[before:]
    assert len(calls) == len(sent)
    for call, prompt in zip(calls, sent, strict=True):
        assert call.input_tokens == max(1, math.ceil(len(prompt.encode()) / 4))
        assert (call.provider, call.model) == ("openai", "gpt-4o-mini")
    for surface in [repr(report.record()), *map(repr, kept.events), *map(repr, kept.records)]:
        for private in PRIVATE:
            assert private not in surface
    return response, report, kept


def test_compact_with_openai(standin: StandIn, labelled: VectorStoreIndex, llm: Any) -> None:
    served = top(labelled)
    kept_ids = served[:2]
    standin.route(openai_chat_completions(answer=answering(1)))
    engine = labelled.as_query_engine(
        llm=llm, similarity_top_k=3, node_postprocessors=[KeepFirst(keep=2)]
    )

    response, report, _ = run(standin, engine)

    assert ids(response.source_nodes) == kept_ids
    assert SENTINEL in response.response
    assert sets(report) == {
        "served": set(served),
        "selected": set(kept_ids),
        "rendered": set(kept_ids),
        "cited": {kept_ids[1]},
    }
    assert report.attribution.cited_token_share() == share(texts(kept_ids[1:]), texts(kept_ids))
    assert report.model_calls == 1


def test_refine_with_openai(standin: StandIn, index: VectorStoreIndex, llm: Any) -> None:
    served = top(index)
    standin.route(openai_chat_completions(answer=plain_answer))
    engine = index.as_query_engine(llm=llm, similarity_top_k=3, response_mode="refine")

    _, report, _ = run(standin, engine)

    assert sets(report) == {
        "served": set(served),
        "selected": set(served),
        "rendered": set(served),
        "cited": set(),
    }
    for use in report.attribution.uses:
        assert use.renders == 1
        assert use.rendered_tokens == accounting_tokens(DOCUMENTS[use.frame.frame_id])
    assert report.attribution.cited_token_share() == 0.0
    assert report.model_calls == 3


def test_citation_refine_with_openai(standin: StandIn, index: VectorStoreIndex, llm: Any) -> None:
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

    response, report, _ = run(standin, engine)

    chunks = chunk_sources(response.source_nodes)
    assert report.model_calls == len(chunks)
    assert sets(report) == {
        "served": set(served),
        "selected": set(served),
        "rendered": set(served),
        "cited": {chunks["1"]},
    }
    assert report.attribution.problems() == []  # the carried label names the first call's node
    assert report.attribution.cited_token_share() == share(texts([chunks["1"]]), texts(served))


def test_citation_query_engine_with_openai(
    standin: StandIn, index: VectorStoreIndex, llm: Any
) -> None:
    served = top(index)
    standin.route(openai_chat_completions(answer=answering(1, -1)))
    engine = CitationQueryEngine.from_args(
        index, llm=llm, similarity_top_k=3, citation_chunk_size=24, citation_chunk_overlap=0
    )

    response, report, _ = run(standin, engine)

    chunks = chunk_sources(response.source_nodes)
    assert len(chunks) > len(served)
    labels = list(chunks)
    cited = {chunks[labels[1]], chunks[labels[-1]]}
    assert sets(report) == {
        "served": set(served),
        "selected": set(served),
        "rendered": set(served),
        "cited": cited,
    }
    assert {use.evidence for use in report.attribution.uses if use.cited} == {Evidence.PROMPT_LABEL}
    assert report.attribution.cited_token_share() == share(texts(sorted(cited)), texts(served))


def test_a_phantom_label_with_openai(standin: StandIn, index: VectorStoreIndex, llm: Any) -> None:
    standin.route(openai_chat_completions(answer=answering(0, "97")))
    engine = CitationQueryEngine.from_args(index, llm=llm, similarity_top_k=3)

    _, report, _ = run(standin, engine)

    assert [problem.kind for problem in report.attribution.problems()] == [
        ProblemKind.UNKNOWN_LABEL
    ]


def test_concurrent_openai_queries_are_requests_of_their_own(
    standin: StandIn, labelled: VectorStoreIndex, llm: Any
) -> None:
    served = top(labelled)
    standin.route(openai_chat_completions(answer=answering(0)))
    engines = [
        labelled.as_query_engine(
            llm=llm, similarity_top_k=3, node_postprocessors=[KeepFirst(keep=keep)]
        )
        for keep in (1, 2, 3)
    ]

    def ask(engine: Any) -> None:
        engine.query(QUESTION)

    with switched_on() as kept, ThreadPoolExecutor(3) as pool:
        list(pool.map(spanledger.carry(ask), engines * 2))

    rendered = sorted(record.rendered_tokens for record in kept.records)
    by_hand = sorted(sum(map(accounting_tokens, texts(served[:keep]))) for keep in (1, 2, 3))
    assert rendered == sorted(by_hand * 2)
    for record in kept.records:
        assert re.fullmatch(
            r"llama_index:RetrieverQueryEngine\.query:[0-9a-f]{8}", record.request_id
        )
        assert record.cited_tokens == accounting_tokens(DOCUMENTS[served[0]])
        assert record.model_calls == 1
    assert len({record.request_id for record in kept.records}) == 6
