"""Haystack 2.x attributes itself too: the completion generator (``OpenAIGenerator``), the
separate ``AsyncPipeline``, and the tracer 2.x enables by itself when OpenTelemetry is configured
before Haystack is imported, which spanledger's tracer wraps and forwards to. Runs in
``.venv-older`` (haystack-ai 2.x) only."""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from haystack import AsyncPipeline  # type: ignore[attr-defined,unused-ignore]

import spanledger
from spanledger.attribution import Evidence, RequestReport
from spanledger.testing import StandIn
from tests.frameworks.haystack_rig import (
    GENERATOR_TAKES_PROMPT,
    TEMPLATE,
    documents,
    generator,
    inputs,
    no_telemetry,
    rag_pipeline,
    reports,
    shown,
    tokens,
)

__all__ = ["no_telemetry", "reports"]  # fixtures, used by name

SENTINEL = "SENTINEL-haystack2-51b0"
QUESTION = f"What do ticks feed on {SENTINEL}?"
TEXTS = (
    f"Ticks feed on the blood of deer and mice {SENTINEL}.",
    f"Deer ticks carry Lyme disease through the forest {SENTINEL}.",
    f"Clocks tick every second and chime each hour {SENTINEL}.",
)
ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def standin() -> Iterator[StandIn]:
    with StandIn() as server:
        yield server


@pytest.fixture
def switched() -> Iterator[None]:
    spanledger.instrument(sdks=["haystack"])
    try:
        yield
    finally:
        spanledger.uninstrument()


def test_the_release_is_2x_with_its_completion_generator() -> None:
    assert importlib.metadata.version("haystack-ai").startswith("2.")
    assert GENERATOR_TAKES_PROMPT


def ids(report: RequestReport, **flags: bool) -> set[str]:
    return {
        use.frame.frame_id
        for use in report.attribution.uses
        if all(getattr(use, flag) == wanted for flag, wanted in flags.items())
    }


def test_a_pipeline_reports_what_it_served_rendered_and_cited(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    pipe = rag_pipeline(standin, documents(*TEXTS))
    result = pipe.run(inputs(QUESTION), include_outputs_from={"retriever"})
    [report] = reports
    docs = shown(result)
    assert ids(report) == ids(report, rendered=True) == {doc.id for doc in docs}
    assert ids(report, cited=True) == {doc.id for doc in docs[:2]}
    assert {use.evidence for use in report.attribution.uses if use.cited} == {
        Evidence.FRAMEWORK_MARKING
    }
    cited = sum(tokens(doc.content or "") for doc in docs[:2])
    assert report.attribution.cited_token_share() == pytest.approx(
        cited / sum(tokens(doc.content or "") for doc in docs)
    )
    assert report.request_id.startswith("haystack:ticks:")


def async_pipeline(standin: StandIn, texts: tuple[str, ...], name: str) -> Any:
    from haystack.components.builders import AnswerBuilder, PromptBuilder
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    store = InMemoryDocumentStore()
    store.write_documents(documents(*texts))
    pipe = AsyncPipeline(metadata={"name": name})
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=len(texts)))
    pipe.add_component("prompt", PromptBuilder(TEMPLATE, required_variables=["query", "documents"]))
    pipe.add_component("llm", generator(standin, "slow-300"))
    pipe.add_component("answers", AnswerBuilder(reference_pattern=r"\[(\d+)\]"))
    pipe.connect("retriever.documents", "prompt.documents")
    pipe.connect("prompt.prompt", "llm.prompt")
    pipe.connect("llm.replies", "answers.replies")
    pipe.connect("llm.meta", "answers.meta")
    pipe.connect("retriever.documents", "answers.documents")
    return pipe


def test_the_async_pipeline_runs_apart_concurrently(
    standin: StandIn, switched: None, reports: list[RequestReport]
) -> None:
    many = async_pipeline(standin, TEXTS, "many")
    few = async_pipeline(standin, TEXTS[:2], "few")

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
        [report] = [r for r in reports if ids(r) == {doc.id for doc in docs}]
        assert ids(report, cited=True) == {doc.id for doc in docs[:2]}
        assert report.attribution.is_reconcilable()


AUTO_ENABLED = """
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import spanledger
from spanledger.attribution import RequestScope
from spanledger.testing import StandIn

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)  # configured before Haystack is imported
spanledger.instrument(sdks=["haystack"])
made = []
real = RequestScope.report
RequestScope.report = lambda self, **kw: made.append(real(self, **kw)) or made[-1]

from haystack.tracing.tracer import tracer
print(type(tracer.actual_tracer).__name__, type(tracer.actual_tracer.wrapped).__name__)
from tests.frameworks.haystack_rig import documents, inputs, rag_pipeline
with StandIn() as standin:
    pipe = rag_pipeline(standin, documents(*sys.argv[1:]))
    pipe.run(inputs("What do ticks feed on?"))
names = sorted({span.name for span in exporter.get_finished_spans()})
print(names)
print(len(made), made[0].attribution.cited_token_share() if made else None)
spanledger.uninstrument()
print(type(tracer.actual_tracer).__name__)
"""


def test_the_tracer_2x_enables_by_itself_is_wrapped_and_still_traces() -> None:
    done = subprocess.run(
        [sys.executable, "-W", "ignore::FutureWarning", "-c", AUTO_ENABLED, *TEXTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env={**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False", "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "LedgerTracer OpenTelemetryTracer"
    assert "haystack.pipeline.run" in lines[1]
    assert "haystack.component.run" in lines[1]
    assert lines[2].startswith("1 ")
    assert lines[3] == "OpenTelemetryTracer"
    assert SENTINEL not in done.stderr
