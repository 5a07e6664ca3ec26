"""Haystack pipelines attribute themselves: after ``spanledger.instrument()``, a RAG pipeline's
served, selected, rendered and cited sets are captured with no hand-written call, by the tracer
spanledger puts in front of the application's.

Real pipelines over loopback: BM25 retriever → (Cohere's ranker) → prompt builder labelling its
documents ``Document N:`` → OpenAI's generator → answer builder reading ``[n]``, against the
stand-in (which by default cites the first two labels the prompt gives). The application's own
tracer is handed exactly what it was handed without spanledger; the texts stay in memory.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from haystack import Document
from haystack.tracing.logging_tracer import LoggingTracer
from haystack.tracing.tracer import NullTracer, disable_tracing, enable_tracing
from haystack.tracing.tracer import tracer as haystack_tracer
from haystack.utils import Secret
from haystack_integrations.components.rankers.cohere import CohereRanker
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import spanledger
from spanledger import Recorder, RerankEvent
from spanledger.attribution import Evidence, ProblemKind, RequestReport
from spanledger.exporters import JsonlSink
from spanledger.exporters.otel import OtelExporter
from spanledger.integrations.haystack.runs import ComponentReader
from spanledger.integrations.haystack.tracer import LedgerTracer
from spanledger.testing import StandIn
from spanledger.testing.chat import openai_chat_completions
from tests.frameworks.haystack_rig import (
    API_KEY,
    AppTracer,
    documents,
    inputs,
    no_telemetry,
    rag_pipeline,
    reports,
    shown,
    tokens,
)

__all__ = ["no_telemetry", "reports"]  # fixtures, used by name

SENTINEL = "SENTINEL-haystack-3e8a"
PRIVATE = (SENTINEL, API_KEY)
QUESTION = f"What do ticks feed on {SENTINEL}?"
TEXTS = (
    f"Ticks feed on the blood of deer and mice {SENTINEL}.",
    f"Deer ticks carry Lyme disease through the forest {SENTINEL}.",
    f"Clocks tick every second and chime each hour {SENTINEL}.",
)
WITH_RANKER = ("retriever", "ranker")
WITHOUT = ("retriever",)


@pytest.fixture
def switched() -> Iterator[None]:
    """The process-wide switch on (every SDK, and Haystack's tracer) for the test."""
    spanledger.instrument()
    try:
        yield
    finally:
        spanledger.uninstrument()


@pytest.fixture(autouse=True)
def _haystack_tracing_as_it_was() -> Iterator[None]:
    yield
    disable_tracing()
    haystack_tracer.is_content_tracing_enabled = False


def cohere_ranker(standin: StandIn, top_k: int = 2) -> CohereRanker:
    return CohereRanker(
        model="rerank-v3.5",
        api_key=Secret.from_token(API_KEY),
        top_k=top_k,
        api_base_url=standin.base_url("cohere"),
    )


def run(pipe: Any, *, ranker: bool = False, question: str = QUESTION) -> dict[str, Any]:
    result: dict[str, Any] = pipe.run(
        inputs(question, ranker=ranker),
        include_outputs_from=set(WITH_RANKER if ranker else WITHOUT),
    )
    return result


def frame_ids(report: RequestReport, **flags: bool) -> set[str]:
    """The ids of the frames whose use has every flag given (``rendered=True``...)."""
    return {
        use.frame.frame_id
        for use in report.attribution.uses
        if all(getattr(use, flag) == wanted for flag, wanted in flags.items())
    }


def by_hand_share(cited: list[Document], rendered: list[Document]) -> float:
    cited_tokens = sum(tokens(doc.content or "") for doc in cited)
    return cited_tokens / sum(tokens(doc.content or "") for doc in rendered)


def test_a_pipeline_in_a_request_reports_what_it_served_rendered_and_cited(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    pipe = rag_pipeline(standin, documents(*TEXTS))
    with spanledger.request("turn-1") as turn:
        result = run(pipe)
        report = turn.report()
    docs = shown(result)
    assert len(docs) == 3
    ids = {doc.id for doc in docs}
    assert frame_ids(report) == ids  # frames named by Document.id
    assert {use.frame.provider_id for use in report.attribution.uses} == {"retriever"}
    assert frame_ids(report, selected=True) == ids  # no ranker: what the prompt got
    assert frame_ids(report, rendered=True) == ids
    cited = docs[:2]  # the stand-in cites "Document 1" and "Document 2"
    assert frame_ids(report, cited=True) == {doc.id for doc in cited}
    assert {use.evidence for use in report.attribution.uses if use.cited} == {
        Evidence.FRAMEWORK_MARKING
    }
    assert report.attribution.cited_token_share() == pytest.approx(by_hand_share(cited, docs))
    assert report.attribution.is_reconcilable(), report.attribution.problems()
    assert report.model_calls == 1
    [answer] = result["answers"]["answers"]
    assert [d.meta["referenced"] for d in answer.documents] == [True, True]  # only those
    assert [r.request_id for r in reports] == ["turn-1"]  # no request of its own


def test_a_run_with_no_request_open_is_a_request_of_its_own(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    pipe = rag_pipeline(standin, documents(*TEXTS), name="tick facts")
    first, second = run(pipe), run(pipe)
    assert [len(r.attribution.uses) for r in reports] == [3, 3]
    names = [r.request_id for r in reports]
    assert all(re.fullmatch(r"haystack:tick-facts:[0-9a-f]{12}", name) for name in names)
    assert names[0] != names[1]
    for report, result in zip(reports, (first, second), strict=True):
        cited = shown(result)[:2]
        assert frame_ids(report, cited=True) == {doc.id for doc in cited}
    assert spanledger.attribution.current_request() is None  # closed at the run's end


def test_a_ranker_selects_what_the_prompt_gets(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    kept: list[Any] = []
    pipe = rag_pipeline(standin, documents(*TEXTS), ranker=cohere_ranker(standin, top_k=2))
    with spanledger.use(Recorder([kept.append])):
        result = run(pipe, ranker=True)
    [report] = reports
    retrieved, ranked = shown(result), shown(result, ranker=True)
    assert len(retrieved) == 3
    assert len(ranked) == 2
    assert frame_ids(report) == {doc.id for doc in retrieved}
    assert frame_ids(report, selected=True) == {doc.id for doc in ranked}
    assert frame_ids(report, rendered=True) == {doc.id for doc in ranked}
    assert frame_ids(report, cited=True) == {doc.id for doc in ranked}
    assert report.attribution.cited_token_share() == 1.0
    assert report.attribution.is_reconcilable(), report.attribution.problems()
    [rerank] = [event for event in kept if isinstance(event, RerankEvent)]
    assert rerank.request_id == report.request_id  # the ranker's call joined the run
    assert report.events == (rerank,)


def test_a_phantom_label_is_an_unknown_label_problem(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    standin.route(openai_chat_completions(answer=f"Blood [1], and more [7] {SENTINEL}."), times=1)
    pipe = rag_pipeline(standin, documents(*TEXTS))
    result = run(pipe)
    [report] = reports
    kinds = [problem.kind for problem in report.attribution.problems()]
    assert kinds == [ProblemKind.UNKNOWN_LABEL]
    assert frame_ids(report, cited=True) == {shown(result)[0].id}


def test_an_answer_no_builder_reads_is_taken_at_the_end_of_the_run(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    pipe = rag_pipeline(standin, documents(*TEXTS))
    pipe.remove_component("answers")
    result = pipe.run(
        {"retriever": {"query": QUESTION}, "prompt": {"query": QUESTION}},
        include_outputs_from={"retriever"},
    )
    [report] = reports
    assert frame_ids(report, cited=True) == {doc.id for doc in shown(result)[:2]}
    assert {use.evidence for use in report.attribution.uses if use.cited} == {Evidence.PROMPT_LABEL}


def test_the_async_pipeline_runs_apart_concurrently(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    many = rag_pipeline(standin, documents(*TEXTS), name="many", behaviour="slow-300")
    few = rag_pipeline(standin, documents(*TEXTS[:2]), name="few", behaviour="slow-300")

    async def both() -> list[dict[str, Any]]:
        return list(
            await asyncio.gather(
                many.run_async(inputs(QUESTION), include_outputs_from={"retriever"}),
                few.run_async(inputs(QUESTION), include_outputs_from={"retriever"}),
            )
        )

    results = asyncio.run(both())
    assert sorted(r.request_id.split(":")[1] for r in reports) == ["few", "many"]
    for result in results:
        docs = shown(result)
        [report] = [r for r in reports if frame_ids(r) == {doc.id for doc in docs}]
        assert frame_ids(report, rendered=True) == {doc.id for doc in docs}
        assert frame_ids(report, cited=True) == {doc.id for doc in docs[:2]}
        assert report.attribution.is_reconcilable()


def test_pipelines_run_on_threads_at_once_never_mix(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    pipes = [
        rag_pipeline(standin, documents(*TEXTS[: n + 1]), name=f"p{n}", behaviour="slow-300")
        for n in range(3)
    ]
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(run, pipes))
    assert len(reports) == 3
    for n, result in enumerate(results):
        [report] = [r for r in reports if r.request_id.startswith(f"haystack:p{n}:")]
        assert frame_ids(report) == {doc.id for doc in shown(result)}
        assert len(frame_ids(report)) == n + 1


def test_runs_inside_one_request_join_it(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    pipe = rag_pipeline(standin, documents(*TEXTS))
    with spanledger.request("turn-2"):
        run(pipe)
        run(pipe, question=f"Which ticks carry disease {SENTINEL}?")
    [report] = reports
    assert report.request_id == "turn-2"
    assert report.model_calls == 2
    assert len(frame_ids(report)) == 3


# The application's own tracer


def test_the_apps_tracer_is_handed_exactly_what_it_was_handed_before(
    standin: StandIn, reports: list[RequestReport]
) -> None:
    pipe = rag_pipeline(standin, documents(*TEXTS), ranker=cohere_ranker(standin))
    for content in (False, True):
        haystack_tracer.is_content_tracing_enabled = content
        bare = AppTracer()
        enable_tracing(bare)
        run(pipe, ranker=True)
        spanledger.instrument()
        try:
            assert isinstance(haystack_tracer.actual_tracer, LedgerTracer)
            assert haystack_tracer.actual_tracer.wrapped is bare  # enabling ours keeps theirs
            watched = AppTracer()
            enable_tracing(watched)  # enabled after ours: put behind it
            assert haystack_tracer.actual_tracer.wrapped is watched
            run(pipe, ranker=True)
        finally:
            spanledger.uninstrument()
        restored: Any = haystack_tracer.actual_tracer
        assert restored is watched  # theirs restored
        assert watched.shape() == bare.shape()
        content_tags = {"haystack.component.input", "haystack.component.output"}
        received = {tag for _, tags, _ in watched.shape() for tag in tags}
        assert (content_tags <= received) is content
    assert len(reports) == 2  # captured whatever the content flag said
    assert reports[0].attribution.cited_token_share() == 1.0


def test_haystacks_logging_tracer_logs_the_same_lines(
    standin: StandIn, caplog: pytest.LogCaptureFixture
) -> None:
    pipe = rag_pipeline(standin, documents(*TEXTS))
    caplog.set_level(logging.DEBUG, logger="haystack.tracing.logging_tracer")
    enable_tracing(LoggingTracer())

    def lines() -> list[str]:
        found = [
            record.getMessage()
            for record in caplog.records
            if record.name == "haystack.tracing.logging_tracer"
        ]
        caplog.clear()
        return found

    run(pipe)
    bare = lines()
    spanledger.instrument()
    try:
        run(pipe)
    finally:
        spanledger.uninstrument()
    assert lines() == bare
    assert bare
    assert not any("haystack.component.input=" in line for line in bare)  # content stays off


class _OtelHaystackTracer(AppTracer):
    """An OpenTelemetry-backed Haystack tracer on the application's own provider, as Haystack
    2.x auto-enabled (and ``opentelemetry-haystack`` gives 3.x)."""

    def __init__(self, provider: TracerProvider) -> None:
        super().__init__()
        self._tracer = provider.get_tracer("haystack")

    def trace(self, operation_name: str, tags: Any = None, parent_span: Any = None) -> Any:
        return self._traced(operation_name, tags)

    def _traced(self, operation_name: str, tags: Any) -> Any:
        from contextlib import contextmanager

        from tests.frameworks.haystack_rig import AppSpan

        @contextmanager
        def opened() -> Iterator[AppSpan]:
            with self._tracer.start_as_current_span(operation_name):
                span = AppSpan(operation_name, dict(tags or {}))
                self.spans.append(span)
                yield span

        return opened()


def otel_shape(exporter: InMemorySpanExporter) -> list[tuple[str, str | None]]:
    spans = exporter.get_finished_spans()
    names = {span.context.span_id: span.name for span in spans}
    return sorted(
        (span.name, names.get(span.parent.span_id) if span.parent else None) for span in spans
    )


def test_an_otel_backed_app_tracer_keeps_its_trace_and_spanledger_adds_no_parent(
    standin: StandIn, reports: list[RequestReport]
) -> None:
    theirs, ours = InMemorySpanExporter(), InMemorySpanExporter()
    app_provider, our_provider = TracerProvider(), TracerProvider()
    app_provider.add_span_processor(SimpleSpanProcessor(theirs))
    our_provider.add_span_processor(SimpleSpanProcessor(ours))
    pipe = rag_pipeline(standin, documents(*TEXTS), ranker=cohere_ranker(standin))
    enable_tracing(_OtelHaystackTracer(app_provider))
    run(pipe, ranker=True)
    bare = otel_shape(theirs)
    theirs.clear()
    spanledger.instrument()
    try:
        exporter = OtelExporter(tracer_provider=our_provider, enable_metrics=False)
        with spanledger.use(Recorder([exporter])):
            run(pipe, ranker=True)
    finally:
        spanledger.uninstrument()
    assert otel_shape(theirs) == bare
    assert ("haystack.pipeline.run", None) in bare  # the app's run stays a root
    [report] = reports
    assert report.attribution.cited_token_share() == 1.0
    dumped = json.dumps([dict(span.attributes or {}) for span in ours.get_finished_spans()])
    assert ours.get_finished_spans()
    assert not any(text in dumped for text in PRIVATE)


def test_a_tracer_enabled_later_that_wraps_ours_stays_in_front(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    class Wrapping(AppTracer):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def trace(self, operation_name: str, tags: Any = None, parent_span: Any = None) -> Any:
            return self.inner.trace(operation_name, tags=tags, parent_span=parent_span)

    ours = haystack_tracer.actual_tracer
    wrapping = Wrapping(ours)
    enable_tracing(wrapping)
    assert haystack_tracer.actual_tracer is wrapping
    run(rag_pipeline(standin, documents(*TEXTS)))
    assert len(reports) == 1
    spanledger.uninstrument()
    assert haystack_tracer.actual_tracer is wrapping
    run(rag_pipeline(standin, documents(*TEXTS)))  # ours only forwards now
    assert len(reports) == 1


def test_the_app_disabling_tracing_keeps_the_capture(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    disable_tracing()
    assert isinstance(haystack_tracer.actual_tracer, LedgerTracer)
    assert isinstance(haystack_tracer.actual_tracer.wrapped, NullTracer)
    run(rag_pipeline(standin, documents(*TEXTS)))
    assert len(reports) == 1


# Privacy, and never breaking the run


def test_no_text_reaches_a_span_an_event_a_log_line_or_the_event_log(
    standin: StandIn, switched: None, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    caplog.set_level(logging.DEBUG)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    log = tmp_path / "events.jsonl"
    otel = OtelExporter(tracer_provider=provider, enable_metrics=False)
    events = JsonlSink(log)
    pipe = rag_pipeline(standin, documents(*TEXTS), ranker=cohere_ranker(standin))
    with spanledger.use(Recorder([otel, events])):
        run(pipe, ranker=True)
    events.flush()
    written = log.read_text()
    assert '"kind": "attribution"' in written or '"kind":"attribution"' in written
    spans = json.dumps(
        [[span.name, dict(span.attributes or {})] for span in exporter.get_finished_spans()]
    )
    for text in PRIVATE:
        assert text not in written
        assert text not in spans
        assert text not in caplog.text


def test_a_failure_while_reading_is_logged_by_type_and_the_run_goes_on(
    standin: StandIn, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipe = rag_pipeline(standin, documents(*TEXTS))
    bare = run(pipe)
    spanledger.instrument()

    def broken(reader: ComponentReader, key: str, value: object) -> None:
        raise ValueError(SENTINEL)

    monkeypatch.setattr(ComponentReader, "heard", broken)
    caplog.set_level(logging.DEBUG, logger="spanledger")
    try:
        result = run(pipe)
    finally:
        spanledger.uninstrument()
    assert result["answers"]["answers"][0].data == bare["answers"]["answers"][0].data
    failures = [r for r in caplog.records if "instrumentation_failed" in r.getMessage()]
    assert failures
    assert "ValueError" in failures[0].getMessage()
    assert SENTINEL not in caplog.text


def test_a_ranker_alone_selects_its_output_from_the_retrievers(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    from haystack import Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    store.write_documents(documents(*TEXTS))
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=3))
    pipe.add_component("ranker", cohere_ranker(standin, top_k=1))
    pipe.connect("retriever.documents", "ranker.documents")
    result = pipe.run(
        {"retriever": {"query": QUESTION}, "ranker": {"query": QUESTION}},
        include_outputs_from={"retriever"},
    )
    [report] = reports
    assert frame_ids(report) == {doc.id for doc in shown(result)}
    assert frame_ids(report, selected=True) == {doc.id for doc in result["ranker"]["documents"]}
    assert len(frame_ids(report, selected=True)) == 1


def test_documents_a_prompt_renders_by_other_means_are_selected(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    from haystack import Pipeline, component
    from haystack.components.builders import PromptBuilder
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from tests.frameworks.haystack_rig import generator

    @component
    class Context:
        """Puts the documents into one labelled text (no prompt builder sees them)."""

        @component.output_types(text=str)
        def run(self, documents: list[Document]) -> dict[str, str]:
            return {
                "text": "\n".join(
                    f"Document {n}:\n{doc.content}" for n, doc in enumerate(documents, 1)
                )
            }

    store = InMemoryDocumentStore()
    store.write_documents(documents(*TEXTS))
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=3))
    pipe.add_component("context", Context())
    pipe.add_component(
        "prompt", PromptBuilder("{{ context }}\nQuestion: {{ query }}", required_variables="*")
    )
    pipe.add_component("llm", generator(standin))
    pipe.connect("retriever.documents", "context.documents")
    pipe.connect("context.text", "prompt.context")
    pipe.connect("prompt.prompt", "llm.messages")
    result = pipe.run(
        {"retriever": {"query": QUESTION}, "prompt": {"query": QUESTION}},
        include_outputs_from={"retriever"},
    )
    [report] = reports
    ids = {doc.id for doc in shown(result)}
    assert frame_ids(report, rendered=True) == ids
    assert frame_ids(report, selected=True) == ids
    assert report.attribution.is_reconcilable(), report.attribution.problems()
